/* The test-agent's fix with a real agent CLI against the scripted model
 * (tests/model/scenarios/fix.json): the tests of the user's main fail, the agent reads the
 * file, fixes it with a real edit in the test-agent's worktree (Claude Code: Edit; Codex:
 * apply_patch; Gemini: replace) and runs the tests with a real shell call; the service's
 * rerun passes and the fix comes back as a patch, while the user's checkout stays as it
 * was. The tested commit's own verdict stays FAIL (the fix is not a commit): the rerun
 * is FIX_TEST_RESULT, with fix_available. Run for each CLI. */
#include "real_harness.h"

static const char *const s_calc = "add() { echo $(( $1 - $2 )); }\n";
static const char *const s_test =
    ". ./calc.sh\n"
    "if [ \"$(add 2 3)\" = 5 ]; then echo '1 passed, 0 failed'; "
    "else echo 'FAILED test_add: add 2 3 is not 5'; echo '0 passed, 1 failed'; exit 1; fi\n";

int main(void)
{
    /* Bash granted: under acceptEdits the CLI asks before running `sh test.sh`, and with
     * nobody to ask (-p) it refuses ("This command requires approval"). */
    real_env_t *r = real_env_new("real-test-fix", "fix.json", "allowed_tools = [\"Bash\"]\n\n"
                                 "[specialists.test-agent]\nfix = true\n"
                                 "test_command = \"sh test.sh\"\n");
    testgit_commit(r->repos.user, "calc.sh", s_calc, "add");
    testgit_commit(r->repos.user, "test.sh", s_test, "test add");
    harness_service(r->h, "cloister-test", "test-1", 3000, NULL);
    char payload[1024];
    snprintf(payload, sizeof payload, "{\"workspace\":\"%s\",\"branch\":\"main\"}", r->repos.user);
    harness_submit(r->h, "fix-1", "test-agent", "normal", 120, 1, payload);

    json_t *end = real_wait_end(r, "fix-1", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_STR(real_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_STR(real_result_str(end, "FIX_TEST_RESULT"), "PASS");
    const json_t *result = json_object_get(end, "result");
    CHECK(json_is_true(json_object_get(result, "fix_available")));
    CHECK(json_is_true(json_object_get(result, "FIX_ATTEMPTED")));
    CHECK_STR(real_result_str(end, "FIX_RESULT"), "SUCCESS");
    CHECK(strstr(real_result_str(end, "FIX_PATCH"), "+add() { echo $(( $1 + $2 )); }") != NULL);
    CHECK(strstr(real_result_str(end, "FIX_PATCH"), "-add() { echo $(( $1 - $2 )); }") != NULL);
    CHECK(real_progress_has(r, "fix-1", real_progress_tool("edit")));
    /* The user's checkout is untouched. */
    char path[700];
    snprintf(path, sizeof path, "%s/calc.sh", r->repos.user);
    char *calc = testenv_read_file(path);
    CHECK(calc != NULL && strcmp(calc, s_calc) == 0);
    free(calc);

    /* The CLI's side: the prompt had the failure; the Edit and the Bash call really ran. */
    json_t *requests = testmodel_requests_of(&r->model, "fix");
    CHECK_INT(json_array_size(requests), 4);
    CHECK(strstr(harness_field(json_array_get(requests, 0), "prompt"), "FAILED test_add") != NULL);
    CHECK_STR(real_served_action(requests, 1), "edit");
    CHECK_STR(real_served_action(requests, 2), "run");
    bool is_error = true;
    const char *edited = real_tool_result(requests, 1, &is_error);
    CHECK(!is_error && edited != NULL && strstr(edited, real_edit_said()) != NULL);
    const char *ran = real_tool_result(requests, 2, &is_error);
    CHECK(!is_error && ran != NULL && strstr(ran, "1 passed, 0 failed") != NULL);
    json_decref(requests);

    real_env_destroy(&r);
    return check_exit_code("test_real_test_fix");
}
