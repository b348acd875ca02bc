/* pan backup / pan restore: a copy of the broker's database taken while it runs, and the
 * way back to one while it is stopped.
 *
 *   pan backup FILE [--db DB]    copies DB (default $PANOPTICON_HOME/broker.db) to FILE
 *   pan restore FILE [--db DB]   replaces DB with FILE; refused while a broker has DB open
 *
 * The backup is taken by this process, not by the broker: pan opens the database file
 * read-only and copies it with SQLite's online backup API, a few hundred pages a step,
 * inside one read transaction of its own, so the copy is one consistent snapshot (every
 * task the broker had acknowledged when the backup began) and the broker is never asked
 * to do anything. The broker's loop does not wait for readers (store.c), so all a backup
 * costs it is a WAL that cannot be reset until the backup ends. The copy is written to
 * FILE.partial, checked (quick_check), made a self-contained file (rollback journal, not
 * WAL) and only then renamed to FILE: a FILE that exists is a complete backup.
 *
 * A restore takes the database's lock exclusively (common/base/dblock.h): a running broker
 * holds it shared, so the restore refuses, and a broker started meanwhile refuses to open
 * the store. The previous database is kept as DB.before-restore (with its WAL).
 *
 * What is restored runs inside the broker: a trigger in it would fire on the next submit,
 * and a newer schema would leave a broker that does not start. So FILE, and then the copy
 * about to replace DB, must be a store the broker next to pan opens: a schema version it
 * knows, exactly its tables and indexes, no trigger or view (`cloister-broker
 * --check-store`, which holds the schema); otherwise nothing is replaced. */
#include "pan.h"

#include "dblock.h"
#include "failure.h"
#include "home.h"
#include "proc.h"
#include "program.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Pages copied per backup step (4 KiB each). */
#define BACKUP_STEP_PAGES 256
#define BACKUP_BUSY_TIMEOUT_MS 5000

static const char *const s_backup_usage = "pan backup FILE [--db DB]";
static const char *const s_restore_usage = "pan restore FILE [--db DB]";

/* Reads `FILE [--db DB]`; fills file and db (DB defaults to $PANOPTICON_HOME/broker.db). */
static int s_arguments(int argc, char **argv, const char *usage, const char **file, char *db,
                       size_t db_size)
{
    const char *db_flag = NULL;
    *file = NULL;
    for (int i = 0; i < argc; i++) {
        int found = pan_option(argc, argv, &i, "--db", &db_flag);
        if (found < 0)
            return pan_usage(usage, "--db needs a value");
        if (found > 0)
            continue;
        if (*file != NULL || argv[i][0] == '-')
            return pan_usage_unknown(usage, argv[i]);
        *file = argv[i];
    }
    if (*file == NULL)
        return pan_usage(usage, "which file?");
    if (db_flag != NULL)
        snprintf(db, db_size, "%s", db_flag);
    else
        home_path(db, db_size, "broker.db");
    return PAN_EXIT_OK;
}

static int s_sqlite_fail(sqlite3 *db, const char *what, const char *path)
{
    return pan_fail(PAN_EXIT_ERROR, "%s %s: %s", what, path,
                    db ? sqlite3_errmsg(db) : "out of memory");
}

/* Runs `sql`, which answers one text row, into `out`; false when it fails. */
static bool s_query_text(sqlite3 *db, const char *sql, char *out, size_t size)
{
    sqlite3_stmt *stmt = NULL;
    bool ok = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
              sqlite3_step(stmt) == SQLITE_ROW;
    if (ok)
        snprintf(out, size, "%s", (const char *)sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return ok;
}

/* Copies the whole of `from` into `to`, BACKUP_STEP_PAGES at a time. Returns SQLITE_OK or
 * the error. */
static int s_copy(sqlite3 *from, sqlite3 *to)
{
    sqlite3_backup *backup = sqlite3_backup_init(to, "main", from, "main");
    if (backup == NULL)
        return sqlite3_errcode(to);
    int rc;
    do
        rc = sqlite3_backup_step(backup, BACKUP_STEP_PAGES);
    while (rc == SQLITE_OK);
    int finished = sqlite3_backup_finish(backup);
    return rc == SQLITE_DONE ? finished : rc;
}

/* Checks a copy and makes it a self-contained file (no WAL beside it). */
static int s_seal(sqlite3 *db, const char *path)
{
    char answer[256] = "";
    if (!s_query_text(db, "PRAGMA quick_check", answer, sizeof answer) ||
        strcmp(answer, "ok") != 0)
        return pan_fail(PAN_EXIT_ERROR, "the copy %s does not check out: %s", path,
                        answer[0] ? answer : sqlite3_errmsg(db));
    if (!s_query_text(db, "PRAGMA journal_mode=DELETE", answer, sizeof answer))
        return s_sqlite_fail(db, "cannot finish", path);
    return PAN_EXIT_OK;
}

/* fsyncs a file (or directory) by path. */
static bool s_sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Copies the database `from_path` (read-only, in one read transaction) into `to_path`
 * (created; sealed). */
static int s_copy_file(const char *from_path, const char *to_path)
{
    sqlite3 *from = NULL, *to = NULL;
    int code = PAN_EXIT_OK;
    unlink(to_path);
    if (sqlite3_open_v2(from_path, &from, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        code = s_sqlite_fail(from, "cannot open", from_path);
        goto out;
    }
    sqlite3_busy_timeout(from, BACKUP_BUSY_TIMEOUT_MS);
    /* One snapshot for every step: the broker's commits meanwhile are not seen. */
    if (sqlite3_exec(from, "BEGIN; SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
        SQLITE_OK) {
        code = s_sqlite_fail(from, "cannot read", from_path);
        goto out;
    }
    if (sqlite3_open_v2(to_path, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        code = s_sqlite_fail(to, "cannot create", to_path);
        goto out;
    }
    if (s_copy(from, to) != SQLITE_OK) {
        code = s_sqlite_fail(to, "cannot copy into", to_path);
        goto out;
    }
    sqlite3_exec(from, "COMMIT", NULL, NULL, NULL);
    code = s_seal(to, to_path);
out:
    sqlite3_close(to);
    sqlite3_close(from);
    if (code == PAN_EXIT_OK && !s_sync_path(to_path))
        code = pan_fail(PAN_EXIT_ERROR, "cannot sync %s: %s", to_path, strerror(errno));
    if (code != PAN_EXIT_OK)
        unlink(to_path);
    return code;
}

/* The tasks a database holds, or -1. */
static int64_t s_count_tasks(const char *path)
{
    sqlite3 *db = NULL;
    int64_t count = -1;
    char answer[64];
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        s_query_text(db, "SELECT count(*) FROM tasks", answer, sizeof answer))
        pan_parse_int(answer, 0, INT64_MAX, &count);
    sqlite3_close(db);
    return count;
}

int cmd_backup(const pan_t *pan, int argc, char **argv)
{
    (void)pan;
    const char *file = NULL;
    char db[4096];
    int code = s_arguments(argc, argv, s_backup_usage, &file, db, sizeof db);
    if (code != PAN_EXIT_OK)
        return code;
    if (access(db, R_OK) != 0)
        return pan_fail(PAN_EXIT_ERROR, "no database at %s: %s", db, strerror(errno));
    char partial[4200];
    snprintf(partial, sizeof partial, "%s.partial", file);
    code = s_copy_file(db, partial);
    if (code != PAN_EXIT_OK)
        return code;
    if (rename(partial, file) != 0) {
        unlink(partial);
        return pan_fail(PAN_EXIT_ERROR, "cannot rename %s to %s: %s", partial, file,
                        strerror(errno));
    }
    printf("Backed up %s to %s (%lld tasks)\n", db, file, (long long)s_count_tasks(file));
    return PAN_EXIT_OK;
}

/* Moves `db` (and its WAL, which belongs with it) aside to `<db>.before-restore`. */
static int s_move_aside(const char *db)
{
    char aside[4200], wal[4200], aside_wal[4300], shm[4200];
    snprintf(aside, sizeof aside, "%s.before-restore", db);
    snprintf(wal, sizeof wal, "%s-wal", db);
    snprintf(aside_wal, sizeof aside_wal, "%s-wal", aside);
    snprintf(shm, sizeof shm, "%s-shm", db);
    unlink(aside_wal);
    if (access(db, F_OK) == 0 && rename(db, aside) != 0)
        return pan_fail(PAN_EXIT_ERROR, "cannot move %s aside: %s", db, strerror(errno));
    if (access(wal, F_OK) == 0 && rename(wal, aside_wal) != 0)
        return pan_fail(PAN_EXIT_ERROR, "cannot move %s aside: %s", wal, strerror(errno));
    unlink(shm);
    return PAN_EXIT_OK;
}

/* proc's line callback: keeps the first line. */
static int s_first_line(void *arg, const char *line, size_t len)
{
    char *first = arg;
    if (first[0] == '\0')
        snprintf(first, 1024, "%.*s", (int)len, line);
    return 0;
}

/* Whether `path` is a store the broker opens (cloister-broker --check-store, beside pan or
 * in PATH). PAN_EXIT_OK, or PAN_EXIT_ERROR saying why not. */
static int s_check_store(const char *path)
{
    char broker[PATH_MAX];
    if (!program_beside(broker, sizeof broker, "cloister-broker") || access(broker, X_OK) != 0)
        snprintf(broker, sizeof broker, "cloister-broker");
    char *argv[] = {broker, "--check-store", (char *)path, NULL};
    char first[1024] = "";
    proc_options_t options = {.argv = argv, .on_line = s_first_line, .on_line_arg = first,
                              .timeout_ms = 60000};
    proc_t *proc = NULL;
    if (proc_run(&proc, &options) != 0)
        return pan_fail(PAN_EXIT_ERROR, "not restoring: cannot check %s with %s: %s", path,
                        broker, failure_message());
    const proc_status_t *status = proc_status(proc);
    bool ok = status->exited && status->exit_code == 0;
    int code = ok ? PAN_EXIT_OK
                  : pan_fail(PAN_EXIT_ERROR, "not restoring: %s", first[0] ? first
                                                                : "the broker's check failed");
    proc_destroy(&proc);
    return code;
}

int cmd_restore(const pan_t *pan, int argc, char **argv)
{
    (void)pan;
    const char *file = NULL;
    char db[4096];
    int code = s_arguments(argc, argv, s_restore_usage, &file, db, sizeof db);
    if (code != PAN_EXIT_OK)
        return code;
    if (access(file, R_OK) != 0)
        return pan_fail(PAN_EXIT_ERROR, "cannot read %s: %s", file, strerror(errno));
    code = s_check_store(file);
    if (code != PAN_EXIT_OK)
        return code;
    int lock = dblock_acquire(db);
    if (lock < 0)
        return pan_fail(PAN_EXIT_ERROR, "not restoring: %s", failure_message());
    char restoring[4200];
    snprintf(restoring, sizeof restoring, "%s.restoring", db);
    code = s_copy_file(file, restoring);
    /* The copy is what replaces DB: checked again, as FILE may have changed meanwhile. */
    if (code == PAN_EXIT_OK)
        code = s_check_store(restoring);
    if (code == PAN_EXIT_OK)
        code = s_move_aside(db);
    if (code == PAN_EXIT_OK && rename(restoring, db) != 0)
        code = pan_fail(PAN_EXIT_ERROR, "cannot rename %s to %s: %s", restoring, db,
                        strerror(errno));
    unlink(restoring);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", db);
    char *slash = strrchr(dir, '/');
    if (code == PAN_EXIT_OK && slash != NULL) {
        *slash = '\0';
        s_sync_path(dir[0] ? dir : "/");
    }
    dblock_release(lock);
    if (code == PAN_EXIT_OK)
        printf("Restored %s from %s (%lld tasks); the previous database is %s.before-restore\n",
               db, file, (long long)s_count_tasks(db), db);
    return code;
}
