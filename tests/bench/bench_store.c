/* bench_store: what the broker's store (services/broker/store.c, the real module) costs per
 * task, without ZeroMQ or the broker's loop around it.
 *
 * It replays the broker's steady state: every commit inserts a batch of new tasks,
 * dispatches the previous batch and finishes the one before it, with an event for each
 * change, as bench_broker's load makes the broker do. Two figures:
 *
 * - rows + events: what the broker does today (insert, two row updates, three events);
 * - events only: the same three changes kept only as packed events, one row per commit
 *   (the cost floor of a log-structured store).
 *
 * usage: bench_store [--sync full|normal|off] [--tasks N] [--batch B] */
#include "clock.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A typical event body: bench_broker's events are about this size. */
#define EVENT_BYTES 180

typedef struct {
    store_t *store;
    task_t **tasks;
    int64_t seq;
    bool rows; /* write the task rows, not only events */
    char event[EVENT_BYTES];
} bench_t;

static int s_event(bench_t *b, const char *topic)
{
    return store_event_insert(b->store, ++b->seq, topic, strlen(topic), b->event, sizeof b->event);
}

static int s_submit(bench_t *b, task_t *task)
{
    bool inserted = false;
    int rc = b->rows ? store_task_insert(b->store, task, &inserted) : 0;
    return rc ? rc : s_event(b, "task.queued/bench-agent");
}

static int s_dispatch(bench_t *b, task_t *task)
{
    task->state = TASK_RUNNING;
    task->attempt = 1;
    task_set_text(&task->worker_id, "bench-w1");
    int rc = b->rows ? store_task_dispatched(b->store, task) : 0;
    return rc ? rc : s_event(b, "task.dispatched/bench-agent");
}

static int s_finish(bench_t *b, task_t *task)
{
    task->state = TASK_DONE;
    int rc = b->rows ? store_task_update(b->store, task, "\x80", 1) : 0;
    return rc ? rc : s_event(b, "task.done/bench-agent");
}

/* One batch step: tasks [k*B, (k+1)*B) are submitted, the batch before is dispatched and
 * the one before that finished. */
static int s_step(bench_t *b, int k, int batch, int tasks)
{
    int rc = store_begin(b->store);
    for (int i = k * batch; rc == 0 && i < (k + 1) * batch && i < tasks; i++)
        rc = s_submit(b, b->tasks[i]);
    for (int i = (k - 1) * batch; rc == 0 && i < k * batch && i < tasks; i++)
        if (i >= 0)
            rc = s_dispatch(b, b->tasks[i]);
    for (int i = (k - 2) * batch; rc == 0 && i < (k - 1) * batch && i < tasks; i++)
        if (i >= 0)
            rc = s_finish(b, b->tasks[i]);
    return rc ? rc : store_commit(b->store);
}

static double s_run(store_sync_t sync, bool rows, int tasks, int batch)
{
    char dir[] = "/tmp/bench-store-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "%s/broker.db", dir);
    bench_t b = {.rows = rows};
    memset(b.event, 'e', sizeof b.event);
    double us = -1;
    if (store_open(path, sync, &b.store) == 0) {
        b.tasks = calloc((size_t)tasks, sizeof *b.tasks);
        for (int i = 0; i < tasks; i++) {
            char id[32];
            snprintf(id, sizeof id, "b-%d", i);
            task_t *task = task_new(id);
            task->specialist = strdup("bench-agent");
            task->title = strdup("benchmark task");
            task->priority = PRIORITY_NORMAL;
            task->order = i + 1;
            task->max_attempts = 3;
            task->timeout_s = 600;
            task->created = task->updated = clock_wall_ms();
            b.tasks[i] = task;
        }
        int64_t started = clock_now_us();
        int rc = 0;
        for (int k = 0; rc == 0 && k * batch < tasks + 2 * batch; k++)
            rc = s_step(&b, k, batch, tasks);
        if (rc == 0)
            us = (double)(clock_now_us() - started) / tasks;
        for (int i = 0; i < tasks; i++)
            task_destroy(&b.tasks[i]);
        free(b.tasks);
        store_close(&b.store);
    }
    char file[80];
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
        unlink(file);
    }
    rmdir(dir);
    return us;
}

int main(int argc, char **argv)
{
    const char *sync_name = "normal";
    int tasks = 200000, batch = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--sync") == 0)
            sync_name = argv[i + 1];
        else if (strcmp(argv[i], "--tasks") == 0)
            tasks = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else
            break;
    }
    int sync = store_sync_parse(sync_name);
    if (sync < 0 || tasks <= 0 || batch <= 0 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_store [--sync full|normal|off] [--tasks N] [--batch B]\n");
        return 2;
    }
    double rows = s_run((store_sync_t)sync, true, tasks, batch);
    double events = s_run((store_sync_t)sync, false, tasks, batch);
    if (rows < 0 || events < 0) {
        fprintf(stderr, "bench_store: the store failed\n");
        return 1;
    }
    printf("sync=%-6s %d tasks, %d per commit: rows + events %.2f us/task, events only %.2f "
           "us/task\n",
           sync_name, tasks, batch, rows, events);
    return 0;
}
