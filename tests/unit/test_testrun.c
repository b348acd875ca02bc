/* Unit tests for common/testrun: output parsing from captured runner outputs
 * (tests/fixtures/testrun/), and real runs of small shell commands (pass, fail, a pipe that
 * exits 0 although tests failed, timeout with a background child, output cap, a command that
 * cannot start), and the step-wise API (output streamed line by line while it runs, a
 * cancel that kills the whole group promptly, finishing a run that still runs). */
#include "check.h"
#include "clock.h"
#include "failure.h"
#include "testenv.h"
#include "testrun.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static testrun_result_t *s_parse_fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/testrun/%s", CLOISTER_SOURCE_DIR, name);
    char *text = testenv_read_file(path);
    if (!text) {
        fprintf(stderr, "cannot read fixture %s\n", path);
        check_fail();
    }
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_parse(&r, text, strlen(text)), 0);
    free(text);
    return r;
}

static void s_check_counts(const testrun_result_t *r, long run, long passed, long failed,
                           long skipped)
{
    CHECK_INT(r->run, run);
    CHECK_INT(r->passed, passed);
    CHECK_INT(r->failed, failed);
    CHECK_INT(r->skipped, skipped);
}

static void s_check_failure(const testrun_result_t *r, size_t i, const char *expected)
{
    if (i >= r->nfailures) {
        fprintf(stderr, "failure %zu missing, expected \"%s\"\n", i, expected);
        check_fail();
    }
    CHECK_STR(r->failures[i], expected);
}

static void test_pytest(void)
{
    testrun_result_t *r = s_parse_fixture("pytest_fail.txt");
    if (!r)
        return;
    s_check_counts(r, 42, 40, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0, "tests/test_cart.py::test_cart_total - assert 3 == 4");
    s_check_failure(r, 1, "tests/test_checkout.py::test_checkout_discount - KeyError: 'SAVE10'");
    CHECK(!r->started);
    CHECK_INT(r->exit_code, -1);
    testrun_result_destroy(&r);
    CHECK(r == NULL);

    r = s_parse_fixture("pytest_pass.txt");
    if (r) {
        s_check_counts(r, 12, 12, 0, 0);
        CHECK_INT(r->nfailures, 0);
        testrun_result_destroy(&r);
    }

    r = s_parse_fixture("pytest_error.txt");
    if (r) {
        s_check_counts(r, 1, 0, 1, 0);
        CHECK_INT(r->nfailures, 1);
        s_check_failure(r, 0,
                        "tests/test_broken.py - ModuleNotFoundError: No module named 'requests'");
        testrun_result_destroy(&r);
    }
}

/* Python's unittest, output recorded from a real `python3 -m unittest` run. */
static void test_unittest(void)
{
    testrun_result_t *r = s_parse_fixture("unittest_fail.txt");
    if (!r)
        return;
    s_check_counts(r, 4, 2, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0, "test_div (tests.test_math.MathTest.test_div)");
    s_check_failure(r, 1, "test_add (tests.test_math.MathTest.test_add)");
    testrun_result_destroy(&r);

    r = s_parse_fixture("unittest_pass.txt");
    if (r) {
        s_check_counts(r, 2, 2, 0, 0);
        CHECK_INT(r->nfailures, 0);
        testrun_result_destroy(&r);
    }
}

static void test_jest(void)
{
    testrun_result_t *r = s_parse_fixture("jest_fail.txt");
    if (!r)
        return;
    s_check_counts(r, 42, 40, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0,
                    "cart › computes the total - expect(received).toBe(expected) // Object.is "
                    "equality");
    s_check_failure(r, 1,
                    "cart › removes an item - TypeError: Cannot read properties of undefined "
                    "(reading 'id')");
    testrun_result_destroy(&r);

    /* Only the ✕ marks (no ● report): the weaker hints name the failures. */
    const char *marks = "  cart\n    ✓ adds (2 ms)\n    ✕ computes the total (5 ms)\n"
                        "Tests:       1 failed, 1 passed, 2 total\n";
    CHECK_INT(testrun_parse(&r, marks, strlen(marks)), 0);
    s_check_counts(r, 2, 1, 1, 0);
    CHECK_INT(r->nfailures, 1);
    s_check_failure(r, 0, "computes the total");
    testrun_result_destroy(&r);
}

static void test_vitest(void)
{
    testrun_result_t *r = s_parse_fixture("vitest_fail.txt");
    if (!r)
        return;
    s_check_counts(r, 42, 40, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0,
                    "src/cart/cart.test.ts > cart > computes the total - AssertionError: "
                    "expected 3 to be 4 // Object.is equality");
    s_check_failure(r, 1,
                    "src/cart/cart.test.ts > cart > removes an item - TypeError: Cannot read "
                    "properties of undefined (reading 'id')");
    testrun_result_destroy(&r);
}

static void test_cargo(void)
{
    testrun_result_t *r = s_parse_fixture("cargo_fail.txt");
    if (!r)
        return;
    /* Summed over the three "test result:" lines. */
    s_check_counts(r, 43, 41, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0, "cart::tests::computes_total - assertion `left == right` failed");
    s_check_failure(r, 1, "checkout::tests::applies_discount - unknown code: SAVE10");
    testrun_result_destroy(&r);
}

static void test_go(void)
{
    testrun_result_t *r = s_parse_fixture("go_fail.txt");
    if (r) {
        /* Without -v only failing tests are named: counts are packages. */
        s_check_counts(r, 3, 2, 1, 0);
        CHECK_INT(r->nfailures, 3);
        s_check_failure(r, 0, "TestCartTotal - cart_test.go:14: Total() = 3, want 4");
        s_check_failure(r, 1, "TestCheckout");
        s_check_failure(r, 2,
                        "TestCheckout/discount - checkout_test.go:31: unknown code \"SAVE10\"");
        testrun_result_destroy(&r);
    }

    r = s_parse_fixture("go_verbose.txt");
    if (r) {
        s_check_counts(r, 4, 3, 1, 1);
        CHECK_INT(r->nfailures, 1);
        s_check_failure(r, 0, "TestCartTotal");
        testrun_result_destroy(&r);
    }

    /* A package that does not build: no test names, the package is the failure. */
    r = s_parse_fixture("go_build_failed.txt");
    if (r) {
        s_check_counts(r, 2, 1, 1, 0);
        CHECK_INT(r->nfailures, 1);
        s_check_failure(r, 0, "example.com/shop/store - build failed");
        testrun_result_destroy(&r);
    }
}

static void test_ctest(void)
{
    testrun_result_t *r = s_parse_fixture("ctest_fail.txt");
    if (!r)
        return;
    s_check_counts(r, 19, 17, 2, 1);
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0, "cart_total - Failed");
    s_check_failure(r, 1, "net_fetch - Timeout");
    testrun_result_destroy(&r);

    const char *ok =
        "100% tests passed, 0 tests failed out of 20\n\nTotal Test time (real) = 1 sec\n";
    CHECK_INT(testrun_parse(&r, ok, strlen(ok)), 0);
    s_check_counts(r, 20, 20, 0, 0);
    testrun_result_destroy(&r);
}

static void test_node(void)
{
    testrun_result_t *r = s_parse_fixture("node_tap.txt");
    if (!r)
        return;
    s_check_counts(r, 41, 39, 2, 1);
    /* The suite that failed only because of its subtest is left out. */
    CHECK_INT(r->nfailures, 2);
    s_check_failure(r, 0, "computes the total - Expected values to be strictly equal:");
    s_check_failure(r, 1, "checkout rejects unknown codes - unknown code: SAVE10");
    testrun_result_destroy(&r);

    /* The spec reporter's summary. */
    const char *spec = "✔ adds (0.4ms)\n✖ total (0.7ms)\nℹ tests 2\nℹ suites 0\nℹ pass 1\n"
                       "ℹ fail 1\nℹ cancelled 0\nℹ skipped 0\nℹ todo 0\n";
    CHECK_INT(testrun_parse(&r, spec, strlen(spec)), 0);
    s_check_counts(r, 2, 1, 1, 0);
    testrun_result_destroy(&r);
}

/* Summaries of no runner in particular, for any test command (a Makefile's script, mocha,
 * RSpec, minitest, Unity, bats): the counts are read, and words that are not counts of tests
 * keep a line from being taken for a summary. */
static void test_generic_summaries(void)
{
    static const struct {
        const char *output;
        long run, passed, failed, skipped;
    } cases[] = {
        {"running the suite\n0 passed, 1 failed\n", 1, 0, 1, 0},
        {"3 passed, 0 failed\n", 3, 3, 0, 0},
        {"  12 passing (40ms)\n  2 pending\n  1 failing\n\n  1) cart adds:\n", 13, 12, 1, 2},
        {"Tests: 1 failed, 4 passed\n", 5, 4, 1, 0},
        {"10 tests, 2 failures\n", 10, 8, 2, 0},
        {"10 examples, 1 failure, 2 pending\n", 8, 7, 1, 2},
        {"10 runs, 20 assertions, 1 failures, 0 errors, 2 skips\n", 8, 7, 1, 2},
        {"-----------------------\n5 Tests 1 Failures 0 Ignored\nFAIL\n", 5, 4, 1, 0},
        /* Two suites run by one make target add up. */
        {"unit: 4 passed, 0 failed\nintegration: 2 passed, 1 failed\n", 7, 6, 1, 0},
        /* TAP with a plan and no summary (prove, bats); a planned test that never
         * reported counts as failed. */
        {"1..4\nok 1 - adds\nnot ok 2 - totals\nok 3 - skips # SKIP no db\n", 3, 1, 2, 1},
        {"TAP version 13\n1..2\nok 1 a\nok 2 b\n", 2, 2, 0, 0},
        {"1..3\nok 1 a\nnot ok 2 b # TODO later\nok 3 c\n", 2, 2, 0, 1},
        /* Not summaries: a compiler's error count, other things counted. */
        {"src/a.c:3: error: x\n2 errors generated.\nmake: *** [test] Error 1\n", -1, -1, -1,
         -1},
        {"3 files changed, 1 failed to apply\n", -1, -1, -1, -1},
        {"2 passed\n", -1, -1, -1, -1},
        {"ok 1 - not TAP without a plan\n", -1, -1, -1, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        testrun_result_t *r = NULL;
        CHECK_INT(testrun_parse(&r, cases[i].output, strlen(cases[i].output)), 0);
        if (r->run != cases[i].run || r->passed != cases[i].passed ||
            r->failed != cases[i].failed || r->skipped != cases[i].skipped)
            fprintf(stderr, "case %zu: %s", i, cases[i].output);
        s_check_counts(r, cases[i].run, cases[i].passed, cases[i].failed, cases[i].skipped);
        testrun_result_destroy(&r);
    }

    /* A command that exits 1 having printed failing counts is FAIL, not ERROR ("the tests
     * could not run" is for a command that printed no counts at all). */
    static const struct {
        const char *output;
        const char *verdict;
    } exit_one[] = {
        {"0 passed, 1 failed\n", "FAIL"},
        {"1..2\nok 1 a\nnot ok 2 b\n", "FAIL"},
        {"make: *** No rule to make target 'test'.  Stop.\n", "ERROR"},
    };
    for (size_t i = 0; i < sizeof exit_one / sizeof exit_one[0]; i++) {
        testrun_result_t *r = NULL;
        CHECK_INT(testrun_parse(&r, exit_one[i].output, strlen(exit_one[i].output)), 0);
        r->started = true;
        r->exit_code = 1;
        CHECK_STR(testrun_verdict_name(testrun_verdict(r)), exit_one[i].verdict);
        testrun_result_destroy(&r);
    }

    /* A runner's own summary wins over a neutral line in the same output. */
    const char *both = "setup: 1 passed, 0 failed\n==== 2 failed, 5 passed in 0.3s ====\n";
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_parse(&r, both, strlen(both)), 0);
    s_check_counts(r, 7, 5, 2, 0);
    testrun_result_destroy(&r);
}

static void test_unknown_output(void)
{
    testrun_result_t *r = NULL;
    const char *text = "make: *** No rule to make target 'test'.  Stop.\n";
    CHECK_INT(testrun_parse(&r, text, strlen(text)), 0);
    s_check_counts(r, -1, -1, -1, -1);
    CHECK_INT(r->nfailures, 0);
    CHECK_STR(r->output, text);
    testrun_result_destroy(&r);

    /* Binary junk and a missing final newline are handled. */
    const char junk[] = "\x1b[31m\x00\xff\xfe--- FAIL: \n# tests x\nTests: \nnot ok";
    CHECK_INT(testrun_parse(&r, junk, sizeof junk - 1), 0);
    CHECK_INT(r->output_len, sizeof junk - 1);
    testrun_result_destroy(&r);

    CHECK_INT(testrun_parse(&r, "", 0), 0);
    CHECK_INT(r->run, -1);
    testrun_result_destroy(&r);
}

/* Lines that look like summaries but cannot be (found by fuzzing): a cargo-style
 * separator without a test name is no failure, and negative or absurd counts are not
 * believed (they overflowed, or gave negative counts the header promises never happen). */
static void test_implausible_lines(void)
{
    testrun_result_t *r = NULL;
    const char *separator = "running 3 tests\n---- stdout ----\nall good\n";
    CHECK_INT(testrun_parse(&r, separator, strlen(separator)), 0);
    CHECK_INT(r->nfailures, 0);
    CHECK(!r->failures_reported);
    testrun_result_destroy(&r);

    const char *tap = "# pass -7\n# fail -3\n# skipped 9223372036854775807\n"
                      "# skipped 9223372036854775807\n";
    CHECK_INT(testrun_parse(&r, tap, strlen(tap)), 0);
    CHECK(r->passed == -1 && r->failed == -1 && r->skipped == -1);
    testrun_result_destroy(&r);

    const char *ctest = "50% tests passed, -1 tests failed out of 9223372036854775807\n";
    CHECK_INT(testrun_parse(&r, ctest, strlen(ctest)), 0);
    CHECK_INT(r->run, -1);
    testrun_result_destroy(&r);
}

static void test_many_failures(void)
{
    size_t cap = 64 * 1024;
    char *text = malloc(cap);
    size_t used = 0;
    for (int i = 0; i < TESTRUN_MAX_FAILURES + 20; i++)
        used += (size_t)snprintf(text + used, cap - used,
                                 "FAILED tests/test_a.py::test_%d - boom\n", i);
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_parse(&r, text, used), 0);
    CHECK_INT(r->nfailures, TESTRUN_MAX_FAILURES);
    CHECK(r->failures_truncated);
    testrun_result_destroy(&r);
    free(text);
}

/* Failure texts are valid UTF-8 (jansson takes them as JSON strings): a long reason is cut
 * before a character that does not fit, and bytes that are not UTF-8 become U+FFFD. */
static void test_failure_text_utf8(void)
{
    char text[4096] = "FAILED tests/t.py::test_long1 - AssertionError: ";
    size_t len = strlen(text);
    while (len < 1000) { /* "é" (2 bytes) repeated, at an odd offset in the failure text */
        text[len++] = '\xc3';
        text[len++] = '\xa9';
    }
    text[len] = '\0';
    strcat(text, "\nFAILED tests/t.py::test_latin1 - assert 'caf\xe9' == 'cafe'\n"
                 "FAILED tests/t.py::test_bad - a\xc0\xaf b\xed\xa0\x80 c\xf0\x9f\x98\x80 d\xe2\x82\n"
                 "==== 3 failed in 0.1s ====\n");
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_parse(&r, text, strlen(text)), 0);
    CHECK_INT(r->nfailures, 3);
    for (size_t i = 0; i < r->nfailures; i++) {
        json_t *value = json_string(r->failures[i]);
        CHECK(value != NULL);
        json_decref(value);
    }
    /* Cut at the limit, on a character's end. */
    const char *first = r->failures[0];
    size_t first_len = strlen(first);
    CHECK(first_len <= TESTRUN_MAX_FAILURE_LEN);
    CHECK(first_len >= TESTRUN_MAX_FAILURE_LEN - 1);
    CHECK(strncmp(first, "tests/t.py::test_long1 - AssertionError: \xc3\xa9", 43) == 0);
    CHECK(first_len >= 2 && strcmp(first + first_len - 2, "\xc3\xa9") == 0);
    /* A Latin-1 byte, an overlong form, a surrogate and a sequence cut short become U+FFFD;
     * a 4-byte character stays. */
    s_check_failure(r, 1, "tests/t.py::test_latin1 - assert 'caf\xef\xbf\xbd' == 'cafe'");
    s_check_failure(r, 2,
                    "tests/t.py::test_bad - a\xef\xbf\xbd\xef\xbf\xbd b\xef\xbf\xbd\xef\xbf\xbd"
                    "\xef\xbf\xbd c\xf0\x9f\x98\x80 d\xef\xbf\xbd\xef\xbf\xbd");
    testrun_result_destroy(&r);
}

/* --- real runs ----------------------------------------------------------------------- */

static void test_run_pass(testenv_t *env)
{
    testrun_options_t o = {
        .command = "echo ok; echo to-stderr >&2; pwd", .dir = env->dir, .timeout_ms = 10000};
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_run(&r, &o), 0);
    if (!r)
        return;
    CHECK(r->started);
    CHECK_INT(r->exit_code, 0);
    CHECK(!r->timed_out);
    CHECK(strstr(r->output, "ok\nto-stderr\n") != NULL);
    CHECK(strstr(r->output, env->dir) != NULL);
    CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "PASS");
    testrun_result_destroy(&r);
}

static void test_run_fail(testenv_t *env)
{
    /* Tests ran and failed: FAIL, with the parsed counts. */
    testrun_options_t o = {.command = "echo 'FAILED tests/test_a.py::test_b - assert 1 == 2'; "
                                      "echo '==== 1 failed, 3 passed in 0.01s ===='; exit 1",
                           .dir = env->dir,
                           .timeout_ms = 10000};
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_run(&r, &o), 0);
    if (!r)
        return;
    CHECK_INT(r->exit_code, 1);
    s_check_counts(r, 4, 3, 1, 0);
    s_check_failure(r, 0, "tests/test_a.py::test_b - assert 1 == 2");
    CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "FAIL");
    testrun_result_destroy(&r);

    /* A command that fails without running any test: ERROR. */
    o.command = "echo 'sh: 1: pytest: not found' >&2; exit 127";
    CHECK_INT(testrun_run(&r, &o), 0);
    CHECK_INT(r->exit_code, 127);
    CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "ERROR");
    testrun_result_destroy(&r);

    /* A directory that does not exist: not started, ERROR. */
    o.command = "true";
    o.dir = "/nonexistent/cloister-dir";
    CHECK(testrun_run(&r, &o) < 0);
    CHECK(r != NULL);
    if (r) {
        CHECK(!r->started);
        CHECK(r->error[0] != '\0');
        CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "ERROR");
        testrun_result_destroy(&r);
    }

    o.command = NULL;
    CHECK_INT(testrun_run(&r, &o), FAILURE_INVALID);
    CHECK(r == NULL);
}

/* The verdict of `output` as if the command that printed it had exited 0. */
static const char *s_verdict_exit_zero(const char *output)
{
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_parse(&r, output, strlen(output)), 0);
    if (!r)
        return "";
    r->started = true;
    r->exit_code = 0;
    const char *verdict = testrun_verdict_name(testrun_verdict(r));
    testrun_result_destroy(&r);
    return verdict;
}

/* A command that exits 0 although its output reports failures is FAIL: a runner piped into
 * tee exits with tee's status. */
static void test_run_exit_zero_failures(testenv_t *env)
{
    testrun_options_t o = {.command = "{ echo 'FAILED tests/test_a.py::test_b - assert 1 == 2'; "
                                      "echo '==== 1 failed, 3 passed in 0.01s ===='; exit 1; } "
                                      "| tee test.log",
                           .dir = env->dir,
                           .timeout_ms = 10000};
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_run(&r, &o), 0);
    if (!r)
        return;
    CHECK_INT(r->exit_code, 0);
    s_check_counts(r, 4, 3, 1, 0);
    CHECK(r->failures_reported);
    CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "FAIL");
    testrun_result_destroy(&r);

    /* No summary, but a failure named by the runner's report. */
    CHECK_STR(s_verdict_exit_zero("FAILED tests/test_a.py::test_b - assert 1 == 2\n"), "FAIL");
    CHECK_STR(s_verdict_exit_zero("--- FAIL: TestAdd (0.00s)\n    add_test.go:9: 3 != 4\nFAIL\n"
                                  "FAIL\texample.com/x\t0.01s\n"),
              "FAIL");
    CHECK_STR(s_verdict_exit_zero("Tests:       1 failed, 2 passed, 3 total\n"), "FAIL");
    /* A summary of 0 failures outweighs a jest warning block; hints alone are not enough. */
    CHECK_STR(s_verdict_exit_zero("\xe2\x97\x8f Validation Warning:\n\n  Unknown option\n"
                                  "Tests:       3 passed, 3 total\n"),
              "PASS");
    CHECK_STR(s_verdict_exit_zero("  \xe2\x9c\x95 looks like a failure (3 ms)\n"), "PASS");
    CHECK_STR(s_verdict_exit_zero("==== 3 passed in 0.01s ====\n"), "PASS");
    CHECK_STR(s_verdict_exit_zero("all good\n"), "PASS");
}

static void test_run_timeout(testenv_t *env)
{
    /* The command leaves a child in its group and then hangs; both must be gone. */
    char pidfile[512];
    snprintf(pidfile, sizeof pidfile, "%s/bg.pid", env->dir);
    char command[1024];
    snprintf(command, sizeof command, "sleep 100 & echo $! > '%s'; echo started; sleep 100",
             pidfile);
    testrun_options_t o = {
        .command = command, .dir = env->dir, .timeout_ms = 300, .kill_grace_ms = 200};
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_run(&r, &o), 0);
    if (!r)
        return;
    CHECK(r->timed_out);
    CHECK(r->duration_ms >= 300);
    CHECK(r->duration_ms < 5000);
    CHECK(strstr(r->output, "started") != NULL);
    CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "ERROR");
    testrun_result_destroy(&r);

    char *text = testenv_read_file(pidfile);
    CHECK(text != NULL);
    if (text) {
        pid_t bg = (pid_t)atoi(text);
        CHECK(bg > 0);
        /* The background sleep was not our child: it may linger as a zombie of init for a
         * moment, so wait briefly for it to disappear. */
        bool gone = false;
        for (int i = 0; i < 100 && !gone; i++) {
            gone = kill(bg, 0) != 0 && errno == ESRCH;
            if (!gone) {
                char stat_path[64];
                snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", (int)bg);
                char *st = testenv_read_file(stat_path);
                /* A zombie (state Z) is dead already. */
                char *close_paren = st ? strrchr(st, ')') : NULL;
                gone = st == NULL || (close_paren && close_paren[2] == 'Z');
                free(st);
            }
            if (!gone)
                testenv_sleep_ms(20);
        }
        CHECK(gone);
        free(text);
    }
}

static void test_run_output_cap(testenv_t *env)
{
    /* 2000 lines of 100 bytes; only the last 4096 bytes are kept. */
    testrun_options_t o = {
        .command = "i=0; while [ $i -lt 2000 ]; do printf '%099d\\n' $i; i=$((i+1)); done; "
                   "echo '=== 5 passed in 0.01s ==='",
        .dir = env->dir,
        .timeout_ms = 20000,
        .output_cap = 4096};
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_run(&r, &o), 0);
    if (!r)
        return;
    CHECK_INT(r->output_len, 4096);
    CHECK_INT(strlen(r->output), 4096);
    CHECK(r->output_truncated);
    CHECK(strstr(r->output, "=== 5 passed in 0.01s ===\n") != NULL);
    CHECK(strstr(r->output, "0000001999\n") != NULL);
    CHECK(strstr(r->output, "0000000001\n") == NULL);
    CHECK_INT(r->passed, 5);
    testrun_result_destroy(&r);

    /* A small output is not marked truncated. */
    o.command = "echo hi";
    CHECK_INT(testrun_run(&r, &o), 0);
    CHECK(!r->output_truncated);
    CHECK_STR(r->output, "hi\n");
    testrun_result_destroy(&r);
}

/* Lines seen by the streaming callback. */
typedef struct {
    char text[4096];
    size_t len;
    size_t lines;
} s_stream_t;

static void s_stream_line(void *arg, const char *line, size_t len)
{
    s_stream_t *stream = arg;
    if (stream->len + len + 1 < sizeof stream->text) {
        memcpy(stream->text + stream->len, line, len);
        stream->len += len;
        stream->text[stream->len++] = '\n';
        stream->text[stream->len] = '\0';
    }
    stream->lines++;
}

/* True once no process is left in group `pgid` (waits up to about two seconds). */
static bool s_group_gone(pid_t pgid)
{
    for (int i = 0; i < 100; i++) {
        if (kill(-pgid, 0) != 0 && errno == ESRCH)
            return true;
        testenv_sleep_ms(20);
    }
    return false;
}

static void test_step_streams(testenv_t *env)
{
    /* The first line arrives while the command still waits for a file we create later. */
    char gate[512];
    snprintf(gate, sizeof gate, "%s/gate", env->dir);
    char command[1024];
    snprintf(command, sizeof command,
             "echo first; while [ ! -e '%s' ]; do sleep 0.02; done; echo second >&2", gate);
    s_stream_t stream = {.len = 0};
    testrun_options_t o = {.command = command,
                           .dir = env->dir,
                           .timeout_ms = 10000,
                           .on_line = s_stream_line,
                           .on_line_arg = &stream};
    testrun_t *run = NULL;
    CHECK_INT(testrun_start(&run, &o), 0);
    if (!run)
        return;
    CHECK(testrun_pgid(run) > 0);
    for (int i = 0; i < 200 && stream.lines == 0; i++)
        CHECK_INT(testrun_step(run, 50), 0);
    CHECK_STR(stream.text, "first\n");
    CHECK_INT(testenv_write_file(gate, ""), 0);
    int rc = 0;
    for (int i = 0; i < 200 && (rc = testrun_step(run, 50)) == 0; i++)
        ;
    CHECK_INT(rc, 1);
    CHECK_INT(testrun_step(run, 50), 1);
    CHECK_INT(testrun_pgid(run), 0);
    CHECK_STR(stream.text, "first\nsecond\n");
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_finish(&run, &r), 0);
    CHECK(run == NULL);
    if (r) {
        CHECK(r->started);
        CHECK_INT(r->exit_code, 0);
        CHECK(!r->cancelled);
        CHECK_STR(r->output, "first\nsecond\n");
        testrun_result_destroy(&r);
    }
}

static void test_step_cancel(testenv_t *env)
{
    /* A command with a background child that ignores nothing: both must go at once. */
    testrun_options_t o = {.command = "sleep 100 & echo started; sleep 100",
                           .dir = env->dir,
                           .timeout_ms = 60000,
                           .kill_grace_ms = 5000};
    testrun_t *run = NULL;
    CHECK_INT(testrun_start(&run, &o), 0);
    if (!run)
        return;
    pid_t pgid = testrun_pgid(run);
    CHECK(pgid > 0);
    int64_t started = clock_now_ms();
    testrun_cancel(run);
    testrun_cancel(run); /* a second cancel changes nothing */
    int rc = 0;
    for (int i = 0; i < 100 && (rc = testrun_step(run, 50)) == 0; i++)
        ;
    CHECK_INT(rc, 1);
    /* SIGTERM ended it: before the 5 s kill grace (with room for a loaded machine). */
    CHECK(clock_now_ms() - started < 4000);
    CHECK(s_group_gone(pgid));
    testrun_result_t *r = NULL;
    CHECK_INT(testrun_finish(&run, &r), 0);
    if (r) {
        CHECK(r->started);
        CHECK(r->cancelled);
        CHECK(!r->timed_out);
        CHECK_INT(r->exit_code, -1);
        CHECK_INT(r->term_signal, SIGTERM);
        CHECK_STR(testrun_verdict_name(testrun_verdict(r)), "ERROR");
        testrun_result_destroy(&r);
    }

    /* A command that ignores SIGTERM: finishing a run that still runs kills it after the
     * grace. */
    o.command = "trap '' TERM; echo started; sleep 100";
    o.kill_grace_ms = 200;
    s_stream_t stream = {.len = 0};
    o.on_line = s_stream_line;
    o.on_line_arg = &stream;
    CHECK_INT(testrun_start(&run, &o), 0);
    if (!run)
        return;
    pgid = testrun_pgid(run);
    for (int i = 0; i < 200 && stream.lines == 0; i++)
        testrun_step(run, 50); /* the trap is set once "started" is out */
    started = clock_now_ms();
    CHECK_INT(testrun_finish(&run, &r), 0);
    CHECK(clock_now_ms() - started < 5000); /* not the command's 100 s */
    CHECK(s_group_gone(pgid));
    if (r) {
        CHECK(r->cancelled);
        CHECK_INT(r->term_signal, SIGKILL);
        testrun_result_destroy(&r);
    }

    /* A command that cannot start: the run exists, ends at once, and says why. */
    o.dir = "/nonexistent/cloister-dir";
    CHECK(testrun_start(&run, &o) < 0);
    CHECK(run != NULL);
    if (run) {
        CHECK_INT(testrun_step(run, 50), 1);
        CHECK_INT(testrun_pgid(run), 0);
        CHECK(testrun_finish(&run, &r) < 0);
        CHECK(r != NULL && !r->started && r->error[0] != '\0');
        testrun_result_destroy(&r);
    }
}

int main(void)
{
    test_pytest();
    test_unittest();
    test_jest();
    test_vitest();
    test_cargo();
    test_implausible_lines();
    test_go();
    test_ctest();
    test_node();
    test_generic_summaries();
    test_unknown_output();
    test_many_failures();
    test_failure_text_utf8();

    testenv_t *env = testenv_new("testrun");
    if (!env)
        return 1;
    test_run_pass(env);
    test_run_fail(env);
    test_run_exit_zero_failures(env);
    test_run_timeout(env);
    test_run_output_cap(env);
    test_step_streams(env);
    test_step_cancel(env);
    testenv_destroy(&env);
    return check_exit_code("test_testrun");
}
