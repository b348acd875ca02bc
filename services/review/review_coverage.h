/* review_coverage: a coverage report -- an lcov tracefile (`SF:` / `DA:line,hits` /
 * `end_of_record`) or a cobertura XML file (`<class filename="...">` with `<line
 * number="N" hits="H"/>`), told apart by their content -- read into the lines each file
 * instruments and whether the tests ran them, then checked against the lines a diff adds:
 * "new code without tests" is an added line the report instruments and no test ran.
 *
 * Report paths are matched to the diff's repository paths as they are, under `root` (the
 * directory the check ran in: lcov writes absolute paths), or by their ending (a path
 * ending in "/src/a.c" is src/a.c); a cobertura filename is taken under the report's first
 * <source>. Added lines the report does not instrument (blank lines, comments, files it
 * does not know) count neither way. */
#ifndef CLOISTER_REVIEW_COVERAGE_H
#define CLOISTER_REVIEW_COVERAGE_H

#include "review_diff.h"

#include <stddef.h>

/* The added lines of one file that no test ran. */
typedef struct {
    char *path;      /* the repository path */
    unsigned first;  /* the first such line */
    size_t count;    /* how many */
    char *ranges;    /* "12-14, 20" */
} review_uncovered_t;

/* What the report says of the whole tree and of the diff. */
typedef struct {
    double total;       /* percent of the instrumented lines the tests ran; -1: none */
    double diff;        /* the same over the added lines the report instruments; -1: none */
    size_t diff_lines;  /* added lines the report instruments */
    size_t diff_covered;
    review_uncovered_t *uncovered; /* one per file with uncovered added lines, in diff order */
    size_t nuncovered;
} review_diff_coverage_t;

/* Reads the report `text` (NUL-terminated, borrowed) and checks `diff`'s added lines
 * against it. Returns 0 with *out filled (release with review_diff_coverage_clear()), or
 * FAILURE_INVALID when the text is neither lcov nor cobertura (nothing instrumented), or
 * FAILURE_MEMORY; *out is then empty. */
int review_coverage_of_diff(review_diff_coverage_t *out, const char *text, const char *root,
                            const review_diff_t *diff);

/* Frees what `coverage` owns and empties it. */
void review_diff_coverage_clear(review_diff_coverage_t *coverage);

#endif
