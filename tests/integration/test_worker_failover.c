/* Losing a worker mid-task. kill -9: the broker notices the silence, the task runs again
 * on another worker with attempt 2 and completes exactly once. SIGTERM: the worker sends
 * `release` and `bye` and exits 0 promptly, the task is requeued at once and finished by
 * another worker. Each command writes its pid so the test can prove nothing is left
 * running. */
#include "worker_harness.h"

#include <sys/wait.h>

static const char *const SCRIPT =
    "echo $$ > \"$PANOPTICON_HOME/../pid-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\"\n"
    "echo \"attempt $CLOISTER_TASK_ATTEMPT\"\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\" ]; do\n"
    "  sleep 0.02\n"
    "done\n"
    "echo \"RAN_ATTEMPT: $CLOISTER_TASK_ATTEMPT\"\n";

static void test_kill9(void)
{
    harness_t *h = harness_new("worker-kill9");
    CHECK(h != NULL);
    pid_t wa = harness_worker(h, "wa", "flaky-agent", SCRIPT);
    harness_submit(h, "k1", "flaky-agent", "normal", 0, 3, NULL);
    CHECK(harness_wait(h, "task.progress", "k1", 5000) != NULL);
    /* Only now the second worker: the first one certainly holds the task. */
    harness_worker(h, "wb", "flaky-agent", SCRIPT);
    pid_t orphan = harness_read_pid(h, "pid-k1-1");
    testenv_signal(wa, SIGKILL);
    testenv_wait(h->env, wa, 2000);
    if (orphan > 0)
        kill(-orphan, SIGKILL); /* kill -9 leaves the worker's command behind: clean it up */
    harness_go(h, "go-k1-2");
    json_t *done = harness_wait(h, "task.done", "k1", 10000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(done, "worker"), "wb");
        CHECK_INT(harness_int(done, "attempt"), 2);
        CHECK_STR(harness_field(json_object_get(done, "result"), "RAN_ATTEMPT"), "2");
    }
    json_t *lost = harness_wait(h, "worker.lost", NULL, 1000);
    CHECK(lost != NULL && strcmp(harness_field(lost, "worker"), "wa") == 0);
    harness_pump(h, 500);
    CHECK_INT(harness_count(h, "task.done", "k1"), 1);
    CHECK_INT(harness_count(h, "task.failed", "k1"), 0);
    harness_destroy(&h);
}

static void test_sigterm(void)
{
    harness_t *h = harness_new("worker-sigterm");
    CHECK(h != NULL);
    pid_t wa = harness_worker(h, "wa", "flaky-agent", SCRIPT);
    harness_submit(h, "s1", "flaky-agent", "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.progress", "s1", 5000) != NULL);
    harness_worker(h, "wb", "flaky-agent", SCRIPT);
    pid_t command = harness_read_pid(h, "pid-s1-1");
    int64_t start = clock_now_ms();
    kill(wa, SIGTERM);
    int status = testenv_wait(h->env, wa, 5000);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(clock_now_ms() - start < 3000);
    CHECK(command > 0 && harness_pid_gone(command));
    /* max_attempts 1 and yet it runs again: a release is not a failure. */
    harness_go(h, "go-s1-2");
    json_t *done = harness_wait(h, "task.done", "s1", 10000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(done, "worker"), "wb");
        CHECK_STR(harness_field(json_object_get(done, "result"), "RAN_ATTEMPT"), "2");
    }
    CHECK(harness_wait(h, "worker.left", NULL, 1000) != NULL);
    CHECK_INT(harness_count(h, "task.done", "s1"), 1);
    harness_destroy(&h);
}

int main(void)
{
    test_kill9();
    test_sigterm();
    return check_exit_code("test_worker_failover");
}
