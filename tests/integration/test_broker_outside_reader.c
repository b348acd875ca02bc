/* An outside reader does not stall the broker, and a backup taken while it runs is whole.
 *
 * An admin's sqlite3 session holding a read transaction on broker.db keeps the WAL from
 * being reset. The broker used to wait out SQLite's 5 s busy timeout on every commit past
 * its WAL limit, so `stats` took 5 s and more; here it must answer every time before that
 * timeout would have expired (the client's deadline is 4 s: a bound on waiting, not a speed
 * target), and the log says once that a reader holds the WAL. `pan backup`, taken meanwhile,
 * is a consistent copy (integrity_check ok) holding every task acknowledged before it began;
 * `pan restore` refuses while the broker runs and puts the copy back once it is stopped. */
#include "check.h"
#include "failure.h"
#include "testbroker.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define ACKED 50
#define ROUNDS 30
#define PER_ROUND 400

/* A submit with a 1 KiB title, fire-and-forget on `in`. */
static void s_push_submit(void *push, const char *id)
{
    char title[1024];
    memset(title, 't', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    submit_t task = {.id = id, .specialist = "test-agent", .title = title};
    wire_writer_t *w = wire_writer_new();
    submit_encode(w, &task);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zmq_send(push, data, len, 0);
    wire_writer_destroy(&w);
}

static bool s_stats(client_t *client)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    wire_msg_destroy(&reply);
    if (rc != 0)
        fprintf(stderr, "stats: %s\n", failure_message());
    return rc == 0;
}

/* How many times `needle` occurs in the file at `path`. */
static int s_count_in_file(const char *path, const char *needle)
{
    char *text = testenv_read_file(path);
    int count = 0;
    for (const char *at = text; at != NULL && (at = strstr(at, needle)) != NULL; at++)
        count++;
    free(text);
    return count;
}

static int64_t s_query_int(sqlite3 *db, const char *sql, const char *param)
{
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK) {
        if (param != NULL)
            sqlite3_bind_text(stmt, 1, param, -1, SQLITE_STATIC);
        if (sqlite3_step(stmt) == SQLITE_ROW)
            value = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    return value;
}

/* The backup at `path` checks out and holds tasks acked-0 .. acked-(ACKED-1). */
static void s_check_backup(const char *path)
{
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    sqlite3_stmt *stmt = NULL;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(stmt) == SQLITE_ROW);
    CHECK_STR((const char *)sqlite3_column_text(stmt, 0), "ok");
    sqlite3_finalize(stmt);
    for (int i = 0; i < ACKED; i++) {
        char id[32];
        snprintf(id, sizeof id, "acked-%d", i);
        CHECK_INT(s_query_int(db, "SELECT count(*) FROM tasks WHERE id = ?", id), 1);
    }
    fprintf(stderr, "backup: %lld tasks\n",
            (long long)s_query_int(db, "SELECT count(*) FROM tasks", NULL));
    sqlite3_close(db);
}

static int s_pan(testenv_t *env, const char *command, const char *file, char *out, size_t size)
{
    char *argv[] = {(char *)testenv_bin("pan"), (char *)command, (char *)file, NULL};
    return testenv_run(env, argv, out, size, 60000);
}

int main(void)
{
    testenv_t *env = testenv_new("broker-outside-reader");
    if (env == NULL)
        return 1;
    char path[700], db_path[700], backup[700], log[700];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[broker]\nwal_limit_mb = 1\n") == 0);
    snprintf(db_path, sizeof db_path, "%s/broker.db", env->home);
    snprintf(backup, sizeof backup, "%s/backup.db", env->dir);
    snprintf(log, sizeof log, "%s/broker.log", env->dir);
    pid_t broker = testbroker_start(env, 0, "normal");
    CHECK(broker > 0);
    client_t *client = client_new(env->control_ep, 4000);
    for (int i = 0; i < ACKED; i++) {
        char id[32];
        snprintf(id, sizeof id, "acked-%d", i);
        CHECK_INT(testbroker_submit(client, id, "test-agent", NULL, NULL), 0);
    }

    /* The outside reader: a read transaction left open, as an sqlite3 shell would. */
    sqlite3 *reader = NULL;
    CHECK(sqlite3_open_v2(db_path, &reader, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(reader, "BEGIN", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(s_query_int(reader, "SELECT count(*) FROM tasks", NULL) == ACKED);

    /* Load past the 1 MB WAL limit, and a stats request after every round of it. */
    void *context = zmq_ctx_new();
    void *push = zmq_socket(context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(push, env->in_ep) == 0);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_ROUND; i++) {
            char id[48];
            snprintf(id, sizeof id, "load-%d-%d", round, i);
            s_push_submit(push, id);
        }
        CHECK(s_stats(client));
        if (round == ROUNDS / 2) {
            char out[4096];
            CHECK_INT(s_pan(env, "backup", backup, out, sizeof out), 0);
            CHECK(strstr(out, "Backed up") != NULL);
        }
    }
    CHECK(s_stats(client));
    CHECK_INT(s_count_in_file(log, "another connection holds a read transaction"), 1);
    s_check_backup(backup);

    /* The reader ends: the WAL is reset again (a second after the last try), and said so. */
    sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(reader);
    for (int round = 0; round < 50 && s_count_in_file(log, "the WAL could be reset again") == 0;
         round++) {
        for (int i = 0; i < PER_ROUND; i++) {
            char id[48];
            snprintf(id, sizeof id, "after-%d-%d", round, i);
            s_push_submit(push, id);
        }
        CHECK(s_stats(client));
        testenv_sleep_ms(100);
    }
    CHECK_INT(s_count_in_file(log, "the WAL could be reset again"), 1);
    CHECK_INT(testbroker_submit(client, "after-reader", "test-agent", NULL, NULL), 0);

    /* Restore: refused while the broker runs, done once it stopped. */
    char out[4096];
    CHECK_INT(s_pan(env, "restore", backup, out, sizeof out), 1);
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    CHECK(testenv_wait(env, broker, 10000) != -1);
    CHECK_INT(s_pan(env, "restore", backup, out, sizeof out), 0);
    CHECK(strstr(out, "Restored") != NULL);
    broker = testbroker_start(env, 0, "normal");
    CHECK(broker > 0);
    client = client_new(env->control_ep, 4000);
    char state[32];
    CHECK_STR(testbroker_state(client, "acked-0", state, sizeof state), "queued");
    CHECK(testbroker_task_unknown(client, "after-reader"));

    zmq_close(push);
    zmq_ctx_term(context);
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    testenv_wait(env, broker, 10000);
    testenv_destroy(&env);
    return check_exit_code("test_broker_outside_reader");
}
