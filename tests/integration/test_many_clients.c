/* Many clients at once, on a CURVE bus: while tasks are submitted and their results come
 * in, loops of `pan status` / `pan task list` run side by side (every local pan call, like
 * every specialist start, makes sure the keys exist), and rounds of 8 generic workers are
 * started at the same instant. Nothing may be refused (no pan call, no handshake, no
 * worker message), no worker may go deaf (each of a round's 8 takes one of its 8 tasks, and
 * none says "no word from the broker"), and every task runs exactly once, at attempt 1.
 *
 * The failure this guards against: the keys were rewritten (truncated, then written) by
 * every pan call and specialist start, and the readers -- the broker's key store and each
 * worker's ZAP handler -- reload the directory whenever it changes, so one that read a
 * half-written file refused a valid key for that moment: a refused submit or result (run
 * twice), or a worker whose task socket refused the broker's handshake and so never heard
 * from it again.
 *
 * CLOISTER_SOAK_ROUNDS / CLOISTER_SOAK_STORM / CLOISTER_SOAK_TASKS make it bigger
 * (tests/soak/many_clients.sh). */
#include "check.h"
#include "curve.h"
#include "failure.h"
#include "testbroker.h"
#include "clock.h"
#include "testenv.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROUND_WORKERS 8
#define LOAD_WORKERS 4
#define STORMS 4

static int s_env_int(const char *name, int fallback)
{
    const char *text = getenv(name);
    return text != NULL && atoi(text) > 0 ? atoi(text) : fallback;
}

/* Starts `count` workers of `specialist` from one shell, at once (`&` each), and returns the
 * shell's pid (its process group holds them all). Each task writes its attempt to
 * runs/<task> and its worker's pid to by/<task>. */
static pid_t s_start_workers(testenv_t *env, const char *specialist, int count, const char *pause)
{
    char script[4096];
    snprintf(script, sizeof script,
             "cmd='echo \"$CLOISTER_TASK_ATTEMPT\" >> \"%s/runs/$CLOISTER_TASK_ID\"; "
             "echo \"$PPID\" >> \"%s/by/$CLOISTER_TASK_ID\"; sleep %s'\n"
             "i=0; while [ $i -lt %d ]; do\n"
             "  \"%s\" --specialist %s --worker-id %s-$i --bind \"ipc://%s/%s-$i.sock\" "
             "--heartbeat-ms 500 --grace-ms 3000 -- /bin/sh -c \"$cmd\" "
             "> \"%s/%s-$i.log\" 2>&1 &\n"
             "  i=$((i + 1))\n"
             "done\n"
             "wait\n",
             env->dir, env->dir, pause, count, testenv_bin("cloister-worker"), specialist,
             specialist, env->dir, specialist, env->dir, specialist);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    return testenv_spawn(env, NULL, argv);
}

/* `loops` rounds of `pan status` and `pan task list` in one shell; a failed call appends
 * its output to pan-failed. */
static pid_t s_start_storm(testenv_t *env, int n, int loops)
{
    char script[2048], name[32];
    snprintf(script, sizeof script,
             "i=0; while [ $i -lt %d ]; do\n"
             "  for c in status 'task list'; do\n"
             "    out=$(\"%s\" --timeout-ms 10000 $c 2>&1) || "
             "printf 'pan %%s: %%s\\n' \"$c\" \"$out\" >> \"%s/pan-failed\"\n"
             "  done\n"
             "  i=$((i + 1))\n"
             "done\n"
             "touch \"%s/storm-%d.done\"\n",
             loops, testenv_bin("pan"), env->dir, env->dir, n);
    snprintf(name, sizeof name, "storm-%d", n);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    return testenv_spawn(env, name, argv);
}

/* How many workers the broker has (stats), -1 without an answer. */
static int64_t s_workers(client_t *client)
{
    wire_writer_t *stats = wire_writer_new();
    wire_writer_start(stats, MSG_STATS);
    wire_msg_t *reply = NULL;
    int64_t count = -1;
    if (client_call(client, stats, &reply) == 0) {
        const msgpack_object *n = wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_WORKERS);
        count = n != NULL && n->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)n->via.u64 : 0;
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&stats);
    return count;
}

/* Waits (up to 10 s) until the broker has `count` workers; false, having said so, if not. */
static bool s_wait_workers(client_t *client, int64_t count)
{
    int64_t have = -1;
    for (int i = 0; i < 200 && (have = s_workers(client)) != count; i++)
        testenv_sleep_ms(50);
    if (have != count)
        fprintf(stderr, "the broker has %lld workers, not %lld\n", (long long)have,
                (long long)count);
    return have == count;
}

/* Submits through control; a specialist is refused until it is known (its first worker's
 * hello), so that is waited for (up to 5 s). Returns 0 or the last refusal. */
static int s_submit(client_t *client, const char *id, const char *specialist)
{
    int rc = -1;
    for (int tries = 0; tries < 100 && rc != 0; tries++) {
        rc = testbroker_submit(client, id, specialist, NULL, NULL);
        if (rc != 0)
            testenv_sleep_ms(50);
    }
    if (rc != 0)
        fprintf(stderr, "submit %s: %s\n", id, failure_message());
    return rc;
}

/* True once every task of ids[0..count) is done (waits up to timeout_ms). */
static bool s_all_done(client_t *client, char ids[][64], int count, int timeout_ms)
{
    int64_t until = clock_now_ms() + timeout_ms;
    char state[64];
    for (int i = 0; i < count; i++) {
        while (strcmp(testbroker_state(client, ids[i], state, sizeof state), "done") != 0) {
            if (clock_now_ms() > until) {
                fprintf(stderr, "task %s is '%s', not done\n", ids[i], state);
                return false;
            }
            testenv_sleep_ms(50);
        }
    }
    return true;
}

/* The file runs/<id> holds one line, "1": the task ran once, at its first attempt. */
static bool s_ran_once(testenv_t *env, const char *id)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/runs/%s", env->dir, id);
    char *text = testenv_read_file(path);
    bool once = text != NULL && strcmp(text, "1\n") == 0;
    if (!once)
        fprintf(stderr, "task %s ran as: %s\n", id, text ? text : "(never)");
    free(text);
    return once;
}

/* How many distinct worker pids ran the tasks ids[0..count) (by/<task>). */
static int s_distinct_workers(testenv_t *env, char ids[][64], int count)
{
    char seen[ROUND_WORKERS][32];
    int nseen = 0;
    for (int i = 0; i < count; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/by/%s", env->dir, ids[i]);
        char *text = testenv_read_file(path);
        if (text == NULL)
            continue;
        text[strcspn(text, "\n")] = '\0';
        bool known = false;
        for (int j = 0; j < nseen; j++)
            known = known || strcmp(seen[j], text) == 0;
        if (!known && nseen < ROUND_WORKERS)
            snprintf(seen[nseen++], sizeof seen[0], "%s", text);
        free(text);
    }
    return nseen;
}

/* How many files in the test directory named <prefix>*.log contain `text`. (A worker that
 * says "no word from the broker" is not deaf for that: on a loaded machine the broker can
 * be slower than three 100 ms intervals; deaf is never getting a task, checked above.) */
static int s_logs_saying(testenv_t *env, const char *prefix, const char *text)
{
    int found = 0;
    DIR *dir = opendir(env->dir);
    struct dirent *entry;
    while (dir != NULL && (entry = readdir(dir)) != NULL) {
        size_t len = strlen(entry->d_name);
        if (strncmp(entry->d_name, prefix, strlen(prefix)) != 0 || len < 4 ||
            strcmp(entry->d_name + len - 4, ".log") != 0)
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", env->dir, entry->d_name);
        char *log = testenv_read_file(path);
        if (log != NULL && strstr(log, text) != NULL) {
            fprintf(stderr, "%s says \"%s\"\n", entry->d_name, text);
            found++;
        }
        free(log);
    }
    if (dir != NULL)
        closedir(dir);
    return found;
}

int main(void)
{
    int rounds = s_env_int("CLOISTER_SOAK_ROUNDS", 10);
    int storm_loops = s_env_int("CLOISTER_SOAK_STORM", 30);
    int load_tasks = s_env_int("CLOISTER_SOAK_TASKS", 150);
    testenv_t *env = testenv_new("many_clients");
    if (env == NULL)
        return 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[security]\ncurve = true\n\n[broker]\nretry_backoff_ms = 50\n"
                                   "\n[specialists.load-agent]\nenabled = true\n") == 0);
    snprintf(path, sizeof path, "%s/runs", env->dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/by", env->dir);
    CHECK(mkdir(path, 0700) == 0);
    /* This process is a client too (it submits, and asks for states and stats). */
    CHECK_INT(curve_keys_init(), 0);
    config_t *config = NULL;
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK_INT(config_load(path, &config), 0);
    const char *endpoints[] = {env->control_ep, NULL};
    CHECK_INT(curve_client_init(config, endpoints), 0);
    /* Heartbeats of 500 ms (the workers follow the broker's): on a loaded machine a
     * stall of three 100 ms intervals would take a live worker for lost and run its task
     * again, which is not what this test is about. */
    pid_t broker = testbroker_start(env, 500, NULL);
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    CHECK(client != NULL);

    pid_t load = s_start_workers(env, "load-agent", LOAD_WORKERS, "0");
    CHECK(load > 0);
    CHECK(s_wait_workers(client, LOAD_WORKERS));
    pid_t storms[STORMS];
    for (int i = 0; i < STORMS; i++) {
        storms[i] = s_start_storm(env, i, storm_loops);
        CHECK(storms[i] > 0);
    }

    /* Rounds of workers started at once, with the load submitted in between. */
    char (*load_ids)[64] = calloc((size_t)load_tasks, sizeof *load_ids);
    CHECK(load_ids != NULL);
    int submitted = 0, distinct_total = 0;
    for (int r = 0; r < rounds; r++) {
        char specialist[32], round_ids[ROUND_WORKERS][64];
        snprintf(specialist, sizeof specialist, "round%d-agent", r);
        pid_t round = s_start_workers(env, specialist, ROUND_WORKERS, "0.3");
        CHECK(round > 0);
        /* All of them announced, so that each takes one of the round's tasks. */
        CHECK(s_wait_workers(client, LOAD_WORKERS + ROUND_WORKERS));
        for (int i = 0; i < ROUND_WORKERS; i++) {
            snprintf(round_ids[i], sizeof round_ids[i], "r%d-%d", r, i);
            CHECK_INT(s_submit(client, round_ids[i], specialist), 0);
        }
        for (int i = 0; i < load_tasks / rounds + (r == rounds - 1 ? load_tasks % rounds : 0);
             i++) {
            snprintf(load_ids[submitted], sizeof load_ids[0], "load-%d", submitted);
            CHECK_INT(s_submit(client, load_ids[submitted], "load-agent"), 0);
            submitted++;
        }
        CHECK(s_all_done(client, round_ids, ROUND_WORKERS, 15000));
        int distinct = s_distinct_workers(env, round_ids, ROUND_WORKERS);
        if (distinct != ROUND_WORKERS)
            fprintf(stderr, "round %d: %d of %d workers took a task\n", r, distinct,
                    ROUND_WORKERS);
        distinct_total += distinct;
        for (int i = 0; i < ROUND_WORKERS; i++)
            CHECK(s_ran_once(env, round_ids[i]));
        testenv_signal(round, SIGTERM);
        CHECK(testenv_wait(env, round, 10000) >= 0);
        CHECK(s_wait_workers(client, LOAD_WORKERS)); /* they said goodbye */
    }
    CHECK_INT(distinct_total, rounds * ROUND_WORKERS);
    CHECK(s_all_done(client, load_ids, submitted, 30000));
    for (int i = 0; i < submitted; i++)
        CHECK(s_ran_once(env, load_ids[i]));
    for (int i = 0; i < STORMS; i++)
        CHECK(testenv_wait(env, storms[i], 120000) == 0);

    /* Nothing refused: no pan call, no handshake, no worker message. */
    snprintf(path, sizeof path, "%s/pan-failed", env->dir);
    char *failed = testenv_read_file(path);
    if (failed != NULL)
        fprintf(stderr, "pan calls failed:\n%s\n", failed);
    CHECK(failed == NULL);
    free(failed);
    CHECK_INT(testbroker_rejected(client, "unauthenticated"), 0);
    CHECK_INT(testbroker_rejected(client, "denied"), 0);
    CHECK_INT(testbroker_rejected(client, "foreign_key"), 0);
    /* No worker deaf, and the broker never failed to reach one. */
    CHECK_INT(s_logs_saying(env, "broker", "could not send to worker"), 0);
    CHECK_INT(s_logs_saying(env, "round", "connection to the broker is gone"), 0);
    CHECK_INT(s_logs_saying(env, "load", "connection to the broker is gone"), 0);
    printf("many clients: %d rounds of %d workers, %d load tasks, %d pan calls: 0 refused, "
           "0 deaf, 0 retried, 0 run twice\n",
           rounds, ROUND_WORKERS, submitted, STORMS * storm_loops * 2);

    testenv_signal(load, SIGTERM);
    testenv_wait(env, load, 10000);
    free(load_ids);
    client_destroy(&client);
    config_destroy(&config);
    testenv_destroy(&env);
    return check_exit_code("test_many_clients");
}
