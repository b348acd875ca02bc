/* A test-agent PASS is the tested commit's own (issue 38 §7). A real broker, a real
 * cloister-review and cloister-test with fake-claude as their agent, a real git repository,
 * the pipeline review → test → merge in yolo mode. The feature branch's tests fail; the
 * test-agent asks its agent for a fix, which edits the worktree of the tested commit, and
 * the tests pass with it. The fix is not a commit: the tested commit's verdict is FAIL
 * (FIX_RESULT SUCCESS, FIX_TEST_RESULT PASS, fix_available with the patch in FIX_PATCH),
 * `pan task wait` exits with tests_failed, and no merge of the unfixed commit is chained. */
#include "review_harness.h"
#include "verdict.h"

/* Passes when value.txt says "good", as pytest would print it. */
static const char *const TESTS_SH =
    "if grep -q good value.txt; then echo '=== 3 passed in 0.01s ==='; exit 0; fi\n"
    "echo 'FAILED tests/test_value.py::test_value - value is bad'\n"
    "echo '=== 1 failed, 2 passed in 0.01s ==='\n"
    "exit 1\n";

int main(void)
{
    review_env_t *r = review_env_new("test-fix-uncommitted");
    CHECK(r != NULL);
    if (r == NULL)
        return check_exit_code("test_test_fix_uncommitted");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(r->repo, "tests.sh", TESTS_SH, "tests");
    testgit_commit(r->repo, "Makefile", "test:\n\t@sh tests.sh\n", "make test");
    testgit_commit(r->repo, "value.txt", "bad\n", "the bug");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);
    char tested[41];
    testgit_rev(r->repo, "feature", tested);

    /* The agent's fix: value.txt made good in every worktree of the repository but the
     * user's own checkout (the test-agent tests the commit in a worktree of its own). */
    char fix[600], actions[600], script[2048];
    snprintf(fix, sizeof fix, "%s/fix.sh", r->h->env->dir);
    snprintf(script, sizeof script,
             "cd '%s' || exit 1\nhere=$(pwd -P)\n"
             "git worktree list --porcelain | sed -n 's/^worktree //p' | while read -r d; do\n"
             "  [ \"$d\" = \"$here\" ] && continue\n"
             "  [ -f \"$d/value.txt\" ] && echo good > \"$d/value.txt\"\n"
             "done\nexit 0\n",
             r->repo);
    CHECK(testenv_write_file(fix, script) == 0);
    snprintf(actions, sizeof actions, "%s/agent.actions", r->h->env->dir);
    snprintf(script, sizeof script,
             "run /bin/sh %s\nsay REVIEW_RESULT: APPROVED\nsay FINDINGS: none\n"
             "say NOTES: value.txt set to good\n",
             fix);
    CHECK(testenv_write_file(actions, script) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    review_config(r, "allowed_tools = [\"Bash\"]\n\n" /* in [agent]: the fix runs a script */
                     "[review]\nmode = \"yolo\"\n\n"
                     "[pipeline]\nafter_review = \"test\"\nafter_test = \"merge\"\n\n"
                     "[specialists.test-agent]\nfix = true\n");
    pid_t reviewer = review_start(r, "review-fx");
    pid_t tester = review_start_program(r, "cloister-test", "tester-fx");
    CHECK(reviewer > 0 && tester > 0);
    review_submit(r, "fx1", 60, NULL);
    CHECK(harness_wait(r->h, "task.done", "fx1", 20000) != NULL);
    json_t *end = harness_wait(r->h, "task.done", "test-fx1", 30000);
    CHECK(end != NULL);
    const json_t *result = review_result(end);
    CHECK_STR(harness_field(result, "TESTED_COMMIT"), tested);
    CHECK_STR(harness_field(result, "TEST_RESULT"), "FAIL");
    CHECK(json_is_true(json_object_get(result, "FIX_ATTEMPTED")));
    CHECK_STR(harness_field(result, "FIX_RESULT"), "SUCCESS");
    CHECK_STR(harness_field(result, "FIX_TEST_RESULT"), "PASS");
    CHECK(json_is_true(json_object_get(result, "fix_available")));
    CHECK(strstr(harness_field(result, "FIX_PATCH"), "-bad\n+good") != NULL);
    CHECK(strstr(harness_field(result, "NOTES"), "commit the fix") != NULL);
    CHECK_STR(harness_field(result, "merge_task"), "");

    /* Nothing chained: no merge of the unfixed commit. */
    harness_pump(r->h, 500);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-test-fx1"), 0);
    for (int i = 0; i < r->h->nevents; i++)
        CHECK(strcmp(harness_field(r->h->events[i], "specialist"), "merge-agent") != 0);

    /* A script waiting on it stops: the verdict is tests_failed. */
    char out[16384];
    char *wait[] = {(char *)testenv_bin("pan"), "task", "wait", "test-fx1", NULL};
    CHECK_INT(testenv_run(r->h->env, wait, out, sizeof out, 10000), VERDICT_EXIT_TESTS_FAILED);

    CHECK(review_stop(r, reviewer) == 0);
    CHECK(review_stop(r, tester) == 0);
    review_env_destroy(&r);
    return check_exit_code("test_test_fix_uncommitted");
}
