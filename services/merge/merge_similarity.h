/* merge_similarity: the rename similarity the merge engine hands libgit2, so that a merge
 * pairs renamed files as git's merge (merge-ort) does.
 *
 * libgit2's own metric (hashsig) scores small files higher than git: on libgit2's history
 * it paired a deleted 20-line header with an unrelated new one (git: 35 %, libgit2: over
 * 50 %), a rename/delete conflict git does not have. This metric is git's: each file is
 * cut into spans ending at a newline or 64 bytes long (a CR before LF dropped in text),
 * each span hashed; the score is the bytes of spans both files share (per hash, the
 * smaller count) over the larger file's size, and a pair whose sizes differ by more than
 * the threshold allows scores 0 unread. As git pairs files of the same name first when
 * they are alike enough (halfway from the threshold to identical), such a pair scores 100
 * and no other file takes either end from it (git's uniqueness conditions on the name
 * are not checked: the metric sees one pair at a time).
 *
 * It also applies git's relevance rule: a file deleted on one side counts as renamed only
 * when the other side changed it too (modified or deleted). When the other side left it
 * alone, the merge's result is the same with or without the rename, except when the new
 * path meets a file the other side added there: git sees two adds and merges them, with
 * the rename it would be a rename/add conflict git does not report. Exact renames (same
 * blob) are found by libgit2 before any metric runs and are not filtered. */
#ifndef CLOISTER_MERGE_SIMILARITY_H
#define CLOISTER_MERGE_SIMILARITY_H

#include <git2.h>

/* A metric for git_merge_options.metric. The trees are borrowed and must outlive every
 * merge that uses it. */
typedef struct {
    git_diff_similarity_metric metric;
    const git_tree *ancestor, *ours, *theirs; /* NULL: no relevance rule */
    unsigned int threshold;                   /* percent, as git_merge_options' */
} merge_similarity_t;

/* Fills `sim` for a merge of `ours` and `theirs` on `ancestor` (all borrowed; NULL for all
 * three when the merge has no single base, then only the score is git's) with the
 * rename threshold `threshold` (percent); points opts->metric at it. */
void merge_similarity_init(merge_similarity_t *sim, git_merge_options *opts,
                           const git_tree *ancestor, const git_tree *ours, const git_tree *theirs);

#endif
