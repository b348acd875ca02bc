/* bench_task_rows: what SQLite charges for one row shaped like the broker's tasks table
 * (services/broker/store.c: 21 columns, looked up by `id`), by table layout, on this
 * machine. It bounds what any store keeping a queryable row per task can reach (see
 * docs/performance.md).
 *
 * Each layout gets a fresh database (WAL, synchronous=NORMAL, as the broker's sync=normal)
 * and N rows written in transactions of B rows:
 *   - upsert, rowid table + UNIQUE(id)   (INSERT … ON CONFLICT(id) DO UPDATE)
 *   - upsert, WITHOUT ROWID, id primary key
 *   - insert, rowid table + UNIQUE(id)   (what a new task costs the broker today)
 *   - insert, rowid table, no index      (the floor: no way to find a task by id)
 *
 * usage: bench_task_rows [--rows N] [--batch B] */
#include "clock.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The tasks table's columns (as in store.c), with and without the id index. */
#define COLUMNS_AFTER_ID                                                                    \
    "specialist TEXT NOT NULL, priority INTEGER NOT NULL, state TEXT NOT NULL,"             \
    " ord INTEGER NOT NULL, attempt INTEGER NOT NULL, failures INTEGER NOT NULL,"           \
    " max_attempts INTEGER NOT NULL, timeout_s INTEGER NOT NULL, grp TEXT,"                 \
    " not_before INTEGER NOT NULL, title TEXT, issue TEXT, source TEXT, parent TEXT,"       \
    " worker TEXT, error TEXT, payload BLOB, result BLOB, created INTEGER NOT NULL,"        \
    " updated INTEGER NOT NULL"

#define INSERT_COLUMNS                                                                      \
    "INSERT INTO tasks (id, specialist, priority, state, ord, attempt, failures,"           \
    " max_attempts, timeout_s, grp, not_before, title, issue, source, parent, worker,"      \
    " error, payload, result, created, updated) VALUES"                                      \
    " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"

#define UPSERT_TAIL                                                                         \
    " ON CONFLICT(id) DO UPDATE SET state=excluded.state, attempt=excluded.attempt,"        \
    " worker=excluded.worker, updated=excluded.updated, result=excluded.result"

typedef struct {
    const char *name;
    const char *schema;
    const char *write;
} layout_t;

static const layout_t s_layouts[] = {
    {"upsert, rowid + UNIQUE(id)",
     "CREATE TABLE tasks (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, " COLUMNS_AFTER_ID ")",
     INSERT_COLUMNS UPSERT_TAIL},
    {"upsert, WITHOUT ROWID",
     "CREATE TABLE tasks (id TEXT PRIMARY KEY, " COLUMNS_AFTER_ID ") WITHOUT ROWID",
     INSERT_COLUMNS UPSERT_TAIL},
    {"insert, rowid + UNIQUE(id)",
     "CREATE TABLE tasks (rid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, " COLUMNS_AFTER_ID ")",
     INSERT_COLUMNS},
    {"insert, no index",
     "CREATE TABLE tasks (rid INTEGER PRIMARY KEY, id TEXT NOT NULL, " COLUMNS_AFTER_ID ")",
     INSERT_COLUMNS},
};

/* Binds a finished task like bench_broker's (title, worker, a one-byte result). */
static void s_bind_row(sqlite3_stmt *stmt, int i, int64_t now)
{
    char id[32];
    snprintf(id, sizeof id, "b-%d", i);
    sqlite3_bind_text(stmt, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(stmt, 2, "bench-agent", -1, SQLITE_STATIC);
    sqlite3_bind_int(stmt, 3, 2);
    sqlite3_bind_text(stmt, 4, "done", -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 5, i + 1);
    sqlite3_bind_int(stmt, 6, 1);
    sqlite3_bind_int(stmt, 7, 0);
    sqlite3_bind_int(stmt, 8, 3);
    sqlite3_bind_int(stmt, 9, 600);
    sqlite3_bind_int64(stmt, 11, 0);
    sqlite3_bind_text(stmt, 12, "benchmark task", -1, SQLITE_STATIC);
    sqlite3_bind_text(stmt, 16, "bench-w1", -1, SQLITE_STATIC);
    sqlite3_bind_blob(stmt, 19, "\x80", 1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 20, now);
    sqlite3_bind_int64(stmt, 21, now);
}

static int s_exec(sqlite3 *db, const char *sql)
{
    char *message = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &message) == SQLITE_OK)
        return 0;
    fprintf(stderr, "bench_task_rows: %s: %s\n", sql, message ? message : "error");
    sqlite3_free(message);
    return -1;
}

/* Writes `rows` rows in transactions of `batch`; returns µs per row, or -1. */
static double s_write_rows(sqlite3 *db, sqlite3_stmt *stmt, int rows, int batch)
{
    int64_t now = clock_wall_ms();
    int64_t started = clock_now_us();
    for (int i = 0; i < rows; i++) {
        if (i % batch == 0 && s_exec(db, "BEGIN") != 0)
            return -1;
        s_bind_row(stmt, i, now);
        int step = sqlite3_step(stmt);
        sqlite3_reset(stmt);
        sqlite3_clear_bindings(stmt);
        if (step != SQLITE_DONE) {
            fprintf(stderr, "bench_task_rows: %s\n", sqlite3_errmsg(db));
            return -1;
        }
        if ((i % batch == batch - 1 || i == rows - 1) && s_exec(db, "COMMIT") != 0)
            return -1;
    }
    return (double)(clock_now_us() - started) / rows;
}

static double s_run(const layout_t *layout, int rows, int batch)
{
    char dir[] = "/tmp/bench-rows-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "%s/rows.db", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    double us = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK &&
        s_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                   " PRAGMA cache_size=-65536") == 0 &&
        s_exec(db, layout->schema) == 0 &&
        sqlite3_prepare_v2(db, layout->write, -1, &stmt, NULL) == SQLITE_OK)
        us = s_write_rows(db, stmt, rows, batch);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char file[80];
        snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
        unlink(file);
    }
    rmdir(dir);
    return us;
}

int main(int argc, char **argv)
{
    int rows = 200000, batch = 50;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rows") == 0)
            rows = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            batch = atoi(argv[i + 1]);
        else
            break;
    }
    if (rows <= 0 || batch <= 0 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_task_rows [--rows N] [--batch B]\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof s_layouts / sizeof s_layouts[0]; i++) {
        double us = s_run(&s_layouts[i], rows, batch);
        if (us < 0)
            return 1;
        printf("%-28s %d rows, %d per transaction: %.2f us/row\n", s_layouts[i].name, rows, batch,
               us);
        fflush(stdout);
    }
    return 0;
}
