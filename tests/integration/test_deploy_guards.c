/* test_deploy_guards: deploy/run-local.sh where things are not as they should be. Each case
 * runs the launcher in its own temporary PANOPTICON_HOME on ipc endpoints (setup skipped,
 * the built programs from CLOISTER_BIN_DIR) and leaves nothing running:
 *   - HOME unset: the state goes under the password database's home directory;
 *   - CLOISTER_STOP_GRACE / CLOISTER_START_TIMEOUT that are not whole seconds: refused. */
#include "check.h"
#include "testenv.h"

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The pid in $PANOPTICON_HOME/run/<name>.pid, or 0. */
static pid_t s_pid_of(const guard_t *t, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/run/%s.pid", t->env->home, name);
    char *text = testenv_read_file(path);
    pid_t pid = text ? (pid_t)atol(text) : 0;
    free(text);
    return pid;
}

/* True while `pid` exists and is not a zombie. */
static bool s_alive(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    char *stat = testenv_read_file(path);
    if (stat == NULL)
        return false;
    const char *end = strrchr(stat, ')');
    bool zombie = end != NULL && end[1] == ' ' && end[2] == 'Z';
    free(stat);
    return !zombie;
}

static const char *const s_names[] = {"supervisor", "broker", "review-agent", "test-agent",
                                      "merge-agent"};

/* Kills whatever the launcher's pid files name, so a failed case leaves no orphans. */
static void s_kill_leftovers(const guard_t *t)
{
    for (size_t i = 0; i < sizeof s_names / sizeof s_names[0]; i++) {
        pid_t pid = s_pid_of(t, s_names[i]);
        if (s_alive(pid))
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
    if (t == NULL)
        return;
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
    if (t == NULL)
        return;
    setenv("CLOISTER_STOP_GRACE", "2.5", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_STOP_GRACE must be a whole number of seconds") != NULL);
    CHECK_INT(s_pid_of(t, "broker"), 0);
    CHECK(s_launcher(t, "stop", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_STOP_GRACE must be a whole number of seconds") != NULL);
    unsetenv("CLOISTER_STOP_GRACE");

    setenv("CLOISTER_START_TIMEOUT", "1.5", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_START_TIMEOUT must be a whole number of seconds") != NULL);
    CHECK_INT(s_pid_of(t, "broker"), 0);
    setenv("CLOISTER_START_TIMEOUT", "0", 1);
    CHECK(s_launcher(t, "--detach", NULL) != 0);
    CHECK(strstr(t->out, "CLOISTER_START_TIMEOUT must be a whole number of seconds") != NULL);
    unsetenv("CLOISTER_START_TIMEOUT");
    s_kill_leftovers(t);
    s_guard_destroy(t);
}

int main(void)
{
    s_home_unset();
    s_bad_settings();
    return check_exit_code("test_deploy_guards");
}
