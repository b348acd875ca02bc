/* test_merge_engine: the merge engine against real repositories made with the git CLI in a
 * temporary directory: a bare "remote", the user's clone (repo_path) and a second clone
 * ("dev") that plays other people pushing. Every scenario checks the outcome, what reached
 * the remote, and that the user's clone and the service's worktree directory are left
 * clean. */
#include "check.h"
#include "merge_engine.h"
#include "worktree.h"
#include "testenv.h"
#include "testgit.h"

#include "clock.h"
#include "failure.h"
#include "home.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static testenv_t *s_env;
static testgit_fixture_t s_repos;
static char s_wtdir[512];

static void s_write(const char *dir, const char *file, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    CHECK(testenv_write_file(path, text) == 0);
}

static void s_unlink(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    unlink(path);
}

static char *s_read(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return testenv_read_file(path);
}

/* Fresh fixture: remote with main (a.c, b.c, c.txt), the user's clone on main, a dev
 * clone. */
static void s_fixture(const char *name)
{
    s_env = testenv_new(name);
    char home[600];
    snprintf(home, sizeof home, "%s/gh", s_env->dir);
    testgit_env(home);
    snprintf(s_wtdir, sizeof s_wtdir, "%s/specialists/merge-agent/worktrees", s_env->home);
    testgit_fixture(&s_repos, s_env->dir);
}

static void s_teardown(void)
{
    testenv_destroy(&s_env);
}

/* True when the service's worktree directory holds nothing and the user's repository has
 * only its own worktree, no engine branch or ref, and a clean status. */
static bool s_repo_left_clean(void)
{
    bool ok = true;
    CHECK_INT(testgit_run(s_repos.user, "worktree", "list", "--porcelain", NULL), 0);
    if (strstr(testgit_out(), s_wtdir) != NULL) {
        fprintf(stderr, "worktree left: %s\n", testgit_out());
        ok = false;
    }
    CHECK_INT(testgit_run(s_repos.user, "for-each-ref", "--format=%(refname)", NULL), 0);
    if (strstr(testgit_out(), "refs/heads/cloister-wt-") ||
        strstr(testgit_out(), "refs/cloister-wt/")) {
        fprintf(stderr, "ref left: %s\n", testgit_out());
        ok = false;
    }
    CHECK_INT(testgit_run(s_repos.user, "status", "--porcelain", NULL), 0);
    if (testgit_out()[0] != '\0') {
        fprintf(stderr, "user tree changed: %s\n", testgit_out());
        ok = false;
    }
    DIR *d = opendir(s_wtdir);
    if (d != NULL) {
        struct dirent *entry;
        while ((entry = readdir(d)) != NULL) {
            if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) {
                fprintf(stderr, "left in the worktree directory: %s\n", entry->d_name);
                ok = false;
            }
        }
        closedir(d);
    }
    return ok;
}

/* ---- callbacks ------------------------------------------------------------------------- */

typedef struct {
    const char *resolved_text; /* written to every conflicting file, NULL: leave them */
    const char *outside_file;  /* also modified by the resolver */
    bool cancel_in_resolve;    /* sets `cancel` */
    bool expire_in_resolve;    /* moves the clock past the deadline */
    bool commit_in_resolve;    /* the resolver commits the merge itself */
    const char *branch_in_resolve; /* then checks out a new branch of this name */
    const char *commit_on_in_resolve; /* then checks out this branch and commits on it */
    const char *force_in_resolve;     /* then moves this branch onto its HEAD (branch -f) */
    merge_tests_t tests;       /* what run_tests answers */
    bool push_in_tests;        /* first run_tests call: someone pushes to main */
    bool cancel;
    int resolve_calls, tests_calls;
    char tests_head[41]; /* HEAD of the worktree the tests ran in */
    char first_conflict[256];
} s_calls_t;

static int s_resolve(const char *worktree_path, const char *const *files, size_t n,
                     char **notes_out, void *arg)
{
    s_calls_t *calls = arg;
    calls->resolve_calls++;
    if (n > 0)
        snprintf(calls->first_conflict, sizeof calls->first_conflict, "%s", files[0]);
    for (size_t i = 0; i < n && calls->resolved_text; i++)
        s_write(worktree_path, files[i], calls->resolved_text);
    if (calls->outside_file)
        s_write(worktree_path, calls->outside_file, "changed by the agent\n");
    if (calls->commit_in_resolve) {
        CHECK_INT(testgit_run(worktree_path, "add", "-A", NULL), 0);
        CHECK_INT(testgit_run(worktree_path, "commit", "-q", "--no-edit", NULL), 0);
    }
    if (calls->branch_in_resolve)
        CHECK_INT(
            testgit_run(worktree_path, "checkout", "-q", "-b", calls->branch_in_resolve, NULL), 0);
    if (calls->force_in_resolve)
        CHECK_INT(testgit_run(worktree_path, "branch", "-f", calls->force_in_resolve, "HEAD", NULL),
                  0);
    if (calls->commit_on_in_resolve) {
        CHECK_INT(testgit_run(worktree_path, "checkout", "-q", calls->commit_on_in_resolve, NULL),
                  0);
        CHECK_INT(testgit_run(worktree_path, "commit", "-q", "--allow-empty", "-m",
                              "agent was here", NULL),
                  0);
    }
    if (calls->cancel_in_resolve)
        calls->cancel = true;
    if (calls->expire_in_resolve)
        clock_advance(60 * 60 * 1000);
    *notes_out = strdup("kept both changes");
    return 0;
}

static merge_tests_t s_run_tests(const char *worktree_path, char **summary_out, void *arg)
{
    s_calls_t *calls = arg;
    calls->tests_calls++;
    testgit_rev(worktree_path, "HEAD", calls->tests_head);
    if (calls->push_in_tests && calls->tests_calls == 1)
        testgit_push_main(s_repos.dev, "c.txt", "someone else pushed meanwhile\n");
    *summary_out = strdup(calls->tests == MERGE_TESTS_FAIL ? "1 failed" : "3 passed");
    return calls->tests;
}

static bool s_cancelled(void *arg)
{
    return ((s_calls_t *)arg)->cancel;
}

static void s_request(merge_request_t *req, const char *source, s_calls_t *calls)
{
    merge_request_init(req);
    req->repo_path = s_repos.user;
    req->source_branch = source;
    req->worktree_dir = s_wtdir;
    req->resolve = s_resolve;
    req->run_tests = s_run_tests;
    req->cancelled = s_cancelled;
    req->callback_arg = calls;
    req->deadline_ms = clock_now_ms() + 60000;
}

static int s_parent_count(const char *dir, const char *rev)
{
    CHECK_INT(testgit_run(dir, "rev-list", "--parents", "-n", "1", rev, NULL), 0);
    int words = 0;
    for (const char *c = testgit_out(); *c; c++)
        if (*c == ' ')
            words++;
    return words;
}

/* The paths, space-separated (malloc'd). */
static char *s_list_text(char *const *paths, size_t n)
{
    size_t size = 1;
    for (size_t i = 0; i < n; i++)
        size += strlen(paths[i]) + 1;
    char *out = calloc(1, size);
    for (size_t i = 0; out != NULL && i < n; i++) {
        if (i > 0)
            strcat(out, " ");
        strcat(out, paths[i]);
    }
    return out;
}

/* ---- scenarios ------------------------------------------------------------------------- */

static void test_fast_forward(void)
{
    s_fixture("merge-ff");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    char feature[41], user_head[41];
    testgit_rev(s_repos.user, "feature", feature);
    testgit_rev(s_repos.user, "HEAD", user_head);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_FAST_FORWARD);
    CHECK(res.pushed);
    CHECK_INT(res.landed, MERGE_LANDED_REMOTE);
    CHECK_STR(res.merge_commit, feature);
    CHECK_INT(calls.tests_calls, 1);
    CHECK_STR(calls.tests_head, feature);
    char remote_main[41];
    testgit_rev(s_repos.remote, "main", remote_main);
    CHECK_STR(remote_main, feature);
    /* main is checked out in the user's clone, which is clean: it moves with the merge. */
    char local_main[41];
    testgit_rev(s_repos.user, "main", local_main);
    CHECK_STR(local_main, feature);
    CHECK_INT(res.local, MERGE_LOCAL_CHECKOUT_UPDATED);
    CHECK(res.local_note && strstr(res.local_note, "your checkout at"));
    char *a = s_read(s_repos.user, "a.c");
    CHECK(a && strstr(a, "return 10;") != NULL);
    free(a);
    CHECK(s_repo_left_clean());
    char *text = merge_result_render(&res);
    CHECK(text && strstr(text, "MERGE_RESULT: SUCCESS\n") && strstr(text, "TESTS: PASS\n"));
    free(text);
    merge_result_clear(&res);
    s_teardown();
}

/* The mode of a path in the user's clone. */
static mode_t s_mode(const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", s_repos.user, file);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    return st.st_mode & 07777;
}

/* The files a merge writes into the user's checkout have the modes git gives them under the
 * user's umask (0644, 0755 for an executable, new directories 0755), not the 0600 / 0700
 * of the services' own umask 077 (home_secure(), which every service calls at start). */
static void test_checkout_modes(void)
{
    s_fixture("merge-modes");
    mode_t before = umask(022);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "modes", NULL), 0);
    s_write(s_repos.user, "run.sh", "#!/bin/sh\necho ok\n");
    char path[1024];
    snprintf(path, sizeof path, "%s/run.sh", s_repos.user);
    CHECK(chmod(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/dir", s_repos.user);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/dir/sub", s_repos.user);
    CHECK(mkdir(path, 0755) == 0);
    s_write(s_repos.user, "dir/sub/new.txt", "new\n");
    s_write(s_repos.user, "a.c", "int a(void)\n{\n    return 11;\n}\n");
    CHECK_INT(testgit_run(s_repos.user, "add", "-A", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "commit", "-q", "-m", "modes", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", "modes", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "branch", "-q", "-D", "modes", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "fetch", "-q", "origin", NULL), 0);
    /* From here on the process runs as a service does: umask 077. */
    CHECK_INT(home_secure(), 0);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "modes", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.local, MERGE_LOCAL_CHECKOUT_UPDATED);
    CHECK_INT(s_mode("run.sh"), 0755);
    CHECK_INT(s_mode("a.c"), 0644);
    CHECK_INT(s_mode("dir"), 0755);
    CHECK_INT(s_mode("dir/sub"), 0755);
    CHECK_INT(s_mode("dir/sub/new.txt"), 0644);
    merge_result_clear(&res);
    umask(before);
    s_teardown();
}

static void test_clean_merge_and_idempotence(void)
{
    s_fixture("merge-clean");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 20;\n}\n");
    char user_head[41];
    testgit_rev(s_repos.user, "HEAD", user_head);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    CHECK(res.pushed);
    CHECK_INT(res.attempts, 1);
    char remote_main[41];
    testgit_rev(s_repos.remote, "main", remote_main);
    CHECK_STR(remote_main, res.merge_commit);
    CHECK_STR(calls.tests_head, res.merge_commit);
    CHECK_INT(s_parent_count(s_repos.remote, "main"), 2);
    CHECK_INT(testgit_run(s_repos.remote, "log", "-1", "--format=%s", "main", NULL), 0);
    CHECK_STR(testgit_out(), "Merge branch 'feature' into main");
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:a.c", NULL), 0);
    CHECK(strstr(testgit_out(), "return 10") != NULL);
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:b.c", NULL), 0);
    CHECK(strstr(testgit_out(), "return 20") != NULL);
    /* The user's clean checkout of main, behind the remote's, is fast-forwarded to the merge. */
    char after[41];
    testgit_rev(s_repos.user, "HEAD", after);
    CHECK(strcmp(after, user_head) != 0);
    CHECK_STR(after, res.merge_commit);
    char *a = s_read(s_repos.user, "a.c");
    CHECK(a && strstr(a, "return 10;") != NULL);
    free(a);
    char *b = s_read(s_repos.user, "b.c");
    CHECK(b && strstr(b, "return 20;") != NULL);
    free(b);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);

    /* A crashed earlier run left a worktree (its pid is gone); running the same merge
     * again reports "already merged" and cleans the leftover. */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char leftover[700], name[64];
    snprintf(name, sizeof name, "cloister-wt-%ld-1", (long)dead);
    snprintf(leftover, sizeof leftover, "%s/%s", s_wtdir, name);
    CHECK_INT(
        testgit_run(s_repos.user, "worktree", "add", "-q", "--detach", leftover, "main", NULL), 0);
    calls.tests_calls = 0;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_UP_TO_DATE);
    CHECK(!res.pushed);
    CHECK_INT(calls.tests_calls, 0);
    CHECK(res.notes && strstr(res.notes, "already merged"));
    struct stat st;
    CHECK(stat(leftover, &st) != 0);
    CHECK(s_repo_left_clean());
    char again[41];
    testgit_rev(s_repos.remote, "main", again);
    CHECK_STR(again, remote_main);
    merge_result_clear(&res);

    /* Our pid with another start time is a predecessor that had the same pid (pid 1 of a
     * restarted container): its leftover goes. A name of this very process stays. */
    char live[64], reused[64], live_path[700], reused_path[700];
    worktree_unique_name(live, sizeof live);
    long pid = 0;
    long long start = 0;
    unsigned seq = 0;
    CHECK(sscanf(live, WORKTREE_PREFIX "%ld-%lld-%u", &pid, &start, &seq) == 3);
    CHECK_INT(pid, getpid());
    snprintf(reused, sizeof reused, "%s%ld-%lld-%u", WORKTREE_PREFIX, pid, start + 1, seq);
    snprintf(live_path, sizeof live_path, "%s/%s", s_wtdir, live);
    snprintf(reused_path, sizeof reused_path, "%s/%s", s_wtdir, reused);
    CHECK_INT(testgit_run(s_repos.user, "worktree", "add", "-q", "--detach", live_path, "main", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "worktree", "add", "-q", "--detach", reused_path, "main", NULL),
              0);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(stat(reused_path, &st) != 0);
    CHECK(stat(live_path, &st) == 0);
    merge_result_clear(&res);
    CHECK_INT(testgit_run(s_repos.user, "worktree", "remove", "--force", live_path, NULL), 0);
    s_teardown();
}

/* Feature and main change the same line of a.c. */
static void s_conflict_fixture(const char *name)
{
    s_fixture(name);
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 100;\n}\n");
    testgit_push_main(s_repos.dev, "a.c", "int a(void)\n{\n    return 200;\n}\n");
}

static void test_conflict_resolved(void)
{
    s_conflict_fixture("merge-resolved");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS,
                       .resolved_text = "int a(void)\n{\n    return 300;\n}\n"};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_RESOLVED);
    CHECK_STR(calls.first_conflict, "a.c");
    CHECK_INT(res.resolved_count, 1);
    CHECK(res.resolved_count == 1 && strcmp(res.resolved_files[0], "a.c") == 0);
    CHECK_INT(s_parent_count(s_repos.remote, "main"), 2);
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:a.c", NULL), 0);
    CHECK(strstr(testgit_out(), "return 300") != NULL);
    CHECK_STR(calls.tests_head, res.merge_commit);
    char *text = merge_result_render(&res);
    CHECK(text && strstr(text, "RESOLVED_FILES: a.c\n") && strstr(text, "kept both changes"));
    free(text);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();

    /* The resolver commits the merge itself: accepted after the same checks. */
    s_conflict_fixture("merge-agent-commit");
    calls = (s_calls_t){.tests = MERGE_TESTS_PASS,
                        .commit_in_resolve = true,
                        .resolved_text = "int a(void)\n{\n    return 300;\n}\n"};
    s_request(&req, "feature", &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(res.notes && strstr(res.notes, "resolver's own merge commit"));
    CHECK_INT(s_parent_count(s_repos.remote, "main"), 2);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();
}

/* 20 lines of a.c's kind, line 10 reading `line10`: long enough for a one-line edit to
 * keep a renamed file similar (libgit2 and git need 50 %). */
static void s_long_text(char *buf, size_t size, const char *line10)
{
    size_t used = 0;
    for (int i = 1; i <= 20 && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s\n",
                                 i == 10 ? line10 : (i % 2 ? "int x;" : "int y;"));
}

/* a.c grows to 20 lines on main; the user's feature renames it to `renamed` (and, with
 * `other_rename`, dev's main renames it to that) while both change line 10. */
static void s_rename_fixture(const char *name, const char *renamed, const char *other_rename)
{
    s_fixture(name);
    char text[1024];
    s_long_text(text, sizeof text, "int base;");
    /* A directory no side touches: skipped by the detection, whole in the merge. */
    testgit_push_main(s_repos.dev, "lib/util/u.c", "int u;\n");
    testgit_push_main(s_repos.dev, "a.c", text);
    CHECK_INT(testgit_run(s_repos.user, "pull", "-q", "origin", "main", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "feature", "main", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "mv", "a.c", renamed, NULL), 0);
    s_long_text(text, sizeof text, "int feature;");
    testgit_commit(s_repos.user, renamed, text, "rename and edit");
    CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", "feature", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    s_long_text(text, sizeof text, "int main_line;");
    CHECK_INT(testgit_run(s_repos.dev, "pull", "-q", "origin", "main", NULL), 0);
    if (other_rename != NULL)
        CHECK_INT(testgit_run(s_repos.dev, "mv", "a.c", other_rename, NULL), 0);
    testgit_commit(s_repos.dev, other_rename ? other_rename : "a.c", text, "edit on main");
    CHECK_INT(testgit_run(s_repos.dev, "push", "-q", "origin", "main", NULL), 0);
}

/* A rename/modify conflict is one conflict, under the new path (as git names it): the
 * resolver is shown that path alone, resolves it there, and the old path is gone. */
static void test_rename_modify_conflict(void)
{
    s_rename_fixture("merge-rename-modify", "renamed.c", NULL);
    char resolved[1024];
    s_long_text(resolved, sizeof resolved, "int both;");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS, .resolved_text = resolved};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK_INT(res.strategy, MERGE_STRATEGY_RESOLVED);
    CHECK_INT(calls.resolve_calls, 1);
    CHECK_STR(calls.first_conflict, "renamed.c");
    CHECK_INT(res.resolved_count, 1);
    CHECK(res.resolved_count == 1 && strcmp(res.resolved_files[0], "renamed.c") == 0);
    CHECK_INT(testgit_run(s_repos.remote, "show", "main:renamed.c", NULL), 0);
    CHECK(strstr(testgit_out(), "int both;") != NULL);
    CHECK(testgit_run(s_repos.remote, "cat-file", "-e", "main:a.c", NULL) != 0);
    CHECK_INT(testgit_run(s_repos.remote, "ls-tree", "-r", "main", NULL), 0);
    CHECK(strstr(testgit_out(), "lib/util/u.c") != NULL);
    CHECK(strstr(testgit_out(), " commit ") == NULL);
    char *text = merge_result_render(&res);
    CHECK(text && strstr(text, "RESOLVED_FILES: renamed.c\n"));
    free(text);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);

    s_teardown();

    /* Without a resolver the failure names the same one path. */
    s_calls_t none = {.tests = MERGE_TESTS_PASS};
    s_rename_fixture("merge-rename-noresolver", "renamed.c", NULL);
    s_request(&req, "feature", &none);
    req.resolve = NULL;
    CHECK(merge_engine_run(&req, &res) != 0);
    CHECK_INT(res.failed_count, 1);
    CHECK(res.failed_count == 1 && strcmp(res.failed_files[0], "renamed.c") == 0);
    merge_result_clear(&res);
    s_teardown();
}

/* Both sides renamed a.c, each to its own path: git lists the old path and both new ones,
 * and so does the engine; the resolver settles on one of them. */
static void test_rename_rename_conflict(void)
{
    s_rename_fixture("merge-rename-rename", "feature.c", "main.c");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    req.resolve = NULL;
    merge_result_t res;
    CHECK(merge_engine_run(&req, &res) != 0);
    CHECK_INT(res.strategy, MERGE_STRATEGY_RESOLVED);
    CHECK_INT(res.failed_count, 3);
    char *files = res.failed_count == 3 ? s_list_text(res.failed_files, 3) : NULL;
    CHECK_STR(files ? files : "", "a.c feature.c main.c");
    free(files);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();
}

/* The resolver's worktree shares the user's branches: what it does to them is undone. */
static void test_resolver_branches_undone(void)
{
    /* It commits the merge, then `checkout -b`: the merge is accepted, the branch goes. */
    s_conflict_fixture("merge-agent-branch");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS,
                       .commit_in_resolve = true,
                       .branch_in_resolve = "agent-resolution",
                       .resolved_text = "int a(void)\n{\n    return 300;\n}\n"};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(res.notes && strstr(res.notes, "deleted refs/heads/agent-resolution"));
    CHECK(testgit_run(s_repos.user, "rev-parse", "-q", "--verify", "refs/heads/agent-resolution",
                      NULL) != 0);
    CHECK_INT(s_parent_count(s_repos.remote, "main"), 2);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();

    /* It commits the merge and forces the source branch onto it from the detached HEAD:
     * the merge is accepted, the source branch is where it was. */
    s_conflict_fixture("merge-agent-forces-branch");
    char forced_before[41];
    testgit_rev(s_repos.user, "feature", forced_before);
    calls = (s_calls_t){.tests = MERGE_TESTS_PASS,
                        .commit_in_resolve = true,
                        .force_in_resolve = "feature",
                        .resolved_text = "int a(void)\n{\n    return 300;\n}\n"};
    s_request(&req, "feature", &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(res.notes && strstr(res.notes, "put back refs/heads/feature"));
    char forced_after[41];
    testgit_rev(s_repos.user, "feature", forced_after);
    CHECK_STR(forced_after, forced_before);
    merge_result_clear(&res);
    s_teardown();

    /* It checks out the source branch and commits there: the merge fails and the user's
     * branch is where it was. */
    s_conflict_fixture("merge-agent-moves-source");
    char feature_before[41], remote_before[41];
    testgit_rev(s_repos.user, "feature", feature_before);
    testgit_rev(s_repos.remote, "main", remote_before);
    calls = (s_calls_t){.tests = MERGE_TESTS_PASS,
                        .commit_in_resolve = true,
                        .commit_on_in_resolve = "feature",
                        .resolved_text = "int a(void)\n{\n    return 300;\n}\n"};
    s_request(&req, "feature", &calls);
    CHECK(merge_engine_run(&req, &res) != 0);
    CHECK(!res.success && !res.pushed);
    CHECK(res.reason && strstr(res.reason, "not the verified merge"));
    CHECK(res.notes && strstr(res.notes, "put back refs/heads/feature"));
    char feature_after[41], remote_after[41];
    testgit_rev(s_repos.user, "feature", feature_after);
    testgit_rev(s_repos.remote, "main", remote_after);
    CHECK_STR(feature_after, feature_before);
    CHECK_STR(remote_after, remote_before);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();
}

static void s_check_refused(const char *name, s_calls_t calls, const char *reason,
                            const char *failed_file)
{
    s_conflict_fixture(name);
    char remote_before[41], user_head[41];
    testgit_rev(s_repos.remote, "main", remote_before);
    testgit_rev(s_repos.user, "HEAD", user_head);
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK(merge_engine_run(&req, &res) != 0);
    CHECK(!res.success);
    CHECK(!res.pushed);
    CHECK(res.reason && strstr(res.reason, reason));
    if (res.reason && !strstr(res.reason, reason))
        fprintf(stderr, "reason was: %s\n", res.reason);
    if (failed_file != NULL)
        CHECK(res.failed_count >= 1 && strcmp(res.failed_files[0], failed_file) == 0);
    CHECK_INT(calls.tests_calls, 0);
    char remote_after[41], user_after[41];
    testgit_rev(s_repos.remote, "main", remote_after);
    testgit_rev(s_repos.user, "HEAD", user_after);
    CHECK_STR(remote_after, remote_before);
    CHECK_STR(user_after, user_head);
    CHECK(s_repo_left_clean());
    char *text = merge_result_render(&res);
    CHECK(text && strstr(text, "MERGE_RESULT: FAILURE\n"));
    free(text);
    merge_result_clear(&res);
    s_teardown();
}

static void test_conflict_refusals(void)
{
    /* The resolver leaves the markers. */
    s_check_refused("merge-markers", (s_calls_t){.tests = MERGE_TESTS_PASS},
                    "conflict markers remain in a.c", "a.c");
    /* The resolver fixes a.c but also edits b.c. */
    s_check_refused("merge-outside",
                    (s_calls_t){.tests = MERGE_TESTS_PASS,
                                .outside_file = "b.c",
                                .resolved_text = "int a(void) { return 3; }\n"},
                    "agent modified files outside the conflict: b.c", "b.c");
    /* Cancelled, then out of time, while the agent works. */
    s_check_refused("merge-cancel",
                    (s_calls_t){.tests = MERGE_TESTS_PASS,
                                .cancel_in_resolve = true,
                                .resolved_text = "int a(void) { return 3; }\n"},
                    "cancelled during conflict resolution", NULL);
    s_check_refused("merge-deadline",
                    (s_calls_t){.tests = MERGE_TESTS_PASS,
                                .expire_in_resolve = true,
                                .resolved_text = "int a(void) { return 3; }\n"},
                    "deadline passed during conflict resolution", NULL);
}

static void test_tests_fail(void)
{
    s_fixture("merge-testfail");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 20;\n}\n");
    char before[41];
    testgit_rev(s_repos.remote, "main", before);
    s_calls_t calls = {.tests = MERGE_TESTS_FAIL};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK(merge_engine_run(&req, &res) != 0);
    CHECK(!res.success);
    CHECK(!res.pushed);
    CHECK_INT(res.tests, MERGE_TESTS_FAIL);
    CHECK(res.reason && strstr(res.reason, "tests failed"));
    char after[41];
    testgit_rev(s_repos.remote, "main", after);
    CHECK_STR(after, before);
    CHECK(s_repo_left_clean());
    char *text = merge_result_render(&res);
    CHECK(text && strstr(text, "TESTS: FAIL\n") && strstr(text, "1 failed"));
    free(text);
    merge_result_clear(&res);
    s_teardown();
}

static void test_remote_moves(void)
{
    s_fixture("merge-moves");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 20;\n}\n");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS, .push_in_tests = true};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(res.pushed);
    CHECK_INT(res.attempts, 2);
    CHECK_INT(calls.tests_calls, 2);
    char dev_main[41], remote_main[41];
    testgit_rev(s_repos.dev, "main", dev_main);
    testgit_rev(s_repos.remote, "main", remote_main);
    CHECK_STR(remote_main, res.merge_commit);
    CHECK_INT(testgit_run(s_repos.remote, "merge-base", "--is-ancestor", dev_main, "main", NULL),
              0);
    CHECK_INT(testgit_run(s_repos.remote, "merge-base", "--is-ancestor", "feature", "main", NULL),
              0);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);
    s_teardown();
}

/* The remote refuses the push although its target did not move (here: its main is locked,
 * as a hook or branch protection would refuse it): one attempt, the refusal as the reason,
 * nothing pushed, nothing left behind. A lock file refuses the update even for root. */
static void test_push_refused(void)
{
    s_fixture("merge-refused");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 20;\n}\n");
    char remote_before[41], user_main_before[41];
    testgit_rev(s_repos.remote, "main", remote_before);
    testgit_rev(s_repos.user, "main", user_main_before);
    char lock[700];
    snprintf(lock, sizeof lock, "%s/refs/heads/main.lock", s_repos.remote);
    CHECK(testenv_write_file(lock, "") == 0);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(!res.success);
    CHECK(!res.pushed);
    CHECK_INT(res.attempts, 1);
    CHECK_INT(calls.tests_calls, 1);
    CHECK(res.reason && strncmp(res.reason, "push to origin rejected: ", 25) == 0);
    CHECK(res.reason && strstr(res.reason, "refs/heads/main") && strstr(res.reason, "lock"));
    CHECK(res.reason && strstr(res.reason, "kept moving") == NULL);
    CHECK(access(lock, F_OK) == 0);
    char remote_after[41], user_main_after[41];
    testgit_rev(s_repos.remote, "main", remote_after);
    testgit_rev(s_repos.user, "main", user_main_after);
    CHECK_STR(remote_after, remote_before);
    CHECK_STR(user_main_after, user_main_before);
    CHECK(s_repo_left_clean());
    merge_result_clear(&res);

    /* With the lock gone the same merge goes through. */
    unlink(lock);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.pushed);
    CHECK_INT(res.attempts, 1);
    testgit_rev(s_repos.remote, "main", remote_after);
    CHECK_STR(remote_after, res.merge_commit);
    merge_result_clear(&res);
    s_teardown();
}

static void test_source_missing(void)
{
    s_fixture("merge-missing");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "no-such-branch", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_NOT_FOUND);
    CHECK(!res.success);
    CHECK_STR(res.reason, "source branch 'no-such-branch' not found locally or on origin");
    merge_result_clear(&res);
    /* A branch that exists only locally (never pushed) is used. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "local-only", NULL), 0);
    testgit_commit(s_repos.user, "c.txt", "local\n", "local work");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    s_request(&req, "local-only", &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK_INT(res.strategy, MERGE_STRATEGY_FAST_FORWARD);
    merge_result_clear(&res);
    s_teardown();
}

/* A pinned source commit (the reviewed one): a branch that moved since is not merged, the
 * reviewed commit is, and something that is not a commit id is refused. */
static void test_source_pinned(void)
{
    s_fixture("merge-pinned");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    char reviewed[41], remote_before[41];
    testgit_rev(s_repos.user, "feature", reviewed);
    testgit_rev(s_repos.remote, "main", remote_before);
    /* Someone pushes one more commit to the branch after the review. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(s_repos.user, "b.c", "unreviewed\n", "after the review");
    CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", "feature", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    req.source_commit = reviewed;
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(!res.success && !res.pushed);
    CHECK(res.reason && strstr(res.reason, "moved since the review"));
    char remote_after[41];
    testgit_rev(s_repos.remote, "main", remote_after);
    CHECK_STR(remote_after, remote_before);
    merge_result_clear(&res);

    req.source_commit = "not-a-commit";
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_INVALID);
    CHECK(res.reason && strstr(res.reason, "not a 40-digit commit id"));
    merge_result_clear(&res);

    /* Pinned to where the branch is: merged. */
    char now[41];
    testgit_rev(s_repos.user, "feature", now);
    req.source_commit = now;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success && res.pushed);
    merge_result_clear(&res);
    s_teardown();
}

/* A repository of another user: git refuses to open it, and the reason says why and what
 * to do (libgit2 alone only says "safe.directory was not found"). Needs root to chown. */
static void test_foreign_owner(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_merge_engine: NOT CHECKED: a repository of another user (only "
                        "root can chown one)\n");
        return;
    }
    s_fixture("merge-foreign");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    CHECK_INT(chown(s_repos.user, 4242, 4242), 0);
    char dotgit[600];
    snprintf(dotgit, sizeof dotgit, "%s/.git", s_repos.user);
    CHECK_INT(chown(dotgit, 4242, 4242), 0);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(res.reason && strstr(res.reason, "belongs to uid 4242") &&
          strstr(res.reason, "safe.directory"));
    merge_result_clear(&res);
    CHECK_INT(chown(dotgit, 0, 0), 0);
    CHECK_INT(chown(s_repos.user, 0, 0), 0);
    s_teardown();
}

static void test_stale_lock(void)
{
    s_fixture("merge-lock");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    char lock[700];
    snprintf(lock, sizeof lock, "%s/.git/index.lock", s_repos.user);
    CHECK(testenv_write_file(lock, "") == 0);
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    s_request(&req, "feature", &calls);
    merge_result_t res;
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(res.reason && strstr(res.reason, "repository busy: ") &&
          strstr(res.reason, "index.lock is locked"));
    CHECK(!res.pushed);
    CHECK(access(lock, F_OK) == 0);
    merge_result_clear(&res);

    struct timeval old[2];
    gettimeofday(&old[0], NULL);
    old[0].tv_sec -= 120;
    old[1] = old[0];
    utimes(lock, old);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.success);
    CHECK(access(lock, F_OK) != 0);
    merge_result_clear(&res);

    /* An old lock held by a live `git commit -a` waiting for its editor (git keeps no fd
     * on it then): the merge refuses and leaves the lock alone. */
    char editor[700], release[700], started[700], script[3072];
    snprintf(editor, sizeof editor, "%s/slow-editor", s_env->dir);
    snprintf(release, sizeof release, "%s/editor-release", s_env->dir);
    snprintf(started, sizeof started, "%s/editor-started", s_env->dir);
    snprintf(script, sizeof script,
             "#!/bin/sh\ntouch '%s'\nwhile [ ! -e '%s' ]; do sleep 0.05; done\n"
             "echo 'user work' > \"$1\"\n",
             started, release);
    CHECK(testenv_write_file(editor, script) == 0);
    CHECK(chmod(editor, 0755) == 0);
    char user_file[700];
    snprintf(user_file, sizeof user_file, "%s/c.txt", s_repos.user);
    CHECK(testenv_write_file(user_file, "edited by the user\n") == 0);
    char editor_env[800];
    snprintf(editor_env, sizeof editor_env, "GIT_EDITOR=%s", editor);
    char *commit[] = {"/usr/bin/env", editor_env, "git", "-C", s_repos.user, "commit", "-q", "-a",
                      NULL};
    pid_t user_git = testenv_spawn(s_env, "user-commit", commit);
    CHECK(user_git > 0);
    /* Once the editor runs, git has written the lock and only waits. */
    for (int i = 0; i < 500 && access(started, F_OK) != 0; i++)
        testenv_sleep_ms(10);
    CHECK(access(lock, F_OK) == 0);
    gettimeofday(&old[0], NULL);
    old[0].tv_sec -= 120;
    old[1] = old[0];
    utimes(lock, old);
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(res.reason && strstr(res.reason, "and git (pid ") && strstr(res.reason, "is working in"));
    CHECK(access(lock, F_OK) == 0);
    merge_result_clear(&res);
    /* The user's commit then completes normally. */
    CHECK(testenv_write_file(release, "") == 0);
    CHECK_INT(testenv_wait(s_env, user_git, 10000), 0);
    CHECK_INT(testgit_run(s_repos.user, "log", "-1", "--format=%s", NULL), 0);
    CHECK_STR(testgit_out(), "user work");
    s_teardown();
}

static void test_branch_names(void)
{
    s_fixture("merge-names");
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK_INT(chdir(s_env->dir), 0);
    char canary[700];
    snprintf(canary, sizeof canary, "%s/canary", s_env->dir);
    const char *invalid[] = {"x; touch canary",
                             "x\" && touch canary; \"",
                             "a b",
                             "feat;rm -rf canary",
                             "x`touch canary`",
                             "-x",
                             "x..y",
                             ""};
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    merge_result_t res;
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        s_request(&req, invalid[i], &calls);
        CHECK_INT(merge_engine_run(&req, &res), FAILURE_INVALID);
        CHECK(res.reason && strncmp(res.reason, "invalid branch name", 19) == 0);
        merge_result_clear(&res);
    }
    s_request(&req, "feature", &calls);
    req.target_branch = "main; touch canary";
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_INVALID);
    merge_result_clear(&res);

    /* Valid for git although a shell would run it: it must simply merge. */
    const char *weird = "feat/it's;touch${IFS}canary";
    testgit_push_branch(s_repos.user, weird, "a.c", "int a(void)\n{\n    return 7;\n}\n");
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 8;\n}\n");
    s_request(&req, weird, &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    CHECK_INT(testgit_run(s_repos.remote, "log", "-1", "--format=%s", "main", NULL), 0);
    CHECK_STR(testgit_out(), "Merge branch 'feat/it's;touch${IFS}canary' into main");
    merge_result_clear(&res);
    CHECK(access(canary, F_OK) != 0);
    CHECK(s_repo_left_clean());
    CHECK_INT(chdir(cwd), 0);
    s_teardown();
}

/* No remote: the merge lands on the local main, and the user's clean checkout of it moves
 * with it; a checkout with uncommitted changes stops the merge before anything is done; the
 * repository path may also be a linked worktree. */
static void test_local_and_worktree(void)
{
    s_fixture("merge-local");
    CHECK_INT(testgit_run(s_repos.user, "remote", "remove", "origin", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "feature", NULL), 0);
    testgit_commit(s_repos.user, "a.c", "int a(void) { return 5; }\n", "feature");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_commit(s_repos.user, "b.c", "int b(void) { return 6; }\n", "main moves on");
    char main_before[41];
    testgit_rev(s_repos.user, "main", main_before);

    /* Dirty: refused in pre-flight, the user's change and main untouched. */
    s_write(s_repos.user, "c.txt", "my own edit\n");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    merge_result_t res;
    s_request(&req, "feature", &calls);
    CHECK_INT(merge_engine_run(&req, &res), FAILURE_STATE);
    CHECK(res.reason && strstr(res.reason, "your checkout of main at") &&
          strstr(res.reason, "has uncommitted changes (c.txt)"));
    CHECK_INT(calls.tests_calls, 0);
    char main_now[41];
    testgit_rev(s_repos.user, "main", main_now);
    CHECK_STR(main_now, main_before);
    char *mine = s_read(s_repos.user, "c.txt");
    CHECK(mine && strcmp(mine, "my own edit\n") == 0);
    free(mine);
    merge_result_clear(&res);

    /* Clean (an untracked file does not count): merged onto main, the checkout with it. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "--", "c.txt", NULL), 0);
    s_write(s_repos.user, "notes.txt", "untracked\n");
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(!res.pushed); /* no remote: nothing was pushed */
    CHECK_INT(res.landed, MERGE_LANDED_LOCAL);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    CHECK_INT(res.local, MERGE_LOCAL_CHECKOUT_UPDATED);
    testgit_rev(s_repos.user, "main", main_now);
    CHECK_STR(main_now, res.merge_commit);
    CHECK_INT(s_parent_count(s_repos.user, "main"), 2);
    char *a = s_read(s_repos.user, "a.c");
    CHECK(a && strcmp(a, "int a(void) { return 5; }\n") == 0);
    free(a);
    CHECK_INT(testgit_run(s_repos.user, "status", "--porcelain", NULL), 0);
    CHECK_STR(testgit_out(), "?? notes.txt");
    merge_result_clear(&res);

    /* From a linked worktree, main checked out nowhere: main moves alone. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(s_repos.user, "a.c", "int a(void) { return 7; }\n", "feature again");
    char wt[700], feature[41];
    snprintf(wt, sizeof wt, "%s/user-wt", s_env->dir);
    CHECK_INT(testgit_run(s_repos.user, "worktree", "add", "-q", "--detach", wt, "feature", NULL),
              0);
    testgit_rev(s_repos.user, "feature", feature);
    req.repo_path = wt;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(!res.pushed);
    CHECK_INT(res.landed, MERGE_LANDED_LOCAL);
    CHECK_INT(res.strategy, MERGE_STRATEGY_CLEAN);
    CHECK_INT(res.local, MERGE_LOCAL_UPDATED);
    testgit_rev(s_repos.user, "main", main_now);
    CHECK_STR(main_now, res.merge_commit);
    CHECK_INT(testgit_run(s_repos.user, "merge-base", "--is-ancestor", feature, "main", NULL), 0);
    merge_result_clear(&res);
    s_teardown();
}

/* With a remote: the user's checkout of main with uncommitted changes (or an untracked file
 * the merge would overwrite) is left alone after the push, and the result says so;
 * `push = false` merges onto the local main and leaves the remote alone. */
static void test_local_target_behind(void)
{
    s_fixture("merge-behind");
    testgit_push_branch(s_repos.user, "feature", "a.c", "int a(void)\n{\n    return 10;\n}\n");
    testgit_push_main(s_repos.dev, "d.c", "int d;\n");
    char user_head[41];
    testgit_rev(s_repos.user, "HEAD", user_head);
    s_write(s_repos.user, "c.txt", "my own edit\n");
    s_calls_t calls = {.tests = MERGE_TESTS_PASS};
    merge_request_t req;
    merge_result_t res;
    s_request(&req, "feature", &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(res.pushed);
    char remote_main[41], local_main[41];
    testgit_rev(s_repos.remote, "main", remote_main);
    CHECK_STR(remote_main, res.merge_commit);
    testgit_rev(s_repos.user, "main", local_main);
    CHECK_STR(local_main, user_head);
    CHECK_INT(res.local, MERGE_LOCAL_BEHIND);
    CHECK(res.local_note && strstr(res.local_note, "your checkout of main is behind: git pull"));
    CHECK(res.notes && strstr(res.notes, "your checkout of main is behind: git pull"));
    char *mine = s_read(s_repos.user, "c.txt");
    CHECK(mine && strcmp(mine, "my own edit\n") == 0);
    free(mine);
    merge_result_clear(&res);

    /* Clean but for an untracked file where the merge puts one: left alone too. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "--", "c.txt", NULL), 0);
    testgit_push_branch(s_repos.dev, "feature2", "e.c", "int e;\n");
    s_write(s_repos.user, "e.c", "mine, untracked\n");
    s_request(&req, "feature2", &calls);
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK_INT(res.local, MERGE_LOCAL_BEHIND);
    testgit_rev(s_repos.user, "main", local_main);
    CHECK_STR(local_main, user_head);
    mine = s_read(s_repos.user, "e.c");
    CHECK(mine && strcmp(mine, "mine, untracked\n") == 0);
    free(mine);
    merge_result_clear(&res);
    s_unlink(s_repos.user, "e.c");

    /* push = false: main (and the clean checkout) take the merge, the remote does not. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "feature3", "main", NULL), 0);
    testgit_commit(s_repos.user, "c.txt", "local only\n", "feature3");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_rev(s_repos.remote, "main", remote_main);
    s_request(&req, "feature3", &calls);
    req.push = false;
    CHECK_INT(merge_engine_run(&req, &res), 0);
    CHECK(!res.pushed);
    CHECK_INT(res.landed, MERGE_LANDED_LOCAL);
    CHECK_INT(res.local, MERGE_LOCAL_CHECKOUT_UPDATED);
    char remote_after[41];
    testgit_rev(s_repos.remote, "main", remote_after);
    CHECK_STR(remote_after, remote_main);
    testgit_rev(s_repos.user, "main", local_main);
    CHECK_STR(local_main, res.merge_commit);
    mine = s_read(s_repos.user, "c.txt");
    CHECK(mine && strcmp(mine, "local only\n") == 0);
    free(mine);
    merge_result_clear(&res);
    s_teardown();
}

int main(void)
{
    test_fast_forward();
    test_clean_merge_and_idempotence();
    test_conflict_resolved();
    test_rename_modify_conflict();
    test_rename_rename_conflict();
    test_conflict_refusals();
    test_resolver_branches_undone();
    test_tests_fail();
    test_remote_moves();
    test_push_refused();
    test_source_missing();
    test_source_pinned();
    test_foreign_owner();
    test_stale_lock();
    test_branch_names();
    test_local_and_worktree();
    test_local_target_behind();
    test_checkout_modes();
    return check_exit_code("test_merge_engine");
}
