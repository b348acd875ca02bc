/* How cloister-review reports agents that misbehave, through the real broker and
 * fake-claude: a hung agent (with a child of its own) stopped by the task's timeout leaves
 * no process behind; an agent that crashes and one that reports is_error with exit code 0
 * end the task failed with a clear error. Each case restarts the service, because
 * fake-claude takes its scenario from the environment the service passes on. */
#include "review_harness.h"

static void test_hung_agent_times_out_without_orphans(review_env_t *r)
{
    /* The agent starts a long sleep (in a session of its own, as Claude Code runs its Bash
     * commands) and waits for it; Bash is granted, or the agent would be refused it. */
    review_config(r, "allowed_tools = [\"Bash\"]\n");
    char actions[600];
    snprintf(actions, sizeof actions, "%s/hang.actions", r->h->env->dir);
    CHECK(testenv_write_file(actions, "run /bin/sleep 60\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    pid_t svc = review_start(r, "review-hang");
    review_submit(r, "hang", 2, NULL);
    /* The service and the broker both enforce the 2 s: whichever acts first ends it
     * (failed "timed out", or dead "lease expired" when the broker's lease check wins). */
    json_t *ended = NULL;
    for (int waited = 0; ended == NULL && waited < 15000; waited += 50) {
        harness_pump(r->h, 50);
        int i = harness_find(r->h, 0, "task.failed", "hang");
        if (i < 0)
            i = harness_find(r->h, 0, "task.dead", "hang");
        ended = i >= 0 ? r->h->events[i] : NULL;
    }
    CHECK(ended != NULL);
    if (ended != NULL) {
        const char *error = harness_field(ended, "error");
        CHECK(strstr(error, "timed out after 2 s") != NULL ||
              strstr(error, "lease of 2 s expired") != NULL);
    }
    /* Give the service's cancel a moment to stop the agent, then look. */
    harness_pump(r->h, 1000);
    /* The agent and its sleep are gone (the service remains, idle). */
    CHECK_INT(review_leftovers(r, svc, r->h->broker), 0);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    review_config(r, NULL);
}

static void test_crash(review_env_t *r)
{
    setenv("FAKE_CLAUDE_SCENARIO", "crash", 1);
    pid_t svc = review_start(r, "review-crash");
    review_submit(r, "crash", 30, NULL);
    json_t *failed = harness_wait(r->h, "task.failed", "crash", 15000);
    CHECK(failed != NULL);
    if (failed != NULL) {
        const char *error = harness_field(failed, "error");
        fprintf(stderr, "crash error: %s\n", error);
        CHECK(strncmp(error, "agent failed: ", 14) == 0);
        CHECK(strstr(error, "2") != NULL); /* the exit code */
        CHECK(json_is_false(json_object_get(review_result(failed), "agent_ok")));
    }
    CHECK_INT(harness_count(r->h, "task.done", "crash"), 0);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
}

/* A rate limit reported with exit code 0 (#79500): the run failed whatever the exit code,
 * and since the API was rate limited, the task goes back to the queue uncounted, to run
 * again later. */
static void test_is_error_with_exit_0(review_env_t *r)
{
    setenv("FAKE_CLAUDE_SCENARIO", "exit0_on_error", 1);
    pid_t svc = review_start(r, "review-exit0");
    review_submit(r, "exit0", 30, NULL);
    const json_t *back = NULL;
    for (int waited = 0; back == NULL && waited < 15000; waited += 20) {
        for (int i = 0; back == NULL && (i = harness_find(r->h, i, "task.queued", "exit0")) >= 0;
             i++)
            back = harness_field(r->h->events[i], "error")[0] ? r->h->events[i] : NULL;
        harness_pump(r->h, 20);
    }
    CHECK(back != NULL);
    fprintf(stderr, "exit0 error: %s\n", harness_field(back, "error"));
    CHECK_STR(harness_field(back, "error"),
              "the model API stayed rate limited (HTTP 429): API Error: Rate limit reached");
    CHECK(harness_int(back, "not_before") > 0);
    CHECK_INT(harness_count(r->h, "task.failed", "exit0"), 0);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
}

static void test_answer_without_verdict(review_env_t *r)
{
    setenv("FAKE_CLAUDE_RESULT", "I had a look and it seems fine.", 1);
    pid_t svc = review_start(r, "review-noverdict");
    review_submit(r, "noverdict", 30, NULL);
    json_t *failed = harness_wait(r->h, "task.failed", "noverdict", 15000);
    CHECK(failed != NULL);
    if (failed != NULL)
        CHECK(strstr(harness_field(failed, "error"), "no valid REVIEW_RESULT") != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
}

static void test_bad_workspace(review_env_t *r)
{
    pid_t svc = review_start(r, "review-badws");
    harness_submit(r->h, "nows", "review-agent", "normal", 30, 1, "{\"branch\":\"feature\"}");
    char payload[700];
    snprintf(payload, sizeof payload, "{\"workspace\":\"%s/nonexistent/repo\",\"branch\":\"feature\"}",
             r->h->env->dir);
    harness_submit(r->h, "badws", "review-agent", "normal", 30, 1, payload);
    snprintf(payload, sizeof payload, "{\"workspace\":\"%s\",\"branch\":\"no-such\"}", r->repo);
    harness_submit(r->h, "nobranch", "review-agent", "normal", 30, 1, payload);
    json_t *failed = harness_wait(r->h, "task.failed", "nows", 10000);
    CHECK(failed != NULL &&
          strcmp(harness_field(failed, "error"), "payload.workspace is required") == 0);
    failed = harness_wait(r->h, "task.failed", "badws", 10000);
    CHECK(failed != NULL &&
          strstr(harness_field(failed, "error"), "/nonexistent/repo: No such file") != NULL);
    /* Outside the workspace roots: the broker refuses it at submit. */
    harness_submit(r->h, "outside", "review-agent", "normal", 30, 1,
                   "{\"workspace\":\"/etc\",\"branch\":\"feature\"}");
    json_t *refused = harness_wait(r->h, "task.rejected", "outside", 5000);
    CHECK(refused != NULL &&
          strstr(harness_field(refused, "error"), "payload.workspace '/etc' is outside the "
                                                  "workspace roots") != NULL);
    failed = harness_wait(r->h, "task.failed", "nobranch", 10000);
    CHECK(failed != NULL &&
          strstr(harness_field(failed, "error"), "no branch 'no-such' in ") != NULL);
    CHECK(review_stop(r, svc) == 0);
}

int main(void)
{
    review_env_t *r = review_env_new("runtime-failures");
    CHECK(r != NULL);
    if (r != NULL) {
        test_hung_agent_times_out_without_orphans(r);
        test_crash(r);
        test_is_error_with_exit_0(r);
        test_answer_without_verdict(r);
        test_bad_workspace(r);
    }
    review_env_destroy(&r);
    return check_exit_code("test_runtime_failures");
}
