/* merge_checkout: the user's own checkout of a branch -- the working tree (the main one or a
 * linked worktree) whose HEAD is that branch -- found, judged clean or dirty, and
 * fast-forwarded together with the branch.
 *
 * The merge engine works in a worktree of its own; this module is the one place it touches
 * a tree the user works in, and only to do what `git merge --ff-only` would do there on a
 * clean tree: write the files that changed between two commits, update the index, and move
 * the branch. Its rules:
 *   - clean means no change to a tracked file, staged or not (untracked files do not count,
 *     but one that the new commit would overwrite stops the update, as it stops git);
 *   - the files are written first (libgit2's safe checkout: nothing is written unless every
 *     file can be), then the branch is moved with a compare-and-swap from the commit the
 *     files were written from; when the branch moved meanwhile, the files are put back and
 *     the caller hears it (1), so the checkout never disagrees with its branch. */
#ifndef CLOISTER_MERGE_CHECKOUT_H
#define CLOISTER_MERGE_CHECKOUT_H

#include <git2.h>
#include <stddef.h>

typedef struct merge_checkout_t merge_checkout_t;

/* Looks for the working tree of `repo` (borrowed; the common repository) that has
 * refs/heads/<branch> checked out. Returns 0 with *out the checkout (caller owns; free with
 * merge_checkout_destroy()) or *out NULL when no working tree has the branch checked out;
 * or FAILURE_GIT / FAILURE_MEMORY with the reason. */
int merge_checkout_find(merge_checkout_t **out, git_repository *repo, const char *branch);

/* The checkout's directory (owned by the checkout; no trailing slash). */
const char *merge_checkout_path(const merge_checkout_t *self);

/* 1 when a tracked file of the checkout is changed (staged or not), with the first such
 * path (and how many there are) written into `first`; 0 when it is clean; or FAILURE_GIT
 * with the reason. */
int merge_checkout_dirty(merge_checkout_t *self, char *first, size_t size);

/* Moves the branch from `from` to `to` (a descendant of `from`) and the checkout with it:
 * writes the files that differ into the working tree and the index, then compare-and-swaps
 * the branch from `from` (reflog `message`). Returns 0 when both moved; 1 when the branch
 * was no longer at `from` (the files were put back, nothing changed); FAILURE_STATE when a
 * file in the way (an untracked one, a change made meanwhile) stopped the checkout, or
 * FAILURE_GIT, with the reason and nothing changed. */
int merge_checkout_advance(merge_checkout_t *self, const git_oid *from, const git_oid *to,
                           const char *message);

/* Frees the checkout and nulls *self_p. Safe with NULL. */
void merge_checkout_destroy(merge_checkout_t **self_p);

#endif
