/* test_runs_once: kill -9 of the broker, again and again, while workers run tasks that take
 * a while, runs no task twice. Every command appends "<task> <attempt> start" and "... end"
 * lines to one log; at the end each acknowledged task is done once and its command started
 * exactly once (a broker restart is not a reason to run anything again: a worker that
 * still holds an attempt keeps it, and one that finished it has its result counted). */
#include "check.h"
#include "testbroker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TASKS 90
#define WORKERS 4
#define KILLS 12

static testenv_t *s_env;

static pid_t s_start_worker(int i, const char *log)
{
    char id[32], name[32], command[1600];
    snprintf(id, sizeof id, "once-w%d", i);
    snprintf(name, sizeof name, "worker%d", i);
    snprintf(command, sizeof command,
             "echo \"$CLOISTER_TASK_ID $CLOISTER_TASK_ATTEMPT start\" >> '%s'; sleep 0.25; "
             "echo \"$CLOISTER_TASK_ID $CLOISTER_TASK_ATTEMPT end\" >> '%s'",
             log, log);
    char *argv[] = {(char *)testenv_bin("cloister-worker"),
                    "--specialist",
                    "once-agent",
                    "--heartbeat-ms",
                    "100",
                    "--worker-id",
                    id,
                    "--",
                    "/bin/sh",
                    "-c",
                    command,
                    NULL};
    return testenv_spawn(s_env, name, argv);
}

/* How many "<task> <n> start" lines the log has for `task`. */
static int s_starts(const char *log, const char *task)
{
    char needle[64];
    snprintf(needle, sizeof needle, "%s ", task);
    int starts = 0;
    for (const char *line = log; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        if (strncmp(line, needle, strlen(needle)) == 0 && len > 6 &&
            strncmp(line + len - 6, " start", 6) == 0)
            starts++;
        line += len + (line[len] == '\n');
    }
    return starts;
}

int main(void)
{
    s_env = testenv_new("runs-once");
    CHECK(s_env != NULL);
    char config[600], log[600];
    snprintf(config, sizeof config, "%s/cloister.toml", s_env->home);
    CHECK(testenv_write_file(config, "[broker]\nretry_backoff_ms = 50\n\n"
                                     "[specialists.once-agent]\nenabled = true\n") == 0);
    snprintf(log, sizeof log, "%s/runs.log", s_env->dir);
    pid_t broker = testbroker_start(s_env, 100, NULL);
    CHECK(broker > 0);
    for (int i = 0; i < WORKERS; i++)
        CHECK(s_start_worker(i, log) > 0);
    client_t *client = testbroker_client(s_env);
    for (int i = 0; i < TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "once-%03d", i);
        while (testbroker_submit(client, id, "once-agent", NULL, NULL) != 0)
            testenv_sleep_ms(50);
    }
    client_destroy(&client);

    /* Kill the broker at moments spread over the tasks' lives. */
    for (int k = 0; k < KILLS; k++) {
        testenv_sleep_ms(300 + (k * 137) % 400);
        testenv_signal(broker, SIGKILL);
        CHECK(testenv_wait(s_env, broker, 5000) >= 0);
        broker = testbroker_spawn(s_env, 100, NULL);
        CHECK(broker > 0);
    }
    /* The last one started answers (its store is open) before the next check. */
    client = testbroker_client(s_env);
    char state[32];
    bool answers = false;
    for (int i = 0; i < 100 && !answers; i++) {
        answers = testbroker_state(client, "once-000", state, sizeof state)[0] != '\0';
        if (!answers)
            testenv_sleep_ms(100);
    }
    CHECK(answers);
    client_destroy(&client);
    /* A second broker on the same store refuses to start (it would write events under the
     * first one's sequence numbers and stop it). */
    char out[4096];
    char *second[] = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1",
                      (char *)testenv_bin("cloister-broker"), "--in", "ipc:///nonexistent/in",
                      "--home", s_env->home, NULL};
    CHECK(testenv_run(s_env, second, out, sizeof out, 20000) != 0);
    if (strstr(out, "is in use by another process") == NULL)
        fprintf(stderr, "the second broker said: %s\n", out);
    CHECK(strstr(out, "is in use by another process") != NULL);

    client = testbroker_client(s_env);
    for (int i = 0; i < TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "once-%03d", i);
        for (int waited = 0; waited < 600; waited++) {
            if (strcmp(testbroker_state(client, id, state, sizeof state), "done") == 0)
                break;
            testenv_sleep_ms(100);
        }
        CHECK_STR(state, "done");
    }
    client_destroy(&client);
    char *runs = testenv_read_file(log);
    CHECK(runs != NULL);
    int twice = 0;
    for (int i = 0; i < TASKS && runs != NULL; i++) {
        char id[32];
        snprintf(id, sizeof id, "once-%03d", i);
        int starts = s_starts(runs, id);
        if (starts != 1) {
            fprintf(stderr, "%s started %d times\n", id, starts);
            twice++;
        }
    }
    free(runs);
    CHECK_INT(twice, 0);
    testenv_destroy(&s_env);
    return check_exit_code("test_runs_once");
}
