/* cloister-worker reads $PANOPTICON_HOME/cloister.toml like the other specialists: without
 * CLOISTER_IN or --in it finds the broker at [broker] in; without --heartbeat-ms it
 * heartbeats every [broker] heartbeat_ms, so a broker expecting 100 ms heartbeats keeps it
 * through a task longer than the broker's silence limit. A configuration that does not
 * parse stops it at start with exit code 1 and the reason. */
#include "worker_harness.h"

#include <sys/wait.h>

static const char *const SCRIPT =
    "echo started\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do sleep 0.02; done\n"
    "echo 'STATUS: ok'\n";

static void test_settings_from_config(harness_t *h)
{
    /* The broker runs with 100 ms heartbeats and 3 misses: 300 ms of silence loses a
     * worker that keeps the skeleton's default of 1000 ms. */
    char config[512], text[1024];
    snprintf(config, sizeof config, "%s/cloister.toml", h->env->home);
    snprintf(text, sizeof text,
             "[broker]\nin = \"%s\"\nheartbeat_ms = 100\nretry_backoff_ms = 50\n", h->env->in_ep);
    testenv_write_file(config, text);

    /* No CLOISTER_IN and no --in: the endpoint can only come from the file. */
    char in_ep[sizeof h->env->in_ep];
    snprintf(in_ep, sizeof in_ep, "%s", h->env->in_ep);
    unsetenv("CLOISTER_IN");
    const char *const endpoint_flags[] = {"--heartbeat-ms", HARNESS_HB, NULL};
    harness_spawn_worker(h, "wa", "cfg-agent", SCRIPT, endpoint_flags);
    CHECK(harness_wait_joined(h, "wa"));
    /* --in given, no --heartbeat-ms: the interval can only come from the file. */
    const char *const heartbeat_flags[] = {"--in", in_ep, NULL};
    harness_spawn_worker(h, "wb", "hb-agent", SCRIPT, heartbeat_flags);
    CHECK(harness_wait_joined(h, "wb"));
    setenv("CLOISTER_IN", in_ep, 1);

    harness_go(h, "go-cfg1");
    harness_submit(h, "cfg1", "cfg-agent", "normal", 0, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "cfg1", 5000);
    CHECK(done != NULL && strcmp(harness_field(done, "worker"), "wa") == 0);

    harness_submit(h, "hb1", "hb-agent", "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.progress", "hb1", 5000) != NULL);
    harness_pump(h, 1000); /* more than three silence limits */
    harness_go(h, "go-hb1");
    done = harness_wait(h, "task.done", "hb1", 5000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(done, "worker"), "wb");
        CHECK_INT(harness_int(done, "attempt"), 1);
    }
    CHECK_INT(harness_count(h, "worker.lost", NULL), 0);
}

static void test_bad_config(harness_t *h)
{
    char home[400], config[512];
    snprintf(home, sizeof home, "%s/bad-home", h->env->dir);
    snprintf(config, sizeof config, "%s/cloister.toml", home);
    testenv_write_file(config, "[broker]\nheartbeat_ms = \"fast\"\n");
    setenv("PANOPTICON_HOME", home, 1);
    const char *const flags[] = {NULL};
    pid_t pid = harness_spawn_worker(h, "wbad", "bad-agent", SCRIPT, flags);
    setenv("PANOPTICON_HOME", h->env->home, 1);
    int status = testenv_wait(h->env, pid, 5000);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char *log = testenv_read_file(harness_path(h, "wbad.log"));
    CHECK(log != NULL && strstr(log, "cannot load the configuration") != NULL);
    CHECK(log != NULL && strstr(log, "cloister.toml:2:") != NULL);
    free(log);
}

int main(void)
{
    harness_t *h = harness_new("worker-config");
    if (h == NULL)
        return 1;
    test_settings_from_config(h);
    test_bad_config(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_config");
}
