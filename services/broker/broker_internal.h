/* broker_internal: the broker's state and the functions its three parts share:
 * broker.c (loop, timers, dispatch, outbox, events), broker_in.c (messages on `in`) and
 * broker_control.c (requests on `control`). Not for use outside services/broker. */
#ifndef CLOISTER_BROKER_INTERNAL_H
#define CLOISTER_BROKER_INTERNAL_H

#include "broker.h"
#include "curve.h"
#include "disk_guard.h"
#include "key_roles.h"
#include "log.h"
#include "peer_guard.h"
#include "replies.h"
#include "workspace_roots.h"
#include "task.h"
#include "submit.h"
#include "wire.h"

#include <czmq.h>
#include <stdbool.h>

typedef struct worker_t {
    char *id;
    queue_t *queue;
    char *endpoint;
    void *push;          /* raw zmq PUSH socket connected to the worker's PULL */
    task_t *task;        /* what it runs, or NULL */
    bool draining;       /* told to stop a task; no new task until it reports idle */
    int64_t draining_since; /* monotonic ms when it was told */
    char *held_group;    /* while draining: the group of the task it was told to stop, kept
                            locked until it is idle, so no second task of the group runs */
    int64_t last_seen;   /* monotonic ms */
    int misses;          /* heartbeat intervals of silence before it is lost (its transport's,
                            broker_worker_misses) */
    int64_t idle_since;  /* monotonic ms, for fair dispatch */
    char *key;           /* with CURVE: the public key (Z85) it said hello with; its every
                            later message must come from it. NULL on a plain bus */
    char *task_key;      /* with CURVE: its task socket's server key (hello's curve_key) */
    int64_t pid;         /* the process its last hello came from (0: not said): another
                            pid under the same id is a restarted worker */
    int64_t last_ping;   /* the ping_seq of the last ping sent to it. Messages on its task
                            socket arrive in order, so its heartbeat's echo of the last ping
                            it received says which of our messages have reached it */
} worker_t;

/* Something to send once the current transaction is committed. Its bytes live in the
 * outbox arena (broker_t.outbox_bytes), one buffer shared by every pending item, so
 * queueing a message costs no allocation of its own. */
typedef enum { OUTBOX_PUBLISH, OUTBOX_WORKER, OUTBOX_REPLY, OUTBOX_DEFERRED } outbox_kind_t;

typedef struct {
    outbox_kind_t kind;
    size_t target_at;  /* PUBLISH: topic; WORKER: NUL-terminated worker id (arena offsets) */
    size_t target_len;
    zmsg_t *envelope; /* REPLY, DEFERRED: every frame before the request body (identity,
                         REQ's request id and empty delimiter), sent back in front of the
                         reply */
    size_t data_at;   /* arena offset of the message (DEFERRED: of the request) */
    size_t len;
    bool durable;     /* REPLY: says a change was stored (a submit accepted, a cancel...):
                         when the commit finds no room, a disk_full refusal goes instead */
} outbox_item_t;

/* Extra fields of an event beyond the task's own. */
typedef struct {
    const char *kind;
    const char *text;
    const char *error;
    const void *result;
    size_t result_len;
    const char *worker;
    const char *specialist; /* for events without a task (worker.*) */
    int64_t coalesced;      /* task.progress: messages folded into this one (0: none) */
} event_extra_t;

/* At most this many task.progress events per task per second are published; the rest are
 * counted into the next one published (its `coalesced`). */
#define BROKER_PROGRESS_PER_SECOND 20

#define LATENCY_SAMPLES 1024

/* What the store holds as of the last commit, for counters that a refused batch (a commit
 * the disk had no room for) must go back to. */
typedef struct {
    int64_t last_seq, next_order, trimmed_upto, submitted, completed, dead_count;
} broker_committed_t;

struct broker_t {
    broker_config_t config;
    store_t *store;
    void *zmq_context;
    void *in, *events, *control; /* raw zmq sockets */
    char epoch[40];

    zhashx_t *tasks;    /* id -> task_t (active tasks only; owned) */
    zhashx_t *queues;   /* name -> queue_t (owned) */
    zhashx_t *workers;  /* id -> worker_t (owned) */
    zhashx_t *groups;   /* group -> number of holders (intptr_t) while held (broker.c) */
    task_t *running;    /* list of running tasks (linked by prev/next) */
    size_t running_count;
    int64_t next_order;
    int64_t last_seq;
    int64_t trimmed_upto; /* events up to here are trimmed */
    int64_t dead_count;
    int64_t orphan_deadline; /* after a restart: running tasks without a worker until then */
    disk_guard_t *disk;          /* refuses submits when the disk fills */
    workspace_roots_t *workspace_roots; /* where a task's payload.workspace may be */
    curve_t *curve;              /* the broker's keys, NULL when the bus is plain */
    zactor_t *auth;              /* czmq's ZAP handler (zauth), with curve */
    key_roles_t *roles;          /* with curve: what each authorized key may do */
    zlistx_t *configs;           /* cloister.toml as reloaded (broker_reload.c), owned; the
                                    newest is config.config */
    peer_guard_t *guard;         /* the cap on connections to in, events, control */
    replies_t *replies;          /* what is sent on control, bounded per peer */
    int64_t replies_retry_at;    /* monotonic ms: replies wait for a full pipe until then */
    int64_t next_prune;          /* monotonic ms of the next retention pass */
    int64_t next_reclaim;        /* monotonic ms of the next incremental vacuum */
    int64_t garbage_reported_at; /* monotonic ms of the last message.rejected for garbage */
    int64_t garbage_unreported;  /* garbage refused since then without an event */
    broker_committed_t committed; /* the counters as of the last commit */
    log_limit_t full_warnings;    /* refused batches (a full disk) */
    log_limit_t reclaim_warnings; /* failed incremental vacuums */
    log_limit_t refusal_warnings; /* submits refused for a full disk */
    int64_t full_reported_at;    /* monotonic ms of the last task.rejected for a full disk */
    int64_t full_unreported;     /* such refusals since then without an event */

    outbox_item_t *outbox;
    size_t outbox_len, outbox_cap;
    char *outbox_bytes; /* arena holding every pending item's target and data */
    size_t outbox_used, outbox_bytes_cap;
    wire_writer_t *writer; /* scratch for building messages */
    worker_t **idle;       /* scratch for dispatch: the idle workers, longest-idle first */
    size_t idle_cap;

    int64_t next_ping;
    int64_t ping_seq;        /* numbers every ping sent (ping_seq): one counter for all
                                workers, so a ping still on its way on a connection the broker
                                has closed is older than all it sends on the new one */
    int64_t next_check;      /* when a worker may be lost or a lease end (s_next_deadline) */
    int64_t next_not_before; /* monotonic ms a retry waiting for an idle worker is due */
    /* statistics */
    int64_t submitted, completed;
    zhashx_t *rejected; /* reason -> count (as (void *)(intptr_t)) */
    int64_t completed_window[10]; /* completions per second, ring */
    int64_t window_second;
    double latency_ms[LATENCY_SAMPLES];
    size_t latency_count;
};

/* A malloc'd copy of `len` bytes (at least one byte allocated); NULL if memory runs out. */
void *broker_copy(const void *data, size_t len);

/* Sends `worker` a ping: the broker's epoch, heartbeat_ms and the heartbeat misses it is
 * allowed (also the answer to its hello). */
void broker_send_ping(broker_t *self, worker_t *worker);

/* Groups are counted locks: a running task holds its group (one more holder). */
void broker_group_hold(broker_t *self, const char *group);

/* broker.c */
/* When a task dispatched now to `worker` loses its lease: its timeout plus a grace that
 * lets the worker's own timeout report (sent after its job's grace) arrive first. */
int64_t broker_lease_deadline(const broker_t *self, const task_t *task, const worker_t *worker,
                              int64_t now);
/* The heartbeat intervals a worker at `endpoint` may miss before it is lost:
 * remote_heartbeat_misses for tcp:// to an address other than loopback (127.0.0.0/8,
 * ::1, localhost), heartbeat_misses otherwise. */
int broker_worker_misses(const broker_t *self, const char *endpoint);
/* Replaces the worker's PUSH with a new connection to its endpoint (what was queued on the
 * old one is dropped). Returns 0, or a failure with the reason. */
int broker_worker_reconnect(broker_t *self, worker_t *worker);
int broker_emit(broker_t *self, event_type_t event, const task_t *task, const event_extra_t *extra);
/* Emits a refusal event (task.rejected / message.rejected) and logs it; `coalesced` is how
 * many refusals before it got no event of their own (see broker_in.c), 0 for none. */
void broker_emit_rejected(broker_t *self, event_type_t event, const char *task_id, const char *reason,
                          int64_t coalesced);
/* A submit refused: `rc` is FAILURE_INVALID, FAILURE_TOO_BIG, FAILURE_DISK_FULL or
 * FAILURE_DENIED (the reason in failure_message()). Counted (broker_submit_refusal's
 * reason) and published as a
 * task.rejected event. Refusals for a full disk may come by the thousand, and each event
 * needs some of the disk they lack: at most one such event a second is stored (its
 * `coalesced` counts the refusals folded into it), and one log line every 10 s. */
void broker_submit_refused(broker_t *self, const char *task_id, int rc);
void broker_outbox_worker(broker_t *self, const char *worker_id, const void *data, size_t len);
/* A request to answer after the commit, when its peer's pipe has room, with what
 * broker_build_replay makes of it then (replies.h). */
void broker_outbox_defer(broker_t *self, zmsg_t *envelope, const void *request, size_t len);
/* A reply to send after the commit; `durable`: it reports a change the commit stores. */
void broker_outbox_reply(broker_t *self, zmsg_t *envelope, const void *data, size_t len,
                         bool durable);
/* The queue of a specialist (created if `create`), or NULL. `_` and `-` in the name are
 * one: the queue is named with `-`. */
queue_t *broker_queue(broker_t *self, const char *name, bool create);
void broker_count_rejected(broker_t *self, const char *reason);
/* Tells a worker to stop a task; if it is the task the worker runs, its group stays held by
 * the worker until it says it stopped (broker_worker_idle) or is lost. */
void broker_send_cancel(broker_t *self, worker_t *worker, task_t *task, const char *reason);
/* The worker is stopping a task of `group` (NULL: none known): it gets no new task, and the
 * group stays held, until it is idle again. */
void broker_worker_hold_group(broker_t *self, worker_t *worker, const char *group);

/* Task transitions (broker.c). Each writes the store and emits its event. */
/* Puts a queued or running task back in its queue (at its original place). `outcome`, if
 * not NULL, records the attempt that ended ("lost", "expired", "released", ...). A counted
 * failure past max_attempts makes the task dead instead. */
int broker_task_requeue(broker_t *self, task_t *task, const char *outcome, bool count_failure,
                        const char *reason);
/* The worker handed its running task back (release): requeued without counting a failure,
 * to be dispatched again no sooner than delay_ms from now (0: at once). */
int broker_task_release(broker_t *self, task_t *task, int64_t delay_ms, const char *reason);
/* Pauses a specialist: none of its tasks is dispatched until broker_specialist_resume();
 * `reason` (copied) says why in the specialist.paused event, list_specialists and stats.
 * Pausing a paused one changes nothing. */
int broker_specialist_pause(broker_t *self, queue_t *queue, const char *reason);
/* Lifts the pause; `who` (e.g. "pan specialists resume") goes in the specialist.resumed
 * event. Resuming one that is not paused changes nothing. */
int broker_specialist_resume(broker_t *self, queue_t *queue, const char *who);
int broker_task_finish(broker_t *self, task_t *task, task_state_t state, const char *error,
                       const void *result, size_t result_len);
void broker_task_detach(broker_t *self, task_t *task);
/* The worker is idle again: it may take tasks, and the group it held is free. */
void broker_worker_idle(broker_t *self, worker_t *worker);
/* Copies payload.filesChanged into task->files (for session context), if small. */
void broker_task_take_files(task_t *task);
int broker_worker_lost(broker_t *self, worker_t *worker, event_type_t event, const char *reason);

/* Validates a submit (a decoded "submit" message or next-task) and, if new, commits it
 * to the queue. `submitter_key` is the CURVE key that sent it (a next task: the key that
 * submitted its parent; NULL on a plain bus): a payload.force needs an admin key, and the
 * key is kept with the task (cancelling or retrying it later needs the same key or an
 * admin). `*out` is the task (new or existing, active or loaded from the store: *loaded
 * says the caller must destroy it). Returns 0, or FAILURE_INVALID / FAILURE_DENIED /
 * FAILURE_TOO_BIG / FAILURE_DISK_FULL with the reason. */
int broker_submit(broker_t *self, const wire_msg_t *msg, const char *parent,
                  const char *submitter_key, task_t **out, bool *loaded, bool *created);

/* Writes the task's fields (for replies) into the map the caller has opened, with its
 * payload (capped at submit) and, if `with_result`, its result when that keeps the reply
 * under the message cap (`result_omitted` says it did not). */
void broker_write_task(wire_writer_t *w, const task_t *task, bool with_result);

/* The phase a running task's attempt is in (a progress of kind "phase"), or NULL. */
const char *broker_task_phase(const task_t *task);

/* broker_gate.c: refuses a merge-agent submit (not a chained `next` task) unless it names
 * its issue and the commit it merges and that commit passed the issue's review (see
 * broker_gate.c), or payload.force is true, or the configuration lifts the check. Returns
 * 0, FAILURE_INVALID with the reason, or FAILURE_STORE. */
int broker_gate_check(broker_t *self, const wire_msg_t *msg, const char *specialist,
                      const char *issue, const char *parent);

/* (Re)loads the authorized keys into the ZAP handler (with CURVE). Returns 0 or FAILURE_IO. */
int broker_load_authorized(broker_t *self);

/* broker_reload.c: what a reload did. Each is a ", "-separated list of "[table] key". */
typedef struct {
    char applied[2048]; /* changed, and in effect now */
    char restart[1024]; /* changed, and only a restart applies it */
} broker_reload_t;

/* Reads cloister.toml again and applies what can change while running (see
 * broker_reload.c); *report says what changed and what waits for a restart. Returns 0, or
 * the configuration's failure (FAILURE_INVALID: file:line:col ...) with nothing changed. */
int broker_reload(broker_t *self, broker_reload_t *report);

/* broker_in.c */
/* The stats.rejected category of a submit refused with `rc` ("invalid_submit", "denied",
 * "disk_full"). */
const char *broker_submit_refusal(int rc);
/* Handles one message from `in`; `peer_key`: the sender's CURVE public key, NULL when the
 * bus is plain. */
void broker_handle_in(broker_t *self, const void *data, size_t len, const char *peer_key);

/* broker_control.c */
/* Handles one request on `control`; `peer_key`: the requester's CURVE public key, NULL when
 * the bus is plain. */
void broker_handle_control(broker_t *self, zmsg_t *envelope, const void *data, size_t len,
                           const char *peer_key);
/* The page a deferred replay request gets (a replies_build_fn; `arg` is the broker): built in
 * the broker's writer, valid until its next message. */
const void *broker_build_replay(void *arg, const void *request, size_t len, size_t *reply_len);

#endif
