/* Unit tests for the review's checks (services/review/review_checks.c):
 * - the coverage figure of lcov, cobertura, `go test -cover` and pytest-cov summary lines,
 *   the last one when there are several, -1 when there is none;
 * - the checks a configuration declares: the [review] checks list (errors), then the named
 *   [review.checks.<name>] tables with their kind's default severity, timeout and
 *   threshold; a named table without a command is skipped. */
#include "check.h"
#include "config.h"
#include "failure.h"
#include "review_checks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool s_near(double a, double b)
{
    return fabs(a - b) < 0.001;
}

static void test_coverage_figures(void)
{
    CHECK(s_near(review_coverage_percent("Overall coverage rate:\n  lines......: 85.2% (123 of "
                                         "144 lines)\n  functions..: 90.0% (9 of 10)\n"),
                 85.2));
    CHECK(s_near(review_coverage_percent("<coverage line-rate=\"0.852\" branch-rate=\"0.5\">"),
                 85.2));
    CHECK(s_near(review_coverage_percent("ok  \texample.com/x\t0.01s\tcoverage: 71.5% of "
                                         "statements\n"),
                 71.5));
    CHECK(s_near(review_coverage_percent("Name    Stmts   Miss  Cover\n-----\na.py  100  30  70%\n"
                                         "TOTAL     100     30    70%\n"),
                 70.0));
    /* Several packages: the last figure counts. */
    CHECK(s_near(review_coverage_percent("coverage: 50.0% of statements\ncoverage: 60.0% of "
                                         "statements\n"),
                 60.0));
    CHECK(review_coverage_percent("all tests passed\n") < 0);
    CHECK(review_coverage_percent("") < 0);
}

static void test_declared_checks(void)
{
    const char *text = "[review]\nchecks = [\"make check\"]\n\n"
                       "[review.checks.lint]\ncommand = \"make lint\"\nkind = \"lint\"\n\n"
                       "[review.checks.cover]\ncommand = \"make cover\"\nkind = \"coverage\"\n"
                       "threshold = 80\ntimeout_s = 90\n\n"
                       "[review.checks.build]\ncommand = \"make\"\nkind = \"build\"\n\n"
                       "[review.checks.quiet]\ncommand = \"make doc\"\nseverity = \"info\"\n\n"
                       "[review.checks.empty]\nkind = \"e2e\"\n";
    config_t *config = NULL;
    CHECK_INT(config_parse_buffer("cloister.toml", text, strlen(text), &config), 0);
    review_check_t checks[REVIEW_CHECKS_MAX];
    CHECK_INT((int)review_checks_list(config, checks), 5);
    CHECK_STR(checks[0].command, "make check");
    CHECK_STR(checks[0].severity, "error");
    CHECK_STR(checks[1].name, "lint");
    CHECK_STR(checks[1].severity, "warning");
    CHECK_STR(checks[2].kind, "coverage");
    CHECK_STR(checks[2].severity, "warning");
    CHECK(s_near(checks[2].threshold, 80));
    CHECK_INT((int)checks[2].timeout_s, 90);
    CHECK_STR(checks[3].severity, "error");
    CHECK(checks[3].threshold < 0);
    CHECK_STR(checks[4].kind, "custom");
    CHECK_STR(checks[4].severity, "info");
    config_destroy(&config);

    /* A kind or a severity outside the known ones is a configuration error. */
    const char *bad = "[review.checks.x]\ncommand = \"true\"\nkind = \"style\"\n";
    CHECK_INT(config_parse_buffer("cloister.toml", bad, strlen(bad), &config), FAILURE_INVALID);
    CHECK(strstr(failure_message(), "build|lint|coverage|e2e|custom") != NULL);
}

int main(void)
{
    test_coverage_figures();
    test_declared_checks();
    return check_exit_code("test_review_checks");
}
