/* bench_beanstalkd: the same end-to-end load as bench_broker, against a running beanstalkd
 * (what a user would pick instead of Cloister's broker), for tests/bench/compare.sh.
 *
 * A producer connection pipelines `put`s of B-byte jobs (at most WINDOW unanswered), and
 * the jobs are taken in one of two ways:
 * - --workers K: K connections, each in a thread, loop `reserve` -> `delete`, one job at a
 *   time: the shape of bench_broker's K workers;
 * - --pipeline D: one connection sends D `reserve`s at once, reads the D jobs, then sends
 *   their D `delete`s at once: beanstalkd's best client.
 * The clock runs from the first put to the last DELETED (the thread that reads it stops
 * it), so jobs/s counts put -> reserve -> delete, as bench_broker counts submit ->
 * dispatch -> result committed. Workers then blocked in `reserve` are woken by closing
 * their sockets, after the clock stopped.
 *
 * With --pid, the server's CPU time (user + system, from /proc) over the same window is
 * printed per job, and as a share of one core; so is this client's own CPU time.
 *
 * usage: bench_beanstalkd --port P [--pid SERVER] [--tasks N] [--workers K | --pipeline D]
 *                         [--payload-bytes B] */
#include "benchproc.h"
#include "clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WINDOW 256
#define MAX_PAYLOAD 60000
#define MAX_PIPELINE 1000

/* A connection with a read buffer: unread bytes are buf[start, len). */
typedef struct {
    int fd;
    char buf[65536 + 256];
    size_t start, len;
} conn_t;

typedef struct {
    int port;
    int tasks;
    int payload_bytes;
    pid_t server;
    atomic_int deleted;
    /* set once, by the thread that reads the last DELETED */
    pthread_mutex_t lock;
    pthread_cond_t done;
    bool finished;
    int64_t end_us, end_cpu_us, end_self_cpu_us;
} bench_t;

typedef struct {
    bench_t *bench;
    conn_t conn;
    int pipeline; /* 0: one job at a time */
} consumer_t;

static bool s_connect(conn_t *c, int port)
{
    c->start = c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0)
        return false;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return connect(c->fd, (struct sockaddr *)&address, sizeof address) == 0;
}

static bool s_send(conn_t *c, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(c->fd, data, len);
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads more bytes, moving the unread ones to the front first when the buffer is full. */
static bool s_fill(conn_t *c)
{
    if (c->len == sizeof c->buf) {
        memmove(c->buf, c->buf + c->start, c->len - c->start);
        c->len -= c->start;
        c->start = 0;
    }
    ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
    if (got <= 0)
        return false;
    c->len += (size_t)got;
    return true;
}

/* One "\r\n"-ended line into line (without it); false when the connection ends. */
static bool s_line(conn_t *c, char *line, size_t size)
{
    for (;;) {
        char *at = c->buf + c->start;
        char *end = memmem(at, c->len - c->start, "\r\n", 2);
        if (end != NULL) {
            int n = (int)(end - at);
            snprintf(line, size, "%.*s", n, at);
            c->start += (size_t)n + 2;
            return true;
        }
        if (c->start == 0 && c->len == sizeof c->buf)
            return false; /* a line longer than the buffer: not beanstalkd's */
        if (!s_fill(c))
            return false;
    }
}

/* Drops `n` bytes of a job's body and its "\r\n". */
static bool s_skip(conn_t *c, size_t n)
{
    n += 2;
    while (c->len - c->start < n) {
        n -= c->len - c->start;
        c->start = c->len = 0;
        if (!s_fill(c))
            return false;
    }
    c->start += n;
    return true;
}

/* Counts one DELETED; the last one stops the clock. */
static void s_deleted(bench_t *bench)
{
    if (atomic_fetch_add(&bench->deleted, 1) + 1 != bench->tasks)
        return;
    int64_t now = clock_now_us();
    int64_t cpu = bench->server > 0 ? benchproc_cpu_us(bench->server) : 0;
    int64_t self_cpu = benchproc_self_cpu_us();
    pthread_mutex_lock(&bench->lock);
    bench->end_us = now;
    bench->end_cpu_us = cpu;
    bench->end_self_cpu_us = self_cpu;
    bench->finished = true;
    pthread_cond_signal(&bench->done);
    pthread_mutex_unlock(&bench->lock);
}

/* Reads a RESERVED line and skips the job; its id in *id. */
static bool s_reserved(conn_t *c, unsigned long long *id)
{
    char line[256];
    size_t bytes;
    if (!s_line(c, line, sizeof line))
        return false; /* shut down once every job was deleted */
    if (sscanf(line, "RESERVED %llu %zu", id, &bytes) != 2) {
        fprintf(stderr, "bench_beanstalkd: reserve answered '%s'\n", line);
        return false;
    }
    return s_skip(c, bytes);
}

/* One job at a time until the socket is shut down. */
static void s_consume_one_by_one(consumer_t *consumer)
{
    conn_t *c = &consumer->conn;
    char line[256];
    for (;;) {
        unsigned long long id;
        if (!s_send(c, "reserve\r\n", 9) || !s_reserved(c, &id))
            return;
        char command[64];
        int n = snprintf(command, sizeof command, "delete %llu\r\n", id);
        if (!s_send(c, command, (size_t)n) || !s_line(c, line, sizeof line))
            return;
        if (strcmp(line, "DELETED") == 0)
            s_deleted(consumer->bench);
    }
}

/* `pipeline` reserves at once, then their deletes at once, until every job is taken (the
 * only consumer: it never asks for more jobs than are left, so it never blocks at the
 * end). */
static void s_consume_pipelined(consumer_t *consumer)
{
    conn_t *c = &consumer->conn;
    bench_t *bench = consumer->bench;
    int depth = consumer->pipeline;
    char *reserves = malloc((size_t)depth * 9);
    char *deletes = malloc((size_t)depth * 32);
    for (int i = 0; i < depth; i++)
        memcpy(reserves + i * 9, "reserve\r\n", 9);
    char line[256];
    for (int taken = 0; taken < bench->tasks;) {
        int batch = bench->tasks - taken < depth ? bench->tasks - taken : depth;
        if (!s_send(c, reserves, (size_t)batch * 9))
            break;
        size_t len = 0;
        bool ok = true;
        for (int i = 0; ok && i < batch; i++) {
            unsigned long long id;
            ok = s_reserved(c, &id);
            len += (size_t)snprintf(deletes + len, 32, "delete %llu\r\n", id);
        }
        if (!ok || !s_send(c, deletes, len))
            break;
        for (int i = 0; ok && i < batch; i++) {
            ok = s_line(c, line, sizeof line);
            if (ok && strcmp(line, "DELETED") == 0)
                s_deleted(bench);
        }
        if (!ok)
            break;
        taken += batch;
    }
    free(reserves);
    free(deletes);
}

static void *s_consumer(void *arg)
{
    consumer_t *consumer = arg;
    if (consumer->pipeline > 0)
        s_consume_pipelined(consumer);
    else
        s_consume_one_by_one(consumer);
    return NULL;
}

/* Puts every job, at most WINDOW unanswered. */
static bool s_produce(bench_t *bench)
{
    conn_t *c = malloc(sizeof *c);
    if (c == NULL || !s_connect(c, bench->port)) {
        free(c);
        return false;
    }
    char *command = malloc((size_t)bench->payload_bytes + 64);
    int len = snprintf(command, 64, "put 0 0 60 %d\r\n", bench->payload_bytes);
    memset(command + len, 'j', (size_t)bench->payload_bytes);
    len += bench->payload_bytes;
    memcpy(command + len, "\r\n", 2);
    len += 2;
    int sent = 0, answered = 0;
    char line[256] = "";
    bool ok = true;
    while (ok && answered < bench->tasks) {
        while (ok && sent < bench->tasks && sent - answered < WINDOW) {
            ok = s_send(c, command, (size_t)len);
            sent++;
        }
        if (ok && (!s_line(c, line, sizeof line) || strncmp(line, "INSERTED", 8) != 0)) {
            fprintf(stderr, "bench_beanstalkd: put answered '%s'\n", line);
            ok = false;
        }
        answered++;
    }
    close(c->fd);
    free(c);
    free(command);
    return ok;
}

static int s_usage(void)
{
    fprintf(stderr, "usage: bench_beanstalkd --port P [--pid SERVER] [--tasks N]"
                    " [--workers K | --pipeline D] [--payload-bytes B]\n");
    return 2;
}

int main(int argc, char **argv)
{
    bench_t bench = {.tasks = 20000, .payload_bytes = 300};
    int workers = 64, pipeline = 0;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc)
            return s_usage();
        int value = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--port") == 0)
            bench.port = value;
        else if (strcmp(argv[i], "--pid") == 0)
            bench.server = (pid_t)value;
        else if (strcmp(argv[i], "--tasks") == 0)
            bench.tasks = value;
        else if (strcmp(argv[i], "--workers") == 0)
            workers = value;
        else if (strcmp(argv[i], "--pipeline") == 0)
            pipeline = value;
        else if (strcmp(argv[i], "--payload-bytes") == 0)
            bench.payload_bytes = value;
        else
            return s_usage();
    }
    if (bench.port <= 0 || bench.tasks <= 0 || workers <= 0 || workers > 1024 || pipeline < 0 ||
        pipeline > MAX_PIPELINE || bench.payload_bytes < 0 || bench.payload_bytes > MAX_PAYLOAD)
        return s_usage();
    if (pipeline > 0)
        workers = 1;
    signal(SIGPIPE, SIG_IGN); /* a worker writing to its socket after it was shut down */
    pthread_mutex_init(&bench.lock, NULL);
    pthread_cond_init(&bench.done, NULL);
    consumer_t *consumers = calloc((size_t)workers, sizeof *consumers);
    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    for (int i = 0; i < workers; i++) {
        consumers[i].bench = &bench;
        consumers[i].pipeline = pipeline;
        if (!s_connect(&consumers[i].conn, bench.port)) {
            fprintf(stderr, "bench_beanstalkd: cannot connect to 127.0.0.1:%d\n", bench.port);
            return 1;
        }
    }
    int64_t start_cpu = bench.server > 0 ? benchproc_cpu_us(bench.server) : 0;
    int64_t start_self_cpu = benchproc_self_cpu_us();
    int64_t start = clock_now_us();
    for (int i = 0; i < workers; i++)
        pthread_create(&threads[i], NULL, s_consumer, &consumers[i]);
    bool ok = s_produce(&bench);
    pthread_mutex_lock(&bench.lock);
    while (ok && !bench.finished)
        pthread_cond_wait(&bench.done, &bench.lock);
    pthread_mutex_unlock(&bench.lock);
    /* The clock has stopped: wake the workers blocked in `reserve`. */
    for (int i = 0; i < workers; i++)
        shutdown(consumers[i].conn.fd, SHUT_RDWR);
    for (int i = 0; i < workers; i++) {
        pthread_join(threads[i], NULL);
        close(consumers[i].conn.fd);
    }
    free(threads);
    free(consumers);
    int done = atomic_load(&bench.deleted);
    if (!ok || done < bench.tasks) {
        fprintf(stderr, "bench_beanstalkd: %d of %d jobs went through\n", done, bench.tasks);
        return 1;
    }
    double seconds = (double)(bench.end_us - start) / 1e6;
    double cpu_us = (double)(bench.end_cpu_us - start_cpu);
    char shape[96];
    if (pipeline > 0)
        snprintf(shape, sizeof shape, "1 connection pipelining %d reserves then %d deletes",
                 pipeline, pipeline);
    else
        snprintf(shape, sizeof shape, "%d workers one job each", workers);
    printf("beanstalkd throughput: %d jobs, %s, %d-byte jobs: %.2f s = %.0f jobs/s end to end",
           bench.tasks, shape, bench.payload_bytes, seconds, bench.tasks / seconds);
    if (bench.server > 0)
        printf(" (server CPU %.1f us/job, %.0f%% of a core)", cpu_us / bench.tasks,
               cpu_us / (seconds * 1e4));
    double self_us = (double)(bench.end_self_cpu_us - start_self_cpu);
    printf(" [client CPU %.1f us/job, %.0f%% of a core]\n", self_us / bench.tasks,
           self_us / (seconds * 1e4));
    return 0;
}
