/* cloister-review while the agent works, through the real broker and fake-claude:
 * progress streams (task.progress events of kind agent/tool arrive before task.done), and
 * a SIGTERM mid-task hands the task back so that a restarted service runs it to the end. */
#include "review_harness.h"

static void test_streaming_progress(review_env_t *r)
{
    char actions[600];
    snprintf(actions, sizeof actions, "%s/progress.actions", r->h->env->dir);
    CHECK(testenv_write_file(actions, "write notes.txt looked at the diff\n"
                                      "say Reviewing the query change.\n"
                                      "say REVIEW_RESULT: APPROVED\n"
                                      "say FINDINGS: none\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    setenv("FAKE_CLAUDE_DELAY_MS", "300", 1);
    pid_t svc = review_start(r, "review-progress");
    review_submit(r, "p1", 30, NULL);
    json_t *done = harness_wait(r->h, "task.done", "p1", 20000);
    CHECK(done != NULL);
    int done_at = harness_find(r->h, 0, "task.done", "p1");
    int tool = -1, text = -1;
    for (int i = 0; (i = harness_find(r->h, i, "task.progress", "p1")) >= 0; i++) {
        const char *kind = harness_field(r->h->events[i], "kind");
        if (tool < 0 && strcmp(kind, "tool") == 0 &&
            strstr(harness_field(r->h->events[i], "text"), "Write") != NULL)
            tool = i;
        if (text < 0 && strcmp(kind, "agent") == 0 &&
            strstr(harness_field(r->h->events[i], "text"), "Reviewing the query") != NULL)
            text = i;
    }
    CHECK(tool >= 0 && tool < done_at);
    CHECK(text >= 0 && text < done_at);
    /* Streamed, not batched: the tool event was published well before the end. */
    if (tool >= 0 && done_at >= 0)
        CHECK(harness_int(r->h->events[done_at], "time") -
                  harness_int(r->h->events[tool], "time") >=
              300);
    if (done != NULL) {
        CHECK_STR(harness_field(review_result(done), "REVIEW_RESULT"), "APPROVED");
        CHECK(harness_int(review_result(done), "turns") >= 1);
        CHECK(harness_int(review_result(done), "output_tokens") > 0);
    }
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
}

static void test_sigterm_mid_task(review_env_t *r)
{
    setenv("FAKE_CLAUDE_DELAY_MS", "400", 1);
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    char actions[600];
    snprintf(actions, sizeof actions, "%s/slow.actions", r->h->env->dir);
    CHECK(testenv_write_file(actions, "sleep 2000\nsay done\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    pid_t first = review_start(r, "review-a");
    review_submit(r, "t1", 60, NULL);
    CHECK(harness_wait(r->h, "task.progress", "t1", 10000) != NULL);
    CHECK(review_stop(r, first) == 0);
    CHECK_INT(harness_count(r->h, "task.done", "t1"), 0);
    /* Nothing of the first service's agent is left. */
    CHECK_INT(review_leftovers(r, r->h->broker, 0), 0);

    unsetenv("FAKE_CLAUDE_ACTIONS");
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    pid_t second = review_start(r, "review-b");
    json_t *done = harness_wait(r->h, "task.done", "t1", 20000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(done, "worker"), "review-b");
        CHECK_STR(harness_field(review_result(done), "REVIEW_RESULT"), "APPROVED");
    }
    CHECK_INT(harness_count(r->h, "task.failed", "t1"), 0);
    CHECK(review_stop(r, second) == 0);
    review_clear_fake_env();
}

int main(void)
{
    review_env_t *r = review_env_new("runtime-progress");
    CHECK(r != NULL);
    if (r != NULL) {
        test_streaming_progress(r);
        test_sigterm_mid_task(r);
    }
    review_env_destroy(&r);
    return check_exit_code("test_runtime_progress");
}
