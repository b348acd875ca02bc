/* test_tree: the tree a test job runs in.
 *
 * A test run must test what it was asked to, and never the user's checkout as it happens
 * to be. In a git repository the commit is chosen by the payload: `commit` (any revision
 * naming a commit, e.g. a SHA), else `branch` (a local branch of the workspace's
 * repository), else the workspace's HEAD; it is checked out, detached, in a service-owned
 * linked worktree (common/specialist/worktree.h) under the service's directory, where detection, the
 * tests and a fix attempt run. The user's working tree, index and HEAD are never touched,
 * and their uncommitted changes are not what is tested.
 *
 * A workspace that is not in a git repository has no commit to choose: its tests run in
 * place, as the directory is (a `commit` or `branch` for it is an error). A repository git
 * refuses to open (another uid's: git's ownership check, safe.directory) is an error that
 * says so: it is never mistaken for "no repository" and tested in place. */
#ifndef CLOISTER_TEST_TREE_H
#define CLOISTER_TEST_TREE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct test_tree_t test_tree_t;

/* Opens the tree for `workspace` (an absolute, resolved directory): `commit` and `branch`
 * may be NULL or "". `worktrees_dir` is where worktrees are made (created if missing;
 * leftovers of crashed services there are removed first). Returns 0 with *out (caller
 * closes it), or FAILURE_NOT_FOUND ("branch 'B' not found in W", "W has no commits"),
 * FAILURE_INVALID (a branch or commit for a directory that is no repository) or
 * FAILURE_GIT, with the reason. */
int test_tree_open(test_tree_t **out, const char *workspace, const char *branch,
                   const char *commit, const char *worktrees_dir);

/* Where the tests run: the worktree, or the workspace itself outside git. */
const char *test_tree_dir(const test_tree_t *self);

/* The full SHA of the commit under test, or "" outside git. */
const char *test_tree_commit(const test_tree_t *self);

/* What chose the commit, for NOTES: "branch feature", "commit 1a2b3c4d5e6f", "no branch
 * given: the workspace's HEAD 1a2b3c4d5e6f", or "not a git repository: the directory as
 * it is". */
const char *test_tree_source(const test_tree_t *self);

/* True when the tests run in a worktree (not in the user's directory). */
bool test_tree_isolated(const test_tree_t *self);

/* The changes made in the worktree since the commit under test (a fix's patch), as a
 * unified diff of at most `cap` bytes (caller frees; "" when there are none). NULL outside
 * git or when the diff cannot be made. */
char *test_tree_changes(test_tree_t *self, size_t cap);

/* Removes the worktree (if any) and frees the tree. Safe with *self_p NULL. */
void test_tree_close(test_tree_t **self_p);

#endif
