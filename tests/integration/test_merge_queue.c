/* test_merge_queue: the merge queue end to end (services/merge/merge_queue.h). A real
 * broker (worker_harness.h), several real cloister-merge processes, real repositories
 * (testgit.h: a bare remote, the user's clone, a dev clone) and a test suite that is a
 * shell script: it logs "start <commit>" and, after sleeping, "pass <commit>" or
 * "fail <commit>" (it fails when the tree holds a file named BREAK). From that log and the
 * remote's history each scenario checks the queue's promises:
 *   - every commit main's first-parent history gained was tested exactly as it is, and
 *     passed (nothing untested lands, nothing lands twice);
 *   - candidates are tested in parallel (several runs start before the first one ends);
 *   - a failing branch is ejected with the failing test named, its candidate kept as a
 *     ref, and the branches behind it land without it;
 *   - kill -9 of a merge-agent or of the broker mid-queue changes none of that. */
#include "pan_harness.h"
#include "testgit.h"
#include "worker_harness.h"

#include <sys/wait.h>

static harness_t *s_h;
static testgit_fixture_t s_repos;
static char s_log[600];

/* The suite: `sleep_s` seconds, and a failure on a tree with BREAK. */
static void s_setup(const char *name, int sleep_s)
{
    char script_path[600], script[2048], config[4096];
    s_h = NULL;
    /* The broker's settings now; the merge-agents' once the test directory is known. */
    harness_t *h = harness_new_config(
        name, "[broker]\nretry_backoff_ms = 50\n\n[security]\nrequire_review = false\n");
    CHECK(h != NULL);
    if (h == NULL)
        return;
    snprintf(s_log, sizeof s_log, "%s/tests.log", h->env->dir);
    snprintf(script_path, sizeof script_path, "%s/tests.sh", h->env->dir);
    snprintf(script, sizeof script,
             "h=$(git rev-parse HEAD)\n"
             "echo \"start $h\" >> '%s'\n"
             "sleep %d\n"
             "if [ -e BREAK ]; then echo \"fail $h\" >> '%s'; "
             "echo 'FAILED test_no_break: BREAK is in the tree'; exit 1; fi\n"
             "echo \"pass $h\" >> '%s'\n"
             "echo '1 passed'\n",
             s_log, sleep_s, s_log, s_log);
    CHECK(testenv_write_file(script_path, script) == 0);
    snprintf(config, sizeof config,
             "[broker]\nretry_backoff_ms = 50\n\n[agent]\ncommand = \"%s\"\n\n"
             "[security]\nrequire_review = false\n\n[tests]\nsandbox = \"none\"\n\n"
             "[specialists.merge-agent]\ntest_command = \"sh %s\"\n",
             testenv_bin("fake-claude"), script_path);
    char path[700];
    snprintf(path, sizeof path, "%s/cloister.toml", h->env->home);
    CHECK(testenv_write_file(path, config) == 0);
    snprintf(path, sizeof path, "%s/home", h->env->dir);
    testgit_env(path);
    snprintf(path, sizeof path, "%s/claude", h->env->dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    unsetenv("CLOISTER_AGENT_COMMAND");
    unsetenv("FAKE_CLAUDE_ACTIONS");
    testgit_fixture(&s_repos, h->env->dir);
    s_h = h;
}

static pid_t s_start_merge(const char *id)
{
    return harness_service(s_h, "cloister-merge", id, 2000, NULL);
}

/* Submits the merge of `branch` into main as task `id` (no group: the queue orders it). */
static void s_submit(const char *id, const char *branch, const char *priority)
{
    char payload[1200];
    snprintf(payload, sizeof payload,
             "{\"workspace\": \"%s\", \"branch\": \"%s\", \"target\": \"main\"}", s_repos.user,
             branch);
    harness_submit(s_h, id, "merge-agent", priority, 120, 0, payload);
}

/* Waits for the end of task `id`; returns "task.done", "task.failed" or "" (timeout). */
static const char *s_wait_end(const char *id, int timeout_ms, json_t **event)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        int i = harness_find(s_h, 0, "task.done", id);
        if (i < 0)
            i = harness_find(s_h, 0, "task.failed", id);
        if (i >= 0) {
            if (event != NULL)
                *event = s_h->events[i];
            return harness_field(s_h->events[i], "event");
        }
        harness_pump(s_h, 20);
    }
    fprintf(stderr, "task %s did not end\n", id);
    return "";
}

/* True when the suite's log has the line "<what> <commit>". */
static bool s_logged(const char *what, const char *commit)
{
    char *log = testenv_read_file(s_log);
    char line[128];
    snprintf(line, sizeof line, "%s %s\n", what, commit);
    bool found = log != NULL && strstr(log, line) != NULL;
    free(log);
    return found;
}

/* Every commit on the remote main's first-parent history after `old` passed the suite
 * exactly as it is; returns how many there are (-1 when one did not). */
static int s_first_parents_tested(const char *old)
{
    char range[100];
    snprintf(range, sizeof range, "%s..refs/heads/main", old);
    CHECK_INT(testgit_run(s_repos.remote, "rev-list", "--first-parent", range, NULL), 0);
    char *list = strdup(testgit_out());
    int n = 0;
    for (char *c = strtok(list, "\n"); c != NULL; c = strtok(NULL, "\n")) {
        if (!s_logged("pass", c)) {
            fprintf(stderr, "main holds %s, which never passed the suite as it is\n", c);
            n = -1;
            break;
        }
        n++;
    }
    free(list);
    return n;
}

/* Runs of the suite that started before the first one ended. */
static int s_parallel_starts(void)
{
    char *log = testenv_read_file(s_log);
    int starts = 0;
    for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "start ", 6) != 0)
            break;
        starts++;
    }
    free(log);
    return starts;
}

static bool s_on_main(const char *branch)
{
    char ref[200];
    snprintf(ref, sizeof ref, "refs/heads/%s", branch);
    return testgit_run(s_repos.remote, "merge-base", "--is-ancestor", ref, "refs/heads/main",
                       NULL) == 0;
}

static void s_teardown(void)
{
    harness_destroy(&s_h);
}

/* Five branches, the third breaking the suite, three merge-agents: candidates tested side
 * by side, the bad branch ejected with its test named and its candidate kept, the four
 * others landed, and main's every new first-parent commit tested as it is. */
static void test_parallel_and_eject(void)
{
    s_setup("mq-parallel", 2);
    if (s_h == NULL)
        return;
    const char *branches[] = {"feature/a", "feature/b", "feature/bad", "feature/d", "feature/e"};
    for (int i = 0; i < 5; i++) {
        char file[32];
        snprintf(file, sizeof file, "f%d.c", i);
        testgit_push_branch(s_repos.user, branches[i], i == 2 ? "BREAK" : file, "int x;\n");
    }
    char old[41];
    testgit_rev(s_repos.remote, "refs/heads/main", old);
    s_start_merge("merge-1");
    s_start_merge("merge-2");
    s_start_merge("merge-3");
    int64_t start = clock_now_ms();
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        s_submit(id, branches[i], "normal");
    }
    json_t *bad = NULL;
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "q%d", i);
        json_t *event = NULL;
        const char *end = s_wait_end(id, 60000, &event);
        CHECK_STR(end, i == 2 ? "task.failed" : "task.done");
        if (i == 2)
            bad = event;
    }
    fprintf(stderr, "5 merges (one bad), 3 merge-agents, 2 s suite: all decided in %lld ms\n",
            (long long)(clock_now_ms() - start));
    CHECK(bad != NULL && strstr(harness_field(bad, "error"), "tests failed on candidate") != NULL);
    CHECK(bad != NULL && strstr(harness_field(bad, "error"), "test_no_break") != NULL);
    for (int i = 0; i < 5; i++)
        CHECK(s_on_main(branches[i]) == (i != 2));
    CHECK_INT(s_first_parents_tested(old), 4);
    CHECK(s_parallel_starts() >= 2);
    /* The bad candidate is kept for inspection, and holds the bad branch. */
    CHECK_INT(testgit_run(s_repos.user, "for-each-ref", "--format=%(refname)",
                          "refs/cloister-queue/", NULL),
              0);
    char kept[200];
    snprintf(kept, sizeof kept, "%s", testgit_out());
    kept[strcspn(kept, "\n")] = '\0';
    CHECK(kept[0] != '\0' && strchr(testgit_out(), '\n') == strrchr(testgit_out(), '\n'));
    CHECK_INT(testgit_run(s_repos.user, "cat-file", "-e", "refs/heads/feature/bad", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "merge-base", "--is-ancestor", "refs/heads/feature/bad",
                          kept, NULL),
              0);
    s_teardown();
}

/* kill -9 of `victim` (a merge-agent, or the broker when `broker`) once the suite has
 * started twice; a fresh merge-agent joins (or the broker restarts). Every merge still
 * lands once, every new first-parent commit of main was tested as it is. */
static void s_killed(const char *name, bool broker)
{
    s_setup(name, 2);
    if (s_h == NULL)
        return;
    const char *branches[] = {"feature/a", "feature/b", "feature/c", "feature/d"};
    for (int i = 0; i < 4; i++) {
        char file[32];
        snprintf(file, sizeof file, "k%d.c", i);
        testgit_push_branch(s_repos.user, branches[i], file, "int k;\n");
    }
    char old[41];
    testgit_rev(s_repos.remote, "refs/heads/main", old);
    pid_t first = s_start_merge("merge-1");
    s_start_merge("merge-2");
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "k%d", i);
        s_submit(id, branches[i], "normal");
    }
    for (int waited = 0; waited < 20000 && s_parallel_starts() < 2; waited += 20)
        harness_pump(s_h, 20);
    CHECK(s_parallel_starts() >= 2);
    if (broker) {
        kill(s_h->broker, SIGKILL);
        CHECK(testenv_wait(s_h->env, s_h->broker, 5000) >= 0);
        s_h->broker = testbroker_start(s_h->env, atoi(HARNESS_HB), NULL);
        CHECK(s_h->broker > 0);
    } else {
        kill(first, SIGKILL);
        CHECK(testenv_wait(s_h->env, first, 5000) >= 0);
        s_start_merge("merge-3");
    }
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "k%d", i);
        CHECK_STR(s_wait_end(id, 90000, NULL), "task.done");
        CHECK(s_on_main(branches[i]));
    }
    CHECK_INT(s_first_parents_tested(old), 4);
    s_teardown();
}

/* pan merge-queue pause freezes the queue (nothing is built or tested, nothing lands),
 * pan merge-queue shows it, resume lets the merge land -- a branch of two commits as one
 * merge commit, the only commit main's first-parent history gains. */
static void test_pause_resume(void)
{
    s_setup("mq-pause", 1);
    if (s_h == NULL)
        return;
    static char out[PAN_OUT_SIZE];
    /* Two commits: landed as one merge commit, so that main gains no untested commit. */
    testgit_push_branch(s_repos.user, "feature/p", "p.c", "int p;\n");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "feature/p", NULL), 0);
    testgit_commit(s_repos.user, "p2.c", "int p2;\n", "second");
    CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", "feature/p", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    char old[41], now[41];
    testgit_rev(s_repos.remote, "refs/heads/main", old);
    s_start_merge("merge-1");
    CHECK_INT(harness_pan(s_h->env, out, "merge-queue", "pause", s_repos.user, "main", NULL), 0);
    CHECK(strstr(out, "paused") != NULL);
    s_submit("p1", "feature/p", "normal");
    harness_pump(s_h, 2500);
    CHECK_INT(harness_count(s_h, "task.done", "p1"), 0);
    CHECK(s_parallel_starts() == 0);
    testgit_rev(s_repos.remote, "refs/heads/main", now);
    CHECK_STR(now, old);
    CHECK_INT(harness_pan(s_h->env, out, "merge-queue", s_repos.user, NULL), 0);
    CHECK(strstr(out, "into main (paused): 1 queued") != NULL);
    CHECK(strstr(out, "feature/p") != NULL && strstr(out, "waiting") != NULL);
    CHECK_INT(harness_pan(s_h->env, out, "merge-queue", "resume", s_repos.user, "main", NULL), 0);
    CHECK_STR(s_wait_end("p1", 20000, NULL), "task.done");
    CHECK(s_on_main("feature/p"));
    CHECK_INT(s_first_parents_tested(old), 1);
    CHECK_INT(harness_pan(s_h->env, out, "merge-queue", NULL), 0);
    CHECK(strstr(out, "0 queued, 1 landed, 0 ejected, 1 test runs (1.00 per landed merge)") !=
          NULL);
    CHECK(strstr(out, "landed") != NULL);
    /* A repository that is none is a clear error. */
    CHECK_INT(harness_pan_all(s_h->env, out, "merge-queue", s_h->env->home, NULL), 1);
    CHECK(strstr(out, "is not in a git repository") != NULL);
    s_teardown();
}

static void test_merge_agent_killed(void)
{
    s_killed("mq-agent-kill", false);
}

static void test_broker_killed(void)
{
    s_killed("mq-broker-kill", true);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } scenarios[] = {
        {"parallel_and_eject", test_parallel_and_eject},
        {"pause_resume", test_pause_resume},
        {"merge_agent_killed", test_merge_agent_killed},
        {"broker_killed", test_broker_killed},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        bool wanted = argc < 2;
        for (int j = 1; j < argc; j++)
            wanted = wanted || strcmp(argv[j], scenarios[i].name) == 0;
        if (wanted)
            scenarios[i].run();
    }
    return check_exit_code("test_merge_queue");
}
