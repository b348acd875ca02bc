/* test_suite: a cancellable, progress-forwarding run of a test command (see test_suite.h).
 *
 * Why not testrun_run(): it blocks until the command ends, with no way to stop it when
 * the broker cancels the task or the service shuts down, and it keeps the output to
 * itself. This module drives common/proc step by step instead and reuses testrun_parse()
 * and testrun_verdict() for everything the output says. */
#include "test_suite.h"

#include "clock.h"
#include "failure.h"
#include "proc.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one proc_step() waits: bounds the latency of a cancel and of progress. */
#define TEST_SUITE_STEP_MS 50

typedef struct {
    specialist_ctx_t *ctx;
    /* The tail of the output: a buffer of twice `cap`; when full, the last `cap` bytes
     * move to the front, so appending stays cheap and the tail is always there. */
    char *tail;
    size_t tail_len;
    size_t cap;
    bool truncated;
    /* Output not yet forwarded as progress. */
    char pending[TEST_SUITE_PROGRESS_BYTES + 1];
    size_t pending_len;
    int64_t flushed_at_ms;
} test_suite_run_t;

static void s_tail_append(test_suite_run_t *run, const char *data, size_t len)
{
    if (len > run->cap) {
        data += len - run->cap;
        len = run->cap;
        run->truncated = true;
    }
    if (run->tail_len + len > 2 * run->cap) {
        size_t keep = run->cap - len;
        memmove(run->tail, run->tail + run->tail_len - keep, keep);
        run->tail_len = keep;
        run->truncated = true;
    }
    memcpy(run->tail + run->tail_len, data, len);
    run->tail_len += len;
}

static void s_flush_progress(test_suite_run_t *run)
{
    run->flushed_at_ms = clock_now_ms();
    if (run->pending_len == 0)
        return;
    /* Progress is one message per batch: drop the final newline. */
    if (run->pending[run->pending_len - 1] == '\n')
        run->pending_len--;
    run->pending[run->pending_len] = '\0';
    specialist_progress(run->ctx, "output", run->pending);
    run->pending_len = 0;
}

static void s_pending_append(test_suite_run_t *run, const char *line, size_t len)
{
    if (run->pending_len + len + 1 > TEST_SUITE_PROGRESS_BYTES)
        s_flush_progress(run);
    if (len + 1 > TEST_SUITE_PROGRESS_BYTES)
        len = TEST_SUITE_PROGRESS_BYTES - 1; /* a huge line: its start is enough for progress */
    memcpy(run->pending + run->pending_len, line, len);
    run->pending_len += len;
    run->pending[run->pending_len++] = '\n';
}

static int s_on_line(void *arg, const char *line, size_t len)
{
    test_suite_run_t *run = arg;
    s_tail_append(run, line, len);
    s_tail_append(run, "\n", 1);
    s_pending_append(run, line, len);
    return 0;
}

/* A result for a command that could not be started: no counts, `error` says why. */
static int s_not_started(testrun_result_t **out, int code, const char *why)
{
    if (testrun_parse(out, "", 0) != 0)
        return FAILURE_MEMORY;
    snprintf((*out)->error, sizeof(*out)->error, "%s", why);
    return failure_set(code, "%s", why);
}

int test_suite_run(testrun_result_t **out, specialist_ctx_t *ctx,
                   const test_suite_options_t *options)
{
    *out = NULL;
    test_suite_run_t run = {.ctx = ctx, .cap = TESTRUN_DEFAULT_OUTPUT_CAP};
    run.tail = malloc(2 * run.cap + 1);
    size_t script_len = strlen("exec 2>&1\n") + strlen(options->command) + 1;
    char *script = malloc(script_len);
    if (run.tail == NULL || script == NULL) {
        free(run.tail);
        free(script);
        return failure_set(FAILURE_MEMORY, "out of memory starting the test command");
    }
    /* The shell merges stderr into stdout, so the two stay in order in one stream. */
    snprintf(script, script_len, "exec 2>&1\n%s", options->command);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    /* Runners print plain, non-interactive output when they see CI and no colour. */
    static const char *const env_set[] = {"CI=true", "NO_COLOR=1", "FORCE_COLOR=0", NULL};
    proc_options_t po = {
        .argv = argv,
        .cwd = options->dir,
        .env_set = env_set,
        .on_line = s_on_line,
        .on_line_arg = &run,
        .timeout_ms = options->timeout_ms,
        .kill_grace_ms = TEST_SUITE_KILL_GRACE_MS,
        .max_line = run.cap,
    };
    proc_t *proc = NULL;
    int rc = proc_start(&proc, &po);
    free(script);
    if (rc != 0) {
        free(run.tail);
        return s_not_started(out, rc, failure_message());
    }
    specialist_watch_child(ctx, proc_pid(proc));
    run.flushed_at_ms = clock_now_ms();
    bool stopping = false;
    while ((rc = proc_step(proc, TEST_SUITE_STEP_MS)) == 0) {
        if (!stopping && specialist_cancelled(ctx)) {
            proc_stop(proc, PROC_STOP_REQUESTED);
            stopping = true;
        }
        if (clock_now_ms() - run.flushed_at_ms >= TEST_SUITE_PROGRESS_MS)
            s_flush_progress(&run);
    }
    s_flush_progress(&run);
    if (rc < 0) {
        int code = rc;
        char why[256];
        snprintf(why, sizeof why, "watching the test command failed: %s", failure_message());
        proc_destroy(&proc); /* kills the group */
        specialist_watch_child(ctx, 0);
        free(run.tail);
        return s_not_started(out, code, why);
    }
    specialist_watch_child(ctx, 0);

    /* Keep exactly the last `cap` bytes. */
    size_t start = run.tail_len > run.cap ? run.tail_len - run.cap : 0;
    rc = testrun_parse(out, run.tail + start, run.tail_len - start);
    free(run.tail);
    if (rc != 0) {
        proc_destroy(&proc);
        return rc;
    }
    const proc_status_t *status = proc_status(proc);
    testrun_result_t *r = *out;
    r->started = true;
    r->exit_code = status->exited ? status->exit_code : -1;
    r->term_signal = status->exited ? 0 : status->term_signal;
    r->timed_out = status->stopped_by == PROC_STOP_TIMEOUT;
    r->duration_ms = status->duration_ms;
    r->output_truncated = run.truncated || start > 0;
    proc_destroy(&proc);
    return 0;
}
