/* Events through pan and common/client against a real broker: `pan events --json`
 * (fields, a finished task's result), --since / --limit / --topic, --follow seeing a later
 * submit and stopping on SIGTERM, a late subscriber replaying what it missed then following
 * without gaps or doubles, and replay paging. */
#include "pan_harness.h"

#include "clock.h"
#include "failure.h"

#include <czmq.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_out[PAN_OUT_SIZE];

/* Plays a worker for one task: hello, take the task, report it done with a result map.
 * Returns true if the broker dispatched a task to it. */
static bool s_work_one_task(testenv_t *env)
{
    char endpoint[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/worker.sock", env->dir);
    zsock_t *pull = zsock_new(ZMQ_PULL);
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 1000);
    CHECK(zsock_bind(pull, "%s", endpoint) == 0);
    CHECK(zsock_connect(push, "%s", env->in_ep) == 0);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_HELLO);
    wire_put_str(writer, FIELD_WORKER, "w-events");
    wire_put_str(writer, FIELD_SPECIALIST, "merge-agent");
    wire_put_str(writer, FIELD_ENDPOINT, endpoint);
    size_t len;
    const void *data = wire_writer_data(writer, &len);
    zmq_send(zsock_resolve(push), data, len, 0);

    bool worked = false;
    zsock_set_rcvtimeo(pull, 5000);
    /* The hello is answered by a ping; the task follows. */
    zframe_t *frame = NULL;
    wire_msg_t *task = NULL;
    while (task == NULL && (frame = zframe_recv(pull)) != NULL) {
        if (wire_decode(zframe_data(frame), zframe_size(frame), &task) != 0 ||
            wire_msg_type(task) != MSG_TASK) {
            wire_msg_destroy(&task);
            zframe_destroy(&frame);
        }
    }
    if (task != NULL) {
        worked = true;
        wire_writer_start(writer, MSG_RESULT);
        wire_put_str(writer, FIELD_WORKER, "w-events");
        wire_put_str(writer, FIELD_TASK, wire_msg_str(task, FIELD_ID, ""));
        wire_put_int(writer, FIELD_ATTEMPT, wire_msg_int(task, FIELD_ATTEMPT, 1));
        wire_put_str(writer, FIELD_OUTCOME, "done");
        wire_open_map(writer, FIELD_RESULT);
        wire_put_key_str(writer, "MERGE_RESULT", "SUCCESS");
        wire_put_key_int(writer, "FILES", 2);
        wire_close(writer);
        data = wire_writer_data(writer, &len);
        zmq_send(zsock_resolve(push), data, len, 0);
    }
    wire_msg_destroy(&task);
    zframe_destroy(&frame);
    wire_writer_destroy(&writer);
    zsock_destroy(&pull);
    zsock_destroy(&push);
    return worked;
}

static bool s_task_done(void *arg)
{
    testenv_t *env = arg;
    if (harness_pan(env, s_out, "task", "show", "ev-done", "--json", NULL) != 0)
        return false;
    return strstr(s_out, "\"state\": \"done\"") != NULL;
}

static void test_events_json(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "submit", "merge-agent", "--id", "ev-done", "--force", NULL),
              0);
    CHECK(s_work_one_task(env));
    CHECK(testenv_wait_until(s_task_done, env, 5000));
    CHECK_INT(harness_pan(env, s_out, "submit", "test-agent", "--workspace", env->dir, "--id", "ev-cancel", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "cancel", "ev-cancel", NULL), 0);

    CHECK_INT(harness_pan(env, s_out, "events", "--json", "--since", "0", NULL), 0);
    int64_t last_seq = 0;
    int lines = 0;
    bool saw_done = false, saw_cancelled = false, saw_dispatched = false;
    for (char *line = strtok(s_out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_t *event = harness_json(line);
        if (event == NULL)
            continue;
        lines++;
        int64_t seq = json_integer_value(json_object_get(event, "seq"));
        CHECK(seq > last_seq);
        last_seq = seq;
        const char *type = json_string_value(json_object_get(event, "type"));
        CHECK(type != NULL);
        if (type != NULL && strncmp(type, "task.", 5) == 0) {
            CHECK(json_is_string(json_object_get(event, "task")));
            CHECK(json_is_string(json_object_get(event, "specialist")));
        }
        if (type != NULL && strcmp(type, "task.done") == 0) {
            saw_done = true;
            json_t *result = json_object_get(event, "result");
            CHECK_STR(json_string_value(json_object_get(result, "MERGE_RESULT")), "SUCCESS");
            CHECK_INT(json_integer_value(json_object_get(result, "FILES")), 2);
            CHECK_STR(json_string_value(json_object_get(event, "task")), "ev-done");
        }
        if (type != NULL && strcmp(type, "task.dispatched") == 0)
            saw_dispatched = json_is_string(json_object_get(event, "worker"));
        if (type != NULL && strcmp(type, "task.cancelled") == 0)
            saw_cancelled = true;
        json_decref(event);
    }
    CHECK(lines >= 5);
    CHECK(saw_done);
    CHECK(saw_dispatched);
    CHECK(saw_cancelled);

    /* --since skips, --limit stops, --topic filters. */
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "2", "--limit", "2", NULL), 0);
    CHECK(strncmp(s_out, "#3 ", 3) == 0);
    CHECK(strstr(s_out, "\n#4 ") != NULL && strstr(s_out, "#5 ") == NULL);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--json", "--topic", "task.cancelled/", NULL), 0);
    CHECK(strstr(s_out, "\"type\":\"task.cancelled\"") != NULL);
    CHECK(strstr(s_out, "task.queued") == NULL);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "x", NULL), 2);
}

static const char *s_follow_log;

static bool s_follow_saw_later(void *arg)
{
    (void)arg;
    char *log = testenv_read_file(s_follow_log);
    bool seen = log != NULL && strstr(log, "\"task\":\"later-1\"") != NULL;
    free(log);
    return seen;
}

static bool s_follow_saw_later_2(void *arg)
{
    (void)arg;
    char *log = testenv_read_file(s_follow_log);
    bool seen = log != NULL && strstr(log, "\"task\":\"later-2\"") != NULL;
    free(log);
    return seen;
}

static bool s_follow_started(void *arg)
{
    (void)arg;
    char *log = testenv_read_file(s_follow_log);
    bool seen = log != NULL && strstr(log, "\"task\":\"ev-cancel\"") != NULL;
    free(log);
    return seen;
}

static void test_follow(testenv_t *env)
{
    char log_path[400];
    snprintf(log_path, sizeof log_path, "%s/follow.log", env->dir);
    s_follow_log = log_path;
    char *argv[] = {(char *)testenv_bin("pan"), "events", "--follow", "--since", "0", "--json",
                    NULL};
    pid_t pid = testenv_spawn(env, "follow", argv);
    CHECK(pid > 0);
    CHECK(testenv_wait_until(s_follow_started, NULL, 5000));
    CHECK_INT(harness_pan(env, s_out, "submit", "review-agent", "--workspace", env->dir, "--id", "later-1", NULL), 0);
    CHECK(testenv_wait_until(s_follow_saw_later, NULL, 5000));
    testenv_signal(pid, SIGTERM);
    int status = testenv_wait(env, pid, 3000);
    CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Replay and live stream together: every seq once, in order. */
    char *log = testenv_read_file(log_path);
    int64_t last_seq = 0;
    int later = 0;
    for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        json_t *event = harness_json(line);
        int64_t seq = json_integer_value(json_object_get(event, "seq"));
        CHECK(seq == last_seq + 1);
        last_seq = seq;
        const char *task = json_string_value(json_object_get(event, "task"));
        if (task != NULL && strcmp(task, "later-1") == 0)
            later++;
        json_decref(event);
    }
    CHECK_INT(later, 1);
    free(log);

    /* --follow alone starts at the present, as tail -f does: nothing from before. */
    snprintf(log_path, sizeof log_path, "%s/follow-now.log", env->dir);
    char *now_argv[] = {(char *)testenv_bin("pan"), "events", "--follow", "--json", NULL};
    pid = testenv_spawn(env, "follow-now", now_argv);
    testenv_sleep_ms(1000); /* it has asked where "now" is */
    CHECK_INT(harness_pan(env, s_out, "submit", "review-agent", "--workspace", env->dir, "--id", "later-2", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "cancel", "later-2", NULL), 0);
    s_follow_log = log_path;
    CHECK(testenv_wait_until(s_follow_saw_later_2, NULL, 5000));
    testenv_signal(pid, SIGTERM);
    CHECK(testenv_wait(env, pid, 3000) >= 0);
    log = testenv_read_file(log_path);
    CHECK(log != NULL && strstr(log, "\"task\":\"later-2\"") != NULL);
    CHECK(log != NULL && strstr(log, "later-1") == NULL && strstr(log, "ev-cancel") == NULL);
    free(log);

    /* --task keeps one task's events. */
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--task", "later-1", "--json",
                          NULL),
              0);
    int lines = 0;
    for (char *line = strtok(s_out, "\n"); line; line = strtok(NULL, "\n")) {
        CHECK(strstr(line, "\"task\":\"later-1\"") != NULL);
        lines++;
    }
    CHECK(lines >= 1);
}

/* ---- common/client: a late subscriber ---- */

/* Set by SIGALRM: a test that waits for an event that never comes fails instead of
 * hanging. */
static volatile sig_atomic_t s_give_up;

static void s_on_alarm(int signal_number)
{
    (void)signal_number;
    s_give_up = 1;
}

typedef struct {
    testenv_t *env;
    client_t *submitter;
    int64_t seqs[64];
    char tasks[64][32];
    int count;
} collected_t;

static int s_collect(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    collected_t *got = arg;
    if (got->count < 64) {
        got->seqs[got->count] = wire_msg_int(event, FIELD_SEQ, -1);
        snprintf(got->tasks[got->count], sizeof got->tasks[0], "%s",
                 wire_msg_str(event, FIELD_TASK, ""));
        got->count++;
    }
    const char *task = wire_msg_str(event, FIELD_TASK, "");
    if (strcmp(task, "late-c") == 0) {
        /* The replay is over: what happens now must come through the live stream. */
        submit_t submit = {.id = "late-d", .specialist = "test-agent"};
        wire_msg_t *reply = NULL;
        CHECK_INT(client_submit(got->submitter, &submit, NULL, 0, &reply), 0);
        wire_msg_destroy(&reply);
    }
    return strcmp(task, "late-d") == 0 || got->count >= 64;
}

static void test_late_subscriber(testenv_t *env)
{
    client_t *control = client_new(env->control_ep, 3000);
    CHECK(control != NULL);
    const char *ids[] = {"late-a", "late-b", "late-c"};
    char since_text[32];
    CHECK_INT(harness_pan(env, s_out, "status", "--json", NULL), 0);
    json_t *stats = harness_json(s_out);
    int64_t since = json_integer_value(json_object_get(stats, "last_seq"));
    json_decref(stats);
    snprintf(since_text, sizeof since_text, "%lld", (long long)since);
    for (int i = 0; i < 3; i++) {
        submit_t task = {.id = ids[i], .specialist = "test-agent", .priority = "low"};
        wire_msg_t *reply = NULL;
        CHECK_INT(client_submit(control, &task, NULL, 0, &reply), 0);
        CHECK_STR(wire_msg_str(reply, FIELD_TYPE, "reply"), "reply");
        wire_msg_destroy(&reply);
    }
    /* Subscribed only now: a-c come from the replay, d from the live stream. */
    client_events_t *events = client_events_new(env->events_ep, "task.queued/");
    CHECK(events != NULL);
    collected_t got = {.env = env, .submitter = client_new(env->control_ep, 3000)};
    signal(SIGALRM, s_on_alarm);
    alarm(10);
    int rc = client_events_run(events, control, since, true, &s_give_up, s_collect, &got);
    alarm(0);
    CHECK(!s_give_up);
    CHECK_INT(rc, 0);
    CHECK_INT(got.count, 4);
    const char *expected[] = {"late-a", "late-b", "late-c", "late-d"};
    for (int i = 0; i < got.count && i < 4; i++) {
        CHECK_STR(got.tasks[i], expected[i]);
        if (i > 0)
            CHECK(got.seqs[i] > got.seqs[i - 1]);
    }
    CHECK_INT(client_events_last_seq(events), got.seqs[got.count - 1]);
    client_events_destroy(&events);
    CHECK(events == NULL);
    client_destroy(&got.submitter);
    client_destroy(&control);
}

/* ---- replay paging: more events than one replay page ---- */

typedef struct {
    int64_t last;
    int count;
    bool ordered;
} counted_t;

static int s_count(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    counted_t *counted = arg;
    int64_t seq = wire_msg_int(event, FIELD_SEQ, -1);
    CHECK_STR(wire_msg_str(event, FIELD_EVENT, ""), "task.queued");
    if (seq <= counted->last)
        counted->ordered = false;
    counted->last = seq;
    counted->count++;
    return 0;
}

typedef struct {
    testenv_t *env;
    int64_t want;
} want_seq_t;

static bool s_seq_reached(void *arg)
{
    want_seq_t *want = arg;
    if (harness_pan(want->env, s_out, "status", "--json", NULL) != 0)
        return false;
    json_t *stats = json_loads(s_out, 0, NULL);
    int64_t last = json_integer_value(json_object_get(stats, "last_seq"));
    json_decref(stats);
    return last >= want->want;
}

static void test_replay_paging(testenv_t *env)
{
    const int total = CLIENT_REPLAY_PAGE * 2 + 50;
    client_t *control = client_new(env->control_ep, 3000);
    CHECK_INT(harness_pan(env, s_out, "status", "--json", NULL), 0);
    json_t *stats = harness_json(s_out);
    int64_t since = json_integer_value(json_object_get(stats, "last_seq"));
    json_decref(stats);

    /* Fire-and-forget submits to `in`, as agents do. */
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 2000);
    CHECK(zsock_connect(push, "%s", env->in_ep) == 0);
    wire_writer_t *writer = wire_writer_new();
    for (int i = 0; i < total; i++) {
        char id[32];
        snprintf(id, sizeof id, "bulk-%d", i);
        submit_t task = {.id = id, .specialist = "review-agent", .priority = "low"};
        submit_encode(writer, &task);
        size_t len;
        const void *data = wire_writer_data(writer, &len);
        CHECK(zmq_send(zsock_resolve(push), data, len, 0) == (int)len);
    }
    wire_writer_destroy(&writer);
    want_seq_t want = {env, since + total};
    CHECK(testenv_wait_until(s_seq_reached, &want, 10000));
    zsock_destroy(&push);

    client_events_t *events = client_events_new(NULL, "");
    counted_t counted = {.last = since, .ordered = true};
    CHECK_INT(client_events_run(events, control, since, false, NULL, s_count, &counted), 0);
    CHECK_INT(counted.count, total);
    CHECK(counted.ordered);
    /* Following needs an events endpoint. */
    CHECK(client_events_run(events, control, -1, true, NULL, s_count, &counted) != 0);
    client_events_destroy(&events);

    /* All of them wait in the queue, after the normal-priority task already there. */
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "review-agent", "--json", NULL), 0);
    json_t *queue = harness_json(s_out);
    json_t *items = json_object_get(queue, "items");
    CHECK_INT(json_array_size(items), total + 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(items, 1), "id")), "bulk-0");
    json_decref(queue);
    client_destroy(&control);
}

static void test_client_timeout(testenv_t *env)
{
    char endpoint[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/silent.sock", env->dir);
    /* A ROUTER that never answers: the request must end at the deadline, and the next
     * request on the same client must work the same way (the socket was replaced). */
    zsock_t *silent = zsock_new(ZMQ_ROUTER);
    CHECK(zsock_bind(silent, "%s", endpoint) == 0);
    client_t *client = client_new(endpoint, 300);
    for (int round = 0; round < 2; round++) {
        wire_writer_t *writer = wire_writer_new();
        wire_writer_start(writer, MSG_STATS);
        wire_msg_t *reply = NULL;
        int64_t start = clock_now_ms();
        CHECK_INT(client_call(client, writer, &reply), FAILURE_TIMEOUT);
        int64_t elapsed = clock_now_ms() - start;
        CHECK(elapsed >= 250 && elapsed < 2000);
        CHECK(reply == NULL);
        CHECK(strstr(failure_message(), "within 300ms") != NULL);
        wire_writer_destroy(&writer);
    }
    client_destroy(&client);
    CHECK(client == NULL);
    zsock_destroy(&silent);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-events");
    if (env == NULL)
        return 1;
    test_client_timeout(env);
    if (harness_start_broker(env) > 0) {
        test_events_json(env);
        test_follow(env);
        test_late_subscriber(env);
        test_replay_paging(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_events");
}
