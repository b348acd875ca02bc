/* broker_control: the request/reply socket used by `pan` and any client. Every request
 * gets exactly one `reply`; a submit's reply leaves only after the task is committed
 * (replies go through the outbox, which is flushed after the commit). */
#include "broker_internal.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

/* "cancelled by a user: " and a cancel_task's reason (at most 4096 bytes). */
#define TEXT_REASON_MAX (4096 + 64)
#define REPLAY_DEFAULT_LIMIT 1000
#define REPLAY_MAX_LIMIT 10000
#define LIST_TASKS_DEFAULT_LIMIT 50
#define LIST_TASKS_MAX_LIMIT 1000
/* A reply stays well under the message cap clients enforce; a long listing is cut there
 * and `truncated` is set. */
#define REPLY_BUDGET (WIRE_MAX_MESSAGE - 256 * 1024)
/* A replay page is smaller: a client pages on from the last seq anyway, and a page is what
 * a peer that does not read can make the broker build (replies.h). */
#define REPLAY_PAGE_BUDGET (512 * 1024)

typedef struct {
    broker_t *broker;
    zmsg_t *envelope;
    const char *peer_key; /* with CURVE: the requester's public key (Z85); NULL when plain */
    const void *data;     /* the request as it came */
    size_t len;
    bool durable;         /* the reply reports a change the commit stores */
} request_t;

static void s_send(request_t *req)
{
    size_t len;
    const void *data = wire_writer_data(req->broker->writer, &len);
    broker_outbox_reply(req->broker, req->envelope, data, len, req->durable);
}

static void s_write_error(wire_writer_t *w, int code, const char *reason)
{
    wire_writer_start(w, MSG_REPLY);
    wire_put_bool(w, FIELD_OK, false);
    wire_put_str(w, FIELD_CODE, failure_name(code));
    wire_put_str(w, FIELD_ERROR, reason);
}

static void s_reply_error(request_t *req, int code, const char *reason)
{
    s_write_error(req->broker->writer, code, reason);
    s_send(req);
}

/* Starts an ok reply; the caller writes the value of "data" next, then calls s_send. */
static wire_writer_t *s_reply_ok(request_t *req)
{
    wire_writer_t *w = req->broker->writer;
    wire_writer_start(w, MSG_REPLY);
    wire_put_bool(w, FIELD_OK, true);
    return w;
}

static void s_reply_task(request_t *req, const task_t *task)
{
    wire_writer_t *w = s_reply_ok(req);
    wire_open_map(w, FIELD_DATA);
    broker_write_task(w, task, true);
    wire_close(w);
    s_send(req);
}

static void s_submit(request_t *req, const wire_msg_t *msg)
{
    task_t *task = NULL;
    bool loaded = false, created = false;
    int rc = key_roles_check(req->broker->roles, req->peer_key, KEY_ACTION_SUBMIT);
    if (rc == 0)
        rc = broker_submit(req->broker, msg, NULL, req->peer_key, &task, &loaded, &created);
    if (rc == FAILURE_INVALID || rc == FAILURE_TOO_BIG || rc == FAILURE_DISK_FULL ||
        rc == FAILURE_DENIED)
        broker_submit_refused(req->broker, wire_msg_str(msg, FIELD_ID, NULL), rc);
    if (rc != 0) {
        s_reply_error(req, rc, failure_message());
        return;
    }
    req->durable = created;
    s_reply_task(req, task);
    if (loaded)
        task_destroy(&task);
}

/* Finds a task in memory or, if finished, in the store (*loaded: caller destroys it). */
static task_t *s_find(request_t *req, const char *id, bool *loaded)
{
    *loaded = false;
    task_t *task = zhashx_lookup(req->broker->tasks, id);
    if (task != NULL)
        return task;
    int rc = store_task_load(req->broker->store, id, &task);
    if (rc != 0) {
        s_reply_error(req, rc, failure_message());
        return NULL;
    }
    *loaded = true;
    return task;
}

static void s_show(request_t *req, const wire_msg_t *msg)
{
    bool loaded;
    task_t *task = s_find(req, wire_msg_str(msg, FIELD_ID, ""), &loaded);
    if (task == NULL)
        return;
    s_reply_task(req, task);
    if (loaded)
        task_destroy(&task);
}

/* Whether the requester may cancel or retry `task`: a key that may change tasks (not a
 * worker's or an agent's), and the one that submitted it or an admin's. False with the
 * reason in failure_message(). */
static bool s_may_change(request_t *req, const task_t *task)
{
    key_roles_t *roles = req->broker->roles;
    if (key_roles_check(roles, req->peer_key, KEY_ACTION_CHANGE) != 0)
        return false;
    bool own = req->peer_key == NULL || task->submitter_key == NULL ||
               strcmp(task->submitter_key, req->peer_key) == 0;
    return own || key_roles_check(roles, req->peer_key, KEY_ACTION_OTHERS_TASKS) == 0;
}

static void s_cancel(request_t *req, const wire_msg_t *msg)
{
    broker_t *self = req->broker;
    bool loaded;
    task_t *task = s_find(req, wire_msg_str(msg, FIELD_ID, ""), &loaded);
    if (task == NULL)
        return;
    if (loaded) {
        char reason[256];
        snprintf(reason, sizeof reason, "task %s is already %s", task->id,
                 task_state_name(task->state));
        s_reply_error(req, FAILURE_STATE, reason);
        task_destroy(&task);
        return;
    }
    if (!s_may_change(req, task)) {
        s_reply_error(req, FAILURE_DENIED, failure_message());
        return;
    }
    /* The request's reason, when it gives one, goes with "cancelled by a user". */
    const char *why = wire_msg_str(msg, FIELD_REASON, "");
    char reason[TEXT_REASON_MAX];
    snprintf(reason, sizeof reason, "cancelled by a user%s%s", why[0] ? ": " : "", why);
    if (task->worker != NULL)
        broker_send_cancel(self, task->worker, task, reason);
    /* The reply is the task as show_task gives it from now on (state, error, updated):
     * read back from the store, since finishing frees the active record. */
    char id[MESSAGES_ID_CAP + 1];
    snprintf(id, sizeof id, "%s", task->id);
    int rc = store_begin(self->store);
    if (rc == 0)
        rc = broker_task_finish(self, task, TASK_CANCELLED, reason, NULL, 0);
    task_t *ended = NULL;
    if (rc == 0)
        rc = store_task_load(self->store, id, &ended);
    if (rc == 0) {
        wire_writer_t *w = s_reply_ok(req);
        wire_open_map(w, FIELD_DATA);
        broker_write_task(w, ended, false);
        wire_close(w);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        broker_outbox_reply(self, req->envelope, data, len, true);
        task_destroy(&ended);
    }
    if (rc != 0)
        s_reply_error(req, rc, failure_message());
}

static void s_retry(request_t *req, const wire_msg_t *msg)
{
    broker_t *self = req->broker;
    bool loaded;
    task_t *task = s_find(req, wire_msg_str(msg, FIELD_ID, ""), &loaded);
    if (task == NULL)
        return;
    if (!loaded || task->state == TASK_DONE) {
        char reason[256];
        snprintf(reason, sizeof reason, "task %s is %s; only failed, dead or cancelled tasks can be retried",
                 task->id, task_state_name(task->state));
        s_reply_error(req, FAILURE_STATE, reason);
        if (loaded)
            task_destroy(&task);
        return;
    }
    if (!s_may_change(req, task) ||
        (task->state == TASK_DEAD &&
         key_roles_check(self->roles, req->peer_key, KEY_ACTION_RETRY_DEAD) != 0)) {
        s_reply_error(req, FAILURE_DENIED, failure_message());
        task_destroy(&task);
        return;
    }
    task->queue = broker_queue(self, task->specialist, true);
    if (task->state == TASK_DEAD)
        self->dead_count--;
    task->state = TASK_QUEUED;
    task->failures = 0;
    task->not_before = 0;
    task->updated = clock_wall_ms();
    task_set_text(&task->error, NULL);
    task_set_text(&task->worker_id, NULL);
    free(task->result);
    task->result = NULL;
    task->result_len = 0;
    int rc = store_begin(self->store);
    if (rc == 0)
        rc = store_task_update(self->store, task, "", 0);
    if (rc != 0) {
        s_reply_error(req, rc, failure_message());
        task_destroy(&task);
        return;
    }
    broker_task_take_files(task);
    zhashx_insert(self->tasks, task->id, task);
    queue_insert(task->queue, task);
    event_extra_t extra = {.text = "retried by a user"};
    broker_emit(self, EVENT_TASK_QUEUED, task, &extra);
    req->durable = true;
    s_reply_task(req, task);
}

/* list_queue: a queue's tasks in dispatch order, from `offset` (default 0), at most
 * `limit` (default: as many as the reply holds). Walking to the offset costs its length,
 * in memory. */
static void s_list_queue(request_t *req, const wire_msg_t *msg)
{
    const char *name = wire_msg_str(msg, FIELD_SPECIALIST, "");
    int64_t offset = wire_msg_int(msg, FIELD_OFFSET, 0);
    int64_t limit = wire_msg_int(msg, FIELD_LIMIT, INT64_MAX);
    if (offset < 0 || limit < 1) {
        s_reply_error(req, FAILURE_INVALID,
                      "list_queue: offset must be 0 or more and limit 1 or more");
        return;
    }
    queue_t *queue = broker_queue(req->broker, name, false);
    if (queue == NULL) {
        char reason[160];
        snprintf(reason, sizeof reason, "unknown specialist '%s'", name);
        s_reply_error(req, FAILURE_NOT_FOUND, reason);
        return;
    }
    wire_writer_t *w = s_reply_ok(req);
    wire_open_array(w, FIELD_DATA);
    bool truncated = false;
    int64_t index = 0, listed = 0;
    for (int p = 0; p < PRIORITY_COUNT && !truncated && listed < limit; p++) {
        for (task_t *task = queue->head[p]; task && !truncated && listed < limit;
             task = task->next, index++) {
            if (index < offset)
                continue;
            truncated = wire_writer_size(w) + task->payload_len > REPLY_BUDGET;
            if (!truncated) {
                wire_open_map_key(w, NULL);
                broker_write_task(w, task, false);
                wire_close(w);
                listed++;
            }
        }
    }
    wire_close(w);
    if (truncated)
        wire_put_bool(w, FIELD_TRUNCATED, true);
    s_send(req);
}

/* set_priority: a queued task moves to another priority, at its submit-order place there
 * (a priority's list is in submit order), so "move to urgent" puts it before every queued
 * task of the lower priorities. Only a queued task can move: a running one has been
 * dispatched, an ended one never will be. */
static void s_set_priority(request_t *req, const wire_msg_t *msg)
{
    broker_t *self = req->broker;
    const char *wanted = wire_msg_str(msg, FIELD_PRIORITY, "");
    int priority = priority_parse(wanted);
    if (priority < 0) {
        char reason[128];
        snprintf(reason, sizeof reason, "invalid priority '%.16s' (urgent, high, normal, low)",
                 wanted);
        s_reply_error(req, FAILURE_INVALID, reason);
        return;
    }
    bool loaded;
    task_t *task = s_find(req, wire_msg_str(msg, FIELD_ID, ""), &loaded);
    if (task == NULL)
        return;
    if (task->state != TASK_QUEUED) {
        char reason[256];
        snprintf(reason, sizeof reason, "task %s is %s; only a queued task can change priority",
                 task->id, task_state_name(task->state));
        s_reply_error(req, FAILURE_STATE, reason);
        if (loaded)
            task_destroy(&task);
        return;
    }
    if (!s_may_change(req, task)) {
        s_reply_error(req, FAILURE_DENIED, failure_message());
        return;
    }
    if ((int)task->priority != priority) {
        priority_t was = task->priority;
        int64_t updated = task->updated;
        task->priority = (priority_t)priority;
        task->updated = clock_wall_ms();
        int rc = store_begin(self->store);
        if (rc == 0)
            rc = store_task_priority(self->store, task);
        if (rc != 0) {
            task->priority = was;
            task->updated = updated;
            s_reply_error(req, rc, failure_message());
            return;
        }
        task->priority = was;
        queue_remove(task->queue, task);
        task->priority = (priority_t)priority;
        queue_insert(task->queue, task);
        char text[64];
        snprintf(text, sizeof text, "moved to %s by a user", priority_name(task->priority));
        event_extra_t extra = {.text = text};
        broker_emit(self, EVENT_TASK_QUEUED, task, &extra);
        req->durable = true;
    }
    s_reply_task(req, task);
}

/* One list_tasks reply being written. */
typedef struct {
    wire_writer_t *writer;
    size_t count;
    bool truncated;
} task_page_t;

/* Adds one task to the page, or stops (returns 1) when it would take the reply over its
 * budget; the first always goes in, so paging on with `before` always moves forward. */
static int s_list_one(task_t *task, void *arg)
{
    task_page_t *page = arg;
    if (page->count > 0 && wire_writer_size(page->writer) + task->payload_len + 4096 > REPLY_BUDGET) {
        page->truncated = true;
        return 1;
    }
    wire_open_map_key(page->writer, NULL);
    broker_write_task(page->writer, task, false);
    wire_close(page->writer);
    page->count++;
    return 0;
}

/* Ends the page's array and sends it; or, when the listing failed (`rc`), the error. */
static void s_send_page(request_t *req, task_page_t *page, int rc)
{
    wire_close(page->writer);
    if (page->truncated)
        wire_put_bool(page->writer, FIELD_TRUNCATED, true);
    if (rc != 0)
        s_reply_error(req, rc, failure_message());
    else
        s_send(req);
}

/* Newest first: by creation, then by insertion (the store's row id). */
static int s_compare_newest(const void *a, const void *b)
{
    const task_t *x = *(task_t *const *)a, *y = *(task_t *const *)b;
    if (x->created != y->created)
        return x->created > y->created ? -1 : 1;
    return x->rowid > y->rowid ? -1 : x->rowid < y->rowid;
}

/* True when `task` passes the filter and comes after the cursor `before` (may be NULL). */
static bool s_active_matches(const task_t *task, const store_task_filter_t *filter,
                             task_state_t state, const task_t *before)
{
    const task_t *pair[2] = {before, task};
    return task->state == state &&
           (filter->specialist == NULL || strcmp(task->queue->name, filter->specialist) == 0) &&
           (filter->issue == NULL || (task->issue && strcmp(task->issue, filter->issue) == 0)) &&
           task->created >= filter->created_after &&
           (before == NULL || s_compare_newest(&pair[0], &pair[1]) < 0);
}

/* Running tasks: the running list is short; sorted newest first. Sets *n, returns the
 * matches (caller frees) or NULL when memory runs out. */
static task_t **s_running_matches(broker_t *self, const store_task_filter_t *filter,
                                  const task_t *before, size_t *n)
{
    *n = 0;
    task_t **matches = malloc(((size_t)self->running_count + 1) * sizeof *matches);
    if (matches == NULL)
        return NULL;
    for (task_t *task = self->running; task != NULL; task = task->next)
        if (s_active_matches(task, filter, TASK_RUNNING, before))
            matches[(*n)++] = task;
    qsort(matches, *n, sizeof *matches, s_compare_newest);
    return matches;
}

/* Queued tasks, newest first, without looking at them all: each priority list of a queue
 * is in submit order, which is creation order, so its tail is its newest task. The page is
 * a merge of the lists walked back from their tails, cost limit x lists (plus the tasks a
 * filter skips), whatever the depth of the queues. Sets *n, returns the matches (caller
 * frees) or NULL when memory runs out. */
static task_t **s_queued_matches(broker_t *self, const store_task_filter_t *filter,
                                 const task_t *before, size_t *n)
{
    *n = 0;
    size_t nqueues = zhashx_size(self->queues);
    task_t **cursors = calloc(nqueues * PRIORITY_COUNT + 1, sizeof *cursors);
    task_t **matches = malloc(((size_t)filter->limit + 1) * sizeof *matches);
    if (cursors == NULL || matches == NULL) {
        free(cursors);
        free(matches);
        return NULL;
    }
    size_t ncursors = 0;
    for (queue_t *queue = zhashx_first(self->queues); queue; queue = zhashx_next(self->queues)) {
        if (filter->specialist != NULL && strcmp(queue->name, filter->specialist) != 0)
            continue;
        for (int p = 0; p < PRIORITY_COUNT; p++)
            if (queue->tail[p] != NULL)
                cursors[ncursors++] = queue->tail[p];
    }
    while (*n < (size_t)filter->limit) {
        size_t newest = ncursors;
        for (size_t i = 0; i < ncursors; i++) {
            if (cursors[i] != NULL &&
                (newest == ncursors || s_compare_newest(&cursors[i], &cursors[newest]) < 0))
                newest = i;
        }
        if (newest == ncursors || cursors[newest]->created < filter->created_after)
            break; /* every list is walked, or older than the oldest asked for */
        task_t *task = cursors[newest];
        cursors[newest] = task->prev;
        if (s_active_matches(task, filter, TASK_QUEUED, before))
            matches[(*n)++] = task;
    }
    free(cursors);
    return matches;
}

/* Queued and running tasks are all in memory, and their store rows change the most, so
 * they are listed from here rather than kept in a store index. */
static void s_list_active(request_t *req, const store_task_filter_t *filter, task_state_t state,
                          task_page_t *page)
{
    broker_t *self = req->broker;
    task_t *before = NULL;
    bool loaded = false;
    if (filter->before_id != NULL) {
        before = zhashx_lookup(self->tasks, filter->before_id);
        if (before == NULL) {
            int rc = store_task_load(self->store, filter->before_id, &before);
            if (rc == FAILURE_NOT_FOUND)
                failure_set(rc, "before: no task '%s'", filter->before_id);
            if (rc != 0) {
                s_reply_error(req, rc, failure_message());
                return;
            }
            loaded = true;
        }
    }
    size_t n = 0;
    task_t **matches = state == TASK_RUNNING ? s_running_matches(self, filter, before, &n)
                                             : s_queued_matches(self, filter, before, &n);
    if (matches == NULL) {
        s_reply_error(req, FAILURE_MEMORY, "list_tasks: out of memory");
    } else {
        for (size_t i = 0; i < n && i < (size_t)filter->limit && s_list_one(matches[i], page) == 0;
             i++)
            ;
        s_send_page(req, page, 0);
    }
    free(matches);
    if (loaded)
        task_destroy(&before);
}

/* Checks list_tasks' fields; fills *filter and *state (-1: any). Replies and returns false
 * when they are wrong. */
static bool s_list_tasks_filter(request_t *req, const wire_msg_t *msg, store_task_filter_t *filter,
                                int *state)
{
    *filter = (store_task_filter_t){
        .state = wire_msg_str(msg, FIELD_STATE, NULL),
        .specialist = wire_msg_str(msg, FIELD_SPECIALIST, NULL),
        .issue = wire_msg_str(msg, FIELD_ISSUE, NULL),
        .created_after = wire_msg_int(msg, FIELD_CREATED_AFTER, 0),
        .before_id = wire_msg_str(msg, FIELD_BEFORE, NULL),
    };
    int64_t limit = wire_msg_int(msg, FIELD_LIMIT, LIST_TASKS_DEFAULT_LIMIT);
    char reason[160];
    *state = filter->state ? task_state_parse(filter->state) : -1;
    if (limit < 1 || limit > LIST_TASKS_MAX_LIMIT) {
        s_reply_error(req, FAILURE_INVALID, "list_tasks: limit must be 1..1000 (default 50)");
        return false;
    }
    if (filter->state != NULL && *state < 0) {
        snprintf(reason, sizeof reason,
                 "list_tasks: unknown state '%.32s' (queued, running, done, failed, dead, "
                 "cancelled)",
                 filter->state);
        s_reply_error(req, FAILURE_INVALID, reason);
        return false;
    }
    if (filter->specialist != NULL) {
        queue_t *queue = broker_queue(req->broker, filter->specialist, false);
        if (queue == NULL) {
            snprintf(reason, sizeof reason, "unknown specialist '%.64s'", filter->specialist);
            s_reply_error(req, FAILURE_NOT_FOUND, reason);
            return false;
        }
        filter->specialist = queue->name; /* the `-` spelling, as stored */
    }
    filter->limit = (int)limit;
    return true;
}

/* Tasks of every state, newest first: ended ones from the store's indexes (see
 * store_task_list), queued and running ones from memory. */
static void s_list_tasks(request_t *req, const wire_msg_t *msg)
{
    store_task_filter_t filter;
    int state;
    if (!s_list_tasks_filter(req, msg, &filter, &state))
        return;
    task_page_t page = {.writer = s_reply_ok(req)};
    wire_open_array(page.writer, FIELD_DATA);
    if (state == TASK_QUEUED || state == TASK_RUNNING) {
        s_list_active(req, &filter, state, &page);
        return;
    }
    s_send_page(req, &page, store_task_list(req->broker->store, &filter, s_list_one, &page));
}

static void s_list_specialists(request_t *req)
{
    broker_t *self = req->broker;
    wire_writer_t *w = s_reply_ok(req);
    wire_open_array(w, FIELD_DATA);
    for (queue_t *queue = zhashx_first(self->queues); queue; queue = zhashx_next(self->queues)) {
        int running = 0, workers = 0, idle = 0;
        for (task_t *task = self->running; task; task = task->next)
            running += task->queue == queue;
        for (worker_t *worker = zhashx_first(self->workers); worker;
             worker = zhashx_next(self->workers)) {
            if (worker->queue != queue)
                continue;
            workers++;
            idle += worker->task == NULL && !worker->draining;
        }
        wire_open_map_key(w, NULL);
        wire_put_str(w, FIELD_NAME, queue->name);
        wire_put_int(w, FIELD_QUEUED, (int64_t)queue_total(queue));
        wire_put_key_int(w, priority_name(PRIORITY_URGENT), (int64_t)queue->depth[PRIORITY_URGENT]);
        wire_put_int(w, FIELD_RUNNING, running);
        wire_put_int(w, FIELD_WORKERS, workers);
        wire_put_int(w, FIELD_IDLE_WORKERS, idle);
        wire_put_int(w, FIELD_DONE, (int64_t)queue->done);
        wire_put_int(w, FIELD_FAILED, (int64_t)queue->failed);
        wire_put_int(w, FIELD_DEAD, (int64_t)queue->dead);
        wire_put_int(w, FIELD_TIMEOUT_S, queue->default_timeout_s);
        wire_put_str(w, FIELD_PAUSED, queue->paused);
        wire_open_array(w, FIELD_WORKER_IDS);
        for (worker_t *worker = zhashx_first(self->workers); worker;
             worker = zhashx_next(self->workers)) {
            if (worker->queue == queue)
                wire_elem_str(w, worker->id);
        }
        wire_close(w);
        /* What its running tasks said they are doing ("resolving conflicts in 2 files"). */
        wire_open_array(w, FIELD_PHASES);
        for (task_t *task = self->running; task; task = task->next) {
            if (task->queue != queue || broker_task_phase(task) == NULL)
                continue;
            wire_open_map_key(w, NULL);
            wire_put_str(w, FIELD_TASK, task->id);
            wire_put_str(w, FIELD_PHASE, broker_task_phase(task));
            wire_close(w);
        }
        wire_close(w);
        wire_close(w);
    }
    wire_close(w);
    s_send(req);
}

static int s_compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void s_write_latency(broker_t *self, wire_writer_t *w)
{
    size_t n = self->latency_count < LATENCY_SAMPLES ? self->latency_count : LATENCY_SAMPLES;
    double sorted[LATENCY_SAMPLES];
    memcpy(sorted, self->latency_ms, n * sizeof sorted[0]);
    qsort(sorted, n, sizeof sorted[0], s_compare_double);
    wire_open_map(w, FIELD_COMMIT_LATENCY_MS);
    wire_put_float(w, FIELD_P50, n ? sorted[n / 2] : 0.0);
    wire_put_float(w, FIELD_P99, n ? sorted[(n * 99) / 100] : 0.0);
    wire_put_int(w, FIELD_SAMPLES, (int64_t)n);
    wire_close(w);
}

static void s_stats(request_t *req)
{
    broker_t *self = req->broker;
    int64_t now_wall = clock_wall_ms();
    int64_t oldest = 0;
    wire_writer_t *w = s_reply_ok(req);
    wire_open_map(w, FIELD_DATA);
    wire_open_map(w, FIELD_QUEUES);
    for (queue_t *queue = zhashx_first(self->queues); queue; queue = zhashx_next(self->queues)) {
        wire_open_map_key(w, queue->name);
        for (int p = 0; p < PRIORITY_COUNT; p++) {
            wire_put_key_int(w, priority_name(p), (int64_t)queue->depth[p]);
            if (queue->head[p] && (oldest == 0 || queue->head[p]->created < oldest))
                oldest = queue->head[p]->created;
        }
        wire_close(w);
    }
    wire_close(w);
    wire_put_int(w, FIELD_RUNNING, (int64_t)self->running_count);
    wire_put_int(w, FIELD_OLDEST_QUEUED_AGE_MS, oldest ? now_wall - oldest : 0);
    wire_put_int(w, FIELD_DEAD, self->dead_count);
    wire_put_int(w, FIELD_WORKERS, (int64_t)zhashx_size(self->workers));
    wire_put_int(w, FIELD_SUBMITTED, self->submitted);
    wire_put_int(w, FIELD_COMPLETED, self->completed);
    int64_t window = 0;
    for (int i = 0; i < 10; i++)
        window += self->completed_window[i];
    wire_put_float(w, FIELD_THROUGHPUT_PER_S, (double)window / 10.0);
    s_write_latency(self, w);
    wire_open_map(w, FIELD_REJECTED);
    for (void *count = zhashx_first(self->rejected); count; count = zhashx_next(self->rejected))
        wire_put_key_int(w, zhashx_cursor(self->rejected), (int64_t)(intptr_t)count);
    wire_close(w);
    wire_put_int(w, FIELD_LAST_SEQ, self->last_seq);
    wire_put_int(w, FIELD_DISK_FREE_MB, disk_guard_free(self->disk) >> 20);
    wire_put_bool(w, FIELD_DISK_LOW, disk_guard_low(self->disk));
    wire_put_int(w, FIELD_UNREAD_REPLIES_MB, replies_held(self->replies) >> 20);
    wire_put_int(w, FIELD_UNREAD_REPLIES_PEERS, (int64_t)replies_waiting_peers(self->replies));
    wire_close(w);
    s_send(req);
}

/* One replay reply being written: the events so far, and whether the page was cut. */
typedef struct {
    wire_writer_t *writer;
    size_t count;
    bool truncated;
} replay_page_t;

/* Adds one event to the page, or stops the replay (returns 1) when it would take the reply
 * over its budget. The first event always goes in, so a page is never cut empty and a
 * client paging on from the last seq always moves forward. */
static int s_replay_one(int64_t seq, const void *body, size_t len, void *arg)
{
    (void)seq;
    replay_page_t *page = arg;
    if (page->count > 0 && wire_writer_size(page->writer) + len > REPLAY_PAGE_BUDGET) {
        page->truncated = true;
        return 1;
    }
    wire_elem_raw(page->writer, body, len);
    page->count++;
    return 0;
}

/* Writes a replay page into the broker's writer. A page cut before the `limit` asked for
 * -- by the page budget, or by the page cap below a larger limit -- says `truncated: true`,
 * so the client knows to ask again rather than take the short page for the end. */
static int s_write_replay(broker_t *self, const wire_msg_t *msg)
{
    int64_t asked = wire_msg_int(msg, FIELD_LIMIT, REPLAY_DEFAULT_LIMIT);
    int64_t limit = asked < REPLAY_MAX_LIMIT ? asked : REPLAY_MAX_LIMIT;
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_REPLY);
    wire_put_bool(w, FIELD_OK, true);
    replay_page_t page = {.writer = w};
    wire_open_array(w, FIELD_DATA);
    int rc = store_events_replay(self->store, wire_msg_int(msg, FIELD_SINCE, 0),
                                 wire_msg_str(msg, FIELD_TOPIC, NULL), (int)limit, s_replay_one,
                                 &page);
    wire_close(w);
    if (page.truncated || (asked > limit && (int64_t)page.count == limit))
        wire_put_bool(w, FIELD_TRUNCATED, true);
    return rc;
}

const void *broker_build_replay(void *arg, const void *request, size_t len, size_t *reply_len)
{
    broker_t *self = arg;
    wire_msg_t *msg = NULL;
    int rc = wire_decode(request, len, &msg);
    if (rc == 0)
        rc = s_write_replay(self, msg);
    if (rc != 0)
        s_write_error(self->writer, rc, failure_message());
    wire_msg_destroy(&msg);
    return wire_writer_data(self->writer, reply_len);
}

/* A replay is answered when its peer's pipe has room for the page (replies.h), from the
 * events committed by then. */
static void s_replay(request_t *req, const wire_msg_t *msg)
{
    if (wire_msg_int(msg, FIELD_LIMIT, REPLAY_DEFAULT_LIMIT) < 1) {
        s_reply_error(req, FAILURE_INVALID,
                      "replay: limit must be at least 1 (default 1000; at most 10000 per page)");
        return;
    }
    broker_outbox_defer(req->broker, req->envelope, req->data, req->len);
}

/* A peer that does not read its replies is refused (or, far past its cap, ignored):
 * false when the request must not be handled. */
static bool s_admitted(request_t *req)
{
    broker_t *self = req->broker;
    replies_verdict_t verdict = replies_admit(self->replies, req->envelope);
    if (verdict == REPLIES_ANSWER)
        return true;
    broker_count_rejected(self, "unread_replies");
    if (verdict == REPLIES_REFUSE) {
        char reason[256];
        snprintf(reason, sizeof reason,
                 "too many unread replies: read the replies already sent, then ask again (at "
                 "most %lld MB are kept for one peer, %lld MB for all)",
                 (long long)self->config.unread_replies_per_peer_mb,
                 (long long)self->config.unread_replies_mb);
        s_reply_error(req, FAILURE_OVERLOADED, reason);
    }
    return false;
}

/* reload: cloister.toml read again (broker_reload.c); an admin's request. */
static void s_reload(request_t *req)
{
    broker_reload_t report;
    int rc = key_roles_check(req->broker->roles, req->peer_key, KEY_ACTION_RELOAD);
    if (rc == 0)
        rc = broker_reload(req->broker, &report);
    if (rc != 0) {
        s_reply_error(req, rc, failure_message());
        return;
    }
    wire_writer_t *w = s_reply_ok(req);
    wire_open_map(w, FIELD_DATA);
    wire_put_key_str(w, "applied", report.applied);
    wire_put_key_str(w, "restart", report.restart);
    wire_put_key_str(w, "workspace_roots", workspace_roots_text(req->broker->workspace_roots));
    wire_close(w);
    s_send(req);
}

/* note_task: a `task.note` event on a task (any state) with the request's kind and text,
 * e.g. the delivery of a hook (cloister-hooks). An admin's only: the events are what
 * everyone reads as the task's history. The reply is the task. */
static void s_note(request_t *req, const wire_msg_t *msg)
{
    broker_t *self = req->broker;
    if (key_roles_check(self->roles, req->peer_key, KEY_ACTION_NOTE) != 0) {
        broker_count_rejected(self, "denied");
        s_reply_error(req, FAILURE_DENIED, failure_message());
        return;
    }
    bool loaded;
    task_t *task = s_find(req, wire_msg_str(msg, FIELD_ID, ""), &loaded);
    if (task == NULL)
        return;
    event_extra_t extra = {.kind = wire_msg_str(msg, FIELD_KIND, ""),
                           .text = wire_msg_str(msg, FIELD_TEXT, "")};
    int rc = broker_emit(self, EVENT_TASK_NOTE, task, &extra);
    if (rc == 0)
        s_reply_task(req, task);
    else
        s_reply_error(req, rc, failure_message());
    if (loaded)
        task_destroy(&task);
}

/* resume: a paused specialist's tasks are dispatched again; an admin's request. The reply's
 * data says whether it was paused, and why. */
static void s_resume(request_t *req, const wire_msg_t *msg)
{
    const char *name = wire_msg_str(msg, FIELD_SPECIALIST, "");
    int rc = key_roles_check(req->broker->roles, req->peer_key, KEY_ACTION_RESUME);
    queue_t *queue = rc == 0 ? broker_queue(req->broker, name, false) : NULL;
    if (rc == 0 && queue == NULL)
        rc = failure_set(FAILURE_NOT_FOUND, "no specialist '%s'", name);
    if (rc != 0) {
        s_reply_error(req, rc, failure_message());
        return;
    }
    char *was = queue->paused ? strdup(queue->paused) : NULL;
    rc = broker_specialist_resume(req->broker, queue, "a resume request");
    if (rc != 0) {
        free(was);
        s_reply_error(req, rc, failure_message());
        return;
    }
    wire_writer_t *w = s_reply_ok(req);
    wire_open_map(w, FIELD_DATA);
    wire_put_str(w, FIELD_SPECIALIST, queue->name);
    wire_put_bool(w, FIELD_PAUSED, was != NULL);
    wire_put_str(w, FIELD_REASON, was);
    wire_close(w);
    s_send(req);
    free(was);
}

void broker_handle_control(broker_t *self, zmsg_t *envelope, const void *data, size_t len,
                           const char *peer_key)
{
    request_t req = {self, envelope, peer_key, data, len, false};
    if (!s_admitted(&req))
        return;
    wire_msg_t *msg = NULL;
    int rc = wire_decode(data, len, &msg);
    if (rc != 0) {
        broker_count_rejected(self, rc == FAILURE_TOO_BIG ? "too_big" : "malformed");
        log_warn("control: %s", failure_message());
        s_reply_error(&req, rc, failure_message());
        return;
    }
    switch (wire_msg_type(msg)) {
    case MSG_SUBMIT: s_submit(&req, msg); break;
    case MSG_SHOW_TASK: s_show(&req, msg); break;
    case MSG_CANCEL_TASK: s_cancel(&req, msg); break;
    case MSG_RETRY_TASK: s_retry(&req, msg); break;
    case MSG_LIST_QUEUE: s_list_queue(&req, msg); break;
    case MSG_LIST_TASKS: s_list_tasks(&req, msg); break;
    case MSG_LIST_SPECIALISTS: s_list_specialists(&req); break;
    case MSG_STATS: s_stats(&req); break;
    case MSG_REPLAY: s_replay(&req, msg); break;
    case MSG_RELOAD: s_reload(&req); break;
    case MSG_NOTE_TASK: s_note(&req, msg); break;
    case MSG_RESUME: s_resume(&req, msg); break;
    case MSG_SET_PRIORITY: s_set_priority(&req, msg); break;
    default: {
        char reason[128];
        snprintf(reason, sizeof reason, "'%s' is not a control request",
                 msg_type_name(wire_msg_type(msg)));
        broker_count_rejected(self, "wrong_socket");
        s_reply_error(&req, FAILURE_INVALID, reason);
    }
    }
    wire_msg_destroy(&msg);
}
