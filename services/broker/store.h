/* store: the broker's SQLite database (WAL mode) under $PANOPTICON_HOME.
 *
 * It holds every task (active and finished), each finished attempt, the known specialist
 * names, and the recent events with their sequence numbers. The broker writes through it
 * in batches: store_begin() before the first write of a loop iteration, store_commit() once
 * everything that iteration received is applied (group commit). Nothing is acknowledged to
 * anyone before the commit returns.
 *
 * Schema changes: add a migration step at the end of s_migrations in store.c (its index
 * + 1 is the schema version, kept in PRAGMA user_version). */
#ifndef CLOISTER_BROKER_STORE_H
#define CLOISTER_BROKER_STORE_H

#include "task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { STORE_SYNC_FULL, STORE_SYNC_NORMAL, STORE_SYNC_OFF } store_sync_t;

typedef struct store_t store_t;

/* Opens (creating and migrating) the database at `path`, holding its lock shared
 * (common/base/dblock.h) until store_close. Returns 0, FAILURE_STATE (`pan restore` is
 * replacing it) or FAILURE_STORE. */
int store_open(const char *path, store_sync_t sync, store_t **out);
void store_close(store_t **self_p);

/* Checks that the database file at `path` (read-only, never changed) is a broker's store
 * this broker can open: a schema version it knows (1 up to its own; an older one is
 * migrated when opened), and exactly the tables and indexes that version has, with their
 * very definitions -- no trigger, no view, nothing else that would run inside the broker
 * (`pan restore` runs this on a backup before anything is replaced). Returns 0 or
 * FAILURE_INVALID with the first difference ("it holds a trigger 'x' that a broker's
 * store does not have"), or FAILURE_STORE when it cannot be read. */
int store_check_file(const char *path);

/* The WAL file's bound: past it the checkpointer truncates the WAL, and SQLite keeps it no
 * bigger after a reset (journal_size_limit). Default STORE_DEFAULT_WAL_LIMIT. Returns 0,
 * FAILURE_INVALID (under 64 KiB) or FAILURE_STORE. */
#define STORE_DEFAULT_WAL_LIMIT (64LL * 1024 * 1024)
int store_set_wal_limit(store_t *self, int64_t bytes);

/* Parses "full" | "normal" | "off"; returns -1 otherwise. */
int store_sync_parse(const char *text);

/* Starts a transaction if none is open. Every write below starts one itself, so no change
 * is ever committed on its own (SQLite autocommit) apart from the rest of its iteration.
 * A write that fails makes every later write of the transaction fail too (without touching
 * the database) and the commit roll it back: a write fails with FAILURE_DISK_FULL when the
 * disk had no room for it, else FAILURE_STORE. */
int store_begin(store_t *self);
/* Commits the open transaction (no-op if none). A commit the disk has no room for is
 * rolled back; if every write of the transaction had gone through, the store asks
 * `make_room` (store_set_room_maker) and, when it made some, writes the transaction again
 * from the writes it kept, and commits, once. Returns 0; FAILURE_DISK_FULL (nothing of the
 * transaction is stored); or FAILURE_STORE. */
int store_commit(store_t *self);
/* What store_commit calls when the disk is full: returns true when it freed room (the
 * broker gives up its reserve file). */
void store_set_room_maker(store_t *self, bool (*make_room)(void *arg), void *arg);
bool store_in_transaction(const store_t *self);

/* Inserts a new task and sets its rowid; *inserted is false (and nothing changes) when a
 * task with the same id already exists. */
int store_task_insert(store_t *self, task_t *task, bool *inserted);
/* Writes the mutable columns: state, attempt, failures, worker, error, not_before,
 * updated, and the result (NULL keeps the stored one). */
int store_task_update(store_t *self, const task_t *task, const void *result, size_t result_len);
/* Writes only what a dispatch changes: state, attempt, worker, its key and updated (every
 * other column already matches the task). The broker may write it late, or never for a
 * task that ends first (broker.c, "dispatches"). */
int store_task_dispatched(store_t *self, const task_t *task);
/* Writes a queued task's priority and updated (set_priority). */
int store_task_priority(store_t *self, const task_t *task);

/* Loads one task by id into a new task_t (specialist and result filled). Returns 0,
 * FAILURE_NOT_FOUND or FAILURE_STORE. The caller owns *out. */
int store_task_load(store_t *self, const char *id, task_t **out);

/* What a listing asks for: NULL / 0 leaves a filter out. A `state` filter finds only
 * ended tasks (done, failed, dead, cancelled): the broker lists active ones from memory. */
typedef struct {
    const char *state, *specialist, *issue;
    int64_t created_after; /* wall ms: tasks created at or after it */
    const char *before_id; /* paging: only tasks listed after this one (older) */
    int limit;             /* at most this many (the caller bounds it) */
} store_task_filter_t;

/* Calls fn for the tasks matching `filter`, newest first (by creation, then insertion),
 * each borrowed for the call (specialist and result filled); fn returns nonzero to stop.
 * Every filter is served from an index. Returns 0, FAILURE_NOT_FOUND (before_id is no
 * known task), FAILURE_MEMORY or FAILURE_STORE. */
int store_task_list(store_t *self, const store_task_filter_t *filter,
                    int (*fn)(task_t *task, void *arg), void *arg);

/* Calls fn for every queued or running task, in submit order (ownership of each task
 * passes to fn, with `specialist` set). */
int store_task_load_active(store_t *self, void (*fn)(task_t *task, void *arg), void *arg);

/* Records a finished attempt (for the "prior attempts" session context, which is asked
 * for by issue: callers skip tasks without one). */
int store_attempt_insert(store_t *self, const task_t *task, const char *specialist,
                         const char *outcome, const char *error, int64_t finished);

/* Calls fn for the latest `limit` attempts of `issue` by `specialist`, newest first. */
int store_attempts_for_issue(store_t *self, const char *issue, const char *specialist, int limit,
                             void (*fn)(int attempt, const char *task, const char *outcome,
                                        const char *error, int64_t finished, void *arg),
                             void *arg);

/* Adds an event to the open transaction; the transaction's events are written as one row
 * when it commits (copied: `topic`, of
 * `topic_len` bytes, and `body` are borrowed). */
int store_event_insert(store_t *self, int64_t seq, const char *topic, size_t topic_len,
                       const void *body, size_t len);
/* Retention: in the open transaction, deletes at most `limit` finished tasks (done, failed,
 * dead, cancelled) last changed before `before` (wall ms), and at most `limit` attempts
 * finished before it. Returns how many rows went (>= 0), or FAILURE_STORE. */
int store_prune_finished(store_t *self, int64_t before, int limit);

/* Gives back to the file system up to `max_pages` of the pages deleted rows left free
 * (incremental vacuum; the store is opened with auto_vacuum = INCREMENTAL, converting an
 * older file once with a VACUUM). Outside a transaction. Returns the free pages left (>= 0)
 * or FAILURE_STORE. */
int64_t store_reclaim(store_t *self, int max_pages);

/* Deletes stored batches whose events all have seq <= `upto`. */
int store_events_trim(store_t *self, int64_t upto);
/* Calls fn for events with seq > since whose topic starts with `prefix` (NULL = all),
 * oldest first, at most `limit`; stops early when fn returns nonzero. */
int store_events_replay(store_t *self, int64_t since, const char *prefix, int limit,
                        int (*fn)(int64_t seq, const void *body, size_t len, void *arg),
                        void *arg);

/* In the open transaction: remembers a specialist a worker announced, seen at `seen` (wall
 * ms). */
int store_specialist_remember(store_t *self, const char *name, int64_t seen);
/* In the open transaction: forgets the specialists last seen before `before` (wall ms)
 * that have no queued or running task. Returns how many went, or FAILURE_STORE. */
int store_specialists_forget(store_t *self, int64_t before);
int store_specialists_load(store_t *self, void (*fn)(const char *name, void *arg), void *arg);
/* Counts a task of `specialist` that ended `state` (done, failed or dead; anything else
 * counts nothing), in the open transaction. */
int store_count_finished(store_t *self, const char *specialist, task_state_t state);
/* Calls fn with each specialist's counts of ended tasks: {done, failed, dead}. */
int store_counters_load(store_t *self, void (*fn)(const char *specialist, const int64_t counts[3],
                                                  void *arg),
                        void *arg);

/* Highest event seq, highest task order, and the number of dead tasks (for startup). */
int64_t store_last_seq(store_t *self);
int64_t store_max_order(store_t *self);
int64_t store_count_state(store_t *self, const char *state);

#endif
