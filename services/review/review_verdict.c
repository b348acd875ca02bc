/* review_verdict: the agent's verdict against its findings (see review_verdict.h). */
#include "review_verdict.h"

#include <stdio.h>
#include <string.h>

/* The number of findings written by an agent (source "agent"). */
static size_t s_agent_findings(const json_t *findings)
{
    size_t n = 0, i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *source = json_string_value(json_object_get(finding, "source"));
        n += source != NULL && strcmp(source, "agent") == 0;
    }
    return n;
}

/* Appends the finding "<severity>: <text>" from Cloister, with `reviewer` and `detail`. */
static void s_add(json_t *findings, review_counts_t *counts, const char *severity, const char *text,
                  const char *reviewer, const char *detail)
{
    char line[4200];
    snprintf(line, sizeof line, "%s: %s", severity, text);
    json_t *finding = review_finding_parse(line, "cloister", counts);
    if (finding == NULL)
        return;
    json_object_set_new(finding, "reviewer", json_string(reviewer));
    json_object_set_new(finding, "detail", json_string(detail));
    json_array_append_new(findings, finding);
}

bool review_verdict_reconcile(markers_t *answer, const char *reviewer, json_t *findings,
                              review_counts_t *counts, char *note, size_t size)
{
    note[0] = '\0';
    const char *verdict = markers_get(answer, "REVIEW_RESULT");
    bool changes = verdict != NULL && strcmp(verdict, "CHANGES_REQUESTED") == 0;
    size_t nsecurity = 0, nperformance = 0;
    const char *const *security = markers_list(answer, "SECURITY_ISSUES", &nsecurity);
    const char *const *performance = markers_list(answer, "PERFORMANCE_ISSUES", &nperformance);
    if ((!changes && nsecurity == 0 && nperformance == 0) || s_agent_findings(findings) > 0)
        return false;
    for (size_t i = 0; i < nsecurity; i++)
        s_add(findings, counts, "error", security[i], reviewer,
              "reported under SECURITY_ISSUES with no finding line for it");
    for (size_t i = 0; i < nperformance; i++)
        s_add(findings, counts, "warning", performance[i], reviewer,
              "reported under PERFORMANCE_ISSUES with no finding line for it");
    if (changes && nsecurity == 0)
        s_add(findings, counts, "error",
              nperformance == 0 ? "the agent requested changes without listing them"
                                : "the agent requested changes without listing them as findings",
              reviewer, "REVIEW_RESULT: CHANGES_REQUESTED with no finding line");
    snprintf(note, size,
             "the agent's verdict (REVIEW_RESULT %s, %zu security and %zu performance issue%s) "
             "disagreed with its findings (none listed): its issues were made findings",
             verdict ? verdict : "?", nsecurity, nperformance, nperformance == 1 ? "" : "s");
    return true;
}
