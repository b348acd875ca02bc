/* pan_run: running pan and reading its answer (see pan_run.h). */
#include "pan_run.h"

#include "failure.h"
#include "proc.h"

#include <stdlib.h>
#include <string.h>

/* Arguments before the command's own: pan and the three endpoints. */
#define FIXED_ARGS 7
#define MAX_ARGS 64

typedef struct {
    char *data;
    size_t len;
    bool full;
} output_t;

static int s_on_line(void *arg, const char *line, size_t len)
{
    output_t *out = arg;
    if (out->full || out->len + len + 1 > PAN_RUN_MAX_OUTPUT) {
        out->full = true;
        return 0;
    }
    char *grown = realloc(out->data, out->len + len + 2);
    if (grown == NULL) {
        out->full = true;
        return 0;
    }
    out->data = grown;
    memcpy(out->data + out->len, line, len);
    out->len += len;
    out->data[out->len++] = '\n';
    out->data[out->len] = '\0';
    return 0;
}

/* Every JSON value in `text`, one after the other (pan prints one per line, or one
 * indented value). Returns a new array. */
static json_t *s_parse_values(const char *text, size_t len)
{
    json_t *values = json_array();
    size_t at = 0;
    while (at < len) {
        while (at < len && (text[at] == '\n' || text[at] == ' '))
            at++;
        if (at >= len)
            break;
        json_error_t error;
        json_t *value =
            json_loadb(text + at, len - at, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &error);
        if (value == NULL || error.position <= 0)
            break;
        json_array_append_new(values, value);
        at += (size_t)error.position;
    }
    return values;
}

/* Keeps the last lines of pan's stderr that fit, without the trailing newline. */
static void s_keep_error(pan_run_t *run, const char *tail)
{
    size_t len = strlen(tail);
    while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == ' '))
        len--;
    size_t from = len > sizeof run->error - 1 ? len - (sizeof run->error - 1) : 0;
    snprintf(run->error, sizeof run->error, "%.*s", (int)(len - from), tail + from);
}

int pan_run(const pan_run_settings_t *settings, const char *const *args, int timeout_s,
            pan_run_t *run)
{
    *run = (pan_run_t){.exit_code = -1};
    const char *argv[MAX_ARGS + FIXED_ARGS + 1] = {settings->pan,         "--control",
                                                   settings->control_ep, "--events",
                                                   settings->events_ep,   "--in",
                                                   settings->in_ep};
    size_t n = FIXED_ARGS;
    for (size_t i = 0; args[i] != NULL && i < MAX_ARGS; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    output_t out = {0};
    proc_options_t options = {
        .argv = (char *const *)argv,
        .on_line = s_on_line,
        .on_line_arg = &out,
        .timeout_ms = (int64_t)timeout_s * 1000,
        .stderr_cap = sizeof run->error,
    };
    proc_t *proc = NULL;
    int rc = proc_run(&proc, &options);
    if (rc != 0) {
        snprintf(run->error, sizeof run->error, "cannot run %s: %s", settings->pan,
                 failure_message());
        free(out.data);
        return rc;
    }
    const proc_status_t *status = proc_status(proc);
    s_keep_error(run, status->stderr_tail);
    if (status->stopped_by == PROC_STOP_TIMEOUT)
        rc = failure_set(FAILURE_TIMEOUT, "pan did not answer within %d s", timeout_s);
    else if (!status->exited)
        rc = failure_set(FAILURE_IO, "pan ended by signal %d", status->term_signal);
    else
        run->exit_code = status->exit_code;
    if (rc != 0)
        snprintf(run->error, sizeof run->error, "%s", failure_message());
    run->values = s_parse_values(out.data ? out.data : "", out.len);
    proc_destroy(&proc);
    free(out.data);
    return rc;
}

json_t *pan_run_answer(const pan_run_t *run)
{
    size_t n = json_array_size(run->values);
    return n > 0 ? json_array_get(run->values, n - 1) : NULL;
}

void pan_run_clear(pan_run_t *run)
{
    json_decref(run->values);
    run->values = NULL;
}
