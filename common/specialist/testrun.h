/* testrun: runs a project's test command with a time limit and reads its output.
 *
 * A run executes the command with `/bin/sh -c` in the project directory, in its own
 * process group (common/proc), stdout and stderr merged, CI=true NO_COLOR=1 FORCE_COLOR=0
 * set, keeping the last output_cap bytes. On timeout or cancel the whole group gets
 * SIGTERM, then SIGKILL after a grace period; when the command ends, anything it left
 * running in its group is killed too.
 *
 * Driving it step by step lets a single thread stream the output, cancel the run and
 * watch its process group; testrun_run() is the blocking convenience on top:
 *
 *     testrun_t *run = NULL;
 *     testrun_start(&run, &options);           (run is NULL only on FAILURE_INVALID/MEMORY)
 *     while (run && testrun_step(run, 100) == 0)
 *         if (stop_wanted())
 *             testrun_cancel(run);
 *     testrun_result_t *result = NULL;
 *     if (run)
 *         testrun_finish(&run, &result);
 *
 * With an owner (options.owner, e.g. a specialist job: specialist_testrun_owner()) the
 * run is told to it: owner.watch gets the process group while the command runs (and 0
 * after), and testrun_step() cancels the run once owner.cancelled says so -- so
 * testrun_run() stops promptly on a job's cancel too.
 *
 * testrun_parse() reads the counts and the failing tests out of the output of pytest,
 * jest, vitest, cargo test, go test, ctest and node's test runner (TAP or spec summary).
 * It needs no hint: each runner's summary lines are distinctive, so `npm test` or
 * `make check` wrapping one of them is understood too. ANSI colour codes are ignored.
 *
 * Counts: `passed` and `failed` are tests that ran (failed includes pytest errors), `run`
 * is passed + failed, `skipped` counts skipped/ignored/todo tests. A count the output does
 * not reveal is -1. For `go test` without -v, where only failing tests are named, the
 * counts are packages (ok / FAIL lines). */
#ifndef CLOISTER_TESTRUN_H
#define CLOISTER_TESTRUN_H

#include "testparse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sandbox_t sandbox_t;

#define TESTRUN_DEFAULT_OUTPUT_CAP (1024 * 1024)
/* Longest wait of one testrun_step() with an owner that can cancel: bounds a cancel's
 * latency. */
#define TESTRUN_JOB_STEP_MS 50

typedef struct testrun_t testrun_t;

/* Called with each line of output (stdout and stderr merged) as it arrives, without the
 * newline; `line` is NUL-terminated and valid during the call only. */
typedef void(testrun_line_fn)(void *arg, const char *line, size_t len);

/* Who the run belongs to. Both functions are optional; `arg` is theirs. */
typedef struct {
    void (*watch)(void *arg, pid_t pgid); /* the command's process group, 0 once it ended */
    bool (*cancelled)(void *arg);         /* true: stop the run (as testrun_cancel) */
    void *arg;
} testrun_owner_t;

typedef struct {
    const char *command;      /* the shell command (configured or detected, see testdetect) */
    const char *dir;          /* directory to run it in; NULL keeps ours */
    int64_t timeout_ms;       /* wall-clock limit; 0 = none */
    int64_t kill_grace_ms;    /* SIGTERM → SIGKILL delay; 0 = proc's default */
    size_t output_cap;        /* bytes of output kept (the tail); 0 = TESTRUN_DEFAULT_OUTPUT_CAP */
    testrun_line_fn *on_line; /* optional: streams the output, called from testrun_step() */
    void *on_line_arg;
    testrun_owner_t owner; /* optional: all NULL runs on its own */
    /* optional (borrowed): the command is a repository's, run it under this policy (a
     * scrubbed environment, bwrap); NULL runs it with our environment, unwrapped. */
    const sandbox_t *sandbox;
    /* With a sandbox: the command may use the network (its repository opted in, see
     * sandbox.h); false gives it a network of its own, loopback only. */
    bool network;
} testrun_options_t;


/* Starts options->command. The command is the user's own configured test_command or what
 * testdetect found — never text from a task or an agent — which is why a shell is fine.
 * Options are not kept after the call (the job and the line callback's argument are
 * borrowed for the run's life). Sets *run_p to a new run the caller owns, to end with
 * testrun_finish(), and returns 0. When the command could not be started, *run_p is still
 * set (testrun_step() returns 1 at once; testrun_finish() gives started = false and says
 * why) and the code is returned (FAILURE_NOT_FOUND, FAILURE_IO). FAILURE_INVALID for
 * missing options and FAILURE_MEMORY leave *run_p NULL. */
int testrun_start(testrun_t **run_p, const testrun_options_t *options);

/* Waits up to timeout_ms (-1 = until something happens; at most TESTRUN_JOB_STEP_MS with
 * a job) and handles what happened: output lines (on_line is called), deadlines, the
 * job's cancel, the end of the command. Returns 1 once the run has ended (and on every
 * later call), 0 while it runs, or FAILURE_IO if watching the command failed (it is
 * killed; testrun_finish() then reports it as not started). */
int testrun_step(testrun_t *self, int timeout_ms);

/* Begins stopping the command: SIGTERM to its group now, SIGKILL after the kill grace
 * (driven by testrun_step()). No effect once the run has ended. */
void testrun_cancel(testrun_t *self);

/* The command's process group while it runs, 0 once it has ended (or never started). */
pid_t testrun_pgid(const testrun_t *self);

/* Ends the run: if the command still runs it is cancelled and waited for (up to the kill
 * grace). Frees the run and nulls *self_p. Sets *out to a new result the caller owns (free
 * with testrun_result_destroy()) and returns 0 when the command ran (whatever its exit
 * code, also when it timed out or was cancelled); when it could not be started or watching
 * it failed, *out is still set (started = false, error says why) and the code is returned;
 * FAILURE_MEMORY with *out NULL if allocation failed. */
int testrun_finish(testrun_t **self_p, testrun_result_t **out);

/* Runs options->command to the end: testrun_start(), testrun_step() until it ended,
 * testrun_finish(). Sets *out and returns as testrun_finish(); FAILURE_INVALID (missing
 * options) and FAILURE_MEMORY leave *out NULL. Blocks until the command ends or, with
 * an owner, until the owner says it is cancelled. */
int testrun_run(testrun_result_t **out, const testrun_options_t *options);

#endif
