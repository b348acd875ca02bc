/* cloister-worker with a real broker: a task's command gets the task on stdin and in
 * CLOISTER_* variables, its stdout lines arrive as task.progress events while it still
 * runs, its `KEY: value` lines end up in the task.done result (with exit_code and
 * duration_ms), a `NEXT:` line submits a next task, and a failing command gives
 * task.failed with the exit code and stderr. Also: usage errors exit 2. */
#include "worker_harness.h"

static const char *const SCRIPT =
    "input=$(cat)\n"
    "echo \"step one $CLOISTER_TASK_ID\"\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do sleep 0.02; done\n"
    "case \"$input\" in *'\"mode\":\"fail\"'*) echo 'oops: it broke' >&2; exit 1;; esac\n"
    "case \"$input\" in *\"\\\"id\\\":\\\"$CLOISTER_TASK_ID\\\"\"*) echo 'STDIN_OK: yes';; esac\n"
    "echo \"WORKSPACE_SEEN: $CLOISTER_WORKSPACE\"\n"
    "echo \"BRANCH_SEEN: $CLOISTER_BRANCH\"\n"
    "echo \"TITLE_SEEN: $CLOISTER_TITLE\"\n"
    "echo \"ATTEMPT_SEEN: $CLOISTER_TASK_ATTEMPT\"\n"
    "echo \"PRIORITY_SEEN: $CLOISTER_PRIORITY\"\n"
    "echo 'RESULT: first'\n"
    "echo '**RESULT:** SUCCESS'\n"
    "echo \"NEXT: {\\\"id\\\":\\\"$CLOISTER_TASK_ID-next\\\",\\\"specialist\\\":\\\"other-agent\\\"}\"\n"
    "echo 'NEXT: {not json'\n";

static void test_usage(testenv_t *env)
{
    char out[256];
    char *no_dash[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "x", "true", NULL};
    CHECK_INT(testenv_run(env, no_dash, out, sizeof out, 5000), 2);
    char *no_cmd[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "x", "--", NULL};
    CHECK_INT(testenv_run(env, no_cmd, out, sizeof out, 5000), 2);
    char *bad_name[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "Bad Name", "--",
                        "true", NULL};
    CHECK_INT(testenv_run(env, bad_name, out, sizeof out, 5000), 2);
    char *unknown[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "x", "--frob",
                       "--", "true", NULL};
    CHECK_INT(testenv_run(env, unknown, out, sizeof out, 5000), 2);
    char *no_specialist[] = {(char *)testenv_bin("cloister-worker"), "--", "true", NULL};
    CHECK_INT(testenv_run(env, no_specialist, out, sizeof out, 5000), 2);
    char *bad_hb[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "x",
                      "--heartbeat-ms", "fast", "--", "true", NULL};
    CHECK_INT(testenv_run(env, bad_hb, out, sizeof out, 5000), 2);
}

static void test_done_with_markers(harness_t *h)
{
    char workspace[700], payload[800];
    snprintf(workspace, sizeof workspace, "%s/ws/one", h->env->dir);
    snprintf(payload, sizeof payload, "{\"workspace\": \"%s\", \"branch\": \"feature/x\"}",
             workspace);
    harness_submit(h, "t1", "echo-agent", "high", 0, 0, payload);
    json_t *progress = harness_wait(h, "task.progress", "t1", 5000);
    CHECK(progress != NULL);
    if (progress != NULL) {
        CHECK_STR(harness_field(progress, "text"), "step one t1");
        CHECK_STR(harness_field(progress, "kind"), "output");
    }
    /* The command still runs (it waits for its go file): no result yet. */
    harness_pump(h, 200);
    CHECK_INT(harness_count(h, "task.done", "t1"), 0);
    harness_go(h, "go-t1");
    json_t *done = harness_wait(h, "task.done", "t1", 5000);
    CHECK(done != NULL);
    const json_t *result = json_object_get(done, "result");
    CHECK_STR(harness_field(result, "RESULT"), "SUCCESS");
    CHECK_STR(harness_field(result, "STDIN_OK"), "yes");
    CHECK_STR(harness_field(result, "WORKSPACE_SEEN"), workspace);
    CHECK_STR(harness_field(result, "BRANCH_SEEN"), "feature/x");
    CHECK_STR(harness_field(result, "TITLE_SEEN"), "t1");
    CHECK_STR(harness_field(result, "ATTEMPT_SEEN"), "1");
    CHECK_STR(harness_field(result, "PRIORITY_SEEN"), "high");
    CHECK(json_object_get(result, "NEXT") == NULL);
    CHECK(json_is_integer(json_object_get(result, "exit_code")));
    CHECK_INT(harness_int(result, "exit_code"), 0);
    CHECK(json_is_integer(json_object_get(result, "duration_ms")));
    /* The NEXT line became a task of its own, a child of t1; the invalid one was reported. */
    json_t *next = harness_wait(h, "task.queued", "t1-next", 3000);
    CHECK(next != NULL);
    if (next != NULL) {
        CHECK_STR(harness_field(next, "specialist"), "other-agent");
        CHECK_STR(harness_field(next, "parent"), "t1");
    }
    bool refused = false;
    for (int i = 0; (i = harness_find(h, i, "task.progress", "t1")) >= 0; i++)
        refused = refused || strstr(harness_field(h->events[i], "text"), "NEXT line refused") != NULL;
    CHECK(refused);
}

static void test_failed_command(harness_t *h)
{
    harness_go(h, "go-t2");
    harness_submit(h, "t2", "echo-agent", "normal", 0, 1, "{\"mode\": \"fail\"}");
    json_t *failed = harness_wait(h, "task.failed", "t2", 5000);
    CHECK(failed != NULL);
    const char *error = harness_field(failed, "error");
    CHECK(strstr(error, "exit code 1") != NULL);
    CHECK(strstr(error, "oops: it broke") != NULL);
    CHECK_INT(harness_int(json_object_get(failed, "result"), "exit_code"), 1);
    CHECK_INT(harness_count(h, "task.done", "t2"), 0);
}

int main(void)
{
    harness_t *h = harness_new("worker-basic");
    if (h == NULL)
        return 1;
    test_usage(h->env);
    harness_worker(h, "w1", "echo-agent", SCRIPT);
    test_done_with_markers(h);
    test_failed_command(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_basic");
}
