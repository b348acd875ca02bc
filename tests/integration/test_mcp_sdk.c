/* cloister-mcp driven by the official MCP TypeScript SDK (tests/mcp/sdk_client.mjs), a
 * client this project did not write, against a real broker, a real cloister-review and
 * cloister-test with the fake agent, and a real git repository: every tool is called and
 * what it did is checked here too (the task queued, the file the patch wrote).
 *
 * Set-up installs @modelcontextprotocol/sdk from the npm registry into the build tree
 * (build/npm) when it is not there; when that fails, the test fails. */
#include "review_harness.h"

#include <limits.h>

#define NPM_DIR CLOISTER_BIN_DIR "/../npm"
#define SDK_DIR NPM_DIR "/node_modules/@modelcontextprotocol/sdk/dist/esm"

static char s_out[1 << 20];

/* Installs the SDK into build/npm unless it is there. True when it is there after. */
static bool s_install_sdk(review_env_t *r)
{
    if (access(SDK_DIR "/client/index.js", R_OK) == 0)
        return true;
    char *argv[] = {"/bin/sh", "-c",
                    "mkdir -p \"$0\" && exec npm install --prefix \"$0\" --no-audit --no-fund "
                    "--loglevel=error @modelcontextprotocol/sdk@1 2>&1",
                    NPM_DIR, NULL};
    int code = testenv_run(r->h->env, argv, s_out, sizeof s_out, 300000);
    if (code != 0)
        fprintf(stderr, "npm install @modelcontextprotocol/sdk failed (%d): %s\n", code, s_out);
    return code == 0 && access(SDK_DIR "/client/index.js", R_OK) == 0;
}

/* A review whose agent (the fake, calling the server its --mcp-config names, as the real CLI
 * does) hands off to the test-agent: the handoff becomes the review's chained next task,
 * queued with its result and run by the test-agent. */
static void test_handoff_from_a_task(review_env_t *r, pid_t *reviewer)
{
    char actions[600], script[2048];
    snprintf(actions, sizeof actions, "%s/handoff.actions", r->h->env->dir);
    snprintf(script, sizeof script,
             "mcp cloister handoff_to {\"specialist\": \"test-agent\", \"message\": \"run "
             "the tests of this branch\", \"context\": \"the query changed\", "
             "\"workspace\": \"%s\", \"branch\": \"feature\"}\n"
             "say REVIEW_RESULT: APPROVED\nsay FINDINGS: none\n",
             r->repo);
    CHECK(testenv_write_file(actions, script) == 0);
    CHECK(review_stop(r, *reviewer) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    unsetenv("FAKE_CLAUDE_RESULT");
    *reviewer = review_start(r, "review-mcp-2");
    review_submit(r, "handing-off", 60, NULL);
    json_t *done = harness_wait(r->h, "task.done", "handing-off", 20000);
    CHECK(done != NULL);
    /* The next task: a test-agent task whose parent is the review. */
    json_t *queued = NULL;
    for (int waited = 0; queued == NULL && waited < 5000; waited += 20) {
        for (int i = 0; i < r->h->nevents && queued == NULL; i++) {
            json_t *event = r->h->events[i];
            if (strcmp(harness_field(event, "event"), "task.queued") == 0 &&
                strcmp(harness_field(event, "parent"), "handing-off") == 0)
                queued = event;
        }
        harness_pump(r->h, 20);
    }
    CHECK(queued != NULL);
    CHECK_STR(harness_field(queued, "specialist"), "test-agent");
    char next[64];
    snprintf(next, sizeof next, "%s", harness_field(queued, "task"));
    json_t *tested = harness_wait(r->h, "task.done", next, 20000);
    CHECK(tested != NULL);
    CHECK_STR(harness_field(review_result(tested), "TEST_RESULT"), "PASS");

    char *show[] = {(char *)testenv_bin("pan"), "task", "show", next, "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, show, s_out, sizeof s_out, 10000), 0);
    json_t *task = json_loads(s_out, 0, NULL);
    const json_t *payload = json_object_get(task, "payload");
    CHECK_STR(harness_field(payload, "task"), "run the tests of this branch");
    CHECK_STR(harness_field(json_object_get(payload, "handoff"), "from"), "review-agent");
    CHECK_STR(harness_field(json_object_get(payload, "handoff"), "from_task"), "handing-off");
    CHECK_STR(harness_field(json_object_get(payload, "handoff"), "context"), "the query changed");
    json_decref(task);

    /* The agent was given the server and its tools. */
    json_t *lines[64];
    int n = review_log(r, lines, 64);
    CHECK(n > 0);
    CHECK(strstr(review_log_arg(lines[n - 1], "--mcp-config"), "/mcp/handing-off.json") != NULL);
    CHECK(strstr(review_log_arg(lines[n - 1], "--allowedTools"), "mcp__cloister") != NULL);
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    unsetenv("FAKE_CLAUDE_ACTIONS");
}

int main(void)
{
    review_env_t *r = review_env_new("mcp-sdk");
    CHECK(r != NULL);
    CHECK(s_install_sdk(r));
    review_config(r, "[specialists.test-agent]\n"
                     "test_command = \"echo '=== 3 passed in 0.01s ==='\"\n");
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t reviewer = review_start(r, "review-mcp");
    pid_t tester = review_start_program(r, "cloister-test", "tester-mcp");
    CHECK(reviewer > 0 && tester > 0);

    setenv("MCP_SDK", SDK_DIR, 1);
    setenv("CLOISTER_MCP", testenv_bin("cloister-mcp"), 1);
    setenv("WORKSPACE", r->repo, 1);
    char *node[] = {"/bin/sh", "-c", "exec node \"$0\" 2>&1",
                    CLOISTER_SOURCE_DIR "/tests/mcp/sdk_client.mjs", NULL};
    int code = testenv_run(r->h->env, node, s_out, sizeof s_out, 180000);
    if (code != 0)
        fprintf(stderr, "sdk_client.mjs (exit %d):\n%s\n", code, s_out);
    CHECK_INT(code, 0);

    /* The report is the last line; what the tools did is checked from here as well. */
    char *last = strrchr(s_out, '{') ? strstr(s_out, "{\"server\"") : NULL;
    CHECK(last != NULL);
    json_t *report = json_loads(last, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK(report != NULL);
    CHECK_INT((int)json_array_size(json_object_get(report, "tools")), 12);
    json_decref(report);

    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/notes.txt", r->repo);
    FILE *notes = fopen(path, "r");
    CHECK(notes != NULL);
    char line[128] = "";
    CHECK(fgets(line, sizeof line, notes) != NULL);
    fclose(notes);
    CHECK_STR(line, "written through MCP\n");
    snprintf(path, sizeof path, "%s/../evil.txt", r->repo);
    CHECK(access(path, F_OK) != 0);

    char *show[] = {(char *)testenv_bin("pan"), "task", "list", "--specialist", "merge-agent",
                    "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, show, s_out, sizeof s_out, 10000), 0);
    json_t *merges = json_loads(s_out, 0, NULL);
    CHECK_INT((int)json_array_size(merges), 1);
    CHECK(strncmp(harness_field(json_array_get(merges, 0), "id"), "merge-", 6) == 0);
    CHECK_STR(harness_field(json_array_get(merges, 0), "source"), "pan approve");
    json_decref(merges);

    test_handoff_from_a_task(r, &reviewer);

    CHECK(review_stop(r, reviewer) == 0);
    CHECK(review_stop(r, tester) == 0);
    review_clear_fake_env();
    review_env_destroy(&r);
    return check_exit_code("test_mcp_sdk");
}
