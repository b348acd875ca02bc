/* store: the broker's SQLite persistence (see store.h). */
#include "store.h"

#include "clock.h"
#include "dblock.h"
#include "failure.h"
#include "log.h"

#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The ended states, as the predicate of the partial index tasks_by_ended_state. An OR
 * chain, not `state IN (...)`: SQLite tests a partial index's predicate on every insert and
 * on every update of the row, and compiles an IN list of four into a temporary b-tree
 * built afresh each time (twice per UPDATE); the chain is four compares. A query uses the
 * index only when its WHERE clause holds this very expression, so listings and retention
 * write it the same way. */
#define ENDED_STATES "(state = 'done' OR state = 'failed' OR state = 'dead' OR state = 'cancelled')"

/* Ordered migrations: s_migrations[i] takes the schema from version i to i + 1. Change the
 * schema => add a step at the end (never edit one that shipped: stores out there ran it). */
static const char *s_migrations[] = {
    "CREATE TABLE tasks ("
    "  rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, specialist TEXT NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  state TEXT NOT NULL, ord INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,"
    "  failures INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL,"
    "  timeout_s INTEGER NOT NULL, grp TEXT, not_before INTEGER NOT NULL DEFAULT 0,"
    "  title TEXT, issue TEXT, source TEXT, parent TEXT, worker TEXT, error TEXT,"
    "  payload BLOB, result BLOB, created INTEGER NOT NULL, updated INTEGER NOT NULL"
    ");"
    "CREATE TABLE attempts ("
    "  task TEXT NOT NULL, attempt INTEGER NOT NULL, specialist TEXT NOT NULL, issue TEXT,"
    "  worker TEXT, outcome TEXT NOT NULL, error TEXT, finished INTEGER NOT NULL,"
    "  PRIMARY KEY (task, attempt)"
    ") WITHOUT ROWID;"
    "CREATE INDEX attempts_by_issue ON attempts(issue, specialist, finished);"
    /* One row per commit: the events of a loop iteration, each packed as
     * [seq int][topic str][body bin], so an iteration costs one insert however many
     * events it made. */
    "CREATE TABLE events (first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL,"
    "  data BLOB NOT NULL);"
    "CREATE TABLE specialists (name TEXT PRIMARY KEY) WITHOUT ROWID;",
    /* 2: finished tasks and attempts found by age, for retention. */
    "CREATE INDEX tasks_finished ON tasks(updated)"
    "  WHERE state IN ('done', 'failed', 'dead', 'cancelled');"
    "CREATE INDEX attempts_by_finished ON attempts(finished);",
    /* 3: list_tasks pages, newest first, by specialist, issue or ended state (queued and
     * running tasks are listed from the broker's memory, so the rows that change most
     * are not in the state index), each with the creation time, so `created_after` ends
     * the walk instead of filtering every row. */
    "CREATE INDEX tasks_by_created ON tasks(created, rid);"
    "CREATE INDEX tasks_by_ended_state ON tasks(state, created, rid)"
    "  WHERE state IN ('done', 'failed', 'dead', 'cancelled');"
    /* Retention finds its rows through tasks_by_ended_state too (a task is changed after
     * it was created, so `updated < X` implies `created < X`): one index fewer to keep. */
    "DROP INDEX tasks_finished;"
    "CREATE INDEX tasks_by_specialist ON tasks(specialist, created, rid);"
    "CREATE INDEX tasks_by_issue ON tasks(issue, created, rid) WHERE issue IS NOT NULL;",
    /* 4: when a worker of each specialist last said hello, so names nobody serves any more
     * are forgotten (the names kept so far count as seen now). */
    "ALTER TABLE specialists ADD COLUMN last_seen INTEGER NOT NULL DEFAULT 0;"
    "UPDATE specialists SET last_seen = CAST(strftime('%s', 'now') AS INTEGER) * 1000;",
    /* 5: the CURVE keys of who submitted a task (cancelling or retrying it needs that key
     * or an admin's) and of the worker its running attempt was given to (after a restart
     * only that key can say hello holding it); NULL on a plain bus. */
    "ALTER TABLE tasks ADD COLUMN worker_key TEXT;"
    "ALTER TABLE tasks ADD COLUMN submitter_key TEXT;",
    /* 6: the ended-state index's predicate as an OR chain (see ENDED_STATES), same rows. */
    "DROP INDEX tasks_by_ended_state;"
    "CREATE INDEX tasks_by_ended_state ON tasks(state, created, rid) WHERE " ENDED_STATES ";",
    /* 7: each specialist's finished tasks, counted as they end (list_specialists' done,
     * failed, dead), so the counts survive a restart and outlive retention; a store made
     * before starts from the tasks it keeps. */
    "CREATE TABLE counters (specialist TEXT PRIMARY KEY, done INTEGER NOT NULL DEFAULT 0,"
    "  failed INTEGER NOT NULL DEFAULT 0, dead INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "INSERT INTO counters SELECT specialist, SUM(state = 'done'), SUM(state = 'failed'),"
    "  SUM(state = 'dead') FROM tasks WHERE " ENDED_STATES " GROUP BY specialist;",
};

enum {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_TASK_INSERT,
    STMT_TASK_UPDATE,
    STMT_TASK_UPDATE_RESULT,
    STMT_TASK_DISPATCHED,
    STMT_TASK_PRIORITY,
    STMT_TASK_LOAD,
    STMT_ATTEMPT_INSERT,
    STMT_ATTEMPTS_FOR_ISSUE,
    STMT_EVENT_INSERT,
    STMT_EVENTS_TRIM,
    STMT_EVENTS_REPLAY,
    STMT_SPECIALIST_INSERT,
    STMT_TASKS_PRUNE,
    STMT_ATTEMPTS_PRUNE,
    STMT_SPECIALISTS_FORGET,
    STMT_COUNT_FINISHED,
    STMT_COUNT
};

#define TASK_COLUMNS                                                                       \
    "id, specialist, priority, state, ord, attempt, failures, max_attempts, timeout_s, grp," \
    " not_before, title, issue, source, parent, worker, error, payload, result, created, updated," \
    " rid, worker_key, submitter_key"

static const char *s_sql[STMT_COUNT] = {
    [STMT_BEGIN] = "BEGIN",
    [STMT_COMMIT] = "COMMIT",
    [STMT_TASK_INSERT] = "INSERT OR IGNORE INTO tasks (" TASK_COLUMNS ") VALUES "
                         "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL,?22)",
    [STMT_TASK_UPDATE] = "UPDATE tasks SET state=?2, attempt=?3, failures=?4, worker=?5, error=?6,"
                         " not_before=?7, updated=?8, max_attempts=?9 WHERE rid=?1",
    [STMT_TASK_UPDATE_RESULT] = "UPDATE tasks SET state=?2, attempt=?3, failures=?4, worker=?5,"
                                " error=?6, not_before=?7, updated=?8, max_attempts=?9, result=?10"
                                " WHERE rid=?1",
    [STMT_TASK_PRIORITY] = "UPDATE tasks SET priority=?2, updated=?3 WHERE rid=?1",
    [STMT_TASK_DISPATCHED] = "UPDATE tasks SET state=?2, attempt=?3, worker=?4, updated=?5,"
                              " worker_key=?6 WHERE rid=?1",
    [STMT_TASK_LOAD] = "SELECT " TASK_COLUMNS " FROM tasks WHERE id=?",
    [STMT_ATTEMPT_INSERT] = "INSERT OR REPLACE INTO attempts (task, attempt, specialist, issue,"
                            " worker, outcome, error, finished) VALUES (?,?,?,?,?,?,?,?)",
    [STMT_ATTEMPTS_FOR_ISSUE] = "SELECT attempt, task, outcome, error, finished FROM attempts"
                                " WHERE issue=? AND specialist=? ORDER BY finished DESC LIMIT ?",
    [STMT_EVENT_INSERT] = "INSERT INTO events (first_seq, last_seq, data) VALUES (?,?,?)",
    /* first_seq <= last_seq: the first condition adds nothing but lets SQLite walk the
     * primary key instead of scanning the table. */
    [STMT_EVENTS_TRIM] = "DELETE FROM events WHERE first_seq <= ?1 AND last_seq <= ?1",
    [STMT_EVENTS_REPLAY] = "SELECT last_seq, data FROM events WHERE last_seq > ? ORDER BY first_seq"
                           " LIMIT 64",
    [STMT_SPECIALIST_INSERT] = "INSERT INTO specialists (name, last_seen) VALUES (?1, ?2)"
                               " ON CONFLICT (name) DO UPDATE SET last_seen = ?2",
    [STMT_TASKS_PRUNE] = "DELETE FROM tasks WHERE rid IN (SELECT rid FROM tasks WHERE " ENDED_STATES
                         " AND created < ?1 AND updated < ?1 LIMIT ?2)",
    [STMT_ATTEMPTS_PRUNE] = "DELETE FROM attempts WHERE (task, attempt) IN (SELECT task, attempt"
                            " FROM attempts WHERE finished < ?1 LIMIT ?2)",
    [STMT_COUNT_FINISHED] = "INSERT INTO counters (specialist, done, failed, dead)"
                           " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (specialist) DO UPDATE SET"
                           " done = done + ?2, failed = failed + ?3, dead = dead + ?4",
    [STMT_SPECIALISTS_FORGET] = "DELETE FROM specialists WHERE last_seen < ? AND NOT EXISTS ("
                                "  SELECT 1 FROM tasks WHERE tasks.specialist = specialists.name"
                                "  AND state IN ('queued', 'running'))",
};

/* WAL frames after which the checkpointer is woken (fewer when the WAL limit is small). */
#define CHECKPOINT_FRAMES 2000
/* Bytes of one WAL frame: SQLite's default page (the store never changes it) and the
 * frame's header. */
#define STORE_FRAME_BYTES (4096 + 24)

/* How long a connection waits for a lock another connection holds (the broker's own two). */
#define STORE_BUSY_TIMEOUT_MS 5000
/* After an outside reader kept the WAL from being reset, the loop tries again this much
 * later (each try costs it a passive copy up to that reader's snapshot). */
#define STORE_READER_RETRY_MS 1000

/* Checkpoints run on a thread of their own, over a second connection, so the broker's loop
 * never pays for copying the WAL back into the database (PASSIVE: writers never wait).
 * Under a sustained stream of commits a PASSIVE checkpoint never catches up (the WAL can
 * only start over once every frame in it was copied), so when the WAL passes its limit the
 * loop itself runs a TRUNCATE checkpoint right after the commit that crossed it: it pays a
 * copy of at most the limit, and the file shrinks to nothing.
 *
 * That TRUNCATE never waits: any other connection reading from the WAL (an admin's sqlite3
 * shell in a transaction, a backup) would make it wait out the busy timeout on every commit
 * past the limit. With no busy handler it copies what it can and gives up; the WAL then
 * grows past its limit while the reader lasts, which is said once, and the loop tries again
 * a second later. */
typedef struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Held while a checkpoint runs, by the thread or by the loop: SQLite refuses a second
     * checkpoint while one runs (BUSY, without waiting), so the loop's TRUNCATE waits for
     * the thread's PASSIVE (which never waits on anyone) to end instead of failing. */
    pthread_mutex_t busy;
    sqlite3 *db;
    int64_t limit_frames;    /* frames past which the loop truncates the WAL */
    int trigger_frames;      /* frames after which a checkpoint is asked for */
    bool requested;
    bool stop;
    bool running;
    bool warned;             /* a checkpoint that copied nothing was reported */
    log_limit_t thread_warnings; /* the thread's failed checkpoints (a full disk) */
    /* The loop's side (only the loop touches these): */
    log_limit_t loop_warnings;   /* failed truncations */
    int64_t reader_retry_at;     /* monotonic ms: no truncation before (a reader held it) */
    bool reader_reported;        /* "a reader holds the WAL" was said for this episode */
    int64_t largest_frames;      /* the WAL's size while a reader held it */
} checkpointer_t;

struct store_t {
    sqlite3 *db;
    int lock_fd; /* the shared lock on <db>.lock (dblock.h), held while open */
    sqlite3_stmt *stmt[STMT_COUNT];
    bool in_transaction;
    /* A statement of the open transaction failed: the commit must not happen, even if
     * SQLite kept the rest of the transaction (it only undoes the failing statement), and
     * no later write of it runs (SQLite may have rolled the transaction back already, and
     * would then commit each one on its own). */
    bool failed;
    int failed_code; /* FAILURE_STORE, or FAILURE_DISK_FULL */
    char failure[256];
    checkpointer_t checkpointer;
    /* events of the open transaction, written as one row by store_commit() */
    msgpack_sbuffer events;
    msgpack_packer events_packer;
    int64_t events_first, events_last;
    /* The writes of the open transaction, so that a commit the disk had no room for can be
     * done again once room is made (store_set_room_maker): redo_entry_t records (bind a
     * value, run a statement), each text or blob right after its record. */
    msgpack_sbuffer redo;
    bool replaying;
    bool (*make_room)(void *arg);
    void *room_arg;
};

/* The last error of `db` means a full disk: SQLITE_FULL, or an I/O error whose cause was
 * ENOSPC (growing the WAL index, for one). */
static bool s_disk_full(sqlite3 *db)
{
    int code = sqlite3_errcode(db);
    return code == SQLITE_FULL || (code == SQLITE_IOERR && sqlite3_system_errno(db) == ENOSPC);
}

static int s_fail(store_t *self, const char *what)
{
    int code = s_disk_full(self->db) ? FAILURE_DISK_FULL : FAILURE_STORE;
    int rc = failure_set(code, "%s: %s", what, sqlite3_errmsg(self->db));
    if (!self->failed) {
        snprintf(self->failure, sizeof self->failure, "%s", failure_message());
        self->failed_code = code;
    }
    self->failed = true;
    return rc;
}

static int s_exec(store_t *self, const char *sql)
{
    char *message = NULL;
    if (sqlite3_exec(self->db, sql, NULL, NULL, &message) != SQLITE_OK) {
        int rc = failure_set(FAILURE_STORE, "%s", message ? message : "sqlite error");
        sqlite3_free(message);
        return rc;
    }
    return 0;
}

static int s_migrate(store_t *self)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(self->db, "PRAGMA user_version", -1, &stmt, NULL) != SQLITE_OK)
        return s_fail(self, "reading the schema version");
    int version = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : 0;
    sqlite3_finalize(stmt);
    int latest = (int)(sizeof s_migrations / sizeof s_migrations[0]);
    if (version > latest)
        return failure_set(FAILURE_STORE,
                           "the database has schema version %d, newer than this broker (%d)",
                           version, latest);
    for (; version < latest; version++) {
        char bump[64];
        snprintf(bump, sizeof bump, "PRAGMA user_version=%d", version + 1);
        int rc = s_exec(self, "BEGIN");
        if (rc == 0)
            rc = s_exec(self, s_migrations[version]);
        if (rc == 0)
            rc = s_exec(self, bump);
        if (rc == 0)
            rc = s_exec(self, "COMMIT");
        if (rc != 0) {
            sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
        log_info("store: migrated schema to version %d", version + 1);
    }
    return 0;
}

/* The schema objects of `db` (not SQLite's own sqlite_*), one "type name sql" line each in
 * name order, into a new string (caller frees); NULL on failure. */
static char *s_schema_text(sqlite3 *db)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(db,
                           "SELECT type, name, coalesce(sql, '') FROM sqlite_master "
                           "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name",
                           -1, &stmt, NULL) != SQLITE_OK)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = SQLITE_ROW;
    while (f != NULL && (rc = sqlite3_step(stmt)) == SQLITE_ROW)
        fprintf(f, "%s %s %s\n", (const char *)sqlite3_column_text(stmt, 0),
                (const char *)sqlite3_column_text(stmt, 1),
                (const char *)sqlite3_column_text(stmt, 2));
    sqlite3_finalize(stmt);
    if (f == NULL || fclose(f) != 0 || rc != SQLITE_DONE) {
        free(text);
        return NULL;
    }
    return text;
}

/* The first object line of `have` that `want` lacks, as "a <type> '<name>'" in buf;
 * false when every line is there. */
static bool s_first_extra(const char *have, const char *want, char *buf, size_t size)
{
    for (const char *line = have; *line != '\0';) {
        size_t n = strcspn(line, "\n");
        bool found = false;
        for (const char *other = want; *other != '\0' && !found;) {
            size_t m = strcspn(other, "\n");
            found = m == n && memcmp(line, other, n) == 0;
            other += m + (other[m] == '\n');
        }
        if (!found) {
            size_t type_len = strcspn(line, " ");
            const char *name = line + type_len + (line[type_len] == ' ');
            snprintf(buf, size, "a%s %.*s '%.*s'", line[0] == 'i' ? "n" : "", (int)type_len,
                     line, (int)strcspn(name, " \n"), name);
            return true;
        }
        line += n + (line[n] == '\n');
    }
    return false;
}

int store_check_file(const char *path)
{
    sqlite3 *db = NULL, *ref = NULL;
    char *have = NULL, *want = NULL;
    int rc = 0;
    int latest = (int)(sizeof s_migrations / sizeof s_migrations[0]);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        rc = failure_set(FAILURE_STORE, "cannot open %s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    /* Its schema is a stranger's: nothing in it is trusted to run while we look. */
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    sqlite3_stmt *stmt = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        version = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    if (version < 0 || (have = s_schema_text(db)) == NULL) {
        rc = failure_set(FAILURE_STORE, "cannot read %s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    if (version < 1 || version > latest) {
        rc = failure_set(FAILURE_INVALID,
                         "%s has schema version %d: a broker's store of this version has %d "
                         "(or an older one, 1 to %d, which it migrates)",
                         path, version, latest, latest - 1);
        goto out;
    }
    /* The same version made here, by the same migrations. */
    if (sqlite3_open(":memory:", &ref) != SQLITE_OK) {
        rc = failure_set(FAILURE_STORE, "cannot open a database in memory");
        goto out;
    }
    for (int i = 0; i < version && rc == 0; i++)
        if (sqlite3_exec(ref, s_migrations[i], NULL, NULL, NULL) != SQLITE_OK)
            rc = failure_set(FAILURE_STORE, "schema step %d: %s", i + 1, sqlite3_errmsg(ref));
    if (rc == 0 && (want = s_schema_text(ref)) == NULL)
        rc = failure_set(FAILURE_STORE, "cannot read the schema made in memory");
    char what[300];
    if (rc == 0 && s_first_extra(have, want, what, sizeof what))
        rc = failure_set(FAILURE_INVALID,
                         "%s holds %s that a broker's store (schema version %d) does not have, "
                         "or not so defined",
                         path, what, version);
    else if (rc == 0 && s_first_extra(want, have, what, sizeof what))
        rc = failure_set(FAILURE_INVALID,
                         "%s lacks %s that a broker's store (schema version %d) has", path, what,
                         version);
out:
    free(have);
    free(want);
    sqlite3_close(ref);
    sqlite3_close(db);
    return rc;
}

/* One PASSIVE checkpoint. */
static void s_checkpoint(checkpointer_t *cp)
{
    int log_frames = 0, copied = 0;
    int rc = sqlite3_wal_checkpoint_v2(cp->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
                                       &copied);
    /* BUSY: the loop's commit was resetting the WAL; the next request copies. */
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
        log_warn_limited(&cp->thread_warnings, "store: checkpoint: %s", sqlite3_errmsg(cp->db));
    } else if (rc == SQLITE_OK && log_frames < 0 && !cp->warned) {
        /* -1: this connection does not see the database in WAL mode; nothing was copied. */
        log_warn("store: the checkpoint copied nothing (log %d): the WAL will grow", log_frames);
        cp->warned = true;
    }
}

static void *s_checkpointer_main(void *arg)
{
    checkpointer_t *cp = arg;
    pthread_mutex_lock(&cp->lock);
    while (!cp->stop) {
        while (!cp->requested && !cp->stop)
            pthread_cond_wait(&cp->wake, &cp->lock);
        if (cp->stop)
            break;
        cp->requested = false;
        pthread_mutex_unlock(&cp->lock);
        pthread_mutex_lock(&cp->busy);
        s_checkpoint(cp);
        pthread_mutex_unlock(&cp->busy);
        pthread_mutex_lock(&cp->lock);
    }
    pthread_mutex_unlock(&cp->lock);
    return NULL;
}

static void s_request_checkpoint(checkpointer_t *cp)
{
    pthread_mutex_lock(&cp->lock);
    cp->requested = true;
    pthread_cond_signal(&cp->wake);
    pthread_mutex_unlock(&cp->lock);
}

/* The outcome of the loop's TRUNCATE of a WAL of `frames` frames: said once per episode of
 * a reader holding the WAL, and once when it lets go. */
static void s_truncated(checkpointer_t *cp, sqlite3 *db, int rc, int frames)
{
    int64_t mb = (int64_t)frames * STORE_FRAME_BYTES >> 20;
    if (rc == SQLITE_OK) {
        if (cp->reader_reported)
            log_info("store: the WAL could be reset again (it had grown to %lld MB while a "
                     "reader held it)",
                     (long long)(cp->largest_frames * STORE_FRAME_BYTES >> 20));
        cp->reader_reported = false;
        cp->largest_frames = 0;
        return;
    }
    if (rc != SQLITE_BUSY) {
        log_warn_limited(&cp->loop_warnings, "store: truncating the WAL (%d frames): %s", frames,
                         sqlite3_errmsg(db));
        return;
    }
    /* Nothing else of ours reads while the loop holds `busy`: another process does. */
    cp->reader_retry_at = clock_now_ms() + STORE_READER_RETRY_MS;
    if (frames > cp->largest_frames)
        cp->largest_frames = frames;
    if (!cp->reader_reported)
        log_warn("store: another connection holds a read transaction on %s (an sqlite3 shell, "
                 "a backup?): the WAL cannot be reset while it lasts, so it grows past its "
                 "limit (%lld MB now) and costs that disk and slower reads until the reader "
                 "ends; the broker does not wait for it",
                 sqlite3_db_filename(db, "main"), (long long)mb);
    cp->reader_reported = true;
}

/* Called by SQLite after each commit with the WAL's size in frames. Past the limit, a
 * TRUNCATE that never waits (no busy handler while it runs). */
static int s_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
    (void)name;
    checkpointer_t *cp = arg;
    if (frames > cp->limit_frames && clock_now_ms() >= cp->reader_retry_at) {
        int log_frames = 0, copied = 0;
        pthread_mutex_lock(&cp->busy);
        sqlite3_busy_timeout(db, 0);
        int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log_frames,
                                           &copied);
        sqlite3_busy_timeout(db, STORE_BUSY_TIMEOUT_MS);
        pthread_mutex_unlock(&cp->busy);
        s_truncated(cp, db, rc, frames);
        return SQLITE_OK;
    }
    if (frames >= cp->trigger_frames)
        s_request_checkpoint(cp);
    return SQLITE_OK;
}

/* Frames after which to checkpoint: CHECKPOINT_FRAMES, or fewer so that a checkpoint comes
 * at half the WAL limit. */
static int s_trigger_frames(int64_t wal_limit)
{
    int64_t frames = wal_limit / 2 / STORE_FRAME_BYTES;
    if (frames < 16)
        frames = 16;
    return frames < CHECKPOINT_FRAMES ? (int)frames : CHECKPOINT_FRAMES;
}

static int s_checkpointer_start(store_t *self, const char *path)
{
    checkpointer_t *cp = &self->checkpointer;
    if (sqlite3_open_v2(path, &cp->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK)
        return failure_set(FAILURE_STORE, "cannot open %s for checkpoints", path);
    sqlite3_busy_timeout(cp->db, STORE_BUSY_TIMEOUT_MS);
    /* A connection learns that the database is in WAL mode when it first reads it; until
     * then a checkpoint through it copies nothing. */
    if (sqlite3_exec(cp->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK)
        return failure_set(FAILURE_STORE, "cannot read %s for checkpoints: %s", path,
                           sqlite3_errmsg(cp->db));
    cp->limit_frames = STORE_DEFAULT_WAL_LIMIT / STORE_FRAME_BYTES;
    cp->trigger_frames = s_trigger_frames(STORE_DEFAULT_WAL_LIMIT);
    cp->thread_warnings.every_ms = 10000;
    cp->loop_warnings.every_ms = 10000;
    pthread_mutex_init(&cp->lock, NULL);
    pthread_mutex_init(&cp->busy, NULL);
    pthread_cond_init(&cp->wake, NULL);
    if (pthread_create(&cp->thread, NULL, s_checkpointer_main, cp) != 0)
        return failure_set(FAILURE_STORE, "cannot start the checkpoint thread");
    cp->running = true;
    sqlite3_wal_hook(self->db, s_wal_hook, cp);
    return 0;
}

static void s_checkpointer_stop(store_t *self)
{
    checkpointer_t *cp = &self->checkpointer;
    if (cp->running) {
        sqlite3_wal_hook(self->db, NULL, NULL);
        pthread_mutex_lock(&cp->lock);
        cp->stop = true;
        pthread_cond_signal(&cp->wake);
        pthread_mutex_unlock(&cp->lock);
        pthread_join(cp->thread, NULL);
        pthread_mutex_destroy(&cp->lock);
        pthread_mutex_destroy(&cp->busy);
        pthread_cond_destroy(&cp->wake);
        cp->running = false;
    }
    sqlite3_close(cp->db);
    cp->db = NULL;
}

int store_set_wal_limit(store_t *self, int64_t bytes)
{
    if (bytes < 64 * 1024)
        return failure_set(FAILURE_INVALID, "a WAL limit of %lld bytes is too small (64 KiB at least)",
                           (long long)bytes);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA journal_size_limit=%lld", (long long)bytes);
    int rc = s_exec(self, pragma);
    if (rc != 0)
        return rc;
    /* Both are read by the WAL hook, which runs on this (the loop's) thread. */
    self->checkpointer.limit_frames = bytes / STORE_FRAME_BYTES;
    self->checkpointer.trigger_frames = s_trigger_frames(bytes);
    return 0;
}

int store_sync_parse(const char *text)
{
    if (strcmp(text, "full") == 0)
        return STORE_SYNC_FULL;
    if (strcmp(text, "normal") == 0)
        return STORE_SYNC_NORMAL;
    if (strcmp(text, "off") == 0)
        return STORE_SYNC_OFF;
    return -1;
}

/* The integer a one-row PRAGMA answers, or -1. */
static int64_t s_pragma_int(store_t *self, const char *sql)
{
    sqlite3_stmt *stmt = NULL;
    int64_t value = -1;
    if (sqlite3_prepare_v2(self->db, sql, -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return value;
}

/* Deleted rows free pages that a plain SQLite file keeps for ever: with auto_vacuum =
 * INCREMENTAL, store_reclaim() can give them back. A new file takes the setting before its
 * first table; an older one needs a VACUUM, once. */
static int s_incremental_vacuum(store_t *self, const char *path)
{
    if (s_pragma_int(self, "PRAGMA auto_vacuum") == 2)
        return 0;
    bool fresh = s_pragma_int(self, "PRAGMA page_count") == 0;
    int rc = s_exec(self, "PRAGMA auto_vacuum=INCREMENTAL");
    if (rc == 0 && !fresh) {
        log_info("store: converting %s to incremental vacuum (once)", path);
        rc = s_exec(self, "VACUUM");
    }
    return rc;
}

int store_open(const char *path, store_sync_t sync, store_t **out)
{
    *out = NULL;
    store_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    msgpack_sbuffer_init(&self->events);
    msgpack_packer_init(&self->events_packer, &self->events, msgpack_sbuffer_write);
    msgpack_sbuffer_init(&self->redo);
    /* One broker per store: a second one appending events with the same sequence numbers
     * would stop the first ("UNIQUE constraint failed: events.first_seq"). */
    self->lock_fd = dblock_acquire(path);
    if (self->lock_fd < 0) {
        int rc = self->lock_fd;
        store_close(&self);
        return rc;
    }
    /* No global memory statistics (they take a mutex on every allocation); refused, and
     * harmless, once SQLite is initialised. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    int rc = 0;
    /* NOMUTEX: each connection is only ever used by one thread at a time (this one by the
     * broker's loop, the checkpointer's by its thread). */
    if (sqlite3_open_v2(path, &self->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        rc = failure_set(FAILURE_STORE, "cannot open %s: %s", path,
                         self->db ? sqlite3_errmsg(self->db) : "out of memory");
        goto out;
    }
    const char *sync_pragma = sync == STORE_SYNC_FULL     ? "PRAGMA synchronous=FULL"
                              : sync == STORE_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                          : "PRAGMA synchronous=OFF";
    sqlite3_busy_timeout(self->db, STORE_BUSY_TIMEOUT_MS);
    rc = s_incremental_vacuum(self, path);
    if (rc == 0)
        rc = s_exec(self, "PRAGMA journal_mode=WAL");
    if (rc == 0)
        rc = s_exec(self, sync_pragma);
    /* 8 MiB of page cache, not more. Every commit that follows a b-tree rebalance walks the
     * whole cache: balance_nonroot swaps two pages' numbers through a scratch number past
     * the lock page (262145), which leaves SQLite's record of the highest cached page there,
     * so the commit's "drop the pages past the end of the file" visits every hash bucket of
     * the cache. With 64 MiB (16,384 buckets, each a cache miss) that walk was about a fifth
     * of the broker's loop under load (perf, docs/performance.md); the pages the hot path touches (the
     * tails of the tables and indexes) fit in far less. */
    if (rc == 0)
        rc = s_exec(self, "PRAGMA cache_size=-8192; PRAGMA temp_store=MEMORY;"
                          " PRAGMA wal_autocheckpoint=0");
    if (rc == 0)
        rc = s_migrate(self);
    if (rc == 0)
        rc = s_checkpointer_start(self, path);
    if (rc == 0)
        rc = store_set_wal_limit(self, STORE_DEFAULT_WAL_LIMIT);
    for (int i = 0; rc == 0 && i < STMT_COUNT; i++) {
        if (sqlite3_prepare_v3(self->db, s_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &self->stmt[i],
                               NULL) != SQLITE_OK)
            rc = s_fail(self, s_sql[i]);
    }
out:
    if (rc != 0) {
        store_close(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void store_close(store_t **self_p)
{
    store_t *self = *self_p;
    if (self == NULL)
        return;
    s_checkpointer_stop(self);
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(self->stmt[i]);
    sqlite3_close(self->db);
    msgpack_sbuffer_destroy(&self->events);
    msgpack_sbuffer_destroy(&self->redo);
    dblock_release(self->lock_fd);
    free(self);
    *self_p = NULL;
}

/* Runs a statement that returns no rows, then resets it. */
static int s_run(store_t *self, sqlite3_stmt *stmt, const char *what)
{
    int step = sqlite3_step(stmt);
    int rc = step == SQLITE_DONE ? 0 : s_fail(self, what);
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rc;
}

void store_set_room_maker(store_t *self, bool (*make_room)(void *arg), void *arg)
{
    self->make_room = make_room;
    self->room_arg = arg;
}

int store_begin(store_t *self)
{
    if (self->in_transaction)
        return 0;
    self->failed = false;
    int rc = s_run(self, self->stmt[STMT_BEGIN], "begin");
    if (rc == 0)
        self->in_transaction = true;
    return rc;
}

/* ---- the writes of a transaction, kept for a redo ---- */

/* One entry of the redo log: bind a value (then `len` bytes of text or blob follow the
 * record), or run the statement. */
typedef enum { REDO_INT, REDO_TEXT, REDO_BLOB, REDO_NULL, REDO_RUN } redo_kind_t;

typedef struct {
    uint8_t kind;  /* redo_kind_t */
    uint8_t stmt;
    uint8_t index; /* the parameter */
    uint32_t len;  /* TEXT, BLOB: the bytes that follow */
    int64_t value; /* INT */
} redo_entry_t;

static void s_redo(store_t *self, redo_kind_t kind, int stmt, int index, int64_t value,
                   const void *bytes, size_t len)
{
    if (self->replaying)
        return;
    redo_entry_t entry = {(uint8_t)kind, (uint8_t)stmt, (uint8_t)index, (uint32_t)len, value};
    msgpack_sbuffer_write(&self->redo, (const char *)&entry, sizeof entry);
    if (len > 0)
        msgpack_sbuffer_write(&self->redo, bytes, len);
}

/* Binds parameter `index` of write statement `stmt`, and remembers it for a redo. */
static void s_put_int(store_t *self, int stmt, int index, int64_t value)
{
    sqlite3_bind_int64(self->stmt[stmt], index, value);
    s_redo(self, REDO_INT, stmt, index, value, NULL, 0);
}

static void s_put_text(store_t *self, int stmt, int index, const char *text)
{
    if (text == NULL) {
        sqlite3_bind_null(self->stmt[stmt], index);
        s_redo(self, REDO_NULL, stmt, index, 0, NULL, 0);
        return;
    }
    size_t len = strlen(text);
    sqlite3_bind_text(self->stmt[stmt], index, text, (int)len, SQLITE_STATIC);
    s_redo(self, REDO_TEXT, stmt, index, 0, text, len);
}

static void s_put_blob(store_t *self, int stmt, int index, const void *blob, size_t len)
{
    if (blob == NULL || len == 0) {
        sqlite3_bind_null(self->stmt[stmt], index);
        s_redo(self, REDO_NULL, stmt, index, 0, NULL, 0);
        return;
    }
    sqlite3_bind_blob(self->stmt[stmt], index, blob, (int)len, SQLITE_STATIC);
    s_redo(self, REDO_BLOB, stmt, index, 0, blob, len);
}

/* Runs write statement `stmt` of the open transaction, and remembers that it ran. After a
 * failed write nothing more is written: the transaction is rolled back at the commit. */
static int s_write(store_t *self, int stmt, const char *what)
{
    s_redo(self, REDO_RUN, stmt, 0, 0, NULL, 0);
    if (self->failed) {
        sqlite3_clear_bindings(self->stmt[stmt]);
        return failure_set(self->failed_code, "%s: not written after an earlier failure: %s",
                           what, self->failure);
    }
    return s_run(self, self->stmt[stmt], what);
}

/* Writes the remembered statements again, in the transaction just begun. */
static int s_replay(store_t *self)
{
    size_t offset = 0;
    int rc = 0;
    self->replaying = true;
    while (rc == 0 && offset + sizeof(redo_entry_t) <= self->redo.size) {
        redo_entry_t entry;
        memcpy(&entry, self->redo.data + offset, sizeof entry);
        const char *bytes = self->redo.data + offset + sizeof entry;
        offset += sizeof entry + entry.len;
        sqlite3_stmt *stmt = self->stmt[entry.stmt];
        if (entry.kind == REDO_RUN)
            rc = s_write(self, entry.stmt, "redoing a write");
        else if (entry.kind == REDO_INT)
            sqlite3_bind_int64(stmt, entry.index, entry.value);
        else if (entry.kind == REDO_TEXT)
            sqlite3_bind_text(stmt, entry.index, bytes, (int)entry.len, SQLITE_STATIC);
        else if (entry.kind == REDO_BLOB)
            sqlite3_bind_blob(stmt, entry.index, bytes, (int)entry.len, SQLITE_STATIC);
        else
            sqlite3_bind_null(stmt, entry.index);
    }
    self->replaying = false;
    return rc;
}

static int s_flush_events(store_t *self)
{
    if (self->events.size == 0)
        return 0;
    sqlite3_stmt *stmt = self->stmt[STMT_EVENT_INSERT];
    sqlite3_bind_int64(stmt, 1, self->events_first);
    sqlite3_bind_int64(stmt, 2, self->events_last);
    sqlite3_bind_blob(stmt, 3, self->events.data, (int)self->events.size, SQLITE_STATIC);
    return s_run(self, stmt, "recording events");
}

/* Writes the transaction's events and commits; on failure, nothing of it stays. */
static int s_finish(store_t *self)
{
    int rc = self->failed ? failure_set(self->failed_code, "not committing: %s", self->failure)
                          : s_flush_events(self);
    if (rc == 0)
        rc = s_run(self, self->stmt[STMT_COMMIT], "commit");
    if (rc != 0 && !sqlite3_get_autocommit(self->db))
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* The transaction again, from its remembered writes, after room was made for it. */
static int s_write_again(store_t *self)
{
    int rc = s_run(self, self->stmt[STMT_BEGIN], "begin");
    if (rc == 0)
        rc = s_replay(self);
    if (rc == 0)
        rc = s_finish(self);
    else if (!sqlite3_get_autocommit(self->db))
        sqlite3_exec(self->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

int store_commit(store_t *self)
{
    if (!self->in_transaction)
        return 0;
    bool wrote_all = !self->failed;
    int rc = s_finish(self);
    /* Only a transaction whose every write went through may be written again: after a
     * failed one, the broker already acted on that failure. */
    if (rc == FAILURE_DISK_FULL && wrote_all && self->make_room != NULL &&
        self->make_room(self->room_arg)) {
        self->failed = false;
        rc = s_write_again(self);
    }
    msgpack_sbuffer_clear(&self->events);
    msgpack_sbuffer_clear(&self->redo);
    self->in_transaction = false;
    self->failed = false;
    return rc;
}

bool store_in_transaction(const store_t *self)
{
    return self->in_transaction;
}

static void s_bind_text(sqlite3_stmt *stmt, int index, const char *text)
{
    if (text)
        sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(stmt, index);
}

int store_task_insert(store_t *self, task_t *task, bool *inserted)
{
    *inserted = false;
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = STMT_TASK_INSERT;
    s_put_text(self, stmt, 1, task->id);
    s_put_text(self, stmt, 2, task->queue ? task->queue->name : task->specialist);
    s_put_int(self, stmt, 3, task->priority);
    s_put_text(self, stmt, 4, task_state_name(task->state));
    s_put_int(self, stmt, 5, task->order);
    s_put_int(self, stmt, 6, task->attempt);
    s_put_int(self, stmt, 7, task->failures);
    s_put_int(self, stmt, 8, task->max_attempts);
    s_put_int(self, stmt, 9, task->timeout_s);
    s_put_text(self, stmt, 10, task->group);
    s_put_int(self, stmt, 11, task->not_before);
    s_put_text(self, stmt, 12, task->title);
    s_put_text(self, stmt, 13, task->issue);
    s_put_text(self, stmt, 14, task->source);
    s_put_text(self, stmt, 15, task->parent);
    s_put_text(self, stmt, 16, task->worker_id);
    s_put_text(self, stmt, 17, task->error);
    s_put_blob(self, stmt, 18, task->payload, task->payload_len);
    s_put_blob(self, stmt, 19, NULL, 0);
    s_put_int(self, stmt, 20, task->created);
    s_put_int(self, stmt, 21, task->updated);
    s_put_text(self, stmt, 22, task->submitter_key);
    rc = s_write(self, stmt, "inserting a task");
    *inserted = rc == 0 && sqlite3_changes(self->db) == 1;
    if (*inserted)
        task->rowid = sqlite3_last_insert_rowid(self->db);
    return rc;
}

int store_task_update(store_t *self, const task_t *task, const void *result, size_t result_len)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = result ? STMT_TASK_UPDATE_RESULT : STMT_TASK_UPDATE;
    s_put_int(self, stmt, 1, task->rowid);
    s_put_text(self, stmt, 2, task_state_name(task->state));
    s_put_int(self, stmt, 3, task->attempt);
    s_put_int(self, stmt, 4, task->failures);
    s_put_text(self, stmt, 5, task->worker_id);
    s_put_text(self, stmt, 6, task->error);
    s_put_int(self, stmt, 7, task->not_before);
    s_put_int(self, stmt, 8, task->updated);
    s_put_int(self, stmt, 9, task->max_attempts);
    if (result)
        s_put_blob(self, stmt, 10, result, result_len);
    return s_write(self, stmt, "updating a task");
}

int store_task_dispatched(store_t *self, const task_t *task)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = STMT_TASK_DISPATCHED;
    s_put_int(self, stmt, 1, task->rowid);
    s_put_text(self, stmt, 2, task_state_name(task->state));
    s_put_int(self, stmt, 3, task->attempt);
    s_put_text(self, stmt, 4, task->worker_id);
    s_put_int(self, stmt, 5, task->updated);
    s_put_text(self, stmt, 6, task->worker_key);
    return s_write(self, stmt, "updating a dispatched task");
}

int store_task_priority(store_t *self, const task_t *task)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = STMT_TASK_PRIORITY;
    s_put_int(self, stmt, 1, task->rowid);
    s_put_int(self, stmt, 2, task->priority);
    s_put_int(self, stmt, 3, task->updated);
    return s_write(self, stmt, "changing a task's priority");
}

static char *s_column_text(sqlite3_stmt *stmt, int column)
{
    const unsigned char *text = sqlite3_column_text(stmt, column);
    return text ? strdup((const char *)text) : NULL;
}

static void *s_column_blob(sqlite3_stmt *stmt, int column, size_t *len)
{
    const void *blob = sqlite3_column_blob(stmt, column);
    int size = sqlite3_column_bytes(stmt, column);
    *len = 0;
    if (blob == NULL || size <= 0)
        return NULL;
    void *copy = malloc((size_t)size);
    if (copy != NULL) {
        memcpy(copy, blob, (size_t)size);
        *len = (size_t)size;
    }
    return copy;
}

/* Builds a task from a row of TASK_COLUMNS. */
static task_t *s_task_from_row(sqlite3_stmt *stmt)
{
    task_t *task = task_new((const char *)sqlite3_column_text(stmt, 0));
    if (task == NULL)
        return NULL;
    task->specialist = s_column_text(stmt, 1);
    int priority = sqlite3_column_int(stmt, 2);
    task->priority = priority >= 0 && priority < PRIORITY_COUNT ? priority : PRIORITY_NORMAL;
    int state = task_state_parse((const char *)sqlite3_column_text(stmt, 3));
    task->state = state >= 0 ? state : TASK_QUEUED;
    task->order = sqlite3_column_int64(stmt, 4);
    task->attempt = sqlite3_column_int(stmt, 5);
    task->failures = sqlite3_column_int(stmt, 6);
    task->max_attempts = sqlite3_column_int(stmt, 7);
    task->timeout_s = sqlite3_column_int(stmt, 8);
    task->group = s_column_text(stmt, 9);
    task->not_before = sqlite3_column_int64(stmt, 10);
    task->title = s_column_text(stmt, 11);
    task->issue = s_column_text(stmt, 12);
    task->source = s_column_text(stmt, 13);
    task->parent = s_column_text(stmt, 14);
    task->worker_id = s_column_text(stmt, 15);
    task->error = s_column_text(stmt, 16);
    task->payload = s_column_blob(stmt, 17, &task->payload_len);
    task->result = s_column_blob(stmt, 18, &task->result_len);
    task->created = sqlite3_column_int64(stmt, 19);
    task->updated = sqlite3_column_int64(stmt, 20);
    task->rowid = sqlite3_column_int64(stmt, 21);
    task->worker_key = s_column_text(stmt, 22);
    task->submitter_key = s_column_text(stmt, 23);
    return task;
}

int store_task_load(store_t *self, const char *id, task_t **out)
{
    *out = NULL;
    sqlite3_stmt *stmt = self->stmt[STMT_TASK_LOAD];
    s_bind_text(stmt, 1, id);
    int step = sqlite3_step(stmt);
    int rc = 0;
    if (step == SQLITE_ROW)
        *out = s_task_from_row(stmt);
    else if (step == SQLITE_DONE)
        rc = failure_set(FAILURE_NOT_FOUND, "no task '%s'", id);
    else
        rc = s_fail(self, "loading a task");
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rc;
}

/* The SQL of a listing with the filters `filter` sets (the WHERE clause names only those,
 * so SQLite can walk the one index that matches instead of testing every row). */
static void s_list_sql(const store_task_filter_t *filter, char *sql, size_t size)
{
    snprintf(sql, size,
             "SELECT " TASK_COLUMNS " FROM tasks WHERE 1%s%s%s%s%s"
             " ORDER BY created DESC, rid DESC LIMIT ?6",
             filter->state ? " AND state=?1 AND " ENDED_STATES : "",
             filter->specialist ? " AND specialist=?2" : "",
             filter->issue ? " AND issue=?3" : "", filter->created_after > 0 ? " AND created>=?4" : "",
             filter->before_id ? " AND (created, rid) < (SELECT created, rid FROM tasks WHERE id=?5)"
                               : "");
}

int store_task_list(store_t *self, const store_task_filter_t *filter,
                    int (*fn)(task_t *task, void *arg), void *arg)
{
    if (filter->before_id != NULL) {
        task_t *cursor = NULL;
        int rc = store_task_load(self, filter->before_id, &cursor);
        task_destroy(&cursor);
        if (rc != 0)
            return rc == FAILURE_NOT_FOUND
                       ? failure_set(FAILURE_NOT_FOUND, "before: no task '%s'", filter->before_id)
                       : rc;
    }
    char sql[768];
    s_list_sql(filter, sql, sizeof sql);
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(self->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return s_fail(self, "listing tasks");
    s_bind_text(stmt, 1, filter->state);
    s_bind_text(stmt, 2, filter->specialist);
    s_bind_text(stmt, 3, filter->issue);
    sqlite3_bind_int64(stmt, 4, filter->created_after);
    s_bind_text(stmt, 5, filter->before_id);
    sqlite3_bind_int(stmt, 6, filter->limit);
    int step, stopped = 0;
    while (stopped == 0 && (step = sqlite3_step(stmt)) == SQLITE_ROW) {
        task_t *task = s_task_from_row(stmt);
        if (task == NULL) {
            sqlite3_finalize(stmt);
            return failure_set(FAILURE_MEMORY, "listing tasks: out of memory");
        }
        stopped = fn(task, arg);
        task_destroy(&task);
    }
    sqlite3_finalize(stmt);
    return stopped || step == SQLITE_DONE ? 0 : s_fail(self, "listing tasks");
}

int store_task_load_active(store_t *self, void (*fn)(task_t *task, void *arg), void *arg)
{
    sqlite3_stmt *stmt = NULL;
    /* In rowid order, which is submit order (a task's row is inserted when its `ord` is
     * given): the table's own order, so no sort of a million rows before the first one. */
    if (sqlite3_prepare_v2(self->db,
                           "SELECT " TASK_COLUMNS
                           " FROM tasks WHERE state IN ('queued','running') ORDER BY rowid",
                           -1, &stmt, NULL) != SQLITE_OK)
        return s_fail(self, "loading active tasks");
    int step;
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
        task_t *task = s_task_from_row(stmt);
        if (task != NULL)
            fn(task, arg);
    }
    sqlite3_finalize(stmt);
    return step == SQLITE_DONE ? 0 : s_fail(self, "loading active tasks");
}

int store_attempt_insert(store_t *self, const task_t *task, const char *specialist,
                         const char *outcome, const char *error, int64_t finished)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = STMT_ATTEMPT_INSERT;
    s_put_text(self, stmt, 1, task->id);
    s_put_int(self, stmt, 2, task->attempt);
    s_put_text(self, stmt, 3, specialist);
    s_put_text(self, stmt, 4, task->issue);
    s_put_text(self, stmt, 5, task->worker_id);
    s_put_text(self, stmt, 6, outcome);
    s_put_text(self, stmt, 7, error);
    s_put_int(self, stmt, 8, finished);
    return s_write(self, stmt, "recording an attempt");
}

int store_attempts_for_issue(store_t *self, const char *issue, const char *specialist, int limit,
                             void (*fn)(int attempt, const char *task, const char *outcome,
                                        const char *error, int64_t finished, void *arg),
                             void *arg)
{
    sqlite3_stmt *stmt = self->stmt[STMT_ATTEMPTS_FOR_ISSUE];
    s_bind_text(stmt, 1, issue);
    s_bind_text(stmt, 2, specialist);
    sqlite3_bind_int(stmt, 3, limit);
    int step;
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW)
        fn(sqlite3_column_int(stmt, 0), (const char *)sqlite3_column_text(stmt, 1),
           (const char *)sqlite3_column_text(stmt, 2), (const char *)sqlite3_column_text(stmt, 3),
           sqlite3_column_int64(stmt, 4), arg);
    int rc = step == SQLITE_DONE ? 0 : s_fail(self, "reading prior attempts");
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rc;
}

int store_event_insert(store_t *self, int64_t seq, const char *topic, size_t topic_len,
                       const void *body, size_t len)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    if (self->events.size == 0)
        self->events_first = seq;
    self->events_last = seq;
    msgpack_pack_int64(&self->events_packer, seq);
    msgpack_pack_str(&self->events_packer, topic_len);
    msgpack_pack_str_body(&self->events_packer, topic, topic_len);
    msgpack_pack_bin(&self->events_packer, len);
    msgpack_pack_bin_body(&self->events_packer, body, len);
    return 0;
}

int store_prune_finished(store_t *self, int64_t before, int limit)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    int removed = 0;
    const int stmts[] = {STMT_TASKS_PRUNE, STMT_ATTEMPTS_PRUNE};
    for (size_t i = 0; i < 2; i++) {
        s_put_int(self, stmts[i], 1, before);
        s_put_int(self, stmts[i], 2, limit);
        rc = s_write(self, stmts[i], "pruning finished tasks");
        if (rc != 0)
            return rc;
        removed += sqlite3_changes(self->db);
    }
    return removed;
}

int64_t store_reclaim(store_t *self, int max_pages)
{
    int64_t free_pages = s_pragma_int(self, "PRAGMA freelist_count");
    if (free_pages <= 0)
        return free_pages < 0 ? failure_set(FAILURE_STORE, "cannot read the free page count") : 0;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA incremental_vacuum(%d)", max_pages);
    int rc = s_exec(self, sql);
    if (rc != 0)
        return rc;
    return s_pragma_int(self, "PRAGMA freelist_count");
}

int store_events_trim(store_t *self, int64_t upto)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    s_put_int(self, STMT_EVENTS_TRIM, 1, upto);
    return s_write(self, STMT_EVENTS_TRIM, "trimming events");
}

/* Walks one stored batch; returns how many events it delivered. */
static int s_replay_batch(const char *data, size_t size, int64_t since, const char *prefix,
                          int budget, int (*fn)(int64_t, const void *, size_t, void *), void *arg,
                          bool *stopped)
{
    size_t prefix_len = prefix ? strlen(prefix) : 0;
    size_t offset = 0;
    int delivered = 0;
    msgpack_unpacked seq, topic, body;
    msgpack_unpacked_init(&seq);
    msgpack_unpacked_init(&topic);
    msgpack_unpacked_init(&body);
    while (delivered < budget &&
           msgpack_unpack_next(&seq, data, size, &offset) == MSGPACK_UNPACK_SUCCESS &&
           msgpack_unpack_next(&topic, data, size, &offset) == MSGPACK_UNPACK_SUCCESS &&
           msgpack_unpack_next(&body, data, size, &offset) == MSGPACK_UNPACK_SUCCESS) {
        if (seq.data.type != MSGPACK_OBJECT_POSITIVE_INTEGER || topic.data.type != MSGPACK_OBJECT_STR ||
            body.data.type != MSGPACK_OBJECT_BIN)
            break; /* not written by us: stop reading this batch */
        if ((int64_t)seq.data.via.u64 <= since)
            continue;
        if (prefix_len > 0 && (topic.data.via.str.size < prefix_len ||
                               memcmp(topic.data.via.str.ptr, prefix, prefix_len) != 0))
            continue;
        if (fn((int64_t)seq.data.via.u64, body.data.via.bin.ptr, body.data.via.bin.size, arg) != 0) {
            *stopped = true;
            break;
        }
        delivered++;
    }
    msgpack_unpacked_destroy(&seq);
    msgpack_unpacked_destroy(&topic);
    msgpack_unpacked_destroy(&body);
    return delivered;
}

int store_events_replay(store_t *self, int64_t since, const char *prefix, int limit,
                        int (*fn)(int64_t seq, const void *body, size_t len, void *arg),
                        void *arg)
{
    sqlite3_stmt *stmt = self->stmt[STMT_EVENTS_REPLAY];
    int delivered = 0;
    int rc = 0;
    int64_t cursor = since;
    bool stopped = false;
    while (rc == 0 && delivered < limit && !stopped) {
        sqlite3_bind_int64(stmt, 1, cursor);
        int rows = 0;
        int step;
        while (delivered < limit && !stopped && (step = sqlite3_step(stmt)) == SQLITE_ROW) {
            rows++;
            delivered += s_replay_batch(sqlite3_column_blob(stmt, 1),
                                        (size_t)sqlite3_column_bytes(stmt, 1), since, prefix,
                                        limit - delivered, fn, arg, &stopped);
            cursor = sqlite3_column_int64(stmt, 0);
        }
        if (delivered < limit && !stopped && step != SQLITE_DONE)
            rc = s_fail(self, "replaying events");
        sqlite3_reset(stmt);
        if (rows == 0)
            break;
    }
    sqlite3_clear_bindings(stmt);
    return rc;
}

int store_specialist_remember(store_t *self, const char *name, int64_t seen)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    s_put_text(self, STMT_SPECIALIST_INSERT, 1, name);
    s_put_int(self, STMT_SPECIALIST_INSERT, 2, seen);
    return s_write(self, STMT_SPECIALIST_INSERT, "remembering a specialist");
}

int store_specialists_forget(store_t *self, int64_t before)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    s_put_int(self, STMT_SPECIALISTS_FORGET, 1, before);
    rc = s_write(self, STMT_SPECIALISTS_FORGET, "forgetting specialists");
    return rc == 0 ? sqlite3_changes(self->db) : rc;
}

int store_specialists_load(store_t *self, void (*fn)(const char *name, void *arg), void *arg)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(self->db, "SELECT name FROM specialists", -1, &stmt, NULL) != SQLITE_OK)
        return s_fail(self, "loading specialists");
    while (sqlite3_step(stmt) == SQLITE_ROW)
        fn((const char *)sqlite3_column_text(stmt, 0), arg);
    sqlite3_finalize(stmt);
    return 0;
}

int store_count_finished(store_t *self, const char *specialist, task_state_t state)
{
    int rc = store_begin(self);
    if (rc != 0)
        return rc;
    const int stmt = STMT_COUNT_FINISHED;
    s_put_text(self, stmt, 1, specialist);
    s_put_int(self, stmt, 2, state == TASK_DONE);
    s_put_int(self, stmt, 3, state == TASK_FAILED);
    s_put_int(self, stmt, 4, state == TASK_DEAD);
    return s_write(self, stmt, "counting a finished task");
}

int store_counters_load(store_t *self, void (*fn)(const char *specialist, const int64_t counts[3],
                                                  void *arg),
                        void *arg)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(self->db, "SELECT specialist, done, failed, dead FROM counters", -1,
                           &stmt, NULL) != SQLITE_OK)
        return s_fail(self, "loading the counters");
    int step;
    while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
        const int64_t counts[3] = {sqlite3_column_int64(stmt, 1), sqlite3_column_int64(stmt, 2),
                                   sqlite3_column_int64(stmt, 3)};
        fn((const char *)sqlite3_column_text(stmt, 0), counts, arg);
    }
    sqlite3_finalize(stmt);
    return step == SQLITE_DONE ? 0 : s_fail(self, "loading the counters");
}

static int64_t s_scalar(store_t *self, const char *sql, const char *param)
{
    sqlite3_stmt *stmt = NULL;
    int64_t value = 0;
    if (sqlite3_prepare_v2(self->db, sql, -1, &stmt, NULL) != SQLITE_OK)
        return 0;
    if (param)
        sqlite3_bind_text(stmt, 1, param, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return value;
}

int64_t store_last_seq(store_t *self)
{
    return s_scalar(self, "SELECT COALESCE(MAX(last_seq), 0) FROM events", NULL);
}

int64_t store_max_order(store_t *self)
{
    return s_scalar(self, "SELECT COALESCE(MAX(ord), 0) FROM tasks", NULL);
}

int64_t store_count_state(store_t *self, const char *state)
{
    return s_scalar(self, "SELECT COUNT(*) FROM tasks WHERE state=?", state);
}
