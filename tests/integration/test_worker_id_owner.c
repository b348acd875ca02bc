/* Nobody takes a worker's place after a broker restart (CURVE bus, two keys with the worker
 * role). The victim runs a task; it is frozen and the broker killed; before the victim
 * reconnects, the thief says `hello` under the victim's worker id, holding nothing, with a
 * task socket of its own. The worker id belongs to the key that first said hello under it
 * (stored), so the hello is refused: the thief is not registered, and when the orphaned
 * task is requeued it is never handed to the thief. The victim comes back and the task
 * ends with the victim's result.
 *
 * Before, the broker registered the thief under the id, requeued the task when the victim
 * missed the restart's grace and dispatched attempt 2 to the thief, took its forged result,
 * and refused the real worker as foreign_key. */
#include "check.h"
#include "curve.h"
#include "testbroker.h"
#include "testenv.h"

#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The broker's and the victim's logs on stderr, for a run that did not end as expected. */
static void s_print_logs(const testenv_t *env)
{
    const char *names[] = {"broker", "vt-1"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.log", env->dir, names[i]);
        char *text = testenv_read_file(path);
        fprintf(stderr, "---- %s\n%s\n", path, text != NULL ? text : "(unreadable)");
        free(text);
    }
}

int main(void)
{
    testenv_t *env = testenv_new("worker_id_owner");
    if (env == NULL)
        return 1;
    char path[1024], state[64];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[security]\ncurve = true\n") == 0);
    CHECK_INT(curve_keys_init(), 0);
    CHECK_INT(curve_keys_add("victim", CURVE_ROLE_WORKER), 0);
    CHECK_INT(curve_keys_add("thief", CURVE_ROLE_WORKER), 0);
    config_t *config = NULL;
    CHECK_INT(config_load(path, &config), 0);
    const char *endpoints[] = {env->control_ep, NULL};
    CHECK_INT(curve_client_init(config, endpoints), 0);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    snprintf(path, sizeof path, "%s/keys/broker", env->home);
    zcert_t *broker_cert = zcert_load(path);
    CHECK(broker_cert != NULL);
    snprintf(path, sizeof path, "%s/keys/clients/thief_secret", env->home);
    zcert_t *thief = zcert_load(path);
    CHECK(thief != NULL);

    /* The victim, with its own key, runs vt-task until the go file exists. */
    char bind[600], go[600], command[1400], cert[1024];
    snprintf(bind, sizeof bind, "ipc://%s/vt-1.sock", env->dir);
    snprintf(go, sizeof go, "%s/go", env->dir);
    snprintf(command, sizeof command,
             "while [ ! -e '%s' ]; do sleep 0.05; done; echo 'RESULT: from-the-victim'", go);
    snprintf(cert, sizeof cert, "%s/keys/clients/victim_secret", env->home);
    setenv("CLOISTER_CURVE_CERT", cert, 1);
    char *worker[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "lone-agent",
                      "--worker-id", "vt-1", "--bind", bind, "--heartbeat-ms", "200", "--",
                      "/bin/sh", "-c", command, NULL};
    pid_t victim = testenv_spawn(env, "vt-1", worker);
    unsetenv("CLOISTER_CURVE_CERT");
    CHECK(victim > 0);
    int rc = -1;
    for (int i = 0; i < 50 && rc != 0; i++) {
        rc = testbroker_submit(client, "vt-task", "lone-agent", NULL, NULL);
        if (rc != 0)
            testenv_sleep_ms(100);
    }
    CHECK_INT(rc, 0);
    for (int i = 0; i < 50 && strcmp(testbroker_state(client, "vt-task", state, sizeof state),
                                     "running") != 0;
         i++)
        testenv_sleep_ms(100);
    CHECK_STR(state, "running");

    /* The victim frozen, the broker killed and started again. */
    testenv_signal(victim, SIGSTOP);
    testenv_signal(broker, SIGKILL);
    CHECK(testenv_wait(env, broker, 5000) >= 0);
    client_destroy(&client);
    broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    client = testbroker_client(env);
    int64_t refused_before = testbroker_rejected(client, "foreign_key");

    /* The thief's task socket (a CURVE server with its key), and its hello as vt-1. */
    char thief_bind[600];
    snprintf(thief_bind, sizeof thief_bind, "ipc://%s/thief.sock", env->dir);
    zsock_t *pull = zsock_new(ZMQ_PULL);
    zsock_set_curve_server(pull, 1);
    zcert_apply(thief, pull);
    CHECK(zsock_bind(pull, "%s", thief_bind) == 0);
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 1000);
    zcert_apply(thief, push);
    zsock_set_curve_serverkey(push, zcert_public_txt(broker_cert));
    CHECK(zsock_connect(push, "%s", env->in_ep) == 0);
    wire_writer_t *w = wire_writer_new();
    /* Long enough for the victim's grace (4 intervals) to pass and the task to be requeued:
     * the thief keeps saying hello and heartbeating as vt-1 meanwhile. */
    zpoller_t *poller = zpoller_new(pull, NULL);
    bool handed = false;
    for (int i = 0; i < 20 && !handed; i++) {
        wire_writer_start(w, i % 5 == 0 ? MSG_HELLO : MSG_HEARTBEAT);
        wire_put_str(w, FIELD_WORKER, "vt-1");
        wire_put_str(w, FIELD_SPECIALIST, "lone-agent");
        wire_put_str(w, FIELD_ENDPOINT, thief_bind);
        wire_put_str(w, FIELD_CURVE_KEY, zcert_public_txt(thief));
        wire_put_int(w, FIELD_PID, 4242);
        size_t len;
        const void *data = wire_writer_data(w, &len);
        zframe_t *frame = zframe_new(data, len);
        zframe_send(&frame, push, 0);
        zmsg_t *got = zpoller_wait(poller, 100) != NULL ? zmsg_recv(pull) : NULL;
        if (got != NULL) {
            zframe_t *body = zmsg_first(got);
            wire_msg_t *msg = NULL;
            if (body != NULL && wire_decode(zframe_data(body), zframe_size(body), &msg) == 0 &&
                wire_msg_type(msg) == MSG_TASK) {
                fprintf(stderr, "the thief was handed %s (attempt %lld)\n",
                        wire_msg_str(msg, FIELD_ID, ""),
                        (long long)wire_msg_int(msg, FIELD_ATTEMPT, 0));
                handed = true;
            }
            wire_msg_destroy(&msg);
            zmsg_destroy(&got);
        }
    }
    CHECK(!handed);
    CHECK(testbroker_rejected(client, "foreign_key") >= refused_before + 4);

    /* The victim comes back and finishes: its result counts. */
    testenv_signal(victim, SIGCONT);
    CHECK(testenv_write_file(go, "") == 0);
    /* Up to 60 s: under a loaded sanitizer run the victim's way back (its hello, the stale
     * attempt stopped, attempt 2 dispatched to it) once took longer than 15 s (seen once,
     * not reproduced); the logs say where it stood if it never ends. */
    for (int i = 0; i < 600 && strcmp(testbroker_state(client, "vt-task", state, sizeof state),
                                      "done") != 0;
         i++)
        testenv_sleep_ms(100);
    if (strcmp(state, "done") != 0)
        s_print_logs(env);
    CHECK_STR(state, "done");
    char *argv[] = {(char *)testenv_bin("pan"), "task", "show", "vt-task", "--json", NULL};
    char out[16384];
    int code = testenv_run(env, argv, out, sizeof out, 10000);
    if (code != 0 || strstr(out, "from-the-victim") == NULL)
        fprintf(stderr, "pan task show vt-task (exit %d): %s\n", code, out);
    CHECK_INT(code, 0);
    CHECK(strstr(out, "from-the-victim") != NULL);

    zpoller_destroy(&poller);
    wire_writer_destroy(&w);
    zsock_destroy(&push);
    zsock_destroy(&pull);
    zcert_destroy(&thief);
    zcert_destroy(&broker_cert);
    client_destroy(&client);
    config_destroy(&config);
    testenv_destroy(&env);
    return check_exit_code("test_worker_id_owner");
}
