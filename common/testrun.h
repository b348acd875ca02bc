/* testrun: runs a project's test command with a time limit and reads its output.
 *
 * testrun_run() runs the command with `/bin/sh -c` in the project directory, in its own
 * process group (common/proc), stdout and stderr merged, keeping the last output_cap bytes.
 * On timeout the whole group gets SIGTERM, then SIGKILL after a grace period; when the
 * command ends, anything it left running in its group is killed too.
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TESTRUN_DEFAULT_OUTPUT_CAP (1024 * 1024)
#define TESTRUN_MAX_FAILURES 100
#define TESTRUN_MAX_FAILURE_LEN 400

typedef enum { TESTRUN_PASS, TESTRUN_FAIL, TESTRUN_ERROR } testrun_verdict_t;

typedef struct {
    const char *command;   /* the shell command (configured or detected, see testdetect) */
    const char *dir;       /* directory to run it in; NULL keeps ours */
    int64_t timeout_ms;    /* wall-clock limit; 0 = none */
    int64_t kill_grace_ms; /* SIGTERM → SIGKILL delay; 0 = proc's default */
    size_t output_cap;     /* bytes of output kept (the tail); 0 = TESTRUN_DEFAULT_OUTPUT_CAP */
} testrun_options_t;

typedef struct {
    /* How the command ran (testrun_run only; testrun_parse leaves started false). */
    bool started;    /* false: it could not be started (see error) */
    int exit_code;   /* exit status; -1 when it did not exit normally */
    int term_signal; /* signal that ended it, or 0 */
    bool timed_out;  /* killed because timeout_ms passed */
    int64_t duration_ms;
    char error[256]; /* why it could not start, or "" */
    /* What the output says. */
    long run, passed, failed, skipped; /* -1 when unknown */
    char **failures; /* "name - reason" (or "name"), at most TESTRUN_MAX_FAILURES */
    size_t nfailures;
    bool failures_truncated; /* more failures were reported than kept */
    /* The output itself: the last output_cap bytes, NUL-terminated. */
    char *output;
    size_t output_len;
    bool output_truncated; /* earlier output was dropped */
} testrun_result_t;

/* Runs options->command. The command is the user's own configured test_command or what
 * testdetect found — never text from a task or an agent — which is why a shell is fine.
 * Sets *out to a new result the caller owns (free with testrun_result_destroy()) and
 * returns 0 when the command ran (whatever its exit code, and also when it timed out).
 * When it could not be started, *out is still set (started = false, error says why) and the
 * code is returned (FAILURE_NOT_FOUND, FAILURE_IO). FAILURE_INVALID for missing options,
 * FAILURE_MEMORY with *out NULL if allocation failed. Blocks until the command ends. */
int testrun_run(testrun_result_t **out, const testrun_options_t *options);

/* Parses `len` bytes of runner output (need not be NUL-terminated) into a new result the
 * caller owns: counts, failures and a copy of the output; started = false, exit_code = -1.
 * Returns 0 or FAILURE_MEMORY (*out NULL). */
int testrun_parse(testrun_result_t **out, const char *output, size_t len);

/* PASS when the command exited 0; FAIL when it exited non-zero and the output showed tests
 * running (counts or failures parsed); ERROR when it timed out, could not start, was
 * killed by a signal, or failed without any test output. */
testrun_verdict_t testrun_verdict(const testrun_result_t *result);

/* "PASS", "FAIL" or "ERROR" (the TEST_RESULT marker's values). Static. */
const char *testrun_verdict_name(testrun_verdict_t verdict);

/* Frees the result and nulls the caller's pointer. Safe on NULL. */
void testrun_result_destroy(testrun_result_t **self_p);

#endif
