/* The MCP server a specialist gives its agent acts with the agent key and only in the
 * task's own directories (issue 38 §4). A real broker, a real cloister-review with
 * fake-claude as its agent: the agent copies the MCP config it was given, and asks
 * cloister-mcp for a forced merge. The config names keys/agent_secret as the server's key
 * (CLOISTER_CURVE_CERT; the broker bounds that key's role, test_agent_key) and the review's
 * worktree as its only --root; the forced merge is refused and nothing is queued for the
 * merge-agent. */
#include "review_harness.h"

int main(void)
{
    review_env_t *r = review_env_new("agent-mcp-config");
    CHECK(r != NULL);
    if (r == NULL)
        return check_exit_code("test_agent_mcp_config");
    /* The agent may run commands: it copies its MCP config to show the test. */
    review_config(r, "allowed_tools = [\"Bash\"]\n"); /* in [agent] */
    char actions[600], seen[600], script[4096];
    snprintf(actions, sizeof actions, "%s/agent.actions", r->h->env->dir);
    snprintf(seen, sizeof seen, "%s/seen.json", r->h->env->dir);
    snprintf(script, sizeof script,
             "run /bin/cp %s/specialists/review-agent/mcp/wired.json %s\n"
             "mcp cloister submit_task {\"specialist\": \"merge-agent\", \"issue\": \"PAN-7\", "
             "\"payload\": {\"force\": true}}\n"
             "say REVIEW_RESULT: APPROVED\n"
             "say FINDINGS: none\n",
             r->h->env->home, seen);
    CHECK(testenv_write_file(actions, script) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    pid_t reviewer = review_start(r, "review-wired");
    CHECK(reviewer > 0);
    review_submit(r, "wired", 60, NULL);
    CHECK(harness_wait(r->h, "task.done", "wired", 30000) != NULL);

    json_error_t error;
    json_t *config = json_load_file(seen, 0, &error);
    CHECK(config != NULL);
    const json_t *server = json_object_get(json_object_get(config, "mcpServers"), "cloister");
    char key[700];
    snprintf(key, sizeof key, "%s/keys/agent_secret", r->h->env->home);
    const char *given = json_string_value(
        json_object_get(json_object_get(server, "env"), "CLOISTER_CURVE_CERT"));
    if (given == NULL || strcmp(given, key) != 0)
        fprintf(stderr, "the agent's MCP server key: %s (expected %s)\n", given ? given : "none",
                key);
    CHECK(given != NULL && strcmp(given, key) == 0);
    const json_t *args = json_object_get(server, "args");
    int roots = 0;
    for (size_t i = 0; i + 1 < json_array_size(args); i++) {
        if (strcmp(json_string_value(json_array_get(args, i)), "--root") != 0)
            continue;
        roots++;
        /* The review's own worktree of the reviewed commit, not the user's repository. */
        CHECK(strcmp(json_string_value(json_array_get(args, i + 1)), r->repo) != 0);
    }
    CHECK_INT(roots, 1);
    json_decref(config);

    /* The forced merge was asked for, and refused (by the server, inside a task): nothing
     * was queued for the merge-agent. */
    bool called = false;
    for (int i = 0; (i = harness_find(r->h, i, "task.progress", "wired")) >= 0; i++)
        called = called || strstr(harness_field(r->h->events[i], "text"), "submit_task") != NULL;
    CHECK(called);
    CHECK(harness_find(r->h, 0, "task.queued", NULL) >= 0);
    for (int i = 0; i < r->h->nevents; i++)
        CHECK(strcmp(harness_field(r->h->events[i], "specialist"), "merge-agent") != 0);

    CHECK(review_stop(r, reviewer) == 0);
    review_env_destroy(&r);
    return check_exit_code("test_agent_mcp_config");
}
