/* A result sent and not yet acknowledged is never read as "the worker never took it".
 *
 * The worker (played by the test, tests/support/fakeworker.h) lists the results it holds
 * unacknowledged in its hellos and heartbeats (`unacked`), and the broker waits for them:
 *  - restart: the broker is killed (-9) after the worker sent its result, which the dead
 *    broker never read. The new broker hears an idle hello and idle heartbeats listing the
 *    result, for longer than its orphan grace; the task is not requeued nor dispatched again,
 *    and when the result arrives the task is done at attempt 1;
 *  - in flight: without a restart, the worker's idle heartbeats echo a ping sent after the
 *    task (which used to mean "it arrived and was not taken") while its result is still on
 *    its way: the task waits for the result instead of running again.
 * Without the broker reading `unacked`, both tasks are dispatched a second time.
 *  - crossed: a worker's idle hello crossed the task on its way, and the broker restarted in
 *    between: the new broker hears "idle" first, then heartbeats naming the task it
 *    recovered as this worker's. It attaches the task again instead of cancelling it (which
 *    ran it a second time, test_runs_once under load). */
#include "check.h"
#include "clock.h"
#include "fakeworker.h"
#include "testbroker.h"
#include "testenv.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define HB_MS 100

/* The highest ping seq seen so far, and whether a task message came. */
typedef struct {
    int64_t ping_seq;
    char task[128];
    int64_t task_attempt;
    char cancel[128];
} seen_t;

/* Reads what waits on the worker's socket without blocking. */
static void s_read(fakeworker_t *fw, seen_t *seen)
{
    char buf[65536];
    int n;
    while ((n = zmq_recv(fakeworker_socket(fw), buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
        wire_msg_t *msg = NULL;
        if (wire_decode(buf, (size_t)n, &msg) != 0)
            continue;
        if (wire_msg_type(msg) == MSG_PING &&
            wire_msg_int(msg, FIELD_PING_SEQ, 0) > seen->ping_seq)
            seen->ping_seq = wire_msg_int(msg, FIELD_PING_SEQ, 0);
        if (wire_msg_type(msg) == MSG_CANCEL)
            snprintf(seen->cancel, sizeof seen->cancel, "%s", wire_msg_str(msg, FIELD_TASK, ""));
        if (wire_msg_type(msg) == MSG_TASK) {
            snprintf(seen->task, sizeof seen->task, "%s", wire_msg_str(msg, FIELD_ID, ""));
            seen->task_attempt = wire_msg_int(msg, FIELD_ATTEMPT, 0);
        }
        wire_msg_destroy(&msg);
    }
}

/* For `ms`, an idle heartbeat every 50 ms echoing the latest ping and listing task/1 as
 * unacknowledged; fails if a task message arrives meanwhile. */
static void s_wait_unacked(fakeworker_t *fw, seen_t *seen, const char *task, int ms)
{
    int64_t until = clock_now_ms() + ms;
    while (clock_now_ms() < until) {
        s_read(fw, seen);
        if (seen->task[0] != '\0')
            fprintf(stderr, "%s dispatched again (attempt %lld) while its result was unacked\n",
                    seen->task, (long long)seen->task_attempt);
        CHECK(seen->task[0] == '\0');
        fakeworker_heartbeat_unacked(fw, seen->ping_seq, task, 1);
        testenv_sleep_ms(50);
    }
}

/* Submits `id` and waits for its task message at the worker: attempt 1. */
static void s_dispatch(client_t *client, fakeworker_t *fw, const char *id)
{
    int rc = -1;
    for (int i = 0; i < 50 && rc != 0; i++) {
        rc = testbroker_submit(client, id, "fw-agent", NULL, NULL);
        if (rc != 0)
            testenv_sleep_ms(100);
    }
    CHECK_INT(rc, 0);
    wire_msg_t *task = fakeworker_expect(fw, MSG_TASK, 5000, NULL, 0);
    CHECK(task != NULL);
    CHECK_STR(wire_msg_str(task, FIELD_ID, ""), id);
    CHECK_INT(wire_msg_int(task, FIELD_ATTEMPT, 0), 1);
    wire_msg_destroy(&task);
}

/* Sends the result of id/1 and checks it is acknowledged and the task done. */
static void s_finish(client_t *client, fakeworker_t *fw, const char *id)
{
    fakeworker_result(fw, id, 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(fw, MSG_ACK, 5000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    char state[64];
    CHECK_STR(testbroker_state(client, id, state, sizeof state), "done");
}

int main(void)
{
    testenv_t *env = testenv_new("result_unacked");
    if (env == NULL)
        return 1;
    pid_t broker = testbroker_start(env, HB_MS, "full");
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    fakeworker_t *fw = fakeworker_new(env->dir, env->in_ep, "fw-agent", "fw-1");
    CHECK(fw != NULL);
    fakeworker_hello(fw, NULL, 0);
    seen_t seen = {0};

    /* In flight: idle heartbeats echoing a ping sent after the task, result unacked. */
    s_dispatch(client, fw, "inflight");
    for (int i = 0; i < 5; i++) { /* make sure a ping later than the task was received */
        fakeworker_heartbeat(fw, "inflight", 1);
        testenv_sleep_ms(HB_MS);
        s_read(fw, &seen);
    }
    s_wait_unacked(fw, &seen, "inflight", 10 * HB_MS);
    char state[64];
    CHECK_STR(testbroker_state(client, "inflight", state, sizeof state), "running");
    s_finish(client, fw, "inflight");

    /* Restart: the result went to a broker killed before it read it. */
    s_dispatch(client, fw, "restart");
    fakeworker_heartbeat(fw, "restart", 1);
    testenv_sleep_ms(2 * HB_MS);
    testenv_signal(broker, SIGKILL);
    CHECK(testenv_wait(env, broker, 5000) >= 0);
    client_destroy(&client);
    broker = testbroker_start(env, HB_MS, "full");
    CHECK(broker > 0);
    client = testbroker_client(env);
    seen = (seen_t){0};
    s_read(fw, &seen);
    fakeworker_hello_unacked(fw, "restart", 1);
    /* Longer than the orphan grace (heartbeat_misses + 1 intervals) and the idle rule. */
    s_wait_unacked(fw, &seen, "restart", 20 * HB_MS);
    CHECK_STR(testbroker_state(client, "restart", state, sizeof state), "running");
    s_finish(client, fw, "restart");

    /* Crossed: an idle hello, then heartbeats naming the recovered attempt. */
    s_dispatch(client, fw, "crossed");
    fakeworker_heartbeat(fw, "crossed", 1);
    testenv_sleep_ms(2 * HB_MS);
    testenv_signal(broker, SIGKILL);
    CHECK(testenv_wait(env, broker, 5000) >= 0);
    client_destroy(&client);
    broker = testbroker_start(env, HB_MS, "full");
    CHECK(broker > 0);
    client = testbroker_client(env);
    seen = (seen_t){0};
    s_read(fw, &seen);
    fakeworker_hello(fw, NULL, 0);
    for (int64_t until = clock_now_ms() + 20 * HB_MS; clock_now_ms() < until;) {
        s_read(fw, &seen);
        if (seen.cancel[0] != '\0' || seen.task[0] != '\0')
            fprintf(stderr, "crossed: cancel of '%s', task '%s' (attempt %lld)\n", seen.cancel,
                    seen.task, (long long)seen.task_attempt);
        CHECK(seen.cancel[0] == '\0' && seen.task[0] == '\0');
        fakeworker_heartbeat(fw, "crossed", 1);
        testenv_sleep_ms(50);
    }
    CHECK_STR(testbroker_state(client, "crossed", state, sizeof state), "running");
    s_finish(client, fw, "crossed");

    fakeworker_destroy(&fw);
    client_destroy(&client);
    testenv_destroy(&env);
    return check_exit_code("test_result_unacked");
}
