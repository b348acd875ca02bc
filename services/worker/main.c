/* cloister-worker: the generic specialist. Runs one command per task on the specialist
 * skeleton (common/specialist/specialist.h).
 *
 *   cloister-worker --specialist NAME [--in EP] [--bind EP] [--advertise EP]
 *                   [--heartbeat-ms N] [--timeout S] [--grace-ms N] [--worker-id ID]
 *                   -- CMD [ARGS...]
 *
 * Per task, CMD runs once (argv, no shell) in its own process group:
 *  - stdin: the task as one JSON object (id, attempt, specialist, priority, source, title,
 *    issue, group, max_attempts, timeout_s, payload, context) and a newline, then EOF;
 *  - environment: CLOISTER_TASK_ID, CLOISTER_TASK_ATTEMPT, CLOISTER_SPECIALIST,
 *    CLOISTER_PRIORITY, CLOISTER_TITLE, CLOISTER_ISSUE, and from the payload when present
 *    CLOISTER_WORKSPACE, CLOISTER_BRANCH, CLOISTER_TARGET, CLOISTER_PR_URL (inherited
 *    values of these names are removed);
 *  - stdout: every line is forwarded as a progress event of kind "output" (a NUL byte in
 *    it becomes U+FFFD, a CRLF line end is a line end); lines `KEY: value` (UPPER_SNAKE
 *    keys, as in the agents' result markers, common/agent/markers.h) become fields of the result
 *    map (the last value wins; a key with `- item` lines becomes an array); a line
 *    `NEXT: {json}` adds a next task, a JSON object with the `submit` fields (id and
 *    specialist required), committed by the broker together with this task's result (an
 *    invalid one is reported as progress of kind "info" and skipped);
 *  - exit status 0 is `done`; anything else is `failed`, with the exit code (or signal)
 *    and the last non-empty line of stderr in `error`. The result map also has
 *    `exit_code` and `duration_ms`.
 * A cancel, the task's timeout (--timeout is the default when a task has none) or SIGTERM
 * stops the command: SIGTERM to its group, SIGKILL half the --grace-ms later (default 5000
 * ms, so 2500 ms; at least 200 ms), so the command is gone before the skeleton's grace for
 * the job runs out, even when it ignores SIGTERM.
 *
 * Settings: the flags, else $PANOPTICON_HOME/cloister.toml (common/base/config.h) like every
 * specialist: [broker] in (CLOISTER_IN overrides it), heartbeat_ms and heartbeat_misses,
 * and [specialists.NAME] timeout as the default --timeout.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad
 * config, bind failed), 3 when a command could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "log.h"
#include "markers.h"
#include "msgjson.h"
#include "proc.h"
#include "specialist.h"
#include "specialist_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often a running command is checked for cancellation, in ms. */
#define WORKER_CANCEL_CHECK_MS 50
/* Stdout kept for marker parsing; beyond it the oldest half is dropped. */
#define WORKER_MARKER_TEXT_CAP (1024 * 1024)
/* The most bytes of the stderr line quoted in the error of a failed command. */
#define WORKER_STDERR_QUOTE 2000
/* The shortest --grace-ms: half of it goes to the command between SIGTERM and SIGKILL,
 * the rest covers noticing the stop and reaping. */
#define WORKER_MIN_GRACE_MS 200
/* What a NUL byte in the command's stdout becomes: U+FFFD, the replacement character. */
#define WORKER_NUL_REPLACEMENT "\xEF\xBF\xBD"

typedef struct {
    char **argv;       /* the command after "--", in main's argv */
    int kill_grace_ms; /* SIGTERM to SIGKILL when stopping the command */
} worker_t;

/* One command run. */
typedef struct {
    specialist_ctx_t *ctx;
    char *text; /* stdout lines for the marker parser */
    size_t len;
    size_t cap;
} worker_run_t;

static const char s_usage[] =
    "usage: cloister-worker --specialist NAME [--in EP] [--bind EP] [--advertise EP]\n"
    "                       [--heartbeat-ms N] [--timeout S] [--grace-ms N]\n"
    "                       [--worker-id ID] -- CMD [ARGS...]\n"
    "Runs CMD once per task of specialist NAME: the task as JSON on stdin, its fields\n"
    "in CLOISTER_* variables, stdout lines as progress, `KEY: value` lines into the\n"
    "result, `NEXT: {json submit}` lines as next tasks, exit 0 = done.\n"
    "Endpoint, heartbeat and timeout not given as flags come from CLOISTER_IN and\n"
    "$PANOPTICON_HOME/cloister.toml ([broker], [specialists.NAME] timeout).\n"
    "A stopped command (cancel, timeout, shutdown) gets SIGTERM, then SIGKILL after\n"
    "half of --grace-ms (default 5000, at least 200).\n";

static void s_keep_text(worker_run_t *run, const char *line, size_t len)
{
    if (len + 1 > WORKER_MARKER_TEXT_CAP)
        return;
    if (run->len > 0 && run->len + len + 2 > WORKER_MARKER_TEXT_CAP) {
        /* Markers come last: keep the newer half, from a line start. */
        size_t drop = run->len / 2 + 1;
        while (drop < run->len && run->text[drop - 1] != '\n')
            drop++;
        memmove(run->text, run->text + drop, run->len - drop);
        run->len -= drop;
    }
    if (run->len + len + 2 > run->cap) {
        size_t cap = run->cap ? run->cap : 4096;
        while (cap < run->len + len + 2)
            cap *= 2;
        char *text = realloc(run->text, cap);
        if (text == NULL)
            return;
        run->text = text;
        run->cap = cap;
    }
    memcpy(run->text + run->len, line, len);
    run->len += len;
    run->text[run->len++] = '\n';
    run->text[run->len] = '\0';
}

static void s_next_line(worker_run_t *run, const char *json_text)
{
    json_error_t error;
    json_t *submit = json_loads(json_text, 0, &error);
    int rc = submit == NULL
                 ? failure_set(FAILURE_INVALID, "not JSON: %s", error.text)
                 : specialist_result_next(run->ctx, submit);
    if (rc != 0)
        specialist_progressf(run->ctx, "info", "NEXT line refused: %s", failure_message());
    json_decref(submit);
}

/* A malloc'd copy of the `len` bytes at `line` with every NUL byte replaced by U+FFFD, so
 * the line is one C string (a NUL would end the progress text and, kept for the marker
 * parser, hide every line after it). Its length goes to *out_len. NULL on OOM. */
static char *s_clean_line(const char *line, size_t len, size_t *out_len)
{
    size_t nuls = 0;
    for (size_t i = 0; i < len; i++)
        nuls += line[i] == '\0';
    char *clean = malloc(len + 2 * nuls + 1);
    if (clean == NULL)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '\0') {
            memcpy(clean + n, WORKER_NUL_REPLACEMENT, 3);
            n += 3;
        } else {
            clean[n++] = line[i];
        }
    }
    clean[n] = '\0';
    *out_len = n;
    return clean;
}

static int s_on_line(void *arg, const char *raw, size_t raw_len)
{
    worker_run_t *run = arg;
    while (raw_len > 0 && raw[raw_len - 1] == '\r') /* a CRLF line end */
        raw_len--;
    size_t len = 0;
    char *line = s_clean_line(raw, raw_len, &len);
    if (line == NULL) {
        log_warn("out of memory: a line of the command's output was dropped");
        return 0;
    }
    specialist_progress(run->ctx, "output", line);
    if (strncmp(line, "NEXT:", 5) == 0)
        s_next_line(run, line + 5);
    else
        s_keep_text(run, line, len);
    free(line);
    return 0;
}

/* Copies the markers found in the command's stdout into the result map. */
static void s_collect_markers(worker_run_t *run)
{
    if (run->text == NULL)
        return;
    markers_t *markers = NULL;
    if (markers_parse_all(&markers, run->text) != 0)
        return;
    for (size_t i = 0; i < markers_count(markers); i++) {
        const char *key = markers_key_at(markers, i);
        const char *value = markers_value_at(markers, i);
        size_t n = 0;
        const char *const *items = value[0] == '\0' ? markers_list(markers, key, &n) : NULL;
        if (n > 0) {
            json_t *array = json_array();
            for (size_t j = 0; j < n; j++)
                json_array_append_new(array, json_string_nocheck(items[j]));
            specialist_result_json(run->ctx, key, array);
            json_decref(array);
        } else {
            specialist_result_str(run->ctx, key, value);
        }
    }
    markers_destroy(&markers);
}

/* "NAME=value" for the environment, appended to env (at most `max` entries). */
static void s_env_add(char **env, size_t *n, const char *name, const char *value)
{
    if (value == NULL || value[0] == '\0')
        return;
    char *entry = NULL;
    if (asprintf(&entry, "%s=%s", name, value) >= 0)
        env[(*n)++] = entry;
}

static bool s_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The last non-empty line of the stderr tail, without its surrounding blanks and cut to at
 * most WORKER_STDERR_QUOTE bytes (never inside a UTF-8 character), into `out` (at least
 * WORKER_STDERR_QUOTE + 1 bytes); "" when stderr had no such line. */
static void s_stderr_quote(char *out, const char *tail)
{
    const char *end = tail + strlen(tail);
    while (end > tail && s_is_blank(end[-1]))
        end--;
    const char *start = end;
    while (start > tail && start[-1] != '\n')
        start--;
    /* The tail may begin inside a character: skip its continuation bytes. */
    while (start < end && (s_is_blank(*start) || ((unsigned char)*start & 0xC0) == 0x80))
        start++;
    size_t len = (size_t)(end - start);
    if (len > WORKER_STDERR_QUOTE)
        len = WORKER_STDERR_QUOTE;
    memcpy(out, start, len);
    out[len] = '\0';
    out[msgjson_utf8_cut(out, len)] = '\0';
}

static specialist_outcome_t s_job(specialist_ctx_t *ctx, void *arg)
{
    const worker_t *worker = arg;
    const specialist_task_t *task = specialist_task(ctx);
    static const char *const env_names[] = {
        "CLOISTER_TASK_ID", "CLOISTER_TASK_ATTEMPT", "CLOISTER_SPECIALIST", "CLOISTER_PRIORITY",
        "CLOISTER_TITLE",   "CLOISTER_ISSUE",        "CLOISTER_WORKSPACE",  "CLOISTER_BRANCH",
        "CLOISTER_TARGET",  "CLOISTER_PR_URL",       NULL};
    char *env[16] = {NULL};
    size_t nenv = 0;
    char attempt[32];
    snprintf(attempt, sizeof attempt, "%lld", (long long)task->attempt);
    s_env_add(env, &nenv, "CLOISTER_TASK_ID", task->id);
    s_env_add(env, &nenv, "CLOISTER_TASK_ATTEMPT", attempt);
    s_env_add(env, &nenv, "CLOISTER_SPECIALIST", task->specialist);
    s_env_add(env, &nenv, "CLOISTER_PRIORITY", task->priority);
    s_env_add(env, &nenv, "CLOISTER_TITLE", task->title);
    s_env_add(env, &nenv, "CLOISTER_ISSUE", task->issue);
    s_env_add(env, &nenv, "CLOISTER_WORKSPACE", specialist_payload_str(ctx, "workspace"));
    s_env_add(env, &nenv, "CLOISTER_BRANCH", specialist_payload_str(ctx, "branch"));
    s_env_add(env, &nenv, "CLOISTER_TARGET", specialist_payload_str(ctx, "target"));
    s_env_add(env, &nenv, "CLOISTER_PR_URL", specialist_payload_str(ctx, "prUrl"));

    char *input = json_dumps(task->json, JSON_COMPACT);
    char *stdin_text = NULL;
    if (input == NULL || asprintf(&stdin_text, "%s\n", input) < 0)
        stdin_text = NULL;
    free(input);

    worker_run_t run = {.ctx = ctx};
    proc_options_t options = {
        .argv = worker->argv,
        .env_remove = env_names,
        .env_set = (const char *const *)env,
        .stdin_data = stdin_text,
        .stdin_len = stdin_text ? strlen(stdin_text) : 0,
        .on_line = s_on_line,
        .on_line_arg = &run,
        .kill_grace_ms = worker->kill_grace_ms,
    };
    specialist_outcome_t outcome = SPECIALIST_FAILED;
    proc_t *proc = NULL;
    if (stdin_text == NULL) {
        specialist_result_error(ctx, "out of memory preparing the command's input");
        goto out;
    }
    if (proc_start(&proc, &options) != 0) {
        specialist_result_error(ctx, "cannot run %s: %s", worker->argv[0], failure_message());
        goto out;
    }
    specialist_watch_child(ctx, proc_pid(proc));
    bool stopping = false;
    int rc;
    while ((rc = proc_step(proc, WORKER_CANCEL_CHECK_MS)) == 0) {
        if (!stopping && specialist_cancelled(ctx)) {
            proc_stop(proc, PROC_STOP_REQUESTED);
            stopping = true;
        }
    }
    if (rc < 0) {
        specialist_result_error(ctx, "watching the command failed: %s", failure_message());
        goto out;
    }
    specialist_watch_child(ctx, 0);
    const proc_status_t *status = proc_status(proc);
    s_collect_markers(&run);
    specialist_result_int(ctx, "duration_ms", status->duration_ms);
    char quote[WORKER_STDERR_QUOTE + 1];
    s_stderr_quote(quote, status->stderr_tail ? status->stderr_tail : "");
    if (status->exited) {
        specialist_result_int(ctx, "exit_code", status->exit_code);
        if (status->exit_code == 0 && !stopping) {
            outcome = SPECIALIST_DONE;
        } else if (stopping) {
            specialist_result_error(ctx, "command stopped (exit code %d)", status->exit_code);
        } else {
            specialist_result_error(ctx, "exit code %d%s%s", status->exit_code,
                                    quote[0] ? ": " : "", quote);
        }
    } else {
        specialist_result_int(ctx, "signal", status->term_signal);
        specialist_result_error(ctx, "%s by signal %d%s%s",
                                stopping ? "command stopped" : "killed", status->term_signal,
                                quote[0] ? ": " : "", quote);
    }
out:
    specialist_watch_child(ctx, 0);
    proc_destroy(&proc);
    free(stdin_text);
    free(run.text);
    for (size_t i = 0; i < nenv; i++)
        free(env[i]);
    return outcome;
}

int main(int argc, char **argv)
{
    log_init("cloister-worker", LOG_LEVEL_INFO);
    worker_t worker = {0};
    const specialist_args_t args = {
        .program = "cloister-worker",
        .usage = s_usage,
        .timeout_flag = true,
        .command = &worker.argv,
    };
    specialist_config_t settings = {0};
    int code;
    if (!specialist_args_parse(&args, argc, argv, &settings, &code))
        return code;
    if (settings.grace_ms != 0 && settings.grace_ms < WORKER_MIN_GRACE_MS) {
        fprintf(stderr, "cloister-worker: --grace-ms must be at least %d\n%s",
                WORKER_MIN_GRACE_MS, s_usage);
        return SPECIALIST_ARGS_EXIT_USAGE;
    }
    worker.kill_grace_ms =
        (settings.grace_ms ? settings.grace_ms : SPECIALIST_DEFAULT_GRACE_MS) / 2;

    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    int applied = specialist_args_apply_config(&settings, config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        config_destroy(&config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }
    code = specialist_run(&settings, s_job, &worker, NULL);
    config_destroy(&config);
    return code;
}
