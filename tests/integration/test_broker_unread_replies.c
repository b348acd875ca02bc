/* Replies nobody reads are bounded.
 *
 * 12,000 events of about 4 KiB are stored (task.queued events of submits with 4 KiB
 * titles), then 300 DEALER sockets each ask to replay 10,000 of them and never read: first
 * from a process that stops itself (SIGSTOP) right after asking, so nothing of the replies
 * is read at all; then from this one, whose sockets take one message each and read none.
 * The broker used to build every reply at once (hundreds of MB each iteration) and went
 * past 1.8 GB; now a replay page (at most 512 KiB) is built only when the peer's pipe has
 * room, so its peak RSS (VmHWM, from /proc) stays under 400 MB -- a bound on memory, not
 * on time -- and it keeps answering others. A peer that asks for big listings without reading them gets ok:false
 * "too many unread replies" once it holds [broker] unread_replies_per_peer_mb. */
#include "check.h"
#include "failure.h"
#include "testbroker.h"

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define EVENTS 12000
#define READERS 300
#define LISTINGS 100

/* The bound on the broker's peak RSS, given its peak before the replays. Under
 * AddressSanitizer its memory is several times its own (shadow, redzones, freed blocks
 * kept in quarantine): the bound is then on what the replays add. */
static int64_t s_rss_bound_mb(int64_t before)
{
#if defined(__SANITIZE_ADDRESS__)
    return before + 400;
#else
    (void)before;
    return 400;
#endif
}

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
    int64_t value = seq != NULL ? (int64_t)seq->via.u64 : -1;
    wire_msg_destroy(&reply);
    return value;
}

typedef struct {
    client_t *client;
    int64_t want;
} seq_wait_t;

static bool s_seq_reached(void *arg)
{
    seq_wait_t *wait = arg;
    return s_last_seq(wait->client) >= wait->want;
}

/* EVENTS submits with 4 KiB titles, pushed on `in`. */
static void s_store_big_events(void *context, testenv_t *env, client_t *client)
{
    void *push = zmq_socket(context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(push, env->in_ep) == 0);
    char title[4096];
    memset(title, 'e', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    wire_writer_t *w = wire_writer_new();
    for (int i = 0; i < EVENTS; i++) {
        char id[32];
        snprintf(id, sizeof id, "big-%d", i);
        submit_t task = {.id = id, .specialist = "test-agent", .title = title};
        submit_encode(w, &task);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        zmq_send(push, data, len, 0);
    }
    wire_writer_destroy(&w);
    seq_wait_t wait = {client, EVENTS};
    CHECK(testenv_wait_until(s_seq_reached, &wait, 60000));
    zmq_close(push);
}

/* A DEALER that sends `count` requests of `type` (with `limit`) and reads nothing yet. */
static void *s_unread_asker(void *context, testenv_t *env, msg_type_t type, int limit, int count)
{
    void *dealer = zmq_socket(context, ZMQ_DEALER);
    int linger = 0, one = 1;
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(dealer, ZMQ_RCVHWM, &one, sizeof one);
    CHECK(zmq_connect(dealer, env->control_ep) == 0);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_int(w, FIELD_LIMIT, limit);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    for (int i = 0; i < count; i++) {
        zmq_send(dealer, "", 0, ZMQ_SNDMORE);
        zmq_send(dealer, data, len, 0);
    }
    wire_writer_destroy(&w);
    return dealer;
}

/* Reads the replies a DEALER has, until none comes for a second; counts the refusals. */
static int s_read_replies(void *dealer, int *ok)
{
    int refused = 0;
    *ok = 0;
    zmq_pollitem_t item = {dealer, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&item, 1, 1000) > 0) {
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        zmq_msg_recv(&frame, dealer, 0); /* the empty delimiter */
        zmq_msg_close(&frame);
        zmq_msg_init(&frame);
        zmq_msg_recv(&frame, dealer, 0);
        wire_msg_t *reply = NULL;
        if (wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &reply) == 0) {
            if (wire_msg_bool(reply, FIELD_OK, false))
                (*ok)++;
            else if (strstr(wire_msg_str(reply, FIELD_ERROR, ""), "too many unread replies"))
                refused++;
        }
        wire_msg_destroy(&reply);
        zmq_msg_close(&frame);
    }
    return refused;
}

/* The peers that stop: `argv[2]` is the control endpoint. */
static int s_stopped_peers(char **argv)
{
    void *context = zmq_ctx_new();
    testenv_t endpoints;
    snprintf(endpoints.control_ep, sizeof endpoints.control_ep, "%s", argv[2]);
    for (int i = 0; i < READERS; i++)
        s_unread_asker(context, &endpoints, MSG_REPLAY, 10000, 1);
    testenv_sleep_ms(200); /* the requests are on their way */
    raise(SIGSTOP);
    return 0;
}

/* True once the process `pid` is stopped (state T in /proc/<pid>/stat). */
static bool s_stopped(void *arg)
{
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", *(pid_t *)arg);
    FILE *f = fopen(path, "r");
    if (f != NULL && fgets(stat, sizeof stat, f) == NULL)
        stat[0] = '\0';
    if (f != NULL)
        fclose(f);
    const char *state = strrchr(stat, ')');
    return state != NULL && strncmp(state, ") T", 3) == 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "stopped-peers") == 0)
        return s_stopped_peers(argv);
#if defined(__SANITIZE_ADDRESS__)
    /* The broker's freed blocks are not kept by the hundred MB. */
    char options[1024];
    snprintf(options, sizeof options, "%s:quarantine_size_mb=16",
             getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "");
    setenv("ASAN_OPTIONS", options, 1);
#endif
    testenv_t *env = testenv_new("broker-unread-replies");
    if (env == NULL)
        return 1;
    pid_t broker = testbroker_start(env, 0, "normal");
    CHECK(broker > 0);
    client_t *client = client_new(env->control_ep, 10000);
    void *context = zmq_ctx_new();
    s_store_big_events(context, env, client);
    int64_t before = s_peak_rss_mb(broker);

    char *peers_argv[] = {"/proc/self/exe", "stopped-peers", env->control_ep, NULL};
    char self_path[512];
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    CHECK(n > 0);
    self_path[n] = '\0';
    peers_argv[0] = self_path;
    pid_t peers = testenv_spawn(env, "stopped-peers", peers_argv);
    CHECK(peers > 0);
    CHECK(testenv_wait_until(s_stopped, &peers, 20000));
    testenv_sleep_ms(3000);
    CHECK(s_last_seq(client) >= EVENTS); /* others are still answered */
    int64_t peak = s_peak_rss_mb(broker);
    fprintf(stderr, "test_broker_unread_replies: peak RSS %lld MB before the replays, %lld MB "
                    "with %d replays of a stopped process\n",
            (long long)before, (long long)peak, READERS);
    CHECK(peak > 0 && peak < s_rss_bound_mb(before));
    testenv_signal(peers, SIGKILL);
    CHECK(testenv_wait(env, peers, 5000) != -1);

    void *readers[READERS];
    for (int i = 0; i < READERS; i++)
        readers[i] = s_unread_asker(context, env, MSG_REPLAY, 10000, 1);
    testenv_sleep_ms(3000);
    CHECK(s_last_seq(client) >= EVENTS);
    peak = s_peak_rss_mb(broker);
    fprintf(stderr, "test_broker_unread_replies: peak RSS %lld MB with %d more unread\n",
            (long long)peak, READERS);
    CHECK(peak > 0 && peak < s_rss_bound_mb(before));
    for (int i = 0; i < READERS; i++)
        zmq_close(readers[i]);

    /* One peer, a hundred listings of up to 1000 tasks (about 3.5 MB each), unread. */
    void *greedy = s_unread_asker(context, env, MSG_LIST_TASKS, 1000, LISTINGS);
    testenv_sleep_ms(2000);
    CHECK(s_last_seq(client) >= EVENTS);
    int ok = 0;
    int refused = s_read_replies(greedy, &ok);
    fprintf(stderr, "test_broker_unread_replies: %d listings answered, %d refused\n", ok,
            refused);
    CHECK(refused > 0);
    CHECK_INT(ok + refused, LISTINGS);
    zmq_close(greedy);
    peak = s_peak_rss_mb(broker);
    fprintf(stderr, "test_broker_unread_replies: peak RSS %lld MB at the end\n", (long long)peak);
    CHECK(peak > 0 && peak < s_rss_bound_mb(before));
    CHECK(testenv_wait(env, broker, 0) == -1);

    zmq_ctx_term(context);
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    testenv_wait(env, broker, 10000);
    testenv_destroy(&env);
    return check_exit_code("test_broker_unread_replies");
}
