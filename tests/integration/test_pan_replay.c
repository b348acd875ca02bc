/* Replay through pan and common/client against a real broker:
 * - when the broker cuts a replay page to stay under its 512 KiB it says so
 *   (`truncated`), and the client pages on, so `pan events` shows every event and `pan
 *   approve <issue>` sees the newest review, not an older approval on the first page; a
 *   replay that cannot go on makes pan approve refuse;
 * - a stop flag (Ctrl-C) ends a replay that is not followed;
 * - --since past the newest event is warned about (and still followed when asked);
 * - a replay `limit` below 1 is refused, and one above the 10,000-event page cap gets a page
 *   of at most 10,000 (and 512 KiB) marked `truncated`; paging on gets every event. */
#include "pan_harness.h"
#include "testgit.h"

#include "clock.h"
#include "failure.h"

#include <czmq.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_out[PAN_OUT_SIZE];

/* A result of this size goes into its task.done event (under the broker's 1 MiB cap), and
 * five such events do not fit in one replay reply. */
#define BIG_RESULT_BYTES (900 * 1024)
#define REVIEWS 5

/* ---- a worker played by the test: big results ---- */

typedef struct {
    zsock_t *pull, *push;
    wire_writer_t *writer;
    char *big;
} big_worker_t;

static void s_send(big_worker_t *worker)
{
    size_t len;
    const void *data = wire_writer_data(worker->writer, &len);
    CHECK(zmq_send(zsock_resolve(worker->push), data, len, 0) == (int)len);
}

/* Says hello as worker "w-big" of `specialist`. */
static void s_worker_start(big_worker_t *worker, testenv_t *env, const char *specialist)
{
    char endpoint[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/w-big.sock", env->dir);
    worker->pull = zsock_new(ZMQ_PULL);
    worker->push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(worker->push, 2000);
    CHECK(zsock_bind(worker->pull, "%s", endpoint) == 0);
    CHECK(zsock_connect(worker->push, "%s", env->in_ep) == 0);
    worker->writer = wire_writer_new();
    worker->big = malloc(BIG_RESULT_BYTES);
    memset(worker->big, 'x', BIG_RESULT_BYTES);
    wire_writer_start(worker->writer, MSG_HELLO);
    wire_put_str(worker->writer, FIELD_WORKER, "w-big");
    wire_put_str(worker->writer, FIELD_SPECIALIST, specialist);
    wire_put_str(worker->writer, FIELD_ENDPOINT, endpoint);
    s_send(worker);
}

static void s_worker_stop(big_worker_t *worker)
{
    wire_writer_start(worker->writer, MSG_BYE);
    wire_put_str(worker->writer, FIELD_WORKER, "w-big");
    s_send(worker);
    zsock_destroy(&worker->pull);
    zsock_destroy(&worker->push);
    wire_writer_destroy(&worker->writer);
    free(worker->big);
}

/* Takes `count` tasks, answering each at once with a done result holding the big text and
 * REVIEW_RESULT: APPROVED, except for the task `changes_id` (CHANGES_REQUESTED).
 * Heartbeats while it waits. Returns how many tasks it finished. */
static int s_worker_run(big_worker_t *worker, int count, const char *changes_id)
{
    int done = 0;
    int64_t deadline = clock_now_ms() + 20000;
    while (done < count && clock_now_ms() < deadline) {
        wire_writer_start(worker->writer, MSG_HEARTBEAT);
        wire_put_str(worker->writer, FIELD_WORKER, "w-big");
        s_send(worker);
        zmq_pollitem_t item = {zsock_resolve(worker->pull), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 200) <= 0)
            continue;
        zframe_t *frame = zframe_recv(worker->pull);
        wire_msg_t *task = NULL;
        if (frame != NULL && wire_decode(zframe_data(frame), zframe_size(frame), &task) == 0 &&
            wire_msg_type(task) == MSG_TASK) {
            const char *id = wire_msg_str(task, FIELD_ID, "");
            wire_writer_start(worker->writer, MSG_RESULT);
            wire_put_str(worker->writer, FIELD_WORKER, "w-big");
            wire_put_str(worker->writer, FIELD_TASK, id);
            wire_put_int(worker->writer, FIELD_ATTEMPT, wire_msg_int(task, FIELD_ATTEMPT, 1));
            wire_put_str(worker->writer, FIELD_OUTCOME, "done");
            wire_open_map(worker->writer, FIELD_RESULT);
            wire_put_str(worker->writer, FIELD_REVIEW_RESULT,
                         strcmp(id, changes_id) == 0 ? "CHANGES_REQUESTED" : "APPROVED");
            wire_put_key_strn(worker->writer, "BIG", worker->big, BIG_RESULT_BYTES);
            wire_close(worker->writer);
            s_send(worker);
            done++;
        }
        wire_msg_destroy(&task);
        zframe_destroy(&frame);
    }
    return done;
}

/* ---- helpers ---- */

static int64_t s_last_seq(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "status", "--json", NULL), 0);
    json_t *stats = harness_json(s_out);
    int64_t last = json_integer_value(json_object_get(stats, "last_seq"));
    json_decref(stats);
    return last;
}

typedef struct {
    testenv_t *env;
    int64_t seq;
} seq_wanted_t;

static bool s_seq_reached(void *arg)
{
    seq_wanted_t *want = arg;
    return s_last_seq(want->env) >= want->seq;
}

typedef struct {
    testenv_t *env;
    const char *id;
} task_ref_t;

static bool s_task_done(void *arg)
{
    task_ref_t *ref = arg;
    if (harness_pan(ref->env, s_out, "task", "show", ref->id, "--json", NULL) != 0)
        return false;
    return strstr(s_out, "\"state\": \"done\"") != NULL;
}

/* Runs `sh -c script` with pan's path as $0 (the environment's endpoints are inherited);
 * stdout and stderr into s_out. Returns the exit code. */
static int s_shell(testenv_t *env, const char *script)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, (char *)testenv_bin("pan"), NULL};
    return testenv_run(env, argv, s_out, sizeof s_out, 20000);
}

static int s_count_lines(const char *text)
{
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    return lines;
}

typedef struct {
    int count;
    char last_task[64];
} reviews_seen_t;

static int s_on_review(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    reviews_seen_t *seen = arg;
    seen->count++;
    snprintf(seen->last_task, sizeof seen->last_task, "%s", wire_msg_str(event, FIELD_TASK, ""));
    return 0;
}

/* Four approving reviews of PAN-9, then one asking for changes, each with a ~900 KB
 * result: the first replay page holds four of them and is cut before the fifth. */
static void test_big_reviews(testenv_t *env)
{
    int64_t since = s_last_seq(env);
    /* pan submit checks the branch is in the workspace's repository. */
    char repo[600], git_home[600];
    snprintf(repo, sizeof repo, "%s/repo", env->dir);
    snprintf(git_home, sizeof git_home, "%s/userhome", env->dir);
    testgit_env(git_home);
    CHECK_INT(testgit_run(env->dir, "init", "-q", "-b", "main", repo, NULL), 0);
    testgit_commit(repo, "README", "x\n", "init");
    CHECK_INT(testgit_run(repo, "branch", "feat/pan-9", NULL), 0);
    char ids[REVIEWS][16];
    for (int i = 0; i < REVIEWS; i++) {
        snprintf(ids[i], sizeof ids[i], "rv-%d", i + 1);
        CHECK_INT(harness_pan(env, s_out, "submit", "review-agent", "--id", ids[i], "--issue",
                              "PAN-9", "--workspace", repo, "--branch", "feat/pan-9", NULL),
                  0);
    }
    big_worker_t worker = {0};
    s_worker_start(&worker, env, "review-agent");
    CHECK_INT(s_worker_run(&worker, REVIEWS, ids[REVIEWS - 1]), REVIEWS);
    task_ref_t last = {env, ids[REVIEWS - 1]};
    CHECK(testenv_wait_until(s_task_done, &last, 10000));
    s_worker_stop(&worker);

    /* The broker marks the cut page. */
    client_t *control = client_new(env->control_ep, 5000);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_REPLAY);
    wire_put_int(writer, FIELD_SINCE, since);
    wire_put_str(writer, FIELD_TOPIC, "task.done/review-agent");
    wire_put_int(writer, FIELD_LIMIT, CLIENT_REPLAY_PAGE);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(control, writer, &reply), 0);
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    CHECK(data != NULL && data->type == MSGPACK_OBJECT_ARRAY);
    CHECK(data != NULL && data->via.array.size > 0 && data->via.array.size < REVIEWS);
    CHECK(wire_msg_bool(reply, FIELD_TRUNCATED, false));
    wire_msg_destroy(&reply);
    wire_writer_destroy(&writer);

    /* The client pages on past the cut page. */
    client_events_t *events = client_events_new(NULL, "task.done/review-agent");
    reviews_seen_t seen = {0};
    CHECK_INT(client_events_run(events, control, since, false, NULL, s_on_review, &seen), 0);
    CHECK_INT(seen.count, REVIEWS);
    CHECK_STR(seen.last_task, ids[REVIEWS - 1]);
    client_events_destroy(&events);
    client_destroy(&control);

    /* pan events shows all of them (each line cut short: they are ~1 MB each). */
    char script[256];
    snprintf(script, sizeof script,
             "\"$0\" events --json --since %lld --topic task.done/review-agent | cut -c1-200",
             (long long)since);
    CHECK_INT(s_shell(env, script), 0);
    CHECK_INT(s_count_lines(s_out), REVIEWS);
    CHECK(strstr(s_out, "\"task\":\"rv-5\"") != NULL);

    /* The newest review of PAN-9 asks for changes: nothing is approved. */
    CHECK_INT(harness_pan_all(env, s_out, "approve", "PAN-9", NULL), 6); /* gate_blocked */
    CHECK(strstr(s_out, "review rv-5 blocked the merge gate (REVIEW_RESULT: CHANGES_REQUESTED)") !=
          NULL);
    CHECK_INT(harness_pan_all(env, s_out, "task", "show", "merge-rv-4", NULL), 1);
}

/* ---- a broker that cuts a replay page without any event in it ---- */

/* Answers one request on `router`: show_task is not_found, replay is an empty page marked
 * truncated, anything else ok. */
static void s_fake_broker_answer(zsock_t *router)
{
    zmsg_t *request = zmsg_recv(router);
    if (request == NULL)
        return;
    zframe_t *identity = zmsg_pop(request);
    zframe_t *empty = zmsg_pop(request);
    zframe_t *body = zmsg_pop(request);
    wire_msg_t *msg = NULL;
    int type = -1;
    if (body != NULL && wire_decode(zframe_data(body), zframe_size(body), &msg) == 0)
        type = (int)wire_msg_type(msg);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLY);
    if (type == MSG_SHOW_TASK) {
        wire_put_bool(w, FIELD_OK, false);
        wire_put_str(w, FIELD_CODE, "not_found");
        wire_put_str(w, FIELD_ERROR, "no such task");
    } else {
        wire_put_bool(w, FIELD_OK, true);
        wire_open_array(w, FIELD_DATA);
        wire_close(w);
        if (type == MSG_REPLAY)
            wire_put_bool(w, FIELD_TRUNCATED, true);
    }
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zmsg_t *reply = zmsg_new();
    zmsg_append(reply, &identity);
    zmsg_append(reply, &empty);
    zmsg_addmem(reply, data, len);
    zmsg_send(&reply, router);
    wire_writer_destroy(&w);
    wire_msg_destroy(&msg);
    zframe_destroy(&body);
    zframe_destroy(&identity);
    zframe_destroy(&empty);
    zmsg_destroy(&request);
}

/* pan approve against a broker whose replay cannot go on: pan neither loops for ever nor
 * approves anything; it says the replay did not complete. */
static void test_approve_incomplete_replay(testenv_t *env)
{
    char endpoint[400], flag[420], log_path[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/cutting-broker.sock", env->dir);
    snprintf(flag, sizeof flag, "--control=%s", endpoint);
    snprintf(log_path, sizeof log_path, "%s/approve-cut.log", env->dir);
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    CHECK(zsock_bind(router, "%s", endpoint) == 0);
    char *argv[] = {(char *)testenv_bin("pan"), flag, "approve", "PAN-77", NULL};
    pid_t pid = testenv_spawn(env, "approve-cut", argv);
    CHECK(pid > 0);
    int status = -1;
    int64_t deadline = clock_now_ms() + 10000;
    while (status < 0 && clock_now_ms() < deadline) {
        zmq_pollitem_t item = {zsock_resolve(router), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, 50) > 0)
            s_fake_broker_answer(router);
        status = testenv_wait(env, pid, 0);
    }
    CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char *log = testenv_read_file(log_path);
    CHECK(log != NULL && strstr(log, "cannot tell which review of 'PAN-77' is the newest") != NULL);
    CHECK(log != NULL && strstr(log, "not approving") != NULL);
    free(log);
    zsock_destroy(&router);
}

/* ---- stopping a replay ---- */

typedef struct {
    volatile sig_atomic_t *stop;
    int count;
} stopper_t;

/* Asks to stop (through the flag, as a signal handler would) at the first event. */
static int s_stop_at_first(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)event;
    (void)raw;
    (void)len;
    stopper_t *stopper = arg;
    stopper->count++;
    *stopper->stop = 1;
    return 0;
}

static void test_client_stop_flag(testenv_t *env)
{
    client_t *control = client_new(env->control_ep, 5000);
    client_events_t *events = client_events_new(NULL, "");
    volatile sig_atomic_t stop = 0;
    stopper_t stopper = {.stop = &stop};
    CHECK_INT(client_events_run(events, control, 0, false, &stop, s_stop_at_first, &stopper), 0);
    CHECK_INT(stopper.count, 1);
    /* Set before the replay starts: nothing is delivered. */
    stopper.count = 0;
    CHECK_INT(client_events_run(events, control, 0, false, &stop, s_stop_at_first, &stopper), 0);
    CHECK_INT(stopper.count, 0);
    client_events_destroy(&events);
    client_destroy(&control);
}

#define LONG_TITLES 300
#define LONG_TITLE_BYTES 4000

/* `pan events` (no --follow) writing into a pipe nobody empties is interrupted by SIGINT:
 * it stops replaying instead of printing every stored event. */
static void test_pan_events_interrupted(testenv_t *env)
{
    int64_t since = s_last_seq(env);
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 2000);
    CHECK(zsock_connect(push, "%s", env->in_ep) == 0);
    wire_writer_t *writer = wire_writer_new();
    char title[LONG_TITLE_BYTES + 1];
    memset(title, 't', LONG_TITLE_BYTES);
    title[LONG_TITLE_BYTES] = '\0';
    for (int i = 0; i < LONG_TITLES; i++) {
        char id[32];
        snprintf(id, sizeof id, "long-%d", i);
        submit_t task = {.id = id, .specialist = "test-agent", .title = title};
        submit_encode(writer, &task);
        size_t len;
        const void *data = wire_writer_data(writer, &len);
        CHECK(zmq_send(zsock_resolve(push), data, len, 0) == (int)len);
    }
    wire_writer_destroy(&writer);
    seq_wanted_t want = {env, since + LONG_TITLES};
    CHECK(testenv_wait_until(s_seq_reached, &want, 10000));
    zsock_destroy(&push);

    char fifo[400], script[600];
    snprintf(fifo, sizeof fifo, "%s/events.fifo", env->dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(script, sizeof script, "exec \"$0\" events --since %lld --topic task.queued/ > '%s'",
             (long long)since, fifo);
    char *argv[] = {"/bin/sh", "-c", script, (char *)testenv_bin("pan"), NULL};
    pid_t pid = testenv_spawn(env, "events-interrupted", argv);
    CHECK(pid > 0);
    int fd = open(fifo, O_RDONLY);
    CHECK(fd >= 0);
    /* Read until the first line is there; pan then fills the pipe and blocks in write. */
    char buf[4096];
    int lines = 0;
    bool eof = false;
    int64_t deadline = clock_now_ms() + 10000;
    while (lines == 0 && !eof && clock_now_ms() < deadline) {
        struct pollfd item = {.fd = fd, .events = POLLIN};
        if (poll(&item, 1, 100) <= 0)
            continue;
        ssize_t got = read(fd, buf, sizeof buf);
        eof = got <= 0;
        for (ssize_t i = 0; i < got; i++)
            lines += buf[i] == '\n';
    }
    CHECK(lines > 0);
    testenv_signal(pid, SIGINT);
    while (!eof && clock_now_ms() < deadline) {
        struct pollfd item = {.fd = fd, .events = POLLIN};
        if (poll(&item, 1, 100) <= 0)
            continue;
        ssize_t got = read(fd, buf, sizeof buf);
        eof = got <= 0;
        for (ssize_t i = 0; i < got; i++)
            lines += buf[i] == '\n';
    }
    close(fd);
    CHECK(eof);
    int status = testenv_wait(env, pid, 5000);
    CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The pipe holds a few dozen lines of 4 KB: far fewer than were stored. */
    CHECK(lines < LONG_TITLES / 2);
}

/* ---- --since beyond the newest event ---- */

static const char *s_follow_log;

static bool s_follow_warned(void *arg)
{
    (void)arg;
    char *log = testenv_read_file(s_follow_log);
    bool warned = log != NULL && strstr(log, "beyond the newest event") != NULL;
    free(log);
    return warned;
}

static void test_since_beyond_newest(testenv_t *env)
{
    int64_t newest = s_last_seq(env);
    char since[32], expected[160];
    snprintf(since, sizeof since, "%lld", (long long)newest + 1000);
    snprintf(expected, sizeof expected,
             "pan: warning: --since %s is beyond the newest event (#%lld): nothing to show",
             since, (long long)newest);
    CHECK_INT(harness_pan_all(env, s_out, "events", "--since", since, NULL), 0);
    CHECK(strstr(s_out, expected) != NULL);
    /* Up to the newest is fine: nothing new, nothing to warn about. */
    snprintf(since, sizeof since, "%lld", (long long)newest);
    CHECK_INT(harness_pan_all(env, s_out, "events", "--since", since, NULL), 0);
    CHECK_STR(s_out, "");

    /* Following still follows, after saying so. */
    char log_path[400];
    snprintf(log_path, sizeof log_path, "%s/follow-beyond.log", env->dir);
    s_follow_log = log_path;
    snprintf(since, sizeof since, "%lld", (long long)newest + 1000);
    char *argv[] = {(char *)testenv_bin("pan"), "events", "--follow", "--since", since, NULL};
    pid_t pid = testenv_spawn(env, "follow-beyond", argv);
    CHECK(pid > 0);
    CHECK(testenv_wait_until(s_follow_warned, NULL, 5000));
    char *log = testenv_read_file(log_path);
    CHECK(log != NULL && strstr(log, "only events after #") != NULL);
    free(log);
    CHECK_INT(testenv_wait(env, pid, 300), -1); /* still following */
    testenv_signal(pid, SIGTERM);
    int status = testenv_wait(env, pid, 3000);
    CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- replay limits ---- */

#define BURST_TASKS 10050
#define REPLAY_PAGE_CAP 10000

/* A replay of `limit` events after `since`: client_call()'s result, the reply (caller
 * owns) in *reply. */
static int s_replay_limit(client_t *control, int64_t since, int64_t limit, wire_msg_t **reply)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_REPLAY);
    wire_put_int(writer, FIELD_SINCE, since);
    wire_put_int(writer, FIELD_LIMIT, limit);
    int rc = client_call(control, writer, reply);
    wire_writer_destroy(&writer);
    return rc;
}

/* A limit below 1 is an error, not a silent 10,000; a limit above the page cap gets a page
 * that says it was cut, so the client asks again instead of stopping there. */
static void test_replay_limits(testenv_t *env)
{
    client_t *control = client_new(env->control_ep, 10000);
    int64_t since = s_last_seq(env);
    CHECK(since >= 0);
    /* Fire-and-forget submits to `in` with no worker: each makes one task.queued event.
     * The socket stays open until the broker has them all. */
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 2000);
    CHECK(zsock_connect(push, "%s", env->in_ep) == 0);
    wire_writer_t *writer = wire_writer_new();
    for (int i = 0; i < BURST_TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "burst-%05d", i);
        submit_t task = {.id = id, .specialist = "test-agent"};
        submit_encode(writer, &task);
        size_t len;
        const void *data = wire_writer_data(writer, &len);
        CHECK(zmq_send(zsock_resolve(push), data, len, 0) == (int)len);
    }
    wire_writer_destroy(&writer);
    seq_wanted_t want = {env, since + BURST_TASKS};
    CHECK(testenv_wait_until(s_seq_reached, &want, 20000));
    zsock_destroy(&push);

    /* A limit over the cap: a page cut (by the cap, or before by its 512 KiB), which says
     * so; paging on from its last seq gets every event, each once. */
    wire_msg_t *reply = NULL;
    int64_t after = since, seen = 0;
    bool truncated = true;
    while (truncated) {
        CHECK_INT(s_replay_limit(control, after, 2 * REPLAY_PAGE_CAP, &reply), 0);
        const msgpack_object *data = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
        CHECK(data != NULL && data->type == MSGPACK_OBJECT_ARRAY && data->via.array.size > 0);
        CHECK(data->via.array.size <= REPLAY_PAGE_CAP);
        truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
        const msgpack_object *last = &data->via.array.ptr[data->via.array.size - 1];
        const msgpack_object *seq = wire_map_get(last, FIELD_SEQ);
        CHECK(seq != NULL && (int64_t)seq->via.u64 == after + (int64_t)data->via.array.size);
        after = (int64_t)seq->via.u64;
        seen += data->via.array.size;
        wire_msg_destroy(&reply);
    }
    CHECK_INT(seen, BURST_TASKS);

    /* A page that fits is not cut: it is what was asked for. */
    CHECK_INT(s_replay_limit(control, since, 1000, &reply), 0);
    const msgpack_object *data = reply ? wire_msg_object(reply, FIELD_DATA) : NULL;
    CHECK_INT(data != NULL ? (long long)data->via.array.size : -1, 1000);
    CHECK(reply != NULL && !wire_msg_bool(reply, FIELD_TRUNCATED, false));
    wire_msg_destroy(&reply);

    const int64_t bad_limits[] = {0, -1};
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        CHECK_INT(s_replay_limit(control, since, bad_limits[i], &reply), FAILURE_INVALID);
        CHECK(strstr(failure_message(), "limit") != NULL);
        wire_msg_destroy(&reply);
    }
    client_destroy(&control);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-replay");
    if (env == NULL)
        return 1;
    test_approve_incomplete_replay(env);
    if (harness_start_broker(env) > 0) {
        test_big_reviews(env);
        test_client_stop_flag(env);
        test_pan_events_interrupted(env);
        test_since_beyond_newest(env);
        test_replay_limits(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_replay");
}
