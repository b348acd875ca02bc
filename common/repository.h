/* repository: facts about a git repository that several services must agree on. */
#ifndef CLOISTER_REPOSITORY_H
#define CLOISTER_REPOSITORY_H

#include <stddef.h>

/* Writes into `out` the root of the repository that contains `path`: the main working
 * tree's directory (the same for every linked worktree and subdirectory of it), or the
 * repository directory itself when it is bare; resolved with realpath(). This is the
 * repository part of a merge's serialisation group, "merge:<root>:<target>", so every
 * submitter must compute it here.
 * Returns 0, or FAILURE_NOT_FOUND (with `out` set to `path` unchanged) when `path` is not
 * inside a git repository. */
int repository_root(const char *path, char *out, size_t size);

/* Writes "merge:<repository root of path>:<target>" into `out` (the group every merge of
 * that repository into `target` must carry). Returns as repository_root(). */
int repository_merge_group(const char *path, const char *target, char *out, size_t size);

#endif
