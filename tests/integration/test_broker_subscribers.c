/* Subscribers that never read are bounded.
 *
 * 200 SUB sockets connect to the broker's events and read nothing (each takes one message
 * and has a 4 KiB socket buffer), then 12,000 events are published (task.queued events of
 * submits to a specialist with no worker). ZeroMQ queues every event for each subscriber
 * until its high-water mark: the events themselves are shared between the subscribers'
 * queues, but each queued event costs about 140 bytes per subscriber, and the broker's
 * mark of 10,000 events made that 1.4 MB for each one (200 subscribers: +280 MB). With
 * the mark at BROKER_EVENTS_HWM (1,000) the broker's peak RSS grows by less than 100 MB,
 * and it keeps answering on control meanwhile. */
#include "check.h"
#include "submit.h"
#include "testbroker.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define SUBSCRIBERS 200
#define EVENTS 12000

/* The broker's peak resident memory, in MB (VmHWM in /proc/<pid>/status), or -1. */
static int64_t s_peak_rss_mb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    int64_t kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        long long value;
        if (sscanf(line, "VmHWM: %lld kB", &value) == 1)
            kb = value;
    }
    if (f != NULL)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

static int64_t s_last_seq(client_t *client)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    const msgpack_object *seq =
        rc == 0 ? wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_LAST_SEQ) : NULL;
    int64_t value = seq != NULL && seq->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                        ? (int64_t)seq->via.u64
                        : -1;
    wire_msg_destroy(&reply);
    return value;
}

int main(void)
{
    testenv_t *env = testenv_new("broker_subscribers");
    if (env == NULL)
        return 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[broker]\nsync = \"off\"\nevent_retention = 100000\n\n"
                                   "[specialists.parked-agent]\nenabled = true\n") == 0);
    pid_t broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    void *context = zmq_ctx_new();
    void *subs[SUBSCRIBERS];
    for (int i = 0; i < SUBSCRIBERS; i++) {
        subs[i] = zmq_socket(context, ZMQ_SUB);
        int one = 1, small = 4096, linger = 0;
        zmq_setsockopt(subs[i], ZMQ_RCVHWM, &one, sizeof one);
        zmq_setsockopt(subs[i], ZMQ_RCVBUF, &small, sizeof small);
        zmq_setsockopt(subs[i], ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(subs[i], ZMQ_SUBSCRIBE, "", 0);
        CHECK(zmq_connect(subs[i], env->events_ep) == 0);
    }
    testenv_sleep_ms(1000); /* the subscriptions reach the broker */
    int64_t before = s_peak_rss_mb(broker);
    CHECK(before > 0);

    void *push = zmq_socket(context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(push, env->in_ep) == 0);
    wire_writer_t *w = wire_writer_new();
    char title[101];
    memset(title, 't', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    for (int i = 0; i < EVENTS; i++) {
        char id[32];
        snprintf(id, sizeof id, "parked-%d", i);
        submit_t task = {.id = id, .specialist = "parked-agent", .title = title};
        submit_encode(w, &task);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        CHECK(zmq_send(push, data, len, 0) == (int)len);
    }
    wire_writer_destroy(&w);
    int64_t seq = -1;
    for (int i = 0; i < 600 && (seq = s_last_seq(client)) < EVENTS; i++)
        testenv_sleep_ms(100);
    CHECK(seq >= EVENTS); /* and control answered all along */
    testenv_sleep_ms(1000);
    int64_t after = s_peak_rss_mb(broker);
    printf("%d subscribers that never read, %d events: broker peak RSS %lld MB -> %lld MB\n",
           SUBSCRIBERS, EVENTS, (long long)before, (long long)after);
#if !defined(__SANITIZE_ADDRESS__)
    CHECK(after >= 0 && after - before < 100);
#endif

    zmq_close(push);
    for (int i = 0; i < SUBSCRIBERS; i++)
        zmq_close(subs[i]);
    zmq_ctx_term(context);
    client_destroy(&client);
    testenv_destroy(&env);
    return check_exit_code("test_broker_subscribers");
}
