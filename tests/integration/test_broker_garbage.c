/* Garbage on every socket: malformed msgpack, truncated frames, wrong types, unknown
 * message types, oversize messages, invalid priorities and specialists, raw bytes that are
 * not even ZMTP. Each is refused with a reason, counted, and the broker keeps serving.
 * Also: a payload.issueId over the 128-byte cap of an issue is refused (on control and on
 * `in`), and a refused hello does not make its specialist known, not even after a restart. */
#include "check.h"
#include "failure.h"
#include "testbroker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    wire_put_str(w, FIELD_TYPE, "submit");
    s_send_writer(push, w);
    wire_writer_start_map(w);
    wire_put_int(w, FIELD_V, 2);
    wire_put_str(w, FIELD_TYPE, "submit");
    s_send_writer(push, w);
    wire_writer_start_map(w);
    wire_put_int(w, FIELD_V, 1);
    wire_put_str(w, FIELD_TYPE, "launch_missiles");
    s_send_writer(push, w);
    wire_writer_start(w, MSG_SUBMIT); /* wrong field type */
    wire_put_str(w, FIELD_ID, "bad-type");
    wire_put_int(w, FIELD_SPECIALIST, 42);
    s_send_writer(push, w);
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "bad-priority");
    wire_put_str(w, FIELD_SPECIALIST, "test-agent");
    wire_put_str(w, FIELD_PRIORITY, "asap");
    s_send_writer(push, w);
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "bad-specialist");
    wire_put_str(w, FIELD_SPECIALIST, "Robert'); DROP TABLE tasks;--");
    s_send_writer(push, w);
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "unknown-specialist");
    wire_put_str(w, FIELD_SPECIALIST, "nobody-agent");
    s_send_writer(push, w);
    wire_writer_start(w, MSG_TASK); /* a broker->worker message sent to the broker */
    wire_put_str(w, FIELD_WORKER, "x");
    s_send_writer(push, w);
    wire_writer_start(w, MSG_RESULT);
    wire_put_str(w, FIELD_WORKER, "w");
    wire_put_str(w, FIELD_TASK, "nope");
    wire_put_int(w, FIELD_ATTEMPT, 1);
    wire_put_str(w, FIELD_OUTCOME, "maybe");
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
    CHECK(reply != NULL && !wire_msg_bool(reply, FIELD_OK, true));
    const char *error = reply ? wire_msg_str(reply, FIELD_ERROR, "") : "";
    if (strstr(error, expect) == NULL) {
        fprintf(stderr, "control error \"%s\" lacks \"%s\"\n", error, expect);
        check_fail();
    }
    wire_msg_destroy(&reply);
    return rc;
}

static void s_garbage_control(client_t *client)
{
    const unsigned char junk[] = {0xc1, 0xff, 0x00};
    s_control_error(client, junk, sizeof junk, "malformed");
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_HELLO);
    wire_put_str(w, FIELD_WORKER, "w");
    wire_put_str(w, FIELD_SPECIALIST, "x");
    wire_put_str(w, FIELD_ENDPOINT, "ipc:///nowhere");
    size_t len;
    const void *data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "not a control request");
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_int(w, FIELD_ID, 5);
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "field 'id' must be a string");
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, "does-not-exist");
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "no task 'does-not-exist'");
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "ctl-bad");
    wire_put_str(w, FIELD_SPECIALIST, "test-agent");
    wire_put_str(w, FIELD_PRIORITY, "whenever");
    data = wire_writer_data(w, &len);
    s_control_error(client, data, len, "invalid priority 'whenever'");
    /* Over the size cap: refused before decoding. */
    size_t big = WIRE_MAX_MESSAGE + 10;
    unsigned char *huge = calloc(1, big);
    huge[0] = 0x80;
    wire_msg_t *reply = NULL;
    client_t *other = client_new(client_endpoint(client), 1000);
    int rc = client_request(other, huge, big, &reply);
    CHECK(rc != 0 || (reply != NULL && !wire_msg_bool(reply, FIELD_OK, true)));
    wire_msg_destroy(&reply);
    client_destroy(&other);
    free(huge);
    wire_writer_destroy(&w);
}

/* A task.rejected event for `task_id` whose error holds `reason`; with a NULL `task_id`,
 * a message.rejected event (it names no task). */
static bool s_saw_rejection(client_t *client, const char *task_id, const char *reason)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, 0);
    wire_put_str(w, FIELD_TOPIC, task_id ? "task.rejected/" : "message.rejected");
    wire_msg_t *reply = NULL;
    client_call(client, w, &reply);
    wire_writer_destroy(&w);
    const msgpack_object *events = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    bool found = false;
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        const msgpack_object *event = &events->via.array.ptr[i];
        char id_buf[64], error_buf[512];
        const char *id = wire_obj_str(wire_map_get(event, FIELD_TASK), id_buf, sizeof id_buf, "");
        const char *error =
            wire_obj_str(wire_map_get(event, FIELD_ERROR), error_buf, sizeof error_buf, "");
        if (strcmp(id, task_id ? task_id : "") == 0 && strstr(error, reason) != NULL)
            found = true;
    }
    wire_msg_destroy(&reply);
    return found;
}

/* The message.rejected events stored so far, and the sum of their `coalesced`. */
static int s_garbage_events(client_t *client, int64_t *coalesced)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, 0);
    wire_put_str(w, FIELD_TOPIC, "message.rejected");
    wire_put_int(w, FIELD_LIMIT, 1000);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, w, &reply), 0);
    wire_writer_destroy(&w);
    const msgpack_object *events = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    int n = events && events->type == MSGPACK_OBJECT_ARRAY ? (int)events->via.array.size : 0;
    *coalesced = 0;
    for (int i = 0; i < n; i++) {
        const msgpack_object *c = wire_map_get(&events->via.array.ptr[i], FIELD_COALESCED);
        if (c != NULL && c->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            *coalesced += (int64_t)c->via.u64;
    }
    wire_msg_destroy(&reply);
    return n;
}

/* The `malformed` count in stats.rejected. */
static int64_t s_malformed_count(client_t *client)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, w, &reply), 0);
    wire_writer_destroy(&w);
    const msgpack_object *count = wire_map_get_key(
        wire_map_get(reply ? wire_msg_object(reply, FIELD_DATA) : NULL, FIELD_REJECTED), "malformed");
    int64_t n = count != NULL && count->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                    ? (int64_t)count->via.u64
                    : -1;
    wire_msg_destroy(&reply);
    return n;
}

/* 2,000 undecodable messages at once: every one counted in stats, but message.rejected
 * events (and log lines) at most one a second, the next saying how many it stands for. */
static void test_garbage_flood(client_t *client, void *push)
{
    /* Past the window of the garbage sent before, one more reports what it left folded. */
    testenv_sleep_ms(1100);
    zmq_send(push, "\xc1garbage", 8, 0);
    testenv_sleep_ms(1100);
    int64_t coalesced_before = 0;
    int events_before = s_garbage_events(client, &coalesced_before);
    int64_t counted_before = s_malformed_count(client);
    for (int i = 0; i < 2000; i++)
        zmq_send(push, "\xc1garbage", 8, 0);
    testenv_sleep_ms(1100);
    zmq_send(push, "\xc1garbage", 8, 0); /* reports the folded ones */
    testenv_sleep_ms(300);
    int64_t coalesced_after = 0;
    int events_after = s_garbage_events(client, &coalesced_after);
    CHECK_INT(s_malformed_count(client) - counted_before, 2001);
    /* One event a second: the burst and the one after it, a few more if the burst took
     * the broker several seconds (a slow machine, a sanitizer build). */
    CHECK(events_after - events_before >= 2 && events_after - events_before <= 6);
    CHECK_INT((events_after - events_before) + (coalesced_after - coalesced_before), 2001);
}

/* ---- payload.issueId over the cap of an issue ---- */

/* Starts a submit of `id` to test-agent whose payload.issueId is `issue_len` bytes. */
static void s_issue_submit(wire_writer_t *w, const char *id, size_t issue_len)
{
    char issue[512];
    memset(issue, 'i', issue_len);
    issue[issue_len] = '\0';
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_SPECIALIST, "test-agent");
    wire_open_map(w, FIELD_PAYLOAD);
    wire_put_str(w, FIELD_ISSUE_ID, issue);
    wire_close(w);
}

/* show_task of `id` answers not_found. */
static bool s_task_unknown(client_t *client, const char *id)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    wire_msg_t *reply = NULL;
    int rc = client_request(client, data, len, &reply);
    bool unknown = rc == 0 && !wire_msg_bool(reply, FIELD_OK, true) &&
                   strcmp(wire_msg_str(reply, FIELD_CODE, ""), "not_found") == 0;
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return unknown;
}

typedef struct {
    client_t *client;
    const char *task;   /* NULL: a message.rejected (no task) */
    const char *reason;
} rejection_t;

static bool s_rejection_seen(void *arg)
{
    rejection_t *want = arg;
    return s_saw_rejection(want->client, want->task, want->reason);
}

/* Finds the task.queued event of "issue-at-cap" (decoded: its issue fits the cap); `arg`
 * is a bool set when it is seen. */
static int s_on_queued(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    bool *seen = arg;
    if (strcmp(wire_msg_str(event, FIELD_TASK, ""), "issue-at-cap") == 0 &&
        strlen(wire_msg_str(event, FIELD_ISSUE, "")) == 128)
        *seen = true;
    return 0;
}

/* The issue of a task comes from payload.issueId when `issue` is absent; over 128 bytes it
 * would make events and task messages nobody can decode, so the submit is refused. */
static void test_issue_cap(client_t *client, void *push)
{
    wire_writer_t *w = wire_writer_new();
    s_issue_submit(w, "issue-over-ctl", 200);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_request(client, data, len, &reply), 0);
    CHECK(reply != NULL && !wire_msg_bool(reply, FIELD_OK, true));
    CHECK_STR(reply ? wire_msg_str(reply, FIELD_CODE, "") : NULL, "too_big");
    const char *error = reply ? wire_msg_str(reply, FIELD_ERROR, "") : "";
    if (strstr(error, "payload.issueId") == NULL || strstr(error, "128-byte cap") == NULL) {
        fprintf(stderr, "control error \"%s\" does not name payload.issueId's 128-byte cap\n",
                error);
        check_fail();
    }
    wire_msg_destroy(&reply);
    CHECK(s_task_unknown(client, "issue-over-ctl"));

    /* One byte over, through `in`: a task.rejected event, and no task. */
    s_issue_submit(w, "issue-over-in", 129);
    s_send_writer(push, w);
    rejection_t want = {client, "issue-over-in", "payload.issueId is over the 128-byte cap"};
    CHECK(testenv_wait_until(s_rejection_seen, &want, 5000));
    CHECK(s_task_unknown(client, "issue-over-in"));

    /* At the cap: accepted, and its event decodes. */
    s_issue_submit(w, "issue-at-cap", 128);
    data = wire_writer_data(w, &len);
    CHECK_INT(client_request(client, data, len, &reply), 0);
    CHECK(reply != NULL && wire_msg_bool(reply, FIELD_OK, false));
    wire_msg_destroy(&reply);
    char state[32];
    CHECK_STR(testbroker_state(client, "issue-at-cap", state, sizeof state), "queued");
    client_events_t *events = client_events_new(NULL, "task.queued/test-agent");
    bool seen = false;
    CHECK_INT(client_events_run(events, client, 0, false, NULL, s_on_queued, &seen), 0);
    CHECK(seen);
    client_events_destroy(&events);
    wire_writer_destroy(&w);
}

/* ---- a refused hello ---- */

static void s_hello(void *push, const char *worker, const char *specialist, const char *endpoint)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_HELLO);
    wire_put_str(w, FIELD_WORKER, worker);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_str(w, FIELD_ENDPOINT, endpoint);
    s_send_writer(push, w);
    wire_writer_destroy(&w);
}

/* Submits `id` to `specialist` through control; true if it is refused as unknown. */
static bool s_refused_as_unknown(client_t *client, const char *id, const char *specialist)
{
    char expect[128];
    snprintf(expect, sizeof expect, "unknown specialist '%s'", specialist);
    int rc = testbroker_submit(client, id, specialist, NULL, NULL);
    bool refused = rc == FAILURE_INVALID && strstr(failure_message(), expect) != NULL;
    if (!refused)
        fprintf(stderr, "submit %s to %s: rc %d (%s)\n", id, specialist, rc,
                rc == 0 ? "accepted" : failure_message());
    return refused;
}

/* A hello whose endpoint cannot be connected is refused: its specialist stays unknown, in
 * memory and in the store (after kill -9 and a restart). A hello that is accepted, for
 * comparison, makes its specialist known across the restart. */
static void test_refused_hello(testenv_t *env, client_t **client, void *push, pid_t *broker)
{
    char endpoint[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/real-worker.sock", env->dir);
    s_hello(push, "w-real", "real-agent", endpoint);
    s_hello(push, "w-ghost-1", "ghost-agent", "not-an-endpoint");
    s_hello(push, "w-ghost-2", "phantom-agent", "tcp://");
    rejection_t first = {*client, NULL, "cannot connect to worker endpoint 'not-an-endpoint'"};
    CHECK(testenv_wait_until(s_rejection_seen, &first, 5000));
    rejection_t second = {*client, NULL, "cannot connect to worker endpoint 'tcp://'"};
    CHECK(testenv_wait_until(s_rejection_seen, &second, 5000));
    CHECK(s_refused_as_unknown(*client, "ghost-1", "ghost-agent"));
    CHECK(s_refused_as_unknown(*client, "phantom-1", "phantom-agent"));
    /* The accepted hello was sent before the refused ones (one socket: in order), so it
     * is applied already. */
    CHECK_INT(testbroker_submit(*client, "real-1", "real-agent", NULL, NULL), 0);

    testenv_signal(*broker, SIGKILL);
    CHECK(testenv_wait(env, *broker, 3000) >= 0);
    client_destroy(client);
    *broker = testbroker_start(env, 200, "full");
    CHECK(*broker > 0);
    *client = testbroker_client(env);
    CHECK(s_refused_as_unknown(*client, "ghost-2", "ghost-agent"));
    CHECK(s_refused_as_unknown(*client, "phantom-2", "phantom-agent"));
    CHECK_INT(testbroker_submit(*client, "real-2", "real-agent", NULL, NULL), 0);
}

/* True when `pid`'s open-files soft limit is its hard limit (/proc/<pid>/limits). */
static bool s_fd_limit_raised(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    bool raised = false;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char soft[32], hard[32];
        if (sscanf(line, "Max open files %31s %31s", soft, hard) == 2)
            raised = strcmp(soft, hard) == 0;
    }
    if (f != NULL)
        fclose(f);
    return raised;
}

int main(void)
{
    testenv_t *env = testenv_new("broker-garbage");
    if (env == NULL)
        return 1;
    /* The broker takes the open-files limit up to its hard limit, whatever it inherits. */
    struct rlimit ours;
    CHECK(getrlimit(RLIMIT_NOFILE, &ours) == 0);
    struct rlimit lowered = {.rlim_cur = 256, .rlim_max = ours.rlim_max};
    CHECK(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(setrlimit(RLIMIT_NOFILE, &ours) == 0);
    CHECK(broker > 0);
    CHECK(s_fd_limit_raised(broker));
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
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, w, &reply), 0);
    const msgpack_object *rejected = wire_map_get_key(wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_REJECTED), "malformed");
    CHECK(rejected != NULL && rejected->via.u64 >= 6);
    const msgpack_object *invalid = wire_map_get_key(wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_REJECTED), "invalid_submit");
    CHECK(invalid != NULL && invalid->via.u64 >= 4);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);

    test_garbage_flood(client, push);
    test_issue_cap(client, push);
    test_refused_hello(env, &client, push, &broker);

    zmq_close(wrong);
    zmq_close(push);
    zmq_ctx_term(context);
    client_destroy(&client);
    CHECK(testenv_wait(env, broker, 0) == -1); /* still running */
    testenv_destroy(&env);
    return check_exit_code("test_broker_garbage");
}
