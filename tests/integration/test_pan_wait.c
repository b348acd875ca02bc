/* pan submit --wait and pan task wait: an agent publishes a task and gets its answer in one
 * command — progress on stderr while it runs, the result on stdout, exit 0 when done, 1
 * when failed, 4 when the time ran out; a task already over answers at once. */
#include "worker_harness.h"

#include <stdarg.h>

static char s_out[65536];

/* Runs pan with the arguments (NULL-terminated), stdout and stderr into s_out. */
static int s_pan(harness_t *h, const char *first, ...)
{
    char *argv[40];
    int n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = "exec \"$0\" \"$@\" 2>&1";
    argv[n++] = (char *)testenv_bin("pan");
    argv[n++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && n < 39)
        argv[n++] = arg;
    va_end(args);
    argv[n] = NULL;
    return testenv_run(h->env, argv, s_out, sizeof s_out, 30000);
}

int main(void)
{
    harness_t *h = harness_new("pan-wait");
    if (h == NULL)
        return 1;
    harness_worker(h, "w-ok", "echo-agent",
                   "echo 'working on it'; sleep 0.3; echo 'VERDICT: fine'; echo 'NOTES: two\\nlines'");
    harness_worker(h, "w-bad", "broken-agent", "echo 'about to fail'; exit 3");

    CHECK_INT(s_pan(h, "submit", "echo-agent", "--id", "wait-1", "--wait", NULL), 0);
    CHECK(strstr(s_out, "[wait-1] ") != NULL && strstr(s_out, "working on it") != NULL);
    CHECK(strstr(s_out, "wait-1: done\n") != NULL);
    CHECK(strstr(s_out, "VERDICT: fine") != NULL);

    CHECK_INT(s_pan(h, "submit", "broken-agent", "--id", "wait-2", "--max-attempts", "1", "--wait",
                    NULL),
              1);
    CHECK(strstr(s_out, "wait-2: failed: ") != NULL || strstr(s_out, "wait-2: dead: ") != NULL);
    CHECK(strstr(s_out, "`pan retry wait-2` runs it again") != NULL);
    CHECK(strstr(s_out, "exit code 3") != NULL);

    /* Over already: at once, as JSON with --json. */
    CHECK_INT(s_pan(h, "task", "wait", "wait-1", "--json", NULL), 0);
    json_t *task = json_loads(s_out, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK_STR(harness_field(task, "state"), "done");
    json_decref(task);

    /* Nobody takes it: the wait times out. */
    CHECK_INT(s_pan(h, "submit", "review-agent", "--workspace", h->env->dir, "--id", "wait-3", NULL), 0); /* no worker */
    CHECK_INT(s_pan(h, "task", "wait", "wait-3", "--timeout", "1", NULL), 4);
    CHECK(strstr(s_out, "1 of 1 task still running after 1 s") != NULL);

    harness_destroy(&h);
    return check_exit_code("test_pan_wait");
}
