/* verdict: a waited-for task's meaning and exit code (see verdict.h). */
#include "verdict.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* The table of verdict.h, indexed by verdict_t. */
static const struct {
    const char *name;
    int exit_code;
} s_table[] = {
    [VERDICT_PASSED] = {"passed", VERDICT_EXIT_OK},
    [VERDICT_GATE_OPEN] = {"gate_open", VERDICT_EXIT_OK},
    [VERDICT_MERGED] = {"merged", VERDICT_EXIT_OK},
    [VERDICT_DONE] = {"done", VERDICT_EXIT_OK},
    [VERDICT_TASK_FAILED] = {"task_failed", VERDICT_EXIT_TASK_FAILED},
    [VERDICT_TASK_DEAD] = {"task_dead", VERDICT_EXIT_TASK_FAILED},
    [VERDICT_TASK_CANCELLED] = {"task_cancelled", VERDICT_EXIT_TASK_FAILED},
    [VERDICT_USAGE] = {"usage", VERDICT_EXIT_USAGE},
    [VERDICT_UNREACHABLE] = {"unreachable", VERDICT_EXIT_UNREACHABLE},
    [VERDICT_TIMEOUT] = {"timeout", VERDICT_EXIT_TIMEOUT},
    [VERDICT_TESTS_FAILED] = {"tests_failed", VERDICT_EXIT_TESTS_FAILED},
    [VERDICT_GATE_BLOCKED] = {"gate_blocked", VERDICT_EXIT_GATE_BLOCKED},
    [VERDICT_MERGE_FAILED] = {"merge_failed", VERDICT_EXIT_MERGE_FAILED},
};

static const char *s_str(const json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

static bool s_is(const char *value, const char *expected)
{
    return value != NULL && strcasecmp(value, expected) == 0;
}

verdict_t verdict_of_task(const json_t *task)
{
    const char *state = s_str(task, "state");
    const json_t *result = json_object_get(task, "result");
    const char *merge = s_str(result, "MERGE_RESULT");
    bool done = s_is(state, "done");
    if (merge != NULL && (done || s_is(state, "failed")))
        return s_is(merge, "SUCCESS") && done ? VERDICT_MERGED : VERDICT_MERGE_FAILED;
    if (s_is(state, "failed"))
        return VERDICT_TASK_FAILED;
    if (s_is(state, "dead"))
        return VERDICT_TASK_DEAD;
    if (s_is(state, "cancelled"))
        return VERDICT_TASK_CANCELLED;
    if (!done)
        return VERDICT_TIMEOUT;
    const char *gate = s_str(result, "GATE");
    const char *review = s_str(result, "REVIEW_RESULT");
    const char *tests = s_str(result, "TEST_RESULT");
    if (gate != NULL)
        return s_is(gate, "open") ? VERDICT_GATE_OPEN : VERDICT_GATE_BLOCKED;
    if (review != NULL)
        return s_is(review, "APPROVED") ? VERDICT_GATE_OPEN : VERDICT_GATE_BLOCKED;
    if (tests != NULL)
        return s_is(tests, "PASS")   ? VERDICT_PASSED
               : s_is(tests, "FAIL") ? VERDICT_TESTS_FAILED
                                     : VERDICT_TASK_FAILED;
    return VERDICT_DONE;
}

const char *verdict_name(verdict_t verdict)
{
    return s_table[verdict].name;
}

int verdict_exit_code(verdict_t verdict)
{
    return s_table[verdict].exit_code;
}
