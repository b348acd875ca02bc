/* review_reviewers: the act phase of a review with domain reviewers -- one agent run per
 * reviewer, each FORKED from the review-agent's session (agent.h: --resume <stored>
 * --fork-session, no lock, the stored session untouched), so the reviewers share what the
 * review-agent knows of the project without taking turns on its session, and run in
 * parallel: at most `concurrency` at once, all driven from the job's thread with
 * agent_run_step(). Each gets CLOISTER_REVIEWER=<name> in its environment and its own
 * wall-clock limit (`timeout_s`); a reviewer that fails, times out or answers without a
 * FINDINGS list is not a failed review but a skip {reviewer, reason}. A cancelled job
 * cancels every run. Progress: a line when each starts and ends, and its tool calls. */
#ifndef CLOISTER_REVIEW_REVIEWERS_H
#define CLOISTER_REVIEW_REVIEWERS_H

#include "agent_job.h"
#include "specialist.h"

#include <jansson.h>

typedef struct {
    specialist_ctx_t *ctx;
    const agent_job_settings_t *settings; /* the review-agent's (borrowed) */
    int concurrency;                      /* at least 1 */
    int timeout_s;                        /* each reviewer's limit */
    int round;                            /* for the records */
} review_act_t;

/* Runs reviewer names[i] on prompts[i] (n of each, borrowed). For each that answered,
 * answers[i] is its result text (a new string the caller frees); for the others it is NULL
 * and a skip {reviewer, reason} is appended to `skips`. Each run appends {reviewer, round,
 * ok, error, cost_usd, duration_ms, session_id, fork_of} to `runs`. Returns 0, or
 * FAILURE_MEMORY. */
int review_reviewers_run(const review_act_t *act, const char *const *names,
                         char *const *prompts, size_t n, char **answers, json_t *skips,
                         json_t *runs);

#endif
