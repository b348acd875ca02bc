/* review_gate: turns a review's verdict and findings into the merge gate.
 *
 * Findings are lines `<severity>: <path>[:<line>] <message>` (severity error, warning or
 * info; anything else counts as a warning so an odd word never hides a problem; a finding
 * without a location is kept with the whole text as its message).
 *
 * The merge gate comes from the findings and the review mode alone (Coven's rules), never
 * from the agent's own verdict (REVIEW_RESULT is reported, not obeyed): a finding is
 * `must_fix` when it blocks in the mode, `should_fix` when it is a warning or error that
 * does not, and the decision is
 *   block          a must_fix finding is an error (a failed error check is one);
 *   needs_changes  must_fix findings, none an error (strict mode: warnings and infos);
 *   approve        no must_fix finding: the gate is open.
 * What blocks, per mode:
 *   strict   every finding (info too);
 *   normal   error findings;
 *   yolo     like normal, and an open gate is merged automatically (the service chains a
 *            merge-agent task);
 *   disabled no review: open, approved without running the agent.
 * In strict and normal mode an open gate still needs a person's approval (approval
 * "manual"); in yolo and disabled it does not ("auto"); a blocked gate's approval is
 * "blocked" in every mode. */
#ifndef CLOISTER_REVIEW_GATE_H
#define CLOISTER_REVIEW_GATE_H

#include "protocol.h"

#include <jansson.h>
#include <stdbool.h>


typedef struct {
    int errors;
    int warnings;
    int infos;
} review_counts_t;

/* Parses "strict" | "normal" | "yolo" | "disabled". Returns 0 or FAILURE_INVALID. */
int review_mode_parse(review_mode_t *mode, const char *text);


/* One finding as a new JSON object {severity, file, line, title, message (= title),
 * source, reviewer (= source until the caller says otherwise), detail, suggestion} (file ""
 * and line 0 when absent; detail and suggestion only when given) from a line
 * `<severity>: <path>[:<line>] <title> [| detail: <why>] [| suggestion: <how>]`; the
 * caller owns it. `source` is e.g. "agent" or "check". Counts it in *counts. Returns NULL
 * only if memory runs out. */
json_t *review_finding_parse(const char *text, const char *source, review_counts_t *counts);

/* Appends `finding` (from review_finding_parse(), which counted it; ownership passes) to
 * the array `findings`, unless one there already says the same: the same file, the same
 * line (or one of them without a line), and the same message once case, spaces and
 * punctuation are set aside. A repeated finding is dropped and taken back from *counts;
 * the one kept takes the more severe of the two severities. Returns true when appended. */
bool review_findings_add(json_t *findings, json_t *finding, review_counts_t *counts);

/* Counts the findings of `findings` by severity into *counts (replacing what it held). */
void review_counts_compute(const json_t *findings, review_counts_t *counts);

/* Gives each finding of `findings` that has none an "id" ("f-" and 8 hex digits) made of
 * its file and its message once case, spaces and punctuation are set aside -- not its line,
 * which moves as the code around it does -- so the same finding has the same id in the next
 * round. An id names one finding: when another finding already has it (the same words on
 * another line of the file), "-2", "-3", ... is added, in the order of the array. A finding
 * keeps the id it has. */
void review_findings_identify(json_t *findings);

/* True when a finding of `severity` ("error", "warning", "info") blocks the gate in `mode`. */
bool review_finding_blocks(review_mode_t mode, const char *severity);

/* The merge gate of `findings` (each with its id: review_findings_identify()) in `mode`,
 * as a new object the caller owns: {decision approve|needs_changes|block, must_fix [ids],
 * should_fix [ids], notes_for_coding_agent} (see above). `notes` (the review's own NOTES,
 * may be NULL) ends the notes for the coding agent. NULL only if memory runs out. */
json_t *review_merge_gate(review_mode_t mode, const json_t *findings, const char *notes);

/* True when the merge gate's decision is approve (the gate is open). */
bool review_merge_gate_open(const json_t *gate);

#endif
