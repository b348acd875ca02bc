/* hooks: the cloister-hooks loop (see hooks.h).
 *
 * One thread, one loop: wait on the doorbell until the next deadline (a webhook retry
 * due, a catch-up read, a read retried after the broker did not answer), read the new
 * stored events, deliver each ended task's hooks, retry the webhooks that are due, and
 * move the cursor. A command and a POST are bounded by [hooks] timeout_s each and run one
 * at a time, so the loop is never stuck for longer than that. */
#include "hooks.h"

#include "hook_command.h"
#include "webhook.h"

#include "client.h"
#include "clock.h"
#include "curve.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "msgjson.h"
#include "utf8.h"
#include "verdict.h"

#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long to wait before reading again after the broker did not answer. */
#define S_READ_RETRY_MS 1000

static const char *const s_kind_names[HOOKS_COUNT] = {"after_review", "after_test",
                                                      "after_merge"};
static const char *const s_kind_specialists[HOOKS_COUNT] = {"review-agent", "test-agent",
                                                            "merge-agent"};
/* The events that end a task (the doorbell subscribes to "<event>/"). */
static const char *const s_ended_events[] = {"task.done", "task.failed", "task.dead",
                                             "task.cancelled"};
/* Reads after the start, in ms: they catch what was published before the doorbell's
 * subscription reached the broker. */
static const int64_t s_catchup_ms[] = {50, 250, 1000, 3000};

/* A webhook delivery waiting for its next attempt. */
typedef struct s_pending {
    int64_t seq;
    char *task, *event, *body;
    int attempts;   /* made so far */
    int64_t due_ms; /* on clock_now_ms() */
    struct s_pending *next;
} s_pending_t;

typedef struct {
    const hooks_settings_t *settings;
    volatile sig_atomic_t *stop;
    client_t *control;
    client_events_t *replay;
    zsock_t *doorbell;
    char cursor_path[PATH_MAX];
    bool cursor_known;
    int64_t cursor;     /* as saved */
    int64_t read_upto;  /* the last event read */
    s_pending_t *pending;
    int64_t started_ms;
    size_t catchups;    /* catch-up reads done */
    int64_t retry_read_ms; /* 0, or when to read again after a failed read */
} s_hooks_t;

const char *hooks_kind_name(hooks_kind_t kind)
{
    return kind < HOOKS_COUNT ? s_kind_names[kind] : "?";
}

/* ---- notes in the task's events ---- */

static void s_note(s_hooks_t *self, const char *task, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_note(s_hooks_t *self, const char *task, const char *kind, const char *fmt, ...)
{
    char written[2048], text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(written, sizeof written, fmt, args);
    va_end(args);
    utf8_copy(text, sizeof text, written); /* no character cut in two */
    log_info("task %s: %s: %s", task, kind, text);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_NOTE_TASK);
    wire_put_str(w, FIELD_ID, task);
    wire_put_str(w, FIELD_KIND, kind);
    wire_put_str(w, FIELD_TEXT, text);
    wire_msg_t *reply = NULL;
    if (client_call(self->control, w, &reply) != 0)
        log_warn("task %s: cannot note '%s' in its events: %s", task, text, failure_message());
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
}

/* ---- the cursor ---- */

static int s_cursor_save(s_hooks_t *self, int64_t seq)
{
    char temp[PATH_MAX + 8];
    snprintf(temp, sizeof temp, "%s.new", self->cursor_path);
    FILE *f = fopen(temp, "w");
    bool ok = f != NULL && fprintf(f, "%lld\n", (long long)seq) > 0;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok || rename(temp, self->cursor_path) != 0)
        return failure_set(FAILURE_IO, "cannot write %s: %s", self->cursor_path, strerror(errno));
    self->cursor = seq;
    return 0;
}

/* Reads the cursor file; without one the cursor is unknown until the broker says its
 * newest seq (s_cursor_start). */
static void s_cursor_load(s_hooks_t *self)
{
    FILE *f = fopen(self->cursor_path, "r");
    long long seq = -1;
    if (f != NULL && fscanf(f, "%lld", &seq) == 1 && seq >= 0) {
        self->cursor_known = true;
        self->cursor = self->read_upto = seq;
        log_info("delivering from event #%lld on (%s)", seq, self->cursor_path);
    }
    if (f != NULL)
        fclose(f);
}

/* The first start: from the broker's newest event on. Returns 0 or a failure. */
static int s_cursor_start(s_hooks_t *self)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(self->control, w, &reply);
    wire_writer_destroy(&w);
    if (rc != 0)
        return rc;
    const msgpack_object *last = wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_LAST_SEQ);
    int64_t seq =
        last && last->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)last->via.u64 : 0;
    wire_msg_destroy(&reply);
    rc = s_cursor_save(self, seq);
    if (rc == 0) {
        self->cursor_known = true;
        self->read_upto = seq;
        log_info("first start: delivering the tasks that end after event #%lld", (long long)seq);
    }
    return rc;
}

/* Moves the cursor to where every delivery is finished. */
static void s_cursor_move(s_hooks_t *self)
{
    int64_t upto = self->read_upto;
    for (s_pending_t *p = self->pending; p != NULL; p = p->next)
        if (p->seq - 1 < upto)
            upto = p->seq - 1;
    if (upto != self->cursor && s_cursor_save(self, upto) != 0)
        log_warn("%s", failure_message());
}

/* ---- delivering ---- */

static void s_pending_free(s_pending_t *p)
{
    free(p->task);
    free(p->event);
    free(p->body);
    free(p);
}

/* One attempt of a webhook delivery; true when it is finished (delivered, or out of
 * attempts), false when it waits for another. */
static bool s_webhook_attempt(s_hooks_t *self, s_pending_t *p)
{
    const hooks_settings_t *settings = self->settings;
    char outcome[512];
    p->attempts++;
    bool ok = webhook_post(settings->webhook_url, settings->webhook_secret, p->event, p->seq,
                           p->body, strlen(p->body), (long)settings->timeout_s * 1000, outcome,
                           sizeof outcome);
    if (ok) {
        s_note(self, p->task, "webhook", "webhook delivered: %s (attempt %d of %d)", outcome,
               p->attempts, settings->webhook_attempts);
        return true;
    }
    if (p->attempts >= settings->webhook_attempts) {
        s_note(self, p->task, "webhook", "webhook not delivered: %s (gave up after %d attempts)",
               outcome, p->attempts);
        return true;
    }
    int64_t backoff = settings->webhook_backoff_ms;
    for (int i = 1; i < p->attempts && backoff < 3600 * 1000; i++)
        backoff *= 2;
    p->due_ms = clock_now_ms() + backoff;
    s_note(self, p->task, "webhook",
           "webhook attempt %d of %d failed: %s; next in %lld ms", p->attempts,
           settings->webhook_attempts, outcome, (long long)backoff);
    return false;
}

/* The webhook of one ended task: tried now, kept for later when that fails. */
static void s_webhook(s_hooks_t *self, int64_t seq, const char *task, const char *event,
                      const json_t *body)
{
    s_pending_t *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->seq = seq;
        p->task = strdup(task);
        p->event = strdup(event);
        p->body = json_dumps(body, JSON_COMPACT);
    }
    if (p == NULL || p->task == NULL || p->event == NULL || p->body == NULL) {
        log_error("task %s: webhook not sent: out of memory", task);
        if (p != NULL)
            s_pending_free(p);
        return;
    }
    if (s_webhook_attempt(self, p)) {
        s_pending_free(p);
        return;
    }
    p->next = self->pending;
    self->pending = p;
}

/* The command hook of the ended task's specialist, if one is configured. */
static void s_command(s_hooks_t *self, const char *task, const json_t *body)
{
    const char *specialist = json_string_value(json_object_get(body, "specialist"));
    for (int kind = 0; kind < HOOKS_COUNT && specialist != NULL; kind++) {
        const char *command = self->settings->commands[kind];
        if (command == NULL || command[0] == '\0' ||
            strcmp(specialist, s_kind_specialists[kind]) != 0)
            continue;
        char outcome[512], note_kind[32];
        bool ok = hook_command_run(s_kind_names[kind], command, body,
                                   (long)self->settings->timeout_s * 1000, outcome, sizeof outcome);
        snprintf(note_kind, sizeof note_kind, "hook.%s", s_kind_names[kind]);
        s_note(self, task, note_kind, "%s hook %s: %s", s_kind_names[kind], ok ? "ran" : "failed",
               outcome);
    }
}

static bool s_ended(const char *event)
{
    for (size_t i = 0; i < sizeof s_ended_events / sizeof s_ended_events[0]; i++)
        if (strcmp(event, s_ended_events[i]) == 0)
            return true;
    return false;
}

/* client_event_fn: one stored event, in seq order. */
static int s_on_event(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    s_hooks_t *self = arg;
    int64_t seq = wire_msg_int(event, FIELD_SEQ, 0);
    const char *name = wire_msg_str(event, FIELD_EVENT, "");
    const char *task = wire_msg_str(event, FIELD_TASK, "");
    if (s_ended(name) && task[0] != '\0') {
        json_t *body = msgjson_from_raw(raw, len);
        if (body != NULL) {
            json_object_del(body, "v");
            json_object_del(body, "type");
            json_object_set_new(body, "verdict", json_string(verdict_name(verdict_of_task(body))));
            s_command(self, task, body);
            if (self->settings->webhook_url != NULL && self->settings->webhook_url[0] != '\0')
                s_webhook(self, seq, task, name, body);
            json_decref(body);
        } else {
            log_error("event #%lld cannot be read as JSON: skipped", (long long)seq);
        }
    }
    self->read_upto = seq;
    return *self->stop ? 1 : 0;
}

/* Reads (and delivers) every event stored since the last one read. */
static void s_read(s_hooks_t *self)
{
    self->retry_read_ms = 0;
    int rc = self->cursor_known ? 0 : s_cursor_start(self);
    if (rc == 0)
        rc = client_events_run(self->replay, self->control, self->read_upto, false, self->stop,
                               s_on_event, self);
    if (rc != 0) {
        log_warn("cannot read the broker's events: %s (again in %d ms)", failure_message(),
                 S_READ_RETRY_MS);
        self->retry_read_ms = clock_now_ms() + S_READ_RETRY_MS;
    }
    s_cursor_move(self);
}

/* Makes every webhook attempt that is due. */
static void s_retry_due(s_hooks_t *self)
{
    int64_t now = clock_now_ms();
    for (s_pending_t **link = &self->pending; *link != NULL && !*self->stop;) {
        s_pending_t *p = *link;
        if (p->due_ms <= now && s_webhook_attempt(self, p)) {
            *link = p->next;
            s_pending_free(p);
        } else {
            link = &p->next;
        }
    }
    s_cursor_move(self);
}

/* The next deadline (a retry due, a catch-up read, a read retried), or -1 for none. */
static int64_t s_next_deadline(const s_hooks_t *self)
{
    int64_t next = -1;
    for (const s_pending_t *p = self->pending; p != NULL; p = p->next)
        if (next < 0 || p->due_ms < next)
            next = p->due_ms;
    if (self->catchups < sizeof s_catchup_ms / sizeof s_catchup_ms[0]) {
        int64_t at = self->started_ms + s_catchup_ms[self->catchups];
        if (next < 0 || at < next)
            next = at;
    }
    if (self->retry_read_ms > 0 && (next < 0 || self->retry_read_ms < next))
        next = self->retry_read_ms;
    return next;
}

/* Waits for the doorbell or the next deadline; true when it rang (its messages drained). */
static bool s_wait(s_hooks_t *self)
{
    int64_t deadline = s_next_deadline(self);
    long timeout = -1;
    if (deadline >= 0) {
        int64_t left = deadline - clock_now_ms();
        timeout = left > 0 ? (long)left : 0;
    }
    zmq_pollitem_t item = {zsock_resolve(self->doorbell), 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout) <= 0)
        return false;
    while (zsock_events(self->doorbell) & ZMQ_POLLIN) {
        zmsg_t *msg = zmsg_recv(self->doorbell);
        zmsg_destroy(&msg);
    }
    return true;
}

static int s_open(s_hooks_t *self)
{
    int rc = home_path(self->cursor_path, sizeof self->cursor_path, "hooks");
    if (rc == 0)
        rc = home_mkdirs(self->cursor_path);
    if (rc == 0)
        rc = home_path(self->cursor_path, sizeof self->cursor_path, "hooks/cursor");
    if (rc != 0)
        return rc;
    self->control = client_new(self->settings->control_ep, CLIENT_TIMEOUT_MS);
    self->replay = self->control ? client_events_new(NULL, "task.") : NULL;
    if (self->replay == NULL)
        return FAILURE_IO;
    self->doorbell = zsock_new(ZMQ_SUB);
    if (self->doorbell == NULL)
        return failure_set(FAILURE_IO, "cannot create the events socket");
    zsock_set_linger(self->doorbell, 0);
    if (curve_client() != NULL)
        curve_apply_client(curve_client(), self->doorbell);
    for (size_t i = 0; i < sizeof s_ended_events / sizeof s_ended_events[0]; i++) {
        char topic[64];
        snprintf(topic, sizeof topic, "%s/", s_ended_events[i]);
        zsock_set_subscribe(self->doorbell, topic);
    }
    if (zsock_connect(self->doorbell, "%s", self->settings->events_ep) != 0)
        return failure_set(FAILURE_INVALID, "cannot connect to events endpoint '%s'",
                           self->settings->events_ep);
    return 0;
}

int hooks_run(const hooks_settings_t *settings, volatile sig_atomic_t *stop)
{
    s_hooks_t self = {.settings = settings, .stop = stop, .cursor = -1};
    int rc = s_open(&self);
    if (rc == 0) {
        s_cursor_load(&self);
        self.started_ms = clock_now_ms();
        s_read(&self);
    }
    while (rc == 0 && !*stop) {
        bool rang = s_wait(&self);
        int64_t now = clock_now_ms();
        bool catchup = self.catchups < sizeof s_catchup_ms / sizeof s_catchup_ms[0] &&
                       now >= self.started_ms + s_catchup_ms[self.catchups];
        if (catchup)
            self.catchups++;
        if (rang || catchup || (self.retry_read_ms > 0 && now >= self.retry_read_ms))
            s_read(&self);
        s_retry_due(&self);
    }
    while (self.pending != NULL) {
        s_pending_t *p = self.pending;
        self.pending = p->next;
        s_pending_free(p);
    }
    zsock_destroy(&self.doorbell);
    client_events_destroy(&self.replay);
    client_destroy(&self.control);
    return rc;
}
