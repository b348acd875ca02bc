/* merge_conflicts: the merge engine's conflict detection -- the in-memory three-way merge
 * of two commits and the paths it leaves in conflict, named as git names them
 * (`git merge-tree --write-tree --name-only`). The engine's analysis step (merge_engine.c)
 * and tests/bench/bench_conflicts.c both call merge_conflicts_find().
 *
 * The merge is libgit2's git_merge_commits() with rename detection, under git's rename
 * limit: merge.renameLimit, else diff.renameLimit, else MERGE_CONFLICTS_RENAME_LIMIT (git's
 * default; libgit2's own is 1000, and above it a merge that moved many files sees each
 * rename as a deletion and an addition, so modify/delete conflicts git does not have),
 * and git's rename similarity and relevance rule (merge_similarity.h).
 *
 * A rename conflict is listed once, under git's path. libgit2 records it as index
 * entries at the old path and at the new one(s), and a NAME entry tying them together;
 * git names it by where the file went:
 *   rename/modify, rename/delete, rename/add, both renamed alike, 2 -> 1: the new path;
 *   rename/rename 1 -> 2 (the sides renamed it to two different paths): the old path and
 *   both new ones, as git does.
 * An entry at the old path that the rename does not explain (a side added a new file
 * there) is a conflict of its own and stays listed.
 *
 * Unchanged subtrees are skipped, as git's merge does: a directory whose tree is the same
 * in the ancestor and on both sides can hold no conflict and no end of a rename, so it is
 * not read. The three trees handed to libgit2 hold such a directory as one entry (mode
 * 160000, the directory's tree id), written to the handle's scratch store and dropped
 * after the merge; the merged index keeps that placeholder, and
 * merge_conflicts_write_tree() writes it back as the directory. With several merge bases
 * (criss-cross) libgit2's recursive merge runs on the whole trees instead. */
#ifndef CLOISTER_MERGE_CONFLICTS_H
#define CLOISTER_MERGE_CONFLICTS_H

#include "merge_repos.h"
#include "merge_similarity.h"

#include <git2.h>
#include <stdbool.h>
#include <stddef.h>

#define MERGE_CONFLICTS_RENAME_LIMIT 7000

/* One conflicting path and the blobs the two sides hold for it (for a renamed file, at
 * the side's own path), used to tell markers a resolver left from lines the file had. */
typedef struct {
    char *path;
    bool has_ours, has_theirs;
    git_oid ours, theirs;
} merge_conflict_t;

/* The outcome of one merge; release with merge_conflicts_clear(). Not to be copied:
 * options points into it. */
typedef struct {
    git_index *index;            /* the merged index, conflict entries included, skipped
                                    directories as placeholders (owned) */
    git_merge_options options;   /* what the merge ran with, for a merge into a worktree
                                    that must find the same conflicts: git's rename limit,
                                    git's similarity (merge_similarity.h) */
    merge_similarity_t similarity;
    git_tree *trees[3];          /* ancestor (NULL unless one merge base), ours, theirs:
                                    the similarity's (owned) */
    merge_conflict_t *conflicts; /* sorted by path; none when the merge is clean */
    size_t count;
    char **skipped; /* the placeholders' paths, sorted (owned) */
    size_t skipped_count;
} merge_conflicts_t;

/* Merges commit `theirs` into commit `ours` in memory (their merge base as the ancestor)
 * in `repo` (borrowed, lent by merge_repos) and lists the conflicts into *out (which the
 * caller owns and must release with merge_conflicts_clear(), whatever the return value).
 * Only the blobs of files merged line by line are written to the repository, as libgit2
 * does. Returns 0, or FAILURE_GIT / FAILURE_MEMORY with failure_message() saying why
 * (libgit2's message included). */
int merge_conflicts_find(merge_conflicts_t *out, const merge_repo_t *repo, const git_oid *ours,
                         const git_oid *theirs);

/* Writes out->index (once it has no conflict left) as a tree of `repo`, the skipped
 * directories back in place, into *tree. Returns 0 or FAILURE_GIT / FAILURE_MEMORY. */
int merge_conflicts_write_tree(git_oid *tree, const merge_conflicts_t *merge, git_repository *repo);

/* The rename limit merges in `repo` use (see the top). */
unsigned int merge_conflicts_rename_limit(git_repository *repo);

/* Frees what `conflicts` owns and zeroes it. */
void merge_conflicts_clear(merge_conflicts_t *conflicts);

#endif
