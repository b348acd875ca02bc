/* cloister-test's result after a fix attempt:
 *  - the rerun's report replaces the first run's entirely: when the first run failed with
 *    counts and more failures than kept, and the rerun passes without printing any counts,
 *    no count, FAILURES_TRUNCATED or failure of the first run is left in the result (they
 *    stay in FAILURES_BEFORE_FIX);
 *  - an agent command that cannot start is no fix attempt: FIX_ATTEMPTED false,
 *    FIX_RESULT NOT_ATTEMPTED, the tests are not run again, NOTES says why;
 *  - a cancel while the agent waits for its specialist's lock (held by the test) ends the
 *    job failed, no fix attempted, the tests not run again. */
#include "test_test_service_harness.h"
#include "session.h"
#include "testbroker.h"
#include "testrun.h"

/* Fails with 105 pytest failures (more than testrun keeps) unless value.txt says "good";
 * then prints a line without counts. Each run appends a line to runs.log. */
static const char *const CHECK_VALUE =
    "echo run >> runs.log\n"
    "if grep -q good value.txt; then\n"
    "  echo 'all good'\n"
    "  exit 0\n"
    "fi\n"
    "i=0\n"
    "while [ $i -lt 105 ]; do\n"
    "  echo \"FAILED tests/test_v.py::test_$i - assert 'bad' == 'good'\"\n"
    "  i=$((i + 1))\n"
    "done\n"
    "echo '========== 105 failed, 1 passed in 0.05s =========='\n"
    "exit 1\n";

/* A harness with cloister-test running as worker t1, fix = true and `agent` as the agent
 * command, and project "p" (returned in dir) whose tests run CHECK_VALUE; the fake agent
 * sets value.txt to good. NULL when the broker did not start. */
static harness_t *s_setup(const char *name, const char *agent, char *dir, size_t size)
{
    harness_t *h = harness_new(name);
    if (h == NULL)
        return NULL;
    snprintf(dir, size, "%s", tsh_file(h, "p", "value.txt", "bad\n"));
    tsh_file(h, "p", "tests.sh", CHECK_VALUE);
    tsh_file(h, "p", "Makefile", "test:\n\t@sh tests.sh\n");
    char config[1024], actions[1024], path[600];
    snprintf(config, sizeof config,
             "[agent]\ncommand = \"%s\"\n\n[specialists.test-agent]\nfix = true\n", agent);
    tsh_config(h, config);
    snprintf(actions, sizeof actions, "write %s/value.txt good\nsay NOTES: set value.txt\n",
             dir);
    snprintf(path, sizeof path, "%s/actions.txt", h->env->dir);
    CHECK(testenv_write_file(path, actions) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", path, 1);
    snprintf(path, sizeof path, "%s/userhome", h->env->dir);
    setenv("HOME", path, 1);
    snprintf(path, sizeof path, "%s/claude", h->env->dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    tsh_service(h, "t1");
    return h;
}

/* Lines in the project's runs.log: how often the tests ran. */
static int s_runs(const char *dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/runs.log", dir);
    char *text = testenv_read_file(path);
    int runs = 0;
    for (const char *p = text; p && *p; p++)
        runs += *p == '\n';
    free(text);
    return runs;
}

static void s_rerun_replaces_report(void)
{
    char dir[600];
    harness_t *h = s_setup("test-service-fix-rerun", testenv_bin("fake-claude"), dir, sizeof dir);
    if (h == NULL) {
        CHECK(h != NULL);
        return;
    }
    tsh_submit(h, "fix1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "fix1", 20000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    CHECK(json_is_true(tsh_result(end, "FIX_ATTEMPTED")));
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "SUCCESS");
    CHECK_INT(s_runs(dir), 2);
    /* Nothing of the first run's report: the rerun printed no counts. */
    static const char *const gone[] = {"TESTS_RUN", "TESTS_PASSED", "TESTS_FAILED",
                                       "TESTS_SKIPPED", "FAILURES_TRUNCATED", NULL};
    for (int i = 0; gone[i]; i++) {
        const json_t *value = tsh_result(end, gone[i]);
        if (!(value == NULL || json_is_null(value))) {
            fprintf(stderr, "%s is left from the first run\n", gone[i]);
            check_fail();
        }
    }
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES")), 0);
    CHECK_INT(tsh_result_int(end, "exit_code"), 0);
    CHECK(strstr(tsh_result_str(end, "output_tail"), "all good") != NULL);
    CHECK(strstr(tsh_result_str(end, "output_tail"), "FAILED") == NULL);
    /* The first run's failures are still told, as before the fix. */
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES_BEFORE_FIX")), TESTRUN_MAX_FAILURES);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "105 of 106 tests failed") != NULL);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "after the fix: the test command succeeded") !=
          NULL);
    harness_destroy(&h);
}

/* Waits up to timeout_ms for a progress event of `task` whose text contains `needle`. */
static bool s_wait_progress(harness_t *h, const char *task, const char *needle, int timeout_ms)
{
    for (int waited = 0;; waited += 20) {
        for (int i = 0; (i = harness_find(h, i, "task.progress", task)) >= 0; i++) {
            if (strstr(harness_field(h->events[i], "text"), needle) != NULL)
                return true;
        }
        if (waited >= timeout_ms)
            return false;
        harness_pump(h, 20);
    }
}

static void s_cancel_before_agent_starts(void)
{
    char dir[600];
    harness_t *h = s_setup("test-service-fix-cancel", testenv_bin("fake-claude"), dir, sizeof dir);
    if (h == NULL) {
        CHECK(h != NULL);
        return;
    }
    session_lock_t *lock = NULL; /* the agent waits for it */
    CHECK_INT(session_lock_try(&lock, "test-agent"), 0);
    tsh_submit(h, "fix3", 30, "{\"workspace\": \"%s\"}", dir);
    CHECK(s_wait_progress(h, "fix3", "asking the agent to fix", 10000));
    client_t *client = testbroker_client(h->env);
    wire_writer_t *cancel = wire_writer_new();
    wire_writer_start(cancel, MSG_CANCEL_TASK);
    wire_put_str(cancel, FIELD_ID, "fix3");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, cancel, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&cancel);
    client_destroy(&client);
    CHECK(harness_wait(h, "task.cancelled", "fix3", 5000) != NULL);
    session_unlock(&lock);
    /* The job ended at once, as failed (not done with the first run's FAIL). */
    char path[700];
    snprintf(path, sizeof path, "%s/specialists/test-agent/history.jsonl", h->env->home);
    char *history = NULL;
    for (int waited = 0; waited < 5000; waited += 20) {
        free(history);
        history = testenv_read_file(path);
        if (history != NULL && strstr(history, "\"task\":\"fix3\"") != NULL)
            break;
        harness_pump(h, 20);
    }
    CHECK(history != NULL && strstr(history, "\"outcome\":\"failed\"") != NULL);
    CHECK(history != NULL && strstr(history, "\"fix_attempted\":false") != NULL);
    free(history);
    CHECK_INT(s_runs(dir), 1);
    harness_destroy(&h);
}

static void s_agent_cannot_start(void)
{
    char dir[600];
    harness_t *h = s_setup("test-service-fix-nostart", "/nonexistent/claude", dir, sizeof dir);
    if (h == NULL) {
        CHECK(h != NULL);
        return;
    }
    tsh_submit(h, "fix2", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "fix2", 20000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK(json_is_false(tsh_result(end, "FIX_ATTEMPTED")));
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "NOT_ATTEMPTED");
    CHECK(tsh_result(end, "FAILURES_BEFORE_FIX") == NULL);
    CHECK_INT(tsh_result_int(end, "TESTS_FAILED"), 105);
    CHECK_INT(s_runs(dir), 1);
    const char *notes = tsh_result_str(end, "NOTES");
    CHECK(strstr(notes, "no fix attempted: the agent did not start") != NULL);
    CHECK(strstr(notes, "/nonexistent/claude") != NULL);
    harness_destroy(&h);
}

int main(void)
{
    s_rerun_replaces_report();
    s_agent_cannot_start();
    s_cancel_before_agent_starts();
    return check_exit_code("test_test_service_fix_rerun");
}
