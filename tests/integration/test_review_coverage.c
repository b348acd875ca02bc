/* test_review_coverage: the review's coverage and E2E checks, end to end. A real broker, a
 * real cloister-review with fake-claude, a real git repository whose feature branch adds
 * a user-facing file and a script that writes coverage reports (an lcov tracefile with
 * absolute paths, a cobertura file relative to its <source>), as a project's coverage
 * command would.
 *
 * Checked: the added lines that the report instruments and no test ran are findings of the
 * check's severity, one per file with its line ranges; lines the report does not know and
 * covered lines are not; the check's result gives the diff's coverage beside the total;
 * a missing report fails the check; a change to user-facing paths without an E2E test is a
 * warning (not blocking in normal mode), and the same change with an E2E test is not. */
#include "review_harness.h"

/* The feature branch's coverage script: both reports. In page.js (lines 1-5 added), lines
 * 1 and 5 ran, 2 and 3 did not, 4 is not instrumented; src/db.c's added line 1 ran;
 * src/old.c is untouched by the diff. */
static const char *s_cov_script =
    "mkdir -p coverage\n"
    "cat > coverage/lcov.info <<EOF\n"
    "TN:\n"
    "SF:$PWD/src/ui/page.js\nDA:1,4\nDA:2,0\nDA:3,0\nDA:5,2\nend_of_record\n"
    "SF:src/db.c\nDA:1,3\nend_of_record\n"
    "SF:$PWD/src/old.c\nDA:1,1\nDA:2,0\nend_of_record\n"
    "EOF\n"
    "cat > coverage/cobertura.xml <<EOF\n"
    "<?xml version=\"1.0\"?>\n<coverage line-rate=\"0.5\">\n"
    "<sources><source>$PWD/src</source></sources>\n<packages><package><classes>\n"
    "<class name=\"page\" filename=\"ui/page.js\"><lines>\n"
    "<line number=\"1\" hits=\"1\"/><line number=\"2\" hits=\"1\"/>"
    "<line number=\"3\" hits=\"0\"/><line number=\"5\" hits=\"0\"/>\n"
    "</lines></class>\n</classes></package></packages>\n</coverage>\n"
    "EOF\n";

static const json_t *s_finding_of(const json_t *result, const char *check, const char *file)
{
    size_t i;
    const json_t *finding;
    json_array_foreach(json_object_get(result, "FINDINGS"), i, finding)
    {
        if (strcmp(harness_field(finding, "check"), check) == 0 &&
            (file == NULL || strcmp(harness_field(finding, "file"), file) == 0))
            return finding;
    }
    return NULL;
}

static const json_t *s_check_entry(const json_t *result, const char *name)
{
    size_t i;
    const json_t *entry;
    json_array_foreach(json_object_get(result, "checks"), i, entry)
    {
        if (strcmp(harness_field(entry, "name"), name) == 0)
            return entry;
    }
    return NULL;
}

static double s_real(const json_t *object, const char *key)
{
    return json_number_value(json_object_get(object, key));
}

/* Runs review `id` of the feature branch; returns its result. */
static const json_t *s_review(review_env_t *r, const char *id)
{
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t svc = review_start(r, "review-coverage");
    review_submit(r, id, 30, ",\"full\":true");
    json_t *done = harness_wait(r->h, "task.done", id, 20000);
    CHECK(done != NULL);
    CHECK(review_stop(r, svc) == 0);
    return review_result(done);
}

int main(void)
{
    review_env_t *r = review_env_new("review-coverage");
    CHECK(r != NULL);
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);
    testgit_commit(r->repo, "src/old.c", "int old;\nint older;\n", "old code");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "feature", NULL), 0);
    CHECK_INT(testgit_run(r->repo, "merge", "-q", "main", "-m", "main in", NULL), 0);
    testgit_commit(r->repo, "src/ui/page.js",
                   "show();\nif (x)\n  hide();\n// a comment\nrender();\n", "a page");
    testgit_commit(r->repo, "cov.sh", s_cov_script, "coverage script");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);
    review_config(r, "[review]\nmode = \"normal\"\n"
                     "user_facing_paths = [\"src/ui*\"]\ne2e_test_paths = [\"e2e/*\"]\n\n"
                     "[review.checks.lcov]\ncommand = \"sh cov.sh\"\nkind = \"coverage\"\n"
                     "report = \"coverage/lcov.info\"\n\n"
                     "[review.checks.cobertura]\ncommand = \"sh cov.sh\"\nkind = \"coverage\"\n"
                     "report = \"coverage/cobertura.xml\"\nseverity = \"info\"\n\n"
                     "[review.checks.missing]\ncommand = \"true\"\nkind = \"coverage\"\n"
                     "report = \"coverage/none.info\"\n");

    const json_t *result = s_review(r, "cov-1");
    CHECK_STR(harness_field(result, "GATE"), "open");
    /* lcov: page.js lines 2-3 (4 is not instrumented); db.c's line ran. */
    const json_t *lcov = s_finding_of(result, "lcov", "src/ui/page.js");
    CHECK(lcov != NULL);
    CHECK_STR(harness_field(lcov, "severity"), "warning");
    CHECK_INT(harness_int(lcov, "line"), 2);
    CHECK(strstr(harness_field(lcov, "message"), "2 added lines no test runs: 2-3") != NULL);
    CHECK_STR(harness_field(lcov, "lines"), "2-3");
    CHECK(s_finding_of(result, "lcov", "src/db.c") == NULL);
    const json_t *entry = s_check_entry(result, "lcov");
    CHECK(entry != NULL);
    CHECK_STR(harness_field(entry, "verdict"), "PASS");
    CHECK_INT(harness_int(entry, "diff_lines"), 5);
    CHECK_INT(harness_int(entry, "diff_covered"), 3);
    CHECK(s_real(entry, "diff_coverage") == 60.0);
    CHECK(s_real(entry, "coverage") > 57.1 && s_real(entry, "coverage") < 57.2); /* 4 of 7 */
    /* cobertura, relative to its <source>: lines 3 and 5, at the check's severity. */
    const json_t *cobertura = s_finding_of(result, "cobertura", "src/ui/page.js");
    CHECK(cobertura != NULL);
    CHECK_STR(harness_field(cobertura, "severity"), "info");
    CHECK(strstr(harness_field(cobertura, "message"), "2 added lines no test runs: 3, 5") != NULL);
    entry = s_check_entry(result, "cobertura");
    CHECK(entry != NULL && s_real(entry, "diff_coverage") == 50.0);
    /* A report that is not there fails its check. */
    const json_t *missing = s_finding_of(result, "missing", NULL);
    CHECK(missing != NULL &&
          strstr(harness_field(missing, "message"),
                 "FAIL (coverage report: no coverage/none.info after the check ran)") != NULL);
    /* E2E: a user-facing change, no E2E test: a warning. */
    const json_t *e2e = s_finding_of(result, "e2e", NULL);
    CHECK(e2e != NULL);
    CHECK_STR(harness_field(e2e, "severity"), "warning");
    CHECK_STR(harness_field(e2e, "file"), "src/ui/page.js");
    CHECK(strstr(harness_field(e2e, "message"), "without an E2E test") != NULL);
    CHECK_STR(harness_field(json_object_get(result, "e2e"), "verdict"), "FAIL");
    CHECK(json_is_false(json_object_get(e2e, "blocking")));

    /* With an E2E test in the change, the rule holds. */
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(r->repo, "e2e/page.spec.js", "test('page', () => {});\n", "an e2e test");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);
    result = s_review(r, "cov-2");
    CHECK(s_finding_of(result, "e2e", NULL) == NULL);
    CHECK_STR(harness_field(json_object_get(result, "e2e"), "verdict"), "PASS");

    review_clear_fake_env();
    review_env_destroy(&r);
    return check_exit_code("test_review_coverage");
}
