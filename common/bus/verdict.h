/* verdict: what a task that was waited for means, in one table. `pan submit --wait`,
 * `pan task wait` and `pan approve --wait` exit with the verdict's code, and cloister-mcp's
 * wait_task and run_tests carry its name as a top-level `verdict` field, so a script
 * (`pan submit ... --wait && next`) or an agent never goes on after a red result.
 *
 *   verdict         exit  when
 *   passed            0   done, TEST_RESULT PASS
 *   gate_open         0   done, GATE open (a review-agent without GATE: REVIEW_RESULT
 *                         APPROVED)
 *   merged            0   done, MERGE_RESULT SUCCESS
 *   done              0   done, none of those fields (a generic worker's task)
 *   task_failed       1   failed (TEST_RESULT ERROR included: the tests could not run)
 *   task_dead         1   dead: every attempt failed
 *   task_cancelled    1   cancelled
 *   usage             2   the command was used wrongly
 *   unreachable       3   the broker did not answer
 *   timeout           4   the task had not ended when the wait ran out (or was interrupted)
 *   tests_failed      5   done, TEST_RESULT FAIL
 *   gate_blocked      6   done, GATE blocked (without GATE: a REVIEW_RESULT that is not
 *                         APPROVED)
 *   merge_failed      7   MERGE_RESULT present and not SUCCESS (done or failed)
 *
 * A task's own fields are read in the order MERGE_RESULT, GATE, REVIEW_RESULT, TEST_RESULT:
 * a merge that ran the tests is judged as a merge. */
#ifndef CLOISTER_VERDICT_H
#define CLOISTER_VERDICT_H

#include <jansson.h>

typedef enum {
    VERDICT_PASSED,
    VERDICT_GATE_OPEN,
    VERDICT_MERGED,
    VERDICT_DONE,
    VERDICT_TASK_FAILED,
    VERDICT_TASK_DEAD,
    VERDICT_TASK_CANCELLED,
    VERDICT_USAGE,
    VERDICT_UNREACHABLE,
    VERDICT_TIMEOUT,
    VERDICT_TESTS_FAILED,
    VERDICT_GATE_BLOCKED,
    VERDICT_MERGE_FAILED,
} verdict_t;

/* The exit codes of the table above. */
#define VERDICT_EXIT_OK 0
#define VERDICT_EXIT_TASK_FAILED 1
#define VERDICT_EXIT_USAGE 2
#define VERDICT_EXIT_UNREACHABLE 3
#define VERDICT_EXIT_TIMEOUT 4
#define VERDICT_EXIT_TESTS_FAILED 5
#define VERDICT_EXIT_GATE_BLOCKED 6
#define VERDICT_EXIT_MERGE_FAILED 7

/* The verdict of `task` (borrowed), a task as the broker's show_task gives it ({state,
 * result, ...}); a task that has not ended (queued, running) is VERDICT_TIMEOUT. */
verdict_t verdict_of_task(const json_t *task);

/* The verdict's name ("gate_blocked"; static). */
const char *verdict_name(verdict_t verdict);

/* The verdict's exit code (the table above). */
int verdict_exit_code(verdict_t verdict);

#endif
