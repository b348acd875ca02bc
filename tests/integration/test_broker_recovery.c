/* The broker's recovery of running attempts from the stored events (services/broker/broker.c,
 * "dispatches"): on a plain bus a dispatch writes no task row, so at a start the broker
 * reads the stored task.dispatched events back. The store is written here through the
 * broker's own store module, as a broker would have left it:
 *   - "live": its row says queued at attempt 0; a later task.dispatched event gave attempt
 *     1 to worker live-w. It must come back running, and live-w's result must count.
 *   - "reused": an earlier task of that id was dispatched (attempt 1, worker old-w) and then
 *     pruned; the id was submitted again (its row: queued at attempt 0, and a task.queued
 *     event after the old dispatch). The old dispatch must not count: it stays queued and
 *     its next dispatch is attempt 1. */
#include "check.h"
#include "clock.h"
#include "fakeworker.h"
#include "store.h"
#include "testbroker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEARTBEAT_MS 200
#define SPECIALIST "recov-agent"

static testenv_t *s_env;
static client_t *s_client;

/* Adds an event of the broker's shape (broker_emit) to the store's open transaction. */
static int s_event(store_t *store, int64_t seq, const char *event, const char *task, int attempt,
                   const char *worker)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_EVENT);
    wire_put_int(w, FIELD_SEQ, seq);
    wire_put_str(w, FIELD_EVENT, event);
    wire_put_int(w, FIELD_TIME, clock_wall_ms());
    wire_put_str(w, FIELD_TASK, task);
    wire_put_str(w, FIELD_SPECIALIST, SPECIALIST);
    wire_put_str(w, FIELD_PRIORITY, "normal");
    wire_put_str(w, FIELD_STATE, worker ? "running" : "queued");
    wire_put_int(w, FIELD_ATTEMPT, attempt);
    wire_put_str(w, FIELD_WORKER, worker);
    size_t len;
    const void *body = wire_writer_data(w, &len);
    char topic[128];
    int topic_len = snprintf(topic, sizeof topic, "%s/%s", event, SPECIALIST);
    int rc = store_event_insert(store, seq, topic, (size_t)topic_len, body, len);
    wire_writer_destroy(&w);
    return rc;
}

static int s_task_row(store_t *store, const char *id, int64_t order)
{
    task_t *task = task_new(id);
    task->specialist = strdup(SPECIALIST);
    task->title = strdup(id);
    task->state = TASK_QUEUED;
    task->priority = PRIORITY_NORMAL;
    task->order = order;
    task->max_attempts = 3;
    task->timeout_s = 600;
    task->created = task->updated = clock_wall_ms();
    bool inserted = false;
    int rc = store_task_insert(store, task, &inserted);
    task_destroy(&task);
    return rc == 0 && inserted ? 0 : -1;
}

/* The store a broker would have left (see the top). */
static int s_write_store(const char *db_path)
{
    store_t *store = NULL;
    if (store_open(db_path, STORE_SYNC_FULL, &store) != 0)
        return -1;
    int rc = store_begin(store);
    if (rc == 0)
        rc = store_specialist_remember(store, SPECIALIST, clock_wall_ms());
    /* The earlier life of "reused", whose row retention deleted. */
    if (rc == 0)
        rc = s_event(store, 1, "task.queued", "reused", 0, NULL);
    if (rc == 0)
        rc = s_event(store, 2, "task.dispatched", "reused", 1, "old-w");
    if (rc == 0)
        rc = s_task_row(store, "reused", 1);
    if (rc == 0)
        rc = s_event(store, 3, "task.queued", "reused", 0, NULL);
    if (rc == 0)
        rc = s_task_row(store, "live", 2);
    if (rc == 0)
        rc = s_event(store, 4, "task.queued", "live", 0, NULL);
    if (rc == 0)
        rc = s_event(store, 5, "task.dispatched", "live", 1, "live-w");
    if (rc == 0)
        rc = store_commit(store);
    store_close(&store);
    return rc;
}

static int64_t s_task_int(const char *id, field_t key)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    int64_t value = -1;
    if (client_call(s_client, w, &reply) == 0) {
        const msgpack_object *obj = wire_map_get(wire_msg_object(reply, FIELD_DATA), key);
        if (obj != NULL && obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            value = (int64_t)obj->via.u64;
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return value;
}

static void test_recovered_attempts(void)
{
    char state[32];
    CHECK_STR(testbroker_state(s_client, "live", state, sizeof state), "running");
    CHECK_INT(s_task_int("live", FIELD_ATTEMPT), 1);
    CHECK_STR(testbroker_state(s_client, "reused", state, sizeof state), "queued");
    CHECK_INT(s_task_int("reused", FIELD_ATTEMPT), 0);

    /* live-w comes back holding its attempt: its result counts. */
    fakeworker_t *live = fakeworker_new(s_env->dir, s_env->in_ep, SPECIALIST, "live-w");
    fakeworker_hello(live, "live", 1);
    fakeworker_result(live, "live", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(live, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    CHECK_STR(testbroker_state(s_client, "live", state, sizeof state), "done");

    /* Free again, live-w gets "reused" as its first attempt. */
    wire_msg_t *task = fakeworker_expect(live, MSG_TASK, 3000, NULL, 0);
    CHECK(task != NULL);
    if (task != NULL) {
        CHECK_STR(wire_msg_str(task, FIELD_ID, ""), "reused");
        CHECK_INT(wire_msg_int(task, FIELD_ATTEMPT, 0), 1);
    }
    wire_msg_destroy(&task);
    fakeworker_bye(live);
    fakeworker_destroy(&live);
}

int main(void)
{
    s_env = testenv_new("broker-recovery");
    if (s_env == NULL)
        return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/cloister.toml", s_env->home);
    CHECK(testenv_write_file(path, "[specialists." SPECIALIST "]\ntimeout = 600\n"
                                   "[security]\nrequire_review = false\n") == 0);
    snprintf(path, sizeof path, "%s/broker.db", s_env->home);
    CHECK_INT(s_write_store(path), 0);
    pid_t broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(broker > 0);
    s_client = testbroker_client(s_env);
    if (broker > 0 && s_client != NULL)
        test_recovered_attempts();
    client_destroy(&s_client);
    testenv_destroy(&s_env);
    return check_exit_code("test_broker_recovery");
}
