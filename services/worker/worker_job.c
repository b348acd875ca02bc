/* worker_job: one task of the generic specialist (see worker_job.h). */
#include "worker_job.h"

#include "failure.h"
#include "log.h"
#include "markers.h"
#include "msgjson.h"
#include "proc.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often a running command is checked for cancellation, in ms. */
#define WORKER_CANCEL_CHECK_MS 50
/* Stdout kept for marker parsing; beyond it the oldest half is dropped. */
#define WORKER_MARKER_TEXT_CAP (1024 * 1024)
/* The most bytes of the stderr line quoted in the error of a failed command. */
#define WORKER_STDERR_QUOTE 2000
/* What a NUL byte in the command's stdout becomes: U+FFFD, the replacement character. */
#define WORKER_NUL_REPLACEMENT "\xEF\xBF\xBD"


/* One command run. */
typedef struct {
    specialist_ctx_t *ctx;
    char *text; /* stdout lines for the marker parser */
    size_t len;
    size_t cap;
} worker_run_t;

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
    out[utf8_cut(out, len)] = '\0';
}

specialist_outcome_t worker_job(specialist_ctx_t *ctx, void *arg)
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
