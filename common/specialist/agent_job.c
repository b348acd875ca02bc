/* agent_job: the agent runner driven from a specialist job (see agent_job.h). */
#include "agent_job.h"

#include "curve.h"
#include "failure.h"
#include "handoff.h"
#include "home.h"
#include "log.h"
#include "program.h"
#include "replica.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Copies the string list config[table][key] into list (NULL-terminated). */
static int s_fill_list(const char **list, size_t *n, const config_t *config, const char *table,
                       const char *key)
{
    size_t len = config_array_len(config, table, key);
    size_t at = *n;
    for (size_t i = 0; i < len; i++) {
        const char *value = config_array_string(config, table, key, i);
        if (value == NULL)
            continue;
        if (at >= AGENT_JOB_MAX_LIST)
            return failure_set(FAILURE_TOO_BIG, "[%s] %s has more than %d entries", table, key,
                               AGENT_JOB_MAX_LIST);
        list[at++] = value;
    }
    list[at] = NULL;
    *n = at;
    return 0;
}

/* A config string, with "" meaning unset. */
static const char *s_string_or_null(const config_t *config, const char *table, const char *key)
{
    const char *value = config_string(config, table, key, NULL);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

/* Creates `dir` and writes its absolute, resolved path into buf. */
static int s_absolute_dir(char *buf, size_t size, const char *dir)
{
    int rc = home_mkdirs(dir);
    if (rc != 0)
        return rc;
    char resolved[PATH_MAX];
    if (realpath(dir, resolved) == NULL)
        return failure_set(FAILURE_IO, "cannot resolve %s: %s", dir, strerror(errno));
    int n = snprintf(buf, size, "%s", resolved);
    if (n < 0 || (size_t)n >= size)
        return failure_set(FAILURE_TOO_BIG, "workdir path too long: %s", resolved);
    return 0;
}

int agent_job_workdir(char *buf, size_t size, const config_t *config, const char *specialist)
{
    const char *configured = config_specialist_workdir(config, specialist);
    if (configured != NULL && configured[0] != '\0')
        return s_absolute_dir(buf, size, configured);
    /* Each replica of a scaled specialist works in a directory of its own (replica.h). */
    int replica = replica_claim(specialist);
    if (replica < 0)
        return replica;
    char relative[256];
    int n = replica == 0
                ? snprintf(relative, sizeof relative, "specialists/%s/work", specialist)
                : snprintf(relative, sizeof relative, "specialists/%s/work-%d", specialist,
                           replica);
    if (n < 0 || (size_t)n >= sizeof relative)
        return failure_set(FAILURE_TOO_BIG, "specialist name too long");
    char dir[PATH_MAX];
    int rc = home_path(dir, sizeof dir, relative);
    return rc != 0 ? rc : s_absolute_dir(buf, size, dir);
}

/* cloister-mcp for the agent into buf: [agent] mcp_command, else next to this program;
 * "" when [agent] mcp is false or there is no such program. */
static void s_mcp_command(char *buf, size_t size, const config_t *config)
{
    buf[0] = '\0';
    if (!config_bool(config, "agent", "mcp", true))
        return;
    const char *configured = s_string_or_null(config, "agent", "mcp_command");
    if (configured != NULL) {
        snprintf(buf, size, "%s", configured);
        return;
    }
    if (!program_beside(buf, size, "cloister-mcp") || access(buf, X_OK) != 0)
        buf[0] = '\0';
}

int agent_job_settings_from_config(agent_job_settings_t *out, const config_t *config,
                                   const char *specialist, const char *workdir)
{
    memset(out, 0, sizeof *out);
    if (specialist_check_name(specialist) != 0)
        return FAILURE_INVALID;
    int rc = workdir != NULL
                 ? s_absolute_dir(out->workdir, sizeof out->workdir, workdir)
                 : agent_job_workdir(out->workdir, sizeof out->workdir, config, specialist);
    if (rc != 0)
        return rc;
    size_t nallowed = 0, ndisallowed = 0;
    if ((rc = s_fill_list(out->extra_args, &out->nextra, config, "agent", "args")) != 0 ||
        (rc = s_fill_list(out->allowed_tools, &nallowed, config, "agent", "allowed_tools")) != 0 ||
        (rc = s_fill_list(out->disallowed_tools, &ndisallowed, config, "agent",
                          "disallowed_tools")) != 0)
        return rc;

    int replica = replica_claim(specialist);
    if (replica < 0)
        return replica;
    replica_session_key(out->session, sizeof out->session, specialist, replica);
    agent_settings_t *a = &out->agent;
    a->specialist = specialist;
    a->session = out->session;
    a->replica = replica;
    a->workdir = out->workdir;
    a->cli = config_specialist_cli(config, specialist);
    a->command = config_specialist_command(config, specialist);
    if (a->command != NULL && a->command[0] == '\0')
        a->command = NULL;
    a->extra_args = out->extra_args;
    a->model = config_specialist_model(config, specialist);
    a->fallback_model = config_specialist_fallback_model(config, specialist);
    a->permission_mode = s_string_or_null(config, "agent", "permission_mode");
    a->allowed_tools = nallowed > 0 ? out->allowed_tools : NULL;
    a->disallowed_tools = ndisallowed > 0 ? out->disallowed_tools : NULL;
    a->max_turns = (int)config_int(config, "agent", "max_turns", 0);
    a->max_budget_usd = config_double(config, "agent", "max_budget_usd", 0);
    a->append_system_prompt = s_string_or_null(config, "agent", "append_system_prompt");
    a->timeout_s = (int)config_specialist_timeout_s(config, specialist);
    a->no_output_timeout_s = (int)config_int(config, "agent", "no_output_timeout", 0);
    a->result_grace_ms = (int)config_int(config, "agent", "result_grace_ms", 0);
    a->session_token_limit = config_int(config, "agent", "session_token_limit", 0);
    s_mcp_command(out->mcp_command, sizeof out->mcp_command, config);
    const char *key = s_string_or_null(config, "agent", "mcp_key");
    if (key != NULL)
        snprintf(out->mcp_key, sizeof out->mcp_key, "%s", key);
    else if (curve_agent_cert(out->mcp_key, sizeof out->mcp_key) != 0)
        out->mcp_command[0] = '\0'; /* no key to give it: no server rather than ours */
    out->control_ep = config_string(config, "broker", "control", "tcp://127.0.0.1:5562");
    out->events_ep = config_string(config, "broker", "events", "tcp://127.0.0.1:5561");
    out->in_ep = config_string(config, "broker", "in", "tcp://127.0.0.1:5560");
    return 0;
}

int agent_job_settings_add_dir(agent_job_settings_t *settings, const char *dir)
{
    if (settings->ndirs >= AGENT_JOB_MAX_LIST)
        return failure_set(FAILURE_TOO_BIG, "more than %d extra agent directories",
                           AGENT_JOB_MAX_LIST);
    settings->add_dirs[settings->ndirs++] = dir;
    settings->add_dirs[settings->ndirs] = NULL;
    settings->agent.add_dirs = settings->add_dirs;
    return 0;
}

int agent_job_settings_add_arg(agent_job_settings_t *settings, const char *arg)
{
    if (settings->nextra >= AGENT_JOB_MAX_LIST)
        return failure_set(FAILURE_TOO_BIG, "more than %d extra agent arguments",
                           AGENT_JOB_MAX_LIST);
    settings->extra_args[settings->nextra++] = arg;
    settings->extra_args[settings->nextra] = NULL;
    return 0;
}

/* The length of text cut to at most max bytes, not inside a UTF-8 sequence. */
static size_t s_utf8_cut(const char *text, size_t max)
{
    size_t len = strlen(text);
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)text[max] & 0xC0) == 0x80)
        max--;
    return max;
}

static void s_on_progress(void *arg, const agent_progress_t *progress)
{
    specialist_ctx_t *ctx = arg;
    switch (progress->kind) {
    case AGENT_PROGRESS_TEXT: {
        size_t len = s_utf8_cut(progress->text, AGENT_JOB_TEXT_MAX);
        specialist_progressf(ctx, "agent", "%.*s", (int)len, progress->text);
        break;
    }
    case AGENT_PROGRESS_TOOL:
        specialist_progressf(ctx, "tool", "%s%s%s", progress->text, progress->detail[0] ? " " : "",
                             progress->detail);
        break;
    case AGENT_PROGRESS_SESSION:
        specialist_progressf(ctx, "session", "fresh session %s: %s", progress->detail,
                             progress->text);
        break;
    case AGENT_PROGRESS_API:
        specialist_progress(ctx, "api", progress->text);
        break;
    }
}

static void s_result_fields(specialist_ctx_t *ctx, const char *cli, const agent_outcome_t *o)
{
    specialist_result_bool(ctx, "agent_ok", o->ok);
    specialist_result_str(ctx, "agent_cli", cli != NULL ? cli : "claude");
    if (!o->ok) {
        specialist_result_str(ctx, "agent_error", o->error);
        specialist_result_bool(ctx, "agent_not_logged_in", o->not_logged_in);
        if (o->api_error != AGENT_API_OK)
            specialist_result_str(ctx, "agent_api_error", agent_api_error_code(o->api_error));
    }
    specialist_result_str(ctx, "session_id", o->session_id);
    specialist_result_bool(ctx, "session_fresh", o->fresh);
    if (o->fresh)
        specialist_result_str(ctx, "session_fresh_reason", o->fresh_reason);
    agent_job_add_usage(ctx, o);
    specialist_result_int(ctx, "agent_duration_ms", o->wall_ms);
}

void agent_job_add_usage(specialist_ctx_t *ctx, const agent_outcome_t *o)
{
    specialist_result_add_float(ctx, "cost_usd", o->cost_usd);
    specialist_result_add_int(ctx, "input_tokens",
                              o->input_tokens + o->cache_creation_input_tokens +
                                  o->cache_read_input_tokens);
    specialist_result_add_int(ctx, "output_tokens", o->output_tokens);
    specialist_result_add_int(ctx, "turns", o->num_turns);
    specialist_result_add_int(ctx, "agent_runs", 1);
}

/* The agent's MCP server for one task: its config file and the task's handoff file, and
 * the allowed tools with the server's added. */
typedef struct {
    char config[PATH_MAX];
    char handoff[PATH_MAX];
    const char *allowed_tools[AGENT_JOB_MAX_LIST + 2];
} job_mcp_t;

/* Writes the MCP config naming cloister-mcp for the task: the agent key, and the task's
 * own directories as the only places apply_patch writes. Returns 0 or FAILURE_*. */
static int s_mcp_write_config(const agent_job_settings_t *settings, const char *task_id,
                              job_mcp_t *mcp)
{
    json_t *args = json_pack("[s,s, s,s, s,s, s,s, s,s]", "--control", settings->control_ep,
                             "--events", settings->events_ep, "--in", settings->in_ep, "--task",
                             task_id, "--handoff-file", mcp->handoff);
    for (size_t i = 0; args != NULL && i < settings->ndirs; i++) {
        json_array_append_new(args, json_string("--root"));
        json_array_append_new(args, json_string(settings->add_dirs[i]));
    }
    json_t *config = args == NULL ? NULL
                                  : json_pack("{s:{s:{s:s, s:s, s:o, s:{s:s, s:s}}}}",
                                              "mcpServers", "cloister", "type", "stdio",
                                              "command", settings->mcp_command, "args", args,
                                              "env", "PANOPTICON_HOME", home_dir(),
                                              "CLOISTER_CURVE_CERT", settings->mcp_key);
    int rc = config && json_dump_file(config, mcp->config, JSON_COMPACT) == 0
                 ? 0
                 : failure_set(FAILURE_IO, "cannot write %s", mcp->config);
    json_decref(config);
    return rc;
}

/* Prepares the task's MCP server (see the header). Returns true when the agent gets it;
 * false (with a warning) leaves the agent without it. */
static bool s_mcp_begin(const agent_job_settings_t *settings, const char *task_id, job_mcp_t *mcp,
                        agent_settings_t *agent)
{
    if (settings->mcp_command[0] == '\0' || task_id == NULL || strchr(task_id, '/') != NULL ||
        task_id[0] == '.')
        return false;
    char dir[PATH_MAX], relative[256];
    snprintf(relative, sizeof relative, "specialists/%s/mcp", settings->agent.specialist);
    int rc = home_path(dir, sizeof dir, relative);
    if (rc == 0)
        rc = home_mkdirs(dir);
    if (rc == 0 && (snprintf(mcp->config, sizeof mcp->config, "%s/%s.json", dir, task_id) >=
                        (int)sizeof mcp->config ||
                    snprintf(mcp->handoff, sizeof mcp->handoff, "%s/%s.handoff", dir, task_id) >=
                        (int)sizeof mcp->handoff))
        rc = failure_set(FAILURE_TOO_BIG, "task id too long for a file name");
    if (rc == 0) {
        unlink(mcp->handoff); /* an earlier attempt's handoffs went with its result, or not */
        rc = s_mcp_write_config(settings, task_id, mcp);
    }
    if (rc != 0) {
        log_warn("agent %s: running without cloister-mcp: %s", settings->agent.specialist,
                 failure_message());
        return false;
    }
    agent->mcp_config = mcp->config;
    size_t n = 0;
    for (size_t i = 0; agent->allowed_tools && agent->allowed_tools[i]; i++)
        mcp->allowed_tools[n++] = agent->allowed_tools[i];
    mcp->allowed_tools[n++] = "mcp__cloister";
    mcp->allowed_tools[n] = NULL;
    agent->allowed_tools = mcp->allowed_tools;
    return true;
}

/* The handoffs of one run, as they become next tasks. */
typedef struct {
    specialist_ctx_t *ctx;
    json_t *made; /* [{id, specialist, reason}] for the result's `handoffs` */
} job_handoffs_t;

/* Takes one handoff as a next task of the result. Who hands off is this task and its
 * specialist, whatever the agent's server wrote. */
static int s_take_handoff(const json_t *submit, void *arg)
{
    job_handoffs_t *handoffs = arg;
    specialist_ctx_t *ctx = handoffs->ctx;
    const specialist_task_t *task = specialist_task(ctx);
    json_t *stamped = json_deep_copy(submit);
    json_t *record = json_object_get(json_object_get(stamped, "payload"), "handoff");
    if (json_is_object(record)) {
        json_object_set_new(record, "from", json_string(task->specialist));
        json_object_set_new(record, "from_task", json_string(task->id));
    }
    const char *id = json_string_value(json_object_get(stamped, "id"));
    const char *to = json_string_value(json_object_get(stamped, "specialist"));
    const char *reason = json_string_value(json_object_get(record, "reason"));
    if (stamped == NULL || specialist_result_next(ctx, stamped) != 0) {
        specialist_progressf(ctx, "handoff", "handoff to %s refused: %s", to ? to : "?",
                             stamped ? failure_message() : "out of memory");
        json_decref(stamped);
        return 0;
    }
    specialist_progressf(ctx, "handoff",
                         "handed off to %s as task %s (queued with this result)%s%s",
                         to ? to : "?", id ? id : "?", reason && reason[0] ? ": " : "",
                         reason ? reason : "");
    json_array_append_new(handoffs->made, json_pack("{s:s?, s:s?, s:s?}", "id", id, "specialist",
                                                    to, "reason", reason));
    json_decref(stamped);
    return 0;
}

/* After the run: the handoffs become next tasks (listed in the result's `handoffs`); the
 * config goes. */
static void s_mcp_end(specialist_ctx_t *ctx, job_mcp_t *mcp)
{
    job_handoffs_t handoffs = {.ctx = ctx, .made = json_array()};
    if (handoff_take(mcp->handoff, s_take_handoff, &handoffs) != 0)
        specialist_progressf(ctx, "handoff", "the handoffs were lost: %s", failure_message());
    if (json_array_size(handoffs.made) > 0)
        specialist_result_json(ctx, "handoffs", handoffs.made);
    json_decref(handoffs.made);
    unlink(mcp->config);
}

int agent_job_run(agent_run_t **run_p, specialist_ctx_t *ctx,
                  const agent_job_settings_t *settings, const char *prompt)
{
    *run_p = NULL;
    const specialist_task_t *task = specialist_task(ctx);
    agent_run_t *run = NULL;
    agent_settings_t within_grace = settings->agent;
    if (within_grace.kill_grace_ms == 0)
        within_grace.kill_grace_ms = specialist_child_kill_grace_ms(ctx);
    job_mcp_t mcp;
    bool with_mcp = s_mcp_begin(settings, task->id, &mcp, &within_grace);
    int rc = agent_run_start(&run, &within_grace, prompt, task->id, s_on_progress, ctx);
    if (rc != 0) {
        if (with_mcp)
            unlink(mcp.config);
        specialist_result_bool(ctx, "agent_ok", false);
        specialist_result_str(ctx, "agent_error", failure_message());
        return rc;
    }
    bool cancel_sent = false;
    int watched = -1;
    for (;;) {
        if (!cancel_sent && specialist_cancelled(ctx)) {
            agent_run_cancel(run);
            cancel_sent = true;
        }
        int done = agent_run_step(run, AGENT_JOB_STEP_MS);
        /* The pid changes when the runner starts a recovery rerun. */
        int pid = agent_run_pid(run);
        if (pid != watched) {
            specialist_watch_child(ctx, pid > 0 ? pid : 0);
            watched = pid;
        }
        if (done)
            break;
    }
    specialist_watch_child(ctx, 0);
    if (with_mcp)
        s_mcp_end(ctx, &mcp);
    s_result_fields(ctx, settings->agent.cli, agent_run_outcome(run));
    agent_job_api_outcome(ctx, agent_run_outcome(run));
    *run_p = run;
    return 0;
}

void agent_job_api_outcome(specialist_ctx_t *ctx, const agent_outcome_t *outcome)
{
    if (outcome->ok)
        return;
    if (outcome->api_error == AGENT_API_KEY_REFUSED) {
        specialist_hand_back(ctx, outcome->error, 0, true);
    } else if (outcome->api_error == AGENT_API_OVERLOADED) {
        int64_t delay = outcome->retry_after_ms > 0 ? outcome->retry_after_ms
                                                    : AGENT_JOB_RETRY_AFTER_MS;
        specialist_hand_back(ctx, outcome->error, delay, false);
    }
}
