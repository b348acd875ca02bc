/* merge_locks: the pre-flight check of git lock files (index.lock, HEAD.lock, ...).
 *
 * Git holds a lock file for milliseconds to seconds while it writes; one that is older
 * than a threshold was left by a process that crashed, and blocks every later write.
 * Git lock files carry no owner pid, so age is the only evidence: older than `stale_ms`
 * → removed with a note; younger → the repository is busy and the merge is refused. */
#ifndef CLOISTER_MERGE_LOCKS_H
#define CLOISTER_MERGE_LOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Receives one human-readable line (borrowed for the call). */
typedef void (*merge_locks_note_fn)(const char *text, void *arg);

/* Checks each of the `n` absolute lock paths (all borrowed). Missing paths are fine. A lock
 * whose mtime is at least `stale_ms` old (wall clock) is unlinked and reported through
 * `note` (may be NULL). Returns 0, FAILURE_STATE "repository busy: <path> is locked" for a
 * fresh lock, or FAILURE_IO when a stale lock cannot be removed. */
int merge_locks_check(const char *const *paths, size_t n, int64_t stale_ms,
                      merge_locks_note_fn note, void *arg);

#endif
