/* agent_job: runs the agent CLI from a specialist job (the glue between specialist.h and
 * agent.h), so every agent-driven service does it the same way.
 *
 *   agent_job_settings_t s;
 *   agent_job_settings_from_config(&s, config, "review-agent", NULL);
 *   agent_job_settings_add_dir(&s, workspace);      // more directories for the agent
 *   agent_run_t *run = NULL;
 *   agent_job_run(&run, ctx, &s.agent, prompt);
 *   const agent_outcome_t *o = agent_run_outcome(run);   // ok, result_text, error, ...
 *   agent_run_destroy(&run);
 *
 * Settings come from cloister.toml: the CLI ([specialists.<name>] agent, else [agent] cli:
 * claude, codex or gemini, agent_cli.h) and its command (config_specialist_command();
 * CLOISTER_AGENT_COMMAND already applied to [agent] command by config_load), args, permission_mode, allowed_tools, disallowed_tools, max_turns,
 * max_budget_usd, append_system_prompt, no_output_timeout, result_grace_ms,
 * session_token_limit; the model from config_specialist_model() and the run's wall-clock
 * limit from config_specialist_timeout_s() (the skeleton's task lease still applies and
 * cancels the run earlier when it is shorter).
 *
 * The working directory. The agent CLI finds a session's transcript by the cwd, so a
 * specialist's agent always runs in the same absolute directory: the workdir argument,
 * else [specialists.<name>] workdir, else $PANOPTICON_HOME/specialists/<name>/work
 * (created; .../work-<k> for replica k of a scaled specialist, which also keeps its own
 * session: see replica.h). The repository a task works on is handed to the agent some other
 * way: agent_job_settings_add_dir() (each CLI's --add-dir), and its path in the prompt.
 *
 * While the run goes on, agent_job_run() forwards the agent's progress to the broker:
 *   assistant text  → kind "agent"   (cut to AGENT_JOB_TEXT_MAX bytes)
 *   a tool call     → kind "tool"    ("Edit src/a.c")
 *   a fresh session → kind "session" ("fresh session <id>: <reason>")
 * The agent gets Cloister's own tools: a config file naming cloister-mcp for this task
 * ($PANOPTICON_HOME/specialists/<name>/mcp/<task>.json, agent_settings_t.mcp_config: Claude
 * gets --mcp-config and its tools allowed as mcp__cloister, Codex the same servers as -c
 * mcp_servers.* overrides), so it can hand off, run tests or ask for a review. A handoff
 * it makes (handoff_to) lands in the task's handoff file (handoff.h); when the run is over
 * each one becomes a chained next task of the result (specialist_result_next). [agent]
 * mcp = false turns this off; [agent] mcp_command names the server (default: cloister-mcp
 * next to the service's own program; when there is none, the agent runs without it).
 * The server acts with the agent key (CLOISTER_CURVE_CERT = [agent] mcp_key, default
 * $PANOPTICON_HOME/keys/agent_secret; role agent, curve.h), never the service's own: on a
 * CURVE bus it may submit reviews, tests and hand-offs, but not merge, force or cancel, and
 * when that key is missing it does not connect at all.
 *
 * A model API failure may hand the task back instead of a result (agent_job_api_outcome()).
 *
 * It polls specialist_cancelled() and cancels the run, and registers the agent's process
 * group with specialist_watch_child() (again after each recovery rerun). When the run is
 * over it sets the standard result fields:
 *   agent_ok, agent_cli, agent_error, agent_not_logged_in and agent_api_error (when not
 *   ok), session_id, session_fresh, session_fresh_reason, agent_duration_ms (of the
 *   last run), and the task's totals over every agent run it made (agent_job_add_usage):
 *   cost_usd, input_tokens (input + cache tokens), output_tokens, turns, agent_runs. */
#ifndef CLOISTER_AGENT_JOB_H
#define CLOISTER_AGENT_JOB_H

#include "agent.h"
#include "config.h"
#include "session.h"
#include "specialist.h"

#include <stddef.h>

/* The most entries of each list (extra args, allowed tools, disallowed tools). */
#define AGENT_JOB_MAX_LIST 64
/* The longest assistant text forwarded as one progress message. */
#define AGENT_JOB_TEXT_MAX 4096
/* How long one agent_run_step() may wait before cancellation is checked again, in ms. */
#define AGENT_JOB_STEP_MS 100
#define AGENT_JOB_WORKDIR_SIZE 1024
/* When an overloaded model API's task runs again, if the CLI gave no retry delay. */
#define AGENT_JOB_RETRY_AFTER_MS 30000

/* agent_settings_t plus the storage its lists and workdir point to. `agent` is what
 * agent_run_start() takes. Strings come from the config (borrowed: keep the config alive
 * while the settings are used) or from the struct itself; the struct holds no heap memory,
 * so it needs no destructor. Do not copy it (agent's pointers point into it). */
typedef struct {
    agent_settings_t agent;
    char workdir[AGENT_JOB_WORKDIR_SIZE];
    char session[SESSION_NAME_MAX + 8]; /* this replica's session key (replica.h) */
    /* cloister-mcp for the agent ("" when off), and the broker it talks to */
    char mcp_command[AGENT_JOB_WORKDIR_SIZE];
    char mcp_key[AGENT_JOB_WORKDIR_SIZE]; /* the agent key's secret file (curve.h) */
    const char *control_ep, *events_ep, *in_ep;
    const char *extra_args[AGENT_JOB_MAX_LIST + 1];
    const char *allowed_tools[AGENT_JOB_MAX_LIST + 1];
    const char *disallowed_tools[AGENT_JOB_MAX_LIST + 1];
    const char *add_dirs[AGENT_JOB_MAX_LIST + 1];
    size_t nextra, ndirs;
} agent_job_settings_t;

/* Fills *out from `config` (borrowed, must outlive the settings) for `specialist`
 * (borrowed, must outlive the settings). `workdir` may be NULL (see the header comment for
 * the default); it is created if missing and stored as an absolute path. Returns 0, or
 * FAILURE_INVALID (bad specialist name), FAILURE_TOO_BIG (a list over AGENT_JOB_MAX_LIST or
 * a path too long) or FAILURE_IO (the workdir cannot be created). */
int agent_job_settings_from_config(agent_job_settings_t *out, const config_t *config,
                                   const char *specialist, const char *workdir);

/* Appends one argument (borrowed: it must outlive the settings) to the extra args, passed
 * as they are after the adapter's own flags. Returns 0 or FAILURE_TOO_BIG. */
int agent_job_settings_add_arg(agent_job_settings_t *settings, const char *arg);

/* Adds a directory (borrowed) the agent may also read and write. Returns 0 or
 * FAILURE_TOO_BIG. */
int agent_job_settings_add_dir(agent_job_settings_t *settings, const char *dir);

/* The specialist's fixed agent workdir (see the header comment) into buf, created.
 * Returns 0, FAILURE_TOO_BIG or FAILURE_IO. */
int agent_job_workdir(char *buf, size_t size, const config_t *config, const char *specialist);

/* Runs the agent for the job of `ctx` with `prompt` (copied) and `settings` (borrowed until
 * the run is destroyed; the task id comes from the task). Blocks until the run is over,
 * forwarding progress and honouring cancellation as the header comment says, then sets the
 * standard result fields. On 0, *run_p is the finished run: agent_run_outcome(*run_p) is
 * the outcome; the caller owns the run and frees it with agent_run_destroy(). Returns
 * FAILURE_INVALID (with *run_p NULL and the `agent_ok`/`agent_error` result fields set)
 * only when the settings are unusable; every failure of the agent itself is in the
 * outcome. */
int agent_job_run(agent_run_t **run_p, specialist_ctx_t *ctx,
                  const agent_job_settings_t *settings, const char *prompt);

/* Adds one agent run's cost, tokens and turns to the task's totals in the result
 * (cost_usd, input_tokens, output_tokens, turns, agent_runs). agent_job_run() does it for
 * its run; a service that starts runs itself (agent_run_start, e.g. the review's domain
 * reviewers) calls it for each. */
void agent_job_add_usage(specialist_ctx_t *ctx, const agent_outcome_t *outcome);

/* What a run's model API failure means for the task (agent_job_run() does it; a job that
 * runs agents itself, e.g. the review's reviewers, calls it for each): a refused key hands
 * the task back and pauses the specialist, since every task would fail the same way; an
 * API that stayed overloaded hands the task back, due again after the CLI's last retry
 * delay (AGENT_JOB_RETRY_AFTER_MS when it gave none). Neither counts as a failure of the
 * task (specialist_hand_back()). Any other outcome changes nothing. */
void agent_job_api_outcome(specialist_ctx_t *ctx, const agent_outcome_t *outcome);

#endif
