/* bench_scale: the broker with 10^4, 10^5 and 10^6 tasks queued.
 *
 * For each size N it fills a database through the broker's own store module with N queued
 * tasks of a declared specialist (what a broker restarted with a deep queue finds), starts
 * the real cloister-broker on it and prints:
 *   restart   from the start to the first answered `stats` (it loads every queued task),
 *             to the millisecond: the request waits on a socket that retries its
 *             connection every millisecond
 *   RSS       the broker's resident memory, and per queued task
 *   disk      broker.db and its WAL
 *   status    `stats` round trip (pan status), p50 of 50
 *   list      `list_tasks state=queued limit 50` round trip (pan task list), p50 of 50
 *   submit    10,000 more submits pipelined on `in`, per second (until stats counts them)
 *   dispatch  tasks dispatched and answered per second by 16 fast workers over 3 s (or
 *             half the queue); one epoll set watches the 16 sockets (only those with
 *             something to read are touched), each task is answered as it arrives,
 *             heartbeats go every 250 ms; with the broker's CPU and this
 *             harness's per task over the same window
 *
 * The first size, 0, measures an empty broker, the base the per-task memory is counted from.
 *
 * usage: bench_scale [--sizes 0,10000,100000,1000000] */
#include "benchproc.h"
#include "clock.h"
#include "client.h"
#include "failure.h"
#include "fakeworker.h"
#include "store.h"
#include "testbroker.h"
#include "testenv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define FILL_BATCH 20000
#define SPECIALIST "scale-agent"
#define WORKERS 16
#define EXTRA_SUBMITS 10000
#define HEARTBEAT_MS 250

/* The RSS of a broker with nothing queued (the first run), kB. */
static long s_idle_rss_kb;

static int s_fill(const char *db_path, int tasks)
{
    store_t *store = NULL;
    if (store_open(db_path, STORE_SYNC_OFF, &store) != 0)
        return -1;
    int64_t now = clock_wall_ms();
    int rc = 0;
    for (int i = 0; rc == 0 && i < tasks; i++) {
        if (i % FILL_BATCH == 0)
            rc = store_begin(store);
        char id[64];
        snprintf(id, sizeof id, "queued-%08d", i);
        task_t *task = task_new(id);
        task->specialist = strdup(SPECIALIST);
        task->title = strdup("a task title of ordinary length, as agents write them");
        task->state = TASK_QUEUED;
        task->priority = i % 4;
        task->order = i + 1;
        task->max_attempts = 3;
        task->timeout_s = 600;
        task->created = task->updated = now - (tasks - i);
        bool inserted = false;
        if (rc == 0)
            rc = store_task_insert(store, task, &inserted);
        task_destroy(&task);
        if (rc == 0 && (i % FILL_BATCH == FILL_BATCH - 1 || i == tasks - 1))
            rc = store_commit(store);
    }
    store_close(&store);
    return rc;
}

static long s_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return kb;
}

static double s_file_mb(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size / (1024 * 1024) : 0;
}

static int s_compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50 of 50 round trips of a request of `type` (list_tasks: a queued page of 50). */
static double s_p50_ms(client_t *client, msg_type_t type)
{
    double ms[50];
    for (int i = 0; i < 50; i++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, type);
        if (type == MSG_LIST_TASKS) {
            wire_put_str(w, FIELD_STATE, "queued");
            wire_put_int(w, FIELD_LIMIT, 50);
        }
        wire_msg_t *reply = NULL;
        int64_t start = clock_now_us();
        client_call(client, w, &reply);
        ms[i] = (double)(clock_now_us() - start) / 1000.0;
        wire_msg_destroy(&reply);
        wire_writer_destroy(&w);
    }
    qsort(ms, 50, sizeof ms[0], s_compare);
    return ms[25];
}

static int64_t s_stat(client_t *client, field_t field)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int64_t value = -1;
    if (client_call(client, w, &reply) == 0) {
        const msgpack_object *v = wire_map_get(wire_msg_object(reply, FIELD_DATA), field);
        value = v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)v->via.u64 : -1;
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return value;
}

/* EXTRA_SUBMITS submits pushed on `in`; per second until stats counts them all. */
static double s_submit_rate(testenv_t *env, client_t *client)
{
    void *context = zmq_ctx_new();
    void *push = zmq_socket(context, ZMQ_PUSH);
    int hwm = 0;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_connect(push, env->in_ep);
    int64_t before = s_stat(client, FIELD_SUBMITTED);
    int64_t start = clock_now_us();
    for (int i = 0; i < EXTRA_SUBMITS; i++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, MSG_SUBMIT);
        char id[64];
        snprintf(id, sizeof id, "extra-%d", i);
        wire_put_str(w, FIELD_ID, id);
        wire_put_str(w, FIELD_SPECIALIST, SPECIALIST);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        zmq_send(push, data, len, 0);
        wire_writer_destroy(&w);
    }
    while (s_stat(client, FIELD_SUBMITTED) < before + EXTRA_SUBMITS &&
           clock_now_us() - start < 120 * 1000000LL)
        testenv_sleep_ms(5);
    double seconds = (double)(clock_now_us() - start) / 1e6;
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(push);
    zmq_ctx_term(context);
    return EXTRA_SUBMITS / seconds;
}

/* Tasks dispatched and answered per second by WORKERS fast workers over 3 s, or until half
 * of the `queued` tasks are gone (so a small queue never runs dry while measured). One
 * poll over every worker's socket: a task is answered as soon as it arrives, whichever
 * worker has it. */
static double s_dispatch_rate(testenv_t *env, pid_t broker, int queued, double *broker_cpu_us,
                              double *self_cpu_us)
{
    void *context = zmq_ctx_new();
    fakeworker_t *workers[WORKERS];
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < WORKERS; i++) {
        char id[32];
        snprintf(id, sizeof id, "fast-%d", i);
        workers[i] = fakeworker_new_in(context, env->dir, env->in_ep, SPECIALIST, id);
        fakeworker_hello(workers[i], NULL, 0);
        int fd;
        size_t size = sizeof fd;
        zmq_getsockopt(fakeworker_socket(workers[i]), ZMQ_FD, &fd, &size);
        struct epoll_event watch = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &watch);
    }
    int done = 0;
    int64_t start = 0, next_beat = 0, cpu_start = 0, self_start = 0;
    int64_t end = clock_now_us() + 60 * 1000000LL;
    struct epoll_event ready[WORKERS];
    while (clock_now_us() < end && done < queued / 2) {
        int n;
        if (clock_now_ms() >= next_beat) {
            for (int i = 0; i < WORKERS; i++)
                fakeworker_heartbeat(workers[i], NULL, 0);
            next_beat = clock_now_ms() + HEARTBEAT_MS;
            /* ZMQ_FD may have fired for commands only: look at every socket now and then. */
            for (n = 0; n < WORKERS; n++)
                ready[n].data.u32 = (uint32_t)n;
        } else {
            n = epoll_wait(epoll, ready, WORKERS, HEARTBEAT_MS);
        }
        for (int k = 0; k < n; k++) {
            int i = (int)ready[k].data.u32;
            wire_msg_t *task;
            while ((task = fakeworker_take(workers[i], MSG_TASK)) != NULL) {
                if (start == 0) { /* counting starts at the first task: the hellos are set up */
                    start = clock_now_us();
                    end = start + 3 * 1000000LL;
                    cpu_start = benchproc_cpu_us(broker);
                    self_start = benchproc_self_cpu_us();
                } else {
                    done++;
                }
                fakeworker_result(workers[i], wire_msg_str(task, FIELD_ID, ""),
                                  (int)wire_msg_int(task, FIELD_ATTEMPT, 1), "done", NULL, NULL,
                                  0);
                wire_msg_destroy(&task);
            }
        }
    }
    *broker_cpu_us = done > 0 ? (double)(benchproc_cpu_us(broker) - cpu_start) / done : 0;
    *self_cpu_us = done > 0 ? (double)(benchproc_self_cpu_us() - self_start) / done : 0;
    close(epoll);
    for (int i = 0; i < WORKERS; i++) {
        fakeworker_bye(workers[i]);
        fakeworker_destroy(&workers[i]);
    }
    zmq_ctx_term(context);
    return start ? done / ((double)(clock_now_us() - start) / 1e6) : 0;
}

/* Starts the broker and returns its pid (or -1), with the seconds from its start to its
 * first answer on control in *seconds. The stats request is queued before the broker
 * listens, and the socket retries its connection every millisecond (testbroker_start()'s
 * client retries every 200 ms, which would read any shorter restart as 0.2 s). */
static pid_t s_start_timed(testenv_t *env, double *seconds)
{
    void *context = zmq_ctx_new();
    void *req = zmq_socket(context, ZMQ_REQ);
    int retry_ms = 1, linger = 0;
    zmq_setsockopt(req, ZMQ_RECONNECT_IVL, &retry_ms, sizeof retry_ms);
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    int64_t start = clock_now_us();
    pid_t broker = testbroker_spawn(env, 0, "full");
    bool answered = false;
    if (broker > 0 && zmq_connect(req, env->control_ep) == 0 && zmq_send(req, data, len, 0) >= 0) {
        zmq_pollitem_t item = {req, 0, ZMQ_POLLIN, 0};
        answered = zmq_poll(&item, 1, 120000) == 1;
    }
    *seconds = (double)(clock_now_us() - start) / 1e6;
    wire_writer_destroy(&w);
    zmq_close(req);
    zmq_ctx_term(context);
    if (broker > 0 && !answered)
        fprintf(stderr, "bench_scale: the broker did not answer within 120 s\n");
    return answered ? broker : -1;
}

static int s_run(int tasks)
{
    testenv_t *env = testenv_new("bench-scale");
    if (env == NULL)
        return 1;
    char db[600], wal[620], config[600];
    snprintf(db, sizeof db, "%s/broker.db", env->home);
    snprintf(wal, sizeof wal, "%s-wal", db);
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    testenv_write_file(config, "[specialists." SPECIALIST "]\nenabled = true\n");
    if (s_fill(db, tasks) != 0) {
        fprintf(stderr, "bench_scale: filling the store failed: %s\n", failure_message());
        testenv_destroy(&env);
        return 1;
    }
    double restart_s;
    pid_t broker = s_start_timed(env, &restart_s);
    if (broker <= 0) {
        testenv_destroy(&env);
        return 1;
    }
    client_t *client = testbroker_client(env);
    long rss = s_rss_kb(broker);
    double status_ms = s_p50_ms(client, MSG_STATS);
    double list_ms = s_p50_ms(client, MSG_LIST_TASKS);
    double disk = s_file_mb(db) + s_file_mb(wal);
    double submits = s_submit_rate(env, client);
    double dispatch_cpu_us, harness_cpu_us;
    double dispatch = s_dispatch_rate(env, broker, tasks + EXTRA_SUBMITS, &dispatch_cpu_us,
                                      &harness_cpu_us);
    if (tasks == 0)
        s_idle_rss_kb = rss;
    printf("%8d queued: restart %.3f s, RSS %.1f MB (%.0f B/task above an empty broker), disk "
           "%.1f MB, status %.2f ms, list %.2f ms, submit %.0f/s, dispatch %.0f/s (broker CPU "
           "%.1f us/task, harness %.1f)\n",
           tasks, restart_s, rss / 1024.0,
           tasks ? (double)(rss - s_idle_rss_kb) * 1024.0 / tasks : 0.0, disk, status_ms,
           list_ms, submits, dispatch, dispatch_cpu_us, harness_cpu_us);
    fflush(stdout);
    client_destroy(&client);
    testenv_destroy(&env);
    return 0;
}

int main(int argc, char **argv)
{
    const char *sizes = "0,10000,100000,1000000";
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], "--sizes") == 0)
            sizes = argv[i + 1];
    char *copy = strdup(sizes), *save = NULL;
    int rc = 0;
    for (char *size = strtok_r(copy, ",", &save); size && rc == 0; size = strtok_r(NULL, ",", &save))
        rc = s_run(atoi(size));
    free(copy);
    return rc;
}
