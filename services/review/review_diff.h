/* review_diff: what a branch changes, for the review prompt, read with libgit2.
 *
 * The change is the diff from the merge base of BRANCH and TARGET to BRANCH (what a pull
 * request shows), or from the commit an earlier review read (an incremental review): the files changed, each with its status letter (A added, M modified,
 * D deleted, R renamed, ...), and the unified patch cut to a budget. Only committed work
 * counts; the working tree is never read or touched. BRANCH "" means HEAD. A name resolves
 * as a branch only (repository_branch_resolve(): the local branch, else a remote's), never
 * as a tag or another revision. */
#ifndef CLOISTER_REVIEW_DIFF_H
#define CLOISTER_REVIEW_DIFF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char **files; /* "M src/a.c" */
    char **paths; /* "src/a.c" (the new path) */
    size_t nfiles;
    /* The lines each file gains, by paths[] index: added[i] holds nadded[i] line numbers of
     * the new side, ascending (none for a deleted or a binary file). */
    unsigned **added;
    size_t *nadded;
    char *patch; /* the unified patch, at most `budget` bytes */
    bool patch_truncated;
    size_t patch_full_len;
    char base[41];       /* where the diff starts, hex: the merge base, or `since` */
    char head[41];       /* the branch's commit, hex */
    char merge_base[41]; /* the merge base with the target, hex */
    bool incremental;    /* base is `since` (what an earlier review read), not the merge base */
    char scope_note[200]; /* why the diff covers what it covers (shown in the prompt) */
} review_diff_t;

/* Computes the diff for the repository at `repo_path` (borrowed strings). With `since` (a
 * commit an earlier review of the branch read; NULL for none) the diff starts there when
 * it is an ancestor of the branch and not the branch itself -- only what changed since --
 * and from the merge base otherwise (a force-push left it out of the branch, or nothing is
 * new), which scope_note says. Returns 0 with *out a new diff the caller frees with
 * review_diff_destroy(), or FAILURE_NOT_FOUND (no repository, an unknown branch or target,
 * or no merge base), FAILURE_GIT or FAILURE_MEMORY with the reason in failure_message(). */
int review_diff_compute(review_diff_t **out, const char *repo_path, const char *branch,
                        const char *target, const char *since, size_t budget);

/* Frees and nulls *self_p; safe with NULL. */
void review_diff_destroy(review_diff_t **self_p);

/* The prompt text: "Files changed (N):\n- M src/a.c\n..." then the patch fenced as data
 * ("(patch cut at N of M characters)" when cut). Returns a new string the caller frees, or
 * NULL if memory runs out. */
char *review_diff_render(const review_diff_t *diff);

#endif
