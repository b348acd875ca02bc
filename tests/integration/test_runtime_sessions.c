/* The review-agent's agent session across tasks, through the real broker, cloister-review
 * and fake-claude: the first task starts a fresh session (--session-id X), the second
 * resumes it (--resume X), and after the transcript is deleted the third falls back to a
 * fresh session (a new --session-id) and says why in a task.progress event of kind
 * "session". */
#include "review_harness.h"

#include "agent.h"

static void test_fresh_resumed_fallback(void)
{
    review_env_t *r = review_env_new("runtime-sessions");
    CHECK(r != NULL);
    setenv("FAKE_CLAUDE_RESULT", "Looks fine.\nREVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t svc = review_start(r, "review-1");

    review_submit(r, "s1", 30, NULL);
    json_t *done1 = harness_wait(r->h, "task.done", "s1", 15000);
    CHECK(done1 != NULL);
    review_submit(r, "s2", 30, NULL);
    json_t *done2 = harness_wait(r->h, "task.done", "s2", 15000);
    CHECK(done2 != NULL);

    json_t *lines[8] = {NULL};
    int n = review_log(r, lines, 8);
    CHECK_INT(n, 2);
    char first_id[64] = "";
    if (n >= 2) {
        snprintf(first_id, sizeof first_id, "%s", review_log_arg(lines[0], "--session-id"));
        CHECK(first_id[0] != '\0');
        CHECK_STR(review_log_arg(lines[0], "--resume"), "");
        CHECK_STR(review_log_arg(lines[1], "--resume"), first_id);
        CHECK_STR(review_log_arg(lines[1], "--session-id"), "");
        /* Always the same cwd: the specialist's fixed workdir. */
        CHECK_STR(json_string_value(json_object_get(lines[0], "cwd")),
                  json_string_value(json_object_get(lines[1], "cwd")));
    }
    if (done1 != NULL && done2 != NULL) {
        CHECK(json_is_true(json_object_get(review_result(done1), "session_fresh")));
        CHECK(json_is_false(json_object_get(review_result(done2), "session_fresh")));
        CHECK_STR(harness_field(review_result(done2), "session_id"), first_id);
    }
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);

    /* The transcript disappears (cleanup, purge): the next resume fails. */
    char transcript[4096];
    char real_workdir[4096];
    CHECK(realpath(r->workdir, real_workdir) != NULL);
    CHECK(agent_transcript_path(transcript, sizeof transcript, real_workdir, first_id) == 0);
    CHECK(unlink(transcript) == 0);

    review_submit(r, "s3", 30, NULL);
    json_t *done3 = harness_wait(r->h, "task.done", "s3", 15000);
    CHECK(done3 != NULL);
    n = review_log(r, lines, 8);
    CHECK_INT(n, 4);
    if (n == 4) {
        CHECK_STR(review_log_arg(lines[2], "--resume"), first_id);
        const char *fresh = review_log_arg(lines[3], "--session-id");
        CHECK(fresh[0] != '\0' && strcmp(fresh, first_id) != 0);
        if (done3 != NULL) {
            CHECK_STR(harness_field(review_result(done3), "session_id"), fresh);
            CHECK(json_is_true(json_object_get(review_result(done3), "session_fresh")));
            CHECK_STR(harness_field(review_result(done3), "session_fresh_reason"), "context lost");
        }
    }
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    /* The broker published why the fresh session started. */
    bool said = false;
    for (int i = 0; (i = harness_find(r->h, i, "task.progress", "s3")) >= 0; i++) {
        const json_t *event = r->h->events[i];
        if (strcmp(harness_field(event, "kind"), "session") == 0 &&
            strstr(harness_field(event, "text"), "context lost") != NULL)
            said = true;
    }
    CHECK(said);
    CHECK(review_stop(r, svc) == 0);
    review_env_destroy(&r);
}

int main(void)
{
    test_fresh_resumed_fallback();
    return check_exit_code("test_runtime_sessions");
}
