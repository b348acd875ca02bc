/* test_sandbox_network: code under test cannot reach the bus. A branch's `make test` tries
 * to connect to a TCP port on 127.0.0.1 where this test listens -- the way a hostile branch
 * reached the broker's control socket and submitted a forced merge of itself.
 *
 *   isolated          no opt-in: nothing reaches the listener, and the result says
 *                     "isolated"
 *   branch_cannot     the branch under test sets [tests] network = true in its own
 *                     .cloister/config.toml: still isolated (only the target branch counts)
 *   target_opts_in    the target branch (main) sets it: the connection arrives, and the
 *                     result names who opened it
 *   review_checks     a review's [review] checks are isolated the same way ([tests]
 *                     network on the target does not open them; [review] network would)
 * Where bwrap cannot isolate here (the test looks for itself), every run must say NOT
 * ISOLATED in its result, and the test exits 77: the isolation itself was not checked. */
#include "test_test_service_harness.h"
#include "testgit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

static harness_t *s_h;
static testgit_fixture_t s_repos;
static int s_listener = -1;
static int s_port;

/* Listens on a free port of 127.0.0.1 (non-blocking). */
static void s_listen(void)
{
    s_listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    CHECK(s_listener >= 0 && bind(s_listener, (struct sockaddr *)&addr, sizeof addr) == 0 &&
          listen(s_listener, 16) == 0 &&
          getsockname(s_listener, (struct sockaddr *)&addr, &len) == 0);
    s_port = ntohs(addr.sin_port);
}

/* How many connections arrived since the last call. */
static int s_connections(void)
{
    int count = 0;
    int fd;
    while ((fd = accept(s_listener, NULL, NULL)) >= 0) {
        close(fd);
        count++;
    }
    return count;
}

/* Commits, on `branch` of the user's clone (made from main if missing), the probe the
 * tests run and `own_config` as .cloister/config.toml when not NULL; pushes it. */
static void s_branch(const char *branch, const char *own_config)
{
    const char *dir = s_repos.user;
    CHECK_INT(testgit_run(dir, "checkout", "-q", "-B", branch, "main", NULL), 0);
    char probe[512];
    snprintf(probe, sizeof probe,
             "if bash -c 'echo hello > /dev/tcp/127.0.0.1/%d' 2>/dev/null; then\n"
             "  echo PROBE-CONNECTED; else echo PROBE-REFUSED; fi\n"
             "echo '=== 1 passed in 0.01s ==='\n",
             s_port);
    testgit_commit(dir, "probe.sh", probe, "the probe");
    testgit_commit(dir, "Makefile", "test:\n\t@sh probe.sh\n", "make test");
    if (own_config != NULL)
        testgit_commit(dir, ".cloister/config.toml", own_config, "own settings");
    CHECK_INT(testgit_run(dir, "checkout", "-q", "main", NULL), 0);
}

/* Runs the tests of `branch` (target main) as task `id`; returns the end event. */
static json_t *s_test(const char *id, const char *branch)
{
    tsh_submit(s_h, id, 60, "{\"workspace\": \"%s\", \"branch\": \"%s\", \"target\": \"main\"}",
               s_repos.user, branch);
    json_t *end = tsh_end(s_h, id, 30000);
    CHECK_STR(tsh_event(end), "task.done");
    return end;
}

/* Whether bwrap can give a command a network of its own on this machine: the test's own
 * finding (main), so that a service that fails to isolate where it could is a failure. */
static bool s_isolation_here;

/* Checks one run: the probe could connect exactly when `open`, and the result says so. */
static void s_check(const json_t *end, bool open, const char *network_says)
{
    const char *network = tsh_result_str(end, "network");
    const char *output = tsh_result_str(end, "output_tail");
    if (!s_isolation_here) {
        fprintf(stderr,
                "test_sandbox_network: NOT CHECKED -- bwrap cannot isolate here (the service "
                "says sandbox \"%s\"); the run must say so: network \"%s\"\n",
                tsh_result_str(end, "sandbox"), network);
        CHECK(open || strstr(network, "NOT ISOLATED") != NULL);
        s_connections();
        return;
    }
    CHECK(strncmp(tsh_result_str(end, "sandbox"), "bwrap", 5) == 0);
    if (strstr(network, network_says) == NULL)
        fprintf(stderr, "network: \"%s\" (expected \"%s\")\n", network, network_says);
    CHECK(strstr(network, network_says) != NULL);
    CHECK(strstr(output, open ? "PROBE-CONNECTED" : "PROBE-REFUSED") != NULL);
    CHECK_INT(s_connections(), open ? 1 : 0);
}

int main(void)
{
    s_isolation_here = testenv_bwrap_works(true);
    s_h = harness_new("sandbox-network");
    CHECK(s_h != NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/home", s_h->env->dir);
    testgit_env(path);
    testgit_fixture(&s_repos, s_h->env->dir);
    s_listen();
    tsh_config(s_h, "[tests]\nsandbox = \"auto\"\n");
    tsh_service(s_h, "t1");

    s_branch("feature/plain", NULL);
    s_check(s_test("isolated", "feature/plain"), false, "isolated: a network of its own");

    s_branch("feature/opens-itself", "[tests]\nnetwork = true\n");
    s_check(s_test("branch-cannot", "feature/opens-itself"), false, "isolated");

    testgit_commit(s_repos.user, ".cloister/config.toml", "[tests]\nnetwork = true\n",
                   "main lets tests use the network");
    s_check(s_test("target-opts-in", "feature/plain"), true,
            "open: [tests] network = true in main:.cloister/config.toml");

    /* A review check running the probe: main's [tests] network does not open checks. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "feature/plain", "--", "probe.sh", NULL),
              0);
    CHECK_INT(testgit_run(s_repos.user, "commit", "-q", "-m", "the probe on main", NULL), 0);
    snprintf(path, sizeof path, "%s/claude", s_h->env->dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    char config[1024];
    snprintf(config, sizeof config,
             "[tests]\nsandbox = \"auto\"\n\n[agent]\ncommand = \"%s\"\n\n"
             "[review]\nchecks = [\"sh probe.sh\"]\n",
             testenv_bin("fake-claude"));
    tsh_config(s_h, config);
    harness_service(s_h, "cloister-review", "r1", 3000, NULL);
    char payload[1024];
    snprintf(payload, sizeof payload,
             "{\"workspace\": \"%s\", \"branch\": \"feature/plain\", \"target\": \"main\"}",
             s_repos.user);
    harness_submit(s_h, "review-checks", "review-agent", NULL, 60, 1, payload);
    json_t *end = tsh_end(s_h, "review-checks", 30000);
    CHECK(end != NULL);
    const char *network = tsh_result_str(end, "checks_network");
    char *result = json_dumps(json_object_get(end, "result"), 0);
    CHECK(result != NULL && strstr(result, "sh probe.sh") != NULL); /* the check ran */
    free(result);
    if (!s_isolation_here) {
        fprintf(stderr, "test_sandbox_network: NOT CHECKED for review checks -- %s\n", network);
        CHECK(strstr(network, "NOT ISOLATED") != NULL);
        s_connections();
    } else {
        if (strstr(network, "isolated: a network of its own") == NULL)
            fprintf(stderr, "review checks' network: \"%s\"\n", network);
        CHECK(strstr(network, "isolated: a network of its own") != NULL);
        CHECK_INT(s_connections(), 0);
    }

    close(s_listener);
    harness_destroy(&s_h);
    if (!s_isolation_here) {
        fprintf(stderr, "test_sandbox_network: SKIPPED: bwrap cannot give a command a network "
                        "of its own on this machine, so isolation was not tested (only that "
                        "every run said NOT ISOLATED)\n");
        return 77;
    }
    return check_exit_code("test_sandbox_network");
}
