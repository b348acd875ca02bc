/* specialist: the skeleton's loop and the job context (see specialist.h).
 *
 * Notes for readers.
 *
 * One loop thread owns the sockets, the signalfd and the wake eventfd; a job thread runs
 * one task at a time. They share only the specialist_ctx_t of that task: the progress
 * queue, `finished` and `outcome` under ctx->lock, the cancel reason as an atomic, and the
 * cancel eventfd the loop writes once. The result fields (result, next, error) belong to
 * the job thread until it finishes; the loop reads them only after pthread_join().
 *
 * The current attempt moves through these states (loop side):
 *
 *   idle ──task──▶ running ──job returns──▶ idle, result pending until acked
 *                    │ cancel from broker ─▶ muted: the job is told to stop; its progress
 *                    │                       and result are dropped
 *                    │ lease deadline ─────▶ cancelled (timeout); the result says so
 *                    │ SIGTERM ────────────▶ cancelled (shutdown); once the job ends:
 *                    │                       `release` (its result if `done`) + `bye`
 *                    └ grace passed while cancelled and the job still runs ─▶ stuck:
 *                      kill the watched child, send the timeout result, leave
 *
 * Leaving (after SIGTERM, or stuck) ends the loop when nothing is left to wait for (no job,
 * no pending result) or when the leave deadline passes; after SIGTERM a job still running a
 * tenth of the grace before that deadline has its child killed. */
#include "specialist.h"

#include "clock.h"
#include "curve.h"
#include "failure.h"
#include "log.h"
#include "msgjson.h"
#include "proc.h"
#include "submit.h"
#include "tcp_thin.h"
#include "wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <czmq.h>
#include <zmq.h>

#define SPECIALIST_ID_CAP 128
#define SPECIALIST_ERROR_CAP 60000
/* Deepest JSON value accepted into a result or a next task: the message map, the
 * result/next containers and this leave room under WIRE_MAX_DEPTH. */
#define SPECIALIST_JSON_DEPTH 24

typedef struct progress_item_t {
    char *kind;
    char *text;
    struct progress_item_t *next;
} progress_item_t;

struct specialist_ctx_t {
    /* Set by the loop before the job thread starts; read-only afterwards. */
    wire_msg_t *msg;
    specialist_task_t task;
    json_t *task_json;
    const char *worker_id;
    int grace_ms; /* the loop's: how long a cancelled job has to return */
    specialist_job_fn *job;
    void *job_arg;
    pthread_t thread;
    int cancel_fd; /* eventfd, written once on cancel; owned by the ctx */
    int wake_fd;   /* the loop's eventfd; not owned */
    int64_t started_ms;

    /* Shared, under lock. */
    pthread_mutex_t lock;
    progress_item_t *head, *tail;
    size_t queued;
    uint64_t progress_dropped;
    bool finished;
    specialist_outcome_t outcome;
    bool muted; /* broker cancel or release: drop progress and the result */
    pid_t child_pgid;
    atomic_int cancel_reason;

    /* The job thread's until it finishes. */
    json_t *result;
    json_t *next;
    char *error;
    char *hand_back; /* specialist_hand_back()'s reason: a release instead of the result */
    int64_t hand_back_delay_ms;
    bool hand_back_pause;
};

/* A result sent and not yet acknowledged: sent again after resend_ms, which doubles up to
 * PENDING_RESEND_MAX_INTERVALS heartbeats. Sending it every heartbeat would fill a stalled
 * TCP connection with copies, and a connection with several segments in flight loses
 * its linear retransmission timeouts (tcp_thin.h): it would stall longer still. */
typedef struct pending_t {
    char task[SPECIALIST_ID_CAP + 1];
    int64_t attempt;
    void *data;
    size_t len;
    int64_t resend_at; /* monotonic ms */
    int64_t resend_ms;
    struct pending_t *next;
} pending_t;

#define PENDING_RESEND_MAX_INTERVALS 8

typedef struct {
    char specialist[65];
    char worker_id[SPECIALIST_ID_CAP + 1];
    char in_endpoint[1024];
    char endpoint[1024]; /* announced in hello */
    int heartbeat_ms;
    int heartbeat_misses;
    int default_timeout_s;
    int grace_ms;
    specialist_job_fn *job;
    void *job_arg;
    specialist_reload_fn *reload;
    void *reload_arg;
    bool reload_pending; /* SIGHUP came: reload once no job runs */

    void *zmq;
    zactor_t *auth; /* with CURVE: admits only the broker to the task socket */
    void *push;
    tcp_thin_t *push_thin; /* the push's connections to the broker retransmit linearly */
    int64_t push_connections; /* made so far: after the first, a reconnection */
    void *pull;
    int signal_fd;
    int wake_fd;
    wire_writer_t *writer;

    specialist_ctx_t *ctx; /* the running job, or NULL */
    int64_t lease_deadline;
    int64_t grace_deadline; /* 0 while the job is not cancelled */
    pending_t *pending;

    char epoch[SPECIALIST_ID_CAP + 1];
    int64_t last_ping; /* the highest ping_seq received since our hello (0: none), echoed in
                          heartbeats: it tells the broker which of its messages reached us,
                          and a task sent before it is one the broker has given up */
    int64_t last_contact;
    int64_t next_heartbeat;
    int64_t last_tick; /* when the loop last ran (s_on_deadlines) */

    bool leaving;
    bool stuck;
    bool bye_sent;
    int64_t leave_deadline;
    /* After SIGTERM: the task is handed back (`release`) when its job ends, unless the job
     * ends `done`; the job's child group is killed at kill_deadline if it still runs. */
    bool release_at_end;
    bool child_killed;
    int64_t kill_deadline;
    int signals;
    bool done;
    int exit_code;
    specialist_stats_t stats;
} loop_t;

/* ---- small helpers ---- */

/* Length of `text` cut to at most `max` bytes without splitting a UTF-8 sequence. */
static size_t s_utf8_cut(const char *text, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t cut = max;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80)
        cut--;
    return cut;
}

static int s_json_depth(const json_t *value, int limit)
{
    if (limit <= 0)
        return 1;
    int deepest = 0;
    if (json_is_object(value)) {
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)value, key, item) {
            int d = s_json_depth(item, limit - 1);
            if (d > deepest)
                deepest = d;
        }
        return deepest + 1;
    }
    if (json_is_array(value)) {
        size_t i;
        json_t *item;
        json_array_foreach(value, i, item) {
            int d = s_json_depth(item, limit - 1);
            if (d > deepest)
                deepest = d;
        }
        return deepest + 1;
    }
    return 0;
}

int specialist_check_name(const char *name)
{
    if (name == NULL || name[0] == '\0')
        return failure_set(FAILURE_INVALID, "specialist name is empty");
    if (strlen(name) > SUBMIT_SPECIALIST_NAME_MAX)
        return failure_set(FAILURE_INVALID, "specialist name '%.64s...' is over %d bytes", name,
                           SUBMIT_SPECIALIST_NAME_MAX);
    if (!submit_specialist_name_valid(name))
        return failure_set(FAILURE_INVALID,
                           "invalid specialist name '%s' (expected [a-z0-9][a-z0-9._-]*)", name);
    return 0;
}

/* ---- the job context (job side) ---- */

const specialist_task_t *specialist_task(const specialist_ctx_t *ctx)
{
    return &ctx->task;
}

const char *specialist_worker_id(const specialist_ctx_t *ctx)
{
    return ctx->worker_id;
}

int specialist_child_kill_grace_ms(const specialist_ctx_t *ctx)
{
    return ctx->grace_ms / 2;
}

const char *specialist_payload_str(const specialist_ctx_t *ctx, const char *key)
{
    const json_t *value = json_object_get(ctx->task.payload_json, key);
    return json_is_string(value) ? json_string_value(value) : NULL;
}

static void s_wake(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a full eventfd counter is already readable: the wake-up is not lost */
}

void specialist_progress(specialist_ctx_t *ctx, const char *kind, const char *text)
{
    if (text == NULL)
        return;
    size_t len = s_utf8_cut(text, strlen(text), SPECIALIST_PROGRESS_MAX);
    pthread_mutex_lock(&ctx->lock);
    if (ctx->muted) {
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    if (ctx->queued >= SPECIALIST_PROGRESS_QUEUE) {
        ctx->progress_dropped++;
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    progress_item_t *item = calloc(1, sizeof *item);
    if (item != NULL) {
        item->kind = strdup(kind != NULL ? kind : "info");
        item->text = strndup(text, len);
    }
    if (item == NULL || item->kind == NULL || item->text == NULL) {
        if (item != NULL) {
            free(item->kind);
            free(item->text);
            free(item);
        }
        ctx->progress_dropped++;
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    if (ctx->tail != NULL)
        ctx->tail->next = item;
    else
        ctx->head = item;
    ctx->tail = item;
    ctx->queued++;
    pthread_mutex_unlock(&ctx->lock);
    s_wake(ctx->wake_fd);
}

void specialist_progressf(specialist_ctx_t *ctx, const char *kind, const char *fmt, ...)
{
    char text[SPECIALIST_PROGRESS_MAX + 1];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    specialist_progress(ctx, kind, text);
}

bool specialist_cancelled(const specialist_ctx_t *ctx)
{
    return atomic_load(&((specialist_ctx_t *)ctx)->cancel_reason) != SPECIALIST_CANCEL_NONE;
}

specialist_cancel_t specialist_cancel_reason(const specialist_ctx_t *ctx)
{
    return (specialist_cancel_t)atomic_load(&((specialist_ctx_t *)ctx)->cancel_reason);
}

int specialist_cancel_fd(const specialist_ctx_t *ctx)
{
    return ctx->cancel_fd;
}

void specialist_watch_child(specialist_ctx_t *ctx, pid_t pgid)
{
    pthread_mutex_lock(&ctx->lock);
    ctx->child_pgid = pgid;
    pthread_mutex_unlock(&ctx->lock);
}

void specialist_result_str(specialist_ctx_t *ctx, const char *key, const char *value)
{
    if (key != NULL && value != NULL)
        json_object_set_new(ctx->result, key, json_string_nocheck(value));
}

void specialist_result_int(specialist_ctx_t *ctx, const char *key, int64_t value)
{
    if (key != NULL)
        json_object_set_new(ctx->result, key, json_integer((json_int_t)value));
}

void specialist_result_bool(specialist_ctx_t *ctx, const char *key, bool value)
{
    if (key != NULL)
        json_object_set_new(ctx->result, key, json_boolean(value));
}

void specialist_result_float(specialist_ctx_t *ctx, const char *key, double value)
{
    if (key != NULL)
        json_object_set_new(ctx->result, key, json_real(value));
}

void specialist_result_add_int(specialist_ctx_t *ctx, const char *key, int64_t amount)
{
    const json_t *now = key != NULL ? json_object_get(ctx->result, key) : NULL;
    specialist_result_int(ctx, key, (json_is_integer(now) ? json_integer_value(now) : 0) + amount);
}

void specialist_result_add_float(specialist_ctx_t *ctx, const char *key, double amount)
{
    const json_t *now = key != NULL ? json_object_get(ctx->result, key) : NULL;
    specialist_result_float(ctx, key, (json_is_number(now) ? json_number_value(now) : 0) + amount);
}

void specialist_result_json(specialist_ctx_t *ctx, const char *key, json_t *value)
{
    if (key == NULL || value == NULL)
        return;
    if (s_json_depth(value, SPECIALIST_JSON_DEPTH) >= SPECIALIST_JSON_DEPTH) {
        log_warn("result field '%s' nests deeper than %d levels; dropped", key,
                 SPECIALIST_JSON_DEPTH);
        return;
    }
    json_object_set(ctx->result, key, value);
}

void specialist_result_error(specialist_ctx_t *ctx, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, args);
    va_end(args);
    if (n < 0)
        return;
    text[s_utf8_cut(text, (size_t)n, SPECIALIST_ERROR_CAP)] = '\0';
    free(ctx->error);
    ctx->error = text;
}

void specialist_hand_back(specialist_ctx_t *ctx, const char *reason, int64_t delay_ms, bool pause)
{
    if (ctx->hand_back != NULL)
        return;
    char *text = strdup(reason);
    if (text == NULL)
        return; /* the job's own result goes instead */
    text[s_utf8_cut(text, strlen(text), SPECIALIST_ERROR_CAP)] = '\0';
    ctx->hand_back = text;
    ctx->hand_back_delay_ms = delay_ms;
    ctx->hand_back_pause = pause;
}

int specialist_result_next(specialist_ctx_t *ctx, const json_t *submit)
{
    if (!json_is_object(submit))
        return failure_set(FAILURE_INVALID, "next task: must be a JSON object");
    if (s_json_depth(submit, SPECIALIST_JSON_DEPTH) >= SPECIALIST_JSON_DEPTH)
        return failure_set(FAILURE_INVALID, "next task: nests deeper than %d levels",
                           SPECIALIST_JSON_DEPTH);
    /* Validate it exactly as the broker will: encode and decode it as a submit. */
    wire_writer_t *writer = wire_writer_new();
    if (writer == NULL)
        return failure_set(FAILURE_MEMORY, "next task: out of memory");
    wire_writer_start_map(writer);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)submit, key, value) msgjson_put(writer, key, value);
    size_t len = 0;
    const void *data = wire_writer_data(writer, &len);
    wire_msg_t *msg = NULL;
    int rc = wire_decode_as(data, len, MSG_SUBMIT, &msg);
    wire_msg_destroy(&msg);
    wire_writer_destroy(&writer);
    if (rc != 0)
        return rc;
    json_array_append_new(ctx->next, json_deep_copy(submit));
    return 0;
}

/* ---- the job context (loop side) ---- */

static void s_ctx_destroy(specialist_ctx_t **ctx_p)
{
    specialist_ctx_t *ctx = *ctx_p;
    if (ctx == NULL)
        return;
    while (ctx->head != NULL) {
        progress_item_t *item = ctx->head;
        ctx->head = item->next;
        free(item->kind);
        free(item->text);
        free(item);
    }
    wire_msg_destroy(&ctx->msg);
    json_decref(ctx->task_json);
    json_decref(ctx->result);
    json_decref(ctx->next);
    free(ctx->error);
    free(ctx->hand_back);
    if (ctx->cancel_fd >= 0)
        close(ctx->cancel_fd);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    *ctx_p = NULL;
}

/* Builds the context for a decoded `task` message (taking ownership of *msg_p) with the
 * task's JSON from the raw message bytes. */
static specialist_ctx_t *s_ctx_new(loop_t *loop, wire_msg_t **msg_p, const void *raw,
                                   size_t raw_len)
{
    specialist_ctx_t *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return NULL;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->msg = *msg_p;
    *msg_p = NULL;
    ctx->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ctx->wake_fd = loop->wake_fd;
    ctx->worker_id = loop->worker_id;
    ctx->grace_ms = loop->grace_ms;
    ctx->job = loop->job;
    ctx->job_arg = loop->job_arg;
    ctx->result = json_object();
    ctx->next = json_array();
    ctx->task_json = msgjson_from_raw(raw, raw_len);
    if (ctx->cancel_fd < 0 || ctx->result == NULL || ctx->next == NULL ||
        !json_is_object(ctx->task_json)) {
        s_ctx_destroy(&ctx);
        return NULL;
    }
    atomic_init(&ctx->cancel_reason, SPECIALIST_CANCEL_NONE);

    const wire_msg_t *msg = ctx->msg;
    specialist_task_t *task = &ctx->task;
    task->id = wire_msg_str(msg, FIELD_ID, "");
    task->attempt = wire_msg_int(msg, FIELD_ATTEMPT, 1);
    task->specialist = wire_msg_str(msg, FIELD_SPECIALIST, "");
    task->priority = wire_msg_str(msg, FIELD_PRIORITY, "normal");
    task->source = wire_msg_str(msg, FIELD_SOURCE, "");
    task->title = wire_msg_str(msg, FIELD_TITLE, "");
    task->issue = wire_msg_str(msg, FIELD_ISSUE, "");
    task->group = wire_msg_str(msg, FIELD_GROUP, "");
    task->max_attempts = wire_msg_int(msg, FIELD_MAX_ATTEMPTS, 0);
    task->timeout_s = wire_msg_int(msg, FIELD_TIMEOUT_S, 0);
    if (task->timeout_s <= 0 || task->timeout_s > 7 * 24 * 3600)
        task->timeout_s = loop->default_timeout_s;
    task->payload = wire_msg_object(msg, FIELD_PAYLOAD);
    task->payload_raw = wire_msg_raw(msg, FIELD_PAYLOAD, &task->payload_len);

    json_t *tj = ctx->task_json;
    json_object_del(tj, "v");
    json_object_del(tj, "type");
    json_object_del(tj, "worker");
    json_object_set_new(tj, "timeout_s", json_integer(task->timeout_s));
    if (!json_is_object(json_object_get(tj, "payload")))
        json_object_set_new(tj, "payload", json_object());
    if (!json_is_object(json_object_get(tj, "context")))
        json_object_set_new(tj, "context", json_object());
    task->payload_json = json_object_get(tj, "payload");
    task->context_json = json_object_get(tj, "context");
    task->json = tj;
    return ctx;
}

static void *s_job_thread(void *arg)
{
    specialist_ctx_t *ctx = arg;
    specialist_outcome_t outcome = ctx->job(ctx, ctx->job_arg);
    /* Whatever the job started and detached (setsid) was adopted by us: it ends with the
     * job, before the result says the job is over. */
    int orphans = proc_kill_orphans();
    if (orphans > 0)
        log_warn("task %s: killed %d process(es) its job left behind", ctx->task.id, orphans);
    pthread_mutex_lock(&ctx->lock);
    ctx->finished = true;
    ctx->outcome = outcome;
    pthread_mutex_unlock(&ctx->lock);
    s_wake(ctx->wake_fd);
    return NULL;
}

/* Sets the cancel reason (the first one wins) and wakes a job polling the cancel fd. */
static void s_ctx_cancel(specialist_ctx_t *ctx, specialist_cancel_t reason, bool mute)
{
    int none = SPECIALIST_CANCEL_NONE;
    if (atomic_compare_exchange_strong(&ctx->cancel_reason, &none, (int)reason))
        s_wake(ctx->cancel_fd);
    if (mute) {
        pthread_mutex_lock(&ctx->lock);
        ctx->muted = true;
        pthread_mutex_unlock(&ctx->lock);
    }
}

static bool s_ctx_muted(specialist_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    bool muted = ctx->muted;
    pthread_mutex_unlock(&ctx->lock);
    return muted;
}

static void s_ctx_kill_child(specialist_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    pid_t pgid = ctx->child_pgid;
    pthread_mutex_unlock(&ctx->lock);
    if (pgid > 0) {
        log_warn("killing the job's process group %d", (int)pgid);
        kill(-pgid, SIGKILL);
    }
}

/* ---- sending ---- */

static void s_send(loop_t *loop, const void *data, size_t len)
{
    if (zmq_send(loop->push, data, len, ZMQ_DONTWAIT) < 0)
        log_warn("send to broker failed (%s); dropped", zmq_strerror(errno));
}

static void s_send_writer(loop_t *loop)
{
    size_t len = 0;
    const void *data = wire_writer_data(loop->writer, &len);
    s_send(loop, data, len);
}

/* The running task, if the broker should still think we hold it. */
static specialist_ctx_t *s_held(loop_t *loop)
{
    if (loop->ctx == NULL || s_ctx_muted(loop->ctx))
        return NULL;
    return loop->ctx;
}

static void s_pending_resend_soon(loop_t *loop);

static void s_send_hello(loop_t *loop)
{
    wire_writer_t *w = loop->writer;
    wire_writer_start(w, MSG_HELLO);
    wire_put_str(w, FIELD_WORKER, loop->worker_id);
    wire_put_str(w, FIELD_SPECIALIST, loop->specialist);
    wire_put_str(w, FIELD_ENDPOINT, loop->endpoint);
    if (curve_client() != NULL)
        wire_put_str(w, FIELD_CURVE_KEY, curve_public(curve_client()));
    wire_put_int(w, FIELD_PID, (int64_t)getpid());
    specialist_ctx_t *held = s_held(loop);
    if (held != NULL) {
        wire_put_str(w, FIELD_TASK, held->task.id);
        wire_put_int(w, FIELD_ATTEMPT, held->task.attempt);
    }
    s_send_writer(loop);
    s_pending_resend_soon(loop);
    loop->last_ping = 0; /* a restarted broker numbers its pings anew */
    loop->stats.hellos++;
    log_info("hello: worker %s at %s%s%s", loop->worker_id, loop->endpoint,
             held ? ", holding " : "", held ? held->task.id : "");
}

/* A heartbeat names the task whose job still runs, even a cancelled one: the worker is
 * not free until the job returns (the broker treats it as draining). */
static void s_send_heartbeat(loop_t *loop)
{
    wire_writer_t *w = loop->writer;
    wire_writer_start(w, MSG_HEARTBEAT);
    wire_put_str(w, FIELD_WORKER, loop->worker_id);
    specialist_ctx_t *held = loop->ctx;
    if (held != NULL) {
        wire_put_str(w, FIELD_TASK, held->task.id);
        wire_put_int(w, FIELD_ATTEMPT, held->task.attempt);
    }
    wire_put_int(w, FIELD_PING_SEQ, loop->last_ping);
    s_send_writer(loop);
}

/* Hands the task back: the broker requeues it without counting a failure, due again in
 * delay_ms (0: at once), and with `pause` pauses the specialist. */
static void s_send_release(loop_t *loop, const specialist_ctx_t *ctx, const char *reason,
                           int64_t delay_ms, bool pause)
{
    wire_writer_t *w = loop->writer;
    wire_writer_start(w, MSG_RELEASE);
    wire_put_str(w, FIELD_WORKER, loop->worker_id);
    wire_put_str(w, FIELD_TASK, ctx->task.id);
    wire_put_int(w, FIELD_ATTEMPT, ctx->task.attempt);
    wire_put_str(w, FIELD_REASON, reason);
    if (delay_ms > 0)
        wire_put_int(w, FIELD_DELAY_MS, delay_ms);
    if (pause)
        wire_put_bool(w, FIELD_PAUSE, true);
    s_send_writer(loop);
    log_info("released task %s (attempt %lld)%s%s: %s", ctx->task.id,
             (long long)ctx->task.attempt, pause ? ", pausing the specialist" : "",
             delay_ms > 0 ? ", to run again later" : "", reason);
}

static void s_send_bye(loop_t *loop)
{
    wire_writer_start(loop->writer, MSG_BYE);
    wire_put_str(loop->writer, FIELD_WORKER, loop->worker_id);
    s_send_writer(loop);
    loop->bye_sent = true;
}

static void s_send_progress(loop_t *loop, const specialist_ctx_t *ctx, const char *kind,
                            const char *text)
{
    wire_writer_t *w = loop->writer;
    wire_writer_start(w, MSG_PROGRESS);
    wire_put_str(w, FIELD_WORKER, loop->worker_id);
    wire_put_str(w, FIELD_TASK, ctx->task.id);
    wire_put_int(w, FIELD_ATTEMPT, ctx->task.attempt);
    wire_put_str(w, FIELD_KIND, kind);
    wire_put_str(w, FIELD_TEXT, text);
    s_send_writer(loop);
}

/* ---- results ---- */

static const char *s_outcome_name(specialist_outcome_t outcome)
{
    switch (outcome) {
    case SPECIALIST_DONE: return "done";
    case SPECIALIST_RETRY: return "retry";
    case SPECIALIST_FAILED: break;
    }
    return "failed";
}

/* Encodes a result message into loop->writer. `fields` and `next` may be NULL. */
static void s_write_result(loop_t *loop, const specialist_ctx_t *ctx, const char *outcome,
                           const char *error, const json_t *fields, const json_t *next)
{
    wire_writer_t *w = loop->writer;
    wire_writer_start(w, MSG_RESULT);
    wire_put_str(w, FIELD_WORKER, loop->worker_id);
    wire_put_str(w, FIELD_TASK, ctx->task.id);
    wire_put_int(w, FIELD_ATTEMPT, ctx->task.attempt);
    wire_put_str(w, FIELD_OUTCOME, outcome);
    if (error != NULL && error[0] != '\0')
        wire_put_str(w, FIELD_ERROR, error);
    if (fields != NULL && json_object_size(fields) > 0)
        msgjson_put(w, "result", fields);
    if (next != NULL && json_array_size(next) > 0)
        msgjson_put(w, "next", next);
}

/* Queues the encoded result in loop->writer as pending and sends it. */
static void s_pending_add(loop_t *loop, const specialist_ctx_t *ctx)
{
    size_t len = 0;
    const void *data = wire_writer_data(loop->writer, &len);
    pending_t *p = calloc(1, sizeof *p);
    void *copy = malloc(len);
    if (p == NULL || copy == NULL) {
        free(p);
        free(copy);
        log_error("out of memory keeping the result of %s; sent once", ctx->task.id);
        s_send(loop, data, len);
        return;
    }
    memcpy(copy, data, len);
    snprintf(p->task, sizeof p->task, "%s", ctx->task.id);
    p->attempt = ctx->task.attempt;
    p->data = copy;
    p->len = len;
    p->resend_ms = loop->heartbeat_ms;
    p->resend_at = clock_now_ms() + p->resend_ms;
    p->next = loop->pending;
    loop->pending = p;
    s_send(loop, data, len);
}

/* Drops pending results of task+attempt; returns how many. */
static int s_pending_drop(loop_t *loop, const char *task, int64_t attempt)
{
    int dropped = 0;
    pending_t **link = &loop->pending;
    while (*link != NULL) {
        pending_t *p = *link;
        if (strcmp(p->task, task) == 0 && p->attempt == attempt) {
            *link = p->next;
            free(p->data);
            free(p);
            dropped++;
        } else {
            link = &p->next;
        }
    }
    return dropped;
}

/* Sends again the results whose time has come. */
static void s_pending_resend(loop_t *loop, int64_t now)
{
    int64_t most = (int64_t)loop->heartbeat_ms * PENDING_RESEND_MAX_INTERVALS;
    for (pending_t *p = loop->pending; p != NULL; p = p->next) {
        if (now < p->resend_at)
            continue;
        s_send(loop, p->data, p->len);
        loop->stats.results_resent++;
        p->resend_ms = p->resend_ms * 2 < most ? p->resend_ms * 2 : most;
        p->resend_at = now + p->resend_ms;
    }
}

/* After a hello (a restarted broker, or one that did not hear from us for a while) or a
 * new connection (what was in flight on the old one is lost), every result not yet
 * acknowledged goes again at the next heartbeat. */
static void s_pending_resend_soon(loop_t *loop)
{
    for (pending_t *p = loop->pending; p != NULL; p = p->next) {
        p->resend_ms = loop->heartbeat_ms;
        p->resend_at = 0;
    }
}

static void s_on_push_connections(loop_t *loop, int made)
{
    if (made <= 0)
        return;
    if (loop->push_connections > 0) {
        log_info("connection to the broker made anew (%s)", loop->in_endpoint);
        s_pending_resend_soon(loop);
        s_pending_resend(loop, clock_now_ms());
    }
    loop->push_connections += made;
}

/* Sends the queued progress of the running job. */
static void s_flush_progress(loop_t *loop, specialist_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    progress_item_t *items = ctx->head;
    ctx->head = ctx->tail = NULL;
    ctx->queued = 0;
    bool muted = ctx->muted;
    loop->stats.progress_dropped += ctx->progress_dropped;
    ctx->progress_dropped = 0;
    pthread_mutex_unlock(&ctx->lock);
    while (items != NULL) {
        progress_item_t *item = items;
        items = item->next;
        if (!muted)
            s_send_progress(loop, ctx, item->kind, item->text);
        free(item->kind);
        free(item->text);
        free(item);
    }
}

/* The job returned: join it, send its result (unless muted; a release instead if SIGTERM
 * asked for one and the job did not finish its work), forget it. When leaving, `bye` follows:
 * the job has ended, so the broker may give its task and group to another worker. */
static void s_finish_job(loop_t *loop)
{
    specialist_ctx_t *ctx = loop->ctx;
    pthread_join(ctx->thread, NULL);
    s_flush_progress(loop, ctx);
    int64_t duration = clock_now_ms() - ctx->started_ms;
    specialist_outcome_t outcome = ctx->outcome;
    specialist_cancel_t reason = specialist_cancel_reason(ctx);
    if (s_ctx_muted(ctx)) {
        log_info("task %s (attempt %lld) stopped after %lld ms; nothing sent", ctx->task.id,
                 (long long)ctx->task.attempt, (long long)duration);
    } else if (ctx->hand_back != NULL) {
        s_send_release(loop, ctx, ctx->hand_back, ctx->hand_back_delay_ms, ctx->hand_back_pause);
    } else if (loop->release_at_end && outcome != SPECIALIST_DONE) {
        log_info("task %s (attempt %lld) stopped after %lld ms", ctx->task.id,
                 (long long)ctx->task.attempt, (long long)duration);
        s_send_release(loop, ctx, "worker shutting down", 0, false);
    } else {
        char *error = ctx->error;
        char *timeout_error = NULL;
        if (reason == SPECIALIST_CANCEL_TIMEOUT && outcome != SPECIALIST_DONE) {
            outcome = SPECIALIST_FAILED;
            if (asprintf(&timeout_error, "timed out after %lld s%s%s",
                         (long long)ctx->task.timeout_s, error ? ": " : "",
                         error ? error : "") >= 0) {
                timeout_error[s_utf8_cut(timeout_error, strlen(timeout_error),
                                         SPECIALIST_ERROR_CAP)] = '\0';
                error = timeout_error;
            }
        }
        s_write_result(loop, ctx, s_outcome_name(outcome), error, ctx->result, ctx->next);
        size_t len = 0;
        wire_writer_data(loop->writer, &len);
        if (len > WIRE_MAX_MESSAGE) {
            char too_big[160];
            snprintf(too_big, sizeof too_big,
                     "result of %zu bytes is over the %d-byte cap; fields dropped", len,
                     WIRE_MAX_MESSAGE);
            log_warn("task %s: %s", ctx->task.id, too_big);
            s_write_result(loop, ctx, "failed", too_big, NULL, NULL);
        }
        s_pending_add(loop, ctx);
        log_info("task %s (attempt %lld) %s after %lld ms%s%s", ctx->task.id,
                 (long long)ctx->task.attempt, s_outcome_name(outcome), (long long)duration,
                 error ? ": " : "", error ? error : "");
        free(timeout_error);
    }
    s_ctx_destroy(&loop->ctx);
    loop->grace_deadline = 0;
    loop->release_at_end = false;
    if (loop->leaving && !loop->bye_sent)
        s_send_bye(loop);
}

/* True (and the job's result taken) if the job has already returned. */
static bool s_take_finished_job(loop_t *loop)
{
    if (loop->ctx == NULL)
        return false;
    pthread_mutex_lock(&loop->ctx->lock);
    bool finished = loop->ctx->finished;
    pthread_mutex_unlock(&loop->ctx->lock);
    if (finished)
        s_finish_job(loop);
    return finished;
}

/* After SIGTERM, a job given up (its child killed): hands its task back if SIGTERM asked
 * for that and it is still held. Nothing more is sent for it. */
static void s_release_held(loop_t *loop)
{
    specialist_ctx_t *ctx = loop->ctx;
    if (loop->release_at_end && ctx != NULL && !s_ctx_muted(ctx)) {
        s_ctx_cancel(ctx, SPECIALIST_CANCEL_SHUTDOWN, true);
        s_send_release(loop, ctx, "worker shutting down", 0, false);
    }
    loop->release_at_end = false;
}

/* The cancelled job did not return within its grace period. */
static void s_job_stuck(loop_t *loop, int64_t now)
{
    if (s_take_finished_job(loop))
        return; /* it returned just before the deadline was checked */
    specialist_ctx_t *ctx = loop->ctx;
    log_error("task %s: the job did not stop within %d ms; giving up on this process",
              ctx->task.id, loop->grace_ms);
    s_ctx_kill_child(ctx);
    s_flush_progress(loop, ctx);
    s_release_held(loop); /* SIGTERM came during the grace: released, not timed out */
    if (!s_ctx_muted(ctx)) {
        char error[200];
        snprintf(error, sizeof error, "timed out after %lld s; the job did not stop within %d ms",
                 (long long)ctx->task.timeout_s, loop->grace_ms);
        s_write_result(loop, ctx, "failed", error, NULL, NULL);
        s_pending_add(loop, ctx);
        s_ctx_cancel(ctx, SPECIALIST_CANCEL_TIMEOUT, true);
    }
    /* The thread still runs and may still touch ctx and the wake fd: both are left alone
     * (the process is about to exit). */
    loop->stuck = true;
    loop->grace_deadline = 0;
    if (!loop->leaving) {
        loop->leaving = true;
        loop->leave_deadline = now + (int64_t)loop->heartbeat_ms * loop->heartbeat_misses;
    }
}

/* Leaving while a job may still run: collect it if it has just finished, otherwise kill
 * its child and leave the thread behind (stuck), releasing its task if SIGTERM asked for
 * that. */
static void s_give_up_job(loop_t *loop)
{
    if (loop->ctx == NULL || loop->stuck || s_take_finished_job(loop))
        return;
    log_error("task %s: the job did not stop before leaving", loop->ctx->task.id);
    s_ctx_kill_child(loop->ctx);
    s_release_held(loop);
    loop->stuck = true;
}

/* ---- receiving ---- */

static void s_start_job(loop_t *loop, wire_msg_t **msg_p, const void *raw, size_t len,
                        int64_t now)
{
    specialist_ctx_t *ctx = s_ctx_new(loop, msg_p, raw, len);
    if (ctx == NULL) {
        log_error("cannot set up a job (out of memory or file descriptors)");
        wire_msg_destroy(msg_p);
        return;
    }
    ctx->started_ms = now;
    loop->ctx = ctx;
    loop->lease_deadline = now + ctx->task.timeout_s * 1000;
    loop->grace_deadline = 0;
    loop->stats.tasks_run++;
    log_info("task %s (attempt %lld, %s): %s", ctx->task.id, (long long)ctx->task.attempt,
             ctx->task.priority, ctx->task.title);
    if (pthread_create(&ctx->thread, NULL, s_job_thread, ctx) != 0) {
        log_error("cannot start the job thread for %s", ctx->task.id);
        s_write_result(loop, ctx, "retry", "worker could not start the job thread", NULL,
                       NULL);
        s_pending_add(loop, ctx);
        s_ctx_destroy(&loop->ctx);
    }
}

static void s_on_task(loop_t *loop, wire_msg_t **msg_p, const void *raw, size_t len,
                      int64_t now)
{
    wire_msg_t *msg = *msg_p;
    const char *id = wire_msg_str(msg, FIELD_ID, "");
    int64_t attempt = wire_msg_int(msg, FIELD_ATTEMPT, 0);
    const char *why = NULL;
    if (loop->leaving)
        why = "this worker is leaving";
    else if (loop->ctx != NULL)
        why = "this worker is busy";
    else if (strcmp(wire_msg_str(msg, FIELD_SPECIALIST, ""), loop->specialist) != 0)
        why = "it is for another specialist";
    else if (wire_msg_int(msg, FIELD_PING_SEQ, 0) < loop->last_ping)
        why = "a ping sent after it came first (on a newer connection): the broker has "
              "given this attempt up";
    if (why != NULL) {
        loop->stats.tasks_ignored++;
        log_warn("ignored task %s (attempt %lld): %s", id, (long long)attempt, why);
        wire_msg_destroy(msg_p);
        return;
    }
    s_start_job(loop, msg_p, raw, len, now);
}

static void s_on_cancel(loop_t *loop, const wire_msg_t *msg, int64_t now)
{
    const char *task = wire_msg_str(msg, FIELD_TASK, "");
    int64_t attempt = wire_msg_int(msg, FIELD_ATTEMPT, 0);
    const char *reason = wire_msg_str(msg, FIELD_REASON, "cancelled");
    specialist_ctx_t *ctx = loop->ctx;
    if (ctx != NULL && strcmp(ctx->task.id, task) == 0 && ctx->task.attempt == attempt &&
        !s_ctx_muted(ctx)) {
        log_info("cancel of task %s (attempt %lld): %s", task, (long long)attempt, reason);
        s_ctx_cancel(ctx, SPECIALIST_CANCEL_REQUESTED, true);
        if (loop->grace_deadline == 0)
            loop->grace_deadline = now + loop->grace_ms;
    }
    s_pending_drop(loop, task, attempt);
}

/* The broker says which heartbeat it expects (in every ping, and the one that answers a
 * hello): a worker beating slower would be declared lost, so it follows the broker. */
static void s_follow_heartbeat(loop_t *loop, const wire_msg_t *msg)
{
    int64_t heartbeat_ms = wire_msg_int(msg, FIELD_HEARTBEAT_MS, 0);
    int64_t misses = wire_msg_int(msg, FIELD_HEARTBEAT_MISSES, 0);
    if (heartbeat_ms >= 10 && heartbeat_ms <= 600000 && heartbeat_ms != loop->heartbeat_ms) {
        log_info("the broker expects a heartbeat every %lld ms (was %d ms)",
                 (long long)heartbeat_ms, loop->heartbeat_ms);
        loop->heartbeat_ms = (int)heartbeat_ms;
        int64_t soon = clock_now_ms() + heartbeat_ms;
        if (loop->next_heartbeat > soon)
            loop->next_heartbeat = soon;
    }
    if (misses >= 1 && misses <= 1000)
        loop->heartbeat_misses = (int)misses;
}

static void s_on_ping(loop_t *loop, const wire_msg_t *msg)
{
    s_follow_heartbeat(loop, msg);
    /* The highest: a ping still on its way on a connection the broker has closed (it took
     * this worker for lost) is older than those on the new one. */
    int64_t seq = wire_msg_int(msg, FIELD_PING_SEQ, 0);
    if (seq > loop->last_ping)
        loop->last_ping = seq;
    const char *epoch = wire_msg_str(msg, FIELD_EPOCH, "");
    if (loop->epoch[0] != '\0' && strcmp(loop->epoch, epoch) != 0 && !loop->leaving) {
        log_info("broker restarted (epoch %s -> %s); announcing again", loop->epoch, epoch);
        snprintf(loop->epoch, sizeof loop->epoch, "%s", epoch);
        s_send_hello(loop);
        return;
    }
    snprintf(loop->epoch, sizeof loop->epoch, "%s", epoch);
}

static void s_on_message(loop_t *loop, const void *data, size_t len, int64_t now)
{
    wire_msg_t *msg = NULL;
    if (wire_decode(data, len, &msg) != 0) {
        loop->stats.messages_rejected++;
        log_warn("refused a message from the broker: %s", failure_message());
        return;
    }
    msg_type_t type = wire_msg_type(msg);
    const char *worker = wire_msg_str(msg, FIELD_WORKER, "");
    if (strcmp(worker, loop->worker_id) != 0) {
        if (type == MSG_TASK)
            loop->stats.tasks_ignored++;
        log_warn("ignored a '%s' addressed to worker '%s'", msg_type_name(type), worker);
        wire_msg_destroy(&msg);
        return;
    }
    loop->last_contact = now;
    switch (type) {
    case MSG_TASK: s_on_task(loop, &msg, data, len, now); break;
    case MSG_ACK:
        s_pending_drop(loop, wire_msg_str(msg, FIELD_TASK, ""), wire_msg_int(msg, FIELD_ATTEMPT, 0));
        break;
    case MSG_CANCEL: s_on_cancel(loop, msg, now); break;
    case MSG_PING: s_on_ping(loop, msg); break;
    default:
        loop->stats.messages_rejected++;
        log_warn("ignored an unexpected '%s' message", msg_type_name(type));
    }
    wire_msg_destroy(&msg);
}

static void s_drain_pull(loop_t *loop, int64_t now)
{
    for (;;) {
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, loop->pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frame);
            return;
        }
        bool more = zmq_msg_more(&frame);
        if (more) {
            loop->stats.messages_rejected++;
            log_warn("refused a multi-frame message from the broker");
            while (more) {
                zmq_msg_close(&frame);
                zmq_msg_init(&frame);
                if (zmq_msg_recv(&frame, loop->pull, 0) < 0)
                    break;
                more = zmq_msg_more(&frame);
            }
        } else {
            s_on_message(loop, zmq_msg_data(&frame), zmq_msg_size(&frame), now);
        }
        zmq_msg_close(&frame);
    }
}

/* ---- reloading the configuration ---- */

/* Writes this worker's reload report (specialist_reload.h); `fields` is stolen. */
static void s_reload_report(const loop_t *loop, const char *state, json_t *fields)
{
    json_t *report = json_pack("{s:I, s:s, s:s, s:s}", "pid", (json_int_t)getpid(), "specialist",
                               loop->specialist, "worker", loop->worker_id, "state", state);
    if (report != NULL && fields != NULL)
        json_object_update(report, fields);
    if (report != NULL)
        specialist_reload_report_write(report);
    json_decref(report);
    json_decref(fields);
}

/* SIGHUP: reload now if no job runs, else once it returns (s_reload_if_idle). */
static void s_on_hangup(loop_t *loop)
{
    loop->reload_pending = true;
    if (loop->ctx == NULL)
        return;
    log_info("SIGHUP: cloister.toml is read again once task %s ends", loop->ctx->task.id);
    s_reload_report(loop, "pending", json_pack("{s:s}", "task", loop->ctx->task.id));
}

/* Between tasks: reads the configuration again if SIGHUP asked for it. Never while a job
 * runs (it reads the service's settings) nor while leaving. */
static void s_reload_if_idle(loop_t *loop)
{
    if (!loop->reload_pending || loop->ctx != NULL || loop->leaving)
        return;
    loop->reload_pending = false;
    if (loop->reload == NULL) {
        log_info("SIGHUP: this service reads its settings only at start (restart it)");
        s_reload_report(loop, "unsupported", NULL);
        return;
    }
    specialist_reload_t report;
    memset(&report, 0, sizeof report);
    if (loop->reload(loop->reload_arg, &report) != 0) {
        log_warn("cloister.toml not reloaded, the settings in use stay: %s", failure_message());
        s_reload_report(loop, "refused", json_pack("{s:s}", "error", failure_message()));
        return;
    }
    if (report.default_timeout_s > 0)
        loop->default_timeout_s = report.default_timeout_s;
    log_info("reloaded cloister.toml: applied %s",
             report.applied[0] ? report.applied : "no change");
    if (report.restart[0])
        log_warn("changed in cloister.toml, applied only by a restart: %s", report.restart);
    s_reload_report(loop, "reloaded",
                    json_pack("{s:s, s:s}", "applied", report.applied, "restart", report.restart));
}

/* SIGTERM/SIGINT: stop the job and leave; a second one leaves at once. Signals read in one
 * go (SIGTERM and SIGINT sent together) count as one: only a later signal escalates.
 *
 * The task is released, and `bye` sent, only once the job has ended (s_finish_job) or been
 * given up (s_give_up_job), not at the signal: the broker requeues a released task and
 * frees its group at once, and must not hand them to another worker while this job (a
 * merge still pushing, an agent still writing) runs. Until then the heartbeat keeps naming
 * the task, so the broker keeps it running and its group locked. */
static void s_on_signal(loop_t *loop, int64_t now)
{
    struct signalfd_siginfo info;
    bool counted = false;
    while (read(loop->signal_fd, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo == SIGHUP) {
            s_on_hangup(loop);
            continue;
        }
        if (counted)
            continue;
        counted = true;
        loop->signals++;
        if (loop->signals > 1) {
            log_warn("second signal: leaving now");
            s_give_up_job(loop);
            if (!loop->bye_sent)
                s_send_bye(loop);
            loop->done = true;
            return;
        }
        log_info("signal %u: shutting down", info.ssi_signo);
        /* A job that has just returned keeps its result: it is sent, not released. */
        s_take_finished_job(loop);
        loop->leaving = true;
        loop->leave_deadline = now + loop->grace_ms;
        /* The last tenth of the grace is for the killed child to be reaped and the job to
         * return, so that the release still comes after it and within the grace. */
        loop->kill_deadline = loop->leave_deadline - loop->grace_ms / 10;
        specialist_ctx_t *ctx = loop->ctx;
        if (ctx != NULL && !loop->stuck) {
            loop->release_at_end = !s_ctx_muted(ctx);
            s_ctx_cancel(ctx, SPECIALIST_CANCEL_SHUTDOWN, false);
        } else if (!loop->bye_sent) {
            s_send_bye(loop); /* no job to wait for: leave the broker's pool now */
        }
    }
}

/* The job thread woke us: progress to forward, or it finished. */
static void s_on_wake(loop_t *loop)
{
    uint64_t count;
    ssize_t n = read(loop->wake_fd, &count, sizeof count);
    (void)n; /* EAGAIN: a spurious wake-up; the state below is what counts */
    if (loop->ctx == NULL || loop->stuck)
        return;
    s_flush_progress(loop, loop->ctx);
    pthread_mutex_lock(&loop->ctx->lock);
    bool finished = loop->ctx->finished;
    pthread_mutex_unlock(&loop->ctx->lock);
    if (finished)
        s_finish_job(loop);
}

/* ---- deadlines ---- */

/* A loop that did not run for the broker's whole grace (the process was stopped, SIGSTOP,
 * or starved) sent no heartbeat all that time: a broker that was up has declared this
 * worker lost and given its attempt to another. The job is stopped at once, its result
 * muted, rather than after the hello's answer, so it does as little as possible beside
 * the attempt that replaced it. (A broker that was down instead keeps the attempt for its
 * worker; a job stopped here then runs again: at least once, never two at a time.) */
static void s_fence_frozen_job(loop_t *loop, int64_t now)
{
    int64_t gap = now - loop->last_tick;
    loop->last_tick = now;
    specialist_ctx_t *ctx = loop->stuck ? NULL : loop->ctx;
    if (ctx == NULL || s_ctx_muted(ctx) ||
        gap < (int64_t)loop->heartbeat_ms * loop->heartbeat_misses)
        return;
    log_warn("task %s (attempt %lld): this worker did not run for %lld ms, past the broker's "
             "grace, so the attempt has been given to another worker; stopping the job",
             ctx->task.id, (long long)ctx->task.attempt, (long long)gap);
    s_ctx_cancel(ctx, SPECIALIST_CANCEL_REQUESTED, true);
    if (loop->grace_deadline == 0)
        loop->grace_deadline = now + loop->grace_ms;
}

static void s_on_deadlines(loop_t *loop, int64_t now)
{
    s_fence_frozen_job(loop, now);
    specialist_ctx_t *ctx = loop->stuck ? NULL : loop->ctx;
    if (ctx != NULL && loop->grace_deadline == 0 && now >= loop->lease_deadline) {
        log_warn("task %s: timed out after %lld s; stopping the job", ctx->task.id,
                 (long long)ctx->task.timeout_s);
        s_ctx_cancel(ctx, SPECIALIST_CANCEL_TIMEOUT, false);
        loop->grace_deadline = now + loop->grace_ms;
    }
    if (ctx != NULL && loop->grace_deadline != 0 && now >= loop->grace_deadline)
        s_job_stuck(loop, now);
    if (now >= loop->next_heartbeat) {
        if (!loop->bye_sent)
            s_send_heartbeat(loop);
        s_pending_resend(loop, now);
        loop->next_heartbeat += loop->heartbeat_ms;
        if (loop->next_heartbeat <= now)
            loop->next_heartbeat = now + loop->heartbeat_ms;
    }
    if (!loop->leaving &&
        now - loop->last_contact >= (int64_t)loop->heartbeat_ms * loop->heartbeat_misses) {
        log_info("no word from the broker for %d intervals; announcing again",
                 loop->heartbeat_misses);
        s_send_hello(loop);
        loop->last_contact = now;
    }
    if (loop->leaving) {
        bool job_gone = loop->ctx == NULL || loop->stuck;
        if (!job_gone && !loop->child_killed && now >= loop->kill_deadline) {
            log_warn("task %s: the job did not stop in time; killing its child",
                     loop->ctx->task.id);
            s_ctx_kill_child(loop->ctx);
            loop->child_killed = true;
        }
        if ((job_gone && loop->pending == NULL) || now >= loop->leave_deadline) {
            if (loop->pending != NULL)
                log_warn("leaving with unacknowledged results");
            s_give_up_job(loop);
            if (!loop->bye_sent)
                s_send_bye(loop);
            loop->done = true;
        }
    }
}

static int64_t s_next_deadline(const loop_t *loop)
{
    int64_t next = loop->next_heartbeat;
    int64_t rehello = loop->last_contact + (int64_t)loop->heartbeat_ms * loop->heartbeat_misses;
    if (!loop->leaving && rehello < next)
        next = rehello;
    if (loop->ctx != NULL && !loop->stuck) {
        int64_t job = loop->grace_deadline != 0 ? loop->grace_deadline : loop->lease_deadline;
        if (job < next)
            next = job;
    }
    if (loop->leaving && loop->leave_deadline < next)
        next = loop->leave_deadline;
    if (loop->leaving && loop->ctx != NULL && !loop->stuck && !loop->child_killed &&
        loop->kill_deadline < next)
        next = loop->kill_deadline;
    return next;
}

/* ---- setup ---- */

static void s_make_worker_id(loop_t *loop)
{
    char host[256] = "host";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    uint32_t random = 0;
    if (getrandom(&random, sizeof random, GRND_NONBLOCK) != (ssize_t)sizeof random)
        random = (uint32_t)clock_now_us() ^ (uint32_t)getpid();
    snprintf(loop->worker_id, sizeof loop->worker_id, "%s-%.40s-%d-%08x", loop->specialist, host,
             (int)getpid(), random);
}

/* The ZeroMQ context. With CURVE (common/bus/curve.h) the task socket is a CURVE server that
 * admits only the broker's key, through czmq's ZAP handler, which serves czmq's context:
 * the sockets live there then. */
static int s_start_context(loop_t *loop)
{
    const curve_t *curve = curve_client();
    if (curve == NULL) {
        loop->zmq = zmq_ctx_new();
        return 0;
    }
    zsys_handler_set(NULL); /* the skeleton handles its own signals */
    loop->zmq = zsys_init();
    loop->auth = zactor_new(zauth, NULL);
    if (loop->zmq == NULL || loop->auth == NULL)
        return failure_set(FAILURE_IO, "cannot start the CURVE authenticator");
    zstr_sendx(loop->auth, "CURVE", curve_trusted_dir(curve), NULL);
    return zsock_wait(loop->auth) == 0 ? 0 : failure_set(FAILURE_IO, "zauth did not answer");
}

/* The endpoint announced in hello: the advertise override (its ":*" replaced by the bound
 * port) or the bound endpoint itself. */
static int s_resolve_endpoint(loop_t *loop, const char *advertise)
{
    char bound[1024] = "";
    size_t size = sizeof bound;
    if (zmq_getsockopt(loop->pull, ZMQ_LAST_ENDPOINT, bound, &size) != 0)
        return failure_set(FAILURE_IO, "cannot read the bound endpoint: %s",
                           zmq_strerror(errno));
    if (advertise == NULL || advertise[0] == '\0') {
        snprintf(loop->endpoint, sizeof loop->endpoint, "%s", bound);
        return 0;
    }
    size_t len = strlen(advertise);
    if (len >= 2 && strcmp(advertise + len - 2, ":*") == 0) {
        const char *port = strrchr(bound, ':');
        if (port == NULL || strncmp(bound, "tcp://", 6) != 0)
            return failure_set(FAILURE_INVALID,
                               "advertise '%s' needs a tcp bind endpoint, not '%s'", advertise,
                               bound);
        snprintf(loop->endpoint, sizeof loop->endpoint, "%.*s%s", (int)(len - 2), advertise,
                 port);
        return 0;
    }
    snprintf(loop->endpoint, sizeof loop->endpoint, "%s", advertise);
    return 0;
}

static int s_setup(loop_t *loop, const specialist_config_t *config)
{
    if (specialist_check_name(config->specialist) != 0)
        return FAILURE_INVALID;
    snprintf(loop->specialist, sizeof loop->specialist, "%s", config->specialist);
    if (config->worker_id != NULL && config->worker_id[0] != '\0') {
        if (strlen(config->worker_id) > SPECIALIST_ID_CAP)
            return failure_set(FAILURE_INVALID, "worker id is over %d bytes",
                               SPECIALIST_ID_CAP);
        snprintf(loop->worker_id, sizeof loop->worker_id, "%s", config->worker_id);
    } else {
        s_make_worker_id(loop);
    }
    const char *in = config->in_endpoint;
    if (in == NULL || in[0] == '\0')
        in = getenv("CLOISTER_IN");
    if (in == NULL || in[0] == '\0')
        in = SPECIALIST_DEFAULT_IN;
    snprintf(loop->in_endpoint, sizeof loop->in_endpoint, "%s", in);
    loop->heartbeat_ms =
        config->heartbeat_ms > 0 ? config->heartbeat_ms : SPECIALIST_DEFAULT_HEARTBEAT_MS;
    loop->heartbeat_misses = config->heartbeat_misses > 0 ? config->heartbeat_misses
                                                          : SPECIALIST_DEFAULT_HEARTBEAT_MISSES;
    loop->default_timeout_s =
        config->default_timeout_s > 0 ? config->default_timeout_s : SPECIALIST_DEFAULT_TIMEOUT_S;
    loop->grace_ms = config->grace_ms > 0 ? config->grace_ms : SPECIALIST_DEFAULT_GRACE_MS;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    loop->signal_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    loop->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (loop->signal_fd < 0 || loop->wake_fd < 0)
        return failure_set(FAILURE_IO, "signalfd/eventfd: %s", strerror(errno));

    loop->writer = wire_writer_new();
    if (s_start_context(loop) != 0)
        return FAILURE_IO;
    if (loop->writer == NULL || loop->zmq == NULL)
        return failure_set(FAILURE_MEMORY, "cannot create the writer or the ZeroMQ context");
    loop->push = zmq_socket(loop->zmq, ZMQ_PUSH);
    loop->pull = zmq_socket(loop->zmq, ZMQ_PULL);
    if (loop->push == NULL || loop->pull == NULL)
        return failure_set(FAILURE_IO, "zmq_socket: %s", zmq_strerror(errno));
    int linger = loop->grace_ms;
    zmq_setsockopt(loop->push, ZMQ_LINGER, &linger, sizeof linger);
    int no_linger = 0;
    zmq_setsockopt(loop->pull, ZMQ_LINGER, &no_linger, sizeof no_linger);
    int64_t max_size = WIRE_MAX_MESSAGE;
    zmq_setsockopt(loop->pull, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);

    const char *bind = config->bind_endpoint;
    if (bind == NULL || bind[0] == '\0')
        bind = SPECIALIST_DEFAULT_BIND;
    if (curve_client() != NULL)
        curve_apply_server(curve_client(), loop->pull);
    if (zmq_bind(loop->pull, bind) != 0)
        return failure_set(FAILURE_IO, "cannot bind %s: %s", bind, zmq_strerror(errno));
    if (s_resolve_endpoint(loop, config->advertise) != 0)
        return FAILURE_INVALID;
    if (curve_client() != NULL)
        curve_apply_client(curve_client(), loop->push);
    /* Heartbeats and results must not stall for long on a lossy link: the broker would
     * take this worker for lost. Before the connect, so the first connection is seen. */
    if (tcp_thin_new(loop->zmq, loop->push, loop->worker_id, &loop->push_thin) != 0)
        return FAILURE_IO;
    if (zmq_connect(loop->push, loop->in_endpoint) != 0)
        return failure_set(FAILURE_IO, "cannot connect to %s: %s", loop->in_endpoint,
                           zmq_strerror(errno));
    return 0;
}

static void s_teardown(loop_t *loop)
{
    while (loop->pending != NULL) {
        pending_t *p = loop->pending;
        loop->pending = p->next;
        free(p->data);
        free(p);
    }
    tcp_thin_destroy(&loop->push_thin);
    if (loop->push != NULL)
        zmq_close(loop->push);
    if (loop->pull != NULL)
        zmq_close(loop->pull);
    zactor_destroy(&loop->auth);
    /* czmq's own context (with CURVE) is czmq's to end, at exit. */
    if (loop->zmq != NULL && curve_client() == NULL)
        zmq_ctx_term(loop->zmq);
    wire_writer_destroy(&loop->writer);
    if (loop->signal_fd >= 0)
        close(loop->signal_fd);
    /* A stuck job thread may still write the wake fd: it stays open until exit. */
    if (loop->wake_fd >= 0 && !loop->stuck)
        close(loop->wake_fd);
}

int specialist_run(const specialist_config_t *config, specialist_job_fn *job, void *job_arg,
                   specialist_stats_t *stats)
{
    loop_t *loop = calloc(1, sizeof *loop);
    if (loop == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        return SPECIALIST_EXIT_SETUP;
    }
    loop->signal_fd = -1;
    loop->wake_fd = -1;
    loop->job = job;
    loop->job_arg = job_arg;
    loop->reload = config->reload;
    loop->reload_arg = config->reload_arg;
    int exit_code = 0;
    if (proc_become_subreaper() != 0)
        log_warn("%s (a detached process of a job may outlive it)", failure_message());
    if (s_setup(loop, config) != 0) {
        log_error("%s", failure_message());
        exit_code = SPECIALIST_EXIT_SETUP;
        goto out;
    }
    int64_t now = clock_now_ms();
    log_info("%s worker %s: broker %s, tasks on %s, heartbeat %d ms", loop->specialist,
             loop->worker_id, loop->in_endpoint, loop->endpoint, loop->heartbeat_ms);
    s_send_hello(loop);
    loop->last_contact = now;
    loop->last_tick = now;
    loop->next_heartbeat = now + loop->heartbeat_ms;

    zmq_pollitem_t items[4] = {
        {loop->pull, 0, ZMQ_POLLIN, 0},
        {NULL, loop->signal_fd, ZMQ_POLLIN, 0},
        {NULL, loop->wake_fd, ZMQ_POLLIN, 0},
        {tcp_thin_socket(loop->push_thin), 0, ZMQ_POLLIN, 0},
    };
    while (!loop->done) {
        now = clock_now_ms();
        s_on_deadlines(loop, now);
        if (loop->done)
            break;
        int64_t wait = s_next_deadline(loop) - now;
        if (wait < 0)
            wait = 0;
        if (zmq_poll(items, 4, (long)wait) < 0) {
            if (errno == EINTR)
                continue;
            log_error("zmq_poll: %s", zmq_strerror(errno));
            exit_code = SPECIALIST_EXIT_SETUP;
            s_give_up_job(loop);
            break;
        }
        now = clock_now_ms();
        if (items[0].revents & ZMQ_POLLIN)
            s_drain_pull(loop, now);
        if (items[2].revents & ZMQ_POLLIN)
            s_on_wake(loop);
        if (items[3].revents & ZMQ_POLLIN)
            s_on_push_connections(loop, tcp_thin_drain(loop->push_thin));
        if (items[1].revents & ZMQ_POLLIN)
            s_on_signal(loop, now);
        s_reload_if_idle(loop);
    }
    if (loop->stuck)
        exit_code = SPECIALIST_EXIT_STUCK;
    log_info("worker %s leaving (exit %d): %llu tasks, %llu ignored, %llu results resent",
             loop->worker_id, exit_code, (unsigned long long)loop->stats.tasks_run,
             (unsigned long long)loop->stats.tasks_ignored,
             (unsigned long long)loop->stats.results_resent);
out:
    if (stats != NULL)
        *stats = loop->stats;
    bool stuck = loop->stuck;
    s_teardown(loop);
    /* A stuck job thread may still read the loop's worker id: keep it until exit. */
    if (!stuck)
        free(loop);
    return exit_code;
}

static void s_owner_watch(void *arg, pid_t pgid)
{
    specialist_watch_child(arg, pgid);
}

static bool s_owner_cancelled(void *arg)
{
    return specialist_cancelled(arg);
}

testrun_owner_t specialist_testrun_owner(specialist_ctx_t *ctx)
{
    return (testrun_owner_t){.watch = s_owner_watch, .cancelled = s_owner_cancelled, .arg = ctx};
}
