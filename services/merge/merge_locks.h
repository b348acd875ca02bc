/* merge_locks: the pre-flight check of git lock files (index.lock, HEAD.lock, ...).
 *
 * Git holds a lock file for milliseconds to seconds while it writes; one that is older
 * than a threshold was usually left by a process that crashed, and blocks every later write.
 * Git lock files carry no owner pid, so the evidence is the age and the processes: older
 * than `stale_ms` and no `git` process working in the repository (its working directory
 * inside one of the given directories, as `git commit -a` waiting for its editor is) →
 * removed with a note; younger, or such a process alive → the repository is busy and the
 * merge is refused. Processes in other PID namespaces (another container) are not seen. */
#ifndef CLOISTER_MERGE_LOCKS_H
#define CLOISTER_MERGE_LOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Receives one human-readable line (borrowed for the call). */
typedef void (*merge_locks_note_fn)(const char *text, void *arg);

/* Checks each of the `n` absolute lock paths (all borrowed). Missing paths are fine. A lock
 * whose mtime is at least `stale_ms` old (wall clock), while no git process has its working
 * directory inside one of `workdirs` (NULL-terminated absolute paths, or NULL), is unlinked
 * and reported through `note` (may be NULL). Returns 0; FAILURE_STATE "repository busy:
 * <path> is locked" for a fresh lock, or "... is locked, and git (pid N) is working in
 * <dir>" for an old one; FAILURE_IO when a stale lock cannot be removed. */
int merge_locks_check(const char *const *paths, size_t n, int64_t stale_ms,
                      const char *const *workdirs, merge_locks_note_fn note, void *arg);

#endif
