/* The broker's task flow, with workers played by the test (fakeworker): priority decided
 * at dispatch time, group serialisation, chained tasks exactly once, leases, lost workers,
 * retries to dead and back, cancel, and a broker restart while a worker holds a task. */
#include "check.h"
#include "failure.h"
#include "msgjson.h"
#include "fakeworker.h"
#include "testbroker.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define HEARTBEAT_MS 200

static testenv_t *s_env;
static client_t *s_client;

static const char *s_task_id(wire_msg_t *task)
{
    return task ? wire_msg_str(task, FIELD_ID, "") : "(none)";
}

/* Waits until the broker counts `n` workers of `specialist` (their hellos are processed). */
static void s_wait_workers(const char *specialist, int64_t n)
{
    int64_t workers = 0;
    for (int i = 0; i < 250 && workers < n; i++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, MSG_LIST_SPECIALISTS);
        wire_msg_t *reply = NULL;
        if (client_call(s_client, w, &reply) == 0) {
            const msgpack_object *list = wire_msg_object(reply, FIELD_DATA);
            for (uint32_t j = 0; list && j < list->via.array.size; j++) {
                char name[64];
                const msgpack_object *item = &list->via.array.ptr[j];
                const msgpack_object *count = wire_map_get(item, FIELD_WORKERS);
                if (strcmp(wire_obj_str(wire_map_get(item, FIELD_NAME), name, sizeof name, ""),
                           specialist) == 0 && count != NULL)
                    workers = (int64_t)count->via.u64;
            }
        }
        wire_msg_destroy(&reply);
        wire_writer_destroy(&w);
        if (workers < n)
            testenv_sleep_ms(20);
    }
    CHECK(workers >= n);
}

/* Waits until task `id` is in `state` (up to 5 s); returns whether it got there. */
static bool s_wait_state(const char *id, const char *state)
{
    char now[32] = "";
    for (int i = 0; i < 250 && strcmp(now, state) != 0; i++) {
        testbroker_state(s_client, id, now, sizeof now);
        if (strcmp(now, state) != 0)
            testenv_sleep_ms(20);
    }
    return strcmp(now, state) == 0;
}

/* Waits up to timeout_ms for a task to reach `waiter` (idle), while `holder` keeps saying it
 * runs `held`, so the broker does not take the holder for lost meanwhile. */
static wire_msg_t *s_expect_while_holding(fakeworker_t *waiter, int timeout_ms,
                                          fakeworker_t *holder, const char *held, int attempt)
{
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        wire_msg_t *task = fakeworker_expect(waiter, MSG_TASK, 100, NULL, 0);
        if (task != NULL)
            return task;
        fakeworker_heartbeat(holder, held, attempt);
    }
    return NULL;
}

/* A new worker `worker_id` of `specialist`, announced, holding the just-submitted task
 * `task_id` (attempt 1). The caller owns the worker. */
static fakeworker_t *s_worker_holding(const char *specialist, const char *worker_id,
                                      const char *task_id)
{
    fakeworker_t *worker = fakeworker_new(s_env->dir, s_env->in_ep, specialist, worker_id);
    fakeworker_hello(worker, NULL, 0);
    s_wait_workers(specialist, 1);
    CHECK_INT(testbroker_submit(s_client, task_id, specialist, NULL, NULL), 0);
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), task_id);
    wire_msg_destroy(&task);
    return worker;
}

/* Waits for a task, checks its id, reports done, and waits for the ack. */
static void s_run_expecting(fakeworker_t *worker, const char *expected_id)
{
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), expected_id);
    if (task != NULL) {
        int attempt = (int)wire_msg_int(task, FIELD_ATTEMPT, 0);
        fakeworker_result(worker, expected_id, attempt, "done", NULL, NULL, 0);
        wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
        CHECK(ack != NULL);
        wire_msg_destroy(&ack);
    }
    wire_msg_destroy(&task);
}

static void test_priority_at_dispatch(void)
{
    fakeworker_t *worker = fakeworker_new(s_env->dir, s_env->in_ep, "test-agent", "prio-w1");
    fakeworker_hello(worker, NULL, 0);
    CHECK_INT(testbroker_submit(s_client, "p-first", "test-agent", "low", NULL), 0);
    wire_msg_t *first = fakeworker_expect(worker, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(first), "p-first");
    /* While the only worker is busy: three normal tasks, then an urgent one. */
    CHECK_INT(testbroker_submit(s_client, "p-n1", "test-agent", "normal", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "p-n2", "test-agent", NULL, NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "p-h1", "test-agent", "high", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "p-u1", "test-agent", "urgent", NULL), 0);
    char queue[512];
    CHECK_STR(testbroker_queue(s_client, "test-agent", queue, sizeof queue), "p-u1 p-h1 p-n1 p-n2");
    fakeworker_result(worker, "p-first", 1, "done", NULL, NULL, 0);
    wire_msg_destroy(&first);
    s_run_expecting(worker, "p-u1");
    s_run_expecting(worker, "p-h1");
    s_run_expecting(worker, "p-n1");
    s_run_expecting(worker, "p-n2");
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

/* A string field of task `id` as show_task gives it, copied into buf ("" when absent). */
static const char *s_task_str(const char *id, field_t key, char *buf, size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    buf[0] = '\0';
    if (client_call(s_client, w, &reply) == 0)
        wire_obj_str(wire_map_get(wire_msg_object(reply, FIELD_DATA), key), buf, size, "");
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return buf;
}

/* A set_priority request: its reply's code ("" when ok). */
static const char *s_set_priority(const char *id, const char *priority, char *code, size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SET_PRIORITY);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_PRIORITY, priority);
    wire_msg_t *reply = NULL;
    int rc = client_call(s_client, w, &reply);
    snprintf(code, size, "%s", rc == 0 ? "" : failure_name(rc));
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return code;
}

/* The ids of a list_queue page (offset, limit), space-separated. */
static const char *s_queue_page(const char *specialist, int64_t offset, int64_t limit, char *buf,
                                size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_QUEUE);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_int(w, FIELD_OFFSET, offset);
    wire_put_int(w, FIELD_LIMIT, limit);
    wire_msg_t *reply = NULL;
    buf[0] = '\0';
    if (client_call(s_client, w, &reply) == 0) {
        const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
        for (uint32_t i = 0; data && i < data->via.array.size; i++) {
            char id[64];
            wire_obj_str(wire_map_get(&data->via.array.ptr[i], FIELD_ID), id, sizeof id, "?");
            size_t used = strlen(buf);
            snprintf(buf + used, size - used, "%s%s", used ? " " : "", id);
        }
    } else {
        snprintf(buf, size, "error: %s", failure_message());
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return buf;
}

/* A count of `specialist` in list_specialists (-1 when it is not listed). */
static int64_t s_specialist_count(const char *specialist, field_t key)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_SPECIALISTS);
    wire_msg_t *reply = NULL;
    int64_t count = -1;
    if (client_call(s_client, w, &reply) == 0) {
        const msgpack_object *list = wire_msg_object(reply, FIELD_DATA);
        for (uint32_t i = 0; list && i < list->via.array.size; i++) {
            char name[64];
            const msgpack_object *item = &list->via.array.ptr[i];
            const msgpack_object *value = wire_map_get(item, key);
            if (strcmp(wire_obj_str(wire_map_get(item, FIELD_NAME), name, sizeof name, ""),
                       specialist) == 0 && value != NULL)
                count = (int64_t)value->via.u64;
        }
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return count;
}

/* "Move to urgent": a queued task changes priority and takes its submit-order place among
 * that priority's tasks, is dispatched in that order, and keeps it over a broker restart.
 * list_queue pages through the queue in dispatch order. */
static void test_set_priority_and_queue_pages(pid_t *broker)
{
    char queue[512], code[32];
    /* No worker: everything stays queued. */
    CHECK_INT(testbroker_submit(s_client, "m-n1", "move-agent", "normal", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "m-n2", "move-agent", "normal", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "m-u1", "move-agent", "urgent", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "m-n3", "move-agent", "normal", NULL), 0);
    CHECK_INT(testbroker_submit(s_client, "m-u2", "move-agent", "urgent", NULL), 0);
    CHECK_STR(testbroker_queue(s_client, "move-agent", queue, sizeof queue),
              "m-u1 m-u2 m-n1 m-n2 m-n3");
    CHECK_STR(s_set_priority("m-n3", "urgent", code, sizeof code), "");
    /* Among the urgent ones by submit order: after m-u1, before m-u2. */
    CHECK_STR(testbroker_queue(s_client, "move-agent", queue, sizeof queue),
              "m-u1 m-n3 m-u2 m-n1 m-n2");
    CHECK_STR(s_task_str("m-n3", FIELD_PRIORITY, queue, sizeof queue), "urgent");
    CHECK_STR(s_set_priority("m-n3", "urgent", code, sizeof code), ""); /* no change */
    CHECK_STR(s_set_priority("m-u1", "low", code, sizeof code), "");
    CHECK_STR(s_queue_page("move-agent", 0, 2, queue, sizeof queue), "m-n3 m-u2");
    CHECK_STR(s_queue_page("move-agent", 2, 2, queue, sizeof queue), "m-n1 m-n2");
    CHECK_STR(s_queue_page("move-agent", 4, 2, queue, sizeof queue), "m-u1");
    CHECK_STR(s_queue_page("move-agent", 9, 2, queue, sizeof queue), "");
    CHECK(strstr(s_queue_page("move-agent", -1, 2, queue, sizeof queue), "offset") != NULL);
    CHECK(strstr(s_queue_page("move-agent", 0, 0, queue, sizeof queue), "limit") != NULL);
    CHECK_STR(s_set_priority("m-n1", "asap", code, sizeof code), "invalid");
    CHECK_STR(s_set_priority("no-such-task", "urgent", code, sizeof code), "not_found");
    CHECK_STR(s_set_priority("p-first", "urgent", code, sizeof code), "state"); /* done */
    /* Stored: a restarted broker has the same queue, and the counts of what ended. */
    int64_t done = s_specialist_count("test-agent", FIELD_DONE);
    int64_t dead = s_specialist_count("test-agent", FIELD_DEAD);
    CHECK(done > 0 && dead >= 0);
    testenv_signal(*broker, SIGKILL);
    testenv_wait(s_env, *broker, 3000);
    *broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(*broker > 0);
    CHECK_STR(testbroker_queue(s_client, "move-agent", queue, sizeof queue),
              "m-n3 m-u2 m-n1 m-n2 m-u1");
    CHECK_INT(s_specialist_count("test-agent", FIELD_DONE), done);
    CHECK_INT(s_specialist_count("test-agent", FIELD_DEAD), dead);
    /* And a worker gets them in that order. */
    fakeworker_t *worker = fakeworker_new(s_env->dir, s_env->in_ep, "move-agent", "move-w1");
    fakeworker_hello(worker, NULL, 0);
    s_run_expecting(worker, "m-n3");
    s_run_expecting(worker, "m-u2");
    s_run_expecting(worker, "m-n1");
    s_run_expecting(worker, "m-n2");
    s_run_expecting(worker, "m-u1");
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

/* Submits `id` for `specialist` with a title, an issue and payload.filesChanged. */
static void s_submit_with_files(const char *id, const char *specialist, const char *file)
{
    wire_writer_t *payload = wire_writer_new();
    wire_writer_start_map(payload);
    wire_open_array(payload, FIELD_FILES_CHANGED);
    wire_elem_str(payload, file);
    wire_close(payload);
    size_t len;
    const void *raw = wire_writer_data(payload, &len);
    char title[64];
    snprintf(title, sizeof title, "title of %s", id);
    submit_t task = {.id = id, .specialist = specialist, .title = title, .issue = "ISS-7",
                          .payload = raw, .payload_len = len};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &task, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&payload);
}

/* A dispatched task's context lists the other running tasks (id, title, issue, specialist,
 * files), never the task itself, and drops a task once it finished. */
static void test_active_context(void)
{
    fakeworker_t *one = fakeworker_new(s_env->dir, s_env->in_ep, "ctx-agent", "ctx-w1");
    fakeworker_t *two = fakeworker_new(s_env->dir, s_env->in_ep, "ctx-agent", "ctx-w2");
    fakeworker_hello(one, NULL, 0);
    s_wait_workers("ctx-agent", 1);
    s_submit_with_files("ctx-a", "ctx-agent", "src/a.c");
    wire_msg_t *a = fakeworker_expect(one, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(a), "ctx-a");
    const msgpack_object *active = wire_map_get(wire_msg_object(a, FIELD_CONTEXT), FIELD_ACTIVE);
    CHECK(active != NULL && active->type == MSGPACK_OBJECT_ARRAY);
    for (uint32_t i = 0; active && i < active->via.array.size; i++) {
        char id[64];
        CHECK(strcmp(wire_obj_str(wire_map_get(&active->via.array.ptr[i], FIELD_ID), id, sizeof id, ""),
                     "ctx-a") != 0);
    }

    fakeworker_hello(two, NULL, 0);
    s_wait_workers("ctx-agent", 2);
    s_submit_with_files("ctx-b", "ctx-agent", "src/b.c");
    wire_msg_t *b = fakeworker_expect(two, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(b), "ctx-b");
    active = wire_map_get(wire_msg_object(b, FIELD_CONTEXT), FIELD_ACTIVE);
    const msgpack_object *entry = NULL;
    for (uint32_t i = 0; active && i < active->via.array.size; i++) {
        char id[64];
        const msgpack_object *item = &active->via.array.ptr[i];
        const char *item_id = wire_obj_str(wire_map_get(item, FIELD_ID), id, sizeof id, "");
        CHECK(strcmp(item_id, "ctx-b") != 0);
        if (strcmp(item_id, "ctx-a") == 0)
            entry = item;
    }
    CHECK(entry != NULL);
    if (entry != NULL) {
        char text[64];
        CHECK_STR(wire_obj_str(wire_map_get(entry, FIELD_TITLE), text, sizeof text, ""), "title of ctx-a");
        CHECK_STR(wire_obj_str(wire_map_get(entry, FIELD_ISSUE), text, sizeof text, ""), "ISS-7");
        CHECK_STR(wire_obj_str(wire_map_get(entry, FIELD_SPECIALIST), text, sizeof text, ""), "ctx-agent");
        const msgpack_object *files = wire_map_get(entry, FIELD_FILES);
        CHECK(files != NULL && files->type == MSGPACK_OBJECT_ARRAY && files->via.array.size == 1);
        if (files != NULL && files->type == MSGPACK_OBJECT_ARRAY && files->via.array.size == 1)
            CHECK_STR(wire_obj_str(&files->via.array.ptr[0], text, sizeof text, ""), "src/a.c");
    }

    /* ctx-a finishes; the next task on its worker sees ctx-b but no longer ctx-a. */
    fakeworker_result(one, "ctx-a", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(one, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    s_submit_with_files("ctx-c", "ctx-agent", "src/c.c");
    wire_msg_t *c = fakeworker_expect(one, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(c), "ctx-c");
    active = wire_map_get(wire_msg_object(c, FIELD_CONTEXT), FIELD_ACTIVE);
    bool saw_b = false;
    for (uint32_t i = 0; active && i < active->via.array.size; i++) {
        char id[64];
        const char *item_id =
            wire_obj_str(wire_map_get(&active->via.array.ptr[i], FIELD_ID), id, sizeof id, "");
        CHECK(strcmp(item_id, "ctx-a") != 0 && strcmp(item_id, "ctx-c") != 0);
        saw_b = saw_b || strcmp(item_id, "ctx-b") == 0;
    }
    CHECK(saw_b);
    fakeworker_result(one, "ctx-c", 1, "done", NULL, NULL, 0);
    fakeworker_result(two, "ctx-b", 1, "done", NULL, NULL, 0);
    CHECK(s_wait_state("ctx-b", "done") && s_wait_state("ctx-c", "done"));
    wire_msg_destroy(&a);
    wire_msg_destroy(&b);
    wire_msg_destroy(&c);
    wire_msg_destroy(&ack);
    fakeworker_bye(one);
    fakeworker_bye(two);
    fakeworker_destroy(&one);
    fakeworker_destroy(&two);
}

static void test_group_serialisation(void)
{
    fakeworker_t *w1 = fakeworker_new(s_env->dir, s_env->in_ep, "merge-agent", "group-w1");
    fakeworker_t *w2 = fakeworker_new(s_env->dir, s_env->in_ep, "merge-agent", "group-w2");
    fakeworker_hello(w1, NULL, 0);
    CHECK_INT(testbroker_submit(s_client, "g-1", "merge-agent", NULL, "merge:/repo:main"), 0);
    wire_msg_t *t1 = fakeworker_expect(w1, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(t1), "g-1");
    CHECK_INT(testbroker_submit(s_client, "g-2", "merge-agent", "urgent", "merge:/repo:main"), 0);
    CHECK_INT(testbroker_submit(s_client, "other", "merge-agent", "low", "merge:/other:main"), 0);
    fakeworker_hello(w2, NULL, 0);
    /* g-2 is more urgent but its group is in flight: w2 gets the other repository's merge. */
    wire_msg_t *t2 = s_expect_while_holding(w2, 3000, w1, "g-1", 1);
    CHECK_STR(s_task_id(t2), "other");
    fakeworker_result(w2, "other", 1, "done", NULL, NULL, 0);
    wire_msg_t *none = s_expect_while_holding(w2, 600, w1, "g-1", 1);
    CHECK(none == NULL); /* g-2 must wait for g-1 */
    fakeworker_heartbeat(w1, "g-1", 1);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "g-2", state, sizeof state), "queued");
    fakeworker_result(w1, "g-1", 1, "done", NULL, NULL, 0);
    wire_msg_t *t3 = fakeworker_expect(w2, MSG_TASK, 3000, NULL, 0);
    if (t3 == NULL)
        t3 = fakeworker_expect(w1, MSG_TASK, 1000, NULL, 0);
    CHECK_STR(s_task_id(t3), "g-2");
    if (t3 != NULL)
        fakeworker_result(w2, "g-2", 1, "done", NULL, NULL, 0);
    wire_msg_destroy(&t1);
    wire_msg_destroy(&t2);
    wire_msg_destroy(&t3);
    fakeworker_bye(w1);
    fakeworker_bye(w2);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&w2);
}

static void test_chained_exactly_once(void)
{
    fakeworker_t *reviewer = fakeworker_new(s_env->dir, s_env->in_ep, "review-agent", "chain-w1");
    fakeworker_hello(reviewer, NULL, 0);
    CHECK_INT(testbroker_submit(s_client, "review-7", "review-agent", NULL, NULL), 0);
    wire_msg_t *task = fakeworker_expect(reviewer, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "review-7");
    /* next = [ {id: merge-7, specialist: merge-agent, priority: high} ] */
    wire_writer_t *w = wire_writer_new();
    wire_writer_start_array(w);
    wire_open_map_key(w, NULL);
    wire_put_str(w, FIELD_ID, "merge-7");
    wire_put_str(w, FIELD_SPECIALIST, "merge-agent");
    wire_put_str(w, FIELD_PRIORITY, "high");
    wire_close(w);
    size_t next_len;
    const void *next = wire_writer_data(w, &next_len);
    /* The result is sent three times, as a worker resending until acked would. */
    for (int i = 0; i < 3; i++)
        fakeworker_result(reviewer, "review-7", 1, "done", NULL, next, next_len);
    for (int i = 0; i < 3; i++) {
        wire_msg_t *ack = fakeworker_expect(reviewer, MSG_ACK, 3000, NULL, 0);
        CHECK(ack != NULL);
        wire_msg_destroy(&ack);
    }
    char queue[256], state[32];
    CHECK_STR(testbroker_queue(s_client, "merge-agent", queue, sizeof queue), "merge-7");
    CHECK_STR(testbroker_state(s_client, "review-7", state, sizeof state), "done");
    wire_writer_destroy(&w);
    wire_msg_destroy(&task);
    fakeworker_bye(reviewer);
    fakeworker_destroy(&reviewer);
    /* Leave the merge queue empty for the next scenarios. */
    wire_writer_t *cancel = wire_writer_new();
    wire_writer_start(cancel, MSG_CANCEL_TASK);
    wire_put_str(cancel, FIELD_ID, "merge-7");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(s_client, cancel, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&cancel);
}

/* A string field of the first stored event on `topic` ("" when there is none). */
static const char *s_first_event_str(const char *topic, field_t key)
{
    static char value[128];
    value[0] = '\0';
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, 0);
    wire_put_str(w, FIELD_TOPIC, topic);
    wire_msg_t *reply = NULL;
    /* A replay that failed must not read as "no such event" (the trim test checks that). */
    CHECK_INT(client_call(s_client, w, &reply), 0);
    const msgpack_object *events = wire_msg_object(reply, FIELD_DATA);
    if (events != NULL && events->type == MSGPACK_OBJECT_ARRAY && events->via.array.size > 0)
        wire_obj_str(wire_map_get(&events->via.array.ptr[0], key), value, sizeof value, "");
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return value;
}

static void test_lost_worker_and_lease(void)
{
    fakeworker_t *w1 = fakeworker_new(s_env->dir, s_env->in_ep, "lease-agent", "lease-w1");
    fakeworker_t *w2 = fakeworker_new(s_env->dir, s_env->in_ep, "lease-agent", "lease-w2");
    fakeworker_hello(w1, NULL, 0);
    s_wait_workers("lease-agent", 1);
    CHECK_INT(testbroker_submit(s_client, "lost-1", "lease-agent", NULL, NULL), 0);
    wire_msg_t *task = fakeworker_expect(w1, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "lost-1");
    wire_msg_destroy(&task);
    /* w1 goes silent (as if killed); w2 arrives and gets the task as attempt 2. */
    fakeworker_hello(w2, NULL, 0);
    task = fakeworker_expect(w2, MSG_TASK, 5000, NULL, 0);
    CHECK_STR(s_task_id(task), "lost-1");
    CHECK_INT(task ? wire_msg_int(task, FIELD_ATTEMPT, 0) : 0, 2);
    wire_msg_destroy(&task);
    /* The event of the requeue names the worker the task came back from. */
    CHECK_STR(s_first_event_str("task.retry/lease-agent", FIELD_WORKER), "lease-w1");
    fakeworker_result(w2, "lost-1", 2, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(w2, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);

    /* Lease: a one-second timeout while w2 keeps saying it is working on it. */
    submit_t leased = {.id = "lease-1", .specialist = "lease-agent", .timeout_s = 1};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &leased, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    task = fakeworker_expect(w2, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "lease-1");
    wire_msg_destroy(&task);
    /* The lease is the timeout plus a grace (5 s + 3 heartbeats) for the worker's report. */
    wire_msg_t *cancel = fakeworker_expect(w2, MSG_CANCEL, 9000, "lease-1", 1);
    CHECK(cancel != NULL);
    wire_msg_destroy(&cancel);
    /* Once it reports idle it gets the task again, after the backoff. */
    task = fakeworker_expect(w2, MSG_TASK, 5000, NULL, 0);
    CHECK_STR(s_task_id(task), "lease-1");
    CHECK_INT(task ? wire_msg_int(task, FIELD_ATTEMPT, 0) : 0, 2);
    if (task)
        fakeworker_result(w2, "lease-1", 2, "done", NULL, NULL, 0);
    wire_msg_destroy(&task);
    ack = fakeworker_expect(w2, MSG_ACK, 3000, NULL, 0);
    wire_msg_destroy(&ack);
    fakeworker_bye(w2);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&w2);
}

static void test_retry_to_dead_and_back(void)
{
    fakeworker_t *worker = fakeworker_new(s_env->dir, s_env->in_ep, "flaky-agent", "flaky-w1");
    fakeworker_hello(worker, NULL, 0);
    s_wait_workers("flaky-agent", 1);
    submit_t flaky = {.id = "flaky-1", .specialist = "flaky-agent", .max_attempts = 2,
                           .issue = "PAN-9"};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &flaky, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    for (int attempt = 1; attempt <= 2; attempt++) {
        wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 5000, NULL, 0);
        CHECK_STR(s_task_id(task), "flaky-1");
        if (attempt == 2 && task != NULL) {
            /* The second attempt carries the first one as prior context. */
            const msgpack_object *prior = wire_map_get(wire_msg_object(task, FIELD_CONTEXT), FIELD_PRIOR);
            CHECK(prior != NULL && prior->type == MSGPACK_OBJECT_ARRAY && prior->via.array.size == 1);
        }
        wire_msg_destroy(&task);
        fakeworker_result(worker, "flaky-1", attempt, "retry", "network hiccup", NULL, 0);
        wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
        wire_msg_destroy(&ack);
    }
    char state[32];
    CHECK_STR(testbroker_state(s_client, "flaky-1", state, sizeof state), "dead");
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_RETRY_TASK);
    wire_put_str(w, FIELD_ID, "flaky-1");
    CHECK_INT(client_call(s_client, w, &reply), 0);
    wire_msg_destroy(&reply);
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "flaky-1");
    CHECK_INT(task ? wire_msg_int(task, FIELD_ATTEMPT, 0) : 0, 3);
    wire_msg_destroy(&task);

    /* Cancel while it runs: the worker is told, the task is cancelled. */
    wire_writer_start(w, MSG_CANCEL_TASK);
    wire_put_str(w, FIELD_ID, "flaky-1");
    CHECK_INT(client_call(s_client, w, &reply), 0);
    wire_msg_destroy(&reply);
    wire_msg_t *cancel = fakeworker_expect(worker, MSG_CANCEL, 3000, "flaky-1", 3);
    CHECK(cancel != NULL);
    wire_msg_destroy(&cancel);
    CHECK_STR(testbroker_state(s_client, "flaky-1", state, sizeof state), "cancelled");
    /* A second cancel is refused with the reason. */
    CHECK(client_call(s_client, w, &reply) != 0);
    wire_writer_destroy(&w);
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

static void test_restart_keeps_running_task(pid_t *broker)
{
    fakeworker_t *worker = s_worker_holding("restart-agent", "restart-w1", "r-1");
    testenv_signal(*broker, SIGKILL);
    testenv_wait(s_env, *broker, 3000);
    *broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(*broker > 0);
    /* The worker notices and says hello again, holding its task. */
    fakeworker_hello(worker, "r-1", 1);
    testenv_sleep_ms(300);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "r-1", state, sizeof state), "running");
    fakeworker_result(worker, "r-1", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    CHECK_STR(testbroker_state(s_client, "r-1", state, sizeof state), "done");
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}


/* An integer field of a control reply's data: `type` with an optional task `id`. */
static int64_t s_reply_int(msg_type_t type, const char *id, field_t key)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    int64_t value = -1;
    if (client_call(s_client, w, &reply) == 0) {
        const msgpack_object *obj = wire_map_get(wire_msg_object(reply, FIELD_DATA), key);
        if (obj != NULL && obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            value = (int64_t)obj->via.u64;
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return value;
}

static int64_t s_stat(field_t key)
{
    return s_reply_int(MSG_STATS, NULL, key);
}

static int64_t s_task_int(const char *id, field_t key)
{
    return s_reply_int(MSG_SHOW_TASK, id, key);
}

/* A task going dead while another runs must not disturb the other (the running list and
 * its lease); a retry result sent twice counts once and queues the task once. */
static void test_dead_and_duplicate_retry(void)
{
    /* w1 alone takes dup-keep; then w2 arrives for dup-once. */
    fakeworker_t *w1 = s_worker_holding("dup-agent", "dup-w1", "dup-keep");
    fakeworker_t *w2 = fakeworker_new(s_env->dir, s_env->in_ep, "dup-agent", "dup-w2");
    fakeworker_heartbeat(w1, "dup-keep", 1);
    fakeworker_hello(w2, NULL, 0);
    s_wait_workers("dup-agent", 2);
    submit_t once = {.id = "dup-once", .specialist = "dup-agent", .max_attempts = 1};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &once, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    wire_msg_t *t2 = fakeworker_expect(w2, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(t2), "dup-once");
    fakeworker_result(w2, "dup-once", 1, "retry", "flaky", NULL, 0);
    wire_msg_t *ack = fakeworker_expect(w2, MSG_ACK, 3000, NULL, 0);
    wire_msg_destroy(&ack);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "dup-once", state, sizeof state), "dead");
    fakeworker_heartbeat(w1, "dup-keep", 1);
    CHECK_INT(s_stat(FIELD_RUNNING), 1);
    CHECK_STR(testbroker_state(s_client, "dup-keep", state, sizeof state), "running");

    /* The same retry twice (a resend crossing its ack): one failure, queued once. */
    submit_t twice = {.id = "dup-twice", .specialist = "dup-agent", .max_attempts = 5};
    CHECK_INT(client_submit(s_client, &twice, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    wire_msg_t *t3 = fakeworker_expect(w2, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(t3), "dup-twice");
    fakeworker_result(w2, "dup-twice", 1, "retry", "flaky", NULL, 0);
    fakeworker_result(w2, "dup-twice", 1, "retry", "flaky", NULL, 0);
    for (int i = 0; i < 2; i++) {
        ack = fakeworker_expect(w2, MSG_ACK, 3000, NULL, 0);
        CHECK(ack != NULL);
        wire_msg_destroy(&ack);
    }
    CHECK_INT(s_task_int("dup-twice", FIELD_FAILURES), 1);
    char queue[256];
    CHECK_STR(testbroker_queue(s_client, "dup-agent", queue, sizeof queue), "dup-twice");
    fakeworker_result(w1, "dup-keep", 1, "done", NULL, NULL, 0);
    wire_msg_destroy(&t2);
    wire_msg_destroy(&t3);
    fakeworker_bye(w1);
    fakeworker_bye(w2);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&w2);
    wire_writer_t *cancel = wire_writer_new();
    wire_writer_start(cancel, MSG_CANCEL_TASK);
    wire_put_str(cancel, FIELD_ID, "dup-twice");
    CHECK_INT(client_call(s_client, cancel, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&cancel);
}

/* A worker that never takes what it is sent (it only says it is idle): each dispatch counts
 * as a failure, so the task ends dead instead of bouncing for ever. */
static void test_undelivered_ends_dead(void)
{
    fakeworker_t *deaf = fakeworker_new(s_env->dir, s_env->in_ep, "deaf-agent", "deaf-w1");
    fakeworker_hello(deaf, NULL, 0);
    s_wait_workers("deaf-agent", 1);
    submit_t task = {.id = "deaf-1", .specialist = "deaf-agent", .max_attempts = 2};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &task, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    char state[32] = "";
    for (int i = 0; i < 100 && strcmp(state, "dead") != 0; i++) {
        fakeworker_heartbeat(deaf, NULL, 0);
        testenv_sleep_ms(50);
        testbroker_state(s_client, "deaf-1", state, sizeof state);
    }
    CHECK_STR(state, "dead");
    fakeworker_bye(deaf);
    fakeworker_destroy(&deaf);
}

/* A worker whose heartbeats echo the pings it got: while it has not received a ping sent
 * after a task, the task may still be on its way (TCP retransmitting under loss), so it is
 * neither requeued nor counted as a failure, however long the worker says it is idle; once
 * it has received a later ping and still not taken the task, the task counts a failure. */
static void test_dispatch_in_flight_waits(void)
{
    fakeworker_t *w = fakeworker_new(s_env->dir, s_env->in_ep, "flight-agent", "flight-w1");
    fakeworker_hello(w, NULL, 0);
    wire_msg_t *ping = fakeworker_expect(w, MSG_PING, 3000, NULL, 0);
    CHECK(ping != NULL);
    int64_t before = ping ? wire_msg_int(ping, FIELD_PING_SEQ, -1) : -1;
    wire_msg_destroy(&ping);
    CHECK(before > 0);
    submit_t submit = {.id = "flight-1", .specialist = "flight-agent", .max_attempts = 2};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(s_client, &submit, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    CHECK(s_wait_state("flight-1", "running"));
    /* The task message waits unread, as if still on the wire, for five intervals. */
    for (int waited = 0; waited < 5 * HEARTBEAT_MS; waited += 50) {
        fakeworker_heartbeat_echo(w, before);
        testenv_sleep_ms(50);
    }
    CHECK_INT(s_task_int("flight-1", FIELD_FAILURES), 0);
    CHECK_INT(s_task_int("flight-1", FIELD_ATTEMPT), 1);
    wire_msg_t *task = fakeworker_take(w, MSG_TASK);
    CHECK_STR(s_task_id(task), "flight-1");
    wire_msg_destroy(&task);
    fakeworker_result(w, "flight-1", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(w, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "flight-1", state, sizeof state), "done");
    CHECK_INT(s_task_int("flight-1", FIELD_FAILURES), 0);

    /* Received (a later ping came after it) and not taken: a failure, so it can die. */
    submit.id = "flight-2";
    CHECK_INT(client_submit(s_client, &submit, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    task = fakeworker_expect(w, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "flight-2");
    wire_msg_destroy(&task);
    ping = fakeworker_expect(w, MSG_PING, 3000, NULL, 0);
    CHECK(ping != NULL);
    fakeworker_heartbeat_echo(w, ping ? wire_msg_int(ping, FIELD_PING_SEQ, 0) : 0);
    wire_msg_destroy(&ping);
    for (int i = 0; i < 100 && s_task_int("flight-2", FIELD_FAILURES) == 0; i++)
        testenv_sleep_ms(20);
    CHECK_INT(s_task_int("flight-2", FIELD_FAILURES), 1);
    fakeworker_bye(w);
    fakeworker_destroy(&w);
}

/* A worker that says it works on something else than what it was given: the given task
 * goes back to the queue and the worker is told to stop the other. Meanwhile a group
 * stays locked while a cancelled worker has not stopped. */
static void test_heartbeat_mismatch_and_group_while_draining(void)
{
    fakeworker_t *w1 = s_worker_holding("odd-agent", "odd-w1", "odd-1");
    wire_msg_t *task = NULL;
    fakeworker_heartbeat(w1, "something-else", 4);
    wire_msg_t *cancel = fakeworker_expect(w1, MSG_CANCEL, 3000, "something-else", 4);
    CHECK_STR(cancel ? wire_msg_str(cancel, FIELD_TASK, "") : "", "something-else");
    wire_msg_destroy(&cancel);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "odd-1", state, sizeof state), "queued");
    /* Once idle it gets odd-1 back. */
    task = fakeworker_expect(w1, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "odd-1");
    wire_msg_destroy(&task);
    fakeworker_result(w1, "odd-1", 2, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(w1, MSG_ACK, 3000, NULL, 0);
    wire_msg_destroy(&ack);

    fakeworker_t *w2 = fakeworker_new(s_env->dir, s_env->in_ep, "odd-agent", "odd-w2");
    CHECK_INT(testbroker_submit(s_client, "grp-1", "odd-agent", NULL, "merge:/r:main"), 0);
    task = fakeworker_expect(w1, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "grp-1");
    wire_msg_destroy(&task);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_CANCEL_TASK);
    wire_put_str(w, FIELD_ID, "grp-1");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(s_client, w, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    CHECK_INT(testbroker_submit(s_client, "grp-2", "odd-agent", NULL, "merge:/r:main"), 0);
    fakeworker_hello(w2, NULL, 0);
    /* w1 has not stopped grp-1 yet (it still reports it): grp-2 must wait. */
    cancel = fakeworker_expect(w1, MSG_CANCEL, 3000, "grp-1", 1);
    CHECK(cancel != NULL);
    wire_msg_destroy(&cancel);
    task = NULL;
    for (int i = 0; i < 8 && task == NULL; i++) {
        fakeworker_heartbeat(w1, "grp-1", 1);
        task = fakeworker_expect(w2, MSG_TASK, 100, NULL, 0);
    }
    CHECK(task == NULL);
    wire_msg_destroy(&task);
    fakeworker_heartbeat(w1, NULL, 0); /* stopped */
    task = fakeworker_expect(w2, MSG_TASK, 3000, NULL, 0);
    if (task == NULL)
        task = fakeworker_expect(w1, MSG_TASK, 1000, NULL, 0);
    CHECK_STR(s_task_id(task), "grp-2");
    wire_msg_destroy(&task);
    fakeworker_bye(w1);
    fakeworker_bye(w2);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&w2);
}

/* Progress of the running attempt becomes an event; a release gives the task back at once
 * without counting a failure, and the worker gets it again once it is idle. */
static void test_progress_and_release(void)
{
    fakeworker_t *worker = s_worker_holding("rel-agent", "rel-w1", "rel-1");
    wire_msg_t *task = NULL;
    fakeworker_progress(worker, "rel-1", 1, "halfway there");
    fakeworker_progress(worker, "rel-1", 7, "from an attempt that is not running");
    fakeworker_release(worker, "rel-1", 1);
    CHECK(s_wait_state("rel-1", "queued"));
    CHECK_INT(s_task_int("rel-1", FIELD_FAILURES), 0);
    task = fakeworker_expect(worker, MSG_TASK, 3000, NULL, 0);
    CHECK_STR(s_task_id(task), "rel-1");
    CHECK_INT(task ? wire_msg_int(task, FIELD_ATTEMPT, 0) : 0, 2);
    wire_msg_destroy(&task);
    fakeworker_result(worker, "rel-1", 2, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
    wire_msg_destroy(&ack);

    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, 0);
    wire_put_str(w, FIELD_TOPIC, "task.progress/rel-agent");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(s_client, w, &reply), 0);
    const msgpack_object *events = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    CHECK(events != NULL && events->type == MSGPACK_OBJECT_ARRAY && events->via.array.size == 1);
    if (events != NULL && events->type == MSGPACK_OBJECT_ARRAY && events->via.array.size == 1) {
        char text[64];
        CHECK_STR(wire_obj_str(wire_map_get(&events->via.array.ptr[0], FIELD_TEXT), text, sizeof text, ""),
                  "halfway there");
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

/* A worker that floods progress (5,000 messages at once) gets at most
 * BROKER_PROGRESS_PER_SECOND events a second stored and published; the next one published
 * says how many were folded into it. */
static void test_progress_flood_is_coalesced(void)
{
    fakeworker_t *worker = s_worker_holding("flood-agent", "flood-w1", "flood-1");
    for (int i = 0; i < 5000; i++)
        fakeworker_progress(worker, "flood-1", 1, "y");
    for (int i = 0; i < 11; i++) { /* into the next window, heartbeating */
        fakeworker_heartbeat(worker, "flood-1", 1);
        testenv_sleep_ms(100);
    }
    fakeworker_progress(worker, "flood-1", 1, "after the flood");
    fakeworker_result(worker, "flood-1", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 5000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);

    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, 0);
    wire_put_str(w, FIELD_TOPIC, "task.progress/flood-agent");
    wire_put_int(w, FIELD_LIMIT, 1000);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(s_client, w, &reply), 0);
    const msgpack_object *events = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    CHECK(events != NULL && events->type == MSGPACK_OBJECT_ARRAY);
    uint32_t n = events && events->type == MSGPACK_OBJECT_ARRAY ? events->via.array.size : 0;
    /* The flood took at most a few windows to send: a few times the rate, not 5,000. */
    CHECK(n > 0 && n <= 4 * 20 + 1);
    int64_t folded = 0;
    char text[64] = "";
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *c = wire_map_get(&events->via.array.ptr[i], FIELD_COALESCED);
        if (c != NULL && c->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
            folded += (int64_t)c->via.u64;
        wire_obj_str(wire_map_get(&events->via.array.ptr[i], FIELD_TEXT), text, sizeof text, "");
    }
    CHECK_STR(text, "after the flood");
    /* Every message is an event or counted in one. */
    CHECK_INT(folded + n, 5001);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

/* A specialist declared in cloister.toml is known, with its own timeout and attempts. */
static void test_config_defaults(void)
{
    CHECK_INT(testbroker_submit(s_client, "conf-1", "conf-agent", NULL, NULL), 0);
    CHECK_INT(s_task_int("conf-1", FIELD_TIMEOUT_S), 42);
    CHECK_INT(s_task_int("conf-1", FIELD_MAX_ATTEMPTS), 7);
    CHECK_INT(testbroker_submit(s_client, "conf-2", "merge-agent", NULL, NULL), 0);
    CHECK_INT(s_task_int("conf-2", FIELD_TIMEOUT_S), 900);
    /* `_` and `-` in a specialist's name are one, as in cloister.toml's table names. */
    CHECK_INT(testbroker_submit(s_client, "conf-3", "snake_agent", NULL, NULL), 0);
    CHECK_INT(s_task_int("conf-3", FIELD_TIMEOUT_S), 43);
    CHECK_INT(testbroker_submit(s_client, "conf-4", "snake-agent", NULL, NULL), 0);
    char queue[64];
    CHECK_STR(testbroker_queue(s_client, "snake_agent", queue, sizeof queue), "conf-3 conf-4");
    wire_writer_t *w = wire_writer_new();
    wire_msg_t *reply = NULL;
    const char *ids[] = {"conf-1", "conf-2", "conf-3", "conf-4"};
    for (int i = 0; i < 4; i++) {
        wire_writer_start(w, MSG_CANCEL_TASK);
        wire_put_str(w, FIELD_ID, ids[i]);
        CHECK_INT(client_call(s_client, w, &reply), 0);
        wire_msg_destroy(&reply);
    }
    wire_writer_destroy(&w);
}

/* `type` {id} through control; the reply's task, as a JSON object (caller owns). */
static json_t *s_control_task(msg_type_t type, const char *id)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(s_client, w, &reply), 0);
    json_t *task = msgjson_from_object(wire_msg_object(reply, FIELD_DATA));
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    CHECK(task != NULL);
    return task;
}

/* A cancel's reply is the task as show_task gives it afterwards: same state, error and
 * updated time. */
static void s_cancel_agrees(const char *id)
{
    json_t *cancelled = s_control_task(MSG_CANCEL_TASK, id);
    json_t *shown = s_control_task(MSG_SHOW_TASK, id);
    CHECK_STR(json_string_value(json_object_get(cancelled, "state")), "cancelled");
    CHECK_STR(json_string_value(json_object_get(shown, "state")), "cancelled");
    CHECK_STR(json_string_value(json_object_get(cancelled, "error")), "cancelled by a user");
    CHECK_STR(json_string_value(json_object_get(shown, "error")), "cancelled by a user");
    CHECK_INT(json_integer_value(json_object_get(cancelled, "updated")),
              json_integer_value(json_object_get(shown, "updated")));
    json_decref(cancelled);
    json_decref(shown);
}

static void s_expect_ack(fakeworker_t *worker)
{
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
}

/* A result counts only for the attempt running now, from its worker: one from a worker
 * the task was never given to, for an attempt never dispatched, or resent after the task
 * was retried, is acknowledged and changes nothing. */
static void test_result_only_for_running_attempt(void)
{
    fakeworker_t *w1 = s_worker_holding("res-agent", "res-w1", "res-hold");
    CHECK_INT(testbroker_submit(s_client, "res-queued", "res-agent", NULL, NULL), 0);
    fakeworker_t *stranger = fakeworker_new(s_env->dir, s_env->in_ep, "res-other", "res-x");
    fakeworker_hello(stranger, NULL, 0);
    s_wait_workers("res-other", 1);
    fakeworker_result(stranger, "res-queued", 1, "done", NULL, NULL, 0);
    s_expect_ack(stranger);
    fakeworker_result(stranger, "res-hold", 1, "failed", "not mine", NULL, 0);
    s_expect_ack(stranger);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "res-queued", state, sizeof state), "queued");
    CHECK_STR(testbroker_state(s_client, "res-hold", state, sizeof state), "running");

    /* Its own worker fails it; it is retried; the failed result comes again (a resend that
     * crossed its ack): the retried task is not failed a second time. */
    fakeworker_result(w1, "res-hold", 1, "failed", "broken", NULL, 0);
    s_expect_ack(w1);
    CHECK_STR(testbroker_state(s_client, "res-hold", state, sizeof state), "failed");
    json_decref(s_control_task(MSG_RETRY_TASK, "res-hold"));
    fakeworker_result(w1, "res-hold", 1, "failed", "broken", NULL, 0);
    s_expect_ack(w1);
    CHECK(strcmp(testbroker_state(s_client, "res-hold", state, sizeof state), "failed") != 0);
    /* The worker runs the retried task (attempt 2) and then the queued one. */
    for (int i = 0; i < 2; i++) {
        wire_msg_t *task = fakeworker_expect(w1, MSG_TASK, 3000, NULL, 0);
        if (task != NULL) {
            fakeworker_result(w1, s_task_id(task), (int)wire_msg_int(task, FIELD_ATTEMPT, 0), "done",
                              NULL, NULL, 0);
            s_expect_ack(w1);
        }
        wire_msg_destroy(&task);
    }
    CHECK_STR(testbroker_state(s_client, "res-hold", state, sizeof state), "done");
    CHECK_INT(s_task_int("res-hold", FIELD_ATTEMPT), 2);
    CHECK_STR(testbroker_state(s_client, "res-queued", state, sizeof state), "done");
    fakeworker_bye(w1);
    fakeworker_bye(stranger);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&stranger);
}

/* A worker still stopping a cancelled task of a group when the broker is killed: after the
 * restart, the group's next task waits until that worker says it has stopped. */
static void test_restart_holds_draining_group(pid_t *broker)
{
    const char *group = "merge:/held:main";
    fakeworker_t *w1 = fakeworker_new(s_env->dir, s_env->in_ep, "hold-agent", "hold-w1");
    fakeworker_hello(w1, NULL, 0);
    s_wait_workers("hold-agent", 1);
    CHECK_INT(testbroker_submit(s_client, "hold-a", "hold-agent", NULL, group), 0);
    wire_msg_t *task = fakeworker_expect(w1, MSG_TASK, 5000, NULL, 0);
    CHECK_STR(s_task_id(task), "hold-a");
    wire_msg_destroy(&task);
    s_cancel_agrees("hold-a");
    wire_msg_t *cancel = fakeworker_expect(w1, MSG_CANCEL, 3000, "hold-a", 1);
    CHECK(cancel != NULL);
    wire_msg_destroy(&cancel);

    testenv_signal(*broker, SIGKILL);
    testenv_wait(s_env, *broker, 3000);
    *broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(*broker > 0);
    fakeworker_t *w2 = fakeworker_new(s_env->dir, s_env->in_ep, "hold-agent", "hold-w2");
    fakeworker_hello(w2, NULL, 0);
    CHECK_INT(testbroker_submit(s_client, "hold-b", "hold-agent", NULL, group), 0);
    /* w1 comes back still stopping hold-a: it is told again, and holds the group. */
    fakeworker_hello(w1, "hold-a", 1);
    task = s_expect_while_holding(w2, 2000, w1, "hold-a", 1);
    CHECK(task == NULL);
    wire_msg_destroy(&task);
    /* Once w1 says it is idle, hold-b runs (on either worker). */
    for (int i = 0; i < 40 && task == NULL; i++) {
        task = fakeworker_expect(w1, MSG_TASK, 50, NULL, 0);
        if (task == NULL)
            task = fakeworker_expect(w2, MSG_TASK, 50, NULL, 0);
    }
    CHECK_STR(s_task_id(task), "hold-b");
    wire_msg_destroy(&task);
    s_cancel_agrees("hold-b");
    fakeworker_bye(w1);
    fakeworker_bye(w2);
    fakeworker_destroy(&w1);
    fakeworker_destroy(&w2);
}

/* A running task whose only record of its attempt is its task.dispatched event (its row
 * still says queued: see broker.c, "dispatches") gets its row written before that event is
 * trimmed. Without it the restarted broker would take the task for queued at attempt 0 and
 * hand attempt 1 out a second time. */
static void test_restart_after_dispatch_event_trimmed(pid_t *broker, const char *config)
{
    CHECK(testenv_write_file(config, "[broker]\nevent_retention = 10\n"
                                     "[specialists.trim-nobody]\ntimeout = 60\n"
                                     "[security]\nrequire_review = false\n") == 0);
    testenv_signal(*broker, SIGKILL);
    testenv_wait(s_env, *broker, 3000);
    *broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(*broker > 0);
    fakeworker_t *worker = s_worker_holding("trim-agent", "trim-w1", "trim-1");
    /* Over 1,024 events past the retention make the broker trim (nobody serves the
     * specialist, so every submit is one task.queued event). */
    for (int i = 0; i < 1200; i++) {
        char id[32];
        snprintf(id, sizeof id, "trim-filler-%d", i);
        CHECK_INT(testbroker_submit(s_client, id, "trim-nobody", NULL, NULL), 0);
        if (i % 10 == 0) /* it must not be taken for lost meanwhile */
            fakeworker_heartbeat(worker, "trim-1", 1);
    }
    fakeworker_heartbeat(worker, "trim-1", 1);
    testenv_sleep_ms(100);
    CHECK_STR(s_first_event_str("task.dispatched/trim-agent", FIELD_TASK), "");

    testenv_signal(*broker, SIGKILL);
    testenv_wait(s_env, *broker, 3000);
    *broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(*broker > 0);
    fakeworker_hello(worker, "trim-1", 1);
    /* Its own attempt: neither cancelled nor handed out again. (Waiting without answering
     * the broker's pings, as a worker busy with its task would.) */
    testenv_sleep_ms(300);
    wire_msg_t *again = fakeworker_take(worker, MSG_TASK);
    CHECK(again == NULL);
    wire_msg_destroy(&again);
    wire_msg_t *cancel = fakeworker_take(worker, MSG_CANCEL);
    CHECK(cancel == NULL);
    wire_msg_destroy(&cancel);
    char state[32];
    CHECK_STR(testbroker_state(s_client, "trim-1", state, sizeof state), "running");
    CHECK_INT(s_task_int("trim-1", FIELD_ATTEMPT), 1);
    fakeworker_result(worker, "trim-1", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 3000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    CHECK_STR(testbroker_state(s_client, "trim-1", state, sizeof state), "done");
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

int main(void)
{
    s_env = testenv_new("broker-flow");
    if (s_env == NULL)
        return 1;
    char config[512];
    snprintf(config, sizeof config, "%s/cloister.toml", s_env->home);
    CHECK(testenv_write_file(config, "[specialists.conf-agent]\ntimeout = 42\nmax_attempts = 7\n"
                                      "[specialists.snake_agent]\ntimeout = 43\n"
                                      "[specialists.move-agent]\n"
                                      "[security]\nrequire_review = false\n") == 0);
    pid_t broker = testbroker_start(s_env, HEARTBEAT_MS, "full");
    CHECK(broker > 0);
    s_client = testbroker_client(s_env);
    if (broker > 0) {
        test_config_defaults();
        test_priority_at_dispatch();
        test_active_context();
        test_group_serialisation();
        test_chained_exactly_once();
        /* Custom specialists exist once a worker announced them. */
        test_lost_worker_and_lease();
        test_retry_to_dead_and_back();
        test_dead_and_duplicate_retry();
        test_progress_and_release();
    test_progress_flood_is_coalesced();
        test_undelivered_ends_dead();
        test_dispatch_in_flight_waits();
        test_heartbeat_mismatch_and_group_while_draining();
        test_result_only_for_running_attempt();
        test_set_priority_and_queue_pages(&broker);
        test_restart_keeps_running_task(&broker);
        test_restart_holds_draining_group(&broker);
        test_restart_after_dispatch_event_trimmed(&broker, config);
    }
    client_destroy(&s_client);
    testenv_destroy(&s_env);
    return check_exit_code("test_broker_flow");
}
