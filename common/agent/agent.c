/* agent: the agent runner (see agent.h); what differs between CLIs is in their adapters
 * (agent_cli.h).
 *
 * A run moves through these phases:
 *
 *   WAIT_LOCK ──lock taken──▶ [LOGIN_CHECK] ──▶ AGENT (one process per attempt) ──▶ DONE
 *       │       (a fork takes      │ (CLIs with    │  ▲
 *       │        no lock)          │  a check)     └──┘ recovery: at most one rerun per rule
 *       │                          │                    (context lost, id in use)
 *       │                          └── not logged in ───────────────────────────▶ DONE
 *       └── deadline or cancel ─────────────────────────────────────────────────▶ DONE
 *
 * The session file is the source of truth between runs; while a run holds the lock, the
 * copy in `state` is. A fresh session is saved before its agent starts (for a CLI that
 * names its sessions, as soon as it says the name), so a crash mid-run never leaves an id
 * the CLI knows and we do not. A fork never writes the session file. */
#include "agent.h"

#include "agent_cli.h"
#include "agent_stream.h"
#include "clock.h"
#include "failure.h"
#include "log.h"
#include "msgjson.h"
#include "proc.h"
#include "session.h"
#include "utf8.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How often a run waiting for its specialist's lock tries again. */
#define AGENT_LOCK_RETRY_MS 100

/* How long a CLI's login check may take. */
#define AGENT_LOGIN_CHECK_MS 30000

typedef enum { RUN_WAIT_LOCK, RUN_LOGIN_CHECK, RUN_AGENT, RUN_DONE } run_phase_t;

struct agent_run_t {
    const agent_settings_t *settings;
    const agent_cli_t *cli;
    char *prompt;
    char *task_id;
    agent_progress_fn *progress;
    void *progress_arg;

    run_phase_t phase;
    int64_t started_ms;
    int64_t deadline_ms;          /* 0 = no limit */
    atomic_bool cancel_requested; /* set by agent_run_cancel(), from any thread */
    bool cancelled;               /* the step saw it */
    session_lock_t *lock;
    session_state_t state;
    bool session_chosen;              /* past the lock phase: the run gets recorded */
    char fork_of[SESSION_ID_SIZE];    /* a fork: the stored session it copies; "" otherwise */
    char login_output[256];           /* the login check's last stdout line */
    /* For a CLI whose usage is the session's running total: the totals before this run. */
    int64_t usage_base_input, usage_base_output;

    /* The current attempt. */
    proc_t *proc;
    bool use_session_id; /* --session-id (new id) rather than --resume */
    bool retried_lost, retried_in_use_new, retried_in_use_resume, retried_too_long;
    bool api_stop_sent;    /* stopped because the model API refused the key */
    agent_stream_t stream; /* this attempt's output as read so far */
    int64_t result_at_ms;  /* when its result arrived; 0 = not yet */
    bool result_stop_sent;

    /* The outcome and the strings it points to. */
    agent_outcome_t outcome;
    char *error;
    char *subtype;
    char *result_text;
    char *stderr_tail;
    char session_id[SESSION_ID_SIZE];
    char fresh_reason[SESSION_REASON_SIZE];
};

/* A malloc'd copy of at most max bytes of src, cut on a UTF-8 boundary. NULL on OOM. */
/* The key of the run's session file and lock: its replica's (replica.h). */
static const char *s_session_key(const agent_settings_t *set)
{
    return set->session != NULL ? set->session : set->specialist;
}

static char *s_dup_max(const char *src, size_t max)
{
    size_t len = strlen(src);
    if (len > max)
        len = max;
    char *copy = malloc(len + 1);
    if (copy != NULL)
        utf8_copy(copy, len + 1, src);
    return copy;
}

static void s_set_string(char **field, const char *value)
{
    free(*field);
    *field = strdup(value ? value : "");
}

static void s_progress(agent_run_t *run, agent_progress_kind_t kind, const char *text,
                       const char *detail)
{
    if (run->progress == NULL)
        return;
    agent_progress_t progress = {kind, text ? text : "", detail ? detail : ""};
    run->progress(run->progress_arg, &progress);
}

/* ---------------------------------------------------------------------------------------
 * Parsing the agent's NDJSON stream. */

/* A CLI that names its sessions (agent_cli_t.names_sessions) just said which one it
 * started: saved at once (a fork's is not), so a crash later in the run loses nothing. */
static void s_named_by_cli(agent_run_t *run)
{
    session_state_t *st = &run->state;
    utf8_copy(st->session_id, sizeof st->session_id, run->stream.session_id);
    utf8_copy(run->session_id, sizeof run->session_id, st->session_id);
    if (run->settings->fork_session)
        return;
    if (session_save(s_session_key(run->settings), st) != 0)
        log_error("agent %s: cannot save the session: %s", run->settings->specialist,
                  failure_message());
    if (run->outcome.fresh)
        s_progress(run, AGENT_PROGRESS_SESSION, run->fresh_reason, st->session_id);
}

/* The agent's stdout, a line at a time; the time its result arrived starts the grace the
 * CLI gets to exit after it. */
static int s_on_line(void *arg, const char *line, size_t len)
{
    agent_run_t *run = arg;
    if (run->phase == RUN_LOGIN_CHECK) {
        if (len > 0) /* what it says, for the error message */
            snprintf(run->login_output, sizeof run->login_output, "%.*s",
                     (int)(len < sizeof run->login_output ? len : sizeof run->login_output - 1),
                     line);
        return 0;
    }
    if (agent_stream_read(&run->stream, line, len) == AGENT_STREAM_RESULT)
        run->result_at_ms = clock_now_ms();
    /* A refused key is refused again on every retry: the CLI is stopped at its first. */
    if (run->stream.api_stop && !run->api_stop_sent && run->proc != NULL) {
        log_warn("agent %s: the model API refused the key; stopping the agent",
                 run->settings->specialist);
        proc_stop(run->proc, PROC_STOP_REQUESTED);
        run->api_stop_sent = true;
    }
    if (run->cli->names_sessions && run->state.session_id[0] == '\0' &&
        run->stream.session_id[0] != '\0')
        s_named_by_cli(run);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Sessions and spawning. */

/* Replaces the session with a new id, saved before any agent sees it. */
static int s_fresh_session(agent_run_t *run, const char *reason)
{
    session_state_t *st = &run->state;
    memset(st, 0, sizeof *st);
    /* A CLI that names its sessions says the id in its output (s_named_by_cli). */
    if (!run->cli->names_sessions)
        session_new_id(st->session_id);
    utf8_copy(st->cwd, sizeof st->cwd, run->settings->workdir);
    utf8_copy(st->cli, sizeof st->cli, run->cli->name);
    st->created_at_ms = clock_wall_ms();
    utf8_copy(st->fresh_reason, sizeof st->fresh_reason, reason);
    run->use_session_id = true;
    run->outcome.fresh = true;
    run->fork_of[0] = '\0';
    run->usage_base_input = run->usage_base_output = 0;
    utf8_copy(run->fresh_reason, sizeof run->fresh_reason, reason);
    log_info("agent %s: starting a fresh %s session %s (%s)", run->settings->specialist,
             run->cli->name, st->session_id, reason);
    /* A fork's session is thrown away after the run: the stored one stays as it was. */
    int rc = run->settings->fork_session ? 0 : session_save(s_session_key(run->settings), st);
    if (rc != 0)
        return rc;
    if (st->session_id[0] != '\0')
        s_progress(run, AGENT_PROGRESS_SESSION, reason, st->session_id);
    return 0;
}

/* A fork copies the stored session under a new id; without a usable one (never ran, or
 * for another cwd) it is a new throwaway session. */
static int s_choose_fork(agent_run_t *run)
{
    const agent_settings_t *set = run->settings;
    int rc = session_load(s_session_key(set), &run->state);
    const char *reason = NULL;
    if (rc != 0 || run->state.runs == 0 || run->state.session_id[0] == '\0')
        reason = rc == FAILURE_INVALID ? "session file unreadable" : "no session to fork";
    else if (strcmp(run->state.cwd, set->workdir) != 0)
        reason = "cwd changed";
    else if (strcmp(run->state.cli, run->cli->name) != 0)
        reason = "agent CLI changed";
    else if (!run->cli->forks)
        reason = "the CLI cannot fork a session";
    if (reason != NULL)
        return s_fresh_session(run, reason);
    utf8_copy(run->fork_of, sizeof run->fork_of, run->state.session_id);
    run->usage_base_input = run->state.input_tokens; /* a fork's totals start from these */
    run->usage_base_output = run->state.output_tokens;
    session_state_t *st = &run->state;
    memset(st, 0, sizeof *st);
    if (!run->cli->names_sessions)
        session_new_id(st->session_id);
    utf8_copy(st->cwd, sizeof st->cwd, set->workdir);
    utf8_copy(st->cli, sizeof st->cli, run->cli->name);
    st->created_at_ms = clock_wall_ms();
    run->use_session_id = true;
    return 0;
}

/* Loads the stored session and decides: resume it, or start fresh (and why). */
static int s_choose_session(agent_run_t *run)
{
    const agent_settings_t *set = run->settings;
    if (set->fork_session)
        return s_choose_fork(run);
    int rc = session_load(s_session_key(set), &run->state);
    char reason[SESSION_REASON_SIZE];
    if (rc == FAILURE_NOT_FOUND) {
        snprintf(reason, sizeof reason, "no previous session");
    } else if (rc != 0) {
        utf8_copy(reason, sizeof reason, "session file unreadable");
    } else if (strcmp(run->state.cwd, set->workdir) != 0) {
        snprintf(reason, sizeof reason, "cwd changed");
    } else if (strcmp(run->state.cli, run->cli->name) != 0) {
        snprintf(reason, sizeof reason, "agent CLI changed from %s to %s", run->state.cli,
                 run->cli->name);
    } else if (run->state.session_id[0] == '\0') {
        snprintf(reason, sizeof reason, "the CLI never named the last session");
    } else if (set->session_token_limit > 0 &&
               run->state.context_tokens > set->session_token_limit) {
        snprintf(reason, sizeof reason, "rotated at a context of %lld tokens",
                 (long long)run->state.context_tokens);
    } else {
        /* An id we chose that never completed a run may not exist on the CLI's side yet;
         * one the CLI named exists, since it said so. */
        run->use_session_id = !run->cli->names_sessions && run->state.runs == 0;
        run->usage_base_input = run->state.input_tokens;
        run->usage_base_output = run->state.output_tokens;
        return 0;
    }
    return s_fresh_session(run, reason);
}

/* The prompt the agent gets: for a CLI without a system-prompt flag, the role text goes in
 * front of it; for one that would run a leading '/' as a command, a line goes in front of
 * that. NULL on OOM; the caller frees. */
static char *s_prompt_text(const agent_run_t *run)
{
    const char *role = run->settings->append_system_prompt;
    if (role != NULL && run->cli->takes_system_prompt)
        role = NULL;
    const char *start = role != NULL ? role : run->prompt;
    while (*start == ' ' || *start == '\t' || *start == '\n' || *start == '\r')
        start++;
    const char *lead = run->cli->slash_is_command && *start == '/' ? "The task:\n\n" : "";
    char *text = NULL;
    int n = asprintf(&text, "%s%s%s%s", lead, role ? role : "", role ? "\n\n" : "", run->prompt);
    return n < 0 ? NULL : text;
}

/* Starts `argv` (after the command) as the run's process: cwd = workdir, in its own
 * group, the environment minus what the CLI sets for its children plus
 * PANOPTICON_AGENT_ID and settings.env, `input` on stdin. */
static int s_start_process(agent_run_t *run, agent_argv_t *args, const char *input)
{
    const agent_settings_t *set = run->settings;
    size_t env_count = 0, cli_env_count = 0;
    while (set->env != NULL && set->env[env_count] != NULL)
        env_count++;
    while (run->cli->env_set != NULL && run->cli->env_set[cli_env_count] != NULL)
        cli_env_count++;
    const char **argv = calloc(args->count + 2, sizeof *argv);
    const char **env_set = calloc(env_count + cli_env_count + 2, sizeof *env_set);
    char agent_id[SESSION_NAME_MAX + 32];
    int rc = 0;
    if (argv == NULL || env_set == NULL || args->failed) {
        rc = failure_set(FAILURE_MEMORY, "out of memory");
        goto out;
    }
    argv[0] = set->command ? set->command : run->cli->default_command;
    for (size_t i = 0; i < args->count; i++)
        argv[i + 1] = args->items[i];
    snprintf(agent_id, sizeof agent_id, "PANOPTICON_AGENT_ID=%s", set->specialist);
    env_set[0] = agent_id;
    for (size_t i = 0; i < cli_env_count; i++)
        env_set[1 + i] = run->cli->env_set[i];
    for (size_t i = 0; i < env_count; i++)
        env_set[1 + cli_env_count + i] = set->env[i];
    int64_t now = clock_now_ms();
    int64_t timeout_ms =
        run->deadline_ms > 0 ? (run->deadline_ms > now ? run->deadline_ms - now : 1) : 0;
    if (run->phase == RUN_LOGIN_CHECK && (timeout_ms == 0 || timeout_ms > AGENT_LOGIN_CHECK_MS))
        timeout_ms = AGENT_LOGIN_CHECK_MS;
    proc_options_t options = {
        .argv = (char *const *)argv,
        .cwd = set->workdir,
        .env_remove = run->cli->env_remove,
        .env_set = env_set,
        .stdin_data = input,
        .stdin_len = input ? strlen(input) : 0,
        .on_line = s_on_line,
        .on_line_arg = run,
        .timeout_ms = timeout_ms,
        .no_output_timeout_ms = (int64_t)set->no_output_timeout_s * 1000,
        .kill_grace_ms = set->kill_grace_ms,
    };
    log_debug("agent %s: %s %s", set->specialist, argv[0], args->count ? argv[1] : "");
    rc = proc_start(&run->proc, &options);
out:
    free(argv);
    free(env_set);
    return rc;
}

/* One attempt of the agent, with the session as chosen. */
static int s_spawn(agent_run_t *run)
{
    agent_call_t call = {
        .settings = run->settings,
        .mode = run->fork_of[0] != '\0' ? AGENT_CALL_FORK
                : run->use_session_id    ? AGENT_CALL_NEW
                                         : AGENT_CALL_RESUME,
        .session_id = run->state.session_id,
        .fork_of = run->fork_of,
    };
    agent_argv_t args = {0};
    run->cli->build_argv(&args, &call);
    if (run->cli->prepare != NULL)
        run->cli->prepare(run->settings);
    char *input = s_prompt_text(run);
    agent_stream_reset(&run->stream);
    run->result_at_ms = 0;
    run->result_stop_sent = false;
    run->api_stop_sent = false;
    run->outcome.attempts++;
    int rc = input != NULL ? s_start_process(run, &args, input)
                           : failure_set(FAILURE_MEMORY, "out of memory");
    free(input);
    agent_argv_free(&args);
    return rc;
}

/* The CLI's quick credentials check (agent_cli_t.login_check), unless the environment
 * already carries a key it takes. Returns 1 when started, 0 when there is none to run. */
static int s_start_login_check(agent_run_t *run)
{
    const agent_cli_t *cli = run->cli;
    if (cli->login_check == NULL)
        return 0;
    for (size_t i = 0; cli->login_env != NULL && cli->login_env[i] != NULL; i++) {
        const char *value = getenv(cli->login_env[i]);
        if (value != NULL && value[0] != '\0')
            return 0;
    }
    agent_argv_t args = {0};
    agent_argv_add_list(&args, cli->login_check);
    run->phase = RUN_LOGIN_CHECK;
    int rc = s_start_process(run, &args, NULL);
    agent_argv_free(&args);
    return rc == 0 ? 1 : rc;
}

/* ---------------------------------------------------------------------------------------
 * Finishing. */

/* result.result, or errors[] joined with "; " (the error subtypes have no result key). */
static char *s_result_text(json_t *result)
{
    const char *text = json_string_value(json_object_get(result, "result"));
    if (text != NULL)
        return s_dup_max(text, AGENT_RESULT_TEXT_MAX);
    json_t *errors = json_object_get(result, "errors");
    size_t len = 1, i;
    json_t *item;
    json_array_foreach(errors, i, item)
    {
        if (json_is_string(item))
            len += strlen(json_string_value(item)) + 2;
    }
    char *joined = calloc(1, len);
    if (joined == NULL)
        return NULL;
    json_array_foreach(errors, i, item)
    {
        if (!json_is_string(item))
            continue;
        if (joined[0] != '\0')
            strcat(joined, "; ");
        strcat(joined, json_string_value(item));
    }
    if (strlen(joined) > AGENT_RESULT_TEXT_MAX) {
        char *cut = s_dup_max(joined, AGENT_RESULT_TEXT_MAX);
        free(joined);
        return cut;
    }
    return joined;
}

static int64_t s_usage(json_t *result, const char *key)
{
    return agent_stream_count(json_object_get(json_object_get(result, "usage"), key));
}

/* The last non-empty line of text, for one-line error messages. */
static void s_last_line(char *out, size_t size, const char *text)
{
    const char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        end--;
    const char *start = end;
    while (start > text && start[-1] != '\n')
        start--;
    size_t len = (size_t)(end - start);
    char line[1024];
    if (len >= sizeof line)
        len = sizeof line - 1;
    memcpy(line, start, len);
    line[len] = '\0';
    utf8_copy(out, size, line);
}

/* A CLI that reports the session's running totals (agent_cli_t.usage_is_thread_total):
 * this run's share is what the totals grew by since the session's stored ones. How much of
 * it was cached is not reported per run: the cached share of the totals, at most all. Its
 * context is taken as this run's input (an over-estimate, as with a result's usage). */
static void s_usage_of_this_run(agent_run_t *run)
{
    agent_outcome_t *o = &run->outcome;
    int64_t total_in = o->input_tokens + o->cache_creation_input_tokens + o->cache_read_input_tokens;
    int64_t run_in = total_in > run->usage_base_input ? total_in - run->usage_base_input : 0;
    int64_t cached = o->cache_read_input_tokens < run_in ? o->cache_read_input_tokens : run_in;
    o->input_tokens = run_in - cached;
    o->cache_creation_input_tokens = 0;
    o->cache_read_input_tokens = cached;
    o->output_tokens = o->output_tokens > run->usage_base_output
                           ? o->output_tokens - run->usage_base_output
                           : 0;
    o->context_tokens = run_in;
}

const char *agent_api_error_code(agent_api_error_t error)
{
    switch (error) {
    case AGENT_API_KEY_REFUSED: return "key_refused";
    case AGENT_API_OVERLOADED: return "overloaded";
    case AGENT_API_PROMPT_TOO_LONG: return "prompt_too_long";
    case AGENT_API_UNREACHABLE: return "unreachable";
    case AGENT_API_TOO_SLOW: return "too_slow";
    case AGENT_API_OK: break;
    }
    return "";
}

/* The model API failure the attempt ended with, if any: the one the CLI reported, or a
 * deadline that passed while the agent waited for the model. */
static void s_fill_api_error(agent_run_t *run)
{
    agent_outcome_t *o = &run->outcome;
    const agent_stream_t *st = &run->stream;
    o->api_error = AGENT_API_OK;
    o->api_status = st->api_status;
    o->api_retries = st->api_retries;
    o->retry_after_ms = st->api_retry_delay_ms;
    if (o->ok || run->cancelled)
        return;
    const proc_status_t *ps = run->proc ? proc_status(run->proc) : NULL;
    bool deadline = ps != NULL &&
                    (ps->stopped_by == PROC_STOP_TIMEOUT || ps->stopped_by == PROC_STOP_NO_OUTPUT);
    o->api_error = st->api_error;
    /* Out of time while retrying an overloaded or unreachable API: that failure, still. */
    if (deadline && st->awaiting_model && st->api_error != AGENT_API_OVERLOADED &&
        st->api_error != AGENT_API_UNREACHABLE)
        o->api_error = AGENT_API_TOO_SLOW;
}

/* The error of a run that a model API failure ended, into buf. */
static void s_api_error_message(const agent_run_t *run, char *buf, size_t size,
                                const char *stderr_line)
{
    const agent_outcome_t *o = &run->outcome;
    const char *said = run->result_text && run->result_text[0] ? run->result_text
                       : run->stream.api_detail[0]           ? run->stream.api_detail
                                                             : stderr_line;
    char status[32] = "";
    if (o->api_status > 0)
        snprintf(status, sizeof status, "HTTP %d", o->api_status);
    switch (o->api_error) {
    case AGENT_API_KEY_REFUSED:
        snprintf(buf, size, "the model API refused the key (%s%s%.300s): %s",
                 status[0] ? status : "refused", said[0] ? ": " : "", said, run->cli->login_hint);
        break;
    case AGENT_API_OVERLOADED: {
        char retries[48] = "";
        if (o->api_retries > 0)
            snprintf(retries, sizeof retries, " through %d retries", o->api_retries);
        snprintf(buf, size, "the model API stayed %s%s%s%s%s%s%.300s",
                 agent_stream_api_error_name(o->api_error, o->api_status), status[0] ? " (" : "",
                 status, status[0] ? ")" : "", retries, said[0] ? ": " : "", said);
        break;
    }
    case AGENT_API_PROMPT_TOO_LONG:
        snprintf(buf, size, "the prompt is too long for the model, even in a fresh session: %.600s",
                 said);
        break;
    case AGENT_API_UNREACHABLE:
        snprintf(buf, size,
                 "the model API could not be reached or broke off mid-answer (%s) after %d "
                 "retries%s%.300s",
                 status[0] ? status : "no HTTP status", o->api_retries, said[0] ? ": " : "", said);
        break;
    case AGENT_API_TOO_SLOW:
        snprintf(buf, size, "the model did not answer within the run's %d s: the agent was "
                            "waiting for it when it was stopped",
                 run->settings->timeout_s);
        break;
    case AGENT_API_OK:
        buf[0] = '\0';
        break;
    }
}

/* Fills the outcome from the last attempt (its proc status and result). */
static void s_fill_outcome(agent_run_t *run)
{
    agent_outcome_t *o = &run->outcome;
    const agent_settings_t *set = run->settings;
    char message[1400];
    message[0] = '\0';
    if (run->proc != NULL) {
        const proc_status_t *st = proc_status(run->proc);
        o->exited = st->exited;
        o->exit_code = st->exit_code;
        o->term_signal = st->term_signal;
        o->timed_out = st->stopped_by == PROC_STOP_TIMEOUT || st->stopped_by == PROC_STOP_NO_OUTPUT;
        s_set_string(&run->stderr_tail, st->stderr_tail);
    }
    json_t *result = run->stream.result;
    o->got_result = result != NULL;
    if (result != NULL) {
        o->is_error = !json_is_false(json_object_get(result, "is_error"));
        s_set_string(&run->subtype, json_string_value(json_object_get(result, "subtype")));
        free(run->result_text);
        run->result_text = s_result_text(result);
        json_t *cost = json_object_get(result, "total_cost_usd");
        o->cost_usd = json_is_number(cost) ? json_number_value(cost) : 0.0;
        o->input_tokens = s_usage(result, "input_tokens");
        o->cache_creation_input_tokens = s_usage(result, "cache_creation_input_tokens");
        o->cache_read_input_tokens = s_usage(result, "cache_read_input_tokens");
        o->output_tokens = s_usage(result, "output_tokens");
        /* Without per-call usage, the run's total is the best (over-)estimate there is. */
        o->context_tokens = agent_stream_input_tokens(json_object_get(result, "usage"));
        int64_t turns = agent_stream_count(json_object_get(result, "num_turns"));
        o->num_turns = turns <= INT_MAX ? (int)turns : INT_MAX;
        o->duration_ms = agent_stream_count(json_object_get(result, "duration_ms"));
    }
    if (run->stream.context_tokens > 0)
        o->context_tokens = run->stream.context_tokens;
    if (result != NULL && run->cli->usage_is_thread_total)
        s_usage_of_this_run(run);
    char stderr_line[512];
    s_last_line(stderr_line, sizeof stderr_line, run->stderr_tail ? run->stderr_tail : "");

    o->ok = o->got_result && !o->is_error && !run->cancelled;
    s_fill_api_error(run);
    o->not_logged_in = !o->ok && !run->cancelled && o->api_error == AGENT_API_OK &&
                       (run->stream.not_logged_in ||
                        run->cli->classify(run->stderr_tail, run->result_text) ==
                            AGENT_FAILURE_NOT_LOGGED_IN);
    if (o->ok) {
        message[0] = '\0';
    } else if (run->cancelled) {
        snprintf(message, sizeof message, "agent run cancelled");
    } else if (o->api_error != AGENT_API_OK) {
        s_api_error_message(run, message, sizeof message, stderr_line);
    } else if (o->not_logged_in) {
        snprintf(message, sizeof message, "%s is not logged in (%.600s): %s", run->cli->name,
                 run->result_text && run->result_text[0] ? run->result_text : stderr_line,
                 run->cli->login_hint);
    } else if (o->got_result) {
        snprintf(message, sizeof message, "agent reported an error (%s): %.1000s",
                 run->subtype && run->subtype[0] ? run->subtype : "no subtype",
                 run->result_text ? run->result_text : "");
    } else if (run->proc != NULL && proc_status(run->proc)->stopped_by == PROC_STOP_TIMEOUT) {
        snprintf(message, sizeof message, "agent timed out after %d s and was killed",
                 set->timeout_s);
    } else if (run->proc != NULL && proc_status(run->proc)->stopped_by == PROC_STOP_NO_OUTPUT) {
        snprintf(message, sizeof message, "agent produced no output for %d s and was killed",
                 set->no_output_timeout_s);
    } else if (o->exited && o->exit_code == 0) {
        snprintf(message, sizeof message, "agent exited without a result");
    } else if (o->exited) {
        snprintf(message, sizeof message, "agent crashed (exit code %d) without a result%s%s",
                 o->exit_code, stderr_line[0] ? ": " : "", stderr_line);
    } else {
        snprintf(message, sizeof message, "agent was killed by signal %d without a result%s%s",
                 o->term_signal, stderr_line[0] ? ": " : "", stderr_line);
    }
    if (!o->ok && (run->error == NULL || run->error[0] == '\0'))
        s_set_string(&run->error, message);
}

/* A new JSON string for `text`, with U+FFFD for each byte that is not UTF-8; NULL on OOM. */
static json_t *s_json_text(const char *text)
{
    return msgjson_string(text, strlen(text));
}

/* Records the run in the session file and history.jsonl. */
static void s_record(agent_run_t *run)
{
    agent_outcome_t *o = &run->outcome;
    const char *name = run->settings->specialist;
    session_state_t *st = &run->state;
    bool have_session = st->session_id[0] != '\0';

    if (have_session && o->got_result) {
        const char *reported = json_string_value(json_object_get(run->stream.result, "session_id"));
        if (reported != NULL && reported[0] != '\0' && strcmp(reported, st->session_id) != 0) {
            /* A CLI that names its sessions is believed: the conversation is where it says. */
            bool exists = run->cli->session_exists != NULL
                              ? run->cli->session_exists(run->settings->workdir, reported)
                              : run->cli->names_sessions;
            if (strlen(reported) < SESSION_ID_SIZE && exists) {
                log_info("agent %s: the CLI continued in session %s (was %s); adopting it", name,
                         reported, st->session_id);
                utf8_copy(st->session_id, sizeof st->session_id, reported);
            } else {
                log_warn("agent %s: ignoring result session id %s: not a session on disk", name,
                         reported);
            }
        }
        st->runs++;
        st->input_tokens +=
            o->input_tokens + o->cache_creation_input_tokens + o->cache_read_input_tokens;
        st->output_tokens += o->output_tokens;
        st->cost_usd += o->cost_usd;
    }
    /* The conversation grew even if the run then failed: keep its size for rotation. */
    if (have_session && o->context_tokens > 0)
        st->context_tokens = o->context_tokens;
    if (have_session) {
        st->last_run_at_ms = clock_wall_ms();
        if (run->stream.cli_version[0] != '\0')
            utf8_copy(st->cli_version, sizeof st->cli_version, run->stream.cli_version);
        if (!run->settings->fork_session && session_save(s_session_key(run->settings), st) != 0)
            log_error("agent %s: cannot save the session: %s", name, failure_message());
        utf8_copy(run->session_id, sizeof run->session_id, st->session_id);
    }

    char *short_text = s_dup_max(run->result_text ? run->result_text : "", AGENT_HISTORY_TEXT_MAX);
    /* The texts that come from outside (task id, agent output, stderr in the error) may not
     * be UTF-8, which a JSON string must be: each stray byte becomes U+FFFD. json_pack()
     * takes these references ("o"). */
    json_t *task_id = run->task_id ? s_json_text(run->task_id) : NULL;
    json_t *subtype = s_json_text(run->subtype ? run->subtype : "");
    json_t *error = s_json_text(run->error ? run->error : "");
    json_t *result = s_json_text(short_text ? short_text : "");
    json_t *entry = json_pack(
        "{s:s, s:o?, s:s, s:s, s:s, s:b, s:b, s:o, s:s, s:f, s:{s:I, s:I, s:I, s:I}, s:I, s:i, "
        "s:I, "
        "s:I, s:i, "
        "s:b, s:b, s:o, s:o, s:i}",
        "kind", "agent_run", "task_id", task_id, "specialist", name, "session_id",
        run->session_id, "mode", o->fresh ? "fresh" : "resumed", "ok", o->ok, "is_error",
        o->is_error, "subtype", subtype, "fresh_reason", run->fresh_reason,
        "cost_usd", o->cost_usd, "usage", "input_tokens", (json_int_t)o->input_tokens,
        "cache_creation_input_tokens", (json_int_t)o->cache_creation_input_tokens,
        "cache_read_input_tokens", (json_int_t)o->cache_read_input_tokens, "output_tokens",
        (json_int_t)o->output_tokens, "context_tokens", (json_int_t)o->context_tokens,
        "num_turns", o->num_turns, "duration_ms", (json_int_t)o->duration_ms, "wall_ms",
        (json_int_t)o->wall_ms, "attempts", o->attempts, "timed_out", o->timed_out, "cancelled",
        run->cancelled, "error", error, "result", result, "replica", run->settings->replica);
    if (entry != NULL && run->settings->fork_session)
        json_object_set_new(entry, "fork_of", json_string(run->fork_of));
    if (entry == NULL || session_history_append(name, entry) != 0)
        log_error("agent %s: cannot append to history: %s", name,
                  entry == NULL ? "entry not encodable" : failure_message());
    json_decref(entry);
    free(short_text);
}

/* Ends the run: outcome, records, lock released. */
static void s_finish(agent_run_t *run, const char *error)
{
    if (error != NULL)
        s_set_string(&run->error, error);
    run->outcome.wall_ms = clock_now_ms() - run->started_ms;
    s_fill_outcome(run);
    if (run->session_chosen)
        s_record(run);
    session_unlock(&run->lock);
    proc_destroy(&run->proc);

    agent_outcome_t *o = &run->outcome;
    o->cancelled = run->cancelled;
    o->error = run->error ? run->error : "";
    o->subtype = run->subtype ? run->subtype : "";
    o->result_text = run->result_text ? run->result_text : "";
    o->stderr_tail = run->stderr_tail ? run->stderr_tail : "";
    o->session_id = run->session_id;
    o->fresh_reason = run->fresh_reason;
    o->fork_of = run->fork_of;
    run->phase = RUN_DONE;
    if (!o->ok)
        log_warn("agent %s: run failed: %s", run->settings->specialist, o->error);
}

/* Why the agent could not start, into buf; a command that is not there says where the
 * command comes from, since that is what the user must change. */
static void s_start_error(char *buf, size_t size)
{
    const char *why = failure_message();
    bool missing = strstr(why, "cannot execute") != NULL;
    snprintf(buf, size, "cannot start the agent: %s%s", why,
             missing ? " — set [agent] command or CLOISTER_AGENT_COMMAND" : "");
}


/* After an attempt ended: recover with another attempt (returns true) or not. */
static bool s_recover(agent_run_t *run)
{
    if (run->cancelled || (run->deadline_ms > 0 && clock_now_ms() >= run->deadline_ms))
        return false;
    json_t *result = run->stream.result;
    if (result != NULL && json_is_false(json_object_get(result, "is_error")))
        return false;
    const proc_status_t *st = proc_status(run->proc);
    char *errors = result ? s_result_text(result) : NULL;
    agent_failure_kind_t failure = run->cli->classify(st->stderr_tail, errors);
    free(errors);
    bool lost = failure == AGENT_FAILURE_SESSION_LOST;
    bool in_use = failure == AGENT_FAILURE_SESSION_IN_USE;
    bool too_long = run->stream.api_error == AGENT_API_PROMPT_TOO_LONG;
    const char *name = run->settings->specialist;
    const char *reason = NULL;

    bool forked = run->fork_of[0] != '\0';
    bool resumed = !run->use_session_id || forked;
    if (lost && resumed && !run->retried_lost) {
        run->retried_lost = true;
        reason = "context lost";
    } else if (too_long && !run->retried_too_long) {
        /* The conversation outgrew the model: a fresh session, with the prompt alone. */
        run->retried_too_long = true;
        reason = "prompt too long";
    } else if (in_use && run->use_session_id && !forked && !run->retried_in_use_resume) {
        run->retried_in_use_resume = true;
        log_info("agent %s: session %s already exists; resuming it", name, run->state.session_id);
        run->use_session_id = false;
    } else if (in_use && !run->use_session_id && !run->retried_in_use_new) {
        run->retried_in_use_new = true;
        reason = "session in use";
    } else {
        return false;
    }
    proc_destroy(&run->proc);
    if (reason != NULL && s_fresh_session(run, reason) != 0) {
        s_finish(run, failure_message());
        return true;
    }
    if (s_spawn(run) != 0) {
        char error[1200];
        s_start_error(error, sizeof error);
        s_finish(run, error);
    }
    return true;
}

/* ---------------------------------------------------------------------------------------
 * The public API. */

int agent_run_start(agent_run_t **run_p, const agent_settings_t *settings, const char *prompt,
                    const char *task_id, agent_progress_fn *progress, void *progress_arg)
{
    *run_p = NULL;
    if (settings == NULL || !session_name_valid(settings->specialist) ||
        (settings->session != NULL && !session_name_valid(settings->session)))
        return failure_set(FAILURE_INVALID, "agent: invalid specialist name");
    if (settings->workdir == NULL || settings->workdir[0] != '/' ||
        strlen(settings->workdir) >= SESSION_CWD_SIZE)
        return failure_set(FAILURE_INVALID, "agent %s: workdir must be an absolute path",
                           settings->specialist);
    if (prompt == NULL)
        return failure_set(FAILURE_INVALID, "agent %s: no prompt", settings->specialist);
    const agent_cli_t *cli = agent_cli_find(settings->cli);
    if (cli == NULL)
        return failure_set(FAILURE_INVALID, "agent %s: unknown agent CLI '%s' (claude, codex, gemini)",
                           settings->specialist, settings->cli);
    agent_run_t *run = calloc(1, sizeof *run);
    if (run == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    run->settings = settings;
    run->cli = cli;
    run->stream.on_event = cli->read_event;
    run->prompt = strdup(prompt);
    run->task_id = task_id ? strdup(task_id) : NULL;
    if (run->prompt == NULL || (task_id != NULL && run->task_id == NULL)) {
        agent_run_destroy(&run);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    run->progress = progress;
    run->progress_arg = progress_arg;
    run->stream.progress = progress;
    run->stream.progress_arg = progress_arg;
    run->stream.name = settings->specialist;
    run->phase = RUN_WAIT_LOCK;
    run->started_ms = clock_now_ms();
    if (settings->timeout_s > 0)
        run->deadline_ms = run->started_ms + (int64_t)settings->timeout_s * 1000;
    *run_p = run;
    return 0;
}

/* Chooses the session and starts the first attempt. */
static void s_begin_agent(agent_run_t *run)
{
    proc_destroy(&run->proc); /* the login check's, if there was one */
    run->session_chosen = true;
    if (s_choose_session(run) != 0) {
        char error[1200];
        snprintf(error, sizeof error, "cannot save the session: %s", failure_message());
        s_finish(run, error);
        return;
    }
    utf8_copy(run->session_id, sizeof run->session_id, run->state.session_id);
    run->phase = RUN_AGENT;
    if (s_spawn(run) != 0) {
        char error[1200];
        s_start_error(error, sizeof error);
        s_finish(run, error);
    }
}

/* The WAIT_LOCK phase: try the lock; once held, check the login (if the CLI has a check),
 * choose the session and spawn. */
static void s_step_lock(agent_run_t *run, int timeout_ms)
{
    const char *name = run->settings->specialist;
    if (run->cancelled) {
        s_finish(run, NULL);
        return;
    }
    /* A fork changes no stored state, so it needs no lock and may overlap other runs. */
    int rc = run->settings->fork_session ? 0
                                         : session_lock_try(&run->lock, s_session_key(run->settings));
    if (rc == FAILURE_STATE) {
        int64_t now = clock_now_ms();
        if (run->deadline_ms > 0 && now >= run->deadline_ms) {
            char error[256];
            snprintf(error, sizeof error,
                     "specialist %s stayed busy (locked by another run) for %d s", name,
                     run->settings->timeout_s);
            s_finish(run, error);
            return;
        }
        int64_t wait = AGENT_LOCK_RETRY_MS;
        if (timeout_ms >= 0 && timeout_ms < wait)
            wait = timeout_ms;
        if (run->deadline_ms > 0 && run->deadline_ms - now < wait)
            wait = run->deadline_ms - now;
        poll(NULL, 0, (int)wait);
        return;
    }
    if (rc != 0) {
        s_finish(run, failure_message());
        return;
    }
    /* Before the session is touched: a run that cannot log in leaves it as it was. */
    int checking = s_start_login_check(run);
    if (checking < 0) {
        char error[1200];
        s_start_error(error, sizeof error);
        s_finish(run, error);
    } else if (checking == 0) {
        s_begin_agent(run);
    }
}

/* The LOGIN_CHECK phase: once the check is over, the agent starts, or the run fails
 * saying the CLI is not logged in. */
static void s_step_login_check(agent_run_t *run, int timeout_ms)
{
    int rc = proc_step(run->proc, timeout_ms);
    if (rc == 0)
        return;
    if (rc < 0) {
        s_finish(run, failure_message());
        return;
    }
    const proc_status_t *st = proc_status(run->proc);
    if (run->cancelled) {
        s_finish(run, NULL);
        return;
    }
    if (!st->exited || st->exit_code != 0) {
        char said[512], error[1200];
        s_last_line(said, sizeof said, run->login_output[0] ? run->login_output : st->stderr_tail);
        if (st->exited)
            snprintf(error, sizeof error, "%s is not logged in (its login check says: %s): %s",
                     run->cli->name, said[0] ? said : "nothing", run->cli->login_hint);
        else
            snprintf(error, sizeof error, "%s's login check did not finish: %s", run->cli->name,
                     said[0] ? said : "no answer");
        run->outcome.not_logged_in = st->exited;
        run->session_chosen = true; /* no session, but a line in the history */
        s_finish(run, error);
        return;
    }
    s_begin_agent(run);
}

/* The AGENT phase: drive the process; after a result, allow result_grace_ms to exit. */
static void s_step_agent(agent_run_t *run, int timeout_ms)
{
    int grace = run->settings->result_grace_ms > 0 ? run->settings->result_grace_ms
                                                   : AGENT_DEFAULT_RESULT_GRACE_MS;
    if (run->result_at_ms > 0 && !run->result_stop_sent) {
        int64_t left = run->result_at_ms + grace - clock_now_ms();
        if (left <= 0) {
            log_warn("agent %s: still running %d ms after its result; stopping it",
                     run->settings->specialist, grace);
            proc_stop(run->proc, PROC_STOP_REQUESTED);
            run->result_stop_sent = true;
        } else if (timeout_ms < 0 || left < timeout_ms) {
            timeout_ms = (int)left;
        }
    }
    int rc = proc_step(run->proc, timeout_ms);
    if (rc < 0) {
        s_finish(run, failure_message());
        return;
    }
    if (rc == 1 && !s_recover(run))
        s_finish(run, NULL);
}

int agent_run_step(agent_run_t *run, int timeout_ms)
{
    if (run->phase != RUN_DONE && !run->cancelled && atomic_load(&run->cancel_requested)) {
        run->cancelled = true;
        if (run->proc != NULL)
            proc_stop(run->proc, PROC_STOP_REQUESTED);
    }
    if (run->phase == RUN_WAIT_LOCK)
        s_step_lock(run, timeout_ms);
    else if (run->phase == RUN_LOGIN_CHECK)
        s_step_login_check(run, timeout_ms);
    else if (run->phase == RUN_AGENT)
        s_step_agent(run, timeout_ms);
    return run->phase == RUN_DONE ? 1 : 0;
}

void agent_run_cancel(agent_run_t *run)
{
    atomic_store(&run->cancel_requested, true);
}

const agent_outcome_t *agent_run_outcome(const agent_run_t *run)
{
    return run->phase == RUN_DONE ? &run->outcome : NULL;
}

int agent_run_pid(const agent_run_t *run)
{
    return run->proc != NULL && proc_status(run->proc)->running ? (int)proc_pid(run->proc) : -1;
}

int agent_run(agent_run_t **run_p, const agent_settings_t *settings, const char *prompt,
              const char *task_id, agent_progress_fn *progress, void *progress_arg)
{
    int rc = agent_run_start(run_p, settings, prompt, task_id, progress, progress_arg);
    if (rc != 0)
        return rc;
    while (agent_run_step(*run_p, -1) == 0) {
    }
    return 0;
}

void agent_run_destroy(agent_run_t **run_p)
{
    if (run_p == NULL || *run_p == NULL)
        return;
    agent_run_t *run = *run_p;
    *run_p = NULL;
    proc_destroy(&run->proc);
    session_unlock(&run->lock);
    agent_stream_reset(&run->stream);
    free(run->prompt);
    free(run->task_id);
    free(run->error);
    free(run->subtype);
    free(run->result_text);
    free(run->stderr_tail);
    free(run);
}
