/* review_verdict: the agent's own verdict held against its findings.
 *
 * The gate comes from the findings (review_gate.h), never from the agent's REVIEW_RESULT.
 * That must not let an agent's verdict be silently outvoted: an answer that says
 * REVIEW_RESULT: CHANGES_REQUESTED, or lists anything but `none` under SECURITY_ISSUES or
 * PERFORMANCE_ISSUES, while no agent wrote a single finding line, disagrees with itself.
 * The safe side wins: each issue it reported becomes a finding (source "cloister", the
 * answering reviewer's name, its `detail` saying where it came from):
 *   SECURITY_ISSUES item     an error finding, titled with the item;
 *   PERFORMANCE_ISSUES item  a warning finding, titled with the item;
 *   CHANGES_REQUESTED        when no error came of the items, one error finding "the agent
 *                            requested changes without listing them" (or "... without
 *                            listing them as findings" when it listed only performance
 *                            issues), so the gate never opens on a verdict asking changes.
 * An answer whose findings and verdict agree is left as it is: REVIEW_RESULT is still
 * reported, not obeyed. */
#ifndef CLOISTER_REVIEW_VERDICT_H
#define CLOISTER_REVIEW_VERDICT_H

#include "markers.h"
#include "review_gate.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Holds the answer (`answer`, borrowed: its REVIEW_RESULT, SECURITY_ISSUES and
 * PERFORMANCE_ISSUES) against `findings` (the review's, after dismissals; "agent" findings
 * are the agents' own lines). When they disagree (above), appends the findings made of the
 * reported issues to `findings` (counted in *counts), with `reviewer` (borrowed) as their
 * reviewer, writes what was done into note (size bytes, one line) and returns true.
 * Returns false, note "", when they agree. */
bool review_verdict_reconcile(markers_t *answer, const char *reviewer, json_t *findings,
                              review_counts_t *counts, char *note, size_t size);

#endif
