/* bench_redis: the same end-to-end load as bench_broker, against a running Redis used as a
 * reliable queue (the pattern under Sidekiq, BullMQ, Celery and RQ), for
 * tests/bench/compare.sh.
 *
 * A producer connection pipelines `LPUSH jobs <job>` of B-byte jobs, each unique (at most
 * WINDOW unanswered), and the jobs are taken in one of two ways:
 * - --workers K: K connections, each in a thread, loop `BLMOVE jobs processing RIGHT LEFT
 *   0` (the job moves to a processing list, where it stays until it is done) -> `LREM
 *   processing 1 <job>` (done), one job at a time: the shape of bench_broker's K workers;
 * - --pipeline D: one connection sends D BLMOVEs at once, reads the D jobs, then sends
 *   their D LREMs at once.
 * The clock runs from the first LPUSH to the last LREM's answer (the thread that reads it
 * stops it), so jobs/s counts push -> take -> done. Workers then blocked in BLMOVE are
 * woken by closing their sockets, after the clock stopped.
 *
 * With --pid, the server's CPU time (user + system, every thread, from /proc) over the same
 * window is printed per job, and as a share of one core; so is this client's own CPU time.
 *
 * usage: bench_redis --port P [--pid SERVER] [--tasks N] [--workers K | --pipeline D]
 *                    [--payload-bytes B] */
#include "benchproc.h"
#include "clock.h"

#include <hiredis/hiredis.h>
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
#define MIN_PAYLOAD 16 /* room for the job's number, which makes it unique */
#define MAX_PAYLOAD 1000000
#define MAX_PIPELINE 1000

typedef struct {
    int port;
    int tasks;
    int payload_bytes;
    pid_t server;
    atomic_int done;
    /* set once, by the thread that reads the last LREM's answer */
    pthread_mutex_t lock;
    pthread_cond_t all_done;
    bool finished;
    int64_t end_us, end_cpu_us, end_self_cpu_us;
} bench_t;

typedef struct {
    bench_t *bench;
    redisContext *redis;
    int pipeline; /* 0: one job at a time */
} consumer_t;

static redisContext *s_connect(int port)
{
    redisContext *redis = redisConnect("127.0.0.1", port);
    if (redis != NULL && redis->err) {
        fprintf(stderr, "bench_redis: cannot connect to 127.0.0.1:%d: %s\n", port, redis->errstr);
        redisFree(redis);
        return NULL;
    }
    return redis;
}

/* Counts one finished job; the last one stops the clock. */
static void s_job_done(bench_t *bench)
{
    if (atomic_fetch_add(&bench->done, 1) + 1 != bench->tasks)
        return;
    int64_t now = clock_now_us();
    int64_t cpu = bench->server > 0 ? benchproc_cpu_us(bench->server) : 0;
    int64_t self_cpu = benchproc_self_cpu_us();
    pthread_mutex_lock(&bench->lock);
    bench->end_us = now;
    bench->end_cpu_us = cpu;
    bench->end_self_cpu_us = self_cpu;
    bench->finished = true;
    pthread_cond_signal(&bench->all_done);
    pthread_mutex_unlock(&bench->lock);
}

/* The next reply, which must be a string (a job): false when the connection ended. */
static bool s_job_reply(redisContext *redis, redisReply **job)
{
    void *reply = NULL;
    if (redisGetReply(redis, &reply) != REDIS_OK)
        return false; /* shut down once every job was done */
    *job = reply;
    if ((*job)->type != REDIS_REPLY_STRING) {
        fprintf(stderr, "bench_redis: BLMOVE answered type %d (%s)\n", (*job)->type,
                (*job)->type == REDIS_REPLY_ERROR ? (*job)->str : "");
        freeReplyObject(reply);
        return false;
    }
    return true;
}

/* The next reply, which must be LREM's 1. */
static bool s_removed_reply(consumer_t *consumer)
{
    void *reply = NULL;
    if (redisGetReply(consumer->redis, &reply) != REDIS_OK)
        return false;
    redisReply *removed = reply;
    bool ok = removed->type == REDIS_REPLY_INTEGER && removed->integer == 1;
    if (!ok)
        fprintf(stderr, "bench_redis: LREM answered type %d\n", removed->type);
    freeReplyObject(reply);
    if (ok)
        s_job_done(consumer->bench);
    return ok;
}

/* One job at a time until the socket is shut down. */
static void s_consume_one_by_one(consumer_t *consumer)
{
    redisContext *redis = consumer->redis;
    for (;;) {
        redisReply *job = NULL;
        redisAppendCommand(redis, "BLMOVE jobs processing RIGHT LEFT 0");
        if (!s_job_reply(redis, &job))
            return;
        redisAppendCommand(redis, "LREM processing 1 %b", job->str, job->len);
        freeReplyObject(job);
        if (!s_removed_reply(consumer))
            return;
    }
}

/* `pipeline` BLMOVEs at once, then their LREMs at once, until every job is taken (the only
 * consumer: it never asks for more jobs than are left, so it never blocks at the end). */
static void s_consume_pipelined(consumer_t *consumer)
{
    bench_t *bench = consumer->bench;
    redisContext *redis = consumer->redis;
    int depth = consumer->pipeline;
    for (int taken = 0; taken < bench->tasks;) {
        int batch = bench->tasks - taken < depth ? bench->tasks - taken : depth;
        for (int i = 0; i < batch; i++)
            redisAppendCommand(redis, "BLMOVE jobs processing RIGHT LEFT 0");
        for (int i = 0; i < batch; i++) {
            redisReply *job = NULL;
            if (!s_job_reply(redis, &job))
                return;
            redisAppendCommand(redis, "LREM processing 1 %b", job->str, job->len);
            freeReplyObject(job);
        }
        for (int i = 0; i < batch; i++)
            if (!s_removed_reply(consumer))
                return;
        taken += batch;
    }
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

/* Pushes every job, at most WINDOW unanswered. */
static bool s_produce(bench_t *bench)
{
    redisContext *redis = s_connect(bench->port);
    if (redis == NULL)
        return false;
    char *job = malloc((size_t)bench->payload_bytes + 1);
    memset(job, 'j', (size_t)bench->payload_bytes);
    int sent = 0, answered = 0;
    bool ok = true;
    while (ok && answered < bench->tasks) {
        while (sent < bench->tasks && sent - answered < WINDOW) {
            /* The job's number first, so that LREM removes exactly this job. */
            int n = snprintf(job, (size_t)bench->payload_bytes + 1, "%015d", sent);
            job[n] = 'j';
            redisAppendCommand(redis, "LPUSH jobs %b", job, (size_t)bench->payload_bytes);
            sent++;
        }
        void *reply = NULL;
        ok = redisGetReply(redis, &reply) == REDIS_OK &&
             ((redisReply *)reply)->type == REDIS_REPLY_INTEGER;
        if (!ok)
            fprintf(stderr, "bench_redis: LPUSH failed: %s\n",
                    reply ? ((redisReply *)reply)->str : redis->errstr);
        freeReplyObject(reply);
        answered++;
    }
    redisFree(redis);
    free(job);
    return ok;
}

static int s_usage(void)
{
    fprintf(stderr, "usage: bench_redis --port P [--pid SERVER] [--tasks N]"
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
        pipeline > MAX_PIPELINE || bench.payload_bytes < MIN_PAYLOAD ||
        bench.payload_bytes > MAX_PAYLOAD)
        return s_usage();
    if (pipeline > 0)
        workers = 1;
    signal(SIGPIPE, SIG_IGN); /* a worker writing to its socket after it was shut down */
    /* A fresh start: nothing left from an earlier run. */
    redisContext *admin = s_connect(bench.port);
    if (admin == NULL)
        return 1;
    freeReplyObject(redisCommand(admin, "DEL jobs processing"));
    redisFree(admin);
    pthread_mutex_init(&bench.lock, NULL);
    pthread_cond_init(&bench.all_done, NULL);
    consumer_t *consumers = calloc((size_t)workers, sizeof *consumers);
    pthread_t *threads = calloc((size_t)workers, sizeof *threads);
    for (int i = 0; i < workers; i++) {
        consumers[i].bench = &bench;
        consumers[i].pipeline = pipeline;
        consumers[i].redis = s_connect(bench.port);
        if (consumers[i].redis == NULL)
            return 1;
    }
    int64_t start_cpu = bench.server > 0 ? benchproc_cpu_us(bench.server) : 0;
    int64_t start_self_cpu = benchproc_self_cpu_us();
    int64_t start = clock_now_us();
    for (int i = 0; i < workers; i++)
        pthread_create(&threads[i], NULL, s_consumer, &consumers[i]);
    bool ok = s_produce(&bench);
    pthread_mutex_lock(&bench.lock);
    while (ok && !bench.finished)
        pthread_cond_wait(&bench.all_done, &bench.lock);
    pthread_mutex_unlock(&bench.lock);
    /* The clock has stopped: wake the workers blocked in BLMOVE. */
    for (int i = 0; i < workers; i++)
        shutdown(consumers[i].redis->fd, SHUT_RDWR);
    for (int i = 0; i < workers; i++) {
        pthread_join(threads[i], NULL);
        redisFree(consumers[i].redis);
    }
    free(threads);
    free(consumers);
    int done = atomic_load(&bench.done);
    if (!ok || done < bench.tasks) {
        fprintf(stderr, "bench_redis: %d of %d jobs went through\n", done, bench.tasks);
        return 1;
    }
    double seconds = (double)(bench.end_us - start) / 1e6;
    double cpu_us = (double)(bench.end_cpu_us - start_cpu);
    char shape[96];
    if (pipeline > 0)
        snprintf(shape, sizeof shape, "1 connection pipelining %d BLMOVEs then %d LREMs",
                 pipeline, pipeline);
    else
        snprintf(shape, sizeof shape, "%d workers one job each", workers);
    printf("redis throughput: %d jobs, %s, %d-byte jobs: %.2f s = %.0f jobs/s end to end",
           bench.tasks, shape, bench.payload_bytes, seconds, bench.tasks / seconds);
    if (bench.server > 0)
        printf(" (server CPU %.1f us/job, %.0f%% of a core)", cpu_us / bench.tasks,
               cpu_us / (seconds * 1e4));
    double self_us = (double)(bench.end_self_cpu_us - start_self_cpu);
    printf(" [client CPU %.1f us/job, %.0f%% of a core]\n", self_us / bench.tasks,
           self_us / (seconds * 1e4));
    return 0;
}
