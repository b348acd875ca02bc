/* test_deploy_guards: deploy/run-local.sh where things are not as they should be. Each case
 * runs the launcher in its own temporary PANOPTICON_HOME on ipc endpoints (setup skipped,
 * the built programs from CLOISTER_BIN_DIR) and leaves nothing running:
 *   - HOME unset: the state goes under the password database's home directory;
 *   - CLOISTER_STOP_GRACE / CLOISTER_START_TIMEOUT that are not whole seconds: refused;
 *   - a stale pid file naming another build's process: `stop` leaves that process alone;
 *   - children of a supervisor killed with SIGKILL: `stop` stops them, specialists first;
 *   - a specialist that keeps dying: `status` reports it and exits non-zero;
 *   - another broker answers on the control endpoint: start refuses, before starting ours
 *     or (when it came up in between) because ours is not the one that answers;
 *   - [specialists.merge-agent] enabled = false: merge-agent is not started. */
#include "check.h"
#include "deploy_harness.h"
#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_OUT_SIZE 16384

typedef struct {
    testenv_t *env;
    char out[GUARD_OUT_SIZE]; /* the launcher's stdout and stderr */
} guard_t;

/* Runs the launcher with the NULL-terminated arguments, its stdout and stderr into t->out.
 * Returns its exit code. */
static int s_launcher(guard_t *t, ...)
{
    char *argv[16] = {"/bin/bash", "-c", "exec /bin/bash \"$0\" \"$@\" 2>&1",
                      CLOISTER_SOURCE_DIR "/deploy/run-local.sh"};
    int argc = 4;
    va_list args;
    va_start(args, t);
    const char *arg;
    while ((arg = va_arg(args, const char *)) != NULL && argc < 15)
        argv[argc++] = (char *)arg;
    va_end(args);
    argv[argc] = NULL;
    int code = testenv_run(t->env, argv, t->out, sizeof t->out, 60000);
    printf("run-local.sh %s -> %d:\n%s\n", argv[4] ? argv[4] : "", code, t->out);
    return code;
}


static const char *const s_names[] = {"supervisor", "broker", "review-agent", "test-agent",
                                      "merge-agent"};

/* Kills whatever the launcher's pid files name, so a failed case leaves no orphans. */
static void s_kill_leftovers(const guard_t *t)
{
    for (size_t i = 0; i < sizeof s_names / sizeof s_names[0]; i++) {
        pid_t pid = deploy_pid_of(t->env, s_names[i]);
        if (deploy_alive(pid))
            kill(pid, SIGKILL);
    }
}

static guard_t *s_guard_new(const char *name)
{
    static guard_t t;
    memset(&t, 0, sizeof t);
    t.env = testenv_new(name);
    if (t.env == NULL)
        return NULL;
    setenv("CLOISTER_SKIP_SETUP", "1", 1);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    unsetenv("CLOISTER_STOP_GRACE");
    unsetenv("CLOISTER_START_TIMEOUT");
    return &t;
}

static void s_guard_destroy(guard_t *t)
{
    testenv_destroy(&t->env);
}

/* HOME unset: no "unbound variable"; the state goes under this user's home directory from
 * the password database. */
static void s_home_unset(void)
{
    guard_t *t = s_guard_new("deploy-home");
    CHECK(t != NULL);
    struct passwd *user = getpwuid(getuid());
    CHECK(user != NULL);
    char *saved_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("HOME");
    unsetenv("PANOPTICON_HOME");
    CHECK_INT(s_launcher(t, "--help", NULL), 0);
    s_launcher(t, "status", NULL);
    CHECK(strstr(t->out, "unbound variable") == NULL);
    if (user != NULL) {
        char expected[1100];
        snprintf(expected, sizeof expected, "state in %s/.panopticon\n", user->pw_dir);
        CHECK(strstr(t->out, expected) != NULL);
    }
    /* PANOPTICON_HOME alone is enough. */
    setenv("PANOPTICON_HOME", t->env->home, 1);
    s_launcher(t, "status", NULL);
    CHECK(strstr(t->out, "unbound variable") == NULL);
    CHECK(strstr(t->out, t->env->home) != NULL);
    if (saved_home != NULL)
        setenv("HOME", saved_home, 1);
    free(saved_home);
    s_guard_destroy(t);
}

/* CLOISTER_STOP_GRACE and CLOISTER_START_TIMEOUT that are not whole seconds are refused
 * with a clear error before anything starts (or stops). */
static void s_bad_settings(void)
{
    guard_t *t = s_guard_new("deploy-settings");
    CHECK(t != NULL);
    setenv("CLOISTER_STOP_GRACE", "2.5", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_STOP_GRACE must be a whole number of seconds") != NULL);
    CHECK_INT(deploy_pid_of(t->env, "broker"), 0);
    CHECK(s_launcher(t, "stop", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_STOP_GRACE must be a whole number of seconds") != NULL);
    unsetenv("CLOISTER_STOP_GRACE");

    setenv("CLOISTER_START_TIMEOUT", "1.5", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_START_TIMEOUT must be a whole number of seconds") != NULL);
    CHECK_INT(deploy_pid_of(t->env, "broker"), 0);
    setenv("CLOISTER_START_TIMEOUT", "0", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_START_TIMEOUT must be a whole number of seconds") != NULL);
    unsetenv("CLOISTER_START_TIMEOUT");
    s_kill_leftovers(t);
    s_guard_destroy(t);
}

/* Starts a broker of "another build" (the same program through another path) with its own
 * home and endpoints under <dir>/other, or, with `shared_endpoints`, on the test's
 * endpoints. Returns its pid, or -1. */
static pid_t s_other_broker(guard_t *t, bool shared_endpoints)
{
    char bin[400], link[450], home[400], in[450], events[450], control[450];
    snprintf(bin, sizeof bin, "%s/other/bin", t->env->dir);
    snprintf(link, sizeof link, "%s/cloister-broker", bin);
    snprintf(home, sizeof home, "%s/other/home", t->env->dir);
    snprintf(in, sizeof in, "ipc://%s/other/in.sock", t->env->dir);
    snprintf(events, sizeof events, "ipc://%s/other/events.sock", t->env->dir);
    snprintf(control, sizeof control, "ipc://%s/other/control.sock", t->env->dir);
    char marker[460];
    snprintf(marker, sizeof marker, "%s/.keep", bin);
    if (testenv_write_file(marker, "") != 0 || symlink(testenv_bin("cloister-broker"), link) != 0)
        return -1;
    char *argv[] = {link,
                    "--home",
                    home,
                    "--in",
                    shared_endpoints ? t->env->in_ep : in,
                    "--events",
                    shared_endpoints ? t->env->events_ep : events,
                    "--control",
                    shared_endpoints ? t->env->control_ep : control,
                    NULL};
    return testenv_spawn(t->env, "other-broker", argv);
}

/* A stale pid file naming a process of another build (here: another build's broker) is not
 * ours: `stop` removes the file and leaves the process alone. */
static void s_stale_pid_file(void)
{
    guard_t *t = s_guard_new("deploy-stale");
    CHECK(t != NULL);
    pid_t other = s_other_broker(t, false);
    CHECK(other > 0);
    testenv_sleep_ms(200);
    CHECK(deploy_alive(other));
    char path[400], text[600];
    snprintf(path, sizeof path, "%s/run/broker.pid", t->env->home);
    snprintf(text, sizeof text, "%ld\n%s/cloister-broker\n", (long)other, CLOISTER_BIN_DIR);
    CHECK_INT(testenv_write_file(path, text), 0);
    /* A pid file without the program line (an older launcher's) is checked against $BIN. */
    snprintf(path, sizeof path, "%s/run/review-agent.pid", t->env->home);
    snprintf(text, sizeof text, "%ld\n", (long)other);
    CHECK_INT(testenv_write_file(path, text), 0);
    CHECK_INT(s_launcher(t, "stop", NULL), 0);
    CHECK(strstr(t->out, "leftover") == NULL);
    testenv_sleep_ms(200);
    CHECK(deploy_alive(other));
    CHECK_INT(deploy_pid_of(t->env, "broker"), 0);
    CHECK_INT(deploy_pid_of(t->env, "review-agent"), 0);
    s_guard_destroy(t);
}

/* A supervisor killed with SIGKILL leaves its children; `stop` stops them, the specialists
 * before the broker. */
static void s_leftovers(void)
{
    guard_t *t = s_guard_new("deploy-leftovers");
    CHECK(t != NULL);
    CHECK_INT(s_launcher(t, "--detach", NULL), 0);
    pid_t pids[5];
    for (size_t i = 0; i < 5; i++) {
        pids[i] = deploy_pid_of(t->env, s_names[i]);
        CHECK(deploy_alive(pids[i]));
    }
    kill(pids[0], SIGKILL);
    testenv_sleep_ms(100);
    CHECK_INT(s_launcher(t, "stop", NULL), 0);
    const char *broker = strstr(t->out, "stopping leftover broker");
    CHECK(broker != NULL);
    for (size_t i = 2; i < 5; i++) {
        char line[80];
        snprintf(line, sizeof line, "stopping leftover %s", s_names[i]);
        const char *at = strstr(t->out, line);
        CHECK(at != NULL);
        CHECK(broker == NULL || at == NULL || at < broker);
    }
    for (size_t i = 0; i < 5; i++) {
        if (deploy_alive(pids[i]))
            fprintf(stderr, "%s (pid %ld) still runs after stop\n", s_names[i], (long)pids[i]);
        CHECK(!deploy_alive(pids[i]));
        CHECK_INT(deploy_pid_of(t->env, s_names[i]), 0);
    }
    for (size_t i = 0; i < 5; i++)
        if (deploy_alive(pids[i]))
            kill(pids[i], SIGKILL);
    s_guard_destroy(t);
}

/* Makes <dir>/bin with the built programs (symbolic links) except cloister-merge, which
 * dies at once with status 3. Returns 0 or -1; the directory goes into `bin`. */
static int s_dying_merge_bin(const guard_t *t, char *bin, size_t size)
{
    static const char *const real[] = {"cloister-broker", "cloister-review", "cloister-test",
                                       "cloister-web", "cloister-hooks", "pan"};
    snprintf(bin, size, "%s/bin", t->env->dir);
    char path[500];
    snprintf(path, sizeof path, "%s/cloister-merge", bin);
    if (testenv_write_file(path, "#!/bin/sh\necho merge-agent cannot start >&2\nexit 3\n") != 0 ||
        chmod(path, 0755) != 0)
        return -1;
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", bin, real[i]);
        if (symlink(testenv_bin(real[i]), path) != 0)
            return -1;
    }
    return 0;
}

static bool s_merge_died(void *arg)
{
    const guard_t *t = arg;
    char path[400];
    snprintf(path, sizeof path, "%s/logs/merge-agent.log", t->env->home);
    char *log = testenv_read_file(path);
    bool died = log != NULL && strstr(log, "cannot start") != NULL;
    free(log);
    return died;
}

/* A specialist that keeps dying is reported as not running, and status exits non-zero. */
static void s_dying_specialist(void)
{
    guard_t *t = s_guard_new("deploy-dying");
    CHECK(t != NULL);
    char bin[300];
    CHECK_INT(s_dying_merge_bin(t, bin, sizeof bin), 0);
    setenv("CLOISTER_BIN_DIR", bin, 1);
    CHECK_INT(s_launcher(t, "--detach", NULL), 0);
    CHECK(testenv_wait_until(s_merge_died, t, 10000));
    CHECK(s_launcher(t, "status", NULL) != 0);
    CHECK(strstr(t->out, "supervisor running") != NULL);
    CHECK(strstr(t->out, "broker running") != NULL);
    CHECK(strstr(t->out, "test-agent running") != NULL);
    CHECK(strstr(t->out, "merge-agent NOT RUNNING") != NULL);
    CHECK_INT(s_launcher(t, "stop", NULL), 0);
    s_kill_leftovers(t);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    s_guard_destroy(t);
}

static bool s_other_answers(void *arg)
{
    guard_t *t = arg;
    char *argv[] = {(char *)testenv_bin("pan"), "--timeout-ms", "500", "status", NULL};
    return testenv_run(t->env, argv, NULL, 0, 5000) == 0;
}

/* A broker of someone else's already answers on the control endpoint: start refuses and
 * starts nothing (before, ours failed to bind and restarted for ever while the specialists
 * joined the other broker). */
static void s_other_broker_answers(void)
{
    guard_t *t = s_guard_new("deploy-other");
    CHECK(t != NULL);
    pid_t other = s_other_broker(t, true);
    CHECK(other > 0);
    CHECK(testenv_wait_until(s_other_answers, t, 10000));
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    char expected[400];
    snprintf(expected, sizeof expected, "another broker already answers at %s;",
             t->env->control_ep);
    CHECK(strstr(t->out, expected) != NULL);
    CHECK_INT(deploy_pid_of(t->env, "supervisor"), 0);
    CHECK_INT(deploy_pid_of(t->env, "broker"), 0);
    CHECK(deploy_alive(other));
    s_launcher(t, "stop", NULL);
    s_kill_leftovers(t);
    s_guard_destroy(t);
}

/* The other broker comes up after the check (a fake pan does not answer the first time)
 * and ours cannot bind (here: its in endpoint is in a missing directory; on tcp it would be
 * "Address already in use"). The other broker answers, but start fails because ours is not
 * the one up. */
static void s_other_broker_wins_race(void)
{
    guard_t *t = s_guard_new("deploy-race");
    CHECK(t != NULL);
    pid_t other = s_other_broker(t, true);
    CHECK(other > 0);
    CHECK(testenv_wait_until(s_other_answers, t, 10000));
    static const char *const real[] = {"cloister-broker", "cloister-review", "cloister-test",
                                       "cloister-merge", "cloister-web", "cloister-hooks"};
    char bin[300], path[500], script[1200], in[400];
    snprintf(bin, sizeof bin, "%s/bin", t->env->dir);
    snprintf(path, sizeof path, "%s/pan", bin);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ ! -e '%s/pan-called' ]; then : >'%s/pan-called'; exit 3; fi\n"
             "exec '%s' \"$@\"\n",
             t->env->dir, t->env->dir, testenv_bin("pan"));
    CHECK_INT(testenv_write_file(path, script), 0);
    CHECK_INT(chmod(path, 0755), 0);
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", bin, real[i]);
        CHECK_INT(symlink(testenv_bin(real[i]), path), 0);
    }
    setenv("CLOISTER_BIN_DIR", bin, 1);
    snprintf(in, sizeof in, "ipc://%s/missing/in.sock", t->env->dir);
    setenv("CLOISTER_IN", in, 1);
    setenv("CLOISTER_START_TIMEOUT", "10", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "the broker did not come up") != NULL);
    CHECK_INT(deploy_pid_of(t->env, "review-agent"), 0);
    s_launcher(t, "stop", NULL);
    s_kill_leftovers(t);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    unsetenv("CLOISTER_START_TIMEOUT");
    s_guard_destroy(t);
}

/* A specialist cloister.toml disables ([specialists.<name>] enabled = false) is not started;
 * status says so and still exits 0 when everything else runs. */
static void s_disabled_specialist(void)
{
    guard_t *t = s_guard_new("deploy-disabled");
    CHECK(t != NULL);
    char path[400];
    snprintf(path, sizeof path, "%s/cloister.toml", t->env->home);
    CHECK_INT(testenv_write_file(path, "# merges are done by hand here\n"
                                       "[specialists.merge-agent]\n"
                                       "enabled = false   # not now\n"),
              0);
    CHECK_INT(s_launcher(t, "--detach", "--workers", "2", NULL), 0);
    CHECK(strstr(t->out, "merge-agent: disabled in cloister.toml, not started") != NULL);
    const char *running[] = {"broker", "review-agent-1", "review-agent-2", "test-agent-1",
                             "test-agent-2"};
    for (size_t i = 0; i < sizeof running / sizeof running[0]; i++)
        CHECK(deploy_alive(deploy_pid_of(t->env, running[i])));
    CHECK_INT(deploy_pid_of(t->env, "merge-agent-1"), 0);
    CHECK_INT(deploy_pid_of(t->env, "merge-agent-2"), 0);
    CHECK_INT(s_launcher(t, "status", NULL), 0);
    CHECK(strstr(t->out, "merge-agent disabled in cloister.toml (not started)") != NULL);
    CHECK(strstr(t->out, "test-agent-2 running") != NULL);
    CHECK_INT(s_launcher(t, "stop", NULL), 0);
    s_kill_leftovers(t);
    s_guard_destroy(t);
}

int main(void)
{
    s_home_unset();
    s_bad_settings();
    s_stale_pid_file();
    s_leftovers();
    s_dying_specialist();
    s_other_broker_answers();
    s_other_broker_wins_race();
    s_disabled_specialist();
    return check_exit_code("test_deploy_guards");
}
