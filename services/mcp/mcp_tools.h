/* mcp_tools: the tools cloister-mcp gives an agent, each with a JSON Schema for its input.
 *
 *   submit_task     any task (specialist, priority, issue, workspace, branch, target, title,
 *                   payload) -> the task as committed
 *   request_review  a review-agent task for a branch -> the task
 *   request_merge   `pan approve`: the merge of a reviewed issue or review task, the review
 *                   gate enforced -> the merge task, or the refusal with its findings
 *   run_tests       a test-agent run of a branch or commit, waited for (bounded) -> the
 *                   parsed result (TEST_RESULT, counts, FAILURES)
 *   wait_task       waits (bounded) until a task ends -> the task with its result
 *   task_status     a task now -> the task
 *   list_tasks      tasks, newest first, by state, specialist, issue, age
 *   recent_events   stored events (since a seq, by task, issue, specialist or topic)
 *   apply_patch     a unified diff applied to a workspace with libgit2, every file checked
 *                   first (all or nothing, per-file report; paths outside it, through a
 *                   symbolic link, or to anything but a regular file refused; inside a task
 *                   the workspace must be one of the task's own directories, settings' roots)
 *   handoff_to      hands the current work to a specialist: inside a task (settings'
 *                   handoff_file set) it becomes the task's chained next task, committed
 *                   with the task's result; otherwise it is submitted at once
 *
 * A call returns a CallToolResult: `content` (one readable text), `structuredContent` (an
 * object) and `isError`. Arguments that do not match the schema, a refusal by the broker
 * or a failure are `isError: true` with the reason -- never a crash or a JSON-RPC error.
 *
 * Submitting, waiting and approving go through `pan` (settings.pan, run without a shell):
 * one implementation of the payload, the merge group, workspace checks and the gate. */
#ifndef CLOISTER_MCP_TOOLS_H
#define CLOISTER_MCP_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* How many --root directories a server takes. */
#define MCP_ROOTS_MAX 16

typedef struct {
    const char *control_ep, *events_ep, *in_ep; /* the broker */
    const char *pan;          /* path of the pan program */
    const char *handoff_file; /* inside a task: where handoff_to writes its next tasks */
    const char *parent_task;  /* that task's id (NULL outside a task) */
    const char *const *roots; /* NULL-terminated: the task's own directories, where alone
                                 apply_patch writes (NULL: not limited, outside a task) */
    const char *source;       /* recorded as the submitter ("cloister-mcp") */
    int timeout_ms;           /* deadline of each control request */
} mcp_settings_t;

/* How many tools there are. */
size_t mcp_tools_count(void);

/* Tool number `index` as tools/list shows it: {name, title, description, inputSchema}.
 * New reference. */
json_t *mcp_tool_describe(size_t index);

/* True when a tool is called `name`. */
bool mcp_tool_exists(const char *name);

/* Calls tool `name` with `arguments` (an object, borrowed). Returns a new CallToolResult. */
json_t *mcp_tool_call(const mcp_settings_t *settings, const char *name, const json_t *arguments);

#endif
