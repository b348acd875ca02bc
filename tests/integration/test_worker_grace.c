/* --grace-ms bounds how long a stopped command may take: the command gets SIGTERM and,
 * half the grace later, SIGKILL, so even a command that ignores SIGTERM is gone before the
 * skeleton gives up on the job. With a short grace the worker therefore survives such a
 * command and takes the next task. A grace too short to stop a command is a usage error. */
#include "worker_harness.h"

#include <sys/wait.h>

static const char *const SCRIPT =
    "case \"$CLOISTER_TASK_ID\" in\n"
    "stubborn) trap '' TERM; echo $$ > \"$PANOPTICON_HOME/../pid-stubborn\"; echo started;\n"
    "          while :; do sleep 0.05; done ;;\n"
    "*) echo 'STATUS: ok' ;;\n"
    "esac\n";

static void test_usage(testenv_t *env)
{
    char out[256];
    char *too_short[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "x",
                         "--grace-ms", "199", "--", "true", NULL};
    CHECK_INT(testenv_run(env, too_short, out, sizeof out, 5000), 2);
}

static void test_stubborn_command(harness_t *h)
{
    const char *const flags[] = {"--heartbeat-ms", HARNESS_HB, "--grace-ms", "300", NULL};
    pid_t worker = harness_spawn_worker(h, "wg", "grace-agent", SCRIPT, flags);
    CHECK(harness_wait_joined(h, "wg"));

    harness_submit(h, "stubborn", "grace-agent", "normal", 1, 1, NULL);
    CHECK(harness_wait(h, "task.progress", "stubborn", 5000) != NULL);
    pid_t command = harness_read_pid(h, "pid-stubborn");
    CHECK(command > 0);
    /* The worker's timeout or the broker's lease (a heartbeat later) ends the task. */
    json_t *end = NULL;
    for (int waited = 0; end == NULL && waited < 5000; waited += 20) {
        int i = harness_find(h, 0, "task.failed", "stubborn");
        if (i < 0)
            i = harness_find(h, 0, "task.dead", "stubborn");
        end = i >= 0 ? h->events[i] : NULL;
        harness_pump(h, 20);
    }
    CHECK(end != NULL);
    if (end != NULL)
        CHECK(strstr(harness_field(end, "error"), "did not stop") == NULL);
    bool gone = false;
    for (int i = 0; i < 100 && command > 0 && !gone; i++) {
        gone = harness_pid_gone(command);
        if (!gone)
            harness_pump(h, 20);
    }
    CHECK(gone);

    /* Same worker, next task: it did not exit as stuck. */
    harness_submit(h, "after", "grace-agent", "normal", 0, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "after", 5000);
    CHECK(done != NULL && strcmp(harness_field(done, "worker"), "wg") == 0);
    CHECK_INT(testenv_wait(h->env, worker, 0), -1);
    if (command > 0)
        kill(-command, SIGKILL);
}

int main(void)
{
    harness_t *h = harness_new("worker-grace");
    if (h == NULL)
        return 1;
    test_usage(h->env);
    test_stubborn_command(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_grace");
}
