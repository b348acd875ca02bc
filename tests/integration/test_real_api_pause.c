/* What a failing model API does to tasks and specialists, with the real Claude Code CLI
 * against the scripted model, through the broker and cloister-review:
 *  - the key refused (401): the CLI is stopped at its first retry; the task goes back to
 *    the queue uncounted ("the model API refused the key"), the broker pauses the
 *    review-agent (specialist.paused; `pan status` and `pan specialists list` say so) and
 *    dispatches none of its tasks; `pan doctor` fails while the key is still refused, then,
 *    once it works again, passes and resumes the specialist, and the task runs to the end
 *    (max_attempts 1: a counted failure would have ended it);
 *  - rate limited (429) until the CLI gives up: each retry a progress line, the task back
 *    in the queue uncounted, due again after the CLI's retry delay, and done once the API
 *    answers; the specialist is not paused;
 *  - `pan specialists resume` lifts a pause by hand. */
#include "real_harness.h"

static const char *const s_refused = "{\"rules\": [{\"name\": \"refused\", \"steps\": [{\"error\": "
                                     "{\"status\": 401, \"message\": \"invalid x-api-key\"}}]}]}";
static const char *const s_limited =
    "{\"rules\": [{\"name\": \"limited\", \"steps\": [{\"error\": {\"status\": 429, "
    "\"message\": \"rate limited\"}, \"retry_after\": 1}]}]}";
static const char *const s_answers =
    "{\"rules\": [{\"name\": \"answers\", \"steps\": [{\"text\": \"REVIEW_RESULT: APPROVED\\n"
    "FINDINGS: none\"}]}]}";

static char s_out[65536];

static void s_submit(real_env_t *r, const char *id)
{
    char payload[1024];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"feature/k\",\"target\":\"main\"}",
             r->repos.user);
    harness_submit(r->h, id, "review-agent", "normal", 60, 1, payload);
}

/* Runs pan with `args` (NULL-terminated); its exit code, stdout in s_out. */
static int s_pan(real_env_t *r, const char *const *args)
{
    char *argv[16] = {(char *)testenv_bin("pan")};
    int n = 1;
    for (int i = 0; args[i] != NULL && n < 15; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    return testenv_run(r->h->env, argv, s_out, sizeof s_out, 60000);
}

/* The task.queued event of task `id` that says why it came back (it has an error). */
static const json_t *s_requeued(real_env_t *r, const char *id, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        for (int i = 0; (i = harness_find(r->h, i, "task.queued", id)) >= 0; i++) {
            if (harness_field(r->h->events[i], "error")[0] != '\0')
                return r->h->events[i];
        }
        harness_pump(r->h, 20);
    }
    return NULL;
}

static void test_key_refused(real_env_t *r)
{
    testmodel_write(&r->model, s_refused);
    int64_t start = clock_now_ms();
    s_submit(r, "key-1");
    const json_t *back = s_requeued(r, "key-1", 30000);
    CHECK(back != NULL);
    CHECK(strncmp(harness_field(back, "error"), "the model API refused the key (HTTP 401", 39) ==
          0);
    CHECK(clock_now_ms() - start < 15000);
    CHECK(harness_wait(r->h, "specialist.paused", NULL, 5000) != NULL);
    CHECK(real_progress_has(r, "key-1", "model API refused the key (HTTP 401"));
    json_t *requests = testmodel_requests_of(&r->model, "refused");
    CHECK(json_array_size(requests) <= 2); /* stopped at the CLI's first retry */
    json_decref(requests);

    /* Paused: the task waits, `pan status` and `pan specialists list` say why. */
    harness_pump(r->h, 1500);
    CHECK_INT(harness_count(r->h, "task.dispatched", "key-1"), 1);
    CHECK_INT(s_pan(r, (const char *[]){"status", NULL}), 0);
    CHECK(strstr(s_out, "PAUSED: review-agent takes no task until `pan specialists resume "
                        "review-agent`") != NULL);
    CHECK(strstr(s_out, "the model API refused the key") != NULL);
    CHECK_INT(s_pan(r, (const char *[]){"specialists", "list", NULL}), 0);
    CHECK(strstr(s_out, "Status: paused") != NULL);

    /* pan doctor tries the model API: still refused, it fails and resumes nothing. */
    CHECK_INT(s_pan(r, (const char *[]){"doctor", NULL}), 1);
    CHECK(strstr(s_out, "✗ model API      review-agent stays paused: the model API refused "
                        "the key") != NULL);
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.dispatched", "key-1"), 1);

    /* The key works again: pan doctor passes and resumes it; the task runs to the end. */
    testmodel_write(&r->model, s_answers);
    int code = s_pan(r, (const char *[]){"doctor", NULL});
    if (code != 0)
        fprintf(stderr, "pan doctor:\n%s\n", s_out);
    CHECK_INT(code, 0);
    CHECK(strstr(s_out, "✓ model API      review-agent") != NULL);
    CHECK(strstr(s_out, "✓ resumed        review-agent") != NULL);
    CHECK(harness_wait(r->h, "specialist.resumed", NULL, 5000) != NULL);
    json_t *end = real_wait_end(r, "key-1", 60000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_INT(harness_int(end, "attempt"), 2);
}

static void test_rate_limited(real_env_t *r)
{
    testmodel_write(&r->model, s_limited);
    s_submit(r, "busy-1");
    const json_t *back = s_requeued(r, "busy-1", 30000);
    CHECK(back != NULL);
    CHECK(strstr(harness_field(back, "error"), "the model API stayed rate limited (HTTP 429) "
                                               "through 2 retries") != NULL);
    CHECK(harness_int(back, "not_before") > 0);
    CHECK(real_progress_has(r, "busy-1", "model API rate limited (HTTP 429 rate_limit): retry 1 "
                                         "of 2 in 1 s"));
    CHECK_INT(harness_count(r->h, "specialist.paused", NULL), 1); /* the earlier one only */
    testmodel_write(&r->model, s_answers);
    json_t *end = real_wait_end(r, "busy-1", 60000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_INT(harness_int(end, "attempt"), 2);
}

/* A person resumes a paused specialist by hand. */
static void test_resume_by_hand(real_env_t *r)
{
    testmodel_write(&r->model, s_refused);
    s_submit(r, "key-2");
    CHECK(s_requeued(r, "key-2", 30000) != NULL);
    for (int waited = 0; harness_count(r->h, "specialist.paused", NULL) < 2 && waited < 5000;
         waited += 20)
        harness_pump(r->h, 20);
    CHECK_INT(harness_count(r->h, "specialist.paused", NULL), 2);
    testmodel_write(&r->model, s_answers);
    CHECK_INT(s_pan(r, (const char *[]){"specialists", "resume", "review-agent", NULL}), 0);
    CHECK(strstr(s_out, "✓ Resumed review-agent (it was paused: the model API refused the key") !=
          NULL);
    json_t *end = real_wait_end(r, "key-2", 60000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_INT(s_pan(r, (const char *[]){"specialists", "resume", "review-agent", NULL}), 0);
    CHECK(strstr(s_out, "✓ review-agent was not paused") != NULL);
}

int main(void)
{
    real_env_t *r = real_env_new("real-api-pause", "review.json", NULL);
    testgit_push_branch(r->repos.user, "feature/k", "a.c", "int a(void) { return 5; }\n");
    harness_service(r->h, "cloister-review", "review-1", 3000, NULL);
    test_key_refused(r);
    test_rate_limited(r);
    test_resume_by_hand(r);
    real_env_destroy(&r);
    return check_exit_code("test_real_api_pause");
}
