/* merge_repos: the repositories the merge engine has open, kept from one task to the next
 * of the same workspace, so a merge does not pay for opening the repository again (its
 * config, refs database, pack indexes) nor lose libgit2's object cache.
 *
 * A kept handle is checked before it is lent again. When the task ends, merge_repos_put()
 * takes a fingerprint of the repository: the identity of its git directory; the stamps
 * (inode, size, mtime to the nanosecond) of packed-refs, config, every directory under
 * refs/, the objects directory, objects/pack and objects/info/alternates. The next
 * merge_repos_get() of that workspace compares it with the repository as it is: if anyone
 * moved a ref, wrote a pack or repacked, changed the config or replaced the repository in
 * between, the handle is dropped and the repository opened afresh. (A ref is updated by
 * renaming a lock file into its directory, so the directory's mtime moves; libgit2 reads a
 * loose object from disk at every lookup, so one written into an existing fan-out directory
 * is seen without reopening.) What the task itself changes is in the fingerprint taken
 * after it, and does not cost the next task a reopen. A change made within the file
 * system's timestamp granularity (a few milliseconds) after the fingerprint may not show in
 * it; libgit2 reads refs from disk at each lookup and looks for new packs when an object is
 * missing, so such a change is still seen, only through the kept handle.
 *
 * Thread-safe: a handle is lent to one task at a time; a second task of the same
 * workspace while it is out gets a handle of its own, closed when it is put back. */
#ifndef CLOISTER_MERGE_REPOS_H
#define CLOISTER_MERGE_REPOS_H

#include <git2.h>
#include <stddef.h>

/* How many workspaces keep a handle; the one used least recently is closed beyond. */
#define MERGE_REPOS_MAX 16

typedef struct merge_repos_t merge_repos_t;

/* One open repository, lent by merge_repos_get(). Everything is owned by the set. */
typedef struct {
    git_repository *repo;     /* the repository (the common one when the path is a worktree) */
    const char *gitdir;       /* git directory of the path given (a worktree's own) */
    const char *workdir;      /* its working tree, or NULL when bare */
    git_odb_backend *scratch; /* an in-memory object store added to the repository's, last
                                 in line so libgit2 never writes there: objects the
                                 conflict detection makes and drops (merge_conflicts.h) */
} merge_repo_t;

/* An empty set (calls git_libgit2_init(); destroy shuts it down). Returns 0 and *out
 * (caller owns; merge_repos_destroy()), or FAILURE_MEMORY. */
int merge_repos_new(merge_repos_t **out);

/* Closes every kept handle and frees the set; nulls *self_p. Safe with NULL. No handle may
 * be out. */
void merge_repos_destroy(merge_repos_t **self_p);

/* Lends the repository that `path` (a clone, a linked worktree or a directory inside one)
 * belongs to: the kept handle when the repository did not change since it was put back,
 * else a freshly opened one. *out stays valid until merge_repos_put(). Returns 0, or
 * FAILURE_STATE (git refuses a repository owned by another user: the message says how to
 * fix it) or FAILURE_GIT (not a repository, ...) with failure_message() saying why. */
int merge_repos_get(merge_repos_t *self, const char *path, merge_repo_t **out);

/* Gives back what merge_repos_get() lent, fingerprinting the repository as the task left
 * it, and nulls *repo_p. Safe with NULL. */
void merge_repos_put(merge_repos_t *self, merge_repo_t **repo_p);

/* How many times a repository was opened since the set was made (kept handles reused do
 * not count): for tests and figures. */
size_t merge_repos_opened(const merge_repos_t *self);

#endif
