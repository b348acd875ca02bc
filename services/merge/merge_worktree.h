/* merge_worktree: the linked worktrees the merge engine owns, under the service's own
 * directory, never the user's checkout.
 *
 * Each worktree is named "cloister-merge-<pid>-<start>-<n>" (the pid and start time of the
 * process that made it), has a detached HEAD and no branch of its own (the branch
 * git_worktree_add needs is deleted right after the checkout). Temporary refs the engine
 * makes carry the same kind of name ("refs/cloister-merge/cloister-merge-<pid>-<start>-<n>"),
 * so leftovers of a crashed process can be recognised: no process with that pid and start
 * time runs any more -- even when the pid itself came back, as pid 1 does in a restarted
 * container. */
#ifndef CLOISTER_MERGE_WORKTREE_H
#define CLOISTER_MERGE_WORKTREE_H

#include <git2.h>

#define MERGE_WORKTREE_PREFIX "cloister-merge-"
#define MERGE_WORKTREE_REF_DIR "refs/cloister-merge/"

typedef struct merge_worktree_t merge_worktree_t;

typedef void (*merge_worktree_note_fn)(const char *text, void *arg);

/* Adds a worktree of `repo` (borrowed, must outlive the worktree) in `dir` (created if
 * missing), checked out at `commit` with a detached HEAD. The caller owns *out and frees
 * it with merge_worktree_destroy(). Returns 0 or FAILURE_GIT / FAILURE_IO. */
int merge_worktree_add(merge_worktree_t **out, git_repository *repo, const char *dir,
                       const git_oid *commit);

/* Absolute path of the worktree's directory (owned by the worktree). */
const char *merge_worktree_path(const merge_worktree_t *self);

/* The worktree opened as a repository (owned by the worktree). */
git_repository *merge_worktree_repo(merge_worktree_t *self);

/* Forgets any merge in progress in the worktree and checks out `commit` there, detached,
 * discarding every change and untracked file. Returns 0 or FAILURE_GIT. */
int merge_worktree_checkout(merge_worktree_t *self, const git_oid *commit);

/* Remembers every local branch of the repository and where it points, before an agent
 * works in the worktree. Returns 0, FAILURE_GIT or FAILURE_MEMORY. */
int merge_worktree_watch_branches(merge_worktree_t *self);

/* Undoes what an agent did to the repository's branches from the worktree, since
 * merge_worktree_watch_branches(): a worktree left on a branch is detached again at the
 * same commit and that branch put back (moved back, or deleted if it is new); a branch
 * pointing at a commit the resolver made (the worktree's new HEAD) is put back too (an
 * existing one moved back, a new one deleted). Branches changed from elsewhere (the user's
 * own checkout) are left alone. Each undo is reported through `note` (may be NULL).
 * Returns 0 or FAILURE_GIT. */
int merge_worktree_undo_branches(merge_worktree_t *self, merge_worktree_note_fn note, void *arg);

/* Unregisters the worktree from its repository, removes its directory, frees it and nulls
 * *self_p. Safe with *self_p NULL. */
void merge_worktree_destroy(merge_worktree_t **self_p);

/* A fresh unique name "cloister-merge-<pid>-<start>-<n>" for a temporary object, written
 * to buf. */
void merge_worktree_unique_name(char *buf, size_t size);

/* Removes what a crashed process left in `repo` and `dir`: worktrees, directories,
 * temporary branches and refs whose name says they belong to a process that is gone.
 * Each removal is reported through `note` (may be NULL). Returns 0 or FAILURE_GIT. */
int merge_worktree_clean_stale(git_repository *repo, const char *dir,
                               merge_worktree_note_fn note, void *arg);

#endif
