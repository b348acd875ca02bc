/* broker_in: what arrives on the `in` socket — submits from anyone, and the messages
 * workers send (hello, heartbeat, progress, result, release, bye). Nothing is answered on
 * `in`; refusals become task.rejected / message.rejected events. */
#include "broker_internal.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* `category` is the counter in stats ("malformed", "bad_hello", ...); `reason` the detail.
 * Every refusal is counted; a message that names nobody (undecodable, too big, meant for
 * another socket) is garbage anyone can send by the thousand, so its message.rejected
 * events (and log lines) are limited to one a second, which says in `coalesced` how many
 * were refused since the last one without an event. */
static void s_reject_message(broker_t *self, const char *category, const char *reason,
                             bool garbage)
{
    broker_count_rejected(self, category);
    if (garbage) {
        int64_t now = clock_now_ms();
        if (self->garbage_reported_at != 0 && now - self->garbage_reported_at < 1000) {
            self->garbage_unreported++;
            return;
        }
        self->garbage_reported_at = now;
    }
    broker_emit_rejected(self, EVENT_MESSAGE_REJECTED, NULL, reason,
                         garbage ? self->garbage_unreported : 0);
    if (garbage)
        self->garbage_unreported = 0;
}

/* The stats.rejected category of a refused submit. */
const char *broker_submit_refusal(int rc)
{
    return rc == FAILURE_DISK_FULL ? "disk_full" : rc == FAILURE_DENIED ? "denied" : "invalid_submit";
}

static void s_handle_submit(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    task_t *task = NULL;
    bool loaded = false, created = false;
    int rc = key_roles_check(self->roles, peer_key, KEY_ACTION_SUBMIT);
    if (rc == 0)
        rc = broker_submit(self, msg, NULL, peer_key, &task, &loaded, &created);
    if (rc == FAILURE_INVALID || rc == FAILURE_TOO_BIG || rc == FAILURE_DISK_FULL ||
        rc == FAILURE_DENIED) {
        broker_submit_refused(self, wire_msg_str(msg, FIELD_ID, NULL), rc);
    } else if (rc != 0) {
        log_error("submit %s: %s", wire_msg_str(msg, FIELD_ID, "?"), failure_message());
    }
    if (loaded)
        task_destroy(&task);
}

/* A PUSH connected to the worker's task socket; with CURVE, as a client of the worker's
 * key `curve_key` (from its hello, which came through the authenticated `in`). */
static void *s_connect_worker(broker_t *self, const char *endpoint, const char *curve_key)
{
    if (self->curve != NULL && (curve_key == NULL || strlen(curve_key) != 40)) {
        failure_set(FAILURE_INVALID,
                    "hello: the bus uses CURVE and the worker announced no curve_key (its "
                    "task socket must be a CURVE server)");
        return NULL;
    }
    void *push = zmq_socket(self->zmq_context, ZMQ_PUSH);
    if (push == NULL) {
        /* ZMQ_MAX_SOCKETS, set from the open-files limit (broker_config_t.max_sockets). */
        failure_set(FAILURE_STATE, "hello: too many workers (the broker's open-files limit "
                    "allows %d ZeroMQ sockets): %s", self->config.max_sockets,
                    zmq_strerror(errno));
        return NULL;
    }
    if (self->curve != NULL)
        curve_apply_client_of(self->curve, push, curve_key);
    int linger = 0, hwm = 1000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(push, endpoint) != 0) {
        failure_set(FAILURE_INVALID, "cannot connect to worker endpoint '%s': %s", endpoint,
                    zmq_strerror(errno));
        zmq_close(push);
        return NULL;
    }
    return push;
}

int broker_worker_reconnect(broker_t *self, worker_t *worker)
{
    void *push = s_connect_worker(self, worker->endpoint, worker->task_key);
    if (push == NULL)
        return -1;
    zmq_close(worker->push);
    worker->push = push;
    return 0;
}

static void s_set_task_key(worker_t *worker, const wire_msg_t *msg)
{
    const char *key = wire_msg_str(msg, FIELD_CURVE_KEY, NULL);
    free(worker->task_key);
    worker->task_key = key ? strdup(key) : NULL;
}

/* A worker that said hello with the endpoint another worker had replaces it. */
static void s_drop_same_endpoint(broker_t *self, const char *id, const char *endpoint)
{
    for (worker_t *other = zhashx_first(self->workers); other;
         other = zhashx_next(self->workers)) {
        if (strcmp(other->endpoint, endpoint) == 0 && strcmp(other->id, id) != 0) {
            broker_worker_lost(self, other, EVENT_WORKER_LOST, "replaced by a new worker on its endpoint");
            return;
        }
    }
}

/* The queue of a specialist a worker announced: created the first time, and remembered
 * across restarts with when a worker of it was last announced. */
static queue_t *s_announced_queue(broker_t *self, const char *specialist)
{
    queue_t *queue = broker_queue(self, specialist, true);
    if (queue != NULL)
        store_specialist_remember(self->store, queue->name, clock_wall_ms());
    return queue;
}

/* Only a worker whose endpoint could be connected makes its specialist known. `peer_key`:
 * the CURVE key it speaks with (NULL on a plain bus), which its later messages must match. */
static worker_t *s_register_worker(broker_t *self, const wire_msg_t *msg, const char *specialist,
                                   const char *peer_key)
{
    const char *id = wire_msg_str(msg, FIELD_WORKER, "");
    const char *endpoint = wire_msg_str(msg, FIELD_ENDPOINT, "");
    worker_t *worker = zhashx_lookup(self->workers, id);
    if (worker != NULL && strcmp(worker->endpoint, endpoint) == 0)
        return worker;
    void *push = s_connect_worker(self, endpoint, wire_msg_str(msg, FIELD_CURVE_KEY, NULL));
    if (push == NULL)
        return NULL;
    if (worker != NULL) {
        zmq_close(worker->push);
        worker->push = push;
        free(worker->endpoint);
        worker->endpoint = strdup(endpoint);
        s_set_task_key(worker, msg);
        worker->misses = broker_worker_misses(self, endpoint);
        return worker;
    }
    queue_t *queue = s_announced_queue(self, specialist);
    if (queue == NULL) {
        zmq_close(push);
        failure_set(FAILURE_MEMORY, "out of memory");
        return NULL;
    }
    s_drop_same_endpoint(self, id, endpoint);
    worker = calloc(1, sizeof *worker);
    worker->id = strdup(id);
    worker->endpoint = strdup(endpoint);
    worker->misses = broker_worker_misses(self, endpoint);
    worker->queue = queue;
    worker->push = push;
    worker->key = peer_key ? strdup(peer_key) : NULL;
    s_set_task_key(worker, msg);
    if (peer_key != NULL)
        store_worker_key_claim(self->store, id, peer_key, clock_wall_ms());
    worker->idle_since = clock_now_ms();
    zhashx_insert(self->workers, id, worker);
    event_extra_t extra = {.worker = id, .specialist = queue->name};
    broker_emit(self, EVENT_WORKER_JOINED, NULL, &extra);
    log_info("worker %s joined %s at %s", id, queue->name, endpoint);
    return worker;
}

/* The worker runs a task the broker did not give it, or no longer does (cancelled, given
 * to another worker, or from before a broker restart): it is told to stop, and the task's
 * group stays held until it says it has. */
static void s_cancel_stale(broker_t *self, worker_t *worker, const char *task_id, int attempt)
{
    task_t stale = {.id = (char *)task_id, .attempt = attempt};
    broker_send_cancel(self, worker, &stale, "the task is no longer assigned to this worker");
    task_t *active = zhashx_lookup(self->tasks, task_id);
    if (active != NULL) {
        broker_worker_hold_group(self, worker, active->group);
        return;
    }
    task_t *stored = NULL;
    if (store_task_load(self->store, task_id, &stored) == 0)
        broker_worker_hold_group(self, worker, stored->group);
    task_destroy(&stored);
}

/* True when `msg` (a hello or heartbeat) lists `task`'s running attempt among the results
 * its worker sent and has not had acknowledged (`unacked`): the attempt is over on the
 * worker's side and its result is on its way (it is resent until acknowledged). */
static bool s_result_unacked(const wire_msg_t *msg, const task_t *task)
{
    const msgpack_object *list = wire_msg_object(msg, FIELD_UNACKED);
    if (task == NULL || list == NULL || list->type != MSGPACK_OBJECT_ARRAY)
        return false;
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        const msgpack_object *item = &list->via.array.ptr[i];
        char id[MESSAGES_ID_CAP + 1];
        const msgpack_object *attempt = wire_map_get(item, FIELD_ATTEMPT);
        if (attempt != NULL && attempt->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
            attempt->via.u64 == (uint64_t)task->attempt &&
            strcmp(wire_obj_str(wire_map_get(item, FIELD_TASK), id, sizeof id, ""), task->id) == 0)
            return true;
    }
    return false;
}

/* The running task whose attempt `worker` reports an unacknowledged result of, if it was
 * given to that worker (after a broker restart: not attached to it yet). */
static task_t *s_unacked_task(broker_t *self, const worker_t *worker, const wire_msg_t *msg)
{
    const msgpack_object *list = wire_msg_object(msg, FIELD_UNACKED);
    for (uint32_t i = 0; list != NULL && list->type == MSGPACK_OBJECT_ARRAY &&
                         i < list->via.array.size;
         i++) {
        char id[MESSAGES_ID_CAP + 1];
        task_t *task = zhashx_lookup(
            self->tasks, wire_obj_str(wire_map_get(&list->via.array.ptr[i], FIELD_TASK), id,
                                      sizeof id, ""));
        if (task != NULL && task->state == TASK_RUNNING && task->worker_id != NULL &&
            strcmp(task->worker_id, worker->id) == 0 && s_result_unacked(msg, task) &&
            (task->worker == NULL || task->worker == worker))
            return task;
    }
    return NULL;
}

/* Attaches `task` (running, given to `worker`) to it again after a broker restart: the
 * lease starts anew. A worker already attached keeps its lease. */
static void s_reattach(broker_t *self, worker_t *worker, task_t *task)
{
    if (task->worker == NULL)
        task->lease_until = broker_lease_deadline(self, task, worker, clock_now_ms());
    task->worker = worker;
    worker->task = task;
}

/* After a hello: reconcile the task the worker says it holds with what the broker thinks.
 * `restarted`: the hello comes from another process than the one registered under this
 * worker id (or from one not registered yet).
 *
 * A hello that holds nothing while the broker gave the worker a task may simply have
 * crossed that task on the wire: a worker says hello again when it misses pings or sees a
 * new epoch, and a broker that has just registered it from its first hello may already
 * have dispatched to it. Releasing the task then would hand it out a second time while the
 * worker runs it. So only a worker that restarted (another pid) loses its task here; from
 * the same process the task stays, and the heartbeats settle it: one naming the task
 * confirms it, idle ones for two intervals after the dispatch mean it never arrived
 * (broker_in.c's heartbeat handler requeues it as undelivered).
 *
 * A hello that holds nothing but lists the task's attempt among its unacknowledged results
 * (`unacked`) finished it: the result is on its way, and the task stays with the worker
 * until it comes -- after a broker restart, it is attached to the worker again, rather than
 * left to be requeued as an orphan and run a second time. */
static void s_reconcile_held_task(broker_t *self, worker_t *worker, const wire_msg_t *msg,
                                  bool restarted)
{
    const char *held_id = wire_msg_str(msg, FIELD_TASK, NULL);
    int held_attempt = (int)wire_msg_int(msg, FIELD_ATTEMPT, 0);
    if (held_id == NULL) {
        task_t *finished = s_unacked_task(self, worker, msg);
        if (finished != NULL && (worker->task == NULL || worker->task == finished)) {
            s_reattach(self, worker, finished);
            return;
        }
        if (worker->task != NULL && !restarted)
            return;
        if (worker->task != NULL)
            broker_task_requeue(self, worker->task, "released", false,
                                "its worker restarted without it");
        broker_worker_idle(self, worker);
        return;
    }
    task_t *task = zhashx_lookup(self->tasks, held_id);
    bool its_own = task != NULL && task->state == TASK_RUNNING && task->attempt == held_attempt &&
                   task->worker_id != NULL && strcmp(task->worker_id, worker->id) == 0;
    if (its_own) {
        /* Reattached after a broker restart: the lease starts again. A worker that is
         * already attached keeps its lease, however often it says hello. */
        s_reattach(self, worker, task);
        return;
    }
    s_cancel_stale(self, worker, held_id, held_attempt);
}

static void s_handle_hello(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    const char *specialist = wire_msg_str(msg, FIELD_SPECIALIST, "");
    if (!submit_specialist_name_valid(specialist)) {
        s_reject_message(self, "bad_hello", "hello: invalid specialist name", false);
        return;
    }
    const worker_t *known = zhashx_lookup(self->workers, wire_msg_str(msg, FIELD_WORKER, ""));
    int64_t pid = wire_msg_int(msg, FIELD_PID, 0);
    bool restarted = known == NULL || pid == 0 || known->pid != pid;
    worker_t *worker = s_register_worker(self, msg, specialist, peer_key);
    if (worker == NULL) {
        s_reject_message(self, "bad_hello", failure_message(), false);
        return;
    }
    worker->pid = pid;
    worker->last_seen = clock_now_ms();
    /* The hello's answer: the broker's epoch and the heartbeat it expects. */
    broker_send_ping(self, worker);
    s_reconcile_held_task(self, worker, msg, restarted);
}

/* An idle heartbeat from the worker `task` was dispatched to: did the task reach it, and
 * it not take it? A worker that echoes the last ping it received (ping_seq) says so
 * exactly: its task socket delivers our messages in order, so a ping sent after the task
 * proves the task came first. Until then the task may still be on its way -- TCP under
 * heavy loss retransmits for seconds -- and handing it out again would run it twice: the
 * broker waits (the lease and the worker's heartbeats bound that). A worker that does not
 * echo is given two heartbeat intervals. */
static bool s_dispatch_refused(const broker_t *self, const task_t *task, const wire_msg_t *msg,
                               int64_t now)
{
    if (wire_msg_has(msg, FIELD_PING_SEQ))
        return wire_msg_int(msg, FIELD_PING_SEQ, 0) > task->dispatch_ping;
    return now - task->dispatched_at > 2L * self->config.heartbeat_ms;
}

static void s_handle_heartbeat(broker_t *self, const wire_msg_t *msg)
{
    worker_t *worker = zhashx_lookup(self->workers, wire_msg_str(msg, FIELD_WORKER, ""));
    if (worker == NULL)
        return; /* not announced (yet): it says hello when it misses our pings */
    int64_t now = clock_now_ms();
    worker->last_seen = now;
    const char *held = wire_msg_str(msg, FIELD_TASK, NULL);
    int64_t held_attempt = wire_msg_int(msg, FIELD_ATTEMPT, 0);
    task_t *task = worker->task;
    if (held == NULL && task == NULL && !worker->draining) {
        /* A finished attempt whose result is on its way, not attached since a restart. */
        task_t *finished = s_unacked_task(self, worker, msg);
        if (finished != NULL)
            s_reattach(self, worker, finished);
        return;
    }
    if (held == NULL) {
        /* An idle heartbeat proves the worker stopped only if it was sent after the cancel:
         * one arriving within a heartbeat interval may have crossed it. */
        if (worker->draining && now - worker->draining_since >= self->config.heartbeat_ms)
            broker_worker_idle(self, worker);
        /* It is idle but we think it runs a task: once the task message surely reached it
         * and it did not take it, that counts as a failure, so such a task ends up dead
         * rather than bouncing for ever. Unless it ran it: a task whose result it lists as
         * unacknowledged waits for that result (the lease bounds the wait). */
        if (task != NULL && !s_result_unacked(msg, task) &&
            s_dispatch_refused(self, task, msg, now)) {
            broker_task_requeue(self, task, "undelivered", true,
                                "the worker did not take it (it never arrived, or the worker "
                                "could not run it)");
            worker->idle_since = now;
        }
        return;
    }
    bool same = task != NULL && strcmp(task->id, held) == 0 && task->attempt == held_attempt;
    if (same || (task == NULL && worker->draining))
        return;
    /* Its own attempt, recovered after a restart but not attached: its hello said "idle"
     * before the task reached it (the two crossed, and a restart came in between). It runs
     * it: the task is attached again, not cancelled and run a second time. */
    task_t *recovered = zhashx_lookup(self->tasks, held);
    if (task == NULL && recovered != NULL && recovered->state == TASK_RUNNING &&
        recovered->worker == NULL && recovered->attempt == held_attempt &&
        recovered->worker_id != NULL && strcmp(recovered->worker_id, worker->id) == 0) {
        s_reattach(self, worker, recovered);
        return;
    }
    /* It works on something we did not give it (or no longer do): hand back what we think
     * it runs, and tell it to stop the other. */
    if (task != NULL)
        broker_task_requeue(self, task, "undelivered", false, "its worker was busy with another task");
    s_cancel_stale(self, worker, held, (int)held_attempt);
}

static void s_handle_progress(broker_t *self, const wire_msg_t *msg)
{
    worker_t *worker = zhashx_lookup(self->workers, wire_msg_str(msg, FIELD_WORKER, ""));
    if (worker != NULL)
        worker->last_seen = clock_now_ms();
    task_t *task = zhashx_lookup(self->tasks, wire_msg_str(msg, FIELD_TASK, ""));
    if (task == NULL || task->state != TASK_RUNNING ||
        task->attempt != wire_msg_int(msg, FIELD_ATTEMPT, 0) || task->worker_id == NULL ||
        strcmp(task->worker_id, wire_msg_str(msg, FIELD_WORKER, "")) != 0)
        return; /* progress of an attempt that is over, or not from its worker */
    if (strcmp(wire_msg_str(msg, FIELD_KIND, ""), "phase") == 0) {
        char *phase = strdup(wire_msg_str(msg, FIELD_TEXT, ""));
        if (phase != NULL) {
            free(task->phase);
            task->phase = phase;
            task->phase_attempt = task->attempt;
        }
    }
    /* One chatty task (a worker streaming `yes`) must not flood the store and push every
     * other event out of the replay window: a window of one second holds at most
     * BROKER_PROGRESS_PER_SECOND events per task, and what does not fit is counted into
     * the next event published. */
    int64_t now = clock_now_ms();
    if (now - task->progress_window >= 1000) {
        task->progress_window = now;
        task->progress_sent = 0;
    }
    if (task->progress_sent >= BROKER_PROGRESS_PER_SECOND) {
        task->progress_folded++;
        return;
    }
    task->progress_sent++;
    event_extra_t extra = {.kind = wire_msg_str(msg, FIELD_KIND, "info"),
                           .text = wire_msg_str(msg, FIELD_TEXT, ""),
                           .coalesced = task->progress_folded};
    task->progress_folded = 0;
    broker_emit(self, EVENT_TASK_PROGRESS, task, &extra);
}

/* Commits each of a result's next tasks; a refused one is reported, the rest go on. */
static void s_submit_next(broker_t *self, const char *parent, const char *submitter_key,
                          const wire_msg_t *msg)
{
    const msgpack_object *next = wire_msg_object(msg, FIELD_NEXT);
    if (next == NULL)
        return;
    for (uint32_t i = 0; i < next->via.array.size; i++) {
        msgpack_sbuffer sbuf;
        msgpack_sbuffer_init(&sbuf);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
        msgpack_pack_object(&pk, next->via.array.ptr[i]);
        wire_msg_t *sub = NULL;
        int rc = wire_decode_as(sbuf.data, sbuf.size, MSG_SUBMIT, &sub);
        msgpack_sbuffer_destroy(&sbuf);
        task_t *task = NULL;
        bool loaded = false, created = false;
        if (rc == 0)
            rc = broker_submit(self, sub, parent, submitter_key, &task, &loaded, &created);
        if (rc != 0) {
            char reason[600];
            snprintf(reason, sizeof reason, "next task %u of %s: %s", i, parent,
                     failure_message());
            broker_count_rejected(self, "invalid_next");
            broker_emit_rejected(self, EVENT_TASK_REJECTED, sub ? wire_msg_str(sub, FIELD_ID, NULL) : NULL,
                                 reason, 0);
        }
        if (loaded)
            task_destroy(&task);
        wire_msg_destroy(&sub);
    }
}

static void s_send_ack(broker_t *self, const char *worker_id, const char *task_id, int64_t attempt)
{
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_ACK);
    wire_put_str(w, FIELD_WORKER, worker_id);
    wire_put_str(w, FIELD_TASK, task_id);
    wire_put_int(w, FIELD_ATTEMPT, attempt);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    broker_outbox_worker(self, worker_id, data, len);
}

static void s_apply_result(broker_t *self, task_t *task, const wire_msg_t *msg, const char *outcome)
{
    const char *error = wire_msg_str(msg, FIELD_ERROR, NULL);
    if (task->worker != NULL)
        task->worker->idle_since = clock_now_ms();
    if (store_begin(self->store) != 0 ||
        (task->issue != NULL && store_attempt_insert(self->store, task, task->queue->name, outcome,
                                                     error, clock_wall_ms()) != 0)) {
        log_error("recording attempt of %s: %s", task->id, failure_message());
        return;
    }
    if (strcmp(outcome, "retry") == 0) {
        broker_task_requeue(self, task, NULL, true, error ? error : "the worker asked for a retry");
        return;
    }
    size_t result_len;
    const void *result = wire_msg_raw(msg, FIELD_RESULT, &result_len);
    if (strcmp(outcome, "done") == 0) {
        /* The task is closed first, in the same transaction: a chained merge's gate reads
         * the review it descends from as finished (broker_gate.c). */
        char parent[MESSAGES_ID_CAP + 1];
        snprintf(parent, sizeof parent, "%s", task->id);
        char *submitter_key = task->submitter_key ? strdup(task->submitter_key) : NULL;
        broker_task_finish(self, task, TASK_DONE, NULL, result, result_len);
        s_submit_next(self, parent, submitter_key, msg);
        free(submitter_key);
    } else {
        broker_task_finish(self, task, TASK_FAILED, error ? error : "failed", result, result_len);
    }
}

/* A result counts only for the attempt running now, from the worker it was given to. A
 * resent result (its attempt closed already, even if the task was retried since), a late
 * one (its worker was declared lost and the task requeued: the task runs again), or one
 * for an attempt never dispatched is acknowledged and ignored, so nothing is applied
 * twice. */
static bool s_result_applies(const task_t *task, const char *worker_id, int64_t attempt)
{
    return task != NULL && task->state == TASK_RUNNING && task->attempt == attempt &&
           task->worker_id != NULL && strcmp(task->worker_id, worker_id) == 0;
}

static void s_handle_result(broker_t *self, const wire_msg_t *msg)
{
    const char *outcome = wire_msg_str(msg, FIELD_OUTCOME, "");
    if (strcmp(outcome, "done") != 0 && strcmp(outcome, "failed") != 0 &&
        strcmp(outcome, "retry") != 0) {
        char reason[128];
        snprintf(reason, sizeof reason, "result: invalid outcome '%.32s' (done, failed, retry)",
                 outcome);
        s_reject_message(self, "bad_result", reason, false);
        return;
    }
    const char *worker_id = wire_msg_str(msg, FIELD_WORKER, "");
    worker_t *worker = zhashx_lookup(self->workers, worker_id);
    if (worker != NULL)
        worker->last_seen = clock_now_ms();
    task_t *task = zhashx_lookup(self->tasks, wire_msg_str(msg, FIELD_TASK, ""));
    int64_t attempt = wire_msg_int(msg, FIELD_ATTEMPT, 0);
    /* Whether it applies or not (finished already: a resent result; or unknown), the
     * worker must stop resending, so it is acknowledged; one that does not is counted. */
    if (s_result_applies(task, worker_id, attempt))
        s_apply_result(self, task, msg, outcome);
    else
        broker_count_rejected(self, "stale_result");
    s_send_ack(self, worker_id, wire_msg_str(msg, FIELD_TASK, ""), wire_msg_int(msg, FIELD_ATTEMPT, 0));
}

static void s_handle_release(broker_t *self, const wire_msg_t *msg)
{
    worker_t *worker = zhashx_lookup(self->workers, wire_msg_str(msg, FIELD_WORKER, ""));
    if (worker == NULL || worker->task == NULL)
        return;
    task_t *task = worker->task;
    if (strcmp(task->id, wire_msg_str(msg, FIELD_TASK, "")) != 0 ||
        task->attempt != wire_msg_int(msg, FIELD_ATTEMPT, 0))
        return;
    worker->draining = true;
    worker->draining_since = clock_now_ms();
    const char *reason = wire_msg_str(msg, FIELD_REASON, "released by its worker");
    int64_t delay_ms = wire_msg_int(msg, FIELD_DELAY_MS, 0);
    queue_t *queue = task->queue;
    if (broker_task_release(self, task, delay_ms > 0 ? delay_ms : 0, reason) == 0 &&
        wire_msg_bool(msg, FIELD_PAUSE, false))
        broker_specialist_pause(self, queue, reason);
}

static void s_handle_bye(broker_t *self, const wire_msg_t *msg)
{
    worker_t *worker = zhashx_lookup(self->workers, wire_msg_str(msg, FIELD_WORKER, ""));
    if (worker != NULL)
        broker_worker_lost(self, worker, EVENT_WORKER_LEFT, "said goodbye");
}

/* Why `peer_key` may not speak for the worker `msg` names, or NULL when it may. Three
 * things bind a key: the hello the worker said (its registration), the key that first said
 * hello under the worker id (stored: a worker id belongs to it, across restarts), and the
 * running attempt the message names (the key it was given to, stored with the attempt).
 * The last two survive a broker restart: before the real worker says hello again, another
 * authorised key naming its worker id, task and attempt (all of them are in the events)
 * can neither register under the id (and be handed the task when it is requeued), nor take
 * the task over, nor report its result. */
static const char *s_foreign_key(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    const char *id = wire_msg_str(msg, FIELD_WORKER, "");
    worker_t *worker = zhashx_lookup(self->workers, id);
    if (worker != NULL && worker->key != NULL && strcmp(worker->key, peer_key) != 0)
        return "the one it said hello with";
    /* Not registered (yet, since a restart): the id belongs to the key that first said
     * hello under it, stored. */
    char owner[64];
    if (worker == NULL && store_worker_key(self->store, id, owner, sizeof owner) == 0 &&
        owner[0] != '\0' && strcmp(owner, peer_key) != 0)
        return "the one that first said hello under this worker id";
    const char *task_id = wire_msg_str(msg, FIELD_TASK, NULL);
    task_t *task = task_id ? zhashx_lookup(self->tasks, task_id) : NULL;
    if (task != NULL && task->state == TASK_RUNNING && task->worker_key != NULL &&
        strcmp(task->worker_key, peer_key) != 0)
        return "the one the task's running attempt was given to";
    return NULL;
}

/* With CURVE, a worker speaks only with its own key: its id is in every event, so without
 * this any other authorised party could send hellos, results, progress or a goodbye in its
 * name. True when `msg` may be handled. */
static bool s_from_worker_key(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    msg_type_t type = wire_msg_type(msg);
    if (peer_key == NULL || type == MSG_SUBMIT)
        return true;
    const char *why = s_foreign_key(self, msg, peer_key);
    if (why == NULL)
        return true;
    char reason[400];
    snprintf(reason, sizeof reason, "%s for worker %.128s from another key than %s",
             msg_type_name(type), wire_msg_str(msg, FIELD_WORKER, ""), why);
    s_reject_message(self, "foreign_key", reason, true);
    return false;
}

/* True when `msg` names a running attempt that was given to `peer_key`. */
static bool s_attempt_of_key(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    const char *task_id = wire_msg_str(msg, FIELD_TASK, NULL);
    const task_t *task = task_id ? zhashx_lookup(self->tasks, task_id) : NULL;
    return peer_key != NULL && task != NULL && task->state == TASK_RUNNING &&
           task->attempt == wire_msg_int(msg, FIELD_ATTEMPT, 0) && task->worker_key != NULL &&
           strcmp(task->worker_key, peer_key) == 0;
}

/* A worker's message (anything on `in` but a submit) needs a key whose role lets it work.
 * A key that was valid when it took a task is never refused that attempt's messages (its
 * result above all): a reload of the key store in between must not turn a finished task
 * into a retry that runs it twice. A revoked key's next connection is refused by the ZAP
 * handler. True when `msg` may be handled. */
static bool s_worker_role(broker_t *self, const wire_msg_t *msg, const char *peer_key)
{
    if (wire_msg_type(msg) == MSG_SUBMIT ||
        key_roles_check(self->roles, peer_key, KEY_ACTION_WORK) == 0 ||
        s_attempt_of_key(self, msg, peer_key))
        return true;
    char reason[400];
    snprintf(reason, sizeof reason, "%s from worker %.128s: %s", msg_type_name(wire_msg_type(msg)),
             wire_msg_str(msg, FIELD_WORKER, ""), failure_message());
    s_reject_message(self, "denied", reason, true);
    return false;
}

void broker_handle_in(broker_t *self, const void *data, size_t len, const char *peer_key)
{
    wire_msg_t *msg = NULL;
    int rc = wire_decode(data, len, &msg);
    if (rc != 0) {
        s_reject_message(self, rc == FAILURE_TOO_BIG ? "too_big" : "malformed", failure_message(),
                         true);
        return;
    }
    if (!s_from_worker_key(self, msg, peer_key) || !s_worker_role(self, msg, peer_key)) {
        wire_msg_destroy(&msg);
        return;
    }
    switch (wire_msg_type(msg)) {
    case MSG_SUBMIT: s_handle_submit(self, msg, peer_key); break;
    case MSG_HELLO: s_handle_hello(self, msg, peer_key); break;
    case MSG_HEARTBEAT: s_handle_heartbeat(self, msg); break;
    case MSG_PROGRESS: s_handle_progress(self, msg); break;
    case MSG_RESULT: s_handle_result(self, msg); break;
    case MSG_RELEASE: s_handle_release(self, msg); break;
    case MSG_BYE: s_handle_bye(self, msg); break;
    default: {
        char reason[128];
        snprintf(reason, sizeof reason, "message type '%s' is not accepted on the in socket",
                 msg_type_name(wire_msg_type(msg)));
        s_reject_message(self, "wrong_socket", reason, true);
    }
    }
    wire_msg_destroy(&msg);
}
