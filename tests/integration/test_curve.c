/* The bus refuses strangers ([security] curve = true, on ipc here): a client without a key,
 * or with a key nobody authorized, gets no reply, no event, and nothing it sends is
 * accepted; an authorized client (pan) works; a key revoked with `pan keys revoke` stops
 * working after the broker's SIGHUP; the generic worker runs a task end to end with CURVE,
 * and its task socket takes tasks from the broker only; a worker's results count only from
 * its own key; the review, test and merge specialists each take a task and report it over
 * the authenticated bus; `pan doctor` reaches the broker with the keys; and a broker told
 * to listen on 0.0.0.0 without CURVE refuses to start. */
#include "check.h"
#include "curve.h"
#include "msgjson.h"
#include "testbroker.h"

#include <czmq.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sends a `stats` request on a REQ socket set up by `setup` (NULL: plain); true when a
 * reply came within 1 s. */
static bool s_stats_answered(testenv_t *env, zcert_t *own, const char *server_key)
{
    zsock_t *req = zsock_new(ZMQ_REQ);
    zsock_set_linger(req, 0);
    if (own != NULL) {
        zcert_apply(own, req);
        zsock_set_curve_serverkey(req, server_key);
    }
    zsock_connect(req, "%s", env->control_ep);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zframe_t *frame = zframe_new(data, len);
    zframe_send(&frame, req, ZFRAME_DONTWAIT);
    wire_writer_destroy(&w);
    zpoller_t *poller = zpoller_new(req, NULL);
    bool answered = zpoller_wait(poller, 1000) != NULL;
    zpoller_destroy(&poller);
    zsock_destroy(&req);
    return answered;
}

/* A plain PUSH of a submit of `id`, and a plain SUB: true when the SUB heard anything. */
static bool s_stranger_heard(testenv_t *env, const char *id)
{
    zsock_t *sub = zsock_new_sub(env->events_ep, "");
    zsock_t *push = zsock_new_push(env->in_ep);
    zsock_set_linger(push, 0);
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_SPECIALIST, "test-agent");
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zframe_t *frame = zframe_new(data, len);
    zframe_send(&frame, push, ZFRAME_DONTWAIT);
    wire_writer_destroy(&w);
    zpoller_t *poller = zpoller_new(sub, NULL);
    bool heard = zpoller_wait(poller, 1000) != NULL;
    zpoller_destroy(&poller);
    zsock_destroy(&push);
    zsock_destroy(&sub);
    return heard;
}

/* Runs pan with the arguments (NULL-terminated), CLOISTER_CURVE_CERT = cert (NULL: the
 * default client); returns its exit code. */
static int s_pan(testenv_t *env, const char *cert, const char *first, ...)
{
    char *argv[12];
    int n = 0;
    argv[n++] = (char *)testenv_bin("pan");
    argv[n++] = "--timeout-ms";
    argv[n++] = "1000";
    argv[n++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && n < 11)
        argv[n++] = arg;
    va_end(args);
    argv[n] = NULL;
    if (cert != NULL)
        setenv("CLOISTER_CURVE_CERT", cert, 1);
    char out[8192];
    int code = testenv_run(env, argv, out, sizeof out, 10000);
    unsetenv("CLOISTER_CURVE_CERT");
    return code;
}

/* PUSHes one message to the broker's `in` as the holder of `cert`. */
static void s_push_as(testenv_t *env, zcert_t *cert, const char *broker_key, wire_writer_t *w)
{
    zsock_t *push = zsock_new(ZMQ_PUSH);
    zsock_set_linger(push, 1000);
    zcert_apply(cert, push);
    zsock_set_curve_serverkey(push, broker_key);
    zsock_connect(push, "%s", env->in_ep);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zframe_t *frame = zframe_new(data, len);
    zframe_send(&frame, push, 0);
    zsock_destroy(&push);
}

/* Another authorised party knows a worker's id and its task's attempt (events say both):
 * its result, progress, hello and goodbye in that worker's name are refused, and the
 * worker's own result is the one that counts. */
static void test_results_bound_to_key(testenv_t *env, pid_t broker, client_t *client,
                                      const char *broker_key)
{
    char bind[400], go[400], command[600], path[700];
    snprintf(bind, sizeof bind, "ipc://%s/w2.sock", env->dir);
    snprintf(go, sizeof go, "%s/go-w2", env->dir);
    snprintf(command, sizeof command,
             "while [ ! -e '%s' ]; do sleep 0.05; done; echo 'RESULT: from-the-worker'", go);
    char *worker[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "slow-agent",
                      "--worker-id", "w2", "--bind", bind, "--in", env->in_ep,
                      "--heartbeat-ms", "100", "--", "/bin/sh", "-c", command, NULL};
    testenv_spawn(env, "w2", worker);
    bool queued = false;
    for (int i = 0; i < 50 && !queued; i++) {
        queued = testbroker_submit(client, "owned-1", "slow-agent", NULL, NULL) == 0;
        if (!queued)
            testenv_sleep_ms(100);
    }
    CHECK(queued);
    char state[64];
    for (int i = 0; i < 50 && strcmp(testbroker_state(client, "owned-1", state, sizeof state),
                                     "running") != 0;
         i++)
        testenv_sleep_ms(100);
    CHECK_STR(state, "running");

    CHECK_INT(s_pan(env, NULL, "keys", "add", "thief", NULL), 0);
    snprintf(path, sizeof path, "%s/keys/clients/thief_secret", env->home);
    zcert_t *thief = zcert_load(path);
    CHECK(thief != NULL);
    testenv_signal(broker, SIGHUP);
    testenv_sleep_ms(300);
    int64_t refused_before = testbroker_rejected(client, "foreign_key");
    msg_type_t forged[] = {MSG_PROGRESS, MSG_RESULT, MSG_HELLO, MSG_BYE};
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, forged[i]);
        wire_put_str(w, FIELD_WORKER, "w2");
        wire_put_str(w, FIELD_TASK, "owned-1");
        wire_put_int(w, FIELD_ATTEMPT, 1);
        wire_put_str(w, FIELD_OUTCOME, "done");
        wire_put_str(w, FIELD_TEXT, "forged");
        wire_put_str(w, FIELD_SPECIALIST, "slow-agent");
        wire_put_str(w, FIELD_ENDPOINT, bind);
        s_push_as(env, thief, broker_key, w);
        wire_writer_destroy(&w);
    }
    testenv_sleep_ms(500);
    CHECK_STR(testbroker_state(client, "owned-1", state, sizeof state), "running");
    CHECK(testbroker_rejected(client, "foreign_key") >= refused_before + 4);

    CHECK(testenv_write_file(go, "") == 0);
    for (int i = 0; i < 100 && strcmp(testbroker_state(client, "owned-1", state, sizeof state),
                                      "done") != 0;
         i++)
        testenv_sleep_ms(100);
    CHECK_STR(state, "done");
    char *argv[] = {(char *)testenv_bin("pan"), "task", "show", "owned-1", "--json", NULL};
    char out[16384];
    int code = testenv_run(env, argv, out, sizeof out, 10000);
    if (code != 0 || strstr(out, "\"RESULT\": \"from-the-worker\"") == NULL)
        fprintf(stderr, "pan task show owned-1 (exit %d): %s\n", code, out);
    CHECK_INT(code, 0);
    CHECK(strstr(out, "\"RESULT\": \"from-the-worker\"") != NULL);
    zcert_destroy(&thief);
}

/* PUSHes a `msg_type` message in worker `worker`'s name about attempt 1 of `task`, as the
 * holder of `cert`. */
static void s_forge(testenv_t *env, zcert_t *cert, const char *broker_key, msg_type_t msg_type,
                    const char *worker, const char *task, const char *endpoint)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, msg_type);
    wire_put_str(w, FIELD_WORKER, worker);
    wire_put_str(w, FIELD_TASK, task);
    wire_put_int(w, FIELD_ATTEMPT, 1);
    wire_put_str(w, FIELD_OUTCOME, "done");
    wire_put_str(w, FIELD_SPECIALIST, "lone-agent");
    wire_put_str(w, FIELD_ENDPOINT, endpoint);
    s_push_as(env, cert, broker_key, w);
    wire_writer_destroy(&w);
}

/* After a broker restart, before the real worker says hello again, another authorised key
 * names the worker, its task and attempt in a hello and then a result: both are refused
 * (the attempt's key is stored with it), the task stays running, and the real worker
 * reattaches and finishes it. */
static void test_identity_survives_restart(testenv_t *env, pid_t *broker, client_t **client,
                                           const char *broker_key)
{
    char bind[400], go[400], command[600], path[700], state[64];
    snprintf(bind, sizeof bind, "ipc://%s/w3.sock", env->dir);
    snprintf(go, sizeof go, "%s/go-w3", env->dir);
    snprintf(command, sizeof command,
             "while [ ! -e '%s' ]; do sleep 0.05; done; echo 'RESULT: from-the-worker'", go);
    char *worker[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "lone-agent",
                      "--worker-id", "w3", "--bind", bind, "--in", env->in_ep,
                      "--heartbeat-ms", "100", "--", "/bin/sh", "-c", command, NULL};
    pid_t w3 = testenv_spawn(env, "w3", worker);
    bool queued = false;
    for (int i = 0; i < 50 && !queued; i++) {
        queued = testbroker_submit(*client, "owned-2", "lone-agent", NULL, NULL) == 0;
        if (!queued)
            testenv_sleep_ms(100);
    }
    CHECK(queued);
    for (int i = 0; i < 50 && strcmp(testbroker_state(*client, "owned-2", state, sizeof state),
                                     "running") != 0;
         i++)
        testenv_sleep_ms(100);
    CHECK_STR(state, "running");

    /* The real worker cannot answer while the broker restarts. */
    testenv_signal(w3, SIGSTOP);
    testenv_signal(*broker, SIGKILL);
    CHECK(testenv_wait(env, *broker, 5000) >= 0);
    client_destroy(client);
    *broker = testbroker_start(env, 200, "full");
    CHECK(*broker > 0);
    *client = testbroker_client(env);

    snprintf(path, sizeof path, "%s/keys/clients/thief_secret", env->home);
    zcert_t *thief = zcert_load(path);
    CHECK(thief != NULL);
    char thief_bind[400];
    snprintf(thief_bind, sizeof thief_bind, "ipc://%s/thief.sock", env->dir);
    int64_t refused_before = testbroker_rejected(*client, "foreign_key");
    s_forge(env, thief, broker_key, MSG_HELLO, "w3", "owned-2", thief_bind);
    s_forge(env, thief, broker_key, MSG_RESULT, "w3", "owned-2", thief_bind);
    testenv_sleep_ms(500);
    /* Running still, or queued again once its worker missed the restart's grace. */
    CHECK(strcmp(testbroker_state(*client, "owned-2", state, sizeof state), "done") != 0);
    CHECK(testbroker_rejected(*client, "foreign_key") >= refused_before + 2);

    testenv_signal(w3, SIGCONT);
    CHECK(testenv_write_file(go, "") == 0);
    for (int i = 0; i < 100 && strcmp(testbroker_state(*client, "owned-2", state, sizeof state),
                                      "done") != 0;
         i++)
        testenv_sleep_ms(100);
    CHECK_STR(state, "done");
    char *argv[] = {(char *)testenv_bin("pan"), "task", "show", "owned-2", "--json", NULL};
    char out[16384];
    int code = testenv_run(env, argv, out, sizeof out, 10000);
    if (code != 0 || strstr(out, "\"RESULT\": \"from-the-worker\"") == NULL)
        fprintf(stderr, "pan task show owned-2 (exit %d): %s\n", code, out);
    CHECK_INT(code, 0);
    CHECK(strstr(out, "\"RESULT\": \"from-the-worker\"") != NULL);
    zcert_destroy(&thief);
}

/* pan's stdout and stderr (s_pan_as). */
static char s_said[16384];

/* Runs pan as the holder of keys/clients/NAME_secret (`name` NULL: the default client),
 * stdout and stderr into s_said; returns its exit code. */
static int s_pan_as(testenv_t *env, const char *name, const char *first, ...)
{
    char *argv[24];
    int n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = "exec \"$0\" \"$@\" 2>&1";
    argv[n++] = (char *)testenv_bin("pan");
    argv[n++] = "--timeout-ms";
    argv[n++] = "2000";
    argv[n++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && n < 23)
        argv[n++] = arg;
    va_end(args);
    argv[n] = NULL;
    char cert[700];
    snprintf(cert, sizeof cert, "%s/keys/clients/%s_secret", env->home, name ? name : "");
    if (name != NULL)
        setenv("CLOISTER_CURVE_CERT", cert, 1);
    int code = testenv_run(env, argv, s_said, sizeof s_said, 10000);
    unsetenv("CLOISTER_CURVE_CERT");
    return code;
}

/* Checks that pan's last output holds `text`. */
static void s_check_said(const char *text)
{
    if (strstr(s_said, text) == NULL)
        fprintf(stderr, "pan said: %s\n(expected: %s)\n", s_said, text);
    CHECK(strstr(s_said, text) != NULL);
}

/* `pan doctor` asks the broker with the bus's keys, as `pan status` does: its broker check
 * passes against this CURVE broker, for the default client and for another party's key
 * (issue 37: it said "no answer" whenever CURVE was on). A key file that is missing is
 * the failure it names. */
static void test_doctor(testenv_t *env)
{
    s_pan_as(env, NULL, "doctor", NULL);
    s_check_said("broker");
    s_check_said("answers on");
    CHECK(strstr(s_said, "no answer") == NULL);
    CHECK_INT(s_pan_as(env, NULL, "keys", "add", "doc", "--role", "submitter", NULL), 0);
    testenv_sleep_ms(300); /* czmq's zauth notices the new authorized key */
    s_pan_as(env, "doc", "doctor", NULL);
    s_check_said("answers on");
    s_pan_as(env, "nobody", "doctor", NULL);
    s_check_said("the bus's keys: CURVE is on but there is no key pair");
}

/* Keys with roles: a submitter submits, reads, and cancels its own tasks, but cannot force
 * a merge or cancel someone else's task; a worker reads and works but cannot submit; a
 * submitter cannot act as a worker; a key made before roles keeps working as an admin,
 * with a warning in the log. */
static void test_key_roles(testenv_t *env, pid_t broker, const char *broker_key)
{
    CHECK_INT(s_pan(env, NULL, "keys", "add", "sub", "--role", "submitter", NULL), 0);
    CHECK_INT(s_pan(env, NULL, "keys", "add", "wk", "--role", "worker", NULL), 0);
    CHECK(s_pan(env, NULL, "keys", "add", "bad", "--role", "root", NULL) != 0);
    /* A key from before roles: its authorized file has no role. */
    char path[700];
    zcert_t *legacy = zcert_new();
    snprintf(path, sizeof path, "%s/keys/clients/legacy", env->home);
    CHECK(zcert_save(legacy, path) == 0);
    snprintf(path, sizeof path, "%s/keys/authorized/legacy", env->home);
    CHECK(zcert_save_public(legacy, path) == 0);
    zcert_destroy(&legacy);
    testenv_signal(broker, SIGHUP);
    testenv_sleep_ms(300);

    CHECK_INT(s_pan_as(env, "sub", "submit", "echo-agent", "--id", "by-sub", NULL), 0);
    CHECK_INT(s_pan_as(env, "sub", "task", "show", "by-sub", NULL), 0);
    CHECK(s_pan_as(env, "sub", "submit", "merge-agent", "--issue", "PAN-1", "--force", "--id",
                   "sub-force", NULL) != 0);
    s_check_said("a submitter key may not force a merge past the review gate (admin may)");
    CHECK_INT(s_pan_as(env, NULL, "submit", "idle-agent", "--id", "by-admin", NULL), 0);
    CHECK(s_pan_as(env, "sub", "cancel", "by-admin", NULL) != 0);
    s_check_said("a submitter key may not cancel or retry a task another key submitted");
    CHECK_INT(s_pan_as(env, "sub", "submit", "idle-agent", "--id", "sub-own", NULL), 0);
    CHECK_INT(s_pan_as(env, "sub", "cancel", "sub-own", NULL), 0);
    CHECK_INT(s_pan_as(env, NULL, "cancel", "by-admin", NULL), 0);

    CHECK(s_pan_as(env, "wk", "submit", "echo-agent", "--id", "by-worker", NULL) != 0);
    s_check_said("a worker key may not submit tasks (submitter, agent or admin may)");
    CHECK_INT(s_pan_as(env, "wk", "status", NULL), 0);

    /* A submitter's hello in a worker's name is refused: no worker joins. */
    client_t *client = testbroker_client(env);
    int64_t denied_before = testbroker_rejected(client, "denied");
    snprintf(path, sizeof path, "%s/keys/clients/sub_secret", env->home);
    path[strlen(path) - 7] = '\0';
    zcert_t *sub = zcert_load(path);
    CHECK(sub != NULL);
    char bind[400];
    snprintf(bind, sizeof bind, "ipc://%s/sub-worker.sock", env->dir);
    s_forge(env, sub, broker_key, MSG_HELLO, "sub-worker", "none", bind);
    testenv_sleep_ms(300);
    CHECK(testbroker_rejected(client, "denied") >= denied_before + 1);
    zcert_destroy(&sub);
    client_destroy(&client);

    CHECK_INT(s_pan_as(env, "legacy", "submit", "merge-agent", "--issue", "PAN-1", "--force",
                       "--id", "legacy-force", NULL),
              0);
    CHECK_INT(s_pan_as(env, NULL, "cancel", "legacy-force", NULL), 0);
    snprintf(path, sizeof path, "%s/broker.log", env->dir);
    char *log = testenv_read_file(path);
    CHECK(log != NULL && strstr(log, "has no role: it may do everything, as an admin") != NULL);
    free(log);
}

/* Waits until task `id` has ended (done or failed); its state into buf. */
static const char *s_wait_ended(client_t *client, const char *id, char *buf, size_t size)
{
    for (int i = 0; i < 150; i++) {
        testbroker_state(client, id, buf, size);
        if (strcmp(buf, "done") == 0 || strcmp(buf, "failed") == 0)
            break;
        testenv_sleep_ms(100);
    }
    return buf;
}

/* Every specialist over the authenticated bus: each says hello with its key, takes a task
 * and its result is committed (the review approves in mode "disabled"; the test-agent and
 * the merge-agent refuse a payload they cannot work on, which is a result too). */
static void test_specialists_end_to_end(testenv_t *env, client_t *client)
{
    static const struct {
        const char *program, *specialist, *payload, *ends;
    } cases[] = {
        {"cloister-review", "review-agent", "{}", "done"},
        {"cloister-test", "test-agent", "{\"branch\": \"main\"}", "failed"},
        {"cloister-merge", "merge-agent", "{\"target\": \"main\"}", "failed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char bind[400], id[64];
        snprintf(bind, sizeof bind, "ipc://%s/%s.sock", env->dir, cases[i].specialist);
        snprintf(id, sizeof id, "curve-%s", cases[i].specialist);
        char *argv[] = {(char *)testenv_bin(cases[i].program), "--worker-id", id, "--bind", bind,
                        "--in", env->in_ep, "--heartbeat-ms", "100", NULL};
        CHECK(testenv_spawn(env, id, argv) > 0);
        wire_writer_t *payload = wire_writer_new();
        json_t *json = json_loads(cases[i].payload, 0, NULL);
        CHECK(json != NULL && msgjson_to_map(payload, json) == 0);
        json_decref(json);
        submit_t task = {.id = id, .specialist = cases[i].specialist, .title = id};
        task.payload = wire_writer_data(payload, &task.payload_len);
        wire_msg_t *reply = NULL;
        CHECK_INT(client_submit(client, &task, NULL, 0, &reply), 0);
        wire_msg_destroy(&reply);
        wire_writer_destroy(&payload);
        char state[64];
        CHECK_STR(s_wait_ended(client, id, state, sizeof state), cases[i].ends);
    }
}

/* The broker refuses tcp://0.0.0.0 with CURVE off (before binding anything). */
static void test_refuses_insecure(void)
{
    testenv_t *env = testenv_new("curve-insecure");
    CHECK(env != NULL);
    char path[600], out[4096];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[security]\ncurve = false\n") == 0);
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1",
                    (char *)testenv_bin("cloister-broker"), "--in", "tcp://0.0.0.0:1",
                    "--events", env->events_ep, "--control", env->control_ep, "--home",
                    env->home, NULL};
    CHECK_INT(testenv_run(env, argv, out, sizeof out, 10000), 1);
    CHECK(strstr(out, "tcp://0.0.0.0:1 is reachable beyond this machine and [security] curve "
                      "is off") != NULL);
    char db[600];
    snprintf(db, sizeof db, "%s/broker.db", env->home);
    CHECK(access(db, F_OK) != 0); /* refused before opening anything */
    testenv_destroy(&env);
}

int main(void)
{
    test_refuses_insecure();

    testenv_t *env = testenv_new("curve");
    if (env == NULL)
        return 1;
    char path[600];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    /* The review mode "disabled" makes a review end at once, and lets merges through. */
    CHECK(testenv_write_file(path, "[security]\ncurve = true\n\n[review]\nmode = \"disabled\"\n\n"
                                   "[specialists.idle-agent]\nenabled = true\n") == 0);
    /* This process is an authorized client too (testbroker_start asks for stats). */
    CHECK_INT(curve_keys_init(), 0);
    config_t *config = NULL;
    CHECK_INT(config_load(path, &config), 0);
    const char *endpoints[] = {env->control_ep, NULL};
    CHECK_INT(curve_client_init(config, endpoints), 0);
    CHECK(curve_client() != NULL);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/keys/broker_secret", env->home);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

    /* Strangers: no key, or a key nobody authorized. */
    snprintf(path, sizeof path, "%s/keys/broker", env->home);
    zcert_t *broker_cert = zcert_load(path);
    CHECK(broker_cert != NULL);
    const char *broker_key = broker_cert ? zcert_public_txt(broker_cert) : "";
    zcert_t *unknown = zcert_new();
    CHECK(!s_stats_answered(env, NULL, NULL));
    CHECK(!s_stats_answered(env, unknown, broker_key));
    CHECK(!s_stranger_heard(env, "from-a-stranger"));
    client_t *client = testbroker_client(env);
    char state[64];
    CHECK(testbroker_task_unknown(client, "from-a-stranger"));
    /* ... and the broker counted the handshakes it refused. */
    wire_writer_t *stats = wire_writer_new();
    wire_writer_start(stats, MSG_STATS);
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, stats, &reply), 0);
    const msgpack_object *refused = wire_map_get_key(
        wire_map_get(reply ? wire_msg_object(reply, FIELD_DATA) : NULL, FIELD_REJECTED),
        "unauthenticated");
    CHECK(refused != NULL && refused->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
          refused->via.u64 >= 3);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&stats);

    /* The default client, through pan. */
    CHECK_INT(s_pan(env, NULL, "status", NULL), 0);
    test_doctor(env);

    /* Another party's key works until it is revoked. */
    CHECK_INT(s_pan(env, NULL, "keys", "add", "ext", NULL), 0);
    char ext[700];
    snprintf(ext, sizeof ext, "%s/keys/clients/ext_secret", env->home);
    testenv_signal(broker, SIGHUP);
    testenv_sleep_ms(300);
    CHECK_INT(s_pan(env, ext, "status", NULL), 0);
    CHECK_INT(s_pan(env, NULL, "keys", "revoke", "ext", NULL), 0);
    testenv_signal(broker, SIGHUP);
    testenv_sleep_ms(300);
    CHECK(s_pan(env, ext, "status", NULL) != 0);
    CHECK_INT(s_pan(env, NULL, "status", NULL), 0);

    /* The generic worker, end to end over the authenticated bus. */
    char bind[400];
    snprintf(bind, sizeof bind, "ipc://%s/w1.sock", env->dir);
    char *worker[] = {(char *)testenv_bin("cloister-worker"), "--specialist", "echo-agent",
                      "--worker-id", "w1", "--bind", bind, "--in", env->in_ep,
                      "--heartbeat-ms", "100", "--", "/bin/sh", "-c", "echo 'RESULT: ok'",
                      NULL};
    testenv_spawn(env, "w1", worker);
    bool joined = false;
    for (int i = 0; i < 50 && !joined; i++) {
        joined = testbroker_submit(client, "e2e-1", "echo-agent", NULL, NULL) == 0;
        if (!joined)
            testenv_sleep_ms(100);
    }
    CHECK(joined);
    bool done = false;
    for (int i = 0; i < 100 && !done; i++) {
        done = strcmp(testbroker_state(client, "e2e-1", state, sizeof state), "done") == 0;
        if (!done)
            testenv_sleep_ms(100);
    }
    CHECK(done);

    /* The worker's task socket admits only the broker: a stranger who knows the worker's
     * id (events name it) cannot hand it a task, with no key or with its own. */
    for (int keyed = 0; keyed < 2; keyed++) {
        zsock_t *push = zsock_new(ZMQ_PUSH);
        zsock_set_linger(push, 0);
        if (keyed) {
            zcert_apply(unknown, push);
            snprintf(path, sizeof path, "%s/keys/client", env->home);
            zcert_t *worker_cert = zcert_load(path); /* the worker's own public key */
            zsock_set_curve_serverkey(push, worker_cert ? zcert_public_txt(worker_cert) : "");
            zcert_destroy(&worker_cert);
        }
        zsock_connect(push, "%s", bind);
        wire_writer_t *w = wire_writer_new();
        wire_writer_start(w, MSG_TASK);
        wire_put_str(w, FIELD_WORKER, "w1");
        wire_put_str(w, FIELD_ID, keyed ? "stray-keyed" : "stray-plain");
        wire_put_int(w, FIELD_ATTEMPT, 1);
        wire_put_str(w, FIELD_SPECIALIST, "echo-agent");
        size_t len;
        const void *data = wire_writer_data(w, &len);
        zframe_t *frame = zframe_new(data, len);
        zframe_send(&frame, push, ZFRAME_DONTWAIT);
        wire_writer_destroy(&w);
        testenv_sleep_ms(500);
        zsock_destroy(&push);
    }
    snprintf(path, sizeof path, "%s/w1.log", env->dir);
    char *log = testenv_read_file(path);
    CHECK(log != NULL && strstr(log, "task e2e-1") != NULL);
    CHECK(log != NULL && strstr(log, "stray") == NULL);
    free(log);

    test_results_bound_to_key(env, broker, client, broker_key);
    test_identity_survives_restart(env, &broker, &client, broker_key);
    test_key_roles(env, broker, broker_key);
    test_specialists_end_to_end(env, client);

    zcert_destroy(&unknown);
    zcert_destroy(&broker_cert);
    client_destroy(&client);
    config_destroy(&config);
    testenv_destroy(&env);
    return check_exit_code("test_curve");
}
