/* task: the broker's in-memory record of an active (queued or running) task, and the
 * per-specialist queues that order them. Terminal tasks live only in the store.
 *
 * A queue holds one FIFO list per priority, ordered by `order` (the submit sequence), so a
 * requeued task goes back to its original place. Dispatch takes the first eligible task of
 * the highest priority: not waiting for `not_before`, and not in a group that is in flight. */
#ifndef CLOISTER_BROKER_TASK_H
#define CLOISTER_BROKER_TASK_H

#include "protocol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct worker_t;
struct queue_t;

typedef struct task_t {
    char *id;
    int64_t rowid; /* the store's row id: updates address the row by it */
    struct queue_t *queue; /* owns the specialist name */
    priority_t priority;
    task_state_t state;
    int64_t order; /* submit sequence: FIFO inside a priority */
    int attempt;   /* dispatches so far */
    int failures;  /* failed attempts, counted against max_attempts */
    int max_attempts;
    int timeout_s;
    int64_t not_before; /* wall ms; 0 = ready */
    int64_t created, updated; /* wall ms */
    char *title, *issue, *source, *group, *parent, *error, *worker_id;
    char *worker_key; /* running: the CURVE key (Z85) of the worker it was given to, stored
                         with the attempt so a restart keeps it; NULL on a plain bus */
    char *submitter_key; /* the CURVE key that submitted it (a next task: its parent's);
                            NULL on a plain bus */
    void *payload;
    size_t payload_len;
    void *files; /* payload.filesChanged as raw msgpack, for session context */
    size_t files_len;
    /* This task as an entry of other tasks' session context ("active"), encoded once when
     * it is dispatched, since every later dispatch lists it again. */
    void *context_entry;
    size_t context_entry_len;
    /* only on records loaded from the store for display (terminal tasks) */
    char *specialist;
    void *result;
    size_t result_len;
    /* running */
    struct worker_t *worker;
    /* The seq of the task.dispatched event that alone records this attempt (its store row
     * still says queued with the attempt before), or 0 when the row says it (broker.c,
     * "dispatches"). */
    int64_t unsaved_dispatch;
    int64_t lease_until;   /* monotonic ms */
    int64_t dispatched_at; /* monotonic ms */
    int64_t dispatch_ping; /* the ping_seq of the last ping sent to its worker before the
                              task message: a later one received proves this one was */
    /* progress rate limit (broker_in.c): the current one-second window, the events
     * published in it, and the progress messages folded since the last one published */
    int64_t progress_window; /* monotonic ms when it began */
    int progress_sent;
    int64_t progress_folded;
    /* the phase the running attempt said it is in (a progress of kind "phase", e.g.
     * "resolving conflicts in 2 files"), shown while `phase_attempt` is the attempt */
    char *phase;
    int phase_attempt;
    /* queue links (queued) or running-list links (running) */
    struct task_t *prev, *next;
} task_t;

typedef struct queue_t {
    char *name;
    task_t *head[PRIORITY_COUNT], *tail[PRIORITY_COUNT];
    size_t depth[PRIORITY_COUNT];
    int default_timeout_s;
    int default_max_attempts;
    size_t done, failed, dead; /* ever (the store's counters) */
    char *paused; /* why none of its tasks is dispatched now (a worker's release paused the
                     specialist until someone resumes it), or NULL. Owned */
} queue_t;

/* A new task with a copy of `id`; every other field zeroed. Caller owns it. */
task_t *task_new(const char *id);
void task_destroy(task_t **self_p);

/* Replaces *field with a copy of value (NULL clears it). */
void task_set_text(char **field, const char *value);

queue_t *queue_new(const char *name, int default_timeout_s, int default_max_attempts);
void queue_destroy(queue_t **self_p);

/* Inserts a queued task at its place (by order) in its priority's list. */
void queue_insert(queue_t *self, task_t *task);
/* Unlinks a task from its list. */
void queue_remove(queue_t *self, task_t *task);
/* Empties the queue without touching its tasks (their owner frees them). */
void queue_clear(queue_t *self);
size_t queue_total(const queue_t *self);

#endif
