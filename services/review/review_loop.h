/* review_loop: the review's agent phases. Without domain reviewers, one run of the
 * review-agent's main session on prompts/review-agent.md. With them ([review] reviewers),
 * iron-rook's phases after intake (the diff, the checks and the scope, done by review_job):
 *
 *   plan        which reviewers apply to this diff (review_plan.h); the others are skips;
 *   act         the planned reviewers, as parallel forks of the main session
 *               (review_reviewers.h); their findings join the review's, deduplicated
 *               (review_findings_add), each with its `reviewer`;
 *   synthesize  a run in the MAIN session (prompts/review/synthesis.md) reads every finding
 *               so far (with its id) and answers the REVIEW_RESULT block: its own FINDINGS
 *               (what the reviewers missed), DISMISSED (ids of reviewer findings it judges
 *               wrong or duplicated, each with why), and FOLLOW_UP, one `- <reviewer>:
 *               <question>` item per reviewer it wants to hear again;
 *   (loop)      while the synthesis asks follow-ups, those reviewers run again with their
 *               question (act) and the synthesis again, for at most max_iterations rounds
 *               in all, stopping early once `stagnation` rounds in a row added no new
 *               reviewer finding, or once REVIEW_NOT_CONVERGING_ROUNDS rounds in a row each
 *               still added findings (iron-rook's diminishing returns). The stop reason:
 *               complete (no follow-up asked), not_converging, stagnation, max_iterations;
 *   check       the gate, from the findings and the mode (review_gate.h; review_job).
 * Two stops fail safe, each with an error finding of Cloister's (source "cloister", never
 * dismissed) so the gate is blocked in every mode: not_converging ("the review is not
 * converging"), and no_reviewer_completed ("no domain reviewer completed the review", the
 * skips as its detail) when the plan kept reviewers and none of them ever answered with
 * a FINDINGS list -- each failed, timed out or answered nothing readable -- since the
 * synthesis alone is no review. When the plan kept none (a docs-only diff and only
 * code reviewers configured), those skips stay skips.
 * Only the last synthesis's FINDINGS and DISMISSED count: the caller reads them from
 * outcome->answer (review_loop_dismiss()). */
#ifndef CLOISTER_REVIEW_LOOP_H
#define CLOISTER_REVIEW_LOOP_H

#include "agent_job.h"
#include "config.h"
#include "markers.h"
#include "review_gate.h"
#include "specialist.h"
#include "template.h"

#include <jansson.h>

#define REVIEW_DEFAULT_CONCURRENCY 3
#define REVIEW_DEFAULT_REVIEWER_TIMEOUT_S 600
#define REVIEW_DEFAULT_MAX_ITERATIONS 10
#define REVIEW_DEFAULT_STAGNATION 2
/* Rounds in a row that each add findings before the loop stops as not converging. */
#define REVIEW_NOT_CONVERGING_ROUNDS 3

/* What the loop works with; everything borrowed. */
typedef struct {
    specialist_ctx_t *ctx;
    const config_t *config;
    const char *prompts_dir;
    const char *workspace;
    const char *target;                   /* where a repository's own reviewer prompts are */
    const agent_job_settings_t *settings; /* the review-agent's */
    template_vars_t *vars; /* the review's placeholders (diff, checks, review_mode, scope);
                              the loop adds its own */
    const char *const *reviewers;         /* [review] reviewers */
    size_t nreviewers;
    const char *const *paths; /* the changed files */
    size_t npaths;
    int concurrency, reviewer_timeout_s, max_iterations, stagnation;
} review_loop_t;

/* What the loop leaves; free with review_loop_outcome_free(). */
typedef struct {
    markers_t *answer; /* the last main-session answer (REVIEW_RESULT block), owned */
    json_t *skips;     /* [{reviewer, reason}] */
    json_t *runs;      /* each reviewer run (review_reviewers.h) */
    int rounds;
    int completed; /* reviewer runs that answered with a FINDINGS list */
    const char *stop; /* "complete" | "not_converging" | "stagnation" | "max_iterations" |
                         "no_reviewer_completed" (static) */
} review_loop_outcome_t;

void review_loop_outcome_free(review_loop_outcome_t *out);

/* One run of the main session on `prompt` (agent_job_run: the session's lock, cloister-mcp,
 * the standard result fields), its answer parsed for a REVIEW_RESULT block with a valid
 * verdict into *answer (owned by the caller). Returns SPECIALIST_DONE; SPECIALIST_RETRY when
 * the agent never started because the session lock stayed busy; SPECIALIST_FAILED with the
 * reason in error (error "" when the job was cancelled). */
specialist_outcome_t review_loop_main_run(specialist_ctx_t *ctx,
                                          const agent_job_settings_t *settings,
                                          const char *prompt, markers_t **answer, char *error,
                                          size_t size);

/* Runs plan, act and synthesize rounds (above), adding the reviewers' findings to
 * `findings` (counted in *counts). Returns as review_loop_main_run(); on SPECIALIST_DONE
 * *out is filled (the caller frees it with review_loop_outcome_free() in every case). */
specialist_outcome_t review_loop_run(const review_loop_t *loop, json_t *findings,
                                     review_counts_t *counts, review_loop_outcome_t *out,
                                     char *error, size_t size);

/* Applies the answer's DISMISSED items (`- f-xxxxxxxx why`): each finding of that id is
 * taken out of `findings` and {id, reviewer, title, reason} appended to `dismissed` -- but
 * never a failed check's or Cloister's own finding, which is a fact, not an opinion. */
void review_loop_dismiss(markers_t *answer, json_t *findings, json_t *dismissed);

#endif
