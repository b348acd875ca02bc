/* Many connections and a low open-files limit do not stop the broker.
 *
 * The broker runs with `ulimit -n 256` (soft and hard) and [broker] max_peers = 50, and
 * 600 raw connections are opened to its ipc endpoints and held. libzmq used to abort the
 * broker when accept() found no descriptor left (SIGABRT in ipc_listener.cpp). Now the
 * broker stays up; the connections past its cap are shut down as they come (at most 50
 * stay open, counted in stats.rejected.too_many_peers); the client and the worker that were
 * connected before go on being served (a task runs and its result is committed); and once
 * the flood goes away a newcomer is served again. */
#include "check.h"
#include "failure.h"
#include "fakeworker.h"
#include "testbroker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FLOOD 600
#define MAX_PEERS 50

/* A raw connection to an ipc endpoint ("ipc://path"), never speaking ZMTP; -1 if refused. */
static int s_connect_raw(const char *endpoint)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", endpoint + strlen("ipc://"));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* How many of the connections the broker still holds open (not shut down: no EOF). */
static int s_still_open(const int *fds, int n)
{
    int open = 0;
    for (int i = 0; i < n; i++) {
        char greeting[256]; /* what ZeroMQ sent first */
        ssize_t got = 1;
        while (fds[i] >= 0 && got > 0)
            got = recv(fds[i], greeting, sizeof greeting, MSG_DONTWAIT);
        open += fds[i] >= 0 && got < 0 && errno == EAGAIN;
    }
    return open;
}

static int64_t s_rejected(client_t *client, const char *reason)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    int64_t count = -1;
    if (rc == 0) {
        const msgpack_object *rejected =
            wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_REJECTED);
        count = 0;
        for (uint32_t i = 0; rejected && i < rejected->via.map.size; i++) {
            const msgpack_object_kv *kv = &rejected->via.map.ptr[i];
            if (kv->key.type == MSGPACK_OBJECT_STR &&
                kv->key.via.str.size == strlen(reason) &&
                memcmp(kv->key.via.str.ptr, reason, strlen(reason)) == 0)
                count = (int64_t)kv->val.via.u64;
        }
    }
    wire_msg_destroy(&reply);
    return count;
}

/* The broker, started with open files limited to 256 (soft and hard). */
static pid_t s_start_limited(testenv_t *env)
{
    char *argv[] = {"/bin/sh", "-c", "ulimit -n 256 && exec \"$@\"", "sh",
                    (char *)testenv_bin("cloister-broker"), "--in", env->in_ep, "--events",
                    env->events_ep, "--control", env->control_ep, "--home", env->home, NULL};
    pid_t pid = testenv_spawn(env, "broker", argv);
    return pid > 0 && testbroker_wait_ready(env) ? pid : -1;
}

int main(void)
{
    /* This side needs more than FLOOD descriptors. */
    struct rlimit ours;
    CHECK(getrlimit(RLIMIT_NOFILE, &ours) == 0);
    ours.rlim_cur = ours.rlim_max;
    CHECK(setrlimit(RLIMIT_NOFILE, &ours) == 0);
    CHECK(ours.rlim_cur > FLOOD + 200);
    testenv_t *env = testenv_new("broker-fd-limit");
    if (env == NULL)
        return 1;
    char path[700];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[broker]\nmax_peers = 50\n") == 0);
    pid_t broker = s_start_limited(env);
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    CHECK_INT((int)s_rejected(client, "too_many_peers"), 0);
    fakeworker_t *worker = fakeworker_new(env->dir, env->in_ep, "test-agent", "w1");
    fakeworker_hello(worker, NULL, 0);
    /* The broker answers a hello with a ping: the worker is connected before the flood. */
    wire_msg_t *ping = fakeworker_expect(worker, MSG_PING, 5000, NULL, 0);
    CHECK(ping != NULL);
    wire_msg_destroy(&ping);

    int fds[FLOOD];
    int connected = 0;
    for (int i = 0; i < FLOOD; i++) {
        fds[i] = s_connect_raw(i % 2 ? env->control_ep : env->in_ep);
        connected += fds[i] >= 0;
    }
    fprintf(stderr, "test_broker_fd_limit: %d of %d raw connections made\n", connected, FLOOD);
    fakeworker_heartbeat(worker, NULL, 0);
    testenv_sleep_ms(500);
    CHECK(testenv_wait(env, broker, 0) == -1); /* still running */
    int open = s_still_open(fds, FLOOD);
    int64_t refused = s_rejected(client, "too_many_peers");
    fprintf(stderr, "test_broker_fd_limit: %d left open, %lld refused\n", open, (long long)refused);
    CHECK(open <= MAX_PEERS);
    CHECK(refused >= connected - MAX_PEERS);

    /* Those connected before go on: a task is handed out and its result committed. */
    CHECK_INT(testbroker_submit(client, "during-flood", "test-agent", NULL, NULL), 0);
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 5000, NULL, 0);
    CHECK(task != NULL);
    wire_msg_destroy(&task);
    fakeworker_result(worker, "during-flood", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 5000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    char state[32];
    CHECK_STR(testbroker_state(client, "during-flood", state, sizeof state), "done");

    /* The flood goes: a newcomer is served. */
    for (int i = 0; i < FLOOD; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }
    client_t *newcomer = client_new(env->control_ep, 5000);
    CHECK(s_rejected(newcomer, "too_many_peers") >= refused);
    client_destroy(&newcomer);
    CHECK(testenv_wait(env, broker, 0) == -1);

    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    testenv_wait(env, broker, 5000);
    testenv_destroy(&env);
    return check_exit_code("test_broker_fd_limit");
}
