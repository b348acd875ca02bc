/* fence: does this attempt still hold its task? (see fence.h) */
#include "fence.h"

#include "client.h"
#include "clock.h"
#include "failure.h"
#include "wire.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Each question's own deadline, and the pause between questions nobody answered. */
#define FENCE_REQUEST_MS 1000
#define FENCE_PAUSE_MS 200

/* Asks once: 0 with *reply (caller destroys), or the client's failure. */
static int s_show_task(const char *control_endpoint, const char *task_id, wire_msg_t **reply)
{
    client_t *client = client_new(control_endpoint, FENCE_REQUEST_MS);
    if (client == NULL)
        return FAILURE_IO;
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, task_id);
    int rc = client_call(client, w, reply);
    wire_writer_destroy(&w);
    client_destroy(&client);
    return rc;
}

/* Compares the task the broker has (show_task's data) with this attempt. */
static int s_compare(const wire_msg_t *reply, const specialist_task_t *task, const char *worker)
{
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    char state_buf[32], holder_buf[256];
    const char *state =
        wire_obj_str(wire_map_get(data, FIELD_STATE), state_buf, sizeof state_buf, "");
    const char *holder =
        wire_obj_str(wire_map_get(data, FIELD_WORKER), holder_buf, sizeof holder_buf, "");
    const msgpack_object *number = wire_map_get(data, FIELD_ATTEMPT);
    long long attempt = number != NULL && number->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                            ? (long long)number->via.u64
                            : 0;
    if (strcmp(state, "running") == 0 && attempt == task->attempt && strcmp(holder, worker) == 0)
        return 0;
    if (strcmp(state, "running") == 0)
        return failure_set(FAILURE_STATE,
                           "stale attempt: task %s runs as attempt %lld on %s; this is attempt "
                           "%lld on %s",
                           task->id, attempt, holder, (long long)task->attempt, worker);
    return failure_set(FAILURE_STATE,
                       "stale attempt: task %s is %s at the broker; this is attempt %lld on %s",
                       task->id, state, (long long)task->attempt, worker);
}

int fence_check(specialist_ctx_t *ctx, const char *control_endpoint, int wait_ms)
{
    const specialist_task_t *task = specialist_task(ctx);
    const char *worker = specialist_worker_id(ctx);
    int64_t deadline = clock_now_ms() + wait_ms;
    for (;;) {
        wire_msg_t *reply = NULL;
        int rc = s_show_task(control_endpoint, task->id, &reply);
        if (rc == 0) {
            rc = s_compare(reply, task, worker);
            wire_msg_destroy(&reply);
            return rc;
        }
        if (rc == FAILURE_NOT_FOUND)
            return failure_set(FAILURE_STATE, "stale attempt: the broker does not know task %s",
                               task->id);
        if (specialist_cancelled(ctx))
            return failure_set(FAILURE_STATE,
                               "cancelled while asking the broker whether attempt %lld of task "
                               "%s still holds it",
                               (long long)task->attempt, task->id);
        if (clock_now_ms() >= deadline)
            return failure_set(FAILURE_IO,
                               "the broker at %s did not confirm within %d ms that attempt %lld "
                               "of task %s still holds it (%s)",
                               control_endpoint, wait_ms, (long long)task->attempt, task->id,
                               failure_message());
        struct timespec pause = {0, FENCE_PAUSE_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
}
