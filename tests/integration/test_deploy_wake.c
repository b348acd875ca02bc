/* test_deploy_wake: `pan specialists wake` on a specialist with no live worker, while
 * deploy/run-local.sh runs (detached, in a temporary PANOPTICON_HOME on ipc endpoints).
 * The test-agent is disabled in cloister.toml at start: a wake queues the task and says the
 * launcher refused to start it, and why. Once cloister.toml enables it, a wake has the
 * launcher start it (`run-local.sh start test-agent`), waits until its worker joins, says
 * so, and both queued tasks run. `start` for a specialist the launcher does not run, or
 * with no supervisor, is refused. */
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
} wake_t;

static int s_launcher(wake_t *t, const char *command, const char *name)
{
    char *argv[] = {"/bin/sh",
                    "-c",
                    "exec /bin/bash \"$0\" \"$@\" 2>&1",
                    CLOISTER_SOURCE_DIR "/deploy/run-local.sh",
                    (char *)command,
                    (char *)name,
                    NULL};
    return testenv_run(t->env, argv, t->out, sizeof t->out, 60000);
}

static void s_stop_on_fail(void *arg)
{
    wake_t *t = arg;
    fprintf(stderr, "pan or the launcher said:\n%s\n", t->out);
    s_launcher(t, "stop", NULL);
}

static void s_config(wake_t *t, bool enabled)
{
    char path[600], text[512];
    snprintf(path, sizeof path, "%s/cloister.toml", t->env->home);
    snprintf(text, sizeof text,
             "[specialists.test-agent]\nenabled = %s\n"
             "test_command = \"sh -c 'echo ===== 3 passed in 0.01s ====='\"\n",
             enabled ? "true" : "false");
    CHECK_INT(testenv_write_file(path, text), 0);
}

/* The id in "Queued urgent task <id> for ...". */
static void s_queued_id(const char *out, char *id, size_t size)
{
    const char *queued = strstr(out, "Queued urgent task ");
    CHECK(queued != NULL);
    snprintf(id, size, "%.*s", (int)strcspn(queued + 19, " \n"), queued + 19);
}

static bool s_merge_agent_ready(void *arg)
{
    wake_t *t = arg;
    return harness_pan(t->env, t->out, "specialists", "list", "--json", NULL) == 0 &&
           strstr(t->out, "\"merge-agent\"") != NULL;
}

int main(void)
{
    static wake_t t;
    t.env = testenv_new("deploy-wake");
    if (t.env == NULL)
        return 1;
    setenv("CLOISTER_SKIP_SETUP", "1", 1);
    setenv("CLOISTER_BIN_DIR", CLOISTER_BIN_DIR, 1);
    setenv("CLOISTER_STOP_GRACE", "5", 1);
    char project[600], readme[700];
    snprintf(project, sizeof project, "%s/project", t.env->dir);
    snprintf(readme, sizeof readme, "%s/README", project);
    CHECK_INT(testenv_write_file(readme, "no tests detected here\n"), 0);

    /* With no supervisor, `start NAME` has nobody to ask. */
    CHECK_INT(s_launcher(&t, "start", "test-agent"), 1);
    CHECK(strstr(t.out, "no supervisor is running") != NULL);

    s_config(&t, false);
    check_on_fail(s_stop_on_fail, &t);
    CHECK_INT(s_launcher(&t, "--detach", NULL), 0);
    CHECK(strstr(t.out, "test-agent: disabled in cloister.toml") != NULL);
    CHECK(testenv_wait_until(s_merge_agent_ready, &t, 10000));

    /* Disabled: the launcher refuses, and the wake says why; the task is queued. */
    char first[128], second[128];
    CHECK_INT(harness_pan_all(t.env, t.out, "specialists", "wake", "test-agent", "--workspace",
                              project, NULL),
              0);
    s_queued_id(t.out, first, sizeof first);
    CHECK(strstr(t.out, "no test-agent worker is running, and the launcher did not start one: "
                        "test-agent is disabled in cloister.toml") != NULL);
    CHECK(strstr(t.out, "woken up") == NULL);

    /* Enabled now: the wake has the launcher start it and waits for its worker. */
    s_config(&t, true);
    CHECK_INT(harness_pan_all(t.env, t.out, "specialists", "wake", "test-agent", "--workspace",
                              project, NULL),
              0);
    s_queued_id(t.out, second, sizeof second);
    CHECK(strstr(t.out, "Started test-agent through the launcher (deploy/run-local.sh start "
                        "test-agent): test-agent runs (pid ") != NULL);
    CHECK(strstr(t.out, "✓ Specialist test-agent woken up successfully") != NULL);
    pid_t tester = deploy_pid_of(t.env, "test-agent");
    CHECK(deploy_alive(tester));
    CHECK_INT(harness_pan(t.env, t.out, "task", "wait", first, second, "--json", NULL), 0);
    CHECK(strstr(t.out, "\"TESTS_RUN\":3") != NULL);

    /* The launcher now counts it as one of its instances. */
    CHECK_INT(s_launcher(&t, "status", NULL), 0);
    char line[80];
    snprintf(line, sizeof line, "test-agent running (pid %ld)", (long)tester);
    CHECK(strstr(t.out, line) != NULL);
    /* Asked again, it runs already; a name it does not run is refused. */
    CHECK_INT(s_launcher(&t, "start", "test-agent"), 0);
    CHECK(strstr(t.out, line + strlen("test-agent running ")) != NULL);
    CHECK_INT(s_launcher(&t, "start", "docs-agent"), 1);
    CHECK(strstr(t.out, "docs-agent is not a specialist this launcher runs") != NULL);

    check_on_fail(NULL, NULL);
    CHECK_INT(s_launcher(&t, "stop", NULL), 0);
    CHECK(!deploy_alive(tester));
    if (deploy_alive(tester))
        kill(tester, SIGKILL);
    testenv_destroy(&t.env);
    return check_exit_code("test_deploy_wake");
}
