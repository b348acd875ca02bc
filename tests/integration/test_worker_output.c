/* What cloister-worker makes of awkward command output: a NUL byte in a stdout line does
 * not hide the lines after it (it becomes U+FFFD, in the progress text and for the marker
 * parser). */
#include "worker_harness.h"

static const char *const SCRIPT =
    "case \"$CLOISTER_TASK_ID\" in\n"
    "nul) printf 'progress \\000 with a NUL\\nSTATUS: ok\\n' ;;\n"
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
    if (done == NULL)
        return;
    CHECK_STR(harness_field(json_object_get(done, "result"), "STATUS"), "ok");
    CHECK(s_has_progress(h, "nul", "progress \xEF\xBF\xBD with a NUL"));
    CHECK(s_has_progress(h, "nul", "STATUS: ok"));
}

int main(void)
{
    harness_t *h = harness_new("worker-output");
    if (h == NULL)
        return 1;
    harness_worker(h, "w1", "out-agent", SCRIPT);
    test_nul_byte(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_output");
}
