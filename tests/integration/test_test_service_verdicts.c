/* cloister-test against a real broker: a passing project ends done with TEST_RESULT PASS
 * and its counts; a failing one ends done with TEST_RESULT FAIL and the failing tests
 * named (every one, also with long non-ASCII or non-UTF-8 reasons), also when its test
 * command exits 0 (a pipe into tee) while its output reports failures; no fix is attempted
 * unless asked; a directory without tests, a missing workspace and a payload without one
 * end failed with a clear reason; a git workspace on another branch than the task names
 * is tested as it is (and left on its branch); a repository git refuses (another uid's)
 * fails saying why, its tests never run in the checkout. */
#include "test_test_service_harness.h"

/* Runs a shell script in `dir`; returns its exit code. Its stdout goes to `out`. */
static int s_sh(harness_t *h, const char *dir, const char *script, char *out, size_t size)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, "sh", (char *)dir, NULL};
    return testenv_run(h->env, argv, out, size, 10000);
}

static void s_passing(harness_t *h)
{
    const char *dir = tsh_make_project(h, "pass", TSH_PYTEST_PASS, 0);
    tsh_submit(h, "pass1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "pass1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    CHECK_INT(tsh_result_int(end, "TESTS_RUN"), 3);
    CHECK_INT(tsh_result_int(end, "TESTS_PASSED"), 3);
    CHECK_INT(tsh_result_int(end, "TESTS_FAILED"), 0);
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES")), 0);
    CHECK_STR(tsh_result_str(end, "TEST_COMMAND"), "make test");
    CHECK_STR(tsh_result_str(end, "runner"), "make");
    CHECK(json_is_false(tsh_result(end, "FIX_ATTEMPTED")));
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "NOT_ATTEMPTED");
    CHECK(tsh_result_int(end, "duration_ms") >= 0);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "3 tests passed") != NULL);
    /* The output streamed as progress. */
    bool streamed = false;
    for (int i = 0; (i = harness_find(h, i, "task.progress", "pass1")) >= 0; i++) {
        if (strcmp(harness_field(h->events[i], "kind"), "output") == 0 &&
            strstr(harness_field(h->events[i], "text"), "3 passed") != NULL)
            streamed = true;
    }
    CHECK(streamed);
}

static void s_failing(harness_t *h)
{
    const char *dir = tsh_make_project(h, "fail", TSH_PYTEST_FAIL, 1);
    tsh_submit(h, "fail1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "fail1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_INT(tsh_result_int(end, "TESTS_RUN"), 3);
    CHECK_INT(tsh_result_int(end, "TESTS_PASSED"), 1);
    CHECK_INT(tsh_result_int(end, "TESTS_FAILED"), 2);
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES")), 2);
    CHECK(tsh_failure_index(end, "FAILURES", "test_add - assert 3 == 4") >= 0);
    CHECK(tsh_failure_index(end, "FAILURES", "test_div - ZeroDivisionError") >= 0);
    CHECK_INT(tsh_result_int(end, "exit_code"), 2); /* make's own code for a failed recipe */
    CHECK(json_is_false(tsh_result(end, "FIX_ATTEMPTED")));
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "NOT_ATTEMPTED");
    CHECK(strstr(tsh_result_str(end, "NOTES"), "2 of 3 tests failed") != NULL);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "no fix requested") != NULL);
    CHECK(strstr(tsh_result_str(end, "output_tail"), "short test summary") != NULL);
}

/* A recipe that pipes the runner into tee exits 0 although tests failed: FAIL all the
 * same, and NOTES says why the exit code did not count. */
static void s_exit_zero_failing(harness_t *h)
{
    tsh_file(h, "tee", "tests.sh", "cat <<'EOF'\n" TSH_PYTEST_FAIL "EOF\nexit 1\n");
    const char *dir = tsh_file(h, "tee", "Makefile", "test:\n\t@sh tests.sh | tee test.log\n");
    tsh_submit(h, "tee1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "tee1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_INT(tsh_result_int(end, "exit_code"), 0);
    CHECK_INT(tsh_result_int(end, "TESTS_FAILED"), 2);
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES")), 2);
    const char *notes = tsh_result_str(end, "NOTES");
    CHECK(strstr(notes, "2 of 3 tests failed") != NULL);
    CHECK(strstr(notes, "the test command exited 0 although its output reports failures") !=
          NULL);
}

/* True when FAILURES item i is valid UTF-8 of at most TESTRUN_MAX_FAILURE_LEN (400) bytes. */
static bool s_failure_ok(const json_t *end, int i)
{
    const char *item = json_string_value(json_array_get(tsh_result(end, "FAILURES"), (size_t)i));
    json_t *copy = item ? json_string(item) : NULL; /* NULL when not UTF-8 */
    bool ok = copy != NULL && strlen(item) <= 400;
    json_decref(copy);
    return ok;
}

/* Failure reasons that are long and non-ASCII, or not UTF-8 at all: every failure is in
 * FAILURES, as valid UTF-8 cut on a character's boundary. */
static void s_unicode_failures(harness_t *h)
{
    char output[4096] = "FAILED tests/test_x.py::test_unicode1 - AssertionError: ";
    size_t len = strlen(output);
    while (len < 1000) {
        output[len++] = '\xc3'; /* é */
        output[len++] = '\xa9';
    }
    output[len] = '\0';
    strcat(output, "\nFAILED tests/test_x.py::test_latin1 - assert 'caf\xe9' == 'cafe'\n"
                   "FAILED tests/test_x.py::test_plain - assert 1 == 2\n"
                   "========== 3 failed, 1 passed in 0.02s ==========\n");
    const char *dir = tsh_make_project(h, "unicode", output, 1);
    tsh_submit(h, "utf1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "utf1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_INT(tsh_result_int(end, "TESTS_FAILED"), 3);
    CHECK_INT((int)json_array_size(tsh_result(end, "FAILURES")), 3);
    int unicode = tsh_failure_index(end, "FAILURES", "test_unicode1 - AssertionError: \xc3\xa9");
    int latin1 = tsh_failure_index(end, "FAILURES", "test_latin1 - assert 'caf\xef\xbf\xbd'");
    CHECK(unicode >= 0 && s_failure_ok(end, unicode));
    CHECK(latin1 >= 0 && s_failure_ok(end, latin1));
    CHECK(tsh_failure_index(end, "FAILURES", "test_plain - assert 1 == 2") >= 0);
}

static void s_no_tests(harness_t *h)
{
    const char *dir = tsh_file(h, "empty", "README", "nothing to test\n");
    tsh_submit(h, "none1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "none1", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    char expected[600];
    snprintf(expected, sizeof expected, "no test command found in %s: ", dir);
    CHECK(strstr(harness_field(end, "error"), expected) != NULL);
    CHECK(strstr(harness_field(end, "error"), "Makefile check/test target") != NULL);
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "ERROR");
    CHECK_STR(tsh_result_str(end, "FIX_RESULT"), "NOT_ATTEMPTED");
}

static void s_bad_workspace(harness_t *h)
{
    tsh_submit(h, "gone1", 30, "{\"workspace\": \"%s/does-not-exist\"}", h->env->dir);
    json_t *end = tsh_end(h, "gone1", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK(strstr(harness_field(end, "error"), "does-not-exist does not exist") != NULL);
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "ERROR");

    tsh_submit(h, "nows1", 30, "{\"branch\": \"main\"}");
    end = tsh_end(h, "nows1", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK_STR(harness_field(end, "error"), "the task's payload has no workspace");

    tsh_submit(h, "rel1", 30, "{\"workspace\": \"pass\"}");
    end = harness_wait(h, "task.rejected", "rel1", 5000); /* the broker refuses it */
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "error"), "payload.workspace 'pass' is not an absolute path");
}

/* A repository owned by another uid: git refuses to open it (its ownership check). The
 * test-agent must say so, and must not run the tests in the user's checkout as if it were
 * no repository at all (issue 37: it ran `make test` there, "the directory as it is").
 * Needs root to give the directory to another uid. */
static void s_foreign_owner(harness_t *h)
{
    if (geteuid() != 0) {
        fprintf(stderr, "s_foreign_owner: not root, cannot chown a repository: not run\n");
        return;
    }
    tsh_file(h, "foreign", "tests.sh", "touch ran-in-the-checkout\n" "echo '1 passed'\n");
    const char *dir = tsh_file(h, "foreign", "Makefile", "test:\n\t@sh tests.sh\n");
    char out[4096];
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git init -q && git add -A && git -c user.name=t "
                   "-c user.email=t@t commit -qm init && chown -R 54321:54321 .",
                   out, sizeof out),
              0);
    tsh_submit(h, "foreign1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "foreign1", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    const char *error = harness_field(end, "error");
    CHECK(strstr(error, "git refuses the repository") != NULL);
    CHECK(strstr(error, "belongs to uid 54321") != NULL);
    CHECK(strstr(error, "safe.directory") != NULL);
    char marker[700];
    snprintf(marker, sizeof marker, "%s/ran-in-the-checkout", dir);
    CHECK(access(marker, F_OK) != 0);
}

/* The commit of `rev` in the repository at dir, into sha (41 bytes). */
static void s_rev(harness_t *h, const char *dir, const char *rev, char *sha)
{
    char script[300], out[512];
    snprintf(script, sizeof script, "cd \"$1\" && git rev-parse %s", rev);
    CHECK_INT(s_sh(h, dir, script, out, sizeof out), 0);
    snprintf(sha, 41, "%.40s", out);
}

/* The test-agent tests the branch or commit it was asked for, in a worktree of its own:
 * never the user's checkout (their HEAD, index and uncommitted changes stay as they are). */
static void s_other_branch(harness_t *h)
{
    const char *dir = tsh_make_project(h, "repo", TSH_PYTEST_PASS, 0);
    char out[2048], main_sha[41], feature_sha[41];
    /* main passes; feature fails; the checkout stays on main with an uncommitted change
     * that would make the run an error. */
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git init -q -b main && git add -A && "
                   "git -c user.name=t -c user.email=t@t commit -q -m init && "
                   "git checkout -q -b feature",
                   out, sizeof out),
              0);
    tsh_file(h, "repo", "tests.sh", "cat <<'EOF'\n" TSH_PYTEST_FAIL "EOF\nexit 1\n");
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git -c user.name=t -c user.email=t@t commit -q -am 'break it' "
                   "&& git checkout -q main && echo 'echo UNCOMMITTED; exit 3' > tests.sh",
                   out, sizeof out),
              0);
    s_rev(h, dir, "main", main_sha);
    s_rev(h, dir, "feature", feature_sha);

    tsh_submit(h, "branch1", 30, "{\"workspace\": \"%s\", \"branch\": \"feature\"}", dir);
    json_t *end = tsh_end(h, "branch1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_STR(tsh_result_str(end, "TESTED_COMMIT"), feature_sha);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "tested branch feature") != NULL);

    /* No branch: the HEAD commit, not the uncommitted change. */
    tsh_submit(h, "branch2", 30, "{\"workspace\": \"%s\"}", dir);
    end = tsh_end(h, "branch2", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    CHECK_STR(tsh_result_str(end, "TESTED_COMMIT"), main_sha);
    char note[200];
    snprintf(note, sizeof note, "no branch given: the workspace's HEAD %.12s", main_sha);
    CHECK(strstr(tsh_result_str(end, "NOTES"), note) != NULL);

    /* A commit, by SHA. */
    tsh_submit(h, "branch3", 30, "{\"workspace\": \"%s\", \"commit\": \"%s\"}", dir, feature_sha);
    end = tsh_end(h, "branch3", 10000);
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "FAIL");
    CHECK_STR(tsh_result_str(end, "TESTED_COMMIT"), feature_sha);

    /* A branch that does not exist is an error that names it. */
    tsh_submit(h, "branch4", 30, "{\"workspace\": \"%s\", \"branch\": \"nope\"}", dir);
    end = tsh_end(h, "branch4", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    char error[700];
    snprintf(error, sizeof error, "no branch 'nope' in %s (neither refs/heads/nope nor a "
                                  "remote's branch",
             dir);
    CHECK(strstr(harness_field(end, "error"), error) != NULL);

    /* A branch that exists only on the remote (origin/evil8, as a fetch leaves it) is
     * tested, as the review-agent reviews it (one rule, repository.h); a tag is no branch. */
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git update-ref refs/remotes/origin/evil8 feature && "
                   "git tag evil9 feature",
                   out, sizeof out),
              0);
    tsh_submit(h, "remote-only", 30, "{\"workspace\": \"%s\", \"branch\": \"evil8\"}", dir);
    end = tsh_end(h, "remote-only", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TESTED_COMMIT"), feature_sha);
    CHECK(strstr(tsh_result_str(end, "NOTES"), "tested branch evil8") != NULL);
    tsh_submit(h, "tag-only", 30, "{\"workspace\": \"%s\", \"branch\": \"evil9\"}", dir);
    end = tsh_end(h, "tag-only", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK(strstr(harness_field(end, "error"), "no branch 'evil9'") != NULL);

    /* The user's checkout: still on main, the same uncommitted change, no worktree or
     * branch left behind. */
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git symbolic-ref --short HEAD && git status --porcelain && "
                   "cat tests.sh && git worktree list | wc -l && git branch | wc -l",
                   out, sizeof out),
              0);
    CHECK_STR(out, "main\n M tests.sh\necho UNCOMMITTED; exit 3\n1\n2\n");

    /* A directory outside git: a branch cannot be tested there. */
    const char *plain = tsh_make_project(h, "plain", TSH_PYTEST_PASS, 0);
    tsh_submit(h, "branch5", 30, "{\"workspace\": \"%s\", \"branch\": \"main\"}", plain);
    end = tsh_end(h, "branch5", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK(strstr(harness_field(end, "error"), "is not in a git repository: cannot test branch "
                                              "'main'") != NULL);
}

/* The tested commit's own .cloister/config.toml sets the test command; one that does not
 * parse fails the task with where. */
static void s_repo_settings(harness_t *h)
{
    const char *dir = tsh_make_project(h, "settings", TSH_PYTEST_FAIL, 1);
    tsh_file(h, "settings", ".cloister/config.toml",
             "[tests]\ncommand = \"echo '=== 7 passed in 0.01s ==='\"\n");
    char out[2048];
    CHECK_INT(s_sh(h, dir,
                   "cd \"$1\" && git init -q -b main && git add -A && "
                   "git -c user.name=t -c user.email=t@t commit -q -m init && "
                   "git checkout -q -b broken && printf '[tests\\n' > .cloister/config.toml && "
                   "git -c user.name=t -c user.email=t@t commit -q -am broken && "
                   "git checkout -q main",
                   out, sizeof out),
              0);
    tsh_submit(h, "repo1", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "repo1", 10000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
    CHECK_INT(tsh_result_int(end, "TESTS_RUN"), 7);
    CHECK(strstr(tsh_result_str(end, "NOTES"),
                 "test command from the repository's .cloister/config.toml") != NULL);

    tsh_submit(h, "repo2", 30, "{\"workspace\": \"%s\", \"branch\": \"broken\"}", dir);
    end = tsh_end(h, "repo2", 10000);
    CHECK_STR(tsh_event(end), "task.failed");
    CHECK(strstr(harness_field(end, "error"), "the repository's settings: ") != NULL &&
          strstr(harness_field(end, "error"), ":.cloister/config.toml:1:") != NULL);
}

int main(void)
{
    harness_t *h = harness_new("test-service-verdicts");
    if (h == NULL)
        return 1;
    tsh_config(h, "");
    tsh_service(h, "t1");
    s_passing(h);
    s_failing(h);
    s_exit_zero_failing(h);
    s_unicode_failures(h);
    s_no_tests(h);
    s_bad_workspace(h);
    s_other_branch(h);
    s_repo_settings(h);
    s_foreign_owner(h);
    harness_destroy(&h);
    return check_exit_code("test_test_service_verdicts");
}
