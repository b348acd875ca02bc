/* A side effect under a frozen worker happens once: `pan task fence --exec CMD` runs CMD
 * only while the attempt holds its task (read from CLOISTER_FENCE_TOKEN, which the generic
 * worker hands its command), and kills CMD's process group once it does not.
 *
 * Worker wa's command runs the side effect (appending its attempt to a file, 3 s in) under
 * `pan task fence --exec`. wa is stopped (SIGSTOP; its command runs on, in a process group
 * of its own); the broker declares wa lost and requeues the task; pan sees that attempt 1
 * no longer holds it and kills the command before the side effect. Worker wb then runs
 * attempt 2 to the end: the file holds "2" alone. A check made once, before the side
 * effect (`pan task fence ID ATTEMPT && ...`), would have let attempt 1 write too. */
#include "worker_harness.h"

static bool s_gone(void *pid)
{
    return harness_pid_gone(*(pid_t *)pid);
}

static bool s_started(void *h)
{
    return harness_read_pid(h, "started-1") > 0;
}

int main(void)
{
    harness_t *h = harness_new("fence-exec");
    CHECK(h != NULL);
    char script[2048];
    snprintf(script, sizeof script,
             "exec \"%s\" task fence --exec /bin/sh -c '"
             "echo $$ > \"$PANOPTICON_HOME/../started-$CLOISTER_TASK_ATTEMPT\"; sleep 3; "
             "echo $CLOISTER_TASK_ATTEMPT >> \"$PANOPTICON_HOME/../effect\"'",
             testenv_bin("pan"));
    pid_t wa = harness_worker(h, "wa", "fx-agent", script);
    harness_submit(h, "fx1", "fx-agent", "normal", 0, 3, NULL);
    CHECK(testenv_wait_until(s_started, h, 10000));
    pid_t command = harness_read_pid(h, "started-1");

    testenv_signal(wa, SIGSTOP);
    CHECK(harness_wait(h, "worker.lost", NULL, 5000) != NULL);
    /* pan stops the command (its whole group) well before its 3 s are up. */
    CHECK(testenv_wait_until(s_gone, &command, 2500));
    testenv_sleep_ms(3000);
    CHECK(testenv_read_file(harness_path(h, "effect")) == NULL);

    /* Attempt 2, on another worker, runs to the end. */
    harness_worker(h, "wb", "fx-agent", script);
    json_t *done = harness_wait(h, "task.done", "fx1", 15000);
    CHECK(done != NULL);
    CHECK_STR(harness_field(done, "worker"), "wb");
    char *effect = testenv_read_file(harness_path(h, "effect"));
    if (effect == NULL || strcmp(effect, "2\n") != 0)
        fprintf(stderr, "effect: %s\n", effect ? effect : "(none)");
    CHECK(effect != NULL && strcmp(effect, "2\n") == 0);
    free(effect);

    /* wa runs again: its attempt was over long ago; nothing more is written. */
    testenv_signal(wa, SIGCONT);
    testenv_sleep_ms(1000);
    effect = testenv_read_file(harness_path(h, "effect"));
    CHECK(effect != NULL && strcmp(effect, "2\n") == 0);
    free(effect);
    CHECK_INT(harness_count(h, "task.done", "fx1"), 1);
    harness_destroy(&h);
    return check_exit_code("test_fence_exec");
}
