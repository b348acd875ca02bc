/* test_merge_repos: the merge engine keeps a workspace's repository open from task to task
 * (merge_repos.h) and opens it afresh when something changed it in between: a moved ref,
 * new objects, a repack, the config, a repository replaced at the same path. Real
 * repositories made with the git CLI; the engine's runs share one merge_repos_t as the
 * merge service's tasks do. */
#include "check.h"
#include "merge_engine.h"
#include "merge_repos.h"
#include "testenv.h"
#include "testgit.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static testenv_t *s_env;
static testgit_fixture_t s_repos;
static char s_wtdir[512];

static void s_fixture(const char *name)
{
    s_env = testenv_new(name);
    char home[600];
    snprintf(home, sizeof home, "%s/gh", s_env->dir);
    testgit_env(home);
    snprintf(s_wtdir, sizeof s_wtdir, "%s/worktrees", s_env->dir);
    testgit_fixture(&s_repos, s_env->dir);
}

/* The commit `ref` names through the lent handle, as hex into buf (41 bytes), "" if none. */
static void s_ref_via(merge_repo_t *lent, const char *ref, char *buf)
{
    git_oid oid;
    buf[0] = '\0';
    if (git_reference_name_to_id(&oid, lent->repo, ref) == 0)
        git_oid_tostr(buf, 41, &oid);
}

/* Lends the user's repository, checks whether it was opened afresh (`reopened`), puts it
 * back. Returns the handle's address, to tell one handle from another. */
static const void *s_cycle(merge_repos_t *repos, bool reopened, const char *why)
{
    size_t before = merge_repos_opened(repos);
    merge_repo_t *lent = NULL;
    CHECK_INT(merge_repos_get(repos, s_repos.user, &lent), 0);
    if (lent == NULL)
        return NULL;
    const void *handle = lent->repo;
    if ((merge_repos_opened(repos) != before) != reopened)
        fprintf(stderr, "%s: expected %s\n", why, reopened ? "a reopen" : "the kept handle");
    CHECK_INT(merge_repos_opened(repos), before + (reopened ? 1 : 0));
    merge_repos_put(repos, &lent);
    CHECK(lent == NULL);
    return handle;
}

/* The set itself: kept while nothing changes, reopened after each kind of change. */
static void test_reuse_and_invalidation(void)
{
    s_fixture("merge-repos");
    merge_repos_t *repos = NULL;
    CHECK_INT(merge_repos_new(&repos), 0);
    s_cycle(repos, true, "first use");
    s_cycle(repos, false, "nothing changed");
    s_cycle(repos, false, "nothing changed, again");

    /* A ref moved (a branch made, then moved) by someone else: reopened, and seen. */
    CHECK_INT(testgit_run(s_repos.user, "branch", "other", "main", NULL), 0);
    s_cycle(repos, true, "branch created");
    testgit_commit(s_repos.user, "d.txt", "new file\n", "new objects on main");
    char head[41], seen[41];
    testgit_rev(s_repos.user, "main", head);
    merge_repo_t *lent = NULL;
    size_t before = merge_repos_opened(repos);
    CHECK_INT(merge_repos_get(repos, s_repos.user, &lent), 0);
    CHECK_INT(merge_repos_opened(repos), before + 1);
    s_ref_via(lent, "refs/heads/main", seen);
    CHECK_STR(seen, head);
    git_oid oid;
    git_commit *commit = NULL;
    CHECK_INT(git_oid_fromstr(&oid, head), 0);
    CHECK_INT(git_commit_lookup(&commit, lent->repo, &oid), 0);
    git_commit_free(commit);
    merge_repos_put(repos, &lent);
    s_cycle(repos, false, "nothing changed after the commit");

    /* A ref deep under refs/ (a remote-tracking branch), packed refs, a repack, config. */
    CHECK_INT(testgit_run(s_repos.user, "update-ref", "refs/remotes/origin/deep/x", "main", NULL),
              0);
    s_cycle(repos, true, "nested ref");
    CHECK_INT(testgit_run(s_repos.user, "pack-refs", "--all", NULL), 0);
    s_cycle(repos, true, "packed refs");
    CHECK_INT(testgit_run(s_repos.user, "repack", "-a", "-d", "-q", NULL), 0);
    s_cycle(repos, true, "repack");
    CHECK_INT(testgit_run(s_repos.user, "config", "merge.renameLimit", "50", NULL), 0);
    s_cycle(repos, true, "config");
    s_cycle(repos, false, "nothing changed after all that");

    /* Two tasks of the workspace at once: the second gets a handle of its own. */
    merge_repo_t *first = NULL, *second = NULL;
    CHECK_INT(merge_repos_get(repos, s_repos.user, &first), 0);
    before = merge_repos_opened(repos);
    CHECK_INT(merge_repos_get(repos, s_repos.user, &second), 0);
    CHECK_INT(merge_repos_opened(repos), before + 1);
    CHECK(first != NULL && second != NULL && first->repo != second->repo);
    const void *kept = first ? first->repo : NULL;
    merge_repos_put(repos, &second);
    merge_repos_put(repos, &first);
    CHECK(s_cycle(repos, false, "after the second handle") == kept);

    /* The repository replaced by another at the same path. */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && git clone -q '%s' '%s'", s_repos.user, s_repos.remote,
             s_repos.user);
    CHECK_INT(system(cmd), 0);
    s_cycle(repos, true, "replaced repository");

    /* Not a repository: a clear error, nothing kept. */
    before = merge_repos_opened(repos);
    CHECK(merge_repos_get(repos, s_env->dir, &lent) != 0);
    CHECK(lent == NULL);
    CHECK_INT(merge_repos_opened(repos), before);
    merge_repos_destroy(&repos);
    CHECK(repos == NULL);
    testenv_destroy(&s_env);
}

static void s_request(merge_request_t *req, merge_repos_t *repos, const char *source)
{
    merge_request_init(req);
    req->repo_path = s_repos.user;
    req->source_branch = source;
    req->worktree_dir = s_wtdir;
    req->repos = repos;
    req->deadline_ms = clock_now_ms() + 60000;
}

/* The engine's runs over one set: the second merge reuses the handle when nothing
 * happened in between, and sees commits and refs made between two runs. */
static void test_engine_runs(void)
{
    s_fixture("merge-repos-engine");
    merge_repos_t *repos = NULL;
    CHECK_INT(merge_repos_new(&repos), 0);
    testgit_push_main(s_repos.dev, "lib/util/u.c", "int u;\n");
    CHECK_INT(testgit_run(s_repos.user, "pull", "-q", "origin", "main", NULL), 0);
    testgit_push_branch(s_repos.user, "one", "d.txt", "one\n");
    testgit_push_main(s_repos.dev, "e.txt", "main moved\n");
    merge_request_t req;
    merge_result_t res;
    s_request(&req, repos, "one");
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    merge_result_clear(&res);
    CHECK_INT(merge_repos_opened(repos), 1);

    /* The same merge again, nothing changed meanwhile: already merged, same handle. */
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK_INT(res.strategy, MERGE_STRATEGY_UP_TO_DATE);
    merge_result_clear(&res);
    CHECK_INT(merge_repos_opened(repos), 1);

    /* Between two runs the user commits a new branch (new objects, a new ref) that was
     * never pushed, and main moves on the remote: the next run sees both. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "two", "main", NULL), 0);
    testgit_commit(s_repos.user, "f.txt", "two\n", "branch two");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_push_main(s_repos.dev, "g.txt", "main moved again\n");
    s_request(&req, repos, "two");
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    merge_result_clear(&res);
    CHECK_INT(merge_repos_opened(repos), 2);
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:f.txt", NULL), 0);
    CHECK_STR(testgit_out(), "two");
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:g.txt", NULL), 0);
    CHECK_STR(testgit_out(), "main moved again");
    /* lib/ was skipped by the detection; the merge holds it whole, as a directory. */
    CHECK_INT(testgit_run(s_repos.remote, "ls-tree", "-r", "main", NULL), 0);
    CHECK(strstr(testgit_out(), "lib/util/u.c") != NULL);
    CHECK(strstr(testgit_out(), " commit ") == NULL);
    merge_repos_destroy(&repos);
    testenv_destroy(&s_env);
}

int main(void)
{
    git_libgit2_init();
    test_reuse_and_invalidation();
    test_engine_runs();
    git_libgit2_shutdown();
    return check_exit_code("test_merge_repos");
}
