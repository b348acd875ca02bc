/* bench_beanstalkd: the same end-to-end load as bench_broker, against a running beanstalkd
 * (what a user would pick instead of Cloister's broker), for tests/bench/compare.sh.
 *
 * A producer connection pipelines `put`s of 300-byte jobs (at most WINDOW unanswered);
 * K worker connections, each in a thread, loop `reserve` -> `delete`. The clock runs from
 * the first put to the last DELETED, so jobs/s counts put -> reserve -> delete, as
 * bench_broker counts submit -> dispatch -> result committed.
 *
 * usage: bench_beanstalkd --port P [--tasks N] [--workers K] */
#include "clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define JOB_BYTES 300
#define WINDOW 256

typedef struct {
    int port;
    int tasks;
    atomic_int deleted;
} bench_t;

/* A connection with a read buffer. */
typedef struct {
    int fd;
    char buf[65536];
    size_t len;
} conn_t;

static bool s_connect(conn_t *c, int port)
{
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c->fd >= 0 && connect(c->fd, (struct sockaddr *)&address, sizeof address) == 0;
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

/* One "\r\n"-ended line into line (without it); false when the connection ends. */
static bool s_line(conn_t *c, char *line, size_t size)
{
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n", 2);
        if (end != NULL) {
            size_t n = (size_t)(end - c->buf);
            snprintf(line, size, "%.*s", (int)n, c->buf);
            memmove(c->buf, end + 2, c->len - n - 2);
            c->len -= n + 2;
            return true;
        }
        ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (got <= 0)
            return false;
        c->len += (size_t)got;
    }
}

/* Drops `n` bytes of a job's body and its "\r\n". */
static bool s_skip(conn_t *c, size_t n)
{
    n += 2;
    while (c->len < n) {
        ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (got <= 0)
            return false;
        c->len += (size_t)got;
    }
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
    return true;
}

static void *s_worker(void *arg)
{
    bench_t *bench = arg;
    conn_t c;
    if (!s_connect(&c, bench->port))
        return NULL;
    char line[256];
    while (atomic_load(&bench->deleted) < bench->tasks) {
        /* A reserve that waits at most a second, so a worker left without jobs ends. */
        if (!s_send(&c, "reserve-with-timeout 1\r\n", 24) || !s_line(&c, line, sizeof line))
            break;
        unsigned long long id;
        size_t bytes;
        if (sscanf(line, "RESERVED %llu %zu", &id, &bytes) != 2)
            continue; /* TIMED_OUT */
        if (!s_skip(&c, bytes))
            break;
        char command[64];
        int n = snprintf(command, sizeof command, "delete %llu\r\n", id);
        if (!s_send(&c, command, (size_t)n) || !s_line(&c, line, sizeof line))
            break;
        if (strcmp(line, "DELETED") == 0)
            atomic_fetch_add(&bench->deleted, 1);
    }
    close(c.fd);
    return NULL;
}

/* Puts every job, at most WINDOW unanswered. */
static bool s_produce(bench_t *bench)
{
    conn_t c;
    if (!s_connect(&c, bench->port))
        return false;
    char job[JOB_BYTES + 1];
    memset(job, 'j', JOB_BYTES);
    job[JOB_BYTES] = '\0';
    char command[JOB_BYTES + 64];
    int len = snprintf(command, sizeof command, "put 0 0 60 %d\r\n%s\r\n", JOB_BYTES, job);
    int sent = 0, answered = 0;
    char line[256];
    while (answered < bench->tasks) {
        while (sent < bench->tasks && sent - answered < WINDOW) {
            if (!s_send(&c, command, (size_t)len))
                return false;
            sent++;
        }
        if (!s_line(&c, line, sizeof line) || strncmp(line, "INSERTED", 8) != 0) {
            fprintf(stderr, "bench_beanstalkd: put answered '%s'\n", line);
            return false;
        }
        answered++;
    }
    close(c.fd);
    return true;
}

int main(int argc, char **argv)
{
    bench_t bench = {.port = 0, .tasks = 20000};
    int workers = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            bench.port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--tasks") == 0)
            bench.tasks = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--workers") == 0)
            workers = atoi(argv[i + 1]);
    }
    if (bench.port <= 0 || bench.tasks <= 0 || workers <= 0 || workers > 1024) {
        fprintf(stderr, "usage: bench_beanstalkd --port P [--tasks N] [--workers K]\n");
        return 2;
    }
    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    int64_t start = clock_now_us();
    for (int i = 0; i < workers; i++)
        pthread_create(&threads[i], NULL, s_worker, &bench);
    bool ok = s_produce(&bench);
    for (int i = 0; i < workers; i++)
        pthread_join(threads[i], NULL);
    double seconds = (double)(clock_now_us() - start) / 1e6;
    free(threads);
    int done = atomic_load(&bench.deleted);
    if (!ok || done < bench.tasks) {
        fprintf(stderr, "bench_beanstalkd: %d of %d jobs went through\n", done, bench.tasks);
        return 1;
    }
    printf("beanstalkd throughput: %d jobs, %d workers: %.2f s = %.0f jobs/s end to end\n",
           bench.tasks, workers, seconds, bench.tasks / seconds);
    return 0;
}
