/* cloister-worker reads $PANOPTICON_HOME/cloister.toml like the other specialists: without
 * CLOISTER_IN or --in it finds the broker at [broker] in; without --heartbeat-ms it
 * heartbeats every [broker] heartbeat_ms, so a broker expecting 100 ms heartbeats keeps it
 * through a task longer than the broker's silence limit. A configuration that does not
 * parse stops it at start with exit code 1 and the reason. On SIGHUP it reads the file
 * again between tasks and reports what it did in run/reload-<pid>.json (what applied,
 * what needs a restart, a reload waiting for the running task, a file refused). */
#include "worker_harness.h"

#include <sys/stat.h>
#include <sys/wait.h>

static const char *const SCRIPT =
    "echo started\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do sleep 0.02; done\n"
    "echo 'STATUS: ok'\n";

static const char *s_text(const json_t *report, const char *key)
{
    const char *text = json_string_value(json_object_get(report, key));
    return text ? text : "";
}

/* The worker's reload report once it has the state `state` (NULL after 5 s). */
static json_t *s_report(harness_t *h, pid_t pid, const char *state)
{
    char path[600];
    snprintf(path, sizeof path, "%s/run/reload-%ld.json", h->env->home, (long)pid);
    for (int i = 0; i < 250; i++) {
        json_t *report = json_load_file(path, 0, NULL);
        if (report != NULL && strcmp(s_text(report, "state"), state) == 0)
            return report;
        json_decref(report);
        harness_pump(h, 20);
    }
    return NULL;
}

static void test_reload(harness_t *h, pid_t worker)
{
    char config[512], text[1024], run[512], path[600];
    snprintf(config, sizeof config, "%s/cloister.toml", h->env->home);
    snprintf(run, sizeof run, "%s/run", h->env->home);
    CHECK_INT(mkdir(run, 0700), 0);
    snprintf(path, sizeof path, "%s/reload-%ld.json", run, (long)worker);

    /* What it reads after start applies; a heartbeat waits for a restart. */
    snprintf(text, sizeof text,
             "[broker]\nin = \"%s\"\nheartbeat_ms = 150\nretry_backoff_ms = 50\n"
             "[specialists.cfg-agent]\ntimeout = 42\n[review]\nmode = \"strict\"\n",
             h->env->in_ep);
    CHECK(testenv_write_file(config, text) == 0);
    kill(worker, SIGHUP);
    json_t *report = s_report(h, worker, "reloaded");
    CHECK(report != NULL);
    CHECK_STR(s_text(report, "specialist"), "cfg-agent");
    CHECK_STR(s_text(report, "applied"), "[specialists.cfg-agent] timeout");
    CHECK_STR(s_text(report, "restart"), "[broker] heartbeat_ms"); /* [review]: not its own */
    json_decref(report);

    /* During a task: pending until the task ends, then reloaded. */
    harness_submit(h, "rl1", "cfg-agent", "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.progress", "rl1", 5000) != NULL);
    unlink(path);
    kill(worker, SIGHUP);
    report = s_report(h, worker, "pending");
    CHECK(report != NULL);
    CHECK_STR(s_text(report, "task"), "rl1");
    json_decref(report);
    harness_go(h, "go-rl1");
    CHECK(harness_wait(h, "task.done", "rl1", 5000) != NULL);
    report = s_report(h, worker, "reloaded");
    CHECK(report != NULL);
    CHECK_STR(s_text(report, "applied"), "");
    json_decref(report);

    /* A file that does not parse: refused with the reason; the worker goes on. */
    CHECK(testenv_write_file(config, "[broker\n") == 0);
    kill(worker, SIGHUP);
    report = s_report(h, worker, "refused");
    CHECK(report != NULL);
    CHECK(strstr(s_text(report, "error"), "cloister.toml:1:") != NULL);
    json_decref(report);
    harness_go(h, "go-rl2");
    harness_submit(h, "rl2", "cfg-agent", "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.done", "rl2", 5000) != NULL);
    unlink(path);
    rmdir(run);
}

static void test_settings_from_config(harness_t *h)
{
    /* The broker runs with 100 ms heartbeats and 3 misses: 300 ms of silence loses a
     * worker that keeps the skeleton's default of 1000 ms. */
    char config[512], text[1024];
    snprintf(config, sizeof config, "%s/cloister.toml", h->env->home);
    snprintf(text, sizeof text,
             "[broker]\nin = \"%s\"\nheartbeat_ms = 100\nretry_backoff_ms = 50\n", h->env->in_ep);
    CHECK(testenv_write_file(config, text) == 0);

    /* No CLOISTER_IN and no --in: the endpoint can only come from the file. */
    char in_ep[sizeof h->env->in_ep];
    snprintf(in_ep, sizeof in_ep, "%s", h->env->in_ep);
    unsetenv("CLOISTER_IN");
    const char *const endpoint_flags[] = {"--heartbeat-ms", HARNESS_HB, NULL};
    pid_t wa = harness_spawn_worker(h, "wa", "cfg-agent", SCRIPT, endpoint_flags);
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
    test_reload(h, wa);
}

static void test_bad_config(harness_t *h)
{
    char home[400], config[512];
    snprintf(home, sizeof home, "%s/bad-home", h->env->dir);
    snprintf(config, sizeof config, "%s/cloister.toml", home);
    CHECK(testenv_write_file(config, "[broker]\nheartbeat_ms = \"fast\"\n") == 0);
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
