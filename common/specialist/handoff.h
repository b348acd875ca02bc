/* handoff: the next tasks an agent hands its work to during a task (the MCP tool
 * `handoff_to`), kept in a file of the task until the task's result takes them as its
 * chained next tasks -- committed by the broker in the same transaction as the result, so
 * a handoff is never lost and never runs for a task that did not finish.
 *
 * The file holds one JSON object per line, each the fields of a `submit` (id, specialist,
 * priority, title, issue, source, payload). cloister-mcp appends (one write of one line,
 * O_APPEND, then fsync); the specialist takes them when the agent's run is over. */
#ifndef CLOISTER_HANDOFF_H
#define CLOISTER_HANDOFF_H

#include <jansson.h>

/* Most handoffs one task may make; more are refused. */
#define HANDOFF_MAX 16

/* Appends `submit` (an object) as a line of the file at `path` (created 0600). Returns 0,
 * FAILURE_TOO_BIG (the task already has HANDOFF_MAX) or FAILURE_IO, with the reason. */
int handoff_append(const char *path, const json_t *submit);

/* Calls fn for each handoff in the file at `path`, in order, then removes the file. A
 * missing file is no handoff (0). A line that is not a JSON object is skipped with a
 * warning. Returns 0, FAILURE_IO, or the first nonzero value fn returned. */
int handoff_take(const char *path, int (*fn)(const json_t *submit, void *arg), void *arg);

#endif
