/* pan top in a real terminal: tmux runs it (a pty of 150x45), the test reads the screen with
 * `tmux capture-pane`. The view shows the specialist and its busy worker, the running task
 * with its last progress line soon after the worker said it, the queue depths, and, once the
 * task ended, the done counter and an empty running list; a failed task appears among
 * the recent failures with its error. Piped (not a terminal), frames follow one another ending with "----". */
#include "worker_harness.h"

#include <stdarg.h>

static char s_screen[65536];
static char s_socket[600];

static int s_tmux(harness_t *h, const char *first, ...)
{
    char *argv[24];
    int n = 0;
    argv[n++] = "/usr/bin/env";
    argv[n++] = "tmux";
    argv[n++] = "-S";
    argv[n++] = s_socket;
    argv[n++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && n < 23)
        argv[n++] = arg;
    va_end(args);
    argv[n] = NULL;
    return testenv_run(h->env, argv, s_screen, sizeof s_screen, 10000);
}

/* Waits up to `ms` until the screen shows every one of the NULL-terminated texts. */
static bool s_screen_shows(harness_t *h, int ms, ...)
{
    for (int waited = 0; waited <= ms; waited += 100) {
        harness_pump(h, 0);
        CHECK_INT(s_tmux(h, "capture-pane", "-p", "-t", "top", NULL), 0);
        bool all = true;
        va_list args;
        va_start(args, ms);
        const char *text;
        while ((text = va_arg(args, const char *)) != NULL)
            all = all && strstr(s_screen, text) != NULL;
        va_end(args);
        if (all)
            return true;
        testenv_sleep_ms(100);
    }
    fprintf(stderr, "the screen:\n%s\n", s_screen);
    return false;
}

#define SCRIPT                                                                              \
    "echo 'step one of the work'\n"                                                         \
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do sleep 0.02; done\n"    \
    "echo 'VERDICT: fine'\n"

int main(void)
{
    harness_t *h = harness_new("pan-top");
    CHECK(h != NULL);
    snprintf(s_socket, sizeof s_socket, "%s/tmux.sock", h->env->dir);
    harness_worker(h, "w-top", "echo-agent", SCRIPT);
    harness_submit(h, "top-task", "echo-agent", "normal", 0, 0, NULL);
    CHECK(harness_wait(h, "task.progress", "top-task", 10000) != NULL);
    harness_submit(h, "waiting-task", "echo-agent", "high", 0, 0, NULL);
    CHECK(harness_wait(h, "task.queued", "waiting-task", 10000) != NULL);

    char command[1024];
    snprintf(command, sizeof command, "exec '%s' top --interval 0.2", testenv_bin("pan"));
    CHECK_INT(s_tmux(h, "new-session", "-d", "-s", "top", "-x", "150", "-y", "45", command, NULL),
              0);
    CHECK(s_screen_shows(h, 10000, "SPECIALIST", "echo-agent", "RUNNING (1)", "top-task",
                         "w-top", "step one of the work", "RECENT FAILURES", NULL));
    /* The queue: one high task waits behind the running one. */
    CHECK(strstr(s_screen, "QUEUE") != NULL);

    /* It ends: the view follows, the next task runs. */
    harness_go(h, "go-top-task");
    CHECK(harness_wait(h, "task.done", "top-task", 10000) != NULL);
    CHECK(s_screen_shows(h, 10000, "waiting-task", "RUNNING (1)", NULL));
    harness_go(h, "go-waiting-task");
    CHECK(harness_wait(h, "task.done", "waiting-task", 10000) != NULL);
    CHECK(s_screen_shows(h, 10000, "RUNNING (0)", "completed 2", NULL));
    CHECK(strstr(s_screen, "top-task") == NULL);
    harness_worker(h, "w-broken", "broken-agent", "echo 'about to fail'; exit 3");
    harness_submit(h, "broken-task", "broken-agent", "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.failed", "broken-task", 10000) != NULL);
    CHECK(s_screen_shows(h, 10000, "broken-task", "failed", "broken-agent", "exit code 3", NULL));
    CHECK_INT(s_tmux(h, "kill-server", NULL), 0);

    /* Not a terminal: frames one after the other. */
    char *argv[] = {(char *)testenv_bin("pan"), "top", "--interval", "0.1", "--frames", "2", NULL};
    CHECK_INT(testenv_run(h->env, argv, s_screen, sizeof s_screen, 10000), 0);
    char *first = strstr(s_screen, "----\n");
    CHECK(first != NULL && strstr(first + 5, "----\n") != NULL);
    CHECK(strstr(s_screen, "\033[") == NULL);
    char *bad[] = {(char *)testenv_bin("pan"), "top", "--interval", "0", NULL};
    CHECK_INT(testenv_run(h->env, bad, s_screen, sizeof s_screen, 10000), 2);

    harness_destroy(&h);
    return check_exit_code("test_pan_top");
}
