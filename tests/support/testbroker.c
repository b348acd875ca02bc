/* testbroker: a real broker for tests (see testbroker.h). */
#include "testbroker.h"

#include "failure.h"
#include "wire.h"

#include <stdio.h>
#include <string.h>

pid_t testbroker_spawn(testenv_t *env, int heartbeat_ms, const char *sync)
{
    char heartbeat[32];
    snprintf(heartbeat, sizeof heartbeat, "%d", heartbeat_ms);
    char *argv[16] = {(char *)testenv_bin("cloister-broker"), "--in", env->in_ep,
                      "--events", env->events_ep, "--control", env->control_ep,
                      "--home", env->home};
    int n = 9;
    if (heartbeat_ms > 0) {
        argv[n++] = "--heartbeat-ms";
        argv[n++] = heartbeat;
    }
    if (sync != NULL) {
        argv[n++] = "--sync";
        argv[n++] = (char *)sync;
    }
    argv[n] = NULL;
    pid_t pid = testenv_spawn(env, "broker", argv);
    if (pid < 0)
        fprintf(stderr, "testbroker: cannot start %s\n", argv[0]);
    return pid;
}

bool testbroker_wait_ready(testenv_t *env)
{
    client_t *client = client_new(env->control_ep, 200);
    for (int i = 0; i < 50; i++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, MSG_STATS);
        wire_msg_t *reply = NULL;
        int rc = client_call(client, w, &reply);
        wire_writer_destroy(&w);
        wire_msg_destroy(&reply);
        if (rc == 0) {
            client_destroy(&client);
            return true;
        }
    }
    client_destroy(&client);
    fprintf(stderr, "testbroker: the broker did not answer within 10 s\n");
    return false;
}

pid_t testbroker_start(testenv_t *env, int heartbeat_ms, const char *sync)
{
    pid_t pid = testbroker_spawn(env, heartbeat_ms, sync);
    if (pid < 0)
        return -1;
    return testbroker_wait_ready(env) ? pid : -1;
}

client_t *testbroker_client(testenv_t *env)
{
    return client_new(env->control_ep, 3000);
}

int testbroker_submit(client_t *client, const char *id, const char *specialist,
                      const char *priority, const char *group)
{
    submit_t task = {.id = id, .specialist = specialist, .priority = priority,
                          .group = group, .title = id};
    wire_msg_t *reply = NULL;
    int rc = client_submit(client, &task, NULL, 0, &reply);
    wire_msg_destroy(&reply);
    return rc;
}

static wire_msg_t *s_request(client_t *client, msg_type_t type, field_t key, const char *value)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, key, value);
    wire_msg_t *reply = NULL;
    client_call(client, w, &reply);
    wire_writer_destroy(&w);
    return reply;
}

const char *testbroker_state(client_t *client, const char *id, char *buf, size_t size)
{
    buf[0] = '\0';
    wire_msg_t *reply = s_request(client, MSG_SHOW_TASK, FIELD_ID, id);
    if (reply != NULL)
        wire_obj_str(wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_STATE), buf, size, "");
    wire_msg_destroy(&reply);
    return buf;
}

bool testbroker_task_unknown(client_t *client, const char *id)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    wire_msg_destroy(&reply);
    if (rc != 0 && rc != FAILURE_NOT_FOUND)
        fprintf(stderr, "testbroker: show %s: no answer (%s)\n", id, failure_message());
    return rc == FAILURE_NOT_FOUND;
}

const char *testbroker_queue(client_t *client, const char *specialist, char *buf, size_t size)
{
    buf[0] = '\0';
    wire_msg_t *reply = s_request(client, MSG_LIST_QUEUE, FIELD_SPECIALIST, specialist);
    const msgpack_object *data = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    size_t used = 0;
    for (uint32_t i = 0; data && data->type == MSGPACK_OBJECT_ARRAY && i < data->via.array.size; i++) {
        char id[160];
        wire_obj_str(wire_map_get(&data->via.array.ptr[i], FIELD_ID), id, sizeof id, "?");
        int n = snprintf(buf + used, size - used, "%s%s", used ? " " : "", id);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    wire_msg_destroy(&reply);
    return buf;
}

int64_t testbroker_rejected(client_t *client, const char *category)
{
    wire_writer_t *stats = wire_writer_new();
    wire_writer_start(stats, MSG_STATS);
    wire_msg_t *reply = NULL;
    int64_t count = -1;
    if (client_call(client, stats, &reply) == 0) {
        const msgpack_object *n = wire_map_get_key(
            wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_REJECTED), category);
        count = n != NULL && n->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)n->via.u64 : 0;
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&stats);
    return count;
}
