/* pipeline: the path a change takes through the specialists, review → test → merge.
 *
 * A specialist hands the change on by adding a `next` task to its result (committed by the
 * broker in the transaction that closes its own task), always pinned to the commit it
 * looked at, so what is merged is what was reviewed and tested. Configuration:
 *   [pipeline] after_review = "merge" | "test" | "none"   (default "merge")
 *     what a review whose gate is open chains: "merge" chains the merge in yolo mode only
 *     (normal and strict wait for `pan approve`), "test" chains the test-agent on the
 *     reviewed commit in every mode, "none" chains nothing;
 *   [pipeline] after_test = "merge" | "none"   (default "none")
 *     what a passing test run of a pipeline task (one chained by a review) chains: the
 *     merge, when the review's mode was yolo; in normal and strict the merge waits for
 *     `pan approve`.
 * The tasks built here carry payload.pipeline = {review: <review task id>, mode: <review
 * mode>} so the next step knows where the change came from. Those words are the
 * submitter's, so they decide nothing: the next step reads the review mode from
 * configuration (repository_review_mode()), and the broker's gate lets the merge through
 * only when the review it descends from read the commit and opened the gate. */
#ifndef CLOISTER_PIPELINE_H
#define CLOISTER_PIPELINE_H

#include "config.h"

#include <jansson.h>

typedef enum { PIPELINE_NONE, PIPELINE_TEST, PIPELINE_MERGE } pipeline_step_t;

/* [pipeline] after_review / after_test (see above). The configuration's schema refuses
 * other values when it is loaded; one that slips through reads as the default. */
pipeline_step_t pipeline_after_review(const config_t *config);
pipeline_step_t pipeline_after_test(const config_t *config);

/* What a pipeline task is about. Strings are borrowed; issue, pr_url and review may be
 * NULL or "". */
typedef struct {
    const char *workspace;
    const char *branch;
    const char *target;
    const char *commit; /* the full SHA the next step is pinned to */
    const char *merge_base; /* the merge base of commit and target the review read, or NULL:
                               the merge carries it, and is held where the target no
                               longer contains it (broker_gate.c) */
    const char *issue;
    const char *pr_url;
    const char *priority;
    const char *source;  /* the specialist handing on */
    const char *review;  /* the review task the change passed */
    const char *mode;    /* that review's mode */
    bool queue;          /* [merge] queue: the merge-agents queue the target's merges
                            themselves, so the merge task has no serialisation group */
} pipeline_change_t;

/* The `submit` of the next step (caller owns): the merge-agent task "merge-<from>" (in the
 * repository's merge group merge:<root>:<target> unless change->queue), or the test-agent task "test-<from>",
 * where `from` is the id of the task handing on. NULL when memory runs out. */
json_t *pipeline_merge_task(const pipeline_change_t *change, const char *from);
json_t *pipeline_test_task(const pipeline_change_t *change, const char *from);

#endif
