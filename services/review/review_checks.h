/* review_checks: the commands the review runs on the branch before the agent reads it.
 *
 * Two ways to declare them in cloister.toml (or in the target branch's
 * .cloister/config.toml, whose checks replace the service's: a branch cannot drop them):
 *   [review] checks = ["make lint", ...]    each one an error finding when it fails
 *   [review.checks.<name>]                   a named check:
 *       command    what to run (in the workspace, sandboxed like the tests)
 *       kind       build | lint | coverage | e2e | custom (default custom)
 *       severity   error | warning | info; default warning for lint and coverage, else error
 *       timeout_s  its own time limit ([review] check_timeout_s otherwise)
 *       threshold  coverage only: the lowest coverage, in percent, that passes
 *       report     coverage only: the report file the command writes (an lcov tracefile or
 *                  cobertura XML), relative to the checked-out tree: the diff's added lines
 *                  that no test ran become findings of the check's severity, one per file
 *                  ("src/a.c:12 3 added lines no test runs: 12-14"), and the result gives
 *                  the diff's coverage beside the total (review_coverage.h)
 * A check that fails, times out or cannot start is a finding with its severity and the tail
 * of its output. A coverage check also fails when the figure its output prints -- the
 * summary line of lcov, cobertura, `go test -cover` or pytest-cov, else the total its
 * report gives -- is below its threshold, or when there is none (or its report is missing).
 *
 * The E2E rule, from the diff alone: [review] user_facing_paths and e2e_test_paths (glob
 * lists; `*` matches across directories too: "src/ui*" takes every file under src/ui/) -- a
 * change to a user-facing path without a change to an E2E test path is a finding of
 * [review] e2e_severity (default warning). */
#ifndef CLOISTER_REVIEW_CHECKS_H
#define CLOISTER_REVIEW_CHECKS_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REVIEW_CHECKS_MAX 32

typedef struct {
    char name[128];       /* the table's <name>, or the command for a list entry */
    const char *command;  /* borrowed from the config */
    const char *kind;     /* "build", "lint", "coverage", "e2e" or "custom" */
    const char *severity; /* "error", "warning" or "info" */
    int64_t timeout_s;    /* 0: the review's default */
    double threshold;     /* coverage: percent; < 0 when none is set */
    const char *report;   /* coverage: the report's path in the tree, or NULL */
} review_check_t;

/* What the E2E rule found in a diff. */
typedef struct {
    const char *severity; /* [review] e2e_severity (borrowed from the config), or "warning" */
    size_t user_facing;   /* the diff's files under user_facing_paths */
    const char *first;    /* the first of them (borrowed from the paths given), or NULL */
    size_t e2e;           /* the diff's files under e2e_test_paths */
} review_e2e_t;

/* The checks `config` declares (the list first, then the named tables in file order), at
 * most REVIEW_CHECKS_MAX; returns how many. A named table without a command is skipped. */
size_t review_checks_list(const config_t *config, review_check_t *out);

/* The E2E rule for the diff's `paths` (n, borrowed) under `config`'s globs: fills *out
 * and returns true when the rule is configured (both lists set) and broken -- a
 * user-facing file changed, no E2E test file. */
bool review_checks_e2e(const config_t *config, char *const *paths, size_t n, review_e2e_t *out);

/* The coverage percent the last coverage summary line of `output` prints, or -1. */
double review_coverage_percent(const char *output);

#endif
