/* review_tree: the review's own worktree of the commit under review.
 *
 * What a review runs -- the [review] checks, and the agent's tools (its `--add-dir`) --
 * must see the commit it judges, never the user's checkout as it happens to be (with
 * `main` checked out, a check "of" a feature branch would otherwise test main). The commit
 * (the diff's head, a full SHA) is checked out, detached, in a linked worktree the service
 * owns (common/specialist/worktree.h), under the review-agent's workdir, as the test-agent
 * and the merge-agent do; the user's working tree, index and HEAD are never touched. The
 * worktree is removed when the review ends; leftovers of a crashed service are removed
 * before the next one is made. */
#ifndef CLOISTER_REVIEW_TREE_H
#define CLOISTER_REVIEW_TREE_H

typedef struct review_tree_t review_tree_t;

/* Checks out `commit` (40 hex digits) of the repository at `workspace` in a new worktree
 * under `worktrees_dir` (created if missing). Returns 0 with *out (the caller closes it
 * with review_tree_close()), or FAILURE_GIT / FAILURE_IO / FAILURE_MEMORY with the reason.
 * Strings are borrowed. */
int review_tree_open(review_tree_t **out, const char *workspace, const char *commit,
                     const char *worktrees_dir);

/* The worktree's absolute path (owned by the tree). */
const char *review_tree_dir(const review_tree_t *self);

/* Removes the worktree, frees the tree and nulls *self_p. Safe with *self_p NULL. */
void review_tree_close(review_tree_t **self_p);

#endif
