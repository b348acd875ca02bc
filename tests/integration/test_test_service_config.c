/* cloister-test honours [specialists.test-agent] test_command over detection: a project
 * whose Makefile would fail is tested with the configured command instead, and the result
 * names it (runner "configured"). The [specialists.test_agent] spelling works too. */
#include "test_test_service_harness.h"

int main(void)
{
    harness_t *h = harness_new("test-service-config");
    if (h == NULL)
        return 1;
    tsh_config(h, "[specialists.test_agent]\n"
                  "test_command = \"sh -c 'echo ===== 5 passed in 0.03s ====='\"\n");
    tsh_service(h, "t1");
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
    if (strcmp(tsh_event(end), "task.done") != 0)
        tsh_dump("cfg1", end);

    /* A configured command also applies where nothing would be detected. */
    const char *empty = tsh_file(h, "empty", "README", "no tests here\n");
    tsh_submit(h, "cfg2", 30, "{\"workspace\": \"%s\"}", empty);
    end = tsh_end(h, "cfg2", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "runner"), "configured");
    harness_destroy(&h);
    return check_exit_code("test_test_service_config");
}
