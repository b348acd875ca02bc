/* fake_actions: the little script language that lets the fake CLIs change things.
 *
 * FAKE_CLAUDE_ACTIONS (FAKE_CODEX_ACTIONS, FAKE_GEMINI_ACTIONS) names a file with one action per line, run in the current directory
 * in order (blank lines and lines starting with '#' are skipped):
 *
 *   write <path> <text...>             create or overwrite a file (\n, \t, \\ escapes)
 *   append <path> <text...>            append to a file (same escapes)
 *   resolve <path> ours|theirs|both    rewrite git conflict blocks in one file
 *   resolve-all ours|theirs|both       the same for every file under cwd with markers
 *   run <argv...>                      fork/exec argv split on spaces (no shell), in a
 *                                      session of its own
 *   mcp <server> <tool> <json>         call a tool of a --mcp-config server (fake_mcp.h)
 *   say <text...>                      a line of the final answer
 *   sleep <ms>                         pause
 *
 * Each write/append/resolve/resolve-all/run/mcp is reported to the caller as one tool step,
 * which each fake turns into its CLI's tool events (claude: an `assistant` tool_use plus a
 * `user` tool_result; codex: a command_execution / file_change / mcp_tool_call item; gemini:
 * tool_use plus tool_result). Steps are named the Claude way ("Write", "Edit", "Bash",
 * "mcp__<server>__<tool>"); the other fakes translate. */
#ifndef FAKE_ACTIONS_H
#define FAKE_ACTIONS_H

#include <jansson.h>
#include <stdbool.h>

/* One tool call the script performed. Everything is owned by fake_actions and valid only
 * during the report callback. */
typedef struct {
    const char *tool;   /* "Write", "Edit", "Bash" or "mcp__<server>__<tool>" */
    json_t *input;      /* the tool_use input object */
    const char *output; /* the tool_result content */
    bool is_error;      /* the tool reported an error (command exit code != 0, bad action) */
    int exit_code;      /* for "Bash": the command's exit code; 0 otherwise */
    bool created;       /* for "Write"/"Edit" of one file: it did not exist before */
} fake_step_t;

/* Called after each tool step, so the caller can stream it while the script runs. */
typedef void(fake_actions_report_fn)(const fake_step_t *step, void *arg);

/* From now on `run` actions are refused with `why` (a static string; NULL: run again), as
 * a CLI that asks before running a command refuses when nobody can answer: each is an
 * error step with that text, and the script goes on. */
void fake_actions_refuse_run(const char *why);

/* Runs the script at `path` in the current directory. Each tool step is passed to `report`
 * (with `arg`). The `say` lines are appended to `said` (a JSON array of strings the caller
 * owns). Returns 0, or a negative FAILURE_* code with the reason in failure_message() when
 * the script cannot be read or an action fails (missing file, bad rule, unknown action);
 * the failing action has already been reported as an error step. */
int fake_actions_run(const char *path, fake_actions_report_fn *report, void *arg, json_t *said);

/* Rewrites the conflict blocks (`<<<<<<< `, optional diff3 `||||||| ` base, `=======`,
 * `>>>>>>> `) in `text`, keeping "ours", "theirs" or "both" (ours then theirs). Sets
 * *blocks to the number of blocks resolved. Returns a malloc'd string the caller frees, or
 * NULL with failure_message() set when `rule` is unknown or a block is not terminated. */
char *fake_actions_resolve_text(const char *text, const char *rule, int *blocks);

#endif
