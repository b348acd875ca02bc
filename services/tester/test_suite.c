/* test_suite: a cancellable, progress-forwarding run of a test command (see test_suite.h).
 *
 * The run itself is common/testrun's, driven step by step (testrun_start/step/finish) with
 * the job attached, so a cancel stops it and its process group is watched; this module
 * adds the batching of its output lines into `progress` messages. */
#include "test_suite.h"

#include "clock.h"

#include <stdio.h>
#include <string.h>

/* How long one testrun_step() waits: bounds the latency of progress. */
#define TEST_SUITE_STEP_MS 50

/* Output not yet forwarded as progress. */
typedef struct {
    specialist_ctx_t *ctx;
    char pending[TEST_SUITE_PROGRESS_BYTES + 1];
    size_t pending_len;
    int64_t flushed_at_ms;
} test_suite_progress_t;

static void s_flush_progress(test_suite_progress_t *progress)
{
    progress->flushed_at_ms = clock_now_ms();
    if (progress->pending_len == 0)
        return;
    /* Progress is one message per batch: drop the final newline. */
    if (progress->pending[progress->pending_len - 1] == '\n')
        progress->pending_len--;
    progress->pending[progress->pending_len] = '\0';
    specialist_progress(progress->ctx, "output", progress->pending);
    progress->pending_len = 0;
}

static void s_on_line(void *arg, const char *line, size_t len)
{
    test_suite_progress_t *progress = arg;
    if (progress->pending_len + len + 1 > TEST_SUITE_PROGRESS_BYTES)
        s_flush_progress(progress);
    if (len + 1 > TEST_SUITE_PROGRESS_BYTES)
        len = TEST_SUITE_PROGRESS_BYTES - 1; /* a huge line: its start is enough for progress */
    memcpy(progress->pending + progress->pending_len, line, len);
    progress->pending_len += len;
    progress->pending[progress->pending_len++] = '\n';
}

int test_suite_run(testrun_result_t **out, specialist_ctx_t *ctx,
                   const test_suite_options_t *options)
{
    *out = NULL;
    test_suite_progress_t progress = {.ctx = ctx, .flushed_at_ms = clock_now_ms()};
    testrun_options_t run_options = {
        .command = options->command,
        .dir = options->dir,
        .timeout_ms = options->timeout_ms,
        .kill_grace_ms = specialist_child_kill_grace_ms(ctx) < TEST_SUITE_KILL_GRACE_MS
                             ? specialist_child_kill_grace_ms(ctx)
                             : TEST_SUITE_KILL_GRACE_MS,
        .on_line = s_on_line,
        .on_line_arg = &progress,
        .owner = specialist_testrun_owner(ctx),
        .sandbox = options->sandbox,
        .network = options->network,
    };
    testrun_t *run = NULL;
    int rc = testrun_start(&run, &run_options);
    if (run == NULL)
        return rc;
    while (testrun_step(run, TEST_SUITE_STEP_MS) == 0) {
        if (clock_now_ms() - progress.flushed_at_ms >= TEST_SUITE_PROGRESS_MS)
            s_flush_progress(&progress);
    }
    s_flush_progress(&progress);
    return testrun_finish(&run, out);
}
