/* The task's timeout stops a hung command: its whole process group is killed (the command
 * and what it started), and the task ends failed or dead saying it timed out. */
#include "worker_harness.h"

static const char *const SCRIPT =
    "sleep 60 &\n"
    "echo $! > \"$PANOPTICON_HOME/../pid-child-$CLOISTER_TASK_ID\"\n"
    "echo $$ > \"$PANOPTICON_HOME/../pid-$CLOISTER_TASK_ID\"\n"
    "echo hanging\n"
    "wait\n";

int main(void)
{
    harness_t *h = harness_new("worker-timeout");
    if (h == NULL)
        return 1;
    harness_worker(h, "w1", "hang-agent", SCRIPT);
    harness_submit(h, "h1", "hang-agent", "normal", 1, 1, NULL);
    CHECK(harness_wait(h, "task.progress", "h1", 5000) != NULL);
    pid_t command = harness_read_pid(h, "pid-h1");
    pid_t child = harness_read_pid(h, "pid-child-h1");
    CHECK(command > 0 && child > 0);
    /* Whichever notices first (the worker's timeout or the broker's lease) ends it. */
    json_t *end = NULL;
    for (int waited = 0; end == NULL && waited < 8000; waited += 20) {
        int i = harness_find(h, 0, "task.failed", "h1");
        if (i < 0)
            i = harness_find(h, 0, "task.dead", "h1");
        end = i >= 0 ? h->events[i] : NULL;
        harness_pump(h, 20);
    }
    CHECK(end != NULL);
    if (end != NULL) {
        const char *error = harness_field(end, "error");
        CHECK(strstr(error, "timed out after 1 s") != NULL || strstr(error, "lease of 1 s") != NULL);
        if (strcmp(harness_field(end, "event"), "task.failed") == 0)
            CHECK(strstr(error, "timed out after 1 s") != NULL);
    }
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = harness_pid_gone(command) && harness_pid_gone(child);
        if (!gone)
            testenv_sleep_ms(20);
    }
    CHECK(gone);
    if (command > 0)
        kill(-command, SIGKILL);
    CHECK_INT(harness_count(h, "task.done", "h1"), 0);
    harness_destroy(&h);
    return check_exit_code("test_worker_timeout");
}
