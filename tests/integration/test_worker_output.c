/* What cloister-worker makes of awkward command output: a NUL byte in a stdout line does
 * not hide the lines after it (it becomes U+FFFD, in the progress text and for the marker
 * parser); CRLF line ends leave no '\r' in progress texts; a failed command's error quotes
 * one line of its stderr, the last non-empty one, trimmed. */
#include "worker_harness.h"

static const char *const SCRIPT =
    "case \"$CLOISTER_TASK_ID\" in\n"
    "nul) printf 'progress \\000 with a NUL\\nSTATUS: ok\\n' ;;\n"
    "crlf) printf 'line one\\r\\nRESULT: fine\\r\\n' ;;\n"
    "stderr) printf 'first problem\\n  last problem \\r\\n\\n \\n' >&2; exit 3 ;;\n"
    "esac\n";

/* True if some task.progress event of `task` has exactly `text`. */
static bool s_has_progress(harness_t *h, const char *task, const char *text)
{
    for (int i = 0; (i = harness_find(h, i, "task.progress", task)) >= 0; i++) {
        if (strcmp(harness_field(h->events[i], "text"), text) == 0)
            return true;
    }
    return false;
}

static void test_nul_byte(harness_t *h)
{
    harness_submit(h, "nul", "out-agent", "normal", 0, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "nul", 5000);
    CHECK(done != NULL);
    CHECK_STR(harness_field(json_object_get(done, "result"), "STATUS"), "ok");
    CHECK(s_has_progress(h, "nul", "progress \xEF\xBF\xBD with a NUL"));
    CHECK(s_has_progress(h, "nul", "STATUS: ok"));
}

static void test_crlf(harness_t *h)
{
    harness_submit(h, "crlf", "out-agent", "normal", 0, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "crlf", 5000);
    CHECK(done != NULL);
    CHECK_STR(harness_field(json_object_get(done, "result"), "RESULT"), "fine");
    CHECK(s_has_progress(h, "crlf", "line one"));
    CHECK(s_has_progress(h, "crlf", "RESULT: fine"));
}

static void test_stderr_quote(harness_t *h)
{
    harness_submit(h, "stderr", "out-agent", "normal", 0, 1, NULL);
    json_t *failed = harness_wait(h, "task.failed", "stderr", 5000);
    CHECK(failed != NULL);
    if (failed != NULL)
        CHECK_STR(harness_field(failed, "error"), "exit code 3: last problem");
}

int main(void)
{
    harness_t *h = harness_new("worker-output");
    if (h == NULL)
        return 1;
    harness_worker(h, "w1", "out-agent", SCRIPT);
    test_nul_byte(h);
    test_crlf(h);
    test_stderr_quote(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_output");
}
