/* hook_command: runs one operator-configured hook command ([hooks] after_review,
 * after_test, after_merge) for one ended task.
 *
 * The command is the operator's own text from cloister.toml, run with /bin/sh -c (so it may
 * be a pipeline, or `curl ... | jq ...`); nothing of the task ever becomes part of it. What
 * the task was comes in the environment and on stdin instead:
 *   CLOISTER_HOOK          the hook's name ("after_merge")
 *   CLOISTER_EVENT         the event that ended the task (task.done, task.failed, ...)
 *   CLOISTER_TASK_ID, CLOISTER_TASK_STATE, CLOISTER_SPECIALIST, CLOISTER_ISSUE,
 *   CLOISTER_TITLE, CLOISTER_ERROR, CLOISTER_VERDICT (verdict.h: merged, gate_blocked, ...)
 *   CLOISTER_RESULT_<KEY>  every string, number or boolean of the result, the key upper-cased
 *                          with anything but letters and digits made "_"
 *                          (CLOISTER_RESULT_MERGE_RESULT, CLOISTER_RESULT_GATE, ...)
 * each value at most HOOK_COMMAND_VALUE_MAX bytes; and the whole event as JSON on stdin
 * (with `verdict`). The hooks process's own environment is inherited (the command's tokens
 * live there). The command runs in its own process group with a wall-clock limit; at the
 * limit the group is killed. */
#ifndef CLOISTER_HOOK_COMMAND_H
#define CLOISTER_HOOK_COMMAND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Longest value put in one variable, in bytes (cut between characters). */
#define HOOK_COMMAND_VALUE_MAX 4096
/* Most CLOISTER_RESULT_* variables. */
#define HOOK_COMMAND_RESULT_VARS 64

/* Runs `command` as hook `hook` for `event` (the ended task's event as JSON with its
 * `verdict`; borrowed), at most `timeout_ms`. Returns true when it exited 0. `outcome`
 * gets one line saying how it went ("exit 0 in 12 ms", "exit 3 in 40 ms: <stderr tail>",
 * "killed after the 30 s limit", "cannot run: ..."). */
bool hook_command_run(const char *hook, const char *command, const json_t *event,
                      long timeout_ms, char *outcome, size_t size);

#endif
