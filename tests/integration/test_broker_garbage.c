/* Garbage on every socket: malformed msgpack, truncated frames, wrong types, unknown
 * message types, oversize messages, invalid priorities and specialists, raw bytes that are
 * not even ZMTP. Each is refused with a reason, counted, and the broker keeps serving. */
#include "check.h"
#include "testbroker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

static void s_send_raw(void *socket, const void *data, size_t len)
{
    zmq_send(socket, data, len, 0);
}

static void s_send_writer(void *socket, wire_writer_t *w)
{
    size_t len;
    const void *data = wire_writer_data(w, &len);
    s_send_raw(socket, data, len);
}

/* Sends every kind of bad message to a socket (PUSH to `in`). */
static void s_garbage_in(void *push)
{
    const unsigned char junk[] = {0xc1, 0xff, 0x00, 0x13, 0x37};
    s_send_raw(push, junk, sizeof junk);
    const unsigned char truncated[] = {0x82, 0xa1, 0x76, 0x01, 0xa4, 0x74, 0x79};
    s_send_raw(push, truncated, sizeof truncated);
    const unsigned char array[] = {0x92, 0x01, 0x02};
    s_send_raw(push, array, sizeof array);
    s_send_raw(push, "", 0);
    zmq_send(push, "frame one", 9, ZMQ_SNDMORE);
    zmq_send(push, "frame two", 9, 0);

    wire_writer_t *w = wire_writer_new();
    wire_writer_start_map(w); /* no version */
    wire_put_str(w, "type", "submit");
    s_send_writer(push, w);
    wire_writer_start_map(w);
    wire_put_int(w, "v", 2);
    wire_put_str(w, "type", "submit");
    s_send_writer(push, w);
    wire_writer_start(w, "launch_missiles");
    s_send_writer(push, w);
    wire_writer_start(w, "submit"); /* wrong field type */
    wire_put_str(w, "id", "bad-type");
    wire_put_int(w, "specialist", 42);
    s_send_writer(push, w);
    wire_writer_start(w, "submit");
    wire_put_str(w, "id", "bad-priority");
    wire_put_str(w, "specialist", "test-agent");
    wire_put_str(w, "priority", "asap");
    s_send_writer(push, w);
    wire_writer_start(w, "submit");
    wire_put_str(w, "id", "bad-specialist");
    wire_put_str(w, "specialist", "Robert'); DROP TABLE tasks;--");
    s_send_writer(push, w);
    wire_writer_start(w, "submit");
    wire_put_str(w, "id", "unknown-specialist");
    wire_put_str(w, "specialist", "nobody-agent");
    s_send_writer(push, w);
    wire_writer_start(w, "task"); /* a broker->worker message sent to the broker */
    wire_put_str(w, "worker", "x");
    s_send_writer(push, w);
    wire_writer_start(w, "result");
    wire_put_str(w, "worker", "w");
    wire_put_str(w, "task", "nope");
    wire_put_int(w, "attempt", 1);
    wire_put_str(w, "outcome", "maybe");
    s_send_writer(push, w);
    wire_writer_destroy(&w);
}

/* Raw bytes written straight into an ipc socket: not even a ZMTP greeting. */
static void s_raw_bytes(const char *endpoint)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", endpoint + strlen("ipc://"));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
        char noise[4096];
        for (size_t i = 0; i < sizeof noise; i++)
            noise[i] = (char)(i * 7919 % 251);
        ssize_t written = write(fd, noise, sizeof noise);
        (void)written;
    }
    close(fd);
}

static int s_control_error(client_t *client, const void *data, size_t len, const char *expect)
{
    wire_msg_t *reply = NULL;
    int rc = client_request(client, data, len, &reply);
    CHECK_INT(rc, 0);
    CHECK(reply != NULL && !wire_msg_bool(reply, "ok", true));
    const char *error = reply ? wire_msg_str(reply, "error", "") : "";
    if (strstr(error, expect) == NULL) {
        fprintf(stderr, "control error \"%s\" lacks \"%s\"\n", error, expect);
        check_failures++;
    }
    wire_msg_destroy(&reply);
    return rc;
}

static void s_garbage_control(client_t *client)
{
    const unsigned char junk[] = {0xc1, 0xff, 0x00};
    s_control_error(client, junk, sizeof junk, "malformed");
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, "hello");
    wire_put_str(w, "worker", "w");
    wire_put_str(w, "specialist", "x");
    wire_put_str(w, "endpoint", "ipc:///nowhere");
    size_t len;
    const void *data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "not a control request");
    wire_writer_start(w, "show_task");
    wire_put_int(w, "id", 5);
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "field 'id' must be a string");
    wire_writer_start(w, "show_task");
    wire_put_str(w, "id", "does-not-exist");
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "no task 'does-not-exist'");
    wire_writer_start(w, "submit");
    wire_put_str(w, "id", "ctl-bad");
    wire_put_str(w, "specialist", "test-agent");
    wire_put_str(w, "priority", "whenever");
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "invalid priority 'whenever'");
    /* Over the size cap: refused before decoding. */
    size_t big = WIRE_MAX_MESSAGE + 10;
    unsigned char *huge = calloc(1, big);
    huge[0] = 0x80;
    wire_msg_t *reply = NULL;
    client_t *other = client_new(client_endpoint(client), 1000);
    int rc = client_request(other, huge, big, &reply);
    CHECK(rc != 0 || (reply != NULL && !wire_msg_bool(reply, "ok", true)));
    wire_msg_destroy(&reply);
    client_destroy(&other);
    free(huge);
    wire_writer_destroy(&w);
}

static bool s_saw_rejection(client_t *client, const char *task_id, const char *reason)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, "replay");
    wire_put_int(w, "since", 0);
    wire_put_str(w, "topic", "task.rejected/");
    wire_msg_t *reply = NULL;
    client_call(client, w, &reply);
    wire_writer_destroy(&w);
    const msgpack_object *events = reply ? wire_msg_object(reply, "data") : NULL;
    bool found = false;
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        char id[64], error[512];
        wire_obj_str(wire_map_get(&events->via.array.ptr[i], "task"), id, sizeof id, "");
        wire_obj_str(wire_map_get(&events->via.array.ptr[i], "error"), error, sizeof error, "");
        if (strcmp(id, task_id) == 0 && strstr(error, reason) != NULL)
            found = true;
    }
    wire_msg_destroy(&reply);
    return found;
}

int main(void)
{
    testenv_t *env = testenv_new("broker-garbage");
    if (env == NULL)
        return 1;
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    void *context = zmq_ctx_new();
    void *push = zmq_socket(context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(push, env->in_ep);

    CHECK_INT(testbroker_submit(client, "before", "test-agent", NULL, NULL), 0);
    s_garbage_in(push);
    s_raw_bytes(env->in_ep);
    s_raw_bytes(env->control_ep);
    s_raw_bytes(env->events_ep);
    /* A peer of the wrong socket type on the events endpoint. */
    void *wrong = zmq_socket(context, ZMQ_PUSH);
    zmq_setsockopt(wrong, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(wrong, env->events_ep);
    zmq_send(wrong, "noise", 5, ZMQ_DONTWAIT);
    s_garbage_control(client);
    /* An oversize message on `in`: the connection is dropped, nothing else happens. */
    size_t big = WIRE_MAX_MESSAGE + 2048;
    char *huge = calloc(1, big);
    zmq_send(push, huge, big, 0);
    free(huge);
    testenv_sleep_ms(300);

    /* Still serving, and nothing accepted was lost or changed. */
    CHECK_INT(testbroker_submit(client, "after", "test-agent", NULL, NULL), 0);
    char queue[256];
    CHECK_STR(testbroker_queue(client, "test-agent", queue, sizeof queue), "before after");
    CHECK(s_saw_rejection(client, "bad-priority", "invalid priority 'asap'"));
    CHECK(s_saw_rejection(client, "bad-specialist", "invalid specialist name"));
    CHECK(s_saw_rejection(client, "unknown-specialist", "unknown specialist 'nobody-agent'"));
    CHECK(s_saw_rejection(client, "ctl-bad", "invalid priority 'whenever'"));

    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, "stats");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, w, &reply), 0);
    const msgpack_object *rejected = wire_map_get(wire_map_get(wire_msg_object(reply, "data"), "rejected"), "malformed");
    CHECK(rejected != NULL && rejected->via.u64 >= 6);
    const msgpack_object *invalid = wire_map_get(wire_map_get(wire_msg_object(reply, "data"), "rejected"), "invalid submit");
    CHECK(invalid != NULL && invalid->via.u64 >= 4);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);

    zmq_close(wrong);
    zmq_close(push);
    zmq_ctx_term(context);
    client_destroy(&client);
    CHECK(testenv_wait(env, broker, 0) == -1); /* still running */
    testenv_destroy(&env);
    return check_exit_code("test_broker_garbage");
}
