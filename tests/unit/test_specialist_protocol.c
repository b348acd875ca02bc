/* The specialist skeleton against a fake broker: the test plays the broker's side of
 * PROTOCOL.md (a PULL for `in`, a PUSH to the worker's announced endpoint) while a forked
 * child runs specialist_run() with a scripted job. Covers hello/heartbeat, tasks for
 * another worker or while busy, progress, result resent until ack, next tasks, cancel,
 * the task timeout, a job that ignores cancellation, re-hello on a new epoch or silence,
 * the ping echo and a task that came after a later ping, and SIGTERM (release, bye, exit 0). */
#include "check.h"
#include "clock.h"
#include "specialist.h"
#include "testenv.h"
#include "wire.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#define HB_MS 50

/* ---- the scripted job (runs in the child) ---- */

static specialist_outcome_t s_job(specialist_ctx_t *ctx, void *arg)
{
    (void)arg;
    const char *mode = specialist_payload_str(ctx, "mode");
    mode = mode ? mode : "echo";
    if (strcmp(mode, "echo") == 0) {
        specialist_progress(ctx, "info", "working");
        specialist_result_str(ctx, "ANSWER", "42");
        specialist_result_int(ctx, "COUNT", 7);
        json_t *next = json_pack("{s:s, s:s}", "id", "next-1", "specialist", "merge-agent");
        CHECK_INT(specialist_result_next(ctx, next), 0);
        json_decref(next);
        json_t *bad = json_pack("{s:s}", "title", "no id");
        CHECK(specialist_result_next(ctx, bad) != 0);
        json_decref(bad);
        return SPECIALIST_DONE;
    }
    if (strcmp(mode, "wait") == 0) {
        struct pollfd pfd = {specialist_cancel_fd(ctx), POLLIN, 0};
        poll(&pfd, 1, 20000);
        specialist_result_error(ctx, "stopped");
        return specialist_cancelled(ctx) ? SPECIALIST_FAILED : SPECIALIST_DONE;
    }
    /* "stuck": ignores cancellation. */
    testenv_sleep_ms(20000);
    return SPECIALIST_DONE;
}

static pid_t s_start_worker(const char *in_ep, const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        char bind[512];
        snprintf(bind, sizeof bind, "ipc://%s/worker-%d.sock", dir, (int)getpid());
        specialist_config_t config = {
            .specialist = "test-agent",
            .in_endpoint = in_ep,
            .bind_endpoint = bind,
            .heartbeat_ms = HB_MS,
            .heartbeat_misses = 3,
            .worker_id = "w1",
            .grace_ms = 300,
        };
        _exit(specialist_run(&config, s_job, NULL, NULL));
    }
    return pid;
}

/* ---- the fake broker (runs in the test) ---- */

typedef struct {
    void *zmq;
    void *pull;
    void *push;
    char endpoint[1024];
} fake_t;

static wire_msg_t *s_recv(fake_t *fake, int timeout_ms)
{
    zmq_pollitem_t item = {fake->pull, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) <= 0)
        return NULL;
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    wire_msg_t *msg = NULL;
    if (zmq_msg_recv(&frame, fake->pull, 0) >= 0 &&
        wire_decode(zmq_msg_data(&frame), zmq_msg_size(&frame), &msg) != 0)
        fprintf(stderr, "undecodable message from the worker\n");
    zmq_msg_close(&frame);
    return msg;
}

/* The first message of `type` within timeout_ms (others skipped), or NULL. */
static wire_msg_t *s_expect(fake_t *fake, msg_type_t type, int timeout_ms)
{
    for (int i = 0; i < timeout_ms / 10; i++) {
        wire_msg_t *msg = s_recv(fake, 10);
        if (msg != NULL && wire_msg_type(msg) == type)
            return msg;
        wire_msg_destroy(&msg);
    }
    return NULL;
}

static void s_send(fake_t *fake, wire_writer_t *w)
{
    size_t len = 0;
    const void *data = wire_writer_data(w, &len);
    zmq_send(fake->push, data, len, 0);
}

/* A task message; `ping_seq` > 0: the ping the broker sent before it. */
static void s_send_task_after(fake_t *fake, const char *worker, const char *id, int attempt,
                              const char *mode, int timeout_s, int64_t ping_seq)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_TASK);
    wire_put_str(w, FIELD_WORKER, worker);
    wire_put_str(w, FIELD_ID, id);
    wire_put_int(w, FIELD_ATTEMPT, attempt);
    wire_put_str(w, FIELD_SPECIALIST, "test-agent");
    wire_put_str(w, FIELD_PRIORITY, "normal");
    wire_put_str(w, FIELD_TITLE, "a test task");
    if (timeout_s > 0)
        wire_put_int(w, FIELD_TIMEOUT_S, timeout_s);
    if (ping_seq > 0)
        wire_put_int(w, FIELD_PING_SEQ, ping_seq);
    wire_open_map(w, FIELD_PAYLOAD);
    wire_put_key_str(w, "mode", mode);
    wire_close(w);
    s_send(fake, w);
    wire_writer_destroy(&w);
}

static void s_send_task(fake_t *fake, const char *worker, const char *id, int attempt,
                        const char *mode, int timeout_s)
{
    s_send_task_after(fake, worker, id, attempt, mode, timeout_s, 0);
}

static void s_send_simple(fake_t *fake, msg_type_t type, const char *task, int attempt,
                          const char *epoch)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, FIELD_WORKER, "w1");
    if (task != NULL) {
        wire_put_str(w, FIELD_TASK, task);
        wire_put_int(w, FIELD_ATTEMPT, attempt);
    }
    if (epoch != NULL)
        wire_put_str(w, FIELD_EPOCH, epoch);
    s_send(fake, w);
    wire_writer_destroy(&w);
}

/* Starts a worker and the fake broker; waits for its hello and connects to it. */
static pid_t s_setup(fake_t *fake, testenv_t *env)
{
    memset(fake, 0, sizeof *fake);
    pid_t pid = s_start_worker(env->in_ep, env->dir);
    fake->zmq = zmq_ctx_new();
    fake->pull = zmq_socket(fake->zmq, ZMQ_PULL);
    fake->push = zmq_socket(fake->zmq, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(fake->push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(fake->pull, ZMQ_LINGER, &zero, sizeof zero);
    CHECK_INT(zmq_bind(fake->pull, env->in_ep), 0);
    wire_msg_t *hello = s_expect(fake, MSG_HELLO, 3000);
    CHECK(hello != NULL);
    if (hello != NULL) {
        CHECK_STR(wire_msg_str(hello, FIELD_WORKER, ""), "w1");
        CHECK_STR(wire_msg_str(hello, FIELD_SPECIALIST, ""), "test-agent");
        CHECK_INT(wire_msg_int(hello, FIELD_PID, 0), pid);
        CHECK(!wire_msg_has(hello, FIELD_TASK));
        snprintf(fake->endpoint, sizeof fake->endpoint, "%s", wire_msg_str(hello, FIELD_ENDPOINT, ""));
        CHECK(strncmp(fake->endpoint, "ipc://", 6) == 0);
        CHECK_INT(zmq_connect(fake->push, fake->endpoint), 0);
    }
    wire_msg_destroy(&hello);
    return pid;
}

static int s_teardown(fake_t *fake, testenv_t *env, pid_t pid, bool terminate)
{
    if (terminate)
        kill(pid, SIGTERM);
    int status = -1;
    for (int i = 0; i < 300 && waitpid(pid, &status, WNOHANG) == 0; i++)
        testenv_sleep_ms(10);
    if (waitpid(pid, NULL, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        status = -1;
    }
    (void)env;
    zmq_close(fake->pull);
    zmq_close(fake->push);
    zmq_ctx_term(fake->zmq);
    return status;
}

static void test_heartbeat_task_result_ack(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    wire_msg_t *hb = s_expect(&fake, MSG_HEARTBEAT, 1000);
    CHECK(hb != NULL && !wire_msg_has(hb, FIELD_TASK));
    wire_msg_destroy(&hb);

    /* A task for another worker is ignored. */
    s_send_task(&fake, "someone-else", "t0", 1, "echo", 0);
    wire_msg_t *none = s_expect(&fake, MSG_PROGRESS, 300);
    CHECK(none == NULL);
    wire_msg_destroy(&none);

    s_send_task(&fake, "w1", "t1", 1, "echo", 0);
    wire_msg_t *progress = s_expect(&fake, MSG_PROGRESS, 2000);
    CHECK(progress != NULL);
    if (progress != NULL) {
        CHECK_STR(wire_msg_str(progress, FIELD_TASK, ""), "t1");
        CHECK_INT(wire_msg_int(progress, FIELD_ATTEMPT, 0), 1);
        CHECK_STR(wire_msg_str(progress, FIELD_TEXT, ""), "working");
        CHECK_STR(wire_msg_str(progress, FIELD_KIND, ""), "info");
    }
    wire_msg_destroy(&progress);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, 2000);
    CHECK(result != NULL);
    if (result != NULL) {
        CHECK_STR(wire_msg_str(result, FIELD_OUTCOME, ""), "done");
        const msgpack_object *fields = wire_msg_object(result, FIELD_RESULT);
        char buf[32];
        CHECK_STR(wire_obj_str(wire_map_get_key(fields, "ANSWER"), buf, sizeof buf, ""), "42");
        const msgpack_object *count = wire_map_get_key(fields, "COUNT");
        CHECK(count != NULL && count->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
              count->via.u64 == 7);
        const msgpack_object *next = wire_msg_object(result, FIELD_NEXT);
        CHECK(next != NULL && next->type == MSGPACK_OBJECT_ARRAY && next->via.array.size == 1);
        if (next != NULL && next->type == MSGPACK_OBJECT_ARRAY && next->via.array.size == 1)
            CHECK_STR(wire_obj_str(wire_map_get(&next->via.array.ptr[0], FIELD_ID), buf, sizeof buf,
                                   ""),
                      "next-1");
    }
    wire_msg_destroy(&result);
    /* Not acked: resent with the heartbeats. */
    result = s_expect(&fake, MSG_RESULT, 1000);
    CHECK(result != NULL);
    wire_msg_destroy(&result);
    s_send_simple(&fake, MSG_ACK, "t1", 1, NULL);
    testenv_sleep_ms(HB_MS * 2);
    while ((result = s_recv(&fake, 0)) != NULL)
        wire_msg_destroy(&result);
    result = s_expect(&fake, MSG_RESULT, HB_MS * 5);
    CHECK(result == NULL);
    wire_msg_destroy(&result);
    CHECK_INT(s_teardown(&fake, env, pid, true), 0);
}

static void test_busy_cancel_and_reuse(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    s_send_task(&fake, "w1", "t1", 1, "wait", 0);
    wire_msg_t *hb = NULL;
    for (int i = 0; i < 20; i++) {
        hb = s_expect(&fake, MSG_HEARTBEAT, 500);
        if (hb != NULL && wire_msg_has(hb, FIELD_TASK))
            break;
        wire_msg_destroy(&hb);
    }
    CHECK(hb != NULL);
    if (hb != NULL) {
        CHECK_STR(wire_msg_str(hb, FIELD_TASK, ""), "t1");
        CHECK_INT(wire_msg_int(hb, FIELD_ATTEMPT, 0), 1);
    }
    wire_msg_destroy(&hb);
    /* A task while busy is ignored: the heartbeat still names t1. */
    s_send_task(&fake, "w1", "t2", 1, "echo", 0);
    testenv_sleep_ms(HB_MS * 2);
    hb = s_expect(&fake, MSG_HEARTBEAT, 500);
    CHECK(hb != NULL && strcmp(wire_msg_str(hb, FIELD_TASK, ""), "t1") == 0);
    wire_msg_destroy(&hb);
    /* Cancel: nothing more for that attempt, and the worker is idle again. */
    s_send_simple(&fake, MSG_CANCEL, "t1", 1, NULL);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, HB_MS * 8);
    CHECK(result == NULL);
    wire_msg_destroy(&result);
    hb = s_expect(&fake, MSG_HEARTBEAT, 500);
    CHECK(hb != NULL && !wire_msg_has(hb, FIELD_TASK));
    wire_msg_destroy(&hb);
    s_send_task(&fake, "w1", "t3", 1, "echo", 0);
    result = s_expect(&fake, MSG_RESULT, 2000);
    CHECK(result != NULL && strcmp(wire_msg_str(result, FIELD_TASK, ""), "t3") == 0);
    wire_msg_destroy(&result);
    CHECK_INT(s_teardown(&fake, env, pid, true), 0);
}

static void test_timeout(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    int64_t start = clock_now_ms();
    s_send_task(&fake, "w1", "t1", 2, "wait", 1);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, 4000);
    int64_t took = clock_now_ms() - start;
    CHECK(result != NULL);
    if (result != NULL) {
        CHECK_STR(wire_msg_str(result, FIELD_OUTCOME, ""), "failed");
        CHECK_STR(wire_msg_str(result, FIELD_ERROR, ""), "timed out after 1 s: stopped");
        CHECK_INT(wire_msg_int(result, FIELD_ATTEMPT, 0), 2);
    }
    CHECK(took >= 900 && took < 2500);
    wire_msg_destroy(&result);
    CHECK_INT(s_teardown(&fake, env, pid, true), 0);
}

static void test_stuck_job(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    s_send_task(&fake, "w1", "t1", 1, "stuck", 1);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, 4000);
    CHECK(result != NULL);
    if (result != NULL) {
        CHECK_STR(wire_msg_str(result, FIELD_OUTCOME, ""), "failed");
        CHECK(strstr(wire_msg_str(result, FIELD_ERROR, ""), "did not stop within 300 ms") != NULL);
        s_send_simple(&fake, MSG_ACK, "t1", 1, NULL);
    }
    wire_msg_destroy(&result);
    wire_msg_t *bye = s_expect(&fake, MSG_BYE, 2000);
    CHECK(bye != NULL);
    wire_msg_destroy(&bye);
    int status = s_teardown(&fake, env, pid, false);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == SPECIALIST_EXIT_STUCK);
}

static void test_rehello(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    s_send_task(&fake, "w1", "t1", 1, "wait", 0);
    s_send_simple(&fake, MSG_PING, NULL, 0, "epoch-a");
    /* Hellos the worker sent before it heard from us (it announces itself again after
     * three quiet intervals) are already on their way: take them out first, pinging all
     * along so it has no reason to send another, until a whole interval brings none (a
     * loaded machine may take that long to deliver the last one). */
    wire_msg_t *hello = NULL;
    bool drained = false;
    while (!drained) {
        s_send_simple(&fake, MSG_PING, NULL, 0, "epoch-a");
        hello = s_expect(&fake, MSG_HELLO, HB_MS);
        drained = hello == NULL;
        wire_msg_destroy(&hello);
    }
    /* Same epoch, pinged far more often than the three quiet intervals after which a
     * worker announces itself again: no hello. */
    int hellos = 0;
    for (int i = 0; i < 10; i++) {
        s_send_simple(&fake, MSG_PING, NULL, 0, "epoch-a");
        hello = s_expect(&fake, MSG_HELLO, HB_MS / 5);
        hellos += hello != NULL;
        wire_msg_destroy(&hello);
    }
    CHECK_INT(hellos, 0);
    wire_msg_destroy(&hello);
    /* A new epoch: hello again, naming the task still held. */
    s_send_simple(&fake, MSG_PING, NULL, 0, "epoch-b");
    hello = s_expect(&fake, MSG_HELLO, 1000);
    CHECK(hello != NULL);
    if (hello != NULL) {
        CHECK_STR(wire_msg_str(hello, FIELD_TASK, ""), "t1");
        CHECK_INT(wire_msg_int(hello, FIELD_ATTEMPT, 0), 1);
    }
    wire_msg_destroy(&hello);
    /* Silence for heartbeat_misses intervals: hello again. */
    hello = s_expect(&fake, MSG_HELLO, HB_MS * 3 + 500);
    CHECK(hello != NULL);
    wire_msg_destroy(&hello);
    CHECK_INT(s_teardown(&fake, env, pid, true), 0);
}

/* The worker echoes the highest ping_seq it received in its heartbeats (so the broker knows
 * which of its messages arrived), and does not run a task sent before a ping it already
 * has: that task came late on an older connection, and the broker has given it up. */
static void test_ping_echo_and_stale_task(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_PING);
    wire_put_str(w, FIELD_WORKER, "w1");
    wire_put_str(w, FIELD_EPOCH, "epoch-a");
    wire_put_int(w, FIELD_PING_SEQ, 7);
    s_send(&fake, w);
    wire_writer_destroy(&w);
    int64_t echoed = -1;
    for (int i = 0; i < 20 && echoed != 7; i++) {
        wire_msg_t *hb = s_expect(&fake, MSG_HEARTBEAT, 500);
        echoed = hb ? wire_msg_int(hb, FIELD_PING_SEQ, -1) : -1;
        wire_msg_destroy(&hb);
    }
    CHECK_INT(echoed, 7);
    s_send_task_after(&fake, "w1", "old", 1, "echo", 0, 5);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, 500);
    CHECK(result == NULL);
    wire_msg_destroy(&result);
    s_send_task_after(&fake, "w1", "new", 1, "echo", 0, 7);
    result = s_expect(&fake, MSG_RESULT, 2000);
    CHECK_STR(result ? wire_msg_str(result, FIELD_TASK, "") : "(none)", "new");
    wire_msg_destroy(&result);
    CHECK_INT(s_teardown(&fake, env, pid, true), 0);
}

static void test_sigterm_releases(testenv_t *env)
{
    fake_t fake;
    pid_t pid = s_setup(&fake, env);
    s_send_task(&fake, "w1", "t1", 3, "wait", 0);
    wire_msg_t *hb = NULL;
    for (int i = 0; i < 20; i++) {
        hb = s_expect(&fake, MSG_HEARTBEAT, 500);
        if (hb != NULL && wire_msg_has(hb, FIELD_TASK))
            break;
        wire_msg_destroy(&hb);
    }
    CHECK(hb != NULL);
    wire_msg_destroy(&hb);
    kill(pid, SIGTERM);
    wire_msg_t *release = s_expect(&fake, MSG_RELEASE, 1000);
    CHECK(release != NULL);
    if (release != NULL) {
        CHECK_STR(wire_msg_str(release, FIELD_TASK, ""), "t1");
        CHECK_INT(wire_msg_int(release, FIELD_ATTEMPT, 0), 3);
    }
    wire_msg_destroy(&release);
    wire_msg_t *bye = s_expect(&fake, MSG_BYE, 1000);
    CHECK(bye != NULL);
    wire_msg_destroy(&bye);
    wire_msg_t *result = s_expect(&fake, MSG_RESULT, 300);
    CHECK(result == NULL);
    wire_msg_destroy(&result);
    int status = s_teardown(&fake, env, pid, false);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_names(void)
{
    CHECK_INT(specialist_check_name("merge-agent"), 0);
    CHECK_INT(specialist_check_name("a1.b_c"), 0);
    CHECK(specialist_check_name("") != 0);
    CHECK(specialist_check_name("-x") != 0);
    CHECK(specialist_check_name("Merge") != 0);
    CHECK(specialist_check_name("a b") != 0);
}

int main(void)
{
    testenv_t *env = testenv_new("specialist");
    if (env == NULL)
        return 1;
    test_names();
    test_heartbeat_task_result_ack(env);
    test_busy_cancel_and_reuse(env);
    test_timeout(env);
    test_stuck_job(env);
    test_rehello(env);
    test_ping_echo_and_stale_task(env);
    test_sigterm_releases(env);
    testenv_destroy(&env);
    return check_exit_code("test_specialist_protocol");
}
