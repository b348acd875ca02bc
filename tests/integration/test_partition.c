/* test_partition: network partitions between the broker and a worker on another "host" --
 * here a network namespace of the test's own, joined to this one by a veth pair, with
 * `tc netem` for the faults (or, without netem, iptables and netfault: see s_has_netem
 * below). The broker listens over TCP (so with CURVE) on the host side's
 * address; workers and a follower run in the namespace (`ip netns exec`) and reach it
 * through the pair, as a worker on another machine would.
 *
 *   cut       a worker cut off mid-task (100 % loss both ways) past its lease, then healed:
 *             the broker declares it lost, a worker on the host runs attempt 2, the cut-off
 *             attempt makes no side effect (its command makes one only once `pan task
 *             fence` passes), its late result is refused (acknowledged, not applied:
 *             stats.rejected.stale_result; the task is done once, by attempt 2), and the
 *             worker says hello again and runs a new task
 *   lossy     30 % loss and 200 ms delay on the namespace's side for 15 s, with the default
 *             heartbeat (1000 ms; a worker on another address may miss 10): every task
 *             submitted meanwhile is done exactly once (one side-effect line each), and no
 *             worker is declared lost
 *   events    `pan events --follow --since 0 --json`, run in the namespace from the start
 *             (so through the other two as well), cut off while a burst of events is
 *             published -- more than the publisher holds for it, so the last are dropped
 *             -- then healed, with no event after: it prints every event once, in order
 *
 * Needs root and iproute2 (`ip netns`, `tc`); on a machine where a namespace cannot be made
 * it says so and exits 77 (skipped). Everything it makes is named after its pid
 * (namespace cloister-part-PID, links cpHPID/cpNPID, the network 10.A.B.0/24) and removed
 * at exit, a failed check included. Run it alone with `build/tests/test_partition`, or
 * `cd build && ctest -R partition --output-on-failure` (as root). */
#include "check.h"
#include "clock.h"
#include "curve.h"
#include "failure.h"
#include "msgjson.h"
#include "testbroker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The follower is cut off while at least BURST_MIN events are published (as fast as
 * submits go), more than the broker's publisher holds for it (10,000 messages), so the
 * last ones are dropped; and for BURST_MS at least. After the cut, TCP's retransmission
 * backoff (doubling from 200 ms) delays the healed connection by as much again: the
 * follower's replays catch it up meanwhile. */
#define BURST_MS 3000
#define BURST_MIN 14000
#define BURST_MAX 40000
/* How long the lossy link lasts, and how many tasks are submitted over it. */
#define LOSSY_MS 15000
#define LOSSY_TASKS 24

static testenv_t *s_env;
static char s_netns[64];     /* "" until made */
static char s_host_link[16]; /* the host's end of the pair */
static char s_ns_link[16];   /* the namespace's end */
static char s_host_ip[32];   /* the broker listens here */
static char s_ns_ip[32];     /* the workers' task sockets */
static const char *s_ip;     /* the path of iproute2's `ip` (children are exec'd by path) */

/* Runs a shell command made from fmt; returns its exit code (-1: could not run). */
static int s_sh(const char *fmt, ...)
{
    char command[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(command, sizeof command, fmt, args);
    va_end(args);
    int status = system(command);
    int code = status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
    if (code != 0)
        fprintf(stderr, "test_partition: `%s` exited %d\n", command, code);
    return code;
}

/* Removes the namespace and the pair (deleting either end deletes both); at exit too. */
static void s_netns_remove(void)
{
    if (s_netns[0] == '\0')
        return;
    s_sh("ip link del %s 2>/dev/null || true", s_host_link);
    s_sh("ip netns del %s", s_netns);
    s_netns[0] = '\0';
}

/* Makes the namespace; false (nothing made) when this machine cannot. */
static bool s_netns_add(void)
{
    const char *paths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0] && s_ip == NULL; i++)
        if (access(paths[i], X_OK) == 0)
            s_ip = paths[i];
    if (geteuid() != 0 || s_ip == NULL)
        return false;
    int pid = (int)getpid();
    snprintf(s_netns, sizeof s_netns, "cloister-part-%d", pid);
    if (s_sh("ip netns add %s", s_netns) != 0) {
        s_netns[0] = '\0';
        return false;
    }
    atexit(s_netns_remove);
    return true;
}

/* Links the namespace to the host: a veth pair on 10.A.B.0/24 (A, B from the pid; .1 the
 * host, .2 the namespace), both ends up, and the namespace's loopback. */
static bool s_netns_link(void)
{
    int pid = (int)getpid();
    snprintf(s_host_link, sizeof s_host_link, "cpH%d", pid);
    snprintf(s_ns_link, sizeof s_ns_link, "cpN%d", pid);
    int a = 100 + (pid >> 8) % 100, b = pid & 255;
    snprintf(s_host_ip, sizeof s_host_ip, "10.%d.%d.1", a, b);
    snprintf(s_ns_ip, sizeof s_ns_ip, "10.%d.%d.2", a, b);
    return s_sh("ip link add %s type veth peer name %s", s_host_link, s_ns_link) == 0 &&
           s_sh("ip link set %s netns %s", s_ns_link, s_netns) == 0 &&
           s_sh("ip addr add %s/24 dev %s", s_host_ip, s_host_link) == 0 &&
           s_sh("ip link set %s up", s_host_link) == 0 &&
           s_sh("ip -n %s addr add %s/24 dev %s", s_netns, s_ns_ip, s_ns_link) == 0 &&
           s_sh("ip -n %s link set %s up", s_netns, s_ns_link) == 0 &&
           s_sh("ip -n %s link set lo up", s_netns) == 0;
}

/* The faults. netem (sch_netem) where the kernel has it. Otherwise iptables in the
 * namespace (its tables are its own): a cut drops every packet, and the lossy link hands
 * what the namespace sends to netfault (tests/soak/netfault.c, through an NFQUEUE queue),
 * which drops some and lets the others through 200 ms late; where netfault was not built
 * (no libnetfilter_queue), iptables drops them at random, with no delay. */
static bool s_has_netem;
static bool s_has_netfault;
static pid_t s_netfault; /* while the lossy link lasts */

static void s_detect_netem(void)
{
    s_has_netem = s_sh("ip netns exec %s tc qdisc add dev %s root netem delay 1ms 2>/dev/null",
                       s_netns, s_ns_link) == 0 &&
                  s_sh("ip netns exec %s tc qdisc del dev %s root", s_netns, s_ns_link) == 0;
    s_has_netfault = !s_has_netem && access(testenv_bin("netfault"), X_OK) == 0;
    if (s_has_netfault)
        fprintf(stderr, "test_partition: this kernel has no netem qdisc: the lossy link's loss "
                        "and delay are made by netfault (NFQUEUE), a cut by iptables\n");
    else if (!s_has_netem)
        fprintf(stderr, "test_partition: this kernel has no netem qdisc and netfault was not "
                        "built: faults are made with iptables in the namespace, and the lossy "
                        "link has no added delay\n");
}

/* Cuts the namespace off: every packet either way is lost. */
static bool s_cut(void)
{
    if (s_has_netem)
        return s_sh("ip netns exec %s tc qdisc replace dev %s root netem loss 100%%", s_netns,
                    s_ns_link) == 0 &&
               s_sh("tc qdisc replace dev %s root netem loss 100%%", s_host_link) == 0;
    return s_sh("ip netns exec %s iptables -I INPUT -i %s -j DROP", s_netns, s_ns_link) == 0 &&
           s_sh("ip netns exec %s iptables -I OUTPUT -o %s -j DROP", s_netns, s_ns_link) == 0;
}

static bool s_netfault_ready(void *unused)
{
    (void)unused;
    char path[600];
    snprintf(path, sizeof path, "%s/netfault.log", s_env->dir);
    char *out = testenv_read_file(path);
    bool ready = out != NULL && strstr(out, "ready\n") != NULL;
    free(out);
    return ready;
}

/* netfault in the namespace on queue 1, then what leaves the namespace goes to it. */
static bool s_netfault_start(void)
{
    char *argv[] = {(char *)s_ip, "netns", "exec", s_netns, (char *)testenv_bin("netfault"),
                    "--queue", "1", "--delay-ms", "200", "--loss-percent", "30", NULL};
    s_netfault = testenv_spawn(s_env, "netfault", argv);
    return s_netfault > 0 && testenv_wait_until(s_netfault_ready, NULL, 5000) &&
           s_sh("ip netns exec %s iptables -I OUTPUT -o %s -j NFQUEUE --queue-num 1 "
                "--queue-bypass", s_netns, s_ns_link) == 0;
}

/* 30 % loss and 200 ms delay on what leaves the namespace (the delay with netem or
 * netfault). */
static bool s_lossy(void)
{
    if (s_has_netem)
        return s_sh("ip netns exec %s tc qdisc replace dev %s root netem delay 200ms loss 30%%",
                    s_netns, s_ns_link) == 0;
    if (s_has_netfault)
        return s_netfault_start();
    return s_sh("ip netns exec %s iptables -I OUTPUT -o %s -m statistic --mode random "
                "--probability 0.3 -j DROP",
                s_netns, s_ns_link) == 0;
}

/* Takes every fault off: the link is healed. */
static bool s_heal(void)
{
    if (s_has_netem)
        return s_sh("ip netns exec %s tc qdisc del dev %s root 2>/dev/null || true", s_netns,
                    s_ns_link) == 0 &&
               s_sh("tc qdisc del dev %s root 2>/dev/null || true", s_host_link) == 0;
    bool healed = s_sh("ip netns exec %s iptables -F INPUT", s_netns) == 0 &&
                  s_sh("ip netns exec %s iptables -F OUTPUT", s_netns) == 0;
    if (s_netfault > 0) {
        testenv_signal(s_netfault, SIGTERM);
        s_netfault = 0;
    }
    return healed;
}

/* A free TCP port on the host's address (bound once, then let go). */
static int s_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, s_host_ip, &addr.sin_addr);
    socklen_t len = sizeof addr;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Points the environment (and so every child) at the broker's tcp endpoints. */
static void s_tcp_endpoints(void)
{
    struct {
        char *ep;
        const char *var;
    } sockets[] = {{s_env->in_ep, "CLOISTER_IN"},
                   {s_env->events_ep, "CLOISTER_EVENTS"},
                   {s_env->control_ep, "CLOISTER_CONTROL"}};
    for (size_t i = 0; i < 3; i++) {
        int port = s_free_port();
        CHECK(port > 0);
        snprintf(sockets[i].ep, sizeof s_env->in_ep, "tcp://%s:%d", s_host_ip, port);
        setenv(sockets[i].var, sockets[i].ep, 1);
    }
}

/* The command every worker runs: a start line, then for cut-* tasks a wait for the go
 * file and the fence (whose exit code it notes), then the side effect. */
static void s_script(char *buf, size_t size)
{
    const char *d = s_env->dir;
    snprintf(buf, size,
             "T=\"$CLOISTER_TASK_ID $CLOISTER_TASK_ATTEMPT\"\n"
             "echo \"$T\" >> '%s/starts.log'\n"
             "case \"$CLOISTER_TASK_ID\" in\n"
             "cut-*)\n"
             "  while [ ! -e \"%s/go-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\" ]; do sleep 0.05; done\n"
             "  '%s' --timeout-ms 1000 task fence \"$CLOISTER_TASK_ID\" \"$CLOISTER_TASK_ATTEMPT\"\n"
             "  rc=$?\n"
             "  echo \"$T fence $rc\" >> '%s/fences.log'\n"
             "  [ $rc -eq 0 ] || exit 1 ;;\n"
             "load-*) sleep 0.3 ;;\n"
             "esac\n"
             "echo \"$T\" >> '%s/effects.log'\n"
             "echo \"RAN_ATTEMPT: $CLOISTER_TASK_ATTEMPT\"\n",
             d, d, testenv_bin("pan"), d, d);
}

/* Starts worker `id`: in the namespace (its task socket on the namespace's address), or on
 * the host (an ipc task socket). */
static pid_t s_worker(const char *id, bool in_netns)
{
    char bind[400], script[2048];
    if (in_netns)
        snprintf(bind, sizeof bind, "tcp://%s:*", s_ns_ip);
    else
        snprintf(bind, sizeof bind, "ipc://%s/%s.sock", s_env->dir, id);
    s_script(script, sizeof script);
    char *argv[] = {(char *)s_ip, "netns", "exec", s_netns,
                    (char *)testenv_bin("cloister-worker"), "--specialist", "part-agent",
                    "--worker-id", (char *)id, "--bind", bind, "--", "/bin/sh", "-c", script,
                    NULL};
    return testenv_spawn(s_env, id, in_netns ? argv : argv + 4);
}

/* ---- the broker's events, read by replay ---- */

static int s_collect(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)event;
    json_t *decoded = msgjson_from_raw(raw, len);
    if (decoded != NULL)
        json_array_append_new(arg, decoded);
    return 0;
}

/* Every stored event, oldest first (caller owns the array). */
static json_t *s_events(void)
{
    json_t *events = json_array();
    client_t *control = testbroker_client(s_env);
    client_events_t *replay = client_events_new(NULL, NULL);
    if (control == NULL || replay == NULL ||
        client_events_run(replay, control, 0, false, NULL, s_collect, events) != 0)
        fprintf(stderr, "test_partition: the replay failed: %s\n", failure_message());
    client_events_destroy(&replay);
    client_destroy(&control);
    return events;
}

static const char *s_str(const json_t *event, const char *key)
{
    const json_t *value = json_object_get(event, key);
    return json_is_string(value) ? json_string_value(value) : "";
}

/* Does `event` match: `name`, and task/worker when not NULL? */
static bool s_match(const json_t *event, const char *name, const char *task, const char *worker)
{
    return strcmp(s_str(event, "event"), name) == 0 &&
           (task == NULL || strcmp(s_str(event, "task"), task) == 0) &&
           (worker == NULL || strcmp(s_str(event, "worker"), worker) == 0);
}

/* How many events match, from seq `after` on. */
static int s_count(const json_t *events, int64_t after, const char *name, const char *task,
                   const char *worker)
{
    int n = 0;
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event) {
        if (json_integer_value(json_object_get(event, "seq")) > after &&
            s_match(event, name, task, worker))
            n++;
    }
    return n;
}

/* The first matching event after seq `after` (a new reference), waiting up to timeout_ms;
 * NULL if none came. */
static json_t *s_wait_event(int64_t after, const char *name, const char *task,
                            const char *worker, int timeout_ms)
{
    for (int waited = 0;; waited += 200) {
        json_t *events = s_events();
        size_t i;
        json_t *event, *found = NULL;
        json_array_foreach(events, i, event) {
            if (found == NULL && json_integer_value(json_object_get(event, "seq")) > after &&
                s_match(event, name, task, worker))
                found = json_incref(event);
        }
        json_decref(events);
        if (found != NULL || waited >= timeout_ms) {
            if (found == NULL)
                fprintf(stderr, "test_partition: no %s of %s/%s within %d ms\n", name,
                        task ? task : "*", worker ? worker : "*", timeout_ms);
            return found;
        }
        testenv_sleep_ms(200);
    }
}

/* s_wait_event() for a check that only needs to know whether it came. */
static bool s_saw_event(int64_t after, const char *name, const char *task, const char *worker,
                        int timeout_ms)
{
    json_t *found = s_wait_event(after, name, task, worker, timeout_ms);
    json_decref(found);
    return found != NULL;
}

static int64_t s_seq(const json_t *event)
{
    return json_integer_value(json_object_get(event, "seq"));
}

/* How many lines of the file `name` in the test directory are exactly `line`. */
static int s_lines(const char *name, const char *line)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", s_env->dir, name);
    char *text = testenv_read_file(path);
    int n = 0;
    size_t want = strlen(line);
    for (const char *at = text; at != NULL && *at != '\0';) {
        size_t len = strcspn(at, "\n");
        n += len == want && strncmp(at, line, len) == 0;
        at += len + (at[len] == '\n');
    }
    free(text);
    return n;
}

static bool s_line_seen(void *arg)
{
    const char *const *file_line = arg;
    return s_lines(file_line[0], file_line[1]) > 0;
}

/* Waits up to timeout_ms until the file `name` has the line `line`. */
static bool s_wait_line(const char *name, const char *line, int timeout_ms)
{
    const char *file_line[] = {name, line};
    return testenv_wait_until(s_line_seen, (void *)file_line, timeout_ms);
}

static void s_go(const char *task, int attempt)
{
    char path[600];
    snprintf(path, sizeof path, "%s/go-%s-%d", s_env->dir, task, attempt);
    CHECK(testenv_write_file(path, "go\n") == 0);
}

/* Runs `pan task fence TASK ATTEMPT` in the namespace; its exit code. */
static int s_fence_from_netns(const char *task, const char *attempt)
{
    char *argv[] = {(char *)s_ip, "netns", "exec", s_netns, (char *)testenv_bin("pan"),
                    "task", "fence", (char *)task, (char *)attempt, NULL};
    char out[4096];
    return testenv_run(s_env, argv, out, sizeof out, 15000);
}

/* Has the broker acknowledged and ignored a result (stats.rejected.stale_result)? */
static bool s_stale_result_seen(void *client)
{
    return testbroker_rejected(client, "stale_result") > 0;
}

/* (a) Cut off mid-task past the lease, then healed. */
static void s_scenario_cut(client_t *client, pid_t *host_worker)
{
    int64_t t0 = clock_now_ms();
    CHECK_INT(testbroker_submit(client, "cut-1", "part-agent", NULL, NULL), 0);
    CHECK(s_wait_line("starts.log", "cut-1 1", 10000));
    CHECK(s_cut());
    int64_t cut_at = clock_now_ms();
    *host_worker = s_worker("wh", false);
    CHECK(*host_worker > 0);
    /* A worker on another address is allowed remote_heartbeat_misses (10) intervals. */
    json_t *lost = s_wait_event(0, "worker.lost", NULL, "wn", 20000);
    CHECK(lost != NULL);
    int64_t lost_after = clock_now_ms() - cut_at;
    json_t *second = s_wait_event(0, "task.dispatched", "cut-1", "wh", 10000);
    CHECK(second != NULL);
    CHECK_INT(json_integer_value(json_object_get(second, "attempt")), 2);
    s_go("cut-1", 2);
    json_t *done = s_wait_event(0, "task.done", "cut-1", NULL, 10000);
    CHECK(done != NULL);
    /* Attempt 1 goes on behind the partition: its fence cannot reach the broker (exit 3),
     * so it makes no side effect, and its result waits in its worker. */
    s_go("cut-1", 1);
    CHECK(s_wait_line("fences.log", "cut-1 1 fence 3", 10000));
    int64_t healed_at = clock_now_ms();
    CHECK(s_heal());
    json_t *rejoined = s_wait_event(s_seq(lost), "worker.joined", NULL, "wn", 15000);
    CHECK(rejoined != NULL);
    /* From the namespace now, the fence answers: attempt 1 no longer holds the task. */
    CHECK_INT(s_fence_from_netns("cut-1", "1"), 1);

    /* The worker resynchronised: with the host's worker gone, it runs a new task. */
    testenv_signal(*host_worker, SIGTERM);
    CHECK(s_saw_event(0, "worker.left", NULL, "wh", 10000));
    CHECK_INT(testbroker_submit(client, "after-cut", "part-agent", NULL, NULL), 0);
    CHECK(s_saw_event(0, "task.done", "after-cut", "wn", 15000));

    /* Its late result (attempt 1's, resent once healed) was refused: one result, attempt
     * 2's, and one side effect. */
    CHECK(testenv_wait_until(s_stale_result_seen, client, 10000));
    json_t *events = s_events();
    CHECK_INT(s_count(events, 0, "task.done", "cut-1", NULL), 1);
    CHECK_INT(s_count(events, 0, "task.failed", "cut-1", NULL), 0);
    CHECK_INT(s_count(events, 0, "task.dispatched", "cut-1", NULL), 2);
    json_decref(events);
    if (done != NULL) {
        CHECK_STR(s_str(done, "worker"), "wh");
        CHECK_STR(s_str(json_object_get(done, "result"), "RAN_ATTEMPT"), "2");
    }
    CHECK_INT(s_lines("effects.log", "cut-1 2"), 1);
    CHECK_INT(s_lines("effects.log", "cut-1 1"), 0);
    fprintf(stderr,
            "test_partition: cut: lost %.1f s after the cut, attempt 2 done, healed after "
            "%.1f s, rejoined; %.1f s in all\n",
            (double)lost_after / 1000,
            (double)(healed_at - cut_at) / 1000, (double)(clock_now_ms() - t0) / 1000);
    json_decref(lost);
    json_decref(second);
    json_decref(done);
    json_decref(rejoined);
}

/* (b) Loss and delay for LOSSY_MS, tasks submitted all along. */
static void s_scenario_lossy(client_t *client)
{
    json_t *before = s_events();
    int64_t start_seq = json_array_size(before) > 0
                            ? s_seq(json_array_get(before, json_array_size(before) - 1))
                            : 0;
    json_decref(before);
    CHECK(s_lossy());
    int64_t t0 = clock_now_ms();
    for (int i = 0; i < LOSSY_TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "load-%02d", i);
        CHECK_INT(testbroker_submit(client, id, "part-agent", NULL, NULL), 0);
        testenv_sleep_ms(LOSSY_MS / LOSSY_TASKS);
    }
    int64_t left = LOSSY_MS - (clock_now_ms() - t0);
    if (left > 0)
        testenv_sleep_ms((int)left);
    json_t *events = s_events();
    int lost_meanwhile = s_count(events, start_seq, "worker.lost", NULL, NULL);
    int done_meanwhile = s_count(events, start_seq, "task.done", NULL, NULL);
    json_decref(events);
    CHECK(s_heal());
    char state[32];
    for (int i = 0; i < LOSSY_TASKS; i++) {
        char id[32], line[48];
        snprintf(id, sizeof id, "load-%02d", i);
        for (int waited = 0; waited < 15000; waited += 100) {
            if (strcmp(testbroker_state(client, id, state, sizeof state), "done") == 0)
                break;
            testenv_sleep_ms(100);
        }
        CHECK_STR(state, "done");
        /* One side effect, whichever attempt made it: a worker the loss made look lost may
         * have had its attempt replaced (at least once), but never two effects. */
        int effects = 0;
        for (int attempt = 1; attempt <= 3; attempt++) {
            snprintf(line, sizeof line, "%s %d", id, attempt);
            effects += s_lines("effects.log", line);
        }
        CHECK_INT(effects, 1);
    }
    events = s_events();
    int retried = s_count(events, start_seq, "task.retry", NULL, NULL);
    CHECK_INT(s_count(events, start_seq, "task.done", NULL, NULL), LOSSY_TASKS);
    json_decref(events);
    /* Heartbeats tolerate the loss: TCP holds a heartbeat back for a second or two while
     * it retransmits, well inside the 10 s a remote worker may be silent. */
    CHECK_INT(lost_meanwhile, 0);
    CHECK_INT(retried, 0);
    fprintf(stderr,
            "test_partition: lossy: %d of %d tasks done during %d s of 30%% loss%s, each with "
            "one side effect; %d workers declared lost, %d tasks retried\n",
            done_meanwhile, LOSSY_TASKS, LOSSY_MS / 1000,
            s_has_netem     ? " and 200 ms delay (netem)"
            : s_has_netfault ? " and 200 ms delay (netfault)"
                             : " (no delay: no netem, no netfault)",
            lost_meanwhile, retried);
}

/* The seqs printed by a follower (JSON lines in the file `name`), into seqs; their count. */
static int s_printed_seqs(const char *name, int64_t *seqs, int max)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", s_env->dir, name);
    char *text = testenv_read_file(path);
    int n = 0;
    for (const char *line = text; line != NULL && *line != '\0' && n < max;) {
        size_t len = strcspn(line, "\n");
        json_t *event = json_loadb(line, len, 0, NULL);
        if (json_is_object(event))
            seqs[n++] = json_integer_value(json_object_get(event, "seq"));
        json_decref(event);
        line += len + (line[len] == '\n');
    }
    free(text);
    return n;
}

/* Starts `pan events --follow --since SINCE --json` in the namespace, printing into
 * follower.log (its stderr too: no line of that is a JSON object). Spawned, so a failed
 * check before its end does not leave it running. */
static pid_t s_follower(const char *since)
{
    char *argv[] = {(char *)s_ip, "netns", "exec", s_netns, (char *)testenv_bin("pan"),
                    "events", "--follow", "--since", (char *)since, "--json", NULL};
    return testenv_spawn(s_env, "follower", argv);
}

static bool s_follower_printed(void *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/follower.log", s_env->dir);
    char *out = testenv_read_file(path);
    bool found = out != NULL && strstr(out, text) != NULL;
    free(out);
    return found;
}

/* (c) The follower (started before the other scenarios) is cut off during a burst. The
 * workers in the namespace are stopped first: none says hello again after the cut, so no
 * event follows the burst, whose last events the publisher dropped. */
static void s_scenario_events(client_t *client, pid_t follower, const pid_t *ns_workers)
{
    for (int i = 0; ns_workers[i] > 0; i++)
        testenv_signal(ns_workers[i], SIGTERM);
    CHECK(s_saw_event(0, "worker.left", NULL, "wn", 10000));
    CHECK(s_saw_event(0, "worker.left", NULL, "wn2", 10000));
    CHECK_INT(testbroker_submit(client, "gap-first", "gap-agent", NULL, NULL), 0);
    CHECK(testenv_wait_until(s_follower_printed, "gap-first", 10000));
    CHECK(s_cut());
    int64_t t0 = clock_now_ms();
    int burst = 0;
    char id[32] = "";
    while (burst < BURST_MAX && (burst < BURST_MIN || clock_now_ms() - t0 < BURST_MS)) {
        snprintf(id, sizeof id, "gap-%05d", burst++);
        CHECK_INT(testbroker_submit(client, id, "gap-agent", NULL, NULL), 0);
    }
    int64_t cut_ms = clock_now_ms() - t0;
    CHECK(s_heal());
    int64_t healed_at = clock_now_ms();
    char quoted[40];
    snprintf(quoted, sizeof quoted, "\"%s\"", id);
    bool caught_up = testenv_wait_until(s_follower_printed, quoted, 30000);
    int64_t caught_up_ms = clock_now_ms() - healed_at;
    testenv_signal(follower, SIGKILL);
    testenv_wait(s_env, follower, 5000);
    CHECK(caught_up);

    json_t *last = s_wait_event(0, "task.queued", id, NULL, 0);
    CHECK(last != NULL);
    int64_t last_seq = s_seq(last);
    json_decref(last);
    static int64_t seqs[BURST_MAX + 2000];
    int n = s_printed_seqs("follower.log", seqs, BURST_MAX + 2000);
    /* From the first stored event to the burst's last: every seq once, in order. */
    int out_of_order = 0;
    for (int i = 1; i < n; i++)
        out_of_order += seqs[i] != seqs[i - 1] + 1;
    CHECK_INT(out_of_order, 0);
    CHECK(n > 0 && seqs[0] == 1);
    CHECK(n >= last_seq);
    fprintf(stderr,
            "test_partition: events: %d published in %.1f s while cut off, none after; "
            "caught up %.1f s after healing; the follower printed all %d events once, in "
            "order\n",
            burst, (double)cut_ms / 1000, (double)caught_up_ms / 1000, n);
}

int main(void)
{
    if (!s_netns_add()) {
        fprintf(stderr, "test_partition: SKIPPED: cannot make a network namespace here "
                        "(needs root and iproute2's `ip netns`); partitions were not tested\n");
        return 77;
    }
    s_env = testenv_new("partition");
    CHECK(s_env != NULL);
    CHECK(s_netns_link());
    s_detect_netem();
    char config[600];
    snprintf(config, sizeof config, "%s/cloister.toml", s_env->home);
    CHECK(testenv_write_file(config, "[broker]\nretry_backoff_ms = 50\n\n"
                                     "[specialists.part-agent]\nenabled = true\n\n"
                                     "[specialists.gap-agent]\nenabled = true\n") == 0);
    s_tcp_endpoints();
    /* The keys every process here shares (the broker keeps them), and this process's
     * CURVE client, before the broker starts: waiting for it asks over tcp. */
    const char *endpoints[] = {s_env->in_ep, s_env->events_ep, s_env->control_ep, NULL};
    CHECK(curve_keys_init() == 0);
    CHECK(curve_client_init(NULL, endpoints) == 0 && curve_client() != NULL);
    CHECK(testbroker_start(s_env, 0, NULL) > 0);
    client_t *client = testbroker_client(s_env);
    CHECK(client != NULL);

    pid_t follower = s_follower("0");
    CHECK(follower > 0);
    pid_t ns_workers[] = {s_worker("wn", true), -1, -1};
    CHECK(ns_workers[0] > 0);
    CHECK(s_saw_event(0, "worker.joined", NULL, "wn", 10000));

    pid_t host_worker = -1;
    s_scenario_cut(client, &host_worker);
    ns_workers[1] = s_worker("wn2", true);
    CHECK(ns_workers[1] > 0);
    CHECK(s_saw_event(0, "worker.joined", NULL, "wn2", 10000));
    s_scenario_lossy(client);
    s_scenario_events(client, follower, ns_workers);

    client_destroy(&client);
    testenv_destroy(&s_env);
    s_netns_remove();
    CHECK_INT(s_sh("! ip netns list | grep -q 'cloister-part-%d' && ! ip link show cpH%d 2>/dev/null",
                   (int)getpid(), (int)getpid()),
              0);
    return check_exit_code("test_partition");
}
