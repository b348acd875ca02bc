/* cloister-test honours [specialists.test-agent] test_command over detection: a project
 * whose Makefile would fail is tested with the configured command instead, and the result
 * names it (runner "configured"). The [specialists.test_agent] spelling works too. A
 * command that is not there is reported as tests that could not run, not as failing. */
#include "test_test_service_harness.h"

int main(void)
{
    harness_t *h = harness_new("test-service-config");
    if (h == NULL)
        return 1;
    tsh_config(h, "[specialists.test_agent]\n"
                  "test_command = \"sh -c 'echo ===== 5 passed in 0.03s ====='\"\n");
    pid_t t1 = tsh_service(h, "t1");
    const char *dir = tsh_make_project(h, "proj", TSH_PYTEST_FAIL, 1);
    tsh_submit(h, "cfg1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "cfg1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    CHECK_STR(tsh_result_str(end, "TEST_COMMAND"), "sh -c 'echo ===== 5 passed in 0.03s ====='");
    CHECK_STR(tsh_result_str(end, "runner"), "configured");
    CHECK_STR(tsh_result_str(end, "detected_by"), "configured test_command");
    CHECK_INT(tsh_result_int(end, "TESTS_RUN"), 5);
    CHECK_INT(tsh_result_int(end, "TESTS_PASSED"), 5);

    /* A configured command also applies where nothing would be detected. */
    const char *empty = tsh_file(h, "empty", "README", "no tests here\n");
    tsh_submit(h, "cfg2", 30, "{\"workspace\": \"%s\"}", empty);
    end = tsh_end(h, "cfg2", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "runner"), "configured");

    /* pan specialists wake takes the workspace the built-in specialists need. */
    char out[4096], id[64] = "";
    char *wake[] = {(char *)testenv_bin("pan"), "specialists", "wake", "test-agent",
                    "--workspace", (char *)empty, NULL};
    CHECK_INT(testenv_run(h->env, wake, out, sizeof out, 10000), 0);
    const char *queued = strstr(out, "Queued urgent task ");
    CHECK(queued != NULL && sscanf(queued, "Queued urgent task %63s", id) == 1);
    end = tsh_end(h, id, 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    char *bare[] = {"/bin/sh", "-c", "exec \"$0\" specialists wake test-agent 2>&1",
                    (char *)testenv_bin("pan"), NULL};
    CHECK_INT(testenv_run(h->env, bare, out, sizeof out, 10000), 2);
    CHECK(strstr(out, "test-agent works on a repository: say which with --workspace DIR") != NULL);

    /* A runner that is not installed: the error names it and the shell's exit code. */
    testenv_signal(t1, SIGTERM);
    CHECK_INT(testenv_wait(h->env, t1, 10000), 0);
    tsh_config(h, "[specialists.test-agent]\ntest_command = \"no-such-runner-xyz --quiet\"\n");
    tsh_service(h, "t2");
    tsh_submit(h, "cfg3", 30, "{\"workspace\": \"%s\"}", empty);
    end = tsh_end(h, "cfg3", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK_STR(harness_field(end, "error"), "tests could not run: no-such-runner-xyz: not found (exit 127)");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "ERROR");
    harness_destroy(&h);
    return check_exit_code("test_test_service_config");
}
