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

/* The session ids of the ends of tasks a and b, into ids[0] and ids[1]; whether both
 * resumed their session. */
static bool s_session_ids(review_env_t *r, const char *a, const char *b, char ids[2][64])
{
    const char *tasks[] = {a, b};
    bool resumed = true;
    for (int i = 0; i < 2; i++) {
        json_t *done = harness_wait(r->h, "task.done", tasks[i], 20000);
        CHECK(done != NULL);
        snprintf(ids[i], sizeof ids[i], "%s", harness_field(review_result(done), "session_id"));
        resumed = resumed && json_is_false(json_object_get(review_result(done), "session_fresh"));
    }
    return resumed;
}

/* Two review-agents on one state directory (docker compose --scale review-agent=2): each
 * claims a replica slot and keeps a session of its own, so their agent runs overlap rather
 * than queue on one session's lock; `pan specialists list` shows both replicas; a replica
 * that is replaced gives its slot, and its session, to the new process. */
static void test_replicas(void)
{
    review_env_t *r = review_env_new("runtime-replicas");
    CHECK(r != NULL);
    setenv("FAKE_CLAUDE_RESULT", "Looks fine.\nREVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    setenv("FAKE_CLAUDE_DELAY_MS", "500", 1);
    pid_t a = review_start(r, "review-a");
    pid_t b = review_start(r, "review-b");
    CHECK(a > 0 && b > 0);
    review_submit(r, "p1", 60, NULL);
    review_submit(r, "p2", 60, NULL);
    /* Both agents started before either review ended: the runs overlap. */
    json_t *lines[8] = {NULL};
    int n = 0;
    for (int waited = 0; waited < 20000 && n < 2; waited += 50) {
        for (int i = 0; i < n; i++)
            json_decref(lines[i]);
        n = review_log(r, lines, 8);
        if (n < 2)
            harness_pump(r->h, 50);
    }
    CHECK_INT(n, 2);
    CHECK_INT(harness_count(r->h, "task.done", NULL), 0);
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    char first[2][64];
    s_session_ids(r, "p1", "p2", first);
    CHECK(first[0][0] != '\0' && first[1][0] != '\0' && strcmp(first[0], first[1]) != 0);

    char out[16384];
    char *pan[] = {(char *)testenv_bin("pan"), "specialists", "list", "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, pan, out, sizeof out, 10000), 0);
    json_t *list = json_loads(out, 0, NULL);
    const json_t *replicas = NULL;
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        if (strcmp(harness_field(entry, "name"), "review-agent") == 0)
            replicas = json_object_get(entry, "replicas");
    }
    CHECK_INT((int)json_array_size(replicas), 2);
    for (i = 0; i < 2; i++)
        CHECK(json_is_true(json_object_get(json_array_get(replicas, i), "live")));
    json_decref(list);

    /* Replica b is replaced: the new process takes slot 1 and resumes b's session. */
    CHECK(review_stop(r, b) == 0);
    pid_t c = review_start(r, "review-c");
    CHECK(c > 0);
    review_submit(r, "p3", 60, NULL);
    review_submit(r, "p4", 60, NULL);
    char again[2][64];
    CHECK(s_session_ids(r, "p3", "p4", again));
    CHECK((strcmp(again[0], first[0]) == 0 && strcmp(again[1], first[1]) == 0) ||
          (strcmp(again[0], first[1]) == 0 && strcmp(again[1], first[0]) == 0));
    CHECK(review_stop(r, a) == 0);
    CHECK(review_stop(r, c) == 0);
    review_clear_fake_env();
    review_env_destroy(&r);
}

int main(void)
{
    test_fresh_resumed_fallback();
    test_replicas();
    return check_exit_code("test_runtime_sessions");
}
