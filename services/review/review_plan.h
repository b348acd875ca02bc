/* review_plan: the plan phase of a review with domain reviewers -- which of the configured
 * reviewers ([review] reviewers) apply to a diff, and why each other one does not.
 *
 * Every changed path is one of: docs (*.md, *.markdown, *.rst, *.adoc, *.txt, anything
 * under a doc/ or docs/ directory, README*, CHANGELOG*, LICENSE*, CONTRIBUTING*), a test
 * (under a test/, tests/, spec/ or __tests__/ directory, or named test_*, *_test.*,
 * *.test.*, *.spec.*), a public header (*.h, *.hh, *.hpp: the interface of a C or C++
 * module), or code (anything else). Then:
 *   security     runs whenever something changed (a docs change can leak a secret);
 *   correctness  skipped when only docs changed (nothing runs differently);
 *   tests        skipped when no code or header changed ("docs-only change" or "only tests
 *                changed": the tests reviewer judges the tests of a code change);
 *   performance  skipped when no code changed (only docs, tests or headers);
 *   docs         skipped when no docs and no public header changed;
 *   any other name (a repository's own reviewer) always runs.
 * An empty diff skips them all; a name that is not a valid reviewer name or is listed twice
 * is skipped with that reason. */
#ifndef CLOISTER_REVIEW_PLAN_H
#define CLOISTER_REVIEW_PLAN_H

#include <jansson.h>
#include <stddef.h>

/* Plans the reviewers `names` (n of them, borrowed) for a diff of the `paths` (npaths,
 * borrowed). The names that apply are stored in run (room for n; pointers into names, in
 * their order); each other one appends {reviewer, reason} to the array `skips`. Returns
 * how many run. */
size_t review_plan(const char *const *names, size_t n, const char *const *paths, size_t npaths,
                   const char **run, json_t *skips);

/* Appends {reviewer, reason} to the array skips. */
void review_plan_skip(json_t *skips, const char *reviewer, const char *reason);

#endif
