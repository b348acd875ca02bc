/* Unit tests for common/repository: one root (and merge group) for a repository, whichever
 * of its directories or linked worktrees the path is in; names resolve as branches only
 * (a tag named like the target branch stands for nothing). */
#include "check.h"
#include "failure.h"
#include "repository.h"
#include "testenv.h"
#include "testgit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tag `main` on a commit off main whose settings say mode "disabled" and [tests] network
 * = true; a branch only on the remote; the same name on two remotes at different commits;
 * names that are no branch's. */
static void s_names(const testgit_fixture_t *repos, const char *dir)
{
    char main_before[41], evil[41], expected[41], commit[64], ref[600];
    testgit_rev(repos->user, "main", main_before);
    CHECK_INT(testgit_run(repos->dev, "checkout", "-q", "-b", "evil-tag", NULL), 0);
    testgit_commit(repos->dev, ".cloister/config.toml",
                   "[review]\nmode = \"disabled\"\n\n[tests]\nnetwork = true\n",
                   "the tag's settings");
    testgit_rev(repos->dev, "HEAD", evil);
    CHECK_INT(testgit_run(repos->dev, "tag", "main", NULL), 0);
    CHECK_INT(testgit_run(repos->dev, "push", "-q", "origin", "refs/tags/main", NULL), 0);
    CHECK_INT(testgit_run(repos->user, "fetch", "-q", "--tags", "origin", NULL), 0);
    testgit_rev(repos->user, "refs/tags/main", expected);
    CHECK_STR(expected, evil);

    config_t *config = NULL;
    const char *normal = "[review]\nmode = \"normal\"\n";
    CHECK_INT(config_parse_buffer("cloister.toml", normal, strlen(normal), &config), 0);
    char mode[16], who[300];
    CHECK_INT(repository_review_mode(config, repos->user, "main", mode, sizeof mode), 0);
    CHECK_STR(mode, "normal");
    CHECK(!repository_network_opt_in(config, repos->user, "main", "tests", who, sizeof who));
    CHECK_STR(who, "");
    config_t *own = NULL;
    CHECK_INT(repository_config_at(repos->user, "main", &own), 0);
    CHECK(own == NULL); /* main itself has no settings file */
    config_destroy(&own);
    /* The commit id reads that commit, as the test-agent does for the commit it tests. */
    CHECK_INT(repository_config_at(repos->user, evil, &own), 0);
    CHECK(own != NULL);
    config_destroy(&own);
    CHECK_INT(repository_branch_resolve(repos->user, "main", ref, sizeof ref, commit,
                                        sizeof commit),
              0);
    CHECK_STR(ref, "refs/heads/main");
    CHECK_STR(commit, main_before);

    /* A branch only on the remote (origin/evil8, no local evil8) resolves, as it does for
     * every service; origin's a/evil8 is not a remote "origin/a"'s evil8. */
    CHECK_INT(testgit_run(repos->dev, "push", "-q", "origin", "HEAD:refs/heads/evil8",
                          "HEAD~1:refs/heads/a/evil9", NULL),
              0);
    CHECK_INT(testgit_run(repos->user, "fetch", "-q", "origin", NULL), 0);
    CHECK_INT(repository_branch_commit(repos->user, "evil8", commit, sizeof commit), 1);
    CHECK_STR(commit, evil);
    CHECK_INT(repository_branch_resolve(repos->user, "evil8", ref, sizeof ref, NULL, 0), 0);
    CHECK_STR(ref, "refs/remotes/origin/evil8");
    CHECK_INT(repository_branch_exists(repos->user, "evil9"), 0);
    CHECK_INT(repository_branch_exists(repos->user, "a/evil9"), 1);

    /* Two remotes with evil8 at different commits, no local branch: ambiguous. */
    char other[700];
    snprintf(other, sizeof other, "%s/other.git", dir);
    CHECK_INT(testgit_run(dir, "clone", "-q", "--bare", repos->remote, other, NULL), 0);
    CHECK_INT(testgit_run(other, "update-ref", "refs/heads/evil8", main_before, NULL), 0);
    CHECK_INT(testgit_run(repos->user, "remote", "add", "other", other, NULL), 0);
    CHECK_INT(testgit_run(repos->user, "fetch", "-q", "other", NULL), 0);
    CHECK_INT(repository_branch_resolve(repos->user, "evil8", NULL, 0, NULL, 0), FAILURE_INVALID);
    CHECK(strstr(failure_message(), "'evil8' is ambiguous") != NULL);
    /* ... unless there is a local branch of that name. */
    CHECK_INT(testgit_run(repos->user, "branch", "-q", "evil8", main_before, NULL), 0);
    CHECK_INT(repository_branch_commit(repos->user, "evil8", commit, sizeof commit), 1);
    CHECK_STR(commit, main_before);

    /* Names that are not a branch's. */
    const char *const not_branches[] = {"refs/tags/main", "-main", "main~1", "main^{tree}",
                                        "a..b", "", "HEAD", NULL};
    for (size_t i = 0; not_branches[i] != NULL; i++) {
        int rc = repository_branch_resolve(repos->user, not_branches[i], NULL, 0, NULL, 0);
        if (rc != FAILURE_INVALID)
            fprintf(stderr, "'%s' resolved as a branch (%d)\n", not_branches[i], rc);
        CHECK_INT(rc, FAILURE_INVALID);
    }
    config_destroy(&config);
}

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

    s_names(&repos, env->dir);
    testenv_destroy(&env);
    return check_exit_code("test_repository");
}
