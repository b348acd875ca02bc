/* A worker reached over a network is given longer to be silent than one on this host.
 *
 * On a lossy link, TCP holds a heartbeat back for seconds while it retransmits; a broker
 * that took such a worker for lost would run its task a second time elsewhere while the
 * first attempt goes on. So the broker allows `[broker] remote_heartbeat_misses`
 * intervals of silence to a worker whose endpoint is tcp:// on an address that is not
 * loopback, and `heartbeat_misses` to one on ipc:// or loopback (where silence can only
 * mean a stopped or dead process).
 *
 * Here (100 ms heartbeats, heartbeat_misses 3, remote_heartbeat_misses 40): a local worker
 * (on loopback TCP, as cloister.toml's default endpoints are; other tests have them on
 * ipc://) and a "remote" one -- bound on this machine's own non-loopback address, which the broker
 * cannot tell from another host's -- are stopped (SIGSTOP) mid-task for 1.5 s. The local
 * one is lost and its task requeued; the remote one keeps its task, which then finishes
 * once, as attempt 1. Stopped again, idle, the remote worker is lost once its own grace
 * (4 s) has passed: the longer grace is still a bound. Exits 77 (skipped, and says so) on
 * a machine with no IPv4 address but loopback. */
#include "worker_harness.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

static const char *const SCRIPT =
    "echo \"attempt $CLOISTER_TASK_ATTEMPT\"\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do\n"
    "  sleep 0.02\n"
    "done\n"
    "echo \"RAN_ATTEMPT: $CLOISTER_TASK_ATTEMPT\"\n";

/* An IPv4 address of an interface of this machine that is up and not loopback, into buf;
 * false if there is none. */
static bool s_outside_address(char *buf, size_t size)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return false;
    bool found = false;
    for (struct ifaddrs *at = all; at != NULL && !found; at = at->ifa_next) {
        if (at->ifa_addr == NULL || at->ifa_addr->sa_family != AF_INET ||
            !(at->ifa_flags & IFF_UP) || (at->ifa_flags & IFF_LOOPBACK))
            continue;
        const struct sockaddr_in *in = (const struct sockaddr_in *)at->ifa_addr;
        found = inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size) != NULL;
    }
    freeifaddrs(all);
    return found;
}

/* The first worker.lost event of worker `id` recorded, or NULL. */
static json_t *s_lost(harness_t *h, const char *id)
{
    for (int i = 0; (i = harness_find(h, i, "worker.lost", NULL)) >= 0; i++) {
        if (strcmp(harness_field(h->events[i], "worker"), id) == 0)
            return h->events[i];
    }
    return NULL;
}

/* Waits up to timeout_ms for worker `id` to be declared lost; true if it was. */
static bool s_wait_lost(harness_t *h, const char *id, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        if (s_lost(h, id) != NULL)
            return true;
        harness_pump(h, 20);
    }
    return false;
}

int main(void)
{
    char address[INET_ADDRSTRLEN];
    if (!s_outside_address(address, sizeof address)) {
        fprintf(stderr, "test_worker_remote_grace: skipped: this machine has no IPv4 "
                        "address but loopback, so no worker can look remote\n");
        return 77;
    }
    harness_t *h = harness_new_config("worker-remote-grace",
                                      "[broker]\nretry_backoff_ms = 50\n"
                                      "remote_heartbeat_misses = 40\n\n"
                                      "[specialists.near-agent]\nenabled = true\n\n"
                                      "[specialists.far-agent]\nenabled = true\n");
    CHECK(h != NULL);
    char bind[64];
    snprintf(bind, sizeof bind, "tcp://%s:*", address);
    /* Loopback TCP, as cloister.toml's default endpoints are: this host. */
    const char *const near_flags[] = {"--heartbeat-ms", HARNESS_HB, "--bind", "tcp://127.0.0.1:*",
                                      NULL};
    const char *const far_flags[] = {"--heartbeat-ms", HARNESS_HB, "--bind", bind, NULL};
    pid_t near = harness_spawn_worker(h, "near", "near-agent", SCRIPT, near_flags);
    pid_t far = harness_spawn_worker(h, "far", "far-agent", SCRIPT, far_flags);
    CHECK(harness_wait_joined(h, "near"));
    CHECK(harness_wait_joined(h, "far"));
    harness_submit(h, "t-near", "near-agent", "normal", 0, 3, NULL);
    harness_submit(h, "t-far", "far-agent", "normal", 0, 3, NULL);
    CHECK(harness_wait(h, "task.progress", "t-near", 5000) != NULL);
    CHECK(harness_wait(h, "task.progress", "t-far", 5000) != NULL);

    /* Both silent for 1.5 s: five times the local grace, under half the remote one. */
    testenv_signal(near, SIGSTOP);
    testenv_signal(far, SIGSTOP);
    CHECK(s_wait_lost(h, "near", 1500));
    testenv_sleep_ms(1500 - 300);
    harness_pump(h, 20);
    CHECK(s_lost(h, "far") == NULL);
    testenv_signal(far, SIGCONT);
    testenv_signal(near, SIGCONT);
    CHECK(harness_wait(h, "task.retry", "t-near", 2000) != NULL);

    /* The remote worker kept its attempt: it finishes once, as attempt 1. */
    harness_go(h, "go-t-far");
    json_t *done = harness_wait(h, "task.done", "t-far", 5000);
    CHECK(done != NULL);
    CHECK_INT(harness_count(h, "task.dispatched", "t-far"), 1);
    CHECK_INT(harness_count(h, "task.retry", "t-far"), 0);
    CHECK(s_lost(h, "far") == NULL);

    /* The longer grace is still a bound: stopped again, the remote worker is lost after
     * about 4 s, not before 3 s. */
    int64_t stopped_at = clock_now_ms();
    testenv_signal(far, SIGSTOP);
    CHECK(s_wait_lost(h, "far", 10000));
    int64_t lost_after = clock_now_ms() - stopped_at;
    testenv_signal(far, SIGCONT);
    CHECK(lost_after >= 3000);
    fprintf(stderr, "test_worker_remote_grace: worker on %s: kept its task through 1.5 s of "
                    "silence, lost after %.1f s stopped\n", address, (double)lost_after / 1000);
    harness_go(h, "go-t-near");
    harness_destroy(&h);
    return check_exit_code("test_worker_remote_grace");
}
