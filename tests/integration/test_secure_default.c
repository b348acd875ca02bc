/* test_secure_default: on a shared machine, the local default keeps other users out.
 *
 *   private_home   a state home left open (0755, its database 0644) is narrowed to 0700 and
 *                  0600 when the broker starts; what the programs make there is 0600
 *   tcp_is_curve   the broker on TCP loopback with no [security] curve setting is CURVE:
 *                  a client without the home's keys gets no answer, pan with them works; the
 *                  keys are made by whoever starts first (here a client, before the broker)
 *   plain_tcp      [security] curve = false on TCP is an explicit choice: it works, and the
 *                  broker warns at start that every user of the machine can reach it
 *   mismatch       pan and the broker disagreeing on CURVE, or the broker refusing pan's
 *                  key, is said as such, not as "no reply within 3s"
 */
#include "check.h"
#include "curve.h"
#include "testbroker.h"
#include "testenv.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The permission bits of `path`, or -1 when it does not exist. */
static int s_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

static void test_private_home(void)
{
    testenv_t *env = testenv_new("secure-home");
    CHECK(env != NULL);
    pid_t broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    testenv_signal(broker, SIGTERM);
    CHECK(testenv_wait(env, broker, 10000) >= 0);
    char db[600];
    snprintf(db, sizeof db, "%s/broker.db", env->home);
    CHECK_INT(s_mode(db), 0600);
    CHECK_INT(s_mode(env->home), 0700);

    /* A home from before the rule. */
    CHECK(chmod(env->home, 0755) == 0 && chmod(db, 0644) == 0);
    broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    CHECK_INT(s_mode(env->home), 0700);
    CHECK_INT(s_mode(db), 0600);
    /* What pan makes there (keys) is private too. */
    char *argv[] = {(char *)testenv_bin("pan"), "keys", "init", NULL};
    char out[4096];
    CHECK_INT(testenv_run(env, argv, out, sizeof out, 10000), 0);
    char path[700];
    snprintf(path, sizeof path, "%s/keys/authorized/client", env->home);
    CHECK_INT(s_mode(path), 0600);
    testenv_destroy(&env);
}

/* A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick). */
static int s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Points the environment's three endpoints (and CLOISTER_IN/EVENTS/CONTROL) at free TCP
 * ports on loopback. */
static void s_use_tcp(testenv_t *env)
{
    char *endpoints[] = {env->in_ep, env->events_ep, env->control_ep};
    const char *names[] = {"CLOISTER_IN", "CLOISTER_EVENTS", "CLOISTER_CONTROL"};
    for (int i = 0; i < 3; i++) {
        int port = s_free_port();
        CHECK(port > 0);
        snprintf(endpoints[i], sizeof env->in_ep, "tcp://127.0.0.1:%d", port);
        setenv(names[i], endpoints[i], 1);
    }
}

/* Sends `stats` on a plain REQ socket (no key): true when it was answered within 1 s. */
static bool s_plain_stats_answered(const char *control)
{
    zsock_t *req = zsock_new(ZMQ_REQ);
    zsock_set_linger(req, 0);
    zsock_connect(req, "%s", control);
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

static void test_tcp_is_curve(void)
{
    testenv_t *env = testenv_new("secure-tcp");
    CHECK(env != NULL);
    unsetenv("CLOISTER_CURVE");
    s_use_tcp(env);
    /* This process is a local client that starts before the broker: it makes the keys. */
    const char *endpoints[] = {env->in_ep, env->events_ep, env->control_ep, NULL};
    CHECK_INT(curve_client_init(NULL, endpoints), 0);
    CHECK(curve_client() != NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/keys/broker", env->home);
    CHECK(access(path, F_OK) == 0);

    pid_t broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    CHECK(!s_plain_stats_answered(env->control_ep));
    char *argv[] = {(char *)testenv_bin("pan"), "status", NULL};
    char out[8192];
    CHECK_INT(testenv_run(env, argv, out, sizeof out, 10000), 0);
    snprintf(path, sizeof path, "%s/broker.log", env->dir);
    char *log = testenv_read_file(path);
    CHECK(log != NULL && strstr(log, "CURVE on") != NULL);
    free(log);
    testenv_destroy(&env);
}

static void test_plain_tcp(void)
{
    testenv_t *env = testenv_new("secure-plain");
    CHECK(env != NULL);
    s_use_tcp(env);
    setenv("CLOISTER_CURVE", "0", 1); /* the explicit choice, for this process and its children */
    pid_t broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    CHECK(s_plain_stats_answered(env->control_ep));
    char path[700];
    snprintf(path, sizeof path, "%s/broker.log", env->dir);
    char *log = testenv_read_file(path);
    CHECK(log != NULL && strstr(log, "CURVE is off on tcp://127.0.0.1:") != NULL &&
          strstr(log, "every user of this machine") != NULL);
    free(log);
    unsetenv("CLOISTER_CURVE");
    testenv_destroy(&env);
}

/* Runs pan status with CLOISTER_CURVE = `curve` (NULL: unset) and CLOISTER_CURVE_CERT =
 * `cert` (NULL: unset); its exit code, stdout and stderr in out. */
static int s_pan_status(testenv_t *env, const char *curve, const char *cert, char *out, size_t size)
{
    char *argv[] = {"/bin/sh",
                    "-c",
                    "exec \"$0\" \"$@\" 2>&1",
                    (char *)testenv_bin("pan"),
                    "--timeout-ms",
                    "1500",
                    "status",
                    NULL};
    if (curve != NULL)
        setenv("CLOISTER_CURVE", curve, 1);
    if (cert != NULL)
        setenv("CLOISTER_CURVE_CERT", cert, 1);
    int code = testenv_run(env, argv, out, size, 10000);
    unsetenv("CLOISTER_CURVE");
    unsetenv("CLOISTER_CURVE_CERT");
    return code;
}

static void s_check_said(const char *out, const char *text)
{
    if (strstr(out, text) == NULL)
        fprintf(stderr, "pan said: %s\n(expected: %s)\n", out, text);
    CHECK(strstr(out, text) != NULL);
}

static void test_mismatch(void)
{
    testenv_t *env = testenv_new("secure-mismatch");
    CHECK(env != NULL);
    s_use_tcp(env);
    char out[8192];
    /* A plain broker, pan with CURVE. */
    setenv("CLOISTER_CURVE", "0", 1);
    pid_t broker = testbroker_start(env, 0, NULL);
    unsetenv("CLOISTER_CURVE");
    CHECK(broker > 0);
    CHECK_INT(s_pan_status(env, "1", NULL, out, sizeof out), 3);
    s_check_said(out, "CURVE is on here and off there");
    testenv_signal(broker, SIGKILL);
    CHECK(testenv_wait(env, broker, 5000) >= 0);

    /* A CURVE broker, pan without. */
    char *keys[] = {(char *)testenv_bin("pan"), "keys", "init", NULL};
    CHECK_INT(testenv_run(env, keys, out, sizeof out, 10000), 0);
    setenv("CLOISTER_CURVE", "1", 1);
    broker = testbroker_spawn(env, 0, NULL);
    unsetenv("CLOISTER_CURVE");
    CHECK(broker > 0);
    bool up = false; /* once a client with the keys is answered */
    for (int i = 0; i < 20 && !up; i++)
        up = s_pan_status(env, "1", NULL, out, sizeof out) == 0;
    CHECK(up);
    CHECK_INT(s_pan_status(env, "0", NULL, out, sizeof out), 3);
    s_check_said(out, "CURVE is off here and on there");

    /* A key the broker does not know. */
    zcert_t *stranger = zcert_new();
    char path[700];
    snprintf(path, sizeof path, "%s/stranger", env->dir);
    CHECK(zcert_save(stranger, path) == 0);
    zcert_destroy(&stranger);
    snprintf(path, sizeof path, "%s/stranger_secret", env->dir);
    CHECK_INT(s_pan_status(env, "1", path, out, sizeof out), 3);
    s_check_said(out, "refused this client's CURVE key");

    /* Asked again by the same process (pan top's next frame, on a new socket): said again,
     * not "no reply" (the new socket's handshake watch used to collide with the old one's). */
    char *top[] = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", (char *)testenv_bin("pan"),
                   "--timeout-ms", "1500", "top", "--frames", "3", "--interval", "1", NULL};
    setenv("CLOISTER_CURVE", "1", 1);
    setenv("CLOISTER_CURVE_CERT", path, 1);
    testenv_run(env, top, out, sizeof out, 20000);
    unsetenv("CLOISTER_CURVE");
    unsetenv("CLOISTER_CURVE_CERT");
    s_check_said(out, "refused this client's CURVE key");
    if (strstr(out, "no reply") != NULL)
        fprintf(stderr, "pan top said: %s\n", out);
    CHECK(strstr(out, "no reply") == NULL);

    /* Another home holding only the broker's public key, copied (a client of a broker on
     * another host): the copied key is kept -- it was replaced by a new pair, and every
     * request then went unanswered -- and the home's own new client key, which the broker
     * does not list, is refused as such. */
    char other[700], copied[800], before[8192];
    snprintf(other, sizeof other, "%s/other-home", env->dir);
    snprintf(copied, sizeof copied, "%s/keys", other);
    CHECK(mkdir(other, 0700) == 0 && mkdir(copied, 0700) == 0);
    snprintf(copied, sizeof copied, "%s/keys/broker", other);
    char *mine = testenv_read_file(strcat(strcpy(path, env->home), "/keys/broker"));
    CHECK(mine != NULL && testenv_write_file(copied, mine) == 0);
    snprintf(before, sizeof before, "%s", mine);
    free(mine);
    char *home = getenv("PANOPTICON_HOME") ? strdup(getenv("PANOPTICON_HOME")) : NULL;
    setenv("PANOPTICON_HOME", other, 1);
    CHECK_INT(s_pan_status(env, "1", NULL, out, sizeof out), 3);
    if (home != NULL)
        setenv("PANOPTICON_HOME", home, 1);
    free(home);
    s_check_said(out, "refused this client's CURVE key");
    char *after = testenv_read_file(copied);
    CHECK(after != NULL && strcmp(after, before) == 0);
    free(after);
    snprintf(copied, sizeof copied, "%s/keys/trusted/broker", other);
    CHECK(access(copied, R_OK) == 0); /* what a worker's task socket trusts */
    testenv_destroy(&env);
}

int main(int argc, char **argv)
{
    struct {
        const char *name;
        void (*run)(void);
    } scenarios[] = {
        {"private_home", test_private_home},
        {"plain_tcp", test_plain_tcp},
        {"mismatch", test_mismatch},
        {"tcp_is_curve", test_tcp_is_curve},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        bool wanted = argc < 2;
        for (int j = 1; j < argc; j++)
            wanted = wanted || strcmp(argv[j], scenarios[i].name) == 0;
        if (wanted)
            scenarios[i].run();
    }
    return check_exit_code("test_secure_default");
}
