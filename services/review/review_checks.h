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
 * A check that fails, times out or cannot start is a finding with its severity and the tail
 * of its output. A coverage check also fails when the figure its output prints -- the
 * summary line of lcov, cobertura, `go test -cover` or pytest-cov -- is below its
 * threshold, or when it prints none. */
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
} review_check_t;

/* The checks `config` declares (the list first, then the named tables in file order), at
 * most REVIEW_CHECKS_MAX; returns how many. A named table without a command is skipped. */
size_t review_checks_list(const config_t *config, review_check_t *out);

/* The coverage percent the last coverage summary line of `output` prints, or -1. */
double review_coverage_percent(const char *output);

#endif
