/* test_merge_credentials: the merge engine pushes to an https-style remote that wants a
 * password (git's own `git http-backend` behind basic authentication,
 * tests/support/git_http_server.py, on loopback): without a token the merge fails saying
 * which variable to set; with a wrong token it fails once (no retry loop) saying the token
 * was refused, without printing it; with CLOISTER_GIT_TOKEN (and with GH_TOKEN) the merge
 * is pushed. libgit2 runs no git credential helper, so this is how the merge-agent in a
 * container authenticates (issue 37, section 6). */
#include "check.h"
#include "merge_engine.h"
#include "testenv.h"
#include "testgit.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S_USER "x-access-token"
#define S_TOKEN "s3cret-token-for-the-test"

static merge_tests_t s_run_tests(const char *worktree_path, char **summary_out, void *arg)
{
    (void)worktree_path;
    (void)arg;
    *summary_out = strdup("no tests");
    return MERGE_TESTS_PASS;
}

static int s_resolve(const char *worktree, const char *const *conflicts, size_t n,
                     char **notes_out, void *arg)
{
    (void)worktree;
    (void)conflicts;
    (void)n;
    (void)arg;
    *notes_out = NULL;
    return -1; /* no conflicts in this test */
}

static bool s_port_written(void *arg)
{
    return access(arg, R_OK) == 0;
}

/* One merge of `branch` of the user's clone; returns merge_engine_run()'s code, the result
 * in *res. */
static int s_merge(const testgit_fixture_t *repos, const char *wtdir, const char *branch,
                   merge_result_t *res)
{
    merge_request_t req;
    merge_request_init(&req);
    req.repo_path = repos->user;
    req.source_branch = branch;
    req.worktree_dir = wtdir;
    req.resolve = s_resolve;
    req.run_tests = s_run_tests;
    req.deadline_ms = clock_now_ms() + 60000;
    return merge_engine_run(&req, res);
}

int main(void)
{
    testenv_t *env = testenv_new("merge-credentials");
    if (env == NULL)
        return 1;
    char home[600], wtdir[600], port_file[600], script[600];
    snprintf(home, sizeof home, "%s/gh", env->dir);
    testgit_env(home);
    snprintf(wtdir, sizeof wtdir, "%s/specialists/merge-agent/worktrees", env->home);
    testgit_fixture_t repos;
    testgit_fixture(&repos, env->dir);
    testgit_push_branch(repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_branch(repos.user, "second", "second.txt", "the second branch\n");

    /* The remote behind a password, on a port the kernel picks. */
    snprintf(port_file, sizeof port_file, "%s/git-http.port", env->dir);
    snprintf(script, sizeof script, "%s/tests/support/git_http_server.py", CLOISTER_SOURCE_DIR);
    char *server[] = {"/usr/bin/python3", script, env->dir, "0", S_USER, S_TOKEN,
                      "--port-file", port_file, NULL};
    CHECK(testenv_spawn(env, "git-http", server) > 0);
    CHECK(testenv_wait_until(s_port_written, port_file, 10000));
    char *port = testenv_read_file(port_file);
    CHECK(port != NULL);
    char url[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/remote.git", port ? atoi(port) : 0);
    free(port);
    CHECK_INT(testgit_run(repos.user, "remote", "set-url", "origin", url, NULL), 0);
    unsetenv("CLOISTER_GIT_TOKEN");
    unsetenv("GH_TOKEN");
    unsetenv("CLOISTER_GIT_USER");

    /* No token: the reason names the variable. */
    merge_result_t res;
    CHECK(s_merge(&repos, wtdir, "feature", &res) != 0);
    CHECK(!res.pushed);
    CHECK(res.reason != NULL && strstr(res.reason, "set CLOISTER_GIT_TOKEN") != NULL);
    merge_result_clear(&res);

    /* A wrong token: refused once, and the token is not in the message. */
    setenv("CLOISTER_GIT_TOKEN", "wrong-token", 1);
    CHECK(s_merge(&repos, wtdir, "feature", &res) != 0);
    CHECK(!res.pushed);
    CHECK(res.reason != NULL && strstr(res.reason, "refused the token in CLOISTER_GIT_TOKEN") != NULL);
    CHECK(res.reason != NULL && strstr(res.reason, "wrong-token") == NULL);
    merge_result_clear(&res);

    /* The right token: fetched and pushed. */
    setenv("CLOISTER_GIT_TOKEN", S_TOKEN, 1);
    CHECK_INT(s_merge(&repos, wtdir, "feature", &res), 0);
    CHECK(res.success && res.pushed);
    char remote_main[41], feature[41];
    testgit_rev(repos.remote, "main", remote_main);
    testgit_rev(repos.user, "feature", feature);
    CHECK_STR(remote_main, feature);
    merge_result_clear(&res);

    /* GH_TOKEN (what `gh` uses) works the same. */
    unsetenv("CLOISTER_GIT_TOKEN");
    setenv("GH_TOKEN", S_TOKEN, 1);
    CHECK_INT(s_merge(&repos, wtdir, "second", &res), 0);
    CHECK(res.success && res.pushed);
    merge_result_clear(&res);

    testenv_destroy(&env);
    return check_exit_code("test_merge_credentials");
}
