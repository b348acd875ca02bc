/* test_deploy_reload: `pan reload` reaches the specialists deploy/run-local.sh started.
 * The launcher runs detached in a temporary PANOPTICON_HOME on ipc endpoints; the
 * test-agent's test_command is changed in cloister.toml and `pan reload` says that the
 * test-agent applied it (and that a changed [broker] heartbeat_ms waits for a restart), and
 * the next task runs the new command, with no restart. A file that does not load is
 * refused by `pan reload`, and nothing changes; a reload while a task runs waits for
 * the task to end (the task keeps the command it started with); a file that does not parse,
 * sent by SIGHUP, changes nothing and the log says where it is wrong. */
#include "check.h"
#include "deploy_harness.h"
#include "pan_harness.h"
#include "testenv.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    testenv_t *env;
    char out[PAN_OUT_SIZE];
    char project[600];
} reload_t;

static int s_launcher(reload_t *t, const char *command)
{
    char *argv[] = {"/bin/bash", CLOISTER_SOURCE_DIR "/deploy/run-local.sh", (char *)command, NULL};
    return testenv_run(t->env, argv, t->out, sizeof t->out, 60000);
}

/* cloister.toml: the test-agent's command prints `passed` passing tests after `pause`. */
static void s_config(reload_t *t, int passed, const char *pause, const char *more)
{
    char path[600], text[1024];
    snprintf(path, sizeof path, "%s/cloister.toml", t->env->home);
    snprintf(text, sizeof text,
             "%s\n[specialists.test-agent]\n"
             "test_command = \"sh -c 'sleep %s; echo ===== %d passed in 0.01s ====='\"\n",
             more, pause, passed);
    CHECK_INT(testenv_write_file(path, text), 0);
}

static bool s_test_agent_ready(void *arg)
{
    reload_t *t = arg;
    if (harness_pan(t->env, t->out, "specialists", "list", "--json", NULL) != 0)
        return false;
    json_t *list = json_loads(t->out, 0, NULL);
    bool ready = false;
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (name && strcmp(name, "test-agent") == 0)
            ready = json_integer_value(json_object_get(entry, "workers")) >= 1;
    }
    json_decref(list);
    return ready;
}

/* Runs a test-agent task to its end; the number of tests its command said passed. */
static int64_t s_tests_run(reload_t *t, const char *id)
{
    int code = harness_pan(t->env, t->out, "submit", "test-agent", "--workspace", t->project,
                           "--id", id, "--wait", "--wait-timeout", "30", "--json", NULL);
    if (code != 0)
        fprintf(stderr, "task %s: exit %d: %s\n", id, code, t->out);
    CHECK_INT(code, 0);
    json_t *task = json_loads(t->out, 0, NULL);
    json_t *result = json_object_get(task, "result");
    int64_t run = json_integer_value(json_object_get(result, "TESTS_RUN"));
    json_decref(task);
    return run;
}

static bool s_running(void *arg)
{
    reload_t *t = arg;
    return harness_pan(t->env, t->out, "task", "show", "busy", "--json", NULL) == 0 &&
           strstr(t->out, "\"state\": \"running\"") != NULL;
}

/* True once the test-agent's log says `text`. */
static bool s_logged(void *arg)
{
    reload_t *t = arg;
    char path[700];
    snprintf(path, sizeof path, "%s/logs/test-agent.log", t->env->home);
    char *log = testenv_read_file(path);
    bool said = log != NULL && strstr(log, "not reloaded, the settings in use stay") != NULL &&
                strstr(log, "cloister.toml:2:") != NULL;
    free(log);
    return said;
}

/* A failed check leaves nothing running: the launcher stops what it started. */
static void s_stop_on_fail(void *arg)
{
    reload_t *t = arg;
    fprintf(stderr, "pan or the launcher said:\n%s\n", t->out);
    s_launcher(t, "stop");
}

int main(void)
{
    static reload_t t;
    t.env = testenv_new("deploy-reload");
    if (t.env == NULL)
        return 1;
    setenv("CLOISTER_SKIP_SETUP", "1", 1);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    setenv("CLOISTER_STOP_GRACE", "5", 1);
    snprintf(t.project, sizeof t.project, "%s/project", t.env->dir);
    char readme[700];
    snprintf(readme, sizeof readme, "%s/README", t.project);
    CHECK_INT(testenv_write_file(readme, "no tests detected here\n"), 0);
    s_config(&t, 5, "0", "");
    check_on_fail(s_stop_on_fail, &t);
    CHECK_INT(s_launcher(&t, "--detach"), 0);
    CHECK(testenv_wait_until(s_test_agent_ready, &t, 15000));
    pid_t tester = deploy_pid_of(t.env, "test-agent");
    CHECK(deploy_alive(tester));
    CHECK_INT(s_tests_run(&t, "before"), 5);

    /* Changed: applied by the test-agent at once; the heartbeat waits for a restart. */
    s_config(&t, 7, "0", "[broker]\nheartbeat_ms = 900\n");
    CHECK_INT(harness_pan(t.env, t.out, "reload", NULL), 0);
    char line[200];
    snprintf(line, sizeof line,
             "test-agent (pid %ld): reloaded; applied [specialists.test-agent] test_command; "
             "needs a restart: [broker] heartbeat_ms",
             (long)tester);
    CHECK(strstr(t.out, line) != NULL);
    CHECK(strstr(t.out, "review-agent (pid ") != NULL);
    CHECK(strstr(t.out, "merge-agent (pid ") != NULL);
    CHECK(strstr(t.out, "reads cloister.toml only at start") != NULL); /* web, hooks */
    CHECK_INT(s_tests_run(&t, "after"), 7);
    CHECK_INT(deploy_pid_of(t.env, "test-agent"), tester); /* no restart */

    /* A file that does not load: nothing is reloaded, and pan says why. The next task
     * runs the command in use, also once the file is valid again (it is not read again
     * before the next reload). */
    s_config(&t, 9, "0", "[tests]\nsandbox = \"bogus\"\n");
    CHECK_INT(harness_pan_all(t.env, t.out, "reload", NULL), 1);
    CHECK(strstr(t.out, "cloister.toml not reloaded, nothing changed") != NULL &&
          strstr(t.out, "cloister.toml:2:11: expected one of auto|bwrap|none") != NULL);
    s_config(&t, 9, "0", "");
    CHECK_INT(s_tests_run(&t, "refused"), 7);

    /* A reload while a task runs waits for it: the task keeps its command. */
    s_config(&t, 8, "2", "");
    CHECK_INT(harness_pan(t.env, t.out, "reload", NULL), 0);
    CHECK_INT(harness_pan(t.env, t.out, "submit", "test-agent", "--workspace", t.project, "--id",
                          "busy", NULL),
              0);
    CHECK(testenv_wait_until(s_running, &t, 10000));
    s_config(&t, 9, "0", "");
    CHECK_INT(harness_pan(t.env, t.out, "reload", NULL), 0);
    CHECK(strstr(t.out, "test-agent (pid ") != NULL &&
          strstr(t.out, "busy with task busy; reloads when it ends") != NULL);
    CHECK_INT(harness_pan(t.env, t.out, "task", "wait", "busy", "--json", NULL), 0);
    CHECK(strstr(t.out, "\"TESTS_RUN\":8") != NULL);
    CHECK_INT(s_tests_run(&t, "next"), 9);

    /* SIGHUP with a file that does not parse: nothing changes, the log says where. */
    char path[600];
    snprintf(path, sizeof path, "%s/cloister.toml", t.env->home);
    CHECK_INT(testenv_write_file(path, "[specialists.test-agent]\ntest_command = \n"), 0);
    kill(tester, SIGHUP);
    CHECK(testenv_wait_until(s_logged, &t, 10000));
    s_config(&t, 9, "0", ""); /* pan itself reads the file */
    CHECK_INT(s_tests_run(&t, "unparsed"), 9);
    CHECK(deploy_alive(tester));

    check_on_fail(NULL, NULL);
    CHECK_INT(s_launcher(&t, "stop"), 0);
    CHECK(!deploy_alive(tester));
    if (deploy_alive(tester))
        kill(tester, SIGKILL);
    testenv_destroy(&t.env);
    return check_exit_code("test_deploy_reload");
}
