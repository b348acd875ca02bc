/* Unit tests for the broker's store (services/broker/store.c):
 * - no write is committed on its own: a task inserted and updated without store_begin(),
 *   by a process that then dies before store_commit() (as on kill -9), is not there when
 *   the database is opened again, and neither is its event;
 * - the same writes followed by store_commit() are there after reopening, event included;
 * - a task's result round trip: set, kept by a NULL result, cleared by an empty one;
 * - a store of schema version 5 (the ended-state index written with an IN list) is migrated
 *   when opened: the index rebuilt with the OR chain, the rows and listings unchanged. */
#include "check.h"
#include "failure.h"
#include "store.h"
#include "testenv.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char s_event_body[] = "event-body";
static const char s_event_topic[] = "task.queued/test-agent";

/* A queued task of "test-agent", ready to insert (caller owns). */
static task_t *s_task(const char *id)
{
    task_t *task = task_new(id);
    task_set_text(&task->specialist, "test-agent");
    task_set_text(&task->title, "a title");
    task->priority = PRIORITY_NORMAL;
    task->state = TASK_QUEUED;
    task->order = 1;
    task->max_attempts = 3;
    task->timeout_s = 60;
    task->created = task->updated = 1000;
    return task;
}

/* Inserts task `id`, updates it (running, attempt 1) and adds its event (number `seq`),
 * all without calling store_begin() first; commits only if `commit`. Returns 0 if every
 * call did. */
static int s_write_task_seq(store_t *store, const char *id, int64_t seq, bool commit)
{
    task_t *task = s_task(id);
    bool inserted = false;
    int rc = store_task_insert(store, task, &inserted);
    if (rc == 0 && !inserted)
        rc = -1;
    task->state = TASK_RUNNING;
    task->attempt = 1;
    task_set_text(&task->worker_id, "w-1");
    if (rc == 0)
        rc = store_task_update(store, task, NULL, 0);
    if (rc == 0)
        rc = store_event_insert(store, seq, s_event_topic, strlen(s_event_topic), s_event_body,
                                sizeof s_event_body);
    if (rc == 0 && commit)
        rc = store_commit(store);
    task_destroy(&task);
    return rc;
}

static int s_write_task(store_t *store, const char *id, bool commit)
{
    return s_write_task_seq(store, id, 1, commit);
}

/* In a child process: opens the store, writes task `id`, commits if `commit`, then ends
 * with _exit() without closing anything, as a broker killed with -9 would. Returns the
 * child's exit code (0: every store call succeeded). */
static int s_child_writes(const char *path, const char *id, bool commit)
{
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        store_t *store = NULL;
        if (store_open(path, STORE_SYNC_FULL, &store) != 0)
            _exit(2);
        _exit(s_write_task(store, id, commit) == 0 ? 0 : 3);
    }
    int status = -1;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

typedef struct {
    int count;
    int64_t seq;
    bool body_matches;
} replayed_t;

static int s_on_event(int64_t seq, const void *body, size_t len, void *arg)
{
    replayed_t *replayed = arg;
    replayed->count++;
    replayed->seq = seq;
    replayed->body_matches = len == sizeof s_event_body && memcmp(body, s_event_body, len) == 0;
    return 0;
}

static void test_uncommitted_writes_are_lost(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/uncommitted.db", dir);
    CHECK_INT(s_child_writes(path, "t-lost", false), 0);

    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_FULL, &store), 0);
    CHECK(store != NULL);
    task_t *task = NULL;
    CHECK_INT(store_task_load(store, "t-lost", &task), FAILURE_NOT_FOUND);
    CHECK(task == NULL);
    task_destroy(&task);
    replayed_t replayed = {0};
    CHECK_INT(store_events_replay(store, 0, NULL, 100, s_on_event, &replayed), 0);
    CHECK_INT(replayed.count, 0);
    CHECK_INT(store_last_seq(store), 0);
    store_close(&store);
}

static void test_committed_writes_stay(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/committed.db", dir);
    CHECK_INT(s_child_writes(path, "t-kept", true), 0);

    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_FULL, &store), 0);
    CHECK(store != NULL);
    task_t *task = NULL;
    CHECK_INT(store_task_load(store, "t-kept", &task), 0);
    CHECK(task != NULL);
    if (task != NULL) {
        CHECK_STR(task->specialist, "test-agent");
        CHECK_STR(task_state_name(task->state), "running");
        CHECK_INT(task->attempt, 1);
        CHECK_STR(task->worker_id, "w-1");
    }
    task_destroy(&task);
    replayed_t replayed = {0};
    CHECK_INT(store_events_replay(store, 0, NULL, 100, s_on_event, &replayed), 0);
    CHECK_INT(replayed.count, 1);
    CHECK_INT(replayed.seq, 1);
    CHECK(replayed.body_matches);
    store_close(&store);
}

/* Loads `id` and checks its stored result is `expected` (NULL: none). */
static void s_check_result(store_t *store, const char *id, const char *expected)
{
    task_t *task = NULL;
    CHECK_INT(store_task_load(store, id, &task), 0);
    CHECK(task != NULL);
    if (expected == NULL) {
        CHECK(task->result == NULL);
        CHECK_INT(task->result_len, 0);
    } else {
        CHECK_INT(task->result_len, strlen(expected));
        CHECK(task->result != NULL && memcmp(task->result, expected, strlen(expected)) == 0);
    }
    task_destroy(&task);
}

static void test_result_round_trip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/round-trip.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK(store != NULL);
    task_t *task = s_task("t-result");
    bool inserted = false;
    CHECK_INT(store_task_insert(store, task, &inserted), 0);
    CHECK(inserted);
    CHECK_INT(store_commit(store), 0);
    s_check_result(store, "t-result", NULL);

    task->state = TASK_DONE;
    task_set_text(&task->error, "none really");
    CHECK_INT(store_task_update(store, task, "result-1", strlen("result-1")), 0);
    CHECK_INT(store_commit(store), 0);
    s_check_result(store, "t-result", "result-1");

    /* A NULL result keeps the stored one; the other columns are still written. */
    task->attempt = 2;
    CHECK_INT(store_task_update(store, task, NULL, 0), 0);
    CHECK_INT(store_commit(store), 0);
    s_check_result(store, "t-result", "result-1");
    task_t *loaded = NULL;
    CHECK_INT(store_task_load(store, "t-result", &loaded), 0);
    CHECK_INT(loaded ? loaded->attempt : -1, 2);
    CHECK_STR(loaded ? loaded->error : NULL, "none really");
    CHECK_STR(loaded ? task_state_name(loaded->state) : NULL, "done");
    task_destroy(&loaded);

    /* An empty result clears it. */
    CHECK_INT(store_task_update(store, task, "", 0), 0);
    CHECK_INT(store_commit(store), 0);
    s_check_result(store, "t-result", NULL);

    /* Inserting the same id again changes nothing. */
    task_t *again = s_task("t-result");
    CHECK_INT(store_task_insert(store, again, &inserted), 0);
    CHECK(!inserted);
    CHECK_INT(store_commit(store), 0);
    CHECK_INT(store_task_load(store, "t-result", &loaded), 0);
    CHECK_STR(loaded ? task_state_name(loaded->state) : NULL, "done");
    task_destroy(&loaded);
    task_destroy(&again);
    task_destroy(&task);
    store_close(&store);
}

/* The WAL stays near its limit under a stream of commits: the checkpointer copies it back
 * (its connection must have read the database first) and truncates it when it is over. */
static void test_wal_is_bounded(const char *dir)
{
    char path[512], wal[600];
    snprintf(path, sizeof path, "%s/wal.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK(store != NULL);
    const int64_t limit = 512 * 1024;
    CHECK_INT(store_set_wal_limit(store, limit), 0);
    CHECK_INT(store_set_wal_limit(store, 1000), FAILURE_INVALID);
    int64_t largest = 0;
    for (int i = 0; i < 6000; i++) {
        char id[32];
        snprintf(id, sizeof id, "wal-%d", i);
        CHECK_INT(s_write_task_seq(store, id, i + 1, true), 0);
        struct stat st;
        if (i % 100 == 0 && stat(wal, &st) == 0 && st.st_size > largest)
            largest = st.st_size;
    }
    /* Unbounded, 6,000 commits of a few pages each make a WAL of tens of MB. */
    fprintf(stderr, "test_store: largest WAL seen %lld bytes (limit %lld)\n", (long long)largest,
            (long long)limit);
    CHECK(largest > 0);
    /* At most the limit and the commit that crossed it. */
    CHECK(largest < limit + 64 * 1024);
    store_close(&store);
}

/* A task `id` finished (done) at `updated`, or still queued. */
static void s_write_finished(store_t *store, const char *id, int64_t updated, bool finished)
{
    task_t *task = s_task(id);
    bool inserted = false;
    CHECK_INT(store_task_insert(store, task, &inserted), 0);
    task->state = finished ? TASK_DONE : TASK_QUEUED;
    task->updated = updated;
    CHECK_INT(store_task_update(store, task, NULL, 0), 0);
    task_destroy(&task);
}

static bool s_stored(store_t *store, const char *id)
{
    task_t *task = NULL;
    int rc = store_task_load(store, id, &task);
    task_destroy(&task);
    return rc == 0;
}

/* Retention deletes old finished tasks, a batch at a time, and nothing else. */
static void test_prune_finished(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/prune.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK(store != NULL);
    s_write_finished(store, "old-1", 1000, true);
    s_write_finished(store, "old-2", 1000, true);
    s_write_finished(store, "old-3", 1500, true);
    s_write_finished(store, "old-queued", 1000, false);
    s_write_finished(store, "recent", 9000, true);
    CHECK_INT(store_commit(store), 0);
    CHECK_INT(store_prune_finished(store, 5000, 2), 2);
    CHECK_INT(store_prune_finished(store, 5000, 2), 1);
    CHECK_INT(store_prune_finished(store, 5000, 2), 0);
    CHECK_INT(store_commit(store), 0);
    CHECK(!s_stored(store, "old-1") && !s_stored(store, "old-2") && !s_stored(store, "old-3"));
    CHECK(s_stored(store, "old-queued"));
    CHECK(s_stored(store, "recent"));
    store_close(&store);
}

/* The size of the file at path, or -1. */
static off_t s_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Space that retention freed goes back to the file system: 4,000 finished tasks with 8 KiB
 * results, pruned, then reclaimed (a bounded number of pages at a time) -- the file shrinks
 * once the WAL is checkpointed at close. A file made before incremental vacuum is
 * converted when opened. */
static void test_reclaim(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/reclaim.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    static char result[8192];
    memset(result, 'r', sizeof result);
    for (int i = 0; i < 4000; i++) {
        char id[32];
        snprintf(id, sizeof id, "big-%d", i);
        task_t *task = s_task(id);
        bool inserted = false;
        CHECK_INT(store_task_insert(store, task, &inserted), 0);
        task->state = TASK_DONE;
        task->updated = 1000;
        CHECK_INT(store_task_update(store, task, result, sizeof result), 0);
        task_destroy(&task);
        if (i % 500 == 499)
            CHECK_INT(store_commit(store), 0);
    }
    store_close(&store);
    off_t full = s_file_size(path);
    CHECK(full > 30 * 1024 * 1024);

    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    while (store_prune_finished(store, 5000, 1000) > 0)
        CHECK_INT(store_commit(store), 0);
    CHECK_INT(store_commit(store), 0);
    int64_t left = store_reclaim(store, 1024);
    CHECK(left > 0); /* bounded: one call gives back 1024 pages, not all of them */
    for (int i = 0; i < 100 && left > 0; i++)
        left = store_reclaim(store, 1024);
    CHECK_INT(left, 0);
    store_close(&store);
    off_t after = s_file_size(path);
    CHECK(after >= 0 && after < full / 10);
}

static void s_collect_name(const char *name, void *arg)
{
    char *names = arg;
    size_t len = strlen(names);
    snprintf(names + len, 256 - len, "%s%s", len ? " " : "", name);
}

/* A specialist name a worker announced is kept with when; names not announced since a
 * given time and with no queued or running task are forgotten, the others stay. */
static void test_forget_specialists(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/specialists.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK_INT(store_specialist_remember(store, "gone-agent", 1000), 0);
    CHECK_INT(store_specialist_remember(store, "busy-agent", 1000), 0);
    CHECK_INT(store_specialist_remember(store, "recent-agent", 1000), 0);
    CHECK_INT(store_specialist_remember(store, "recent-agent", 9000), 0); /* seen again */
    task_t *task = s_task("queued-for-busy");
    task_set_text(&task->specialist, "busy-agent");
    bool inserted = false;
    CHECK_INT(store_task_insert(store, task, &inserted), 0);
    task_destroy(&task);
    CHECK_INT(store_commit(store), 0);
    CHECK_INT(store_specialists_forget(store, 5000), 1);
    CHECK_INT(store_commit(store), 0);
    char names[256] = "";
    CHECK_INT(store_specialists_load(store, s_collect_name, names), 0);
    CHECK(strstr(names, "gone-agent") == NULL);
    CHECK(strstr(names, "busy-agent") != NULL);
    CHECK(strstr(names, "recent-agent") != NULL);
    store_close(&store);
}

/* Runs `sql` on the database at path through a connection of its own; with `text`, copies
 * there the last column of every row, joined by "; " ("" when none). Returns SQLite's
 * code. */
static int s_sql(const char *path, const char *sql, char *text, size_t size)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open(path, &db);
    if (text != NULL) {
        text[0] = '\0';
        sqlite3_stmt *stmt = NULL;
        if (rc == SQLITE_OK)
            rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);
        size_t len = 0;
        while (rc == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW && len < size) {
            const unsigned char *value = sqlite3_column_text(stmt, sqlite3_column_count(stmt) - 1);
            len += (size_t)snprintf(text + len, size - len, "%s%s", len ? "; " : "",
                                    value ? (const char *)value : "");
        }
        sqlite3_finalize(stmt);
    } else if (rc == SQLITE_OK) {
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    }
    sqlite3_close(db);
    return rc;
}

static int s_collect_id(task_t *task, void *arg)
{
    char *ids = arg;
    size_t len = strlen(ids);
    snprintf(ids + len, 256 - len, "%s%s", len ? " " : "", task->id);
    return 0;
}

/* The ids a listing of ended tasks in `state` gives, newest first. */
static void s_list_state(store_t *store, const char *state, char ids[256])
{
    store_task_filter_t filter = {.state = state, .limit = 50};
    ids[0] = '\0';
    CHECK_INT(store_task_list(store, &filter, s_collect_id, ids), 0);
}

/* Version 6 rewrote the ended-state index's predicate from `state IN (...)` (which costs a
 * temporary b-tree on every write of a task row) to an OR chain. A version-5 store -- the
 * same schema with the old index, made here by taking a new store back -- is migrated when
 * opened, and its finished tasks are still listed and pruned through the index. */
static void test_ended_state_index_migrates(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/v5.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    s_write_finished(store, "done-1", 1000, true);
    s_write_finished(store, "queued-1", 1000, false);
    task_t *task = s_task("dead-1");
    bool inserted = false;
    CHECK_INT(store_task_insert(store, task, &inserted), 0);
    task->state = TASK_DEAD;
    CHECK_INT(store_task_update(store, task, NULL, 0), 0);
    task_destroy(&task);
    CHECK_INT(store_commit(store), 0);
    store_close(&store);
    CHECK_INT(s_sql(path,
                    "DROP INDEX tasks_by_ended_state;"
                    "CREATE INDEX tasks_by_ended_state ON tasks(state, created, rid)"
                    "  WHERE state IN ('done', 'failed', 'dead', 'cancelled');"
                    "DROP TABLE counters;"
                    "DROP TABLE worker_keys;"
                    "PRAGMA user_version=5;",
                    NULL, 0),
              SQLITE_OK);

    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK(store != NULL);
    char ids[256];
    s_list_state(store, "dead", ids);
    CHECK_STR(ids, "dead-1");
    s_list_state(store, "done", ids);
    CHECK_STR(ids, "done-1");
    CHECK_INT(store_prune_finished(store, 5000, 10), 2);
    CHECK_INT(store_commit(store), 0);
    CHECK(s_stored(store, "queued-1") && !s_stored(store, "done-1"));
    store_close(&store);

    char text[512];
    CHECK_INT(s_sql(path, "PRAGMA user_version", text, sizeof text), SQLITE_OK);
    CHECK(atoi(text) >= 6);
    CHECK_INT(s_sql(path, "SELECT sql FROM sqlite_master WHERE name = 'tasks_by_ended_state'",
                    text, sizeof text),
              SQLITE_OK);
    CHECK(strstr(text, "state = 'done' OR state = 'failed'") != NULL);
    CHECK(strstr(text, " IN ") == NULL);
    /* The listing's WHERE holds the index's predicate, so SQLite walks the index. */
    CHECK_INT(s_sql(path,
                    "EXPLAIN QUERY PLAN SELECT rid FROM tasks WHERE state = 'dead' AND"
                    " (state = 'done' OR state = 'failed' OR state = 'dead' OR"
                    " state = 'cancelled') ORDER BY created DESC",
                    text, sizeof text),
              SQLITE_OK);
    CHECK(strstr(text, "INDEX tasks_by_ended_state") != NULL);
    CHECK(strstr(text, "TEMP B-TREE") == NULL);
    /* Version 7 counts what ended from the tasks kept then (done-1 was pruned since). */
    CHECK_INT(s_sql(path, "SELECT done || ' ' || failed || ' ' || dead FROM counters", text,
                    sizeof text),
              SQLITE_OK);
    CHECK_STR(text, "1 0 1");
}

/* A worker id belongs to the first key that said hello under it: another key's claim
 * changes nothing, the owner's refreshes it, and it outlives a reopening (version 8). */
static void test_worker_key_first_claim_stays(const char *dir)
{
    char path[512], key[64];
    snprintf(path, sizeof path, "%s/worker_keys.db", dir);
    store_t *store = NULL;
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK_INT(store_worker_key(store, "vt-1", key, sizeof key), 0);
    CHECK_STR(key, "");
    CHECK_INT(store_worker_key_claim(store, "vt-1", "victim-key", 1000), 0);
    CHECK_INT(store_worker_key_claim(store, "vt-1", "thief-key", 2000), 0);
    CHECK_INT(store_worker_key_claim(store, "vt-1", "victim-key", 3000), 0);
    CHECK_INT(store_commit(store), 0);
    store_close(&store);
    CHECK_INT(store_open(path, STORE_SYNC_OFF, &store), 0);
    CHECK_INT(store_worker_key(store, "vt-1", key, sizeof key), 0);
    CHECK_STR(key, "victim-key");
    /* Last seen at 3000: kept by a cut at 2500, forgotten by one at 3500. */
    CHECK_INT(store_worker_keys_forget(store, 2500), 0);
    CHECK_INT(store_worker_keys_forget(store, 3500), 1);
    CHECK_INT(store_commit(store), 0);
    CHECK_INT(store_worker_key(store, "vt-1", key, sizeof key), 0);
    CHECK_STR(key, "");
    store_close(&store);
}

int main(void)
{
    testenv_t *env = testenv_new("store");
    if (env == NULL)
        return 1;
    test_uncommitted_writes_are_lost(env->dir);
    test_worker_key_first_claim_stays(env->dir);
    test_committed_writes_stay(env->dir);
    test_result_round_trip(env->dir);
    test_wal_is_bounded(env->dir);
    test_prune_finished(env->dir);
    test_reclaim(env->dir);
    test_forget_specialists(env->dir);
    test_ended_state_index_migrates(env->dir);
    testenv_destroy(&env);
    return check_exit_code("test_store");
}
