/* An agent calling Cloister's MCP tool `handoff_to` from inside its session, with a real
 * agent CLI against the scripted model (tests/model/scenarios/handoff.json): the
 * review-agent's agent calls it through the cloister-mcp server the service gave it —
 * Claude Code finds the deferred tool with its ToolSearch first (--mcp-config); Codex calls
 * it from a script of its exec tool (-c mcp_servers.cloister.*); Gemini calls
 * mcp_cloister_handoff_to (the workdir's .gemini/settings.json) — and the hand-off becomes
 * the review's chained next task, which the test-agent then runs. Run for each CLI. */
#include "real_harness.h"

/* The first task.queued event whose parent is `parent`, or NULL. */
static const json_t *s_child(real_env_t *r, const char *parent)
{
    for (int waited = 0; waited < 10000; waited += 20) {
        for (int i = 0; i < r->h->nevents; i++) {
            const json_t *event = r->h->events[i];
            if (strcmp(harness_field(event, "event"), "task.queued") == 0 &&
                strcmp(harness_field(event, "parent"), parent) == 0)
                return event;
        }
        harness_pump(r->h, 20);
    }
    return NULL;
}

int main(void)
{
    real_env_t *r = real_env_new("real-handoff", "handoff.json",
                                 "[specialists.test-agent]\n"
                                 "test_command = \"echo '3 passed, 0 failed'\"\n");
    testgit_push_branch(r->repos.user, "feature/h", "a.c", "int a(void) { return 3; }\n");
    harness_service(r->h, "cloister-review", "review-1", 3000, NULL);
    harness_service(r->h, "cloister-test", "test-1", 3000, NULL);
    char payload[2048];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"feature/h\",\"target\":\"main\","
             "\"issueId\":\"PAN-9\",\"task\":\"When you are done, hand the tests to the "
             "test-agent: workspace %s branch feature/h\"}",
             r->repos.user, r->repos.user);
    harness_submit(r->h, "review-1", "review-agent", "normal", 120, 1, payload);

    json_t *end = real_wait_end(r, "review-1", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    const json_t *queued = s_child(r, "review-1");
    CHECK(queued != NULL);
    CHECK_STR(harness_field(queued, "specialist"), "test-agent");
    char next[64];
    snprintf(next, sizeof next, "%s", harness_field(queued, "task"));
    json_t *tested = real_wait_end(r, next, 60000);
    CHECK(tested != NULL);
    CHECK_STR(harness_field(tested, "event"), "task.done");
    CHECK_STR(real_result_str(tested, "TEST_RESULT"), "PASS");
    char out[65536];
    char *show[] = {(char *)testenv_bin("pan"), "task", "show", next, "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, show, out, sizeof out, 10000), 0);
    json_t *task = json_loads(out, 0, NULL);
    CHECK(task != NULL);
    const json_t *handed = json_object_get(task, "payload");
    CHECK_STR(harness_field(handed, "task"), "run the tests of feature/h");
    CHECK_STR(harness_field(handed, "branch"), "feature/h");
    CHECK_STR(harness_field(json_object_get(handed, "handoff"), "from"), "review-agent");
    json_decref(task);

    /* The CLI's side: ToolSearch loaded the deferred MCP tool, the call went through
     * cloister-mcp, and its answer came back to the model. */
    json_t *requests = testmodel_requests_of(&r->model, "handoff");
    size_t call = 0; /* the request that made the MCP call */
    if (real_cli_is("claude")) {
        CHECK_INT(json_array_size(requests), 3);
        char *tools = json_dumps(json_object_get(json_array_get(requests, 0), "tools"), 0);
        CHECK(tools != NULL && strstr(tools, "ToolSearch") != NULL &&
              strstr(tools, "mcp__cloister__handoff_to") == NULL);
        free(tools);
        CHECK_STR(real_served_tool(requests, 0), "ToolSearch");
        CHECK_STR(real_served_tool(requests, 1), "mcp__cloister__handoff_to");
        call = 1;
    } else {
        CHECK_INT(json_array_size(requests), 2);
        CHECK_STR(real_served_tool(requests, 0),
                  real_cli_is("codex") ? "exec" : "mcp_cloister_handoff_to");
    }
    bool is_error = true;
    const char *answer = real_tool_result(requests, call, &is_error);
    CHECK(!is_error && answer != NULL);
    if (real_cli_is("gemini")) {
        /* Gemini hands the model the tool's text. */
        char said[200];
        snprintf(said, sizeof said, "Handed off to test-agent as task %s", next);
        CHECK(strstr(answer, said) != NULL);
    } else {
        /* The tool's structuredContent reaches the model (Claude Code hands it on as it
         * is; the Codex script prints it, after what Codex says of its script). */
        const char *json_start = strstr(answer, "{\"id\"");
        json_t *handoff = json_start ? json_loads(json_start, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        CHECK(handoff != NULL);
        CHECK_STR(harness_field(handoff, "id"), next);
        CHECK_STR(harness_field(handoff, "chainedTo"), "review-1");
        json_decref(handoff);
    }
    json_decref(requests);

    real_env_destroy(&r);
    return check_exit_code("test_real_handoff");
}
