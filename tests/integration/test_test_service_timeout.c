/* cloister-test stops a hanging test command at the task's timeout (minus the service's
 * margin): the command and everything it started are killed, and the task ends failed
 * with TEST_RESULT ERROR and a reason saying it timed out. The worker then takes the next
 * task. */
#include "test_test_service_harness.h"

static const char *const HANGING = "echo collecting tests\n"
                                   "sleep 60 &\n"
                                   "echo $! > child.pid\n"
                                   "echo $$ > shell.pid\n"
                                   "wait\n";

int main(void)
{
    harness_t *h = harness_new("test-service-timeout");
    if (h == NULL)
        return 1;
    /* The pids the commands write down must be this namespace's: no bwrap pid namespace
     * (the sandbox's own clean-up is test_sandbox's). */
    tsh_config(h, "[tests]\nsandbox = \"none\"\n");
    tsh_service(h, "t1");
    tsh_file(h, "hang", "tests.sh", HANGING);
    const char *dir = tsh_file(h, "hang", "Makefile", "test:\n\t@sh tests.sh\n");
    char project[600];
    snprintf(project, sizeof project, "%s", dir);

    int64_t started = clock_now_ms();
    tsh_submit(h, "hang1", 3, "{\"workspace\": \"%s\"}", project);
    CHECK(harness_wait(h, "task.progress", "hang1", 5000) != NULL);
    json_t *end = tsh_end(h, "hang1", 10000);
    int64_t took = clock_now_ms() - started;
    CHECK_STR(tsh_event(end), "task.failed");
    const char *error = harness_field(end, "error");
    /* The service's own timeout (3 s lease - 0.5 s margin), before the skeleton's. */
    CHECK(strstr(error, "test command timed out after 2.") != NULL);
    CHECK(strstr(error, "(killed): make test") != NULL);
    CHECK(strstr(error, "timed out after 3 s") == NULL);
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "ERROR");
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "NOT_ATTEMPTED");
    CHECK(took >= 2400 && took < 6000);

    /* No orphans: the shell and its background sleep are gone. */
    char path[700];
    snprintf(path, sizeof path, "%s/shell.pid", project);
    char *text = testenv_read_file(path);
    pid_t shell = text ? (pid_t)atoi(text) : 0;
    free(text);
    snprintf(path, sizeof path, "%s/child.pid", project);
    text = testenv_read_file(path);
    pid_t child = text ? (pid_t)atoi(text) : 0;
    free(text);
    CHECK(shell > 0 && child > 0);
    bool gone = false;
    for (int i = 0; i < 100 && !gone && shell > 0 && child > 0; i++) {
        gone = harness_pid_gone(shell) && harness_pid_gone(child);
        if (!gone)
            testenv_sleep_ms(20);
    }
    CHECK(gone);
    if (!gone && child > 0)
        kill(child, SIGKILL);

    /* The worker is free again. */
    const char *pass = tsh_make_project(h, "pass", TSH_PYTEST_PASS, 0);
    tsh_submit(h, "pass1", 30, "{\"workspace\": \"%s\"}", pass);
    end = tsh_end(h, "pass1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    harness_destroy(&h);
    return check_exit_code("test_test_service_timeout");
}
