/* broker_task: a task's transitions (finish, requeue, detach, a lost worker), groups
 * held by workers, and the submit that creates a task (see broker_internal.h). */
#include "broker_internal.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- task transitions ---- */

/* Groups are counted locks: a running task holds its group, and so does a worker told to
 * stop a task of it until it says it has (held_group). The group is free at zero. */
void broker_group_hold(broker_t *self, const char *group)
{
    intptr_t holders = (intptr_t)zhashx_lookup(self->groups, group);
    zhashx_update(self->groups, group, (void *)(holders + 1));
}

static void s_group_release(broker_t *self, const char *group)
{
    intptr_t holders = (intptr_t)zhashx_lookup(self->groups, group);
    if (holders <= 1)
        zhashx_delete(self->groups, group);
    else
        zhashx_update(self->groups, group, (void *)(holders - 1));
}

void broker_worker_hold_group(broker_t *self, worker_t *worker, const char *group)
{
    worker->draining = true;
    worker->draining_since = clock_now_ms();
    if (group == NULL || worker->held_group != NULL)
        return;
    worker->held_group = strdup(group);
    broker_group_hold(self, group);
}

/* Removes a running task from its worker, its group and the running list. The group stays
 * locked when the worker was told to stop and has not yet said it did (held_group). */
void broker_task_detach(broker_t *self, task_t *task)
{
    if (task->state != TASK_RUNNING)
        return;
    worker_t *worker = task->worker;
    if (worker != NULL && worker->task == task)
        worker->task = NULL;
    task->worker = NULL;
    if (task->group)
        s_group_release(self, task->group);
    if (task->prev)
        task->prev->next = task->next;
    else
        self->running = task->next;
    if (task->next)
        task->next->prev = task->prev;
    task->prev = task->next = NULL;
    self->running_count--;
    /* Not running any more; the caller sets the next state. */
    task->state = TASK_CANCELLED;
}

void broker_worker_idle(broker_t *self, worker_t *worker)
{
    worker->draining = false;
    worker->idle_since = clock_now_ms();
    if (worker->held_group != NULL) {
        s_group_release(self, worker->held_group);
        free(worker->held_group);
        worker->held_group = NULL;
    }
}

static int64_t s_backoff_ms(const broker_t *self, int failures)
{
    int64_t base = self->config.retry_backoff_ms;
    int shift = failures > 1 ? failures - 1 : 0;
    if (shift > 10)
        shift = 10;
    int64_t delay = base << shift;
    /* Full jitter on half the delay, so retries of many tasks do not stampede. */
    return delay / 2 + (delay > 1 ? random() % (delay / 2 + 1) : 0);
}

int broker_task_finish(broker_t *self, task_t *task, task_state_t state, const char *error,
                       const void *result, size_t result_len)
{
    if (task->state == TASK_QUEUED)
        queue_remove(task->queue, task);
    broker_task_detach(self, task);
    task->state = state;
    task->updated = clock_wall_ms();
    task_set_text(&task->error, error);
    int rc = store_task_update(self->store, task, result ? result : "", result ? result_len : 0);
    if (rc == 0 && state != TASK_CANCELLED)
        rc = store_count_finished(self->store, task->queue->name, state);
    if (rc != 0)
        return rc;
    event_type_t event = state == TASK_DONE     ? EVENT_TASK_DONE
                         : state == TASK_FAILED ? EVENT_TASK_FAILED
                         : state == TASK_DEAD   ? EVENT_TASK_DEAD
                                                : EVENT_TASK_CANCELLED;
    event_extra_t extra = {.error = error, .result = result, .result_len = result_len};
    rc = broker_emit(self, event, task, &extra);
    if (state == TASK_DONE || state == TASK_FAILED)
        self->completed++;
    if (state == TASK_DONE)
        task->queue->done++;
    else if (state == TASK_FAILED)
        task->queue->failed++;
    else if (state == TASK_DEAD) {
        task->queue->dead++;
        self->dead_count++;
    }
    zhashx_delete(self->tasks, task->id); /* destroys the task */
    return rc;
}

/* broker_task_requeue(), the task due again at `not_before` (wall ms; 0: now) unless a
 * counted failure backs it off. */
static int s_requeue(broker_t *self, task_t *task, const char *outcome, bool count_failure,
                     int64_t not_before, const char *reason)
{
    if (outcome != NULL && task->state == TASK_RUNNING && task->issue != NULL) {
        int rc = store_attempt_insert(self->store, task, task->queue->name, outcome, reason,
                                      clock_wall_ms());
        if (rc != 0)
            return rc;
    }
    if (count_failure && task->failures + 1 >= task->max_attempts) {
        task->failures++;
        char why[512];
        snprintf(why, sizeof why, "gave up after %d failed attempts; last error: %s",
                 task->failures, reason);
        return broker_task_finish(self, task, TASK_DEAD, why, NULL, 0);
    }
    if (task->state == TASK_QUEUED)
        queue_remove(task->queue, task);
    broker_task_detach(self, task);
    if (count_failure)
        task->failures++;
    task->state = TASK_QUEUED;
    task->not_before = count_failure ? clock_wall_ms() + s_backoff_ms(self, task->failures)
                                     : not_before;
    task->updated = clock_wall_ms();
    task_set_text(&task->error, reason);
    /* The event still names the worker the task came back from. */
    char *previous_worker = task->worker_id;
    task->worker_id = NULL;
    queue_insert(task->queue, task);
    int rc = store_task_update(self->store, task, NULL, 0);
    if (rc == 0) {
        event_extra_t extra = {.error = reason, .worker = previous_worker};
        rc = broker_emit(self, count_failure ? EVENT_TASK_RETRY : EVENT_TASK_QUEUED, task, &extra);
    }
    free(previous_worker);
    return rc;
}

int broker_task_requeue(broker_t *self, task_t *task, const char *outcome, bool count_failure,
                        const char *reason)
{
    return s_requeue(self, task, outcome, count_failure, 0, reason);
}

int broker_task_release(broker_t *self, task_t *task, int64_t delay_ms, const char *reason)
{
    int64_t not_before = delay_ms > 0 ? clock_wall_ms() + delay_ms : 0;
    return s_requeue(self, task, "released", false, not_before, reason);
}

int broker_specialist_pause(broker_t *self, queue_t *queue, const char *reason)
{
    if (queue->paused != NULL)
        return 0;
    task_set_text(&queue->paused, reason);
    log_warn("specialist %s paused: %s", queue->name, reason);
    event_extra_t extra = {.specialist = queue->name, .error = reason};
    return broker_emit(self, EVENT_SPECIALIST_PAUSED, NULL, &extra);
}

int broker_specialist_resume(broker_t *self, queue_t *queue, const char *who)
{
    if (queue->paused == NULL)
        return 0;
    task_set_text(&queue->paused, NULL);
    log_info("specialist %s resumed by %s", queue->name, who);
    event_extra_t extra = {.specialist = queue->name, .text = who};
    return broker_emit(self, EVENT_SPECIALIST_RESUMED, NULL, &extra);
}

void broker_send_cancel(broker_t *self, worker_t *worker, task_t *task, const char *reason)
{
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_CANCEL);
    wire_put_str(w, FIELD_WORKER, worker->id);
    wire_put_str(w, FIELD_TASK, task->id);
    wire_put_int(w, FIELD_ATTEMPT, task->attempt);
    wire_put_str(w, FIELD_REASON, reason);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    broker_outbox_worker(self, worker->id, data, len);
    broker_worker_hold_group(self, worker, task == worker->task ? task->group : NULL);
}

int broker_worker_lost(broker_t *self, worker_t *worker, event_type_t event, const char *reason)
{
    int rc = 0;
    bool lost = event == EVENT_WORKER_LOST;
    if (worker->task != NULL)
        rc = broker_task_requeue(self, worker->task, lost ? "lost" : "released", lost, reason);
    broker_worker_idle(self, worker); /* frees any group it held */
    if (rc == 0) {
        event_extra_t extra = {.worker = worker->id, .error = reason,
                               .specialist = worker->queue->name};
        rc = broker_emit(self, event, NULL, &extra);
    }
    log_info("%s %s (%s): %s", event_type_name(event), worker->id, worker->queue->name, reason);
    zhashx_delete(self->workers, worker->id); /* closes its socket */
    return rc;
}

/* ---- submit ---- */

/* Files listed in the session context are capped: context is a hint, not a copy. */
#define FILES_CONTEXT_CAP 4096

void broker_task_take_files(task_t *task)
{
    free(task->files);
    task->files = NULL;
    task->files_len = 0;
    if (task->payload == NULL)
        return;
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    if (msgpack_unpack_next(&unpacked, task->payload, task->payload_len, &offset) ==
        MSGPACK_UNPACK_SUCCESS) {
        const msgpack_object *files = wire_map_get(&unpacked.data, FIELD_FILES_CHANGED);
        if (files != NULL && files->type == MSGPACK_OBJECT_ARRAY) {
            msgpack_sbuffer sbuf;
            msgpack_sbuffer_init(&sbuf);
            msgpack_packer pk;
            msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
            msgpack_pack_object(&pk, *files);
            if (sbuf.size <= FILES_CONTEXT_CAP) {
                task->files_len = sbuf.size;
                task->files = msgpack_sbuffer_release(&sbuf);
            }
            msgpack_sbuffer_destroy(&sbuf);
        }
    }
    msgpack_unpacked_destroy(&unpacked);
}

/* payload.workspace, when there is one, must be under the workspace roots. */
static int s_check_workspace(broker_t *self, const msgpack_object *payload)
{
    const msgpack_object *value = wire_map_get(payload, FIELD_WORKSPACE);
    if (value == NULL || value->type != MSGPACK_OBJECT_STR)
        return 0;
    if (value->via.str.size >= PATH_MAX)
        return failure_set(FAILURE_INVALID, "payload.workspace is longer than a path can be");
    char workspace[PATH_MAX];
    wire_obj_str(value, workspace, sizeof workspace, "");
    return workspace_roots_check(self->workspace_roots, workspace);
}

/* True when the payload says force = true. */
static bool s_forced(const msgpack_object *payload)
{
    const msgpack_object *force = wire_map_get(payload, FIELD_FORCE);
    return force != NULL && force->type == MSGPACK_OBJECT_BOOLEAN && force->via.boolean;
}

int broker_submit(broker_t *self, const wire_msg_t *msg, const char *parent,
                  const char *submitter_key, task_t **out, bool *loaded, bool *created)
{
    *out = NULL;
    *loaded = false;
    *created = false;
    submit_t submit;
    submit_read(msg, &submit);
    const char *id = submit.id ? submit.id : "";
    const char *specialist = submit.specialist ? submit.specialist : "";
    if (id[0] == '\0')
        return failure_set(FAILURE_INVALID, "task id must not be empty");
    task_t *existing = zhashx_lookup(self->tasks, id);
    if (existing != NULL) {
        *out = existing;
        return 0;
    }
    /* A next task is part of a result, which must be kept; a new submit can wait. */
    if (parent == NULL && disk_guard_low(self->disk))
        return failure_set(FAILURE_DISK_FULL, "%s", disk_guard_reason(self->disk));
    int rc = submit_check(&submit);
    if (rc != 0)
        return rc;
    queue_t *queue = broker_queue(self, specialist, false);
    if (queue == NULL)
        return failure_set(FAILURE_INVALID,
                           "unknown specialist '%s' (start a worker for it, or declare it in "
                           "cloister.toml)",
                           specialist);
    /* One name per queue: `merge_agent` is `merge-agent`, and from here on only the
     * queue's own spelling is read, so no check can be passed under another one. */
    specialist = queue->name;
    const msgpack_object *payload = wire_msg_object(msg, FIELD_PAYLOAD);
    if (parent == NULL && s_forced(payload)) {
        rc = key_roles_check(self->roles, submitter_key, KEY_ACTION_FORCE);
        if (rc != 0)
            return rc;
    }
    /* A merge from outside is an approval (pan approve submits it); one chained by a
     * finished task is the pipeline's, and its gate is broker_gate_check's. */
    if (parent == NULL && strcmp(specialist, "merge-agent") == 0) {
        rc = key_roles_check(self->roles, submitter_key, KEY_ACTION_MERGE);
        if (rc != 0)
            return rc;
    }
    int priority = submit.priority ? priority_parse(submit.priority) : PRIORITY_NORMAL;
    int64_t max_attempts = submit.max_attempts ? submit.max_attempts : queue->default_max_attempts;
    int64_t timeout = submit.timeout_s ? submit.timeout_s : queue->default_timeout_s;

    task_t *task = task_new(id);
    if (task == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    task->queue = queue;
    task->priority = priority;
    task->state = TASK_QUEUED;
    task->order = ++self->next_order;
    task->max_attempts = (int)max_attempts;
    task->timeout_s = (int)timeout;
    task->not_before = submit.not_before;
    task->created = task->updated = clock_wall_ms();
    task_set_text(&task->title, submit.title);
    task_set_text(&task->source, submit.source);
    task_set_text(&task->group, submit.group);
    task_set_text(&task->parent, parent);
    task_set_text(&task->submitter_key, submitter_key);
    char issue[MESSAGES_ID_CAP + 2]; /* one byte more than the cap shows it is over */
    task_set_text(&task->issue,
                  submit.issue ? submit.issue
                               : wire_obj_str(wire_map_get(payload, FIELD_ISSUE_ID), issue,
                                              sizeof issue, NULL));
    if (task->issue != NULL && strlen(task->issue) > MESSAGES_ID_CAP) {
        task_destroy(&task);
        self->next_order--;
        return failure_set(FAILURE_TOO_BIG,
                           "payload.issueId is over the %d-byte cap of an issue (it becomes the "
                           "task's issue)",
                           MESSAGES_ID_CAP);
    }
    rc = s_check_workspace(self, payload);
    if (rc == 0)
        rc = broker_gate_check(self, msg, specialist, task->issue, parent);
    if (rc != 0) {
        task_destroy(&task);
        self->next_order--;
        return rc;
    }
    if (submit.payload != NULL) {
        task->payload = broker_copy(submit.payload, submit.payload_len);
        task->payload_len = submit.payload_len;
        broker_task_take_files(task);
    }
    /* The insert is the idempotency check: an id the store knows (a finished task) is
     * left alone and the existing task is returned. */
    bool inserted = false;
    rc = store_begin(self->store);
    if (rc == 0)
        rc = store_task_insert(self->store, task, &inserted);
    if (rc == 0 && !inserted) {
        task_destroy(&task);
        self->next_order--;
        rc = store_task_load(self->store, id, out);
        *loaded = rc == 0;
        return rc;
    }
    if (rc != 0) {
        task_destroy(&task);
        return rc;
    }
    zhashx_insert(self->tasks, task->id, task);
    queue_insert(queue, task);
    self->submitted++;
    *out = task;
    *created = true;
    return broker_emit(self, EVENT_TASK_QUEUED, task, NULL);
}

const char *broker_task_phase(const task_t *task)
{
    return task->state == TASK_RUNNING && task->phase != NULL &&
                   task->phase_attempt == task->attempt
               ? task->phase
               : NULL;
}

void broker_write_task(wire_writer_t *w, const task_t *task, bool with_result)
{
    wire_put_str(w, FIELD_ID, task->id);
    wire_put_str(w, FIELD_SPECIALIST, task->queue ? task->queue->name : task->specialist);
    wire_put_str(w, FIELD_PRIORITY, priority_name(task->priority));
    wire_put_str(w, FIELD_STATE, task_state_name(task->state));
    wire_put_int(w, FIELD_ATTEMPT, task->attempt);
    wire_put_int(w, FIELD_FAILURES, task->failures);
    wire_put_int(w, FIELD_MAX_ATTEMPTS, task->max_attempts);
    wire_put_int(w, FIELD_TIMEOUT_S, task->timeout_s);
    wire_put_str(w, FIELD_TITLE, task->title);
    wire_put_str(w, FIELD_ISSUE, task->issue);
    wire_put_str(w, FIELD_SOURCE, task->source);
    wire_put_str(w, FIELD_GROUP, task->group);
    wire_put_str(w, FIELD_PARENT, task->parent);
    wire_put_str(w, FIELD_WORKER, task->worker ? task->worker->id : task->worker_id);
    wire_put_str(w, FIELD_ERROR, task->error);
    wire_put_str(w, FIELD_PHASE, broker_task_phase(task));
    wire_put_int(w, FIELD_CREATED, task->created);
    wire_put_int(w, FIELD_UPDATED, task->updated);
    if (task->not_before > 0)
        wire_put_int(w, FIELD_NOT_BEFORE, task->not_before);
    wire_put_raw(w, FIELD_PAYLOAD, task->payload, task->payload_len);
    if (with_result && task->result_len > 0) {
        if (wire_writer_size(w) + task->result_len < WIRE_MAX_MESSAGE - 64 * 1024)
            wire_put_raw(w, FIELD_RESULT, task->result, task->result_len);
        else
            wire_put_bool(w, FIELD_RESULT_OMITTED, true);
    }
}
