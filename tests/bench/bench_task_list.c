/* bench_task_list: how long `list_tasks` (pan task list) takes with a million tasks stored.
 *
 * It fills a broker database through the broker's own store module (services/broker/
 * store.c) with N tasks of every state, as a long-running system accumulates them, then
 * starts the real cloister-broker on that database and times list_tasks requests for a
 * page of 50 over its control socket (the whole round trip a `pan task list` pays, minus
 * the process start), one figure per kind of filter.
 *
 * usage: bench_task_list [--tasks N] [--requests R] */
#include "clock.h"
#include "client.h"
#include "failure.h"
#include "store.h"
#include "testbroker.h"
#include "testenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tasks written per transaction while filling the store. */
#define FILL_BATCH 20000
/* Milliseconds between two tasks' creation: a million tasks span ~2.8 hours. */
#define CREATED_STEP_MS 10
/* The newest tasks are queued (loaded into the broker's memory at start); the rest ended. */
#define QUEUED_TAIL 1000

/* The state, specialist and issue of task i: 2% dead, 3% failed, 1% cancelled, the rest
 * done; review 40%, test 40%, merge 19.9%, and a rare docs-agent 0.1%; 20 tasks an issue. */
static void s_shape(int i, int tasks, task_t *task, char *issue, size_t size)
{
    int r = i % 100;
    task->state = i >= tasks - QUEUED_TAIL ? TASK_QUEUED
                  : r < 2                  ? TASK_DEAD
                  : r < 5                  ? TASK_FAILED
                  : r < 6                  ? TASK_CANCELLED
                                           : TASK_DONE;
    int s = i % 1000;
    task->specialist = strdup(s == 901 ? "docs-agent"
                              : s < 400 ? "review-agent"
                              : s < 800 ? "test-agent"
                                        : "merge-agent");
    snprintf(issue, size, "ISS-%d", i / 20);
}

static int s_fill(const char *db_path, int tasks)
{
    store_t *store = NULL;
    if (store_open(db_path, STORE_SYNC_OFF, &store) != 0)
        return -1;
    int64_t newest = clock_wall_ms();
    int rc = 0;
    for (int i = 0; rc == 0 && i < tasks; i++) {
        if (i % FILL_BATCH == 0)
            rc = store_begin(store);
        char id[64], issue[64];
        snprintf(id, sizeof id, "bench-%08d", i);
        task_t *task = task_new(id);
        s_shape(i, tasks, task, issue, sizeof issue);
        task->issue = strdup(issue);
        task->title = strdup("a task title of ordinary length, as agents write them");
        task->order = i + 1;
        task->attempt = task->state == TASK_QUEUED ? 0 : 1;
        task->max_attempts = 3;
        task->timeout_s = 600;
        task->created = newest - (int64_t)(tasks - i) * CREATED_STEP_MS;
        task->updated = task->created + 5;
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

typedef struct {
    const char *name;
    const char *state, *specialist, *issue, *before;
    int64_t since_ms;
} query_t;

static int s_compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times `requests` list_tasks of a page of 50; prints p50, p99, max and the page's size. */
static int s_measure(client_t *client, const query_t *q, int requests)
{
    double *ms = calloc((size_t)requests, sizeof *ms);
    size_t page = 0;
    for (int r = 0; r < requests; r++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, MSG_LIST_TASKS);
        wire_put_str(w, FIELD_STATE, q->state);
        wire_put_str(w, FIELD_SPECIALIST, q->specialist);
        wire_put_str(w, FIELD_ISSUE, q->issue);
        wire_put_str(w, FIELD_BEFORE, q->before);
        if (q->since_ms > 0)
            wire_put_int(w, FIELD_CREATED_AFTER, clock_wall_ms() - q->since_ms);
        wire_put_int(w, FIELD_LIMIT, 50);
        wire_msg_t *reply = NULL;
        int64_t start = clock_now_us();
        int rc = client_call(client, w, &reply);
        ms[r] = (double)(clock_now_us() - start) / 1000.0;
        wire_writer_destroy(&w);
        if (rc != 0) {
            fprintf(stderr, "bench: %s: %s\n", q->name, failure_message());
            free(ms);
            return -1;
        }
        const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
        page = data && data->type == MSGPACK_OBJECT_ARRAY ? data->via.array.size : 0;
        wire_msg_destroy(&reply);
    }
    qsort(ms, (size_t)requests, sizeof *ms, s_compare);
    printf("  %-40s p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (%zu tasks a page)\n", q->name,
           ms[requests / 2], ms[(requests * 99) / 100], ms[requests - 1], page);
    free(ms);
    return 0;
}

int main(int argc, char **argv)
{
    int tasks = 1000000, requests = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tasks") == 0 && i + 1 < argc)
            tasks = atoi(argv[++i]);
        else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
            requests = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_task_list [--tasks N] [--requests R]\n");
            return 2;
        }
    }
    if (tasks < 2 * QUEUED_TAIL || requests < 1) {
        fprintf(stderr, "bench: --tasks at least %d, --requests at least 1\n", 2 * QUEUED_TAIL);
        return 2;
    }
    testenv_t *env = testenv_new("bench-list");
    if (env == NULL)
        return 1;
    char db_path[600];
    snprintf(db_path, sizeof db_path, "%s/broker.db", env->home);
    int64_t start = clock_now_ms();
    if (s_fill(db_path, tasks) != 0) {
        fprintf(stderr, "bench: filling the store: %s\n", failure_message());
        return 1;
    }
    printf("store of %d tasks written in %.1f s\n", tasks,
           (double)(clock_now_ms() - start) / 1000.0);
    start = clock_now_ms();
    if (testbroker_start(env, 0, NULL) < 0)
        return 1;
    printf("broker answering %.1f s after its start\n", (double)(clock_now_ms() - start) / 1000.0);

    char middle[64], issue[64];
    snprintf(middle, sizeof middle, "bench-%08d", tasks / 2);
    snprintf(issue, sizeof issue, "ISS-%d", tasks / 40);
    const query_t queries[] = {
        {"newest", NULL, NULL, NULL, NULL, 0},
        {"--state dead", "dead", NULL, NULL, NULL, 0},
        {"--state queued", "queued", NULL, NULL, NULL, 0},
        {"--specialist merge-agent", NULL, "merge-agent", NULL, NULL, 0},
        {"--specialist docs-agent (0.1%)", NULL, "docs-agent", NULL, NULL, 0},
        {"--issue (20 tasks)", NULL, NULL, issue, NULL, 0},
        {"--state failed --specialist test-agent", "failed", "test-agent", NULL, NULL, 0},
        {"--state dead --specialist docs-agent", "dead", "docs-agent", NULL, NULL, 0},
        {"--since 1h", NULL, NULL, NULL, NULL, 3600 * 1000},
        {"--since 1m --state dead", "dead", NULL, NULL, NULL, 60 * 1000},
        {"--before <the middle task>", NULL, NULL, NULL, middle, 0},
    };
    client_t *client = testbroker_client(env);
    printf("list_tasks, a page of 50, %d requests each:\n", requests);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof queries / sizeof queries[0]; i++)
        rc = s_measure(client, &queries[i], requests);
    client_destroy(&client);
    testenv_destroy(&env);
    return rc == 0 ? 0 : 1;
}
