/* test_deploy_local: deploy/run-local.sh end to end. Starts the whole system detached in a
 * temporary PANOPTICON_HOME on ipc endpoints (setup skipped, the built programs from
 * CLOISTER_BIN_DIR), checks every specialist has a worker, runs a test-agent task on a
 * Makefile project to task.done, kills a service with SIGKILL and sees the supervisor
 * restart it (a new worker joins), then `run-local.sh stop` and checks nothing is left. A
 * stop with CLOISTER_STOP_GRACE=2.5 is refused and stops nothing. */
#include "check.h"
#include "deploy_harness.h"
#include "pan_harness.h"
#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEPLOY_MAX_PIDS 16

typedef struct {
    testenv_t *env;
    char out[PAN_OUT_SIZE];
    char worker_tag[64]; /* "-<pid>-", as in the worker id of a process */
    pid_t killed;        /* the test-agent killed with SIGKILL */
} deploy_t;

static const char *s_script(void)
{
    return CLOISTER_SOURCE_DIR "/deploy/run-local.sh";
}

/* Runs the launcher with one argument; its stdout goes to `out`. */
static int s_launcher(deploy_t *t, const char *command)
{
    char *argv[] = {"/bin/bash", (char *)s_script(), (char *)command, NULL};
    return testenv_run(t->env, argv, t->out, sizeof t->out, 60000);
}


static bool s_all_have_workers(void *arg)
{
    deploy_t *t = arg;
    if (harness_pan(t->env, t->out, "specialists", "list", "--json", NULL) != 0)
        return false;
    json_t *list = json_loads(t->out, 0, NULL);
    int ready = 0;
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        const char *name = json_string_value(json_object_get(entry, "name"));
        json_int_t workers = json_integer_value(json_object_get(entry, "workers"));
        if (name && workers >= 1 &&
            (strcmp(name, "review-agent") == 0 || strcmp(name, "test-agent") == 0 ||
             strcmp(name, "merge-agent") == 0))
            ready++;
    }
    json_decref(list);
    return ready == 3;
}

static bool s_task_done(void *arg)
{
    deploy_t *t = arg;
    if (harness_pan(t->env, t->out, "events", "--since", "0", "--json", "--topic", "task.done/test-agent", NULL) !=
        0)
        return false;
    return strstr(t->out, "\"task\":\"deploy-make-test\"") != NULL;
}

static bool s_worker_joined(void *arg)
{
    deploy_t *t = arg;
    pid_t pid = deploy_pid_of(t->env, "test-agent");
    if (pid <= 0 || pid == t->killed)
        return false;
    snprintf(t->worker_tag, sizeof t->worker_tag, "-%ld-", (long)pid);
    if (harness_pan(t->env, t->out, "events", "--since", "0", "--json", "--topic", "worker.joined/test-agent",
                    NULL) != 0)
        return false;
    return strstr(t->out, t->worker_tag) != NULL;
}

int main(void)
{
    static deploy_t t;
    t.env = testenv_new("deploy-local");
    if (t.env == NULL)
        return 1;
    setenv("CLOISTER_SKIP_SETUP", "1", 1);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    setenv("CLOISTER_STOP_GRACE", "5", 1);

    /* Start detached: returns after printing what to do next. */
    CHECK_INT(s_launcher(&t, "--detach"), 0);
    CHECK(strstr(t.out, "pan events --follow") != NULL);
    CHECK(strstr(t.out, "pan submit") != NULL);
    /* Where repositories are accepted, and how to add one. */
    CHECK(strstr(t.out, "repositories accepted under: ") != NULL);
    CHECK(strstr(t.out, "[security] workspace_roots") != NULL);
    /* A pid file holds the pid alone: `kill -HUP $(cat run/broker.pid)` works. */
    char pid_path[600];
    snprintf(pid_path, sizeof pid_path, "%s/run/broker.pid", t.env->home);
    char *pid_text = testenv_read_file(pid_path);
    CHECK(pid_text != NULL && strspn(pid_text, "0123456789") + 1 == strlen(pid_text) &&
          pid_text[strlen(pid_text) - 1] == '\n');
    free(pid_text);
    pid_t pids[DEPLOY_MAX_PIDS] = {0};
    int npids = 0;
    const char *names[] = {"supervisor", "broker", "review-agent", "test-agent", "merge-agent"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pids[npids] = deploy_pid_of(t.env, names[i]);
        if (!deploy_alive(pids[npids]))
            fprintf(stderr, "%s is not running (pid %ld)\n", names[i], (long)pids[npids]);
        CHECK(deploy_alive(pids[npids]));
        npids++;
    }
    /* Status lists every instance running and exits 0. */
    CHECK_INT(s_launcher(&t, "status"), 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char line[80];
        snprintf(line, sizeof line, "%s running (pid %ld)", names[i], (long)pids[i]);
        CHECK(strstr(t.out, line) != NULL);
    }
    /* A second start is refused while the first runs. */
    CHECK(s_launcher(&t, "--detach") != 0);
    /* A stop with a grace that is not whole seconds is refused and stops nothing. */
    setenv("CLOISTER_STOP_GRACE", "2.5", 1);
    CHECK(s_launcher(&t, "stop") != 0);
    setenv("CLOISTER_STOP_GRACE", "5", 1);
    testenv_sleep_ms(300);
    for (int i = 0; i < npids; i++) {
        if (!deploy_alive(pids[i]))
            fprintf(stderr, "%s stopped by a refused stop\n", names[i]);
        CHECK(deploy_alive(pids[i]));
    }

    CHECK(testenv_wait_until(s_all_have_workers, &t, 10000));

    /* A test-agent task on a Makefile project. */
    char project[400], makefile[450];
    snprintf(project, sizeof project, "%s/project", t.env->dir);
    snprintf(makefile, sizeof makefile, "%s/Makefile", project);
    CHECK_INT(testenv_write_file(makefile, "test:\n\t@echo deploy tests ran\n"), 0);
    CHECK_INT(harness_pan(t.env, t.out, "submit", "test-agent", "--workspace", project, "--id",
                          "deploy-make-test", "--title", "deploy smoke test", NULL),
              0);
    bool done = testenv_wait_until(s_task_done, &t, 10000);
    CHECK(done);
    if (done)
        CHECK(strstr(t.out, "\"TEST_RESULT\":\"PASS\"") != NULL);
    else
        fprintf(stderr, "events: %s\n", t.out);

    /* SIGKILL a service: the supervisor starts a new one, which joins the broker. */
    pid_t killed = deploy_pid_of(t.env, "test-agent");
    t.killed = killed;
    CHECK(killed > 0);
    if (killed > 0)
        kill(killed, SIGKILL);
    bool joined = testenv_wait_until(s_worker_joined, &t, 10000);
    CHECK(joined);
    pid_t restarted = deploy_pid_of(t.env, "test-agent");
    CHECK(restarted != killed);
    CHECK(deploy_alive(restarted));
    if (restarted > 0 && restarted != killed && npids < DEPLOY_MAX_PIDS)
        pids[npids++] = restarted;

    /* The shipped logrotate settings rotate the logs while the programs run, and the
     * programs go on writing at the start of the truncated file. */
    char rotate[1200], broker_log[600];
    snprintf(rotate, sizeof rotate,
             "logrotate -s '%s/logrotate.state' -f '%s/logrotate.conf' && test -s '%s/logs/broker.log.1'",
             t.env->dir, t.env->home, t.env->home);
    char *rotate_argv[] = {"/bin/sh", "-c", rotate, NULL};
    CHECK_INT(testenv_run(t.env, rotate_argv, t.out, sizeof t.out, 30000), 0);
    CHECK_INT(harness_pan(t.env, t.out, "submit", "no-such-agent", "--id", "after-rotation",
                          NULL),
              1); /* the broker logs the refusal */
    snprintf(broker_log, sizeof broker_log, "%s/logs/broker.log", t.env->home);
    char *after = testenv_read_file(broker_log);
    CHECK(after != NULL && after[0] != '\0' && strstr(after, "after-rotation") != NULL);
    free(after);

    /* Restart: everything stopped (the broker last) and started again in the background. */
    pid_t broker_before = deploy_pid_of(t.env, "broker");
    CHECK_INT(s_launcher(&t, "restart"), 0);
    CHECK(!deploy_alive(broker_before));
    for (size_t i = 0; i < sizeof names / sizeof names[0] && npids < DEPLOY_MAX_PIDS; i++) {
        pids[npids] = deploy_pid_of(t.env, names[i]);
        CHECK(deploy_alive(pids[npids]));
        npids++;
    }
    CHECK_INT(s_launcher(&t, "status"), 0);

    /* Stop: every process gone, no pid file left. */
    CHECK_INT(s_launcher(&t, "stop"), 0);
    for (int i = 0; i < npids; i++) {
        if (deploy_alive(pids[i]))
            fprintf(stderr, "pid %ld still runs after stop\n", (long)pids[i]);
        CHECK(!deploy_alive(pids[i]));
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK_INT(deploy_pid_of(t.env, names[i]), 0);

    /* install puts the programs on PATH, uninstall takes away what it put there and keeps
     * the state. */
    char prefix[600], installed[600], pan_path[700];
    snprintf(prefix, sizeof prefix, "%s/prefix", t.env->dir);
    snprintf(installed, sizeof installed, "%s/installed-files", t.env->home);
    snprintf(pan_path, sizeof pan_path, "%s/bin/pan", prefix);
    setenv("CLOISTER_PREFIX", prefix, 1);
    setenv("BUILD_DIR", CLOISTER_BIN_DIR "/..", 1);
    CHECK_INT(s_launcher(&t, "install"), 0);
    CHECK(access(pan_path, X_OK) == 0 && access(installed, F_OK) == 0);
    CHECK_INT(s_launcher(&t, "uninstall"), 0);
    CHECK(strstr(t.out, "the state in") != NULL);
    CHECK(access(pan_path, F_OK) != 0 && access(installed, F_OK) != 0);
    snprintf(pan_path, sizeof pan_path, "%s/share/cloister", prefix);
    CHECK(access(pan_path, F_OK) != 0);
    CHECK(access(t.env->home, F_OK) == 0);
    CHECK(s_launcher(&t, "uninstall") != 0); /* nothing left to uninstall */
    unsetenv("CLOISTER_PREFIX");
    unsetenv("BUILD_DIR");

    /* Whatever failed above, leave nothing running. */
    for (int i = 0; i < npids; i++) {
        if (deploy_alive(pids[i]))
            kill(pids[i], SIGKILL);
    }
    testenv_destroy(&t.env);
    return check_exit_code("test_deploy_local");
}
