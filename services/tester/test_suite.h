/* test_suite: runs a project's test command inside a test-agent job.
 *
 * A common/testrun run (`/bin/sh -c` in the project directory, its own process group,
 * stdout and stderr merged, the tail of the output kept and parsed) attached to the job,
 * driven step by step from the job's thread so that it:
 *  - stops when the job is cancelled (broker cancel, task timeout, SIGTERM): SIGTERM to the
 *    group, SIGKILL after the kill grace;
 *  - has its process group registered with the skeleton (specialist_watch_child), so a run
 *    that does not stop is killed before the worker gives up on the job;
 *  - forwards the output as `progress` of kind "output", in batches (at most one message
 *    per TEST_SUITE_PROGRESS_MS or TEST_SUITE_PROGRESS_BYTES of output), so a chatty suite
 *    does not flood the broker's queue. */
#ifndef CLOISTER_TEST_SUITE_H
#define CLOISTER_TEST_SUITE_H

#include "specialist.h"
#include "testrun.h"

#include <stdbool.h>
#include <stdint.h>

#define TEST_SUITE_PROGRESS_MS 250
#define TEST_SUITE_PROGRESS_BYTES 4096
/* SIGTERM → SIGKILL when a run is stopped. */
#define TEST_SUITE_KILL_GRACE_MS 1000

typedef struct {
    const char *command; /* the configured or detected command (never task or agent text) */
    const char *dir;     /* the directory it runs in */
    int64_t timeout_ms;  /* wall-clock limit, > 0 */
    const sandbox_t *sandbox; /* how it runs (borrowed; see common/agent/sandbox.h) */
    bool network;             /* the repository opted in to the network (sandbox.h) */
} test_suite_options_t;

/* Runs options->command for the job of `ctx` (borrowed) and sets *out to the result (the
 * caller owns it; free with testrun_result_destroy()), as testrun_finish() does. A run
 * stopped because the job was cancelled has cancelled = true, timed_out = false,
 * exit_code -1 and the signal. Returns 0 when the command ran (whatever its exit status);
 * when it could not be started (or watching it failed: FAILURE_IO), *out is still set
 * (started = false, error says why) and the code is returned; FAILURE_MEMORY (or
 * FAILURE_INVALID for an empty command) with *out NULL. */
int test_suite_run(testrun_result_t **out, specialist_ctx_t *ctx,
                   const test_suite_options_t *options);

#endif
