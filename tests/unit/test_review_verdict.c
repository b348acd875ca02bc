/* Unit tests for the review's verdict rules that need no agent:
 * - review_verdict (services/review/review_verdict.c): an answer whose REVIEW_RESULT,
 *   SECURITY_ISSUES or PERFORMANCE_ISSUES report problems while no finding line was
 *   written gets findings made of them (security an error, performance a warning, a bare
 *   CHANGES_REQUESTED one error), and an answer that agrees with its findings is left alone;
 * - finding ids (review_gate.c): the same words on two lines of a file are two findings
 *   with two ids, each in exactly one of the gate's must_fix / should_fix; an id once given
 *   stays, and the same findings in the next round get the same ids. */
#include "check.h"
#include "markers.h"
#include "review_gate.h"
#include "review_verdict.h"

#include <stdio.h>
#include <string.h>

/* The findings made of `answer` (an agent's text) when it listed `agent_findings` (finding
 * lines, "" for none); *reconciled says whether any was made. Caller frees. */
static json_t *s_reconcile(const char *answer, const char *agent_findings, bool *reconciled,
                           char *note, size_t size)
{
    markers_t *m = NULL;
    CHECK_INT(markers_parse(&m, answer, "REVIEW_RESULT", NULL), 0);
    json_t *findings = json_array();
    review_counts_t counts = {0};
    if (agent_findings[0] != '\0')
        json_array_append_new(findings, review_finding_parse(agent_findings, "agent", &counts));
    *reconciled = review_verdict_reconcile(m, "review-agent", findings, &counts, note, size);
    review_counts_t computed;
    review_counts_compute(findings, &computed);
    CHECK_INT(counts.errors, computed.errors);
    CHECK_INT(counts.warnings, computed.warnings);
    markers_destroy(&m);
    return findings;
}

static const json_t *s_titled(const json_t *findings, const char *title)
{
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *t = json_string_value(json_object_get(finding, "title"));
        if (t != NULL && strcmp(t, title) == 0)
            return finding;
    }
    fprintf(stderr, "no finding titled \"%s\"\n", title);
    check_fail();
}

static const char *s_field(const json_t *finding, const char *key)
{
    const char *value = json_string_value(json_object_get(finding, key));
    return value ? value : "";
}

static void test_disagreement(void)
{
    char note[600];
    bool reconciled;
    json_t *f = s_reconcile("REVIEW_RESULT: CHANGES_REQUESTED\nSECURITY_ISSUES: none\n"
                            "PERFORMANCE_ISSUES: none\nFINDINGS: none\n",
                            "", &reconciled, note, sizeof note);
    CHECK(reconciled);
    CHECK_INT((int)json_array_size(f), 1);
    const json_t *x = s_titled(f, "the agent requested changes without listing them");
    CHECK_STR(s_field(x, "severity"), "error");
    CHECK_STR(s_field(x, "source"), "cloister");
    CHECK_STR(s_field(x, "reviewer"), "review-agent");
    CHECK(strstr(note, "disagreed with its findings") != NULL);
    json_decref(f);

    /* Each reported issue is a finding: security an error, performance a warning; no
     * extra error when a security issue already blocks. */
    f = s_reconcile("REVIEW_RESULT: APPROVED\nSECURITY_ISSUES: SQL injection in query(), "
                    "secret in config.h\nPERFORMANCE_ISSUES:\n- N+1 query in list()\n"
                    "FINDINGS: none\n",
                    "", &reconciled, note, sizeof note);
    CHECK(reconciled);
    CHECK_INT((int)json_array_size(f), 3);
    CHECK_STR(s_field(s_titled(f, "SQL injection in query()"), "severity"), "error");
    CHECK_STR(s_field(s_titled(f, "secret in config.h"), "severity"), "error");
    CHECK_STR(s_field(s_titled(f, "N+1 query in list()"), "severity"), "warning");
    json_decref(f);

    /* Changes asked with performance issues only: the warning, and an error so the gate
     * does not open on a verdict that asks for changes. */
    f = s_reconcile("REVIEW_RESULT: CHANGES_REQUESTED\nSECURITY_ISSUES: none\n"
                    "PERFORMANCE_ISSUES: quadratic loop\nFINDINGS: none\n",
                    "", &reconciled, note, sizeof note);
    CHECK(reconciled);
    CHECK_INT((int)json_array_size(f), 2);
    CHECK_STR(s_field(s_titled(f, "quadratic loop"), "severity"), "warning");
    CHECK_STR(s_field(s_titled(f, "the agent requested changes without listing them as findings"),
                      "severity"),
              "error");
    json_decref(f);
}

static void test_agreement(void)
{
    char note[600];
    bool reconciled;
    /* Approved, nothing reported: nothing to add. */
    json_t *f = s_reconcile("REVIEW_RESULT: APPROVED\nSECURITY_ISSUES: none\n"
                            "PERFORMANCE_ISSUES: n/a\nFINDINGS: none\n",
                            "", &reconciled, note, sizeof note);
    CHECK(!reconciled);
    CHECK_INT((int)json_array_size(f), 0);
    CHECK_STR(note, "");
    json_decref(f);
    /* Changes asked and a finding line written: they agree; the verdict is reported only. */
    f = s_reconcile("REVIEW_RESULT: CHANGES_REQUESTED\nSECURITY_ISSUES: SQL injection\n"
                    "FINDINGS:\n- warning: src/db.c:1 quoting\n",
                    "warning: src/db.c:1 quoting", &reconciled, note, sizeof note);
    CHECK(!reconciled);
    CHECK_INT((int)json_array_size(f), 1);
    json_decref(f);
}

/* True when `ids` (a JSON array of strings) holds `id`. */
static bool s_lists(const json_t *ids, const char *id)
{
    size_t i;
    const json_t *x;
    json_array_foreach(ids, i, x)
    {
        if (strcmp(json_string_value(x), id) == 0)
            return true;
    }
    return false;
}

static void test_unique_ids(void)
{
    review_counts_t counts = {0};
    json_t *findings = json_array();
    const char *lines[] = {"error: src/db.c:3 SQL injection", "warning: src/db.c:9 SQL injection",
                           "info: src/db.c:12 sql  injection!",
                           "warning: src/ui.c:9 SQL injection"};
    for (size_t i = 0; i < 4; i++)
        CHECK(review_findings_add(findings, review_finding_parse(lines[i], "agent", &counts),
                                  &counts));
    review_findings_identify(findings);
    const char *ids[4];
    for (size_t i = 0; i < 4; i++)
        ids[i] = s_field(json_array_get(findings, i), "id");
    for (size_t i = 0; i < 4; i++)
        for (size_t k = i + 1; k < 4; k++)
            CHECK(strcmp(ids[i], ids[k]) != 0);
    /* The first keeps the plain id (as before); the next of the same words are numbered. */
    CHECK_INT((int)strlen(ids[0]), 10);
    CHECK(strncmp(ids[1], ids[0], 10) == 0 && strcmp(ids[1] + 10, "-2") == 0);
    CHECK(strncmp(ids[2], ids[0], 10) == 0 && strcmp(ids[2] + 10, "-3") == 0);

    /* Each finding is in one list at most: normal mode, the error must be fixed, the
     * warnings should be, the info is neither. */
    json_t *gate = review_merge_gate(REVIEW_MODE_NORMAL, findings, NULL);
    const json_t *must = json_object_get(gate, "must_fix");
    const json_t *should = json_object_get(gate, "should_fix");
    CHECK_INT((int)json_array_size(must), 1);
    CHECK_INT((int)json_array_size(should), 2);
    CHECK(s_lists(must, ids[0]) && !s_lists(should, ids[0]));
    CHECK(s_lists(should, ids[1]) && !s_lists(must, ids[1]));
    CHECK(!s_lists(must, ids[2]) && !s_lists(should, ids[2]));
    json_decref(gate);

    /* Ids stay: asking again changes nothing, and the same findings next round get the same
     * ids. */
    json_t *again = json_deep_copy(findings);
    review_findings_identify(again);
    json_t *next = json_array();
    review_counts_t next_counts = {0};
    for (size_t i = 0; i < 4; i++)
        review_findings_add(next, review_finding_parse(lines[i], "agent", &next_counts),
                            &next_counts);
    review_findings_identify(next);
    for (size_t i = 0; i < 4; i++) {
        CHECK_STR(s_field(json_array_get(again, i), "id"), ids[i]);
        CHECK_STR(s_field(json_array_get(next, i), "id"), ids[i]);
    }
    json_decref(again);
    json_decref(next);
    json_decref(findings);
}

int main(void)
{
    test_disagreement();
    test_agreement();
    test_unique_ids();
    return check_exit_code("test_review_verdict");
}
