/* broker: the loop, timers, dispatch, events and the outbox (see broker.h); task
 * transitions and submits are in broker_task.c. */
#include "broker_internal.h"
#include "broker_prior.h"

#include "clock.h"
#include "fd_reserve.h"
#include "failure.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>
#include <zmq.h>

/* How many messages one socket may deliver per iteration: bounds the latency of one
 * group commit while letting a burst share a single fsync. */
#define BATCH_LIMIT 2048
/* Running tasks listed in a dispatched task's session context. */
#define CONTEXT_ACTIVE_LIMIT 10

static const char *const s_builtin_specialists[] = {"review-agent", "test-agent", "merge-agent", NULL};

/* ---- outbox ---- */

/* An arena grown past this is released after a flush, so one burst of huge messages does
 * not keep its memory for ever. */
#define OUTBOX_ARENA_KEEP (4 * 1024 * 1024)

void *broker_copy(const void *data, size_t len)
{
    void *copy = malloc(len ? len : 1);
    if (copy != NULL && len > 0)
        memcpy(copy, data, len);
    return copy;
}

/* Makes room for `more` bytes in the arena. */
static bool s_outbox_reserve(broker_t *self, size_t more)
{
    if (self->outbox_bytes_cap - self->outbox_used >= more)
        return true;
    size_t cap = self->outbox_bytes_cap ? self->outbox_bytes_cap : 64 * 1024;
    while (cap - self->outbox_used < more)
        cap *= 2;
    char *grown = realloc(self->outbox_bytes, cap);
    if (grown == NULL)
        return false;
    self->outbox_bytes = grown;
    self->outbox_bytes_cap = cap;
    return true;
}

/* Queues `item` with copies of its target (NUL-terminated; may be NULL) and data. Takes
 * the item's envelope. */
static void s_outbox_push(broker_t *self, outbox_item_t item, const char *target,
                          size_t target_len, const void *data, size_t len)
{
    if (self->outbox_len == self->outbox_cap) {
        size_t cap = self->outbox_cap ? self->outbox_cap * 2 : 256;
        outbox_item_t *grown = realloc(self->outbox, cap * sizeof *grown);
        if (grown == NULL)
            goto no_memory;
        self->outbox = grown;
        self->outbox_cap = cap;
    }
    size_t need = (target ? target_len + 1 : 0) + len;
    if (!s_outbox_reserve(self, need))
        goto no_memory;
    item.target_at = self->outbox_used;
    item.target_len = target ? target_len : 0;
    if (target != NULL) {
        memcpy(self->outbox_bytes + self->outbox_used, target, target_len);
        self->outbox_bytes[self->outbox_used + target_len] = '\0';
        self->outbox_used += target_len + 1;
    }
    item.data_at = self->outbox_used;
    item.len = len;
    if (len > 0)
        memcpy(self->outbox_bytes + self->outbox_used, data, len);
    self->outbox_used += len;
    self->outbox[self->outbox_len++] = item;
    if (item.envelope != NULL)
        replies_hold(self->replies, item.envelope, len);
    return;
no_memory:
    log_error("out of memory queueing an outgoing message");
    zmsg_destroy(&item.envelope);
}

void broker_outbox_worker(broker_t *self, const char *worker_id, const void *data, size_t len)
{
    outbox_item_t item = {.kind = OUTBOX_WORKER};
    s_outbox_push(self, item, worker_id, strlen(worker_id), data, len);
}

void broker_outbox_reply(broker_t *self, zmsg_t *envelope, const void *data, size_t len,
                         bool durable)
{
    outbox_item_t item = {.kind = OUTBOX_REPLY, .envelope = zmsg_dup(envelope),
                          .durable = durable};
    s_outbox_push(self, item, NULL, 0, data, len);
}

void broker_outbox_defer(broker_t *self, zmsg_t *envelope, const void *request, size_t len)
{
    outbox_item_t item = {.kind = OUTBOX_DEFERRED, .envelope = zmsg_dup(envelope)};
    s_outbox_push(self, item, NULL, 0, request, len);
}

/* Empties the outbox (after its items were sent or dropped). */
static void s_outbox_clear(broker_t *self)
{
    for (size_t i = 0; i < self->outbox_len; i++)
        zmsg_destroy(&self->outbox[i].envelope);
    self->outbox_len = 0;
    self->outbox_used = 0;
    if (self->outbox_bytes_cap > OUTBOX_ARENA_KEEP) {
        free(self->outbox_bytes);
        self->outbox_bytes = NULL;
        self->outbox_bytes_cap = 0;
    }
}

/* Hands a reply, or a deferred request, to the replies module (which sends it when the
 * peer's pipe has room). */
static void s_outbox_answer(broker_t *self, const outbox_item_t *item)
{
    const char *data = self->outbox_bytes + item->data_at;
    if (item->kind == OUTBOX_DEFERRED)
        replies_defer(self->replies, item->envelope, data, item->len, item->len);
    else
        replies_send(self->replies, item->envelope, data, item->len, item->len);
}

/* A PUSH that cannot take a message has no connection left: libzmq gives up on one whose
 * handshake the worker refused (its ZAP handler, say, while it could not read the broker's
 * key), and never tries again, so the worker would stay deaf however often it said hello.
 * A new connection queues the message until its handshake is done. */
static void s_send_again(broker_t *self, worker_t *worker, const void *data, size_t len)
{
    int why = errno;
    if (why != EAGAIN || broker_worker_reconnect(self, worker) != 0 ||
        zmq_send(worker->push, data, len, ZMQ_DONTWAIT) < 0) {
        log_warn("could not send to worker %s: %s", worker->id, zmq_strerror(why));
        return;
    }
    log_info("worker %s: its task connection was gone; connected again", worker->id);
}

static void s_outbox_flush(broker_t *self)
{
    for (size_t i = 0; i < self->outbox_len; i++) {
        outbox_item_t *item = &self->outbox[i];
        const char *target = self->outbox_bytes + item->target_at;
        const char *data = self->outbox_bytes + item->data_at;
        if (item->kind == OUTBOX_PUBLISH) {
            zmq_send(self->events, target, item->target_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(self->events, data, item->len, ZMQ_DONTWAIT);
        } else if (item->kind == OUTBOX_WORKER) {
            worker_t *worker = zhashx_lookup(self->workers, target);
            if (worker != NULL && zmq_send(worker->push, data, item->len, ZMQ_DONTWAIT) < 0)
                s_send_again(self, worker, data, item->len);
        } else {
            s_outbox_answer(self, item);
        }
    }
    s_outbox_clear(self);
}

/* The commit found no room, so nothing of the iteration happened: no event is published,
 * nothing goes to a worker, and a reply reporting a change becomes a disk_full refusal
 * (`reason`); replies that only read go out as they are. */
static void s_outbox_refuse(broker_t *self, const char *reason)
{
    wire_writer_t *w = self->writer;
    for (size_t i = 0; i < self->outbox_len; i++) {
        outbox_item_t *item = &self->outbox[i];
        if (item->kind != OUTBOX_REPLY && item->kind != OUTBOX_DEFERRED)
            continue;
        if (!item->durable) {
            s_outbox_answer(self, item);
            continue;
        }
        wire_writer_start(w, MSG_REPLY);
        wire_put_bool(w, FIELD_OK, false);
        wire_put_str(w, FIELD_CODE, failure_name(FAILURE_DISK_FULL));
        wire_put_str(w, FIELD_ERROR, reason);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        replies_send(self->replies, item->envelope, data, len, item->len);
    }
    s_outbox_clear(self);
}

/* Drops everything queued for after the commit (the commit failed). */
static void s_outbox_discard(broker_t *self)
{
    for (size_t i = 0; i < self->outbox_len; i++) {
        if (self->outbox[i].envelope != NULL)
            replies_release(self->replies, self->outbox[i].envelope, self->outbox[i].len);
    }
    s_outbox_clear(self);
}

/* ---- events ---- */

#define EVENT_RESULT_CAP (1024 * 1024)
/* Free pages given back per reclaim, and how often (s_reclaim). */
#define BROKER_RECLAIM_PAGES 1024
#define BROKER_RECLAIM_MS 5000
/* Rows deleted per retention pass (s_prune_finished). */
#define BROKER_PRUNE_BATCH 2000
/* The events' send high-water mark, in messages per subscriber (see s_socket). An event
 * queued for a subscriber is shared with the other subscribers' queues (ZeroMQ counts its
 * references), but each queued one costs about 140 bytes per subscriber: 1,000 of them bound
 * a subscriber that never reads to about 140 KB of the broker's memory (10,000 made it
 * 1.4 MB; 200 such subscribers grew the broker by 280 MB). A follower that falls further
 * behind finds a gap in the seqs and replays it from the store. */
#define BROKER_EVENTS_HWM 1000
/* The kernel's send buffer for each subscriber's connection, fixed instead of grown by
 * TCP's autotuning (up to 4 MB a connection): what a subscriber that never reads holds. */
#define BROKER_EVENTS_SNDBUF (128 * 1024)

/* Writes "<event>/<specialist>" into buf (truncated to size - 1 bytes, NUL-terminated)
 * and returns its length. */
static size_t s_topic(char *buf, size_t size, const char *event, const char *specialist)
{
    size_t event_len = strlen(event);
    size_t specialist_len = specialist ? strlen(specialist) : 0;
    size_t at = 0;
    size_t take = event_len < size - 1 ? event_len : size - 1;
    memcpy(buf, event, take);
    at = take;
    if (at < size - 1)
        buf[at++] = '/';
    take = specialist_len < size - 1 - at ? specialist_len : size - 1 - at;
    if (take > 0)
        memcpy(buf + at, specialist, take);
    at += take;
    buf[at] = '\0';
    return at;
}

int broker_emit(broker_t *self, event_type_t event, const task_t *task, const event_extra_t *extra)
{
    int rc = store_begin(self->store);
    if (rc != 0)
        return rc;
    wire_writer_t *w = self->writer;
    int64_t seq = ++self->last_seq;
    wire_writer_start(w, MSG_EVENT);
    wire_put_int(w, FIELD_SEQ, seq);
    wire_put_str(w, FIELD_EVENT, event_type_name(event));
    wire_put_int(w, FIELD_TIME, clock_wall_ms());
    const char *specialist = extra ? extra->specialist : NULL;
    if (task != NULL) {
        if (specialist == NULL)
            specialist = task->queue ? task->queue->name : task->specialist;
        wire_put_str(w, FIELD_TASK, task->id);
        wire_put_str(w, FIELD_SPECIALIST, specialist);
        /* A rejected submit has no queue: it only carries its id. */
        if (specialist != NULL) {
            wire_put_str(w, FIELD_PRIORITY, priority_name(task->priority));
            wire_put_str(w, FIELD_STATE, task_state_name(task->state));
            wire_put_int(w, FIELD_ATTEMPT, task->attempt);
        }
        wire_put_str(w, FIELD_TITLE, task->title);
        wire_put_str(w, FIELD_ISSUE, task->issue);
        wire_put_str(w, FIELD_GROUP, task->group);
        wire_put_str(w, FIELD_PARENT, task->parent);
        if (task->not_before > 0 && task->state == TASK_QUEUED)
            wire_put_int(w, FIELD_NOT_BEFORE, task->not_before);
    }
    if (task == NULL)
        wire_put_str(w, FIELD_SPECIALIST, specialist);
    const char *worker = extra && extra->worker ? extra->worker : task ? task->worker_id : NULL;
    wire_put_str(w, FIELD_WORKER, worker);
    if (extra != NULL) {
        wire_put_str(w, FIELD_KIND, extra->kind);
        wire_put_str(w, FIELD_TEXT, extra->text);
        if (extra->coalesced > 0)
            wire_put_int(w, FIELD_COALESCED, extra->coalesced);
        wire_put_str(w, FIELD_ERROR, extra->error);
        /* An event must stay far below the message cap; a huge result is only in the store. */
        if (extra->result_len <= EVENT_RESULT_CAP)
            wire_put_raw(w, FIELD_RESULT, extra->result, extra->result_len);
        else
            wire_put_bool(w, FIELD_RESULT_OMITTED, true);
    }
    size_t len;
    const void *body = wire_writer_data(w, &len);
    char topic[256];
    size_t topic_len = s_topic(topic, sizeof topic, event_type_name(event), specialist);
    rc = store_event_insert(self->store, seq, topic, topic_len, body, len);
    if (rc != 0)
        return rc;
    outbox_item_t item = {.kind = OUTBOX_PUBLISH};
    s_outbox_push(self, item, topic, topic_len, body, len);
    return 0;
}

void broker_count_rejected(broker_t *self, const char *reason)
{
    intptr_t count = (intptr_t)zhashx_lookup(self->rejected, reason);
    zhashx_update(self->rejected, reason, (void *)(count + 1));
}

static void s_emit_refusal(broker_t *self, event_type_t event, const char *task_id,
                           const char *reason, int64_t coalesced)
{
    task_t rejected = {.id = (char *)task_id, .state = TASK_CANCELLED, .priority = PRIORITY_NORMAL};
    event_extra_t extra = {.error = reason, .coalesced = coalesced};
    broker_emit(self, event, task_id ? &rejected : NULL, &extra);
}

void broker_emit_rejected(broker_t *self, event_type_t event, const char *task_id, const char *reason,
                          int64_t coalesced)
{
    log_warn("%s%s%s: %s%s", event_type_name(event), task_id ? " " : "", task_id ? task_id : "", reason,
             coalesced > 0 ? " (and more refused without an event: see coalesced)" : "");
    s_emit_refusal(self, event, task_id, reason, coalesced);
}

void broker_submit_refused(broker_t *self, const char *task_id, int rc)
{
    if (rc != FAILURE_DISK_FULL) {
        broker_count_rejected(self, broker_submit_refusal(rc));
        broker_emit_rejected(self, EVENT_TASK_REJECTED, task_id, failure_message(), 0);
        return;
    }
    broker_count_rejected(self, "disk_full");
    log_warn_limited(&self->refusal_warnings, "task.rejected %s: %s", task_id ? task_id : "",
                     failure_message());
    int64_t now = clock_now_ms();
    if (self->full_reported_at != 0 && now - self->full_reported_at < 1000) {
        self->full_unreported++;
        return;
    }
    self->full_reported_at = now;
    s_emit_refusal(self, EVENT_TASK_REJECTED, task_id, failure_message(), self->full_unreported);
    self->full_unreported = 0;
}

/* ---- queues and specialists ---- */

queue_t *broker_queue(broker_t *self, const char *specialist, bool create)
{
    char buf[SUBMIT_SPECIALIST_NAME_MAX + 1];
    const char *name = submit_specialist_canonical(specialist, buf);
    queue_t *queue = zhashx_lookup(self->queues, name);
    if (queue != NULL || !create)
        return queue;
    queue = queue_new(name, (int)config_specialist_timeout_s(self->config.config, name),
                      (int)config_specialist_max_attempts(self->config.config, name));
    if (queue != NULL)
        zhashx_insert(self->queues, name, queue);
    return queue;
}

/* ---- dispatch ---- */

/* The specialist skeleton gives a job 5 s after its timeout before it reports. */
#define WORKER_TIMEOUT_GRACE_MS 5000

/* True when a tcp:// endpoint's host is this machine's loopback. */
static bool s_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0 ||
           strncmp(host, "[::1]:", 6) == 0;
}

int broker_worker_misses(const broker_t *self, const char *endpoint)
{
    bool remote = strncmp(endpoint, "tcp://", 6) == 0 && !s_loopback(endpoint + 6);
    return remote ? self->config.remote_heartbeat_misses : self->config.heartbeat_misses;
}

int64_t broker_lease_deadline(const broker_t *self, const task_t *task, const worker_t *worker,
                              int64_t now)
{
    int64_t grace = WORKER_TIMEOUT_GRACE_MS + (int64_t)self->config.heartbeat_ms * worker->misses;
    return now + (int64_t)task->timeout_s * 1000 + grace;
}

static bool s_eligible(broker_t *self, const task_t *task, int64_t now_wall)
{
    if (task->not_before > now_wall)
        return false;
    if (task->group == NULL)
        return true;
    /* Which groups the workers were still stopping tasks of is not stored: after a start,
     * a grouped task waits until they have had the heartbeat grace to say hello again
     * (a hello naming a task it no longer owns holds that task's group). */
    if (clock_now_ms() < self->orphan_deadline)
        return false;
    return zhashx_lookup(self->groups, task->group) == NULL;
}

/* The first eligible task of the queue. A task passed over for its not_before makes the
 * loop wake when it is due (next_not_before), since an idle worker waits for it. */
static task_t *s_pick(broker_t *self, queue_t *queue, int64_t now_wall)
{
    for (int p = 0; p < PRIORITY_COUNT; p++)
        for (task_t *task = queue->head[p]; task != NULL; task = task->next) {
            if (s_eligible(self, task, now_wall))
                return task;
            if (task->not_before > now_wall) {
                int64_t due = clock_now_ms() + (task->not_before - now_wall);
                if (due < self->next_not_before)
                    self->next_not_before = due;
            }
        }
    return NULL;
}

/* Encodes the task's entry for other tasks' session context (see task_t.context_entry).
 * Uses the broker's scratch writer, so it must run before a message is built in it. */
static void s_encode_context_entry(broker_t *self, task_t *task)
{
    wire_writer_t *w = self->writer;
    wire_writer_start_map(w);
    wire_put_str(w, FIELD_ID, task->id);
    wire_put_str(w, FIELD_TITLE, task->title);
    wire_put_str(w, FIELD_ISSUE, task->issue);
    wire_put_str(w, FIELD_SPECIALIST, task->queue->name);
    wire_put_raw(w, FIELD_FILES, task->files, task->files_len);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    free(task->context_entry);
    task->context_entry = broker_copy(data, len);
    task->context_entry_len = task->context_entry ? len : 0;
}

/* The session context sent with a task: the other running tasks and the prior attempts of
 * the same issue by this specialist. */
static void s_write_context(broker_t *self, wire_writer_t *w, const task_t *task)
{
    wire_open_map(w, FIELD_CONTEXT);
    wire_open_array(w, FIELD_ACTIVE);
    int listed = 0;
    for (task_t *other = self->running; other && listed < CONTEXT_ACTIVE_LIMIT; other = other->next) {
        if (other == task || other->context_entry == NULL)
            continue;
        wire_elem_raw(w, other->context_entry, other->context_entry_len);
        listed++;
    }
    wire_close(w);
    broker_prior_write(self, w, task);
    wire_close(w);
}

/* Puts `task` at the head of the running list and holds its group. */
static void s_running_push(broker_t *self, task_t *task)
{
    task->prev = NULL;
    task->next = self->running;
    if (self->running)
        self->running->prev = task;
    self->running = task;
    self->running_count++;
    if (task->group)
        broker_group_hold(self, task->group);
}

/* Dispatches. On a plain bus a dispatch writes no task row: its task.dispatched event
 * (task, attempt, worker), committed in the same transaction as everything else of the
 * iteration, records it, and the row keeps saying queued with the attempt before. Most
 * tasks end before their row is written again with their outcome, so that is one row write
 * fewer per task. The running attempt must survive a restart (fencing: a stale worker's
 * result names an older attempt), so:
 *   - recovery (s_recover_active) reads the stored task.dispatched events and gives each
 *     active task the latest attempt they record past its row's, after its latest
 *     task.queued event (so a dispatch of an earlier life of the same id counts not);
 *   - before events are trimmed (s_trim_events), a running task whose dispatch event is
 *     among them has its row written (store_task_dispatched); task->unsaved_dispatch is
 *     that event's seq until then.
 * With CURVE the row is written at once: it holds the worker's key, which the events do not
 * carry and which a restarted broker needs (broker_in.c, s_foreign_key). */
static int s_dispatch_one(broker_t *self, worker_t *worker, task_t *task)
{
    queue_remove(task->queue, task);
    task->state = TASK_RUNNING;
    task->attempt++;
    task->worker = worker;
    task_set_text(&task->worker_id, worker->id);
    task_set_text(&task->worker_key, worker->key);
    task->dispatched_at = clock_now_ms();
    /* Pings go out at once, the task message with the outbox at the end of this iteration:
     * every ping numbered after this one follows it on the wire. */
    task->dispatch_ping = worker->last_ping;
    task->lease_until = broker_lease_deadline(self, task, worker, task->dispatched_at);
    task->updated = clock_wall_ms();
    s_running_push(self, task);
    worker->task = task;

    /* On a plain bus the dispatch is stored only as its event (see "dispatches" above). */
    bool eager = self->curve != NULL;
    int rc = store_begin(self->store);
    if (rc == 0 && eager)
        rc = store_task_dispatched(self->store, task);
    if (rc == 0)
        rc = broker_emit(self, EVENT_TASK_DISPATCHED, task, NULL);
    if (rc != 0)
        return rc;
    task->unsaved_dispatch = eager ? 0 : self->last_seq;

    s_encode_context_entry(self, task);
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_TASK);
    wire_put_str(w, FIELD_WORKER, worker->id);
    wire_put_str(w, FIELD_ID, task->id);
    wire_put_int(w, FIELD_ATTEMPT, task->attempt);
    wire_put_str(w, FIELD_SPECIALIST, task->queue->name);
    wire_put_str(w, FIELD_PRIORITY, priority_name(task->priority));
    wire_put_str(w, FIELD_SOURCE, task->source);
    wire_put_str(w, FIELD_TITLE, task->title);
    wire_put_str(w, FIELD_ISSUE, task->issue);
    wire_put_str(w, FIELD_GROUP, task->group);
    wire_put_int(w, FIELD_MAX_ATTEMPTS, task->max_attempts);
    wire_put_int(w, FIELD_TIMEOUT_S, task->timeout_s);
    wire_put_int(w, FIELD_PING_SEQ, task->dispatch_ping);
    wire_put_raw(w, FIELD_PAYLOAD, task->payload, task->payload_len);
    s_write_context(self, w, task);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    if (len > WIRE_MAX_MESSAGE) {
        char reason[128];
        snprintf(reason, sizeof reason, "the task message is %zu bytes, over the %d-byte cap", len,
                 WIRE_MAX_MESSAGE);
        return broker_task_finish(self, task, TASK_FAILED, reason, NULL, 0);
    }
    broker_outbox_worker(self, worker->id, data, len);
    return 0;
}

static int s_longest_idle_first(const void *a, const void *b)
{
    const worker_t *x = *(worker_t *const *)a, *y = *(worker_t *const *)b;
    return x->idle_since < y->idle_since ? -1 : x->idle_since > y->idle_since;
}

/* Hands the best eligible task to every idle worker, longest-idle first. The idle workers
 * are collected once per call (not once per task handed out): dispatching only takes
 * tasks and locks groups, so a worker with nothing eligible now stays so in this call. */
static int s_dispatch(broker_t *self)
{
    size_t idle = 0;
    for (worker_t *worker = zhashx_first(self->workers); worker;
         worker = zhashx_next(self->workers)) {
        if (worker->task || worker->draining || worker->queue->paused != NULL ||
            queue_total(worker->queue) == 0)
            continue;
        if (idle == self->idle_cap) {
            size_t cap = self->idle_cap ? self->idle_cap * 2 : 64;
            worker_t **grown = realloc(self->idle, cap * sizeof *grown);
            if (grown == NULL)
                break; /* the rest wait for the next iteration */
            self->idle = grown;
            self->idle_cap = cap;
        }
        self->idle[idle++] = worker;
    }
    self->next_not_before = INT64_MAX;
    if (idle == 0)
        return 0;
    qsort(self->idle, idle, sizeof *self->idle, s_longest_idle_first);
    int64_t now_wall = clock_wall_ms();
    for (size_t i = 0; i < idle; i++) {
        task_t *task = s_pick(self, self->idle[i]->queue, now_wall);
        if (task == NULL)
            continue;
        int rc = s_dispatch_one(self, self->idle[i], task);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- timers ---- */

void broker_send_ping(broker_t *self, worker_t *worker)
{
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_PING);
    wire_put_str(w, FIELD_WORKER, worker->id);
    wire_put_str(w, FIELD_EPOCH, self->epoch);
    wire_put_int(w, FIELD_HEARTBEAT_MS, self->config.heartbeat_ms);
    wire_put_int(w, FIELD_HEARTBEAT_MISSES, worker->misses);
    worker->last_ping = ++self->ping_seq;
    wire_put_int(w, FIELD_PING_SEQ, worker->last_ping);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zmq_send(worker->push, data, len, ZMQ_DONTWAIT);
}

static void s_ping_workers(broker_t *self)
{
    for (worker_t *worker = zhashx_first(self->workers); worker;
         worker = zhashx_next(self->workers))
        broker_send_ping(self, worker);
}

static int s_check_workers(broker_t *self, int64_t now)
{
    /* Collect first: losing a worker deletes it from the table we iterate. */
    zlistx_t *lost = zlistx_new();
    for (worker_t *worker = zhashx_first(self->workers); worker;
         worker = zhashx_next(self->workers))
        if (now - worker->last_seen > (int64_t)self->config.heartbeat_ms * worker->misses)
            zlistx_add_end(lost, worker);
    int rc = 0;
    for (worker_t *worker = zlistx_first(lost); worker && rc == 0; worker = zlistx_next(lost)) {
        char reason[128];
        snprintf(reason, sizeof reason, "worker %s silent for %lld ms", worker->id,
                 (long long)(now - worker->last_seen));
        rc = broker_worker_lost(self, worker, EVENT_WORKER_LOST, reason);
    }
    zlistx_destroy(&lost);
    return rc;
}

static int s_check_leases(broker_t *self, int64_t now)
{
    int rc = 0;
    task_t *task = self->running;
    while (task != NULL && rc == 0) {
        task_t *next = task->next;
        if (task->worker == NULL && now >= self->orphan_deadline) {
            /* Recovered after a restart and its worker never came back. */
            rc = broker_task_requeue(self, task, "lost", false,
                                     "its worker did not return after a broker restart");
        } else if (task->worker != NULL && now >= task->lease_until) {
            char reason[128];
            snprintf(reason, sizeof reason, "lease of %d s expired", task->timeout_s);
            broker_send_cancel(self, task->worker, task, reason);
            rc = broker_task_requeue(self, task, "expired", true, reason);
        }
        task = next;
    }
    return rc;
}

/* Trims the stored events to the retention, at most once per 1024 new events. A running
 * task whose dispatch only an event about to go records has its row written first (see
 * "dispatches" above). */
static int s_trim_events(broker_t *self)
{
    int64_t upto = self->last_seq - self->config.event_retention;
    if (upto <= 0 || upto - self->trimmed_upto < 1024)
        return 0;
    self->trimmed_upto = upto;
    int rc = store_begin(self->store);
    for (task_t *task = self->running; rc == 0 && task != NULL; task = task->next) {
        if (task->unsaved_dispatch == 0 || task->unsaved_dispatch > upto)
            continue;
        rc = store_task_dispatched(self->store, task);
        task->unsaved_dispatch = 0;
    }
    return rc ? rc : store_events_trim(self->store, upto);
}

/* Retention: deletes finished tasks (and attempts) older than keep_finished_days, a batch
 * at a time so no commit grows long; a full batch means more soon, else a minute's rest. */
static int s_prune_finished(broker_t *self, int64_t now)
{
    if (self->config.keep_finished_days <= 0 || now < self->next_prune)
        return 0;
    int64_t before = clock_wall_ms() - self->config.keep_finished_days * 24 * 3600 * 1000;
    int removed = store_prune_finished(self->store, before, BROKER_PRUNE_BATCH);
    if (removed < 0)
        return removed;
    self->next_prune = now + (removed >= BROKER_PRUNE_BATCH ? 100 : 60 * 1000);
    return 0;
}

/* Gives the pages that retention and the event trim freed back to the file system, a
 * bounded amount at a time, between transactions. A failure is only logged: the pages stay
 * free for SQLite to reuse. */
static void s_reclaim(broker_t *self, int64_t now)
{
    if (now < self->next_reclaim)
        return;
    self->next_reclaim = now + BROKER_RECLAIM_MS;
    if (store_reclaim(self->store, BROKER_RECLAIM_PAGES) < 0)
        log_warn_limited(&self->reclaim_warnings, "reclaiming free pages: %s", failure_message());
}

/* At start: a specialist name no worker announced within keep_finished_days, and with no
 * task queued or running, is forgotten (a submit to it is refused again until a worker
 * says hello). */
static int s_forget_specialists(broker_t *self)
{
    int64_t days = self->config.keep_finished_days;
    if (days <= 0)
        return 0;
    int64_t before = clock_wall_ms() - days * 24 * 3600 * 1000;
    int forgotten = store_specialists_forget(self->store, before);
    /* A worker id whose key has not said hello for as long is free again. */
    int ids = forgotten < 0 ? 0 : store_worker_keys_forget(self->store, before);
    if (ids < 0)
        forgotten = ids;
    int rc = store_commit(self->store); /* rolls back a failed forget */
    if (forgotten < 0)
        rc = forgotten;
    if (rc == FAILURE_DISK_FULL) {
        log_warn("not forgetting old specialist names now: %s", failure_message());
        return 0;
    }
    if (rc == 0 && forgotten > 0)
        log_info("forgot %d specialist name%s no worker announced in %lld days", forgotten,
                 forgotten == 1 ? "" : "s", (long long)days);
    return rc;
}

static int s_run_timers(broker_t *self, int64_t now)
{
    if (now >= self->next_ping) {
        s_ping_workers(self);
        self->next_ping = now + self->config.heartbeat_ms;
    }
    if (now < self->next_check)
        return 0;
    int rc = s_check_workers(self, now);
    if (rc == 0)
        rc = s_check_leases(self, now);
    if (rc == 0)
        rc = s_prune_finished(self, now);
    return rc;
}

/* ---- recovery: from the store at start, and after a commit the disk had no room for ---- */

static void s_recover_running(broker_t *self, task_t *task);

static void s_recover_task(task_t *task, void *arg)
{
    broker_t *self = arg;
    queue_t *queue = broker_queue(self, task->specialist, true);
    if (queue == NULL) {
        task_destroy(&task);
        return;
    }
    task->queue = queue;
    broker_task_take_files(task);
    zhashx_insert(self->tasks, task->id, task);
    if (task->state == TASK_QUEUED) {
        queue_insert(queue, task);
        return;
    }
    s_recover_running(self, task);
}

/* Recovery's pass over the stored events (see "dispatches" above). */
typedef struct {
    broker_t *broker;
    /* active task id -> seq of its latest task.queued event (a submit, or a requeue that
     * wrote its row): a dispatch event before it belongs to an earlier life of the id (a
     * task pruned, then submitted again) or is already in the row. */
    zhashx_t *queued_at;
} recovery_t;

/* The task an event names, if active and the event is well-formed (*event to destroy). */
static task_t *s_event_task(broker_t *self, const void *body, size_t len, wire_msg_t **event)
{
    if (wire_decode(body, len, event) != 0)
        return NULL;
    return zhashx_lookup(self->tasks, wire_msg_str(*event, FIELD_TASK, ""));
}

static int s_recover_queued(int64_t seq, const void *body, size_t len, void *arg)
{
    recovery_t *recovery = arg;
    wire_msg_t *event = NULL;
    task_t *task = s_event_task(recovery->broker, body, len, &event);
    if (task != NULL)
        zhashx_update(recovery->queued_at, task->id, (void *)(intptr_t)seq);
    wire_msg_destroy(&event);
    return 0;
}

/* A task.dispatched event after the task's latest task.queued one, with a later attempt
 * than its row holds: that attempt was given to the event's worker. Returns 0 (go on). */
static int s_recover_dispatch(int64_t seq, const void *body, size_t len, void *arg)
{
    recovery_t *recovery = arg;
    wire_msg_t *event = NULL;
    task_t *task = s_event_task(recovery->broker, body, len, &event);
    int attempt = event ? (int)wire_msg_int(event, FIELD_ATTEMPT, 0) : 0;
    const char *worker = event ? wire_msg_str(event, FIELD_WORKER, NULL) : NULL;
    if (task != NULL && worker != NULL && attempt > task->attempt &&
        seq > (intptr_t)zhashx_lookup(recovery->queued_at, task->id)) {
        if (task->state == TASK_QUEUED) {
            queue_remove(task->queue, task);
            task->state = TASK_RUNNING;
            s_recover_running(recovery->broker, task);
        }
        task->attempt = attempt;
        task_set_text(&task->worker_id, worker);
        task->updated = wire_msg_int(event, FIELD_TIME, task->updated);
        task->unsaved_dispatch = seq;
    }
    wire_msg_destroy(&event);
    return 0;
}

/* Reads the active tasks back from the store: their rows, then the dispatches that only
 * the stored events record. */
static int s_recover_active(broker_t *self)
{
    int rc = store_task_load_active(self->store, s_recover_task, self);
    recovery_t recovery = {self, zhashx_new()};
    if (recovery.queued_at == NULL)
        return rc ? rc : failure_set(FAILURE_MEMORY, "out of memory");
    if (rc == 0)
        rc = store_events_replay(self->store, 0, event_type_name(EVENT_TASK_QUEUED), INT_MAX,
                                 s_recover_queued, &recovery);
    if (rc == 0)
        rc = store_events_replay(self->store, 0, event_type_name(EVENT_TASK_DISPATCHED), INT_MAX,
                                 s_recover_dispatch, &recovery);
    zhashx_destroy(&recovery.queued_at);
    return rc;
}

/* Running when the broker stopped: it waits for its worker to say hello again. */
static void s_recover_running(broker_t *self, task_t *task)
{
    s_encode_context_entry(self, task);
    task->worker = NULL;
    s_running_push(self, task);
}

/* Where a running task's lease stood before a reload, to keep it. */
typedef struct {
    int attempt;
    int64_t lease_until, dispatched_at;
} lease_t;

static void s_lease_destructor(void **item)
{
    free(*item);
    *item = NULL;
}

/* The leases of the running tasks that have a worker (caller destroys the table). */
static zhashx_t *s_save_leases(broker_t *self)
{
    zhashx_t *leases = zhashx_new();
    zhashx_set_destructor(leases, s_lease_destructor);
    for (task_t *task = self->running; task != NULL; task = task->next) {
        lease_t *lease = malloc(sizeof *lease);
        if (task->worker == NULL || lease == NULL) {
            free(lease);
            continue;
        }
        *lease = (lease_t){task->attempt, task->lease_until, task->dispatched_at};
        zhashx_insert(leases, task->id, lease);
    }
    return leases;
}

/* Gives a reloaded running task back to its worker, if that worker is still here and free,
 * with the lease it had (a new one when it was not running before). */
static void s_reattach(broker_t *self, task_t *task, zhashx_t *leases, int64_t now)
{
    worker_t *worker = task->worker_id ? zhashx_lookup(self->workers, task->worker_id) : NULL;
    if (worker == NULL || worker->task != NULL)
        return; /* an orphan: requeued at the next lease check, as after a restart */
    lease_t *lease = zhashx_lookup(leases, task->id);
    bool same = lease != NULL && lease->attempt == task->attempt;
    task->worker = worker;
    worker->task = task;
    task->lease_until = same ? lease->lease_until : broker_lease_deadline(self, task, worker, now);
    task->dispatched_at = same ? lease->dispatched_at : now;
}

/* Makes the broker's memory what the store holds again, as at a start but keeping its
 * sockets and workers: every active task is read back, running ones go back to their
 * workers, and the counters to their last committed values. What the refused iteration
 * did is forgotten; workers resend what was not acknowledged. */
static int s_reload(broker_t *self)
{
    zhashx_t *leases = s_save_leases(self);
    for (queue_t *queue = zhashx_first(self->queues); queue; queue = zhashx_next(self->queues))
        queue_clear(queue);
    self->running = NULL;
    self->running_count = 0;
    zhashx_purge(self->groups);
    for (worker_t *worker = zhashx_first(self->workers); worker;
         worker = zhashx_next(self->workers)) {
        worker->task = NULL;
        if (worker->held_group != NULL)
            broker_group_hold(self, worker->held_group);
    }
    zhashx_purge(self->tasks);
    self->last_seq = self->committed.last_seq;
    self->next_order = self->committed.next_order;
    self->trimmed_upto = self->committed.trimmed_upto;
    self->submitted = self->committed.submitted;
    self->completed = self->committed.completed;
    self->dead_count = self->committed.dead_count;
    int rc = s_recover_active(self);
    int64_t now = clock_now_ms();
    for (task_t *task = self->running; rc == 0 && task != NULL; task = task->next)
        s_reattach(self, task, leases, now);
    zhashx_destroy(&leases);
    return rc;
}

static void s_remember_committed(broker_t *self)
{
    self->committed = (broker_committed_t){self->last_seq, self->next_order, self->trimmed_upto,
                                           self->submitted, self->completed, self->dead_count};
}

/* The store's answer to a full disk (store_set_room_maker): give up the reserve. */
static bool s_make_room(void *arg)
{
    broker_t *self = arg;
    return disk_guard_give_up(self->disk, clock_now_ms());
}

/* The iteration's commit found no room even after the reserve was given up: its submits
 * are refused (disk_full), everything else it did is forgotten (workers resend results and
 * heartbeats; tasks are dispatched again), and the broker goes on from what is stored,
 * refusing new submits until the disk has room again. */
static int s_refuse_iteration(broker_t *self)
{
    char reason[600];
    snprintf(reason, sizeof reason, "disk full: nothing was stored (%s)", failure_message());
    int64_t refused = self->submitted - self->committed.submitted;
    for (int64_t i = 0; i < refused; i++)
        broker_count_rejected(self, "disk_full");
    log_warn_limited(&self->full_warnings,
                     "%s: %lld new task%s refused, nothing acknowledged is lost; going on from "
                     "the store",
                     reason, (long long)refused, refused == 1 ? "" : "s");
    disk_guard_give_up(self->disk, clock_now_ms());
    s_outbox_refuse(self, reason);
    return s_reload(self);
}

/* ---- loop ---- */

static void s_drain_in(broker_t *self)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (int i = 0; i < BATCH_LIMIT; i++) {
        if (zmq_msg_recv(&msg, self->in, ZMQ_DONTWAIT) < 0)
            break;
        bool more = zmq_msg_more(&msg);
        /* With CURVE, the ZAP handler made the sender's public key the message's User-Id. */
        broker_handle_in(self, zmq_msg_data(&msg), zmq_msg_size(&msg),
                         zmq_msg_gets(&msg, "User-Id"));
        /* Submitters send one frame; anything after it is garbage we skip. */
        while (more && zmq_msg_recv(&msg, self->in, ZMQ_DONTWAIT) >= 0)
            more = zmq_msg_more(&msg);
    }
    zmq_msg_close(&msg);
}

static void s_drain_control(broker_t *self)
{
    for (int i = 0; i < BATCH_LIMIT; i++) {
        /* ROUTER gives [identity][REQ's request id][empty][body] (or [identity][body]
         * from a DEALER): everything before the last frame is echoed back. */
        zmsg_t *request = zmsg_recv_nowait(self->control);
        if (request == NULL)
            break;
        zframe_t *body = zmsg_last(request);
        if (zmsg_size(request) >= 2) {
            zmsg_remove(request, body);
            /* With CURVE, the ZAP handler made the requester's public key its User-Id. */
            broker_handle_control(self, request, zframe_data(body), zframe_size(body),
                                  self->curve ? zframe_meta(body, "User-Id") : NULL);
            zframe_destroy(&body);
        }
        zmsg_destroy(&request);
    }
}

static void s_record_commit(broker_t *self, int64_t started_us)
{
    double ms = (double)(clock_now_us() - started_us) / 1000.0;
    self->latency_ms[self->latency_count++ % LATENCY_SAMPLES] = ms;
}

/* Commits what the iteration did (rolled back when `rc`, its outcome so far, is a
 * failure), then sends what waited for the commit. A full disk does not stop the broker
 * (s_refuse_iteration); any other store failure does. */
static int s_commit(broker_t *self, int rc)
{
    if (store_in_transaction(self->store)) {
        int64_t started = clock_now_us();
        int committed = store_commit(self->store);
        if (committed == 0)
            s_record_commit(self, started);
        if (rc == 0)
            rc = committed;
    }
    if (rc == FAILURE_DISK_FULL)
        return s_refuse_iteration(self);
    if (rc != 0) {
        s_outbox_discard(self);
        return rc;
    }
    s_remember_committed(self);
    s_outbox_flush(self);
    return 0;
}

static void s_count_completions(broker_t *self, int64_t before)
{
    int64_t second = clock_now_ms() / 1000;
    if (second != self->window_second) {
        for (int64_t s = self->window_second + 1; s <= second && s <= self->window_second + 10; s++)
            self->completed_window[s % 10] = 0;
        self->window_second = second;
    }
    if (self->completed > before) /* a refused iteration goes back to fewer */
        self->completed_window[second % 10] += self->completed - before;
}

/* What the peer guard and the descriptor reserve counted since the last iteration goes into
 * stats.rejected. */
static void s_take_guard_counts(broker_t *self)
{
    int64_t refused = peer_guard_take_refused(self->guard) + fd_reserve_take_dropped();
    int64_t strangers = peer_guard_take_failed_handshakes(self->guard);
    int64_t aborted = peer_guard_take_aborted_handshakes(self->guard);
    for (int64_t i = 0; i < aborted; i++)
        broker_count_rejected(self, "handshake_aborted");
    for (int64_t i = 0; i < refused; i++)
        broker_count_rejected(self, "too_many_peers");
    for (int64_t i = 0; i < strangers; i++)
        broker_count_rejected(self, "unauthenticated");
}

int broker_load_authorized(broker_t *self)
{
    zstr_sendx(self->auth, "CURVE", curve_authorized_dir(self->curve), NULL);
    return zsock_wait(self->auth) == 0 ? 0 : failure_set(FAILURE_IO, "zauth did not answer");
}

static int64_t s_min(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The loop sleeps until the next moment something is due without a message: a worker's
 * silence turning into its loss, a lease ending, the end of the orphan grace after a
 * restart, a retry due for an idle worker, the next ping, retention and reclaim passes, a
 * disk check while the disk is low, and replies waiting for a full pipe. Everything else
 * comes with a message. */
static int64_t s_next_deadline(broker_t *self, int64_t now)
{
    int64_t next = s_min(self->next_ping, self->next_not_before);
    for (worker_t *worker = zhashx_first(self->workers); worker;
         worker = zhashx_next(self->workers))
        next = s_min(next, worker->last_seen +
                               (int64_t)self->config.heartbeat_ms * worker->misses + 1);
    for (task_t *task = self->running; task != NULL; task = task->next)
        next = s_min(next, task->worker != NULL ? task->lease_until : self->orphan_deadline);
    if (now < self->orphan_deadline)
        next = s_min(next, self->orphan_deadline);
    if (self->config.keep_finished_days > 0)
        next = s_min(next, self->next_prune);
    next = s_min(next, self->next_reclaim);
    next = s_min(next, self->replies_retry_at);
    if (disk_guard_low(self->disk))
        next = s_min(next, now + DISK_GUARD_CHECK_MS);
    return next;
}

int broker_run(broker_t *self, volatile sig_atomic_t *stop)
{
    zmq_pollitem_t items[] = {{self->in, 0, ZMQ_POLLIN, 0},
                              {self->control, 0, ZMQ_POLLIN, 0}};
    int rc = 0;
    while (!*stop && rc == 0) {
        int64_t now = clock_now_ms();
        self->next_check = s_next_deadline(self, now);
        long timeout = self->next_check > now ? (long)(self->next_check - now) : 0;
        if (zmq_poll(items, 2, timeout) < 0 && errno != EINTR) {
            rc = failure_set(FAILURE_IO, "poll: %s", zmq_strerror(errno));
            break;
        }
        int64_t completed_before = self->completed;
        disk_guard_check(self->disk, now);
        if (self->config.reload != NULL && *self->config.reload) {
            *self->config.reload = 0;
            broker_reload_t report;
            if (broker_reload(self, &report) != 0)
                log_error("SIGHUP: %s", failure_message());
        }
        s_take_guard_counts(self);
        if (items[0].revents & ZMQ_POLLIN)
            s_drain_in(self);
        if (items[1].revents & ZMQ_POLLIN)
            s_drain_control(self);
        rc = s_run_timers(self, clock_now_ms());
        if (rc == 0)
            rc = s_dispatch(self);
        if (rc == 0)
            rc = s_trim_events(self);
        rc = s_commit(self, rc);
        if (rc != 0)
            break;
        self->replies_retry_at = replies_pump(self->replies, clock_now_ms());
        s_reclaim(self, clock_now_ms());
        s_count_completions(self, completed_before);
    }
    if (rc != 0)
        log_error("stopping: %s", failure_message());
    return rc;
}

/* ---- setup ---- */

static void s_worker_destroy(void **item)
{
    worker_t *worker = *item;
    if (worker == NULL)
        return;
    zmq_close(worker->push);
    free(worker->held_group);
    free(worker->key);
    free(worker->task_key);
    free(worker->id);
    free(worker->endpoint);
    free(worker);
    *item = NULL;
}

static void s_task_destructor(void **item)
{
    task_destroy((task_t **)item);
}

static void s_config_destructor(void **item)
{
    config_destroy((config_t **)item);
}

static void s_queue_destructor(void **item)
{
    queue_destroy((queue_t **)item);
}

static void s_add_specialist(const char *name, void *arg)
{
    broker_queue(arg, name, true);
}

/* A known specialist's stored counts of ended tasks (a forgotten one's are not shown). */
static void s_load_counters(const char *name, const int64_t counts[3], void *arg)
{
    queue_t *queue = broker_queue(arg, name, false);
    if (queue == NULL)
        return;
    queue->done = (size_t)counts[0];
    queue->failed = (size_t)counts[1];
    queue->dead = (size_t)counts[2];
}


static void *s_socket(broker_t *self, int type, const char *endpoint, int *rc)
{
    void *socket = zmq_socket(self->zmq_context, type);
    int linger = 0;
    zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
    /* What a subscriber or a requester that does not read can make us hold: PUB drops
     * events for a subscriber past its mark (it replays by seq to fill the gap); ROUTER
     * says EAGAIN for a peer past its mark and the reply waits, counted (replies.h). */
    if (type == ZMQ_PUB || type == ZMQ_ROUTER) {
        int hwm = type == ZMQ_PUB ? BROKER_EVENTS_HWM : REPLIES_HWM;
        zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
    }
    if (type == ZMQ_PUB) {
        int sndbuf = BROKER_EVENTS_SNDBUF;
        zmq_setsockopt(socket, ZMQ_SNDBUF, &sndbuf, sizeof sndbuf);
    }
    /* A reply that does not fit its peer's pipe is kept (replies.h), not dropped. */
    int mandatory = 1;
    if (type == ZMQ_ROUTER)
        zmq_setsockopt(socket, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    if (type == ZMQ_PULL || type == ZMQ_ROUTER) {
        int64_t max = WIRE_MAX_MESSAGE + 1024;
        zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max, sizeof max);
    }
    /* A peer that went away without a word (its host partitioned, or a worker that gave up
     * a stalled connection and made a new one) leaves a connection nothing is sent on, so
     * TCP never notices: keepalives find it after about two minutes of silence and free
     * its place under max_peers. */
    int keepalive = 1, idle_s = 60, interval_s = 10, probes = 6;
    zmq_setsockopt(socket, ZMQ_TCP_KEEPALIVE, &keepalive, sizeof keepalive);
    zmq_setsockopt(socket, ZMQ_TCP_KEEPALIVE_IDLE, &idle_s, sizeof idle_s);
    zmq_setsockopt(socket, ZMQ_TCP_KEEPALIVE_INTVL, &interval_s, sizeof interval_s);
    zmq_setsockopt(socket, ZMQ_TCP_KEEPALIVE_CNT, &probes, sizeof probes);
    if (self->curve != NULL)
        curve_apply_server(self->curve, socket);
    if (zmq_bind(socket, endpoint) != 0) {
        *rc = failure_set(FAILURE_IO, "cannot bind %s: %s", endpoint, zmq_strerror(errno));
        zmq_close(socket);
        return NULL;
    }
    return socket;
}

/* Every worker costs the broker a ZeroMQ socket: their number follows the open-files
 * limit (broker_config_t.max_sockets) instead of ZeroMQ's default of 1023. */
static int s_set_max_sockets(void *context, int max_sockets)
{
    int limit = zmq_ctx_get(context, ZMQ_SOCKET_LIMIT);
    if (limit > 0 && max_sockets > limit)
        max_sockets = limit;
    if (zmq_ctx_set(context, ZMQ_MAX_SOCKETS, max_sockets) != 0)
        return failure_set(FAILURE_IO, "cannot allow %d ZeroMQ sockets: %s", max_sockets,
                           zmq_strerror(errno));
    return 0;
}

/* The ZeroMQ context, and with CURVE the keys and the ZAP handler. zauth answers the
 * handshakes of czmq's own context, so with CURVE the broker's sockets live there. */
static int s_start_curve(broker_t *self)
{
    const char *endpoints[] = {self->config.in_endpoint, self->config.events_endpoint,
                               self->config.control_endpoint, NULL};
    bool enabled = false;
    int rc = curve_decide(self->config.config, endpoints, true, &enabled);
    if (rc != 0)
        return rc;
    if (!enabled) {
        for (size_t i = 0; endpoints[i] != NULL; i++)
            if (strncmp(endpoints[i], "tcp://", 6) == 0) {
                log_warn("CURVE is off on %s: every user of this machine (and whoever else "
                         "reaches it) can submit, read and cancel tasks, which run as %s; "
                         "turn [security] curve back on, or use ipc:// endpoints inside "
                         "$PANOPTICON_HOME",
                         endpoints[i], getenv("USER") ? getenv("USER") : "this user");
                break;
            }
        self->zmq_context = zmq_ctx_new();
        if (self->zmq_context == NULL)
            return failure_set(FAILURE_IO, "cannot start ZeroMQ: %s", zmq_strerror(errno));
        return s_set_max_sockets(self->zmq_context, self->config.max_sockets);
    }
    rc = curve_keys_init();
    if (rc == 0)
        rc = curve_load(&self->curve, true);
    if (rc != 0)
        return rc;
    zsys_handler_set(NULL); /* the broker handles its own signals */
    zsys_set_max_sockets((size_t)self->config.max_sockets);
    self->zmq_context = zsys_init();
    self->auth = zactor_new(zauth, NULL);
    self->roles = key_roles_new(curve_authorized_dir(self->curve));
    if (self->zmq_context == NULL || self->auth == NULL || self->roles == NULL)
        return failure_set(FAILURE_IO, "cannot start the CURVE authenticator");
    log_info("CURVE on: clients need a key in %s", curve_authorized_dir(self->curve));
    return broker_load_authorized(self);
}

int broker_new(const broker_config_t *config, broker_t **out)
{
    *out = NULL;
    broker_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    self->config = *config;
    if (self->config.remote_heartbeat_misses < 1)
        self->config.remote_heartbeat_misses = self->config.heartbeat_misses;
    self->tasks = zhashx_new();
    zhashx_set_destructor(self->tasks, s_task_destructor);
    self->queues = zhashx_new();
    zhashx_set_destructor(self->queues, s_queue_destructor);
    self->workers = zhashx_new();
    zhashx_set_destructor(self->workers, s_worker_destroy);
    self->groups = zhashx_new();
    self->rejected = zhashx_new();
    self->configs = zlistx_new();
    zlistx_set_destructor(self->configs, s_config_destructor);
    self->writer = wire_writer_new();
    uuid_t uuid;
    uuid_generate_random(uuid);
    uuid_unparse_lower(uuid, self->epoch);
    srandom((unsigned)clock_now_us());

    /* Security first: a broker that must not listen as configured touches nothing. */
    int rc = s_start_curve(self);
    if (rc == 0)
        rc = workspace_roots_new(config->config, &self->workspace_roots);
    if (rc != 0)
        goto out;
    log_info("workspaces accepted under: %s", workspace_roots_text(self->workspace_roots));
    self->disk = disk_guard_new(config->db_path, config->min_free_mb << 20,
                                config->reserve_mb << 20);
    rc = self->disk ? store_open(config->db_path, config->sync, &self->store)
                    : failure_set(FAILURE_MEMORY, "out of memory");
    if (rc == 0 && config->wal_limit_mb > 0)
        rc = store_set_wal_limit(self->store, config->wal_limit_mb * 1024 * 1024);
    if (rc != 0)
        goto out;
    store_set_room_maker(self->store, s_make_room, self);
    self->full_warnings.every_ms = 10000;
    self->refusal_warnings.every_ms = 10000;
    self->reclaim_warnings.every_ms = 60000;
    for (size_t i = 0; s_builtin_specialists[i]; i++)
        broker_queue(self, s_builtin_specialists[i], true);
    for (size_t i = 0; config->specialists && config->specialists[i]; i++)
        broker_queue(self, config->specialists[i], true);
    rc = s_forget_specialists(self);
    if (rc != 0)
        goto out;
    store_specialists_load(self->store, s_add_specialist, self);
    rc = store_counters_load(self->store, s_load_counters, self);
    if (rc != 0)
        goto out;
    self->last_seq = store_last_seq(self->store);
    self->next_order = store_max_order(self->store);
    self->dead_count = store_count_state(self->store, "dead");
    rc = s_recover_active(self);
    if (rc != 0)
        goto out;
    s_remember_committed(self);
    int64_t now = clock_now_ms();
    /* Workers say hello again after their grace of silence: those that reach `in` over
     * a network are allowed remote_heartbeat_misses. Their hello must also reach us and be
     * read: the grace is that silence twice over, plus an interval, so that a loaded
     * machine's stall of a few intervals does not requeue (and run again) a task whose
     * worker is saying hello (1 interval of slack used to let one through in about one run
     * of test_runs_once in ten under load). */
    int misses = broker_worker_misses(self, config->in_endpoint);
    self->orphan_deadline = now + (int64_t)config->heartbeat_ms * (2 * misses + 1);
    self->next_ping = now;
    self->next_check = now;
    self->next_not_before = INT64_MAX;

    self->in = s_socket(self, ZMQ_PULL, config->in_endpoint, &rc);
    if (rc == 0)
        self->events = s_socket(self, ZMQ_PUB, config->events_endpoint, &rc);
    if (rc == 0)
        self->control = s_socket(self, ZMQ_ROUTER, config->control_endpoint, &rc);
    if (rc == 0) {
        self->replies = replies_new(self->control, config->unread_replies_per_peer_mb << 20,
                                    config->unread_replies_mb << 20, broker_build_replay, self);
        self->replies_retry_at = INT64_MAX;
        if (self->replies == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
    }
    void *bound[] = {self->in, self->events, self->control};
    if (rc == 0)
        rc = peer_guard_new(self->zmq_context, bound, 3, config->max_peers, self->curve != NULL,
                            &self->guard);
    if (rc == 0)
        log_info("broker up: in %s, events %s, control %s; %zu active tasks recovered, last seq %lld",
                 config->in_endpoint, config->events_endpoint, config->control_endpoint,
                 zhashx_size(self->tasks), (long long)self->last_seq);
out:
    if (rc != 0) {
        broker_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void broker_destroy(broker_t **self_p)
{
    broker_t *self = *self_p;
    if (self == NULL)
        return;
    s_outbox_discard(self);
    replies_destroy(&self->replies);
    free(self->outbox);
    free(self->outbox_bytes);
    zhashx_destroy(&self->workers); /* closes worker sockets before the context */
    peer_guard_destroy(&self->guard);
    if (self->in)
        zmq_close(self->in);
    if (self->events)
        zmq_close(self->events);
    if (self->control)
        zmq_close(self->control);
    zactor_destroy(&self->auth);
    /* czmq's own context (with CURVE) is czmq's to end, at exit. */
    if (self->zmq_context && self->curve == NULL)
        zmq_ctx_term(self->zmq_context);
    curve_destroy(&self->curve);
    key_roles_destroy(&self->roles);
    zhashx_destroy(&self->tasks);
    zhashx_destroy(&self->queues);
    zhashx_destroy(&self->groups);
    zhashx_destroy(&self->rejected);
    zlistx_destroy(&self->configs);
    wire_writer_destroy(&self->writer);
    free(self->idle);
    store_close(&self->store);
    disk_guard_destroy(&self->disk);
    workspace_roots_destroy(&self->workspace_roots);
    free(self);
    *self_p = NULL;
}
