/* Unit tests for common/markers: result-marker blocks in agent output. */
#include "check.h"
#include "failure.h"
#include "markers.h"

#include <stdlib.h>
#include <string.h>

static const char *const merge_required[] = {"MERGE_RESULT", "RESOLVED_FILES", "TESTS", NULL};

static void test_plain_block(void)
{
    const char *text = "I merged the branch.\n"
                       "\n"
                       "MERGE_RESULT: SUCCESS\n"
                       "RESOLVED_FILES: src/a.ts, src/b.ts\n"
                       "FAILED_FILES: (if any)\n"
                       "TESTS: PASS\n"
                       "NOTES: kept both imports\n";
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, text, "MERGE_RESULT", merge_required), 0);
    CHECK(m != NULL);
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(markers_get(m, "TESTS"), "PASS");
    CHECK_STR(markers_get(m, "NOTES"), "kept both imports");
    CHECK(markers_get(m, "NOPE") == NULL);
    CHECK_STR(markers_missing(m), "");
    size_t n = 0;
    const char *const *files = markers_list(m, "RESOLVED_FILES", &n);
    CHECK_INT(n, 2);
    CHECK_STR(files[0], "src/a.ts");
    CHECK_STR(files[1], "src/b.ts");
    /* "(if any)" is the template's placeholder: no items. */
    CHECK(markers_list(m, "FAILED_FILES", &n) == NULL);
    CHECK_INT(n, 0);
    CHECK_INT(markers_count(m), 5);
    CHECK_STR(markers_key_at(m, 0), "MERGE_RESULT");
    CHECK_STR(markers_value_at(m, 4), "kept both imports");
    CHECK(markers_key_at(m, 5) == NULL);
    markers_destroy(&m);
    CHECK(m == NULL);
    markers_destroy(&m);
}

static void test_missing_keys(void)
{
    markers_t *m = NULL;
    int rc = markers_parse(&m, "MERGE_RESULT: FAILURE\nNOTES: gave up\n", "MERGE_RESULT",
                           merge_required);
    CHECK_INT(rc, FAILURE_INVALID);
    CHECK_STR(failure_message(), "missing RESOLVED_FILES, TESTS");
    CHECK_STR(markers_missing(m), "RESOLVED_FILES, TESTS");
    /* What was found is still there. */
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "FAILURE");
    CHECK_STR(markers_get(m, "NOTES"), "gave up");
    markers_destroy(&m);

    rc = markers_parse(&m, "no markers at all\n", "MERGE_RESULT", merge_required);
    CHECK_INT(rc, FAILURE_INVALID);
    CHECK_STR(failure_message(), "missing MERGE_RESULT, RESOLVED_FILES, TESTS");
    CHECK_INT(markers_count(m), 0);
    markers_destroy(&m);

    /* Markers before the first anchor belong to its block (agents often put the verdict
     * last); markers before a later anchor belong to the block they are in. */
    rc = markers_parse(&m, "TESTS: PASS\nRESOLVED_FILES: a\nMERGE_RESULT: SUCCESS\n",
                       "MERGE_RESULT", merge_required);
    CHECK_INT(rc, 0);
    CHECK_STR(markers_get(m, "TESTS"), "PASS");
    markers_destroy(&m);
    rc = markers_parse(&m,
                       "MERGE_RESULT: FAILURE\nNOTES: first\nTESTS: PASS\n"
                       "MERGE_RESULT: SUCCESS\nRESOLVED_FILES: a\n",
                       "MERGE_RESULT", merge_required);
    CHECK_INT(rc, FAILURE_INVALID);
    CHECK_STR(markers_missing(m), "TESTS");
    markers_destroy(&m);

    rc = markers_parse(&m, NULL, "TEST_RESULT", NULL);
    CHECK_INT(rc, FAILURE_INVALID);
    CHECK_STR(markers_missing(m), "TEST_RESULT");
    markers_destroy(&m);
}

static void test_last_complete_block(void)
{
    /* The agent restates the template, reports, then reports again after a retry. */
    const char *text = "You asked for:\n"
                       "MERGE_RESULT: SUCCESS|FAILURE\n"
                       "RESOLVED_FILES: file1.ts, file2.ts\n"
                       "TESTS: PASS|FAIL|SKIP\n"
                       "First attempt:\n"
                       "MERGE_RESULT: FAILURE\n"
                       "RESOLVED_FILES: a.ts\n"
                       "TESTS: FAIL\n"
                       "Retrying after fixing the import...\n"
                       "MERGE_RESULT: SUCCESS\n"
                       "RESOLVED_FILES: a.ts, b.ts\n"
                       "TESTS: PASS\n"
                       "Done.\n";
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, text, "MERGE_RESULT", merge_required), 0);
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(markers_get(m, "RESOLVED_FILES"), "a.ts, b.ts");
    markers_destroy(&m);

    /* The last block is incomplete: the last complete one wins. */
    const char *text2 = "MERGE_RESULT: SUCCESS\nRESOLVED_FILES: x.c\nTESTS: PASS\n"
                        "later, as a summary:\nMERGE_RESULT: SUCCESS\nNOTES: see above\n";
    CHECK_INT(markers_parse(&m, text2, "MERGE_RESULT", merge_required), 0);
    CHECK_STR(markers_get(m, "RESOLVED_FILES"), "x.c");
    CHECK(markers_get(m, "NOTES") == NULL);
    markers_destroy(&m);

    /* No complete block: the last one is returned with what is missing. */
    const char *text3 = "MERGE_RESULT: SUCCESS\nNOTES: one\nMERGE_RESULT: FAILURE\nNOTES: two\n";
    CHECK_INT(markers_parse(&m, text3, "MERGE_RESULT", merge_required), FAILURE_INVALID);
    CHECK_STR(markers_get(m, "NOTES"), "two");
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "FAILURE");
    markers_destroy(&m);

    /* Inside a block a repeated key keeps its last value. */
    CHECK_INT(markers_parse(&m, "TEST_RESULT: FAIL\nNOTES: a\nNOTES: b\n", "TEST_RESULT", NULL), 0);
    CHECK_STR(markers_get(m, "NOTES"), "b");
    CHECK_INT(markers_count(m), 2);
    markers_destroy(&m);
}

static void test_markdown_noise(void)
{
    const char *text = "## Summary\r\n"
                       "Everything merged. Note: the lockfile changed.\r\n"
                       "```\r\n"
                       "**MERGE_RESULT:** SUCCESS\r\n"
                       "**RESOLVED_FILES**: `src/a.ts`, `src/b.ts`\r\n"
                       "\r\n"
                       "some chatter between markers\r\n"
                       "- **TESTS:** **PASS**\r\n"
                       "`NOTES: merged cleanly`\r\n"
                       "__FAILED_FILES__: none\r\n"
                       "```\r\n"
                       "Let me know if anything else is needed.\r\n";
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, text, "MERGE_RESULT", merge_required), 0);
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(markers_get(m, "TESTS"), "PASS");
    CHECK_STR(markers_get(m, "NOTES"), "merged cleanly");
    CHECK_STR(markers_get(m, "FAILED_FILES"), "none");
    size_t n = 0;
    const char *const *files = markers_list(m, "RESOLVED_FILES", &n);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(files[0], "src/a.ts");
        CHECK_STR(files[1], "src/b.ts");
    }
    CHECK(markers_list(m, "FAILED_FILES", &n) == NULL);
    /* Prose such as "Note: the lockfile" is not a marker (not UPPER_SNAKE). */
    CHECK(markers_get(m, "Note") == NULL);
    CHECK_INT(markers_count(m), 5);
    markers_destroy(&m);

    /* Headings and quotes around a marker. */
    CHECK_INT(
        markers_parse(&m, "### REVIEW_RESULT: APPROVED\n> NOTES: fine\n", "REVIEW_RESULT", NULL),
        0);
    CHECK_STR(markers_get(m, "REVIEW_RESULT"), "APPROVED");
    CHECK_STR(markers_get(m, "NOTES"), "fine");
    markers_destroy(&m);
}

static void test_dash_lists(void)
{
    const char *text = "TEST_RESULT: FAIL\n"
                       "TESTS_RUN: 42\n"
                       "TESTS_PASSED: 40\n"
                       "TESTS_FAILED: 2\n"
                       "FAILURES:\n"
                       "- test/foo.spec.ts: should handle edge case - AssertionError\n"
                       "\n"
                       "- test/bar.spec.ts: integration test - timeout\n"
                       "FIX_ATTEMPTED: false\n"
                       "FIX_RESULT: NOT_ATTEMPTED\n"
                       "NOTES: two failures\n";
    static const char *const required[] = {"TESTS_RUN", "FAILURES", NULL};
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, text, "TEST_RESULT", required), 0);
    size_t n = 0;
    const char *const *f = markers_list(m, "FAILURES", &n);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(f[0], "test/foo.spec.ts: should handle edge case - AssertionError");
        CHECK_STR(f[1], "test/bar.spec.ts: integration test - timeout");
    }
    CHECK_STR(markers_get(m, "FAILURES"), "");
    CHECK_STR(markers_get(m, "FIX_RESULT"), "NOT_ATTEMPTED");
    CHECK_STR(markers_get(m, "TESTS_RUN"), "42");
    markers_destroy(&m);

    /* A bulleted block: nested items belong to the list, sibling bullets are markers. An
     * item that looks like a marker stays an item under an explicit list. */
    const char *text2 = "- **TEST_RESULT:** FAIL\n"
                        "- **FAILURES:**\n"
                        "  - E2E_LOGIN: timed out\n"
                        "  * test_b - boom\n"
                        "- **NOTES:** flaky login\n";
    CHECK_INT(markers_parse(&m, text2, "TEST_RESULT", NULL), 0);
    f = markers_list(m, "FAILURES", &n);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(f[0], "E2E_LOGIN: timed out");
        CHECK_STR(f[1], "test_b - boom");
    }
    CHECK_STR(markers_get(m, "NOTES"), "flaky login");
    CHECK(markers_get(m, "E2E_LOGIN") == NULL);
    markers_destroy(&m);

    /* Prose ends a list: later bullets do not join it. */
    const char *text3 =
        "TEST_RESULT: FAIL\nFAILURES:\n- a - x\nThat is all. Also:\n- not a failure\n";
    CHECK_INT(markers_parse(&m, text3, "TEST_RESULT", NULL), 0);
    f = markers_list(m, "FAILURES", &n);
    CHECK_INT(n, 1);
    markers_destroy(&m);
}

static void test_expect(void)
{
    static const char *const merge_values[] = {"SUCCESS", "FAILURE", NULL};
    static const char *const review_values[] = {"APPROVED", "CHANGES_REQUESTED", "COMMENTED", NULL};
    markers_t *m = NULL;
    markers_parse(&m, "MERGE_RESULT: maybe\n", "MERGE_RESULT", NULL);
    CHECK_INT(markers_expect(m, "MERGE_RESULT", merge_values), FAILURE_INVALID);
    CHECK_STR(failure_message(), "MERGE_RESULT is \"maybe\", expected SUCCESS|FAILURE");
    CHECK_INT(markers_expect(m, "TESTS", merge_values), FAILURE_NOT_FOUND);
    markers_destroy(&m);

    markers_parse(&m, "MERGE_RESULT: success - merged cleanly\n", "MERGE_RESULT", NULL);
    CHECK_INT(markers_expect(m, "MERGE_RESULT", merge_values), 0);
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "SUCCESS");
    markers_destroy(&m);

    /* A template echo is not a value. */
    markers_parse(&m, "MERGE_RESULT: SUCCESS|FAILURE\n", "MERGE_RESULT", NULL);
    CHECK_INT(markers_expect(m, "MERGE_RESULT", merge_values), FAILURE_INVALID);
    markers_destroy(&m);

    /* CHANGES_REQUESTED is not mistaken for a prefix match of something shorter. */
    markers_parse(&m, "REVIEW_RESULT: **CHANGES_REQUESTED**\n", "REVIEW_RESULT", NULL);
    CHECK_INT(markers_expect(m, "REVIEW_RESULT", review_values), 0);
    CHECK_STR(markers_get(m, "REVIEW_RESULT"), "CHANGES_REQUESTED");
    markers_destroy(&m);
}

static void test_parse_all(void)
{
    const char *text = "Working...\n"
                       "STATUS: started\n"
                       "random text: not a key\n"
                       "ARTIFACTS:\n"
                       "- out/a.bin\n"
                       "- out/b.bin\n"
                       "STATUS: done\n"
                       "HANDOFF_TO: review-agent\n";
    markers_t *m = NULL;
    CHECK_INT(markers_parse_all(&m, text), 0);
    CHECK_INT(markers_count(m), 3);
    CHECK_STR(markers_get(m, "STATUS"), "done");
    CHECK_STR(markers_get(m, "HANDOFF_TO"), "review-agent");
    size_t n = 0;
    markers_list(m, "ARTIFACTS", &n);
    CHECK_INT(n, 2);
    CHECK_STR(markers_missing(m), "");
    markers_destroy(&m);

    CHECK_INT(markers_parse_all(&m, ""), 0);
    CHECK_INT(markers_count(m), 0);
    markers_destroy(&m);
}

static void test_caps_and_junk(void)
{
    /* Many keys and items: kept up to the caps, never crashing. */
    size_t cap = 200000;
    char *text = malloc(cap);
    size_t used = 0;
    used += (size_t)snprintf(text + used, cap - used, "TEST_RESULT: FAIL\nFAILURES:\n");
    for (int i = 0; i < MARKERS_MAX_ITEMS + 50; i++)
        used += (size_t)snprintf(text + used, cap - used, "- t%d - boom\n", i);
    for (int i = 0; i < MARKERS_MAX_KEYS + 50; i++)
        used += (size_t)snprintf(text + used, cap - used, "KEY_%d: v\n", i);
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, text, "TEST_RESULT", NULL), 0);
    size_t n = 0;
    markers_list(m, "FAILURES", &n);
    CHECK_INT(n, MARKERS_MAX_ITEMS);
    CHECK_INT(markers_count(m), MARKERS_MAX_KEYS);
    markers_destroy(&m);
    free(text);

    /* Odd shapes that must not be read as markers. */
    CHECK_INT(markers_parse_all(&m, ":\nA: x\n**: y\n__:\n- \n-\n*\n`\nabc DEF: 1\n"), 0);
    CHECK_INT(markers_count(m), 0);
    markers_destroy(&m);
}

/* Lists as agents really write them: numbered items, items running onto an indented
 * second line, and the list written before the anchor. */
static void test_list_shapes(void)
{
    static const char *const verdicts[] = {"APPROVED", "CHANGES_REQUESTED", "COMMENTED", NULL};
    markers_t *m = NULL;
    size_t n = 0;
    CHECK_INT(markers_parse(&m,
                            "REVIEW_RESULT: COMMENTED\n"
                            "FINDINGS:\n"
                            "1. error: src/db.c:1 SQL injection\n"
                            "2) warning: src/db.c:2 naming\n"
                            "NOTES: x\n",
                            "REVIEW_RESULT", NULL),
              0);
    const char *const *items = markers_list(m, "FINDINGS", &n);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(items[0], "error: src/db.c:1 SQL injection");
        CHECK_STR(items[1], "warning: src/db.c:2 naming");
    }
    CHECK_STR(markers_get(m, "NOTES"), "x");
    markers_destroy(&m);

    CHECK_INT(markers_parse(&m,
                            "REVIEW_RESULT: COMMENTED\n"
                            "FINDINGS:\n"
                            "- warning: src/a.c:3 long function\n"
                            "  see the style guide\n"
                            "- error: src/db.c:1 SQL injection\n"
                            "Thanks for reading.\n"
                            "- not a finding\n",
                            "REVIEW_RESULT", NULL),
              0);
    items = markers_list(m, "FINDINGS", &n);
    CHECK_INT(n, 2);
    if (n == 2) {
        CHECK_STR(items[0], "warning: src/a.c:3 long function see the style guide");
        CHECK_STR(items[1], "error: src/db.c:1 SQL injection");
    }
    markers_destroy(&m);

    /* Keys before the first anchor belong to its block; the block's own value wins. */
    CHECK_INT(markers_parse(&m,
                            "NOTES: early\n"
                            "FINDINGS:\n"
                            "- error: src/db.c:1 SQL injection\n"
                            "REVIEW_RESULT: CHANGES_REQUESTED\n"
                            "NOTES: late\n",
                            "REVIEW_RESULT", NULL),
              0);
    CHECK_INT(markers_expect(m, "REVIEW_RESULT", verdicts), 0);
    items = markers_list(m, "FINDINGS", &n);
    CHECK_INT(n, 1);
    CHECK_STR(markers_get(m, "NOTES"), "late");
    markers_destroy(&m);
}

/* The prompt's answer line echoed back names every answer: it is not one of them. */
static void test_template_echo(void)
{
    static const char *const verdicts[] = {"APPROVED", "CHANGES_REQUESTED", "COMMENTED", NULL};
    static const char *const outcomes[] = {"SUCCESS", "FAILURE", NULL};
    markers_t *m = NULL;
    markers_parse(&m, "I could not finish.\nREVIEW_RESULT: APPROVED, CHANGES_REQUESTED or COMMENTED\n",
                  "REVIEW_RESULT", NULL);
    CHECK_INT(markers_expect(m, "REVIEW_RESULT", verdicts), FAILURE_INVALID);
    markers_destroy(&m);
    markers_parse(&m, "MERGE_RESULT: SUCCESS or FAILURE\n", "MERGE_RESULT", NULL);
    CHECK_INT(markers_expect(m, "MERGE_RESULT", outcomes), FAILURE_INVALID);
    markers_destroy(&m);
    /* A verdict whose note uses another answer as an ordinary word is still that verdict. */
    markers_parse(&m, "REVIEW_RESULT: CHANGES_REQUESTED (cannot be approved until fixed)\n",
                  "REVIEW_RESULT", NULL);
    CHECK_INT(markers_expect(m, "REVIEW_RESULT", verdicts), 0);
    CHECK_STR(markers_get(m, "REVIEW_RESULT"), "CHANGES_REQUESTED");
    markers_destroy(&m);
    /* One answer with a note that merely contains another word's letters still counts. */
    markers_parse(&m, "MERGE_RESULT: SUCCESS - no FAILUREs left\n", "MERGE_RESULT", NULL);
    CHECK_INT(markers_expect(m, "MERGE_RESULT", outcomes), 0);
    CHECK_STR(markers_get(m, "MERGE_RESULT"), "SUCCESS");
    markers_destroy(&m);
}

int main(void)
{
    test_plain_block();
    test_missing_keys();
    test_last_complete_block();
    test_markdown_noise();
    test_dash_lists();
    test_expect();
    test_parse_all();
    test_caps_and_junk();
    test_list_shapes();
    test_template_echo();
    return check_exit_code("test_markers");
}
