/* worktree: linked worktrees a service owns, under the service's own directory, never the
 * user's checkout: the merge engine merges and resolves in one, the test-agent runs the
 * tests of the commit it was asked for in one.
 *
 * Each worktree is named "cloister-wt-<pid>-<start>-<n>" (the pid and start time of the
 * process that made it), has a detached HEAD and no branch of its own (the branch
 * git_worktree_add needs is deleted right after the checkout). Temporary refs a service
 * makes carry the same kind of name ("refs/cloister-wt/cloister-wt-<pid>-<start>-<n>"),
 * so leftovers of a crashed process can be recognised: no process with that pid and start
 * time runs any more -- even when the pid itself came back, as pid 1 does in a restarted
 * container. */
#ifndef CLOISTER_WORKTREE_H
#define CLOISTER_WORKTREE_H

#include <git2.h>

#define WORKTREE_PREFIX "cloister-wt-"
#define WORKTREE_REF_DIR "refs/cloister-wt/"

typedef struct worktree_t worktree_t;

typedef void (*worktree_note_fn)(const char *text, void *arg);

/* Adds a worktree of `repo` (borrowed, must outlive the worktree) in `dir` (created if
 * missing), checked out at `commit` with a detached HEAD. The caller owns *out and frees
 * it with worktree_destroy(). Returns 0 or FAILURE_GIT / FAILURE_IO. */
int worktree_add(worktree_t **out, git_repository *repo, const char *dir,
                       const git_oid *commit);

/* Absolute path of the worktree's directory (owned by the worktree). */
const char *worktree_path(const worktree_t *self);

/* The worktree opened as a repository (owned by the worktree). */
git_repository *worktree_repo(worktree_t *self);

/* Forgets any merge in progress in the worktree and checks out `commit` there, detached,
 * discarding every change and untracked file. Returns 0 or FAILURE_GIT. */
int worktree_checkout(worktree_t *self, const git_oid *commit);

/* Remembers every local branch of the repository and where it points, before an agent
 * works in the worktree. Returns 0, FAILURE_GIT or FAILURE_MEMORY. */
int worktree_watch_branches(worktree_t *self);

/* Undoes what an agent did to the repository's branches from the worktree, since
 * worktree_watch_branches(): a worktree left on a branch is detached again at the
 * same commit and that branch put back (moved back, or deleted if it is new); a branch
 * pointing at a commit the resolver made (the worktree's new HEAD) is put back too (an
 * existing one moved back, a new one deleted). Branches changed from elsewhere (the user's
 * own checkout) are left alone. Each undo is reported through `note` (may be NULL).
 * Returns 0 or FAILURE_GIT. */
int worktree_undo_branches(worktree_t *self, worktree_note_fn note, void *arg);

/* Unregisters the worktree from its repository, removes its directory, frees it and nulls
 * *self_p. Safe with *self_p NULL. */
void worktree_destroy(worktree_t **self_p);

/* A fresh unique name "cloister-wt-<pid>-<start>-<n>" for a temporary object, written
 * to buf. */
void worktree_unique_name(char *buf, size_t size);

/* Removes what a crashed process left in `repo` and `dir`: worktrees, directories,
 * temporary branches and refs whose name says they belong to a process that is gone.
 * Each removal is reported through `note` (may be NULL). Returns 0 or FAILURE_GIT. */
int worktree_clean_stale(git_repository *repo, const char *dir,
                               worktree_note_fn note, void *arg);

#endif
