/* The review-agent with a real agent CLI against the scripted model
 * (tests/model/scenarios/review.json); run for Claude Code and Codex. A first review,
 * without domain reviewers, makes the review-agent's session. The second has two domain
 * reviewers, security and correctness: each is a fork of that stored session (the model
 * sees the first review's conversation in theirs, under a session id of its own) that
 * reads the changed file with a real tool call and reports a finding; the synthesis runs
 * in the main session, which the forks left as it was; the security error blocks the gate.
 * (Gemini cannot fork a session: not run for it.) */
#include "real_harness.h"

/* PUSHes a review of `branch` into main, issue `issue`. */
static void s_submit(real_env_t *r, const char *id, const char *branch, const char *issue)
{
    char payload[2048];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"%s\",\"target\":\"main\",\"issueId\":\"%s\"}",
             r->repos.user, branch, issue);
    harness_submit(r->h, id, "review-agent", "normal", 120, 1, payload);
}

/* The finding of the result with this reviewer, or NULL. */
static const json_t *s_finding_of(const json_t *event, const char *reviewer)
{
    const json_t *findings = json_object_get(json_object_get(event, "result"), "FINDINGS");
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        if (strcmp(harness_field(finding, "reviewer"), reviewer) == 0)
            return finding;
    }
    return NULL;
}

/* The one request of the model's log under `rule` that is the start of its conversation
 * (step 0), checked to exist. */
static const json_t *s_first_request(const json_t *requests)
{
    size_t i;
    const json_t *request;
    json_array_foreach(requests, i, request)
    {
        if (json_integer_value(json_object_get(request, "step")) == 0)
            return request;
    }
    CHECK(false);
    return NULL;
}

/* A reviewer's conversation as the model saw it: a fork of `main_session` (its history,
 * another id), a real Read of the changed file, and its finding. Returns its session id. */
static const char *s_check_reviewer(real_env_t *r, const char *rule, const char *main_session)
{
    json_t *requests = testmodel_requests_of(&r->model, rule);
    CHECK_INT(json_array_size(requests), 2);
    const json_t *first = s_first_request(requests);
    const json_t *earlier = json_object_get(first, "earlier_prompts");
    CHECK_INT(json_array_size(earlier), 1);
    CHECK(strstr(json_string_value(json_array_get(earlier, 0)),
                 "You are the review-agent, a code review specialist") != NULL);
    static char session[2][64];
    char *id = session[strcmp(rule, "security") == 0];
    snprintf(id, 64, "%s", harness_field(first, "session"));
    CHECK(id[0] != '\0' && strcmp(id, main_session) != 0);
    CHECK_STR(real_served_action(requests, 0), "read");
    bool is_error = true;
    const char *read = real_tool_result(requests, 0, &is_error);
    CHECK(!is_error && read != NULL && strstr(read, "run(\"SELECT") != NULL);
    json_decref(requests);
    return id;
}

int main(void)
{
    real_env_t *r = real_env_new("real-review", "review.json", NULL);
    testgit_push_branch(r->repos.user, "feature/p", "b.c", "int b(void) { return 2; }\n");
    testgit_push_branch(r->repos.user, "feature/q", "a.c",
                        "int run(const char *sql);\nint a(const char *name)\n"
                        "{\n    return run(\"SELECT * WHERE n=\" name);\n}\n");

    /* 1. One agent run in the main session: its session is stored. */
    pid_t svc = harness_service(r->h, "cloister-review", "review-1", 3000, NULL);
    s_submit(r, "review-1", "feature/p", "PAN-1");
    json_t *end = real_wait_end(r, "review-1", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_STR(real_result_str(end, "GATE"), "open");
    json_t *session = real_session(r, "review-agent");
    char main_session[64];
    snprintf(main_session, sizeof main_session, "%s", harness_field(session, "session_id"));
    json_decref(session);
    kill(svc, SIGTERM);
    CHECK(testenv_wait(r->h->env, svc, 10000) >= 0);

    /* 2. Two domain reviewers. */
    real_config(r, "[review]\nreviewers = [\"security\", \"correctness\"]\n");
    harness_service(r->h, "cloister-review", "review-2", 3000, NULL);
    s_submit(r, "review-2", "feature/q", "PAN-2");
    end = real_wait_end(r, "review-2", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_STR(real_result_str(end, "GATE"), "blocked");
    const json_t *result = json_object_get(end, "result");
    CHECK_STR(harness_field(json_object_get(result, "merge_gate"), "decision"), "block");
    CHECK_STR(harness_field(result, "stop_reason"), "complete");
    CHECK_INT(json_array_size(json_object_get(result, "reviewer_runs")), 2);
    const json_t *security = s_finding_of(end, "security");
    CHECK(security != NULL);
    CHECK_STR(harness_field(security, "severity"), "error");
    CHECK_STR(harness_field(security, "file"), "a.c");
    CHECK_STR(harness_field(security, "title"), "SQL built from the caller's name");
    CHECK_STR(harness_field(security, "suggestion"), "bind it as a parameter");
    const json_t *correctness = s_finding_of(end, "correctness");
    CHECK(correctness != NULL);
    CHECK_STR(harness_field(correctness, "severity"), "warning");

    /* The forks, as the model saw them: the stored conversation, each under its own id. */
    const char *sec_id = s_check_reviewer(r, "security", main_session);
    const char *cor_id = s_check_reviewer(r, "correctness", main_session);
    CHECK(strcmp(sec_id, cor_id) != 0);
    /* The synthesis: the main session, which holds the first review and nothing of the
     * forks. */
    json_t *requests = testmodel_requests_of(&r->model, "synthesis");
    CHECK_INT(json_array_size(requests), 1);
    const json_t *synthesis = json_array_get(requests, 0);
    CHECK_STR(harness_field(synthesis, "session"), main_session);
    CHECK_INT(json_array_size(json_object_get(synthesis, "earlier_prompts")), 1);
    CHECK(strstr(harness_field(synthesis, "prompt"), "SQL built from the caller's name") != NULL);
    json_decref(requests);
    /* And in history.jsonl: two runs forked from the main session. */
    json_t *history = real_history(r, "review-agent");
    int forks = 0;
    size_t i;
    const json_t *line;
    json_array_foreach(history, i, line)
    {
        if (strcmp(harness_field(line, "fork_of"), main_session) == 0)
            forks++;
    }
    CHECK_INT(forks, 2);
    json_decref(history);

    real_env_destroy(&r);
    return check_exit_code("test_real_review");
}
