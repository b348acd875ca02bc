/* A branch's test command is a stranger's code: run by the test-agent, it sees none of the
 * service's secrets — no ANTHROPIC_API_KEY or GH_TOKEN in its environment, and (with
 * bubblewrap, which deploy/setup.sh installs) no file under $HOME or $PANOPTICON_HOME —
 * while its own directory is writable; and a process it detaches with setsid does not
 * outlive the run. [tests] env passes a named variable through. Where bwrap does not work
 * (the test looks for itself), only the environment is checked and the test exits 77. */
#include "test_test_service_harness.h"

int main(void)
{
    harness_t *h = harness_new("sandbox");
    if (h == NULL)
        return 1;
    char path[700], userhome[600];
    snprintf(userhome, sizeof userhome, "%s/userhome", h->env->dir);
    snprintf(path, sizeof path, "%s/.ssh/id_test", userhome);
    CHECK(testenv_write_file(path, "sekrit-file-in-home\n") == 0);
    snprintf(path, sizeof path, "%s/secret.txt", h->env->home);
    CHECK(testenv_write_file(path, "sekrit-file-in-panopticon-home\n") == 0);
    setenv("HOME", userhome, 1);
    setenv("ANTHROPIC_API_KEY", "sekrit-api-key", 1);
    setenv("GH_TOKEN", "sekrit-gh-token", 1);
    setenv("CLOISTER_SANDBOX_TEST_VAR", "passed-through", 1);
    tsh_config(h, "[tests]\nenv = [\"CLOISTER_SANDBOX_TEST_VAR\"]\n");
    tsh_service(h, "t1");

    char script[2048];
    snprintf(script, sizeof script,
             "echo \"key=[$ANTHROPIC_API_KEY] gh=[$GH_TOKEN] var=[$CLOISTER_SANDBOX_TEST_VAR]\"\n"
             "cat \"$HOME/.ssh/id_test\" 2>&1\n"
             "cat '%s/secret.txt' 2>&1\n"
             "echo written > own-file && cat own-file\n"
             "setsid sleep 31.713 < /dev/null > /dev/null 2>&1 &\n"
             "kill -0 $! && echo 'sleeper running'\n"
             "echo '=== 1 passed in 0.01s ==='\n",
             h->env->home);
    tsh_file(h, "proj", "tests.sh", script);
    const char *dir = tsh_file(h, "proj", "Makefile", "test:\n\t@sh tests.sh\n");
    tsh_submit(h, "sb1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "sb1", 15000);
    CHECK_STR(tsh_event(end), "task.done");
    const char *output = tsh_result_str(end, "output_tail");
    CHECK(strstr(output, "key=[] gh=[] var=[passed-through]") != NULL);
    CHECK(strstr(output, "written") != NULL);
    const char *sandbox = tsh_result_str(end, "sandbox");
    /* Whether bwrap works is the test's own finding: the service saying "none" where bwrap
     * runs is a broken sandbox, not a machine without one. */
    bool bwrap_here = testenv_bwrap_works(false);
    if (!bwrap_here) {
        /* Only the environment is scrubbed here; the files are not hidden. */
        CHECK(strstr(sandbox, "none") != NULL);
        harness_destroy(&h);
        fprintf(stderr, "test_sandbox: SKIPPED the file and orphan checks: bwrap does not "
                        "work on this machine (the service says \"%s\"); the environment "
                        "was checked\n",
                sandbox);
        return 77;
    }
    CHECK(strncmp(sandbox, "bwrap", 5) == 0); /* also "bwrap, every capability dropped, ..." */
    CHECK(strstr(output, "sekrit") == NULL);
    CHECK(strstr(output, "sleeper running") != NULL); /* else its end would prove nothing */
    CHECK(testenv_wait_until(testenv_process_gone, "sleep 31.713", 5000));
    harness_destroy(&h);
    return check_exit_code("test_sandbox");
}
