/* `pan restore` accepts only a broker's store (issue 38 §8). A backup holding an SQLite
 * trigger was installed in the live store and ran inside the broker on the next submit; a
 * backup with a newer schema restored and then the broker would not start. A real broker
 * makes a store and a backup of it; variants of that backup -- with a trigger, a view, an
 * extra table, an index missing, a newer user_version -- are each refused with what is
 * wrong, and the live store is left as it was (no .before-restore, no trigger in it). The
 * backup as taken is restored, and the broker starts on it with its task. */
#include "check.h"
#include "testbroker.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_out[8192];

/* Runs pan COMMAND FILE, stdout and stderr into s_out. */
static int s_pan(testenv_t *env, const char *command, const char *file)
{
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", (char *)testenv_bin("pan"),
                    (char *)command, (char *)file, NULL};
    return testenv_run(env, argv, s_out, sizeof s_out, 60000);
}

/* Runs `sql` on the database at `path`; true when it ran. */
static bool s_sql(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    bool ok = sqlite3_open(path, &db) == SQLITE_OK &&
              sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
    if (!ok)
        fprintf(stderr, "%s: %s: %s\n", path, sql, sqlite3_errmsg(db));
    sqlite3_close(db);
    return ok;
}

/* The first column of the first row of `sql` on `path` as an integer, or -1. */
static int s_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    int value = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
        value = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return value;
}

/* A copy of the backup at `variant`, changed by `sql`, is refused with `reason`, and the
 * live store is untouched. */
static void s_refused(testenv_t *env, const char *backup, const char *variant, const char *sql,
                      const char *reason, const char *db_path)
{
    char *cp[] = {"/bin/cp", (char *)backup, (char *)variant, NULL};
    CHECK_INT(testenv_run(env, cp, s_out, sizeof s_out, 10000), 0);
    CHECK(s_sql(variant, sql));
    CHECK(s_pan(env, "restore", variant) != 0);
    if (strstr(s_out, reason) == NULL)
        fprintf(stderr, "pan restore %s said: %s\n(expected: %s)\n", variant, s_out, reason);
    CHECK(strstr(s_out, reason) != NULL);
    char aside[800];
    snprintf(aside, sizeof aside, "%s.before-restore", db_path);
    CHECK(access(aside, F_OK) != 0);
    CHECK_INT(s_int(db_path, "SELECT count(*) FROM sqlite_master WHERE type IN ('trigger', "
                             "'view') OR name = 'extra'"),
              0);
}

int main(void)
{
    testenv_t *env = testenv_new("restore-checks");
    CHECK(env != NULL);
    if (env == NULL)
        return check_exit_code("test_restore_checks");
    char db_path[700], backup[700], variant[700];
    snprintf(db_path, sizeof db_path, "%s/broker.db", env->home);
    snprintf(backup, sizeof backup, "%s/backup.db", env->dir);
    pid_t broker = testbroker_start(env, 0, "normal");
    CHECK(broker > 0);
    client_t *client = client_new(env->control_ep, 4000);
    CHECK_INT(testbroker_submit(client, "kept-1", "test-agent", NULL, NULL), 0);
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    CHECK(testenv_wait(env, broker, 10000) != -1);
    CHECK_INT(s_pan(env, "backup", backup), 0);
    int version = s_int(backup, "PRAGMA user_version");
    CHECK(version > 0);

    snprintf(variant, sizeof variant, "%s/trigger.db", env->dir);
    s_refused(env, backup, variant,
              "CREATE TRIGGER evil AFTER INSERT ON tasks BEGIN "
              "UPDATE tasks SET state = 'done' WHERE rid = new.rid; END;",
              "holds a trigger 'evil' that a broker's store", db_path);
    snprintf(variant, sizeof variant, "%s/view.db", env->dir);
    s_refused(env, backup, variant, "CREATE VIEW peek AS SELECT id FROM tasks;",
              "holds a view 'peek'", db_path);
    snprintf(variant, sizeof variant, "%s/extra.db", env->dir);
    s_refused(env, backup, variant, "CREATE TABLE extra (x);", "holds a table 'extra'", db_path);
    snprintf(variant, sizeof variant, "%s/changed.db", env->dir);
    s_refused(env, backup, variant, "DROP INDEX attempts_by_issue;",
              "lacks an index 'attempts_by_issue'", db_path);
    char newer[64];
    snprintf(newer, sizeof newer, "PRAGMA user_version = %d;", version + 1);
    snprintf(variant, sizeof variant, "%s/newer.db", env->dir);
    char reason[128];
    snprintf(reason, sizeof reason, "has schema version %d", version + 1);
    s_refused(env, backup, variant, newer, reason, db_path);
    snprintf(variant, sizeof variant, "%s/not-a-store.db", env->dir);
    s_refused(env, backup, variant, "PRAGMA user_version = 0;", "has schema version 0", db_path);

    /* The backup as taken: restored, and the broker starts on it. */
    CHECK_INT(s_pan(env, "restore", backup), 0);
    CHECK(strstr(s_out, "Restored") != NULL);
    broker = testbroker_start(env, 0, "normal");
    CHECK(broker > 0);
    client = client_new(env->control_ep, 4000);
    char state[32];
    CHECK_STR(testbroker_state(client, "kept-1", state, sizeof state), "queued");
    client_destroy(&client);
    testenv_signal(broker, SIGTERM);
    testenv_wait(env, broker, 10000);
    testenv_destroy(&env);
    return check_exit_code("test_restore_checks");
}
