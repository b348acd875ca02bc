/* agent: runs the agent CLI (Claude Code headless mode by default; Codex or Gemini through
 * their adapters, agent_cli.h) for one specialist and keeps its session across runs. The
 * steps below are written in Claude's terms (docs/agent-cli.md); each adapter maps them to
 * its CLI (docs/agent-codex.md, docs/agent-gemini.md): a CLI that names its own sessions
 * (Codex) has the id it announces saved at once instead of one we chose; a CLI with a
 * login check (Codex, which offline retries for ever) runs it first, and a run that finds
 * no credentials ends with not_logged_in and what to do.
 *
 * One run:
 *   1. takes the specialist's run lock (session.h), retrying until the run's deadline, so
 *      runs of one specialist never overlap;
 *   2. picks the session: none stored, unreadable, stored for another cwd, or a context
 *      past the token limit → a fresh one (a new uuid SAVED before the agent starts, passed with
 *      --session-id); otherwise --resume <stored id> (a stored id that never completed a
 *      run is passed with --session-id again). Every fresh start is reported through the
 *      progress callback (AGENT_PROGRESS_SESSION) and in the outcome;
 *   3. spawns, argv only, in its own process group, cwd = workdir (Claude's argv; the
 *      adapter builds its own CLI's):
 *        <command> [extra args] -p --output-format stream-json --verbose --model <alias>
 *        [--max-turns N] [--max-budget-usd X] [--permission-mode M]
 *        [--allowedTools a,b] [--disallowedTools c,d] [--append-system-prompt <text>]
 *        (--session-id <uuid> | --resume <uuid>)
 *      the prompt on stdin then EOF; env = ours minus what Claude Code sets for its children (CLAUDECODE,
 *      CLAUDE_CODE_SESSION_ID, CLAUDE_CODE_CHILD_SESSION, CLAUDE_CODE_ENTRYPOINT), plus
 *      PANOPTICON_AGENT_ID=<specialist>;
 *   4. parses stdout NDJSON by key: each assistant text block and tool_use becomes a
 *      progress callback as its line arrives; the last `result` event is the outcome (a
 *      \u0000 in a string is taken, as U+FFFD, so every text stays one C string);
 *   5. recovers once per case: "No conversation found with session ID" on --resume → fresh
 *      session ("context lost"); "is already in use" on --session-id → rerun with --resume;
 *      "is already in use" on --resume → fresh session ("session in use");
 *   6. adopts a different result.session_id only if its transcript exists on disk (never the
 *      id from init); stores the context size (the input side — input + cache creation +
 *      cache read tokens — of the run's last API call, from the last assistant event's
 *      message.usage; the result's usage only when no assistant event had any, since it
 *      totals every call and counts the cached context once per call), adds tokens and
 *      cost to the session file, appends a line to
 *      specialists/<name>/history.jsonl (bytes of the task id, error or result text that
 *      are not UTF-8 become U+FFFD there), releases the lock.
 *
 * A fork (settings.fork_session) is a side run that starts from the specialist's context
 * without changing it: --resume <stored id> --fork-session --session-id <new uuid>, so the
 * CLI writes the run under the new id and the stored transcript stays as it was. It takes
 * no lock and saves no session file, so forks of one session run in parallel (the review's
 * domain reviewers); with no usable stored session it is a new throwaway session
 * (fresh_reason says why). Its line in history.jsonl has "fork_of".
 *
 * Success is `result.is_error == false`, whatever the subtype and the exit code. Deadlines:
 * timeout_s bounds the whole run (lock wait and reruns included); no_output_timeout_s stops
 * an agent that went silent; after a `result` line the agent gets result_grace_ms to exit
 * before its group is stopped (TERM, then KILL) — that result still counts.
 *
 * Driving it (single thread, no blocking): the specialist skeleton calls
 * agent_run_step(run, ms) from its poll loop (or its job thread) and keeps heartbeating or
 * checking for cancellation between calls; agent_run_cancel() (on SIGTERM or a broker
 * cancel) stops the agent's process group and the next steps finish the run. A cancel
 * takes effect within one step, so the step timeout bounds its latency. Callbacks run
 * inside agent_run_step(). agent_run() is the blocking convenience. Apart from
 * agent_run_cancel(), one thread drives a run; different runs are independent. */
#ifndef CLOISTER_AGENT_H
#define CLOISTER_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_DEFAULT_RESULT_GRACE_MS 5000
#define AGENT_RESULT_TEXT_MAX (1024 * 1024) /* longer result texts are truncated */
#define AGENT_HISTORY_TEXT_MAX 2000         /* result text kept in history.jsonl */

/* What a run needs; the services fill it from their config. Borrowed: the struct and every
 * string and list it points to must stay valid until agent_run_destroy(). Zero / NULL means
 * "default" or "omit the flag", as noted. */
typedef struct {
    const char *specialist;           /* required: PANOPTICON_AGENT_ID, the history's name */
    const char *session;              /* the session key (replica.h); NULL → specialist */
    int replica;                      /* this process's replica slot (replica.h), 0 alone */
    const char *workdir;              /* required, absolute: the agent's cwd, same every run */
    const char *cli;                  /* the adapter (agent_cli.h): "claude" (NULL), "codex",
                                         "gemini" */
    const char *command;              /* NULL → the adapter's ("claude", searched in PATH) */
    const char *const *extra_args;    /* NULL-terminated, after the adapter's flags; or NULL */
    const char *const *add_dirs;      /* NULL-terminated directories the agent may also
                                         touch (--add-dir and the like); or NULL */
    const char *mcp_config;           /* a JSON file {"mcpServers": {...}} of MCP servers to
                                         give the agent; NULL → none */
    const char *model;                /* NULL → the CLI's default */
    /* Claude Code only (the other CLIs run unattended in their own sandboxes, see
     * docs/agent-codex.md and docs/agent-gemini.md): */
    const char *permission_mode;      /* NULL → omitted */
    const char *const *allowed_tools; /* NULL-terminated, joined with ","; NULL → omitted */
    const char *const *disallowed_tools;
    const char *fallback_model;       /* the model to switch to when the main one stays
                                         overloaded (--fallback-model); NULL → omitted */
    int max_turns;                    /* 0 → omitted */
    double max_budget_usd;            /* 0 → omitted */
    const char *append_system_prompt; /* NULL → omitted (put before the prompt for a CLI
                                         without such a flag) */
    int timeout_s;                    /* whole run; 0 → no limit */
    int no_output_timeout_s;          /* 0 → no watchdog */
    int result_grace_ms;              /* 0 → AGENT_DEFAULT_RESULT_GRACE_MS */
    int kill_grace_ms;                /* TERM → KILL; 0 → PROC_DEFAULT_KILL_GRACE_MS */
    int64_t session_token_limit;      /* rotate once the context (the input side of the last
                                         API call) is past this many tokens; 0 → never */
    bool fork_session;                /* a side run on a copy of the stored session (below) */
    const char *const *env;           /* NULL-terminated "NAME=value" added to the agent's
                                         environment; or NULL */
} agent_settings_t;

typedef enum {
    AGENT_PROGRESS_TEXT,    /* an assistant text block: text */
    AGENT_PROGRESS_TOOL,    /* a tool call: text = tool name, detail = short input summary */
    AGENT_PROGRESS_SESSION, /* a fresh session: text = reason, detail = the new session id */
    AGENT_PROGRESS_API      /* the CLI retries a failed model API call: text says so
                               ("model API overloaded (HTTP 529): retry 3 of 10 in 12 s") */
} agent_progress_kind_t;

/* What went wrong with the model API, as the CLI reported it: its retry events and its
 * final error (docs/agent-cli.md §3.3). A failed run's outcome names the last one. */
typedef enum {
    AGENT_API_OK = 0,
    AGENT_API_KEY_REFUSED,     /* 401, 403 or a billing error: the key does not work. The
                                  run stops at the CLI's first retry of it */
    AGENT_API_OVERLOADED,      /* 429 rate limited, 503 or 529 overloaded: worth another
                                  try after the CLI's last retry delay */
    AGENT_API_PROMPT_TOO_LONG, /* the conversation no longer fits the model: the run
                                  rotates the session and tries once more */
    AGENT_API_UNREACHABLE,     /* no answer: the connection failed or broke off mid-answer,
                                  or the API failed (5xx) */
    AGENT_API_TOO_SLOW         /* the run's time ran out while the agent waited for the
                                  model */
} agent_api_error_t;

typedef struct {
    agent_progress_kind_t kind;
    const char *text;
    const char *detail; /* "" when there is none */
} agent_progress_t;

/* Called as events happen. `progress` and its strings are borrowed for the call only. */
typedef void(agent_progress_fn)(void *arg, const agent_progress_t *progress);

/* The end of a run. Every string is owned by the run (never NULL; "" when absent) and valid
 * until agent_run_destroy(). */
typedef struct {
    bool ok;                 /* a result arrived with is_error == false, and not cancelled */
    const char *error;       /* why not ok; "" when ok */
    bool got_result;         /* a `result` event was received */
    bool is_error;           /* result.is_error */
    const char *subtype;     /* result.subtype */
    const char *result_text; /* result.result, or result.errors[] joined with "; " */
    double cost_usd;         /* result.total_cost_usd */
    int64_t input_tokens;    /* result.usage.* */
    int64_t cache_creation_input_tokens;
    int64_t cache_read_input_tokens;
    int64_t output_tokens;
    int64_t context_tokens; /* input side of the last API call (see step 6); 0 if unknown */
    int num_turns;
    int64_t duration_ms;      /* result.duration_ms */
    int64_t wall_ms;          /* our own measure of the whole run */
    const char *session_id;   /* the session this run used (after any adoption) */
    bool fresh;               /* a new session was started during this run */
    const char *fork_of;      /* a fork: the session it copied ("" when none or no fork) */
    const char *fresh_reason; /* why ("" when resumed) */
    int attempts;             /* agent processes started (1, or 2-3 after recoveries) */
    bool timed_out;           /* the wall clock or the no-output watchdog stopped it */
    bool not_logged_in;       /* the CLI has no credentials (error says what to do) */
    agent_api_error_t api_error; /* the model API failure that ended the run, if any */
    int api_status;              /* its HTTP status; 0 when none was said */
    int api_retries;             /* API retries the CLI announced during the last attempt */
    int64_t retry_after_ms;      /* the delay of its last retry: when another try may work */
    bool cancelled;           /* agent_run_cancel() stopped it */
    bool exited;              /* the last agent process exited: exit_code valid */
    int exit_code;
    int term_signal;         /* the signal that ended it, when !exited */
    const char *stderr_tail; /* the last bytes of its stderr */
} agent_outcome_t;

/* The stable name of a model API failure, for results and logs: "key_refused",
 * "overloaded", "prompt_too_long", "unreachable", "too_slow" ("" for AGENT_API_OK). */
const char *agent_api_error_code(agent_api_error_t error);

typedef struct agent_run_t agent_run_t;

/* Starts a run of `prompt` (copied) for task `task_id` (copied; may be NULL) with
 * `settings` (borrowed, see above). `progress` may be NULL. On success *run_p is the new
 * run (the caller owns it; free with agent_run_destroy()). Nothing is spawned yet: the
 * first agent_run_step() takes the lock. Returns 0, or FAILURE_INVALID for unusable
 * settings (no specialist, bad name, relative workdir). Everything that goes wrong later
 * (busy lock, spawn failure, agent errors) is reported in the outcome, not here. */
int agent_run_start(agent_run_t **run_p, const agent_settings_t *settings, const char *prompt,
                    const char *task_id, agent_progress_fn *progress, void *progress_arg);

/* Makes progress for at most about timeout_ms (-1: until something happens): takes the
 * lock, spawns, delivers progress, enforces deadlines, recovers, finishes. Returns 1 when
 * the run is over (agent_run_outcome() is ready; every later call returns 1 at once), 0
 * while it goes on. */
int agent_run_step(agent_run_t *run, int timeout_ms);

/* Asks the run to stop. Thread-safe (an atomic flag), so another thread may call it; it
 * takes effect at the start of the next agent_run_step(): the agent's process group gets
 * SIGTERM, then SIGKILL after the kill grace, and no recovery rerun starts. Keep calling
 * agent_run_step() until it returns 1; the outcome then has cancelled = true, ok = false
 * (a run already finished is unchanged). */
void agent_run_cancel(agent_run_t *run);

/* The outcome, once agent_run_step() returned 1 (NULL before). Owned by the run. */
const agent_outcome_t *agent_run_outcome(const agent_run_t *run);

/* The pid (= process group) of the agent process running now, or -1. */
int agent_run_pid(const agent_run_t *run);

/* Runs to the end (start + step until done). On success *run_p is the finished run for
 * the caller to read and destroy. Returns as agent_run_start(). */
int agent_run(agent_run_t **run_p, const agent_settings_t *settings, const char *prompt,
              const char *task_id, agent_progress_fn *progress, void *progress_arg);

/* Kills an agent still running (SIGKILL to its group), releases the lock, frees. A run
 * destroyed before it finished leaves its session file as it was. Nulls *run_p; safe
 * with NULL. */
void agent_run_destroy(agent_run_t **run_p);

/* Where the Claude CLI keeps the transcript of `session_id` for an agent run in `cwd`:
 * ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<realpath(cwd), non-[A-Za-z0-9] → '-'>/<id>.jsonl
 * (an encoded name over 200 characters is truncated by the CLI with a hash suffix; the
 * first project directory with that prefix is used). Writes the path into buf. Returns
 * 0, FAILURE_NOT_FOUND (cwd does not exist / no such project directory) or
 * FAILURE_TOO_BIG. */
int agent_transcript_path(char *buf, size_t size, const char *cwd, const char *session_id);

#endif
