/* merge_queue_store: the merge queue's state files, shared by the merge-agent (which runs
 * the queues, services/merge/merge_queue.h) and pan (`pan merge-queue`: shows, pauses and
 * resumes them).
 *
 * One JSON file per (repository root, target branch) in
 * $PANOPTICON_HOME/specialists/merge-agent/queue/ (one directory for every replica on the
 * host, whatever their workdirs),
 * named "q-<16 hex of a hash of root and target>.json"; the root and target are also
 * inside, and a file whose names do not match is refused. Every reader and writer holds
 * an flock(2) on "<file>.lock" while it looks: the kernel drops the lock of a process
 * killed with -9, so a crash never leaves a queue locked. A save writes a temporary file,
 * fsyncs it and renames it over the old one: after any crash the file holds the last whole
 * state, never half of one.
 *
 * The JSON object (see merge_queue.h for what the fields mean):
 *   {"repo": root, "target": t, "paused": bool, "next_seq": n, "test_runs": n,
 *    "landed": n, "ejected": n, "items": [ {...}, ... ]} */
#ifndef CLOISTER_MERGE_QUEUE_STORE_H
#define CLOISTER_MERGE_QUEUE_STORE_H

#include "config.h"

#include <jansson.h>
#include <stddef.h>

typedef struct merge_queue_store_t merge_queue_store_t;

/* Writes the queues' directory into `buf` and creates it when missing. Returns 0, or
 * FAILURE_INVALID / FAILURE_IO with the reason. */
int merge_queue_store_dir(char *buf, size_t size);

/* Locks and reads the queue of (`repo` root, `target`) kept in `dir`: an empty queue when
 * there is no file yet. Blocks until the lock is free. Returns 0 and *out (caller owns;
 * merge_queue_store_close() unlocks), or FAILURE_IO / FAILURE_STATE (a damaged file, or one
 * of another queue) / FAILURE_MEMORY with the reason. */
int merge_queue_store_open(merge_queue_store_t **out, const char *dir, const char *repo,
                           const char *target);

/* The queue's JSON (owned by the store; the caller may change it, then save). */
json_t *merge_queue_store_json(merge_queue_store_t *self);

/* Writes the queue's JSON (temporary file, fsync, rename). Returns 0 or FAILURE_IO. */
int merge_queue_store_save(merge_queue_store_t *self);

/* Unlocks, frees and nulls *self_p (unsaved changes are dropped). Safe with NULL. */
void merge_queue_store_close(merge_queue_store_t **self_p);

/* Every queue in `dir`, each read under its lock, as a new JSON array (caller owns) in
 * *out, sorted by repository and target. Returns 0 (an empty array when `dir` has none), or
 * FAILURE_IO / FAILURE_MEMORY. */
int merge_queue_store_list(const char *dir, json_t **out);

#endif
