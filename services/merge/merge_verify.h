/* merge_verify: finds conflict markers left in a file after a resolver worked on it.
 *
 * A marker is a line starting "<<<<<<<", "|||||||" or ">>>>>>>" (followed by a space or the
 * end of the line) or a line that is exactly "=======". Such lines can be legitimate text
 * (an underlined heading, a test about merges), so a resolved file only "still has markers"
 * when it holds more lines of one kind than either side of the merge had. */
#ifndef CLOISTER_MERGE_VERIFY_H
#define CLOISTER_MERGE_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    size_t start;     /* "<<<<<<<" lines */
    size_t base;      /* "|||||||" lines (diff3 style) */
    size_t separator; /* "=======" lines */
    size_t end;       /* ">>>>>>>" lines */
} merge_markers_count_t;

/* Counts the marker-like lines in `text` (`len` bytes, need not be NUL-terminated; lines
 * end at '\n', a trailing '\r' is ignored). `text` is borrowed. */
merge_markers_count_t merge_verify_count(const char *text, size_t len);

/* True when `resolved` has more marker lines of some kind than the larger of `ours` and
 * `theirs` (the two sides' own counts; pass zeroes when a side does not exist). */
bool merge_verify_markers_remain(merge_markers_count_t resolved, merge_markers_count_t ours,
                                 merge_markers_count_t theirs);

#endif
