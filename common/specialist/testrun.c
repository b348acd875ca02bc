/* testrun: running a test command (on common/agent/proc), its output parsed by
 * testparse. */
#include "testrun.h"

#include "failure.h"
#include "proc.h"
#include "sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The output kept while the command runs: a buffer of twice the cap; when full, the last
 * `cap` bytes move to the front, so appending stays cheap and the tail is always there. */
typedef struct {
    char *buf;
    size_t len;
    size_t cap;
    bool truncated;
} s_tail_t;

static void s_tail_append(s_tail_t *tail, const char *data, size_t len)
{
    if (len > tail->cap) {
        data += len - tail->cap;
        len = tail->cap;
        tail->truncated = true;
    }
    if (tail->len + len > 2 * tail->cap) {
        size_t keep = tail->cap - len;
        memmove(tail->buf, tail->buf + tail->len - keep, keep);
        tail->len = keep;
        tail->truncated = true;
    }
    memcpy(tail->buf + tail->len, data, len);
    tail->len += len;
}

struct testrun_t {
    proc_t *proc;          /* NULL when it could not start or watching it failed */
    testrun_owner_t owner;
    testrun_line_fn *on_line;
    void *on_line_arg;
    s_tail_t tail;
    int code;        /* why it did not start (or watching failed), or 0 */
    char error[256]; /* the reason for `code` */
    bool cancelled;
    bool done; /* reaped, or never started */
};

static int s_on_line(void *arg, const char *line, size_t len)
{
    testrun_t *self = arg;
    s_tail_append(&self->tail, line, len);
    s_tail_append(&self->tail, "\n", 1);
    if (self->on_line)
        self->on_line(self->on_line_arg, line, len);
    return 0;
}

/* The run has ended (reaped, never started, or given up on): the job no longer watches. */
static void s_done(testrun_t *self)
{
    if (self->owner.watch && self->proc)
        self->owner.watch(self->owner.arg, 0);
    self->done = true;
}

int testrun_start(testrun_t **run_p, const testrun_options_t *options)
{
    *run_p = NULL;
    if (!options || !options->command || !options->command[0])
        return failure_set(FAILURE_INVALID, "testrun: no test command");
    size_t cap = options->output_cap ? options->output_cap : TESTRUN_DEFAULT_OUTPUT_CAP;
    testrun_t *self = calloc(1, sizeof *self);
    /* The shell merges stderr into stdout, so the two stay in order in one stream. */
    size_t script_len = strlen("exec 2>&1\n") + strlen(options->command) + 1;
    char *script = malloc(script_len);
    if (self)
        self->tail = (s_tail_t){.buf = malloc(2 * cap + 1), .cap = cap};
    if (!self || !self->tail.buf || !script) {
        if (self)
            free(self->tail.buf);
        free(self);
        free(script);
        return failure_set(FAILURE_MEMORY, "testrun: out of memory");
    }
    self->owner = options->owner;
    self->on_line = options->on_line;
    self->on_line_arg = options->on_line_arg;
    snprintf(script, script_len, "exec 2>&1\n%s", options->command);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    char **wrapped = NULL;
    int rc = 0;
    if (options->sandbox != NULL)
        rc = sandbox_wrap(options->sandbox, options->dir ? options->dir : ".", options->network,
                          argv, &wrapped);
    if (rc != 0) {
        free(script);
        *run_p = self;
        self->code = rc;
        snprintf(self->error, sizeof self->error, "%s", failure_message());
        s_done(self);
        return rc;
    }
    /* Runners print plain, non-interactive output when they see CI and no colour. */
    static const char *const env_set[] = {"CI=true", "NO_COLOR=1", "FORCE_COLOR=0", NULL};
    proc_options_t po = {
        .argv = wrapped ? wrapped : argv,
        .cwd = options->dir,
        .env_keep = options->sandbox ? sandbox_env_keep(options->sandbox) : NULL,
        .env_set = env_set,
        .on_line = s_on_line,
        .on_line_arg = self,
        .timeout_ms = options->timeout_ms,
        .kill_grace_ms = options->kill_grace_ms,
        .max_line = cap,
    };
    rc = proc_start(&self->proc, &po);
    sandbox_argv_free(&wrapped);
    free(script);
    *run_p = self;
    if (rc != 0) {
        self->code = rc;
        snprintf(self->error, sizeof self->error, "%s", failure_message());
        s_done(self);
        return rc;
    }
    if (self->owner.watch)
        self->owner.watch(self->owner.arg, proc_pid(self->proc));
    return 0;
}

int testrun_step(testrun_t *self, int timeout_ms)
{
    if (self->done)
        return 1;
    if (self->owner.cancelled && (timeout_ms < 0 || timeout_ms > TESTRUN_JOB_STEP_MS))
        timeout_ms = TESTRUN_JOB_STEP_MS;
    int rc = proc_step(self->proc, timeout_ms);
    if (rc < 0) {
        self->code = rc;
        snprintf(self->error, sizeof self->error, "watching the test command failed: %s",
                 failure_message());
        s_done(self);
        proc_destroy(&self->proc); /* kills the group */
        return rc;
    }
    if (rc == 1) {
        s_done(self);
        return 1;
    }
    if (self->owner.cancelled && self->owner.cancelled(self->owner.arg))
        testrun_cancel(self);
    return 0;
}

void testrun_cancel(testrun_t *self)
{
    if (self->done || self->cancelled)
        return;
    self->cancelled = true;
    proc_stop(self->proc, PROC_STOP_REQUESTED);
}

pid_t testrun_pgid(const testrun_t *self)
{
    return self->done ? 0 : proc_pid(self->proc);
}

/* The result of a run that started and was reaped: its status, and the output (the tail
 * buffer, which the result takes over) parsed. */
static int s_result_from_proc(testrun_result_t **out, testrun_t *self)
{
    testrun_result_t *r = testparse_result_new();
    if (!r)
        return failure_set(FAILURE_MEMORY, "testrun: out of memory");
    const proc_status_t *st = proc_status(self->proc);
    r->started = true;
    r->exit_code = st->exited ? st->exit_code : -1;
    r->term_signal = st->exited ? 0 : st->term_signal;
    r->timed_out = st->stopped_by == PROC_STOP_TIMEOUT;
    r->cancelled = st->stopped_by == PROC_STOP_REQUESTED;
    r->duration_ms = st->duration_ms;
    /* Keep exactly the last `cap` bytes. */
    s_tail_t *tail = &self->tail;
    size_t start = tail->len > tail->cap ? tail->len - tail->cap : 0;
    memmove(tail->buf, tail->buf + start, tail->len - start);
    tail->len -= start;
    tail->buf[tail->len] = '\0';
    r->output = tail->buf;
    r->output_len = tail->len;
    r->output_truncated = tail->truncated || start > 0;
    tail->buf = NULL;
    int rc = testparse_into(r, r->output, r->output_len);
    if (rc != 0) {
        testrun_result_destroy(&r);
        return rc;
    }
    *out = r;
    return 0;
}

int testrun_finish(testrun_t **self_p, testrun_result_t **out)
{
    *out = NULL;
    testrun_t *self = *self_p;
    *self_p = NULL;
    testrun_cancel(self);
    while (testrun_step(self, -1) == 0)
        ;
    int rc = self->code;
    testrun_result_t *r = NULL;
    if (rc != 0) {
        /* Not started: no output, `error` says why. */
        if (testrun_parse(&r, "", 0) == 0) {
            snprintf(r->error, sizeof r->error, "%s", self->error);
            failure_set(rc, "%s", self->error);
        } else {
            rc = FAILURE_MEMORY;
        }
    } else {
        rc = s_result_from_proc(&r, self);
    }
    proc_destroy(&self->proc);
    free(self->tail.buf);
    free(self);
    *out = r;
    return rc;
}

int testrun_run(testrun_result_t **out, const testrun_options_t *options)
{
    *out = NULL;
    testrun_t *run = NULL;
    int rc = testrun_start(&run, options);
    if (!run)
        return rc;
    while (testrun_step(run, -1) == 0)
        ;
    return testrun_finish(&run, out);
}

