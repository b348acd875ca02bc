/* test_suite: runs a project's test command inside a test-agent job.
 *
 * The same run as common/testrun's testrun_run() — `/bin/sh -c` in the project directory,
 * its own process group, stdout and stderr merged, CI=true NO_COLOR=1 FORCE_COLOR=0, the
 * tail of the output kept and parsed with testrun_parse() — but driven step by step from
 * the job's thread so that it also:
 *  - stops when the job is cancelled (broker cancel, task timeout, SIGTERM): SIGTERM to the
 *    group, SIGKILL after the kill grace;
 *  - registers its process group with the skeleton (specialist_watch_child), so a run that
 *    does not stop is killed before the worker gives up on the job;
 *  - forwards the output as `progress` of kind "output", in batches (at most one message
 *    per TEST_SUITE_PROGRESS_MS or TEST_SUITE_PROGRESS_BYTES of output), so a chatty suite
 *    does not flood the broker's queue. */
#ifndef CLOISTER_TEST_SUITE_H
#define CLOISTER_TEST_SUITE_H

#include "specialist.h"
#include "testrun.h"

#include <stdint.h>

#define TEST_SUITE_PROGRESS_MS 250
#define TEST_SUITE_PROGRESS_BYTES 4096
/* SIGTERM → SIGKILL when a run is stopped. */
#define TEST_SUITE_KILL_GRACE_MS 1000

typedef struct {
    const char *command; /* the configured or detected command (never task or agent text) */
    const char *dir;     /* the directory it runs in */
    int64_t timeout_ms;  /* wall-clock limit, > 0 */
} test_suite_options_t;

/* Runs options->command for the job of `ctx` (borrowed) and sets *out to the result (the
 * caller owns it; free with testrun_result_destroy()). The result's counts, failures and
 * output come from testrun_parse(); started, exit_code, term_signal, timed_out and
 * duration_ms describe the run. A run stopped because the job was cancelled has
 * timed_out = false, exit_code -1 and the signal; the caller checks
 * specialist_cancelled(). Returns 0 when the command ran (whatever its exit status); when
 * it could not be started, *out is still set (started = false, error says why) and the
 * code is returned; FAILURE_MEMORY with *out NULL; FAILURE_IO if watching it failed. */
int test_suite_run(testrun_result_t **out, specialist_ctx_t *ctx,
                   const test_suite_options_t *options);

#endif
