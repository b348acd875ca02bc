/* bench_broker: how fast a real cloister-broker moves tasks.
 *
 * It starts the broker (ipc endpoints in a temporary directory) and plays two roles in
 * threads of its own: a submitter PUSHing `submit` messages to `in`, and a pool of K fast
 * workers (one PULL socket each) that answer every task with a `done` result at once.
 *
 * - Throughput: N tasks submitted as fast as the broker takes them; the clock stops when
 *   the last result is acknowledged (the ack leaves only after the result is committed),
 *   so tasks/s counts submit -> dispatch -> result committed.
 * - Latency: tasks submitted at a fixed rate; for each, the time from the submit leaving
 *   the submitter to the task arriving at a worker (the broker commits the task, then
 *   commits its dispatch, then sends it). p50 and p99.
 *
 * With --curve the bus is authenticated and encrypted (common/bus/curve.h): the broker's
 * sockets and every worker's task socket are CURVE servers, every other socket a client,
 * with the same keys for every run; without it the bus is plain. With --tcp every endpoint
 * (the broker's three and the workers') is TCP on 127.0.0.1, on ports free at the start,
 * instead of ipc. With --payload-bytes B each submit carries a payload map whose `context`
 * string holds B bytes (the broker stores it and sends it to the worker with the task).
 *
 * usage: bench_broker [--sync full|normal|off] [--curve] [--tcp] [--payload-bytes B]
 *                     [--tasks N] [--workers K] [--rate R] [--seconds S]
 *                     (without --sync: both modes) */
#include "benchproc.h"
#include "clock.h"
#include "curve.h"
#include "failure.h"
#include "testenv.h"
#include "testbroker.h"
#include "wire.h"

#include <czmq.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

typedef struct {
    testenv_t *env;
    void *context;
    int tasks;
    int workers;
    int rate;          /* 0: as fast as possible */
    int64_t *sent_us;  /* per task index */
    int64_t *got_us;   /* per task index: arrival at a worker */
    volatile int acked;
    volatile int stop;
} bench_t;

/* --curve: the keys every run's broker and clients share (made once, in the home of
 * s_keys_env), else NULL. */
static const curve_t *s_curve;
static testenv_t *s_keys_env;
static char s_keys_home[300];
/* --tcp: every endpoint on 127.0.0.1 instead of ipc. */
static bool s_tcp;
/* --payload-bytes: the size of each submit's payload `context` (0: no payload). */
static int s_payload_bytes;

static int s_task_index(const char *id)
{
    return atoi(id + 2); /* ids are "b-<index>" */
}

static void *s_submitter(void *arg)
{
    bench_t *b = arg;
    void *push = zmq_socket(b->context, ZMQ_PUSH);
    int hwm = 100000;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (s_curve != NULL)
        curve_apply_client(s_curve, push);
    zmq_connect(push, b->env->in_ep);
    wire_writer_t *w = wire_writer_new();
    char *context = malloc((size_t)s_payload_bytes + 1);
    memset(context, 'p', (size_t)s_payload_bytes);
    context[s_payload_bytes] = '\0';
    int64_t start = clock_now_us();
    for (int i = 0; i < b->tasks && !b->stop; i++) {
        if (b->rate > 0) {
            /* Sleep until the submit is due (no busy wait: the broker needs the core). */
            int64_t due = start + (int64_t)i * 1000000 / b->rate;
            struct timespec at = {(time_t)(due / 1000000), (long)(due % 1000000) * 1000};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {
            }
        }
        char id[32];
        snprintf(id, sizeof id, "b-%d", i);
        wire_writer_start(w, MSG_SUBMIT);
        wire_put_str(w, FIELD_ID, id);
        wire_put_str(w, FIELD_SPECIALIST, "bench-agent");
        wire_put_str(w, FIELD_TITLE, "benchmark task");
        if (s_payload_bytes > 0) {
            wire_open_map(w, FIELD_PAYLOAD);
            wire_put_key_strn(w, "context", context, (size_t)s_payload_bytes);
            wire_close(w);
        }
        size_t len;
        const void *data = wire_writer_data(w, &len);
        b->sent_us[i] = clock_now_us();
        zmq_send(push, data, len, 0);
    }
    wire_writer_destroy(&w);
    free(context);
    /* Fire-and-forget submits still in the pipe are delivered while the socket stays open. */
    while (!b->stop)
        testenv_sleep_ms(5);
    zmq_close(push);
    return NULL;
}

static void s_send(void *push, wire_writer_t *w)
{
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zmq_send(push, data, len, 0);
}

/* A fast worker reads only what it needs (type, id, attempt) straight from the msgpack map
 * and answers a task with `done` at once. The zone is the pool's own, reused. */
static void s_answer(bench_t *b, void *push, wire_writer_t *w, msgpack_zone *zone,
                     const char *worker, const void *data, size_t len)
{
    msgpack_object root;
    size_t offset = 0;
    if (msgpack_unpack(data, len, &offset, zone, &root) == MSGPACK_UNPACK_SUCCESS) {
        char type[16], id[64];
        wire_obj_str(wire_map_get(&root, FIELD_TYPE), type, sizeof type, "");
        if (strcmp(type, "task") == 0) {
            wire_obj_str(wire_map_get(&root, FIELD_ID), id, sizeof id, "b-0");
            const msgpack_object *attempt = wire_map_get(&root, FIELD_ATTEMPT);
            b->got_us[s_task_index(id)] = clock_now_us();
            wire_writer_start(w, MSG_RESULT);
            wire_put_str(w, FIELD_WORKER, worker);
            wire_put_str(w, FIELD_TASK, id);
            wire_put_int(w, FIELD_ATTEMPT, attempt ? (int64_t)attempt->via.u64 : 1);
            wire_put_str(w, FIELD_OUTCOME, "done");
            s_send(push, w);
        } else if (strcmp(type, "ack") == 0) {
            b->acked++;
        }
    }
    msgpack_zone_clear(zone);
}

/* Reads everything waiting on worker k's socket. ZMQ_FD only says "look again", so the
 * socket is drained until ZMQ_EVENTS has no POLLIN left. */
static void s_drain_worker(bench_t *b, void *pull, void *push, wire_writer_t *w,
                           msgpack_zone *zone, const char *worker)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    for (;;) {
        while (zmq_msg_recv(&msg, pull, ZMQ_DONTWAIT) >= 0)
            s_answer(b, push, w, zone, worker, zmq_msg_data(&msg), zmq_msg_size(&msg));
        int events = 0;
        size_t size = sizeof events;
        if (zmq_getsockopt(pull, ZMQ_EVENTS, &events, &size) != 0 || !(events & ZMQ_POLLIN))
            break;
    }
    zmq_msg_close(&msg);
}

/* The K workers live in one thread. One epoll set watches every socket's ZMQ_FD, so a
 * wake-up touches only the sockets that have something (zmq_poll over K sockets would
 * check all K each time and make the load generator, not the broker, the bottleneck). */
static void *s_worker_pool(void *arg)
{
    bench_t *b = arg;
    void *push = zmq_socket(b->context, ZMQ_PUSH);
    if (s_curve != NULL)
        curve_apply_client(s_curve, push);
    zmq_connect(push, b->env->in_ep);
    void **pulls = calloc((size_t)b->workers, sizeof *pulls);
    char (*ids)[32] = calloc((size_t)b->workers, sizeof *ids);
    wire_writer_t *w = wire_writer_new();
    msgpack_zone *zone = msgpack_zone_new(8192);
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    for (int k = 0; k < b->workers; k++) {
        char endpoint[512];
        snprintf(ids[k], sizeof ids[k], "bench-w%d", k);
        if (s_tcp)
            snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:*");
        else
            snprintf(endpoint, sizeof endpoint, "ipc://%s/%s.sock", b->env->dir, ids[k]);
        pulls[k] = zmq_socket(b->context, ZMQ_PULL);
        if (s_curve != NULL)
            curve_apply_server(s_curve, pulls[k]);
        zmq_bind(pulls[k], endpoint);
        size_t endpoint_len = sizeof endpoint; /* the port the kernel picked */
        zmq_getsockopt(pulls[k], ZMQ_LAST_ENDPOINT, endpoint, &endpoint_len);
        int fd;
        size_t size = sizeof fd;
        zmq_getsockopt(pulls[k], ZMQ_FD, &fd, &size);
        struct epoll_event watch = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &watch);
        wire_writer_start(w, MSG_HELLO);
        wire_put_str(w, FIELD_WORKER, ids[k]);
        wire_put_str(w, FIELD_SPECIALIST, "bench-agent");
        wire_put_str(w, FIELD_ENDPOINT, endpoint);
        if (s_curve != NULL)
            wire_put_str(w, FIELD_CURVE_KEY, curve_public(s_curve));
        s_send(push, w);
    }
    int64_t next_beat = 0;
    struct epoll_event ready[64];
    while (!b->stop && b->acked < b->tasks) {
        if (clock_now_ms() >= next_beat) {
            for (int k = 0; k < b->workers; k++) {
                wire_writer_start(w, MSG_HEARTBEAT);
                wire_put_str(w, FIELD_WORKER, ids[k]);
                s_send(push, w);
            }
            next_beat = clock_now_ms() + 300;
            /* ZMQ_FD may have fired for commands only: look at every socket now and then. */
            for (int k = 0; k < b->workers; k++)
                s_drain_worker(b, pulls[k], push, w, zone, ids[k]);
        }
        int n = epoll_wait(epoll, ready, 64, 100);
        for (int i = 0; i < n; i++) {
            int k = (int)ready[i].data.u32;
            s_drain_worker(b, pulls[k], push, w, zone, ids[k]);
        }
    }
    close(epoll);
    for (int k = 0; k < b->workers; k++)
        zmq_close(pulls[k]);
    zmq_close(push);
    wire_writer_destroy(&w);
    msgpack_zone_free(zone);
    free(pulls);
    free(ids);
    return NULL;
}

/* Starts null_broker, which is built next to this program. */
static pid_t s_start_null_broker(testenv_t *env)
{
    char self_path[512], path[600];
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return -1;
    self_path[n] = '\0';
    char *slash = strrchr(self_path, '/');
    if (slash != NULL)
        *slash = '\0';
    snprintf(path, sizeof path, "%s/null_broker", self_path);
    char *argv[] = {path, env->in_ep, env->events_ep, NULL};
    return testenv_spawn(env, "null-broker", argv);
}

static int s_compare(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* One run against a fresh broker. Returns elapsed seconds; fills latencies (µs) and the
 * broker's and this process's (the load's) CPU time per task (µs) over the run. */
static double s_run(const char *sync, bool null_broker, int tasks, int workers, int rate,
                    double *p50_ms, double *p99_ms, double *broker_cpu_us, double *self_cpu_us)
{
    testenv_t *env = testenv_new("bench");
    if (s_tcp) {
        snprintf(env->in_ep, sizeof env->in_ep, "tcp://127.0.0.1:%d", benchproc_free_port());
        snprintf(env->events_ep, sizeof env->events_ep, "tcp://127.0.0.1:%d",
                 benchproc_free_port());
        snprintf(env->control_ep, sizeof env->control_ep, "tcp://127.0.0.1:%d",
                 benchproc_free_port());
    }
    /* The broker must know the specialist before the first submit: a worker announces it. */
    bench_t b = {.env = env, .tasks = tasks, .workers = workers, .rate = rate};
    /* With CURVE, czmq's context: its ZAP handler (zauth) admits the broker to the
     * workers' sockets. */
    zactor_t *auth = NULL;
    b.context = s_curve ? zsys_init() : zmq_ctx_new();
    b.sent_us = calloc((size_t)tasks, sizeof *b.sent_us);
    b.got_us = calloc((size_t)tasks, sizeof *b.got_us);
    char config_path[600];
    snprintf(config_path, sizeof config_path, "%s/cloister.toml", env->home);
    /* Without --curve the bus is plain, TCP included (where CURVE is otherwise the default):
     * the servers it is compared with (tests/bench/compare.sh) speak plain TCP too. */
    testenv_write_file(config_path, s_curve ? "[specialists.bench-agent]\ntimeout = 600\n"
                                              "[security]\ncurve = true\n"
                                            : "[specialists.bench-agent]\ntimeout = 600\n"
                                              "[security]\ncurve = false\n");
    if (s_curve != NULL) {
        char keys[400];
        snprintf(keys, sizeof keys, "%s/keys", s_keys_home);
        char *copy[] = {"/bin/cp", "-a", keys, env->home, NULL};
        char out[256];
        if (testenv_run(env, copy, out, sizeof out, 10000) != 0) {
            fprintf(stderr, "bench: cannot copy the keys: %s\n", out);
            exit(1);
        }
    }
    pid_t broker = null_broker ? s_start_null_broker(env) : testbroker_start(env, 1000, sync);
    if (s_curve != NULL) {
        char trusted[800];
        snprintf(trusted, sizeof trusted, "%s/keys/trusted", env->home);
        auth = zactor_new(zauth, NULL);
        zstr_sendx(auth, "CURVE", trusted, NULL);
        zsock_wait(auth);
    }
    if (broker < 0) {
        fprintf(stderr, "bench: the broker did not start\n");
        exit(1);
    }
    pthread_t pool, submitter;
    pthread_create(&pool, NULL, s_worker_pool, &b);
    testenv_sleep_ms(300); /* workers announced */
    int64_t cpu_before = benchproc_cpu_us(broker);
    int64_t self_before = benchproc_self_cpu_us();
    int64_t started = clock_now_us();
    pthread_create(&submitter, NULL, s_submitter, &b);
    int64_t deadline = clock_now_ms() + 120000;
    while (b.acked < tasks && clock_now_ms() < deadline)
        testenv_sleep_ms(1);
    double elapsed = (double)(clock_now_us() - started) / 1e6;
    *broker_cpu_us = (double)(benchproc_cpu_us(broker) - cpu_before) / tasks;
    *self_cpu_us = (double)(benchproc_self_cpu_us() - self_before) / tasks;
    if (b.acked < tasks)
        fprintf(stderr, "bench: only %d of %d tasks finished in time\n", b.acked, tasks);
    b.stop = 1;
    pthread_join(submitter, NULL);
    pthread_join(pool, NULL);

    int64_t *latency = calloc((size_t)tasks, sizeof *latency);
    int n = 0;
    for (int i = 0; i < tasks; i++)
        if (b.got_us[i] > 0 && b.sent_us[i] > 0)
            latency[n++] = b.got_us[i] - b.sent_us[i];
    qsort(latency, (size_t)n, sizeof *latency, s_compare);
    *p50_ms = n ? (double)latency[n / 2] / 1000.0 : 0;
    *p99_ms = n ? (double)latency[(n * 99) / 100] / 1000.0 : 0;
    free(latency);
    free(b.sent_us);
    free(b.got_us);
    zactor_destroy(&auth);
    if (s_curve == NULL)
        zmq_ctx_term(b.context);
    testenv_destroy(&env);
    return b.acked < tasks ? -1 : elapsed;
}

/* Prints the throughput and latency lines of one mode ("full", "normal", "off" or, with
 * null_broker, the ceiling). */
static void s_bench(const char *sync, bool null_broker, int tasks, int workers, int rate,
                    int seconds)
{
    char label[32];
    snprintf(label, sizeof label, "%s%s%s", null_broker ? "null" : sync, s_curve ? "+curve" : "",
             s_tcp ? "+tcp" : "");
    double p50, p99, cpu, self_cpu;
    double elapsed = s_run(sync, null_broker, tasks, workers, 0, &p50, &p99, &cpu, &self_cpu);
    /* Utilisation: the broker's CPU time over the wall time, in % of one core. */
    printf("%s%-12s throughput: %d tasks, %d workers, %d-byte payloads: %.2f s = %.0f tasks/s"
           " end to end (broker CPU %.1f us/task, %.0f%% of a core)"
           " [client CPU %.1f us/task, %.0f%% of a core]\n",
           null_broker ? "broker=" : "sync=", label, tasks, workers, s_payload_bytes, elapsed,
           elapsed > 0 ? tasks / elapsed : 0.0, cpu,
           elapsed > 0 ? cpu * tasks / (elapsed * 1e4) : 0.0, self_cpu,
           elapsed > 0 ? self_cpu * tasks / (elapsed * 1e4) : 0.0);
    int paced = rate * seconds;
    if (paced <= 0)
        return;
    s_run(sync, null_broker, paced, workers, rate, &p50, &p99, &cpu, &self_cpu);
    printf("%s%-12s latency at %d tasks/s (%d tasks): submit->dispatch p50 %.3f ms, p99 %.3f ms\n",
           null_broker ? "broker=" : "sync=", label, rate, paced, p50, p99);
    fflush(stdout);
}

/* --curve: one set of keys for every run, made in a directory of its own; this process's
 * client sockets (the benchmark's and testbroker's) use its client pair. */
static int s_setup_curve(void)
{
    s_keys_env = testenv_new("bench-keys"); /* sets PANOPTICON_HOME to its home */
    if (s_keys_env == NULL)
        return -1;
    snprintf(s_keys_home, sizeof s_keys_home, "%s", s_keys_env->home);
    zsys_handler_set(NULL);
    config_t *config = NULL;
    const char text[] = "[security]\ncurve = true\n";
    const char *endpoints[] = {"ipc://bench", NULL};
    int rc = curve_keys_init();
    if (rc == 0)
        rc = config_parse_buffer("bench", text, sizeof text - 1, &config);
    if (rc == 0)
        rc = curve_client_init(config, endpoints);
    config_destroy(&config);
    if (rc != 0) {
        fprintf(stderr, "bench: %s\n", failure_message());
        return rc;
    }
    s_curve = curve_client();
    return 0;
}

static int s_usage(void)
{
    fprintf(stderr, "usage: bench_broker [--sync full|normal|off] [--null] [--curve] [--tcp]"
                    " [--payload-bytes B] [--tasks N] [--workers K] [--rate R] [--seconds S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *sync = NULL;
    bool null_broker = false;
    int tasks = 100000, workers = 64, rate = 1000, seconds = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--null") == 0) {
            null_broker = true;
            continue;
        }
        if (strcmp(argv[i], "--tcp") == 0) {
            s_tcp = true;
            continue;
        }
        if (strcmp(argv[i], "--curve") == 0) {
            if (s_setup_curve() != 0)
                return 1;
            continue;
        }
        if (i + 1 == argc)
            return s_usage();
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--sync") == 0)
            sync = value;
        else if (strcmp(argv[i - 1], "--tasks") == 0)
            tasks = atoi(value);
        else if (strcmp(argv[i - 1], "--workers") == 0)
            workers = atoi(value);
        else if (strcmp(argv[i - 1], "--rate") == 0)
            rate = atoi(value);
        else if (strcmp(argv[i - 1], "--seconds") == 0)
            seconds = atoi(value);
        else if (strcmp(argv[i - 1], "--payload-bytes") == 0)
            s_payload_bytes = atoi(value);
        else
            return s_usage();
    }
    if (tasks <= 0 || workers <= 0 || rate <= 0 || seconds < 0 || s_payload_bytes < 0 ||
        s_payload_bytes > 1000000)
        return s_usage();
    signal(SIGPIPE, SIG_IGN);
    if (null_broker) {
        s_bench("off", true, tasks, workers, rate, seconds);
    } else if (sync != NULL) {
        s_bench(sync, false, tasks, workers, rate, seconds);
    } else {
        s_bench("full", false, tasks, workers, rate, seconds);
        s_bench("normal", false, tasks, workers, rate, seconds);
    }
    testenv_destroy(&s_keys_env);
    return 0;
}
