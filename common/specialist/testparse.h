/* testparse: the pure half of testrun -- runners' output read into counts and failing
 * tests, and the verdict of a run. No processes, no files: fuzzed by tests/fuzz/fuzz_testparse.c.
 *
 * testrun_parse() reads the counts and the failing tests out of the output of pytest,
 * unittest, jest, vitest, cargo test, go test, ctest and node's test runner (TAP or spec
 * summary); see testrun.h for what the counts mean. */
#ifndef CLOISTER_TESTPARSE_H
#define CLOISTER_TESTPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TESTRUN_MAX_FAILURES 100
#define TESTRUN_MAX_FAILURE_LEN 400

typedef enum { TESTRUN_PASS, TESTRUN_FAIL, TESTRUN_ERROR } testrun_verdict_t;

typedef struct {
    /* How the command ran (testrun_run only; testrun_parse leaves started false). */
    bool started;    /* false: it could not be started (see error) */
    int exit_code;   /* exit status; -1 when it did not exit normally */
    int term_signal; /* signal that ended it, or 0 */
    bool timed_out;  /* killed because timeout_ms passed */
    bool cancelled;  /* killed by testrun_cancel() (or the job's cancel) */
    int64_t duration_ms;
    char error[256]; /* why it could not start, or "" */
    /* What the output says. */
    long run, passed, failed, skipped; /* -1 when unknown */
    /* "name - reason" (or "name"), at most TESTRUN_MAX_FAILURES of them, each valid UTF-8
     * of at most TESTRUN_MAX_FAILURE_LEN bytes: cut before a character that does not fit,
     * and bytes of the output that are not UTF-8 replaced by U+FFFD. */
    char **failures;
    size_t nfailures;
    bool failures_truncated; /* more failures were reported than kept */
    /* The failures come from a runner's report of failing tests (pytest's FAILED lines,
     * jest's ●, go's --- FAIL, ...), not only from hints (✕ marks, failed go packages). */
    bool failures_reported;
    /* The output itself: the last output_cap bytes, NUL-terminated. */
    char *output;
    size_t output_len;
    bool output_truncated; /* earlier output was dropped */
} testrun_result_t;

/* A new empty result (counts -1, exit_code -1, nothing else), or NULL without memory. */
testrun_result_t *testparse_result_new(void);

/* Parses `len` bytes of output into r's counts and failures (r->output is left alone).
 * Returns 0 or FAILURE_MEMORY. */
int testparse_into(testrun_result_t *r, const char *output, size_t len);

/* Parses `len` bytes of runner output (need not be NUL-terminated) into a new result the
 * caller owns: counts, failures and a copy of the output; started = false, exit_code = -1.
 * Returns 0 or FAILURE_MEMORY (*out NULL). */
int testrun_parse(testrun_result_t **out, const char *output, size_t len);

/* PASS when the command exited 0 and its output reports no failure; FAIL when it exited
 * non-zero and the output showed tests running (counts or failures parsed), and also when
 * it exited 0 but the output reports failures (failed > 0, or no count but
 * failures_reported): `pytest | tee log` exits with tee's 0; ERROR when it timed out,
 * could not start, was killed by a signal, or failed without any test output. */
testrun_verdict_t testrun_verdict(const testrun_result_t *result);

/* "PASS", "FAIL" or "ERROR" (the TEST_RESULT marker's values). Static. */
const char *testrun_verdict_name(testrun_verdict_t verdict);

/* Frees the result and nulls the caller's pointer. Safe on NULL. */
void testrun_result_destroy(testrun_result_t **self_p);

#endif
