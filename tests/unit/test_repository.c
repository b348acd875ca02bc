/* Unit tests for common/repository: one root (and merge group) for a repository, whichever
 * of its directories or linked worktrees the path is in. */
#include "check.h"
#include "failure.h"
#include "repository.h"
#include "testenv.h"
#include "testgit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    testenv_t *env = testenv_new("repository");
    if (env == NULL)
        return 1;
    char home[600], sub[700], worktree[700], real_user[PATH_MAX], root[PATH_MAX];
    snprintf(home, sizeof home, "%s/git-home", env->dir);
    testgit_env(home);
    testgit_fixture_t repos;
    testgit_fixture(&repos, env->dir);
    CHECK(realpath(repos.user, real_user) != NULL);

    CHECK_INT(repository_root(repos.user, root, sizeof root), 0);
    CHECK_STR(root, real_user);
    snprintf(sub, sizeof sub, "%s/sub/dir", repos.user);
    char file[800];
    snprintf(file, sizeof file, "%s/file", sub);
    CHECK(testenv_write_file(file, "x\n") == 0);
    CHECK_INT(repository_root(sub, root, sizeof root), 0);
    CHECK_STR(root, real_user);
    snprintf(worktree, sizeof worktree, "%s/linked", env->dir);
    CHECK_INT(testgit_run(repos.user, "worktree", "add", "-q", "-b", "wt", worktree, NULL), 0);
    CHECK_INT(repository_root(worktree, root, sizeof root), 0);
    CHECK_STR(root, real_user);

    char group[PATH_MAX + 64], expected[PATH_MAX + 64];
    CHECK_INT(repository_merge_group(worktree, "main", group, sizeof group), 0);
    snprintf(expected, sizeof expected, "merge:%s:main", real_user);
    CHECK_STR(group, expected);

    /* A bare repository is its own root. */
    char real_remote[PATH_MAX];
    CHECK(realpath(repos.remote, real_remote) != NULL);
    CHECK_INT(repository_root(repos.remote, root, sizeof root), 0);
    CHECK_STR(root, real_remote);

    /* Not a repository: the path itself, and a clear error. */
    char outside[600];
    snprintf(outside, sizeof outside, "%s/git-home", env->dir);
    CHECK_INT(repository_root(outside, root, sizeof root), FAILURE_NOT_FOUND);
    CHECK_STR(root, outside);
    testenv_destroy(&env);
    return check_exit_code("test_repository");
}
