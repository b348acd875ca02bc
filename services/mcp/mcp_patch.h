/* mcp_patch: the apply_patch tool -- a unified diff applied to a repository's work tree
 * with libgit2 (git_apply), never a shell.
 *
 * Every file of the diff is checked on its own first (GIT_APPLY_CHECK), so the report says
 * which files apply and which do not and why; the work tree is written only when every
 * file applies (all or nothing: a half-applied patch is worse than none). A path that is
 * absolute, climbs out with `..`, or reaches into `.git` refuses the whole patch.
 *
 * Both kinds of unified diff are taken: git's (`diff --git` headers) and a plain `diff -u`
 * or `diff -ruN` (only `--- old` / `+++ new` headers, maybe with time stamps). Its file
 * names lose as many leading directories as patch's -p would need: the number that makes
 * the first changed file's name one in the work tree (0 for `diff -u a.c.orig a.c`, 1 for
 * `diff -ruN old new`), else a git-style "a/" or "b/"; /dev/null on a side creates or
 * deletes. */
#ifndef CLOISTER_MCP_PATCH_H
#define CLOISTER_MCP_PATCH_H

#include <jansson.h>
#include <stdbool.h>

/* Applies `diff` (`len` bytes) to the work tree of the repository whose root is
 * `workspace` (only checks, with `check_only`). Appends one {path, ok, error?} per file to
 * `files`. Returns 0 when every file applies (and, unless check_only, was written);
 * FAILURE_INVALID (not a diff, no file in it, a refused path), FAILURE_NOT_FOUND (no
 * repository there) or FAILURE_STATE (a file does not apply: nothing written), with the
 * reason in failure_message(). */
int mcp_patch_apply(const char *workspace, const char *diff, size_t len, bool check_only,
                    json_t *files);

#endif
