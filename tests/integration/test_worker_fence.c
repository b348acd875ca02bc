/* A worker that was stopped (SIGSTOP) past the broker's grace has lost its attempt: the
 * broker declared it lost and gave the task to another worker. When it runs again it stops
 * its job at once, by itself -- here the broker is frozen at that moment, so no `cancel`
 * could tell it -- and the task finishes once, on the other worker, with attempt 2.
 * `pan task fence ID ATTEMPT`, the check a command makes before a side effect, says which
 * attempt holds the task. */
#include "worker_harness.h"

static const char *const SCRIPT =
    "echo $$ > \"$PANOPTICON_HOME/../pid-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\"\n"
    "echo \"attempt $CLOISTER_TASK_ATTEMPT\"\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\" ]; do\n"
    "  sleep 0.02\n"
    "done\n"
    "echo \"RAN_ATTEMPT: $CLOISTER_TASK_ATTEMPT\"\n";

static bool s_gone(void *pid)
{
    return harness_pid_gone(*(pid_t *)pid);
}

int main(void)
{
    harness_t *h = harness_new("worker-fence");
    CHECK(h != NULL);
    pid_t wa = harness_worker(h, "wa", "fenced-agent", SCRIPT);
    harness_submit(h, "f1", "fenced-agent", "normal", 0, 3, NULL);
    CHECK(harness_wait(h, "task.progress", "f1", 5000) != NULL);
    pid_t first = harness_read_pid(h, "pid-f1-1");
    CHECK(first > 0);
    harness_worker(h, "wb", "fenced-agent", SCRIPT);

    /* wa stops (its command runs on: it is in a process group of its own); the broker
     * declares wa lost and gives the task to wb. */
    testenv_signal(wa, SIGSTOP);
    CHECK(harness_wait(h, "worker.lost", NULL, 5000) != NULL);
    json_t *second = NULL;
    for (int waited = 0; waited < 5000 && second == NULL; waited += 20) {
        for (int i = 0; (i = harness_find(h, i, "task.dispatched", "f1")) >= 0; i++)
            if (harness_int(h->events[i], "attempt") == 2)
                second = h->events[i];
        harness_pump(h, 20);
    }
    CHECK(second != NULL);
    CHECK_STR(harness_field(second, "worker"), "wb");
    /* The fencing check a command can make before a side effect: attempt 1 no longer
     * holds the task, attempt 2 does. */
    char out[4096];
    char *fence1[] = {(char *)testenv_bin("pan"), "task", "fence", "f1", "1", NULL};
    char *fence2[] = {(char *)testenv_bin("pan"), "task", "fence", "f1", "2", NULL};
    CHECK_INT(testenv_run(h->env, fence1, out, sizeof out, 10000), 1);
    CHECK_INT(testenv_run(h->env, fence2, out, sizeof out, 10000), 0);

    /* wa runs again while nobody can tell it anything: it stops attempt 1 by itself. */
    testenv_signal(h->broker, SIGSTOP);
    testenv_signal(wa, SIGCONT);
    bool stopped = testenv_wait_until(s_gone, &first, 3000);
    testenv_signal(h->broker, SIGCONT);
    CHECK(stopped);
    char path[600];
    snprintf(path, sizeof path, "%s/wa.log", h->env->dir);
    char *log = testenv_read_file(path);
    CHECK(log != NULL && strstr(log, "past the broker's grace") != NULL);
    free(log);

    harness_go(h, "go-f1-2");
    json_t *done = harness_wait(h, "task.done", "f1", 10000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(done, "worker"), "wb");
        CHECK_STR(harness_field(json_object_get(done, "result"), "RAN_ATTEMPT"), "2");
    }
    CHECK_INT(harness_count(h, "task.done", "f1"), 1);
    harness_destroy(&h);
    return check_exit_code("test_worker_fence");
}
