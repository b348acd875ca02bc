/* Unit tests for session: save/load round trip, atomic replacement, reset, the run lock
 * (also against a forked process), corrupt files treated as "no session", history lines,
 * ids and names. */
#include "check.h"
#include "failure.h"
#include "session.h"
#include "testenv.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uuid/uuid.h>

static testenv_t *env;

static void s_home_file(char *buf, size_t size, const char *relative)
{
    snprintf(buf, size, "%s/%s", env->home, relative);
}

static void s_fill(session_state_t *st, const char *cwd)
{
    memset(st, 0, sizeof *st);
    session_new_id(st->session_id);
    snprintf(st->cwd, sizeof st->cwd, "%s", cwd);
    st->created_at_ms = 1700000000123;
    st->last_run_at_ms = 1700000005000;
    st->runs = 3;
    st->context_tokens = 98765;
    st->input_tokens = 123456789012;
    st->output_tokens = 4567;
    st->cost_usd = 0.125;
    snprintf(st->cli_version, sizeof st->cli_version, "2.1.330");
    snprintf(st->fresh_reason, sizeof st->fresh_reason, "context lost");
}

static void test_ids_and_names(void)
{
    char a[SESSION_ID_SIZE], b[SESSION_ID_SIZE];
    session_new_id(a);
    session_new_id(b);
    uuid_t parsed;
    CHECK_INT(strlen(a), 36);
    CHECK_INT(uuid_parse(a, parsed), 0);
    CHECK(strcmp(a, b) != 0);
    for (const char *p = a; *p; p++)
        CHECK(!(*p >= 'A' && *p <= 'Z'));
    CHECK(session_name_valid("merge-agent"));
    CHECK(session_name_valid("review_agent.2"));
    CHECK(!session_name_valid(""));
    CHECK(!session_name_valid(NULL));
    CHECK(!session_name_valid("../etc"));
    CHECK(!session_name_valid("a/b"));
    CHECK(!session_name_valid(".hidden"));
    session_state_t st;
    CHECK_INT(session_load("../x", &st), FAILURE_INVALID);
}

static void test_create_update_load(void)
{
    session_state_t st, got;
    CHECK_INT(session_load("merge-agent", &got), FAILURE_NOT_FOUND);
    s_fill(&st, "/srv/work");
    CHECK_INT(session_save("merge-agent", &st), 0);
    CHECK_INT(session_load("merge-agent", &got), 0);
    CHECK_STR(got.session_id, st.session_id);
    CHECK_STR(got.cwd, "/srv/work");
    CHECK_INT(got.created_at_ms, st.created_at_ms);
    CHECK_INT(got.last_run_at_ms, st.last_run_at_ms);
    CHECK_INT(got.runs, 3);
    CHECK_INT(got.context_tokens, 98765);
    CHECK_INT(got.input_tokens, 123456789012);
    CHECK_INT(got.output_tokens, 4567);
    CHECK(got.cost_usd > 0.1249 && got.cost_usd < 0.1251);
    CHECK_STR(got.cli_version, "2.1.330");
    CHECK_STR(got.fresh_reason, "context lost");

    got.runs++;
    got.input_tokens += 10;
    got.context_tokens = 4321; /* the context is replaced, not summed */
    CHECK_INT(session_save("merge-agent", &got), 0);
    session_state_t again;
    CHECK_INT(session_load("merge-agent", &again), 0);
    CHECK_INT(again.runs, 4);
    CHECK_INT(again.input_tokens, 123456789022);
    CHECK_INT(again.context_tokens, 4321);

    /* The file is JSON a person (or jq) can read. */
    char path[600];
    s_home_file(path, sizeof path, "specialists/merge-agent.session");
    char *text = testenv_read_file(path);
    CHECK(text != NULL && strstr(text, "\"session_id\"") != NULL &&
          strstr(text, "\"cwd\": \"/srv/work\"") != NULL);
    free(text);
}

static void test_atomic_write(void)
{
    /* No temp file is left behind, and a save over an existing file replaces it whole
     * (a reader holding the old file still sees the old contents: rename, not rewrite). */
    session_state_t st;
    s_fill(&st, "/a");
    CHECK_INT(session_save("atomic", &st), 0);
    char path[600];
    s_home_file(path, sizeof path, "specialists/atomic.session");
    FILE *old = fopen(path, "r");
    CHECK(old != NULL);
    s_fill(&st, "/b");
    CHECK_INT(session_save("atomic", &st), 0);
    char buf[4096] = {0};
    size_t n = old ? fread(buf, 1, sizeof buf - 1, old) : 0;
    buf[n] = '\0';
    CHECK(strstr(buf, "\"/a\"") != NULL);
    if (old)
        fclose(old);
    session_state_t got;
    CHECK_INT(session_load("atomic", &got), 0);
    CHECK_STR(got.cwd, "/b");

    char dir[600];
    s_home_file(dir, sizeof dir, "specialists");
    DIR *d = opendir(dir);
    int temps = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        temps += strstr(e->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    CHECK_INT(temps, 0);
}

static void test_corrupt_is_no_session(void)
{
    char path[600];
    s_home_file(path, sizeof path, "specialists/broken.session");
    session_state_t st;
    const char *bad[] = {
        "{not json",
        "",
        "[1,2,3]",
        "{\"session_id\":\"not-a-uuid\",\"cwd\":\"/x\"}",
        "{\"session_id\":\"0b7c2a64-3e0b-4c38-9a55-2b8f0e0f6d11\"}",
        "{\"session_id\":\"0b7c2a64-3e0b-4c38-9a55-2b8f0e0f6d11\",\"cwd\":\"relative\"}",
        "{\"session_id\":42,\"cwd\":\"/x\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_INT(testenv_write_file(path, bad[i]), 0);
        st.runs = 99;
        CHECK_INT(session_load("broken", &st), FAILURE_INVALID);
        CHECK(strstr(failure_message(), "broken.session") != NULL);
        CHECK_INT(st.runs, 0);
        CHECK_STR(st.session_id, "");
    }
    /* Unknown keys and wrong-typed optional fields are tolerated. */
    CHECK_INT(testenv_write_file(
                  path, "{\"session_id\":\"0B7C2A64-3E0B-4C38-9A55-2B8F0E0F6D11\",\"cwd\":\"/x\","
                        "\"runs\":\"many\",\"future\":{\"a\":1}}"),
              0);
    CHECK_INT(session_load("broken", &st), 0);
    CHECK_INT(st.runs, 0);
    CHECK_STR(st.cwd, "/x");
    /* A file from before "context_tokens" existed loads with a context of 0. */
    CHECK_INT(testenv_write_file(
                  path, "{\"format\":1,\"session_id\":\"0b7c2a64-3e0b-4c38-9a55-2b8f0e0f6d11\","
                        "\"cwd\":\"/x\",\"runs\":7,\"input_tokens\":900000}"),
              0);
    st.context_tokens = 99;
    CHECK_INT(session_load("broken", &st), 0);
    CHECK_INT(st.runs, 7);
    CHECK_INT(st.input_tokens, 900000);
    CHECK_INT(st.context_tokens, 0);
}

static void test_reset(void)
{
    session_state_t st;
    s_fill(&st, "/r");
    CHECK_INT(session_save("resettable", &st), 0);
    json_t *entry = json_pack("{s:s}", "task_id", "t1");
    CHECK_INT(session_history_append("resettable", entry), 0);
    json_decref(entry);
    CHECK_INT(session_reset("resettable"), 0);
    CHECK_INT(session_load("resettable", &st), FAILURE_NOT_FOUND);
    CHECK_INT(session_reset("resettable"), 0); /* nothing to delete is fine */
    char path[600];
    s_home_file(path, sizeof path, "specialists/resettable/history.jsonl");
    CHECK(access(path, F_OK) == 0); /* history survives a reset */

    /* A reset while a run holds the lock is refused. */
    s_fill(&st, "/r");
    CHECK_INT(session_save("resettable", &st), 0);
    session_lock_t *lock = NULL;
    CHECK_INT(session_lock_try(&lock, "resettable"), 0);
    CHECK_INT(session_reset("resettable"), FAILURE_STATE);
    session_unlock(&lock);
    CHECK_INT(session_load("resettable", &st), 0);
}

static void test_lock_excludes(void)
{
    session_lock_t *first = NULL, *second = NULL;
    CHECK_INT(session_lock_try(&first, "locked"), 0);
    CHECK(first != NULL);
    /* A second holder in this process is refused too (flock is per open file). */
    CHECK_INT(session_lock_try(&second, "locked"), FAILURE_STATE);
    CHECK(second == NULL);
    /* Another specialist's lock is independent. */
    CHECK_INT(session_lock_try(&second, "other"), 0);
    session_unlock(&second);

    /* A forked child cannot take it while we hold it ... */
    pid_t pid = fork();
    if (pid == 0) {
        session_lock_t *lock = NULL;
        _exit(session_lock_try(&lock, "locked") == FAILURE_STATE ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* ... and can once we release it. */
    session_unlock(&first);
    CHECK(first == NULL);
    pid = fork();
    if (pid == 0) {
        session_lock_t *lock = NULL;
        _exit(session_lock_try(&lock, "locked") == 0 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* A holder that dies releases the lock (the kernel drops it). */
    int ready[2];
    CHECK_INT(pipe(ready), 0);
    pid = fork();
    if (pid == 0) {
        session_lock_t *lock = NULL;
        char c = session_lock_try(&lock, "locked") == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c = 0;
    CHECK_INT(read(ready[0], &c, 1), 1);
    CHECK(c == 'y');
    CHECK_INT(session_lock_try(&first, "locked"), FAILURE_STATE);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    CHECK_INT(session_lock_try(&first, "locked"), 0);
    session_unlock(&first);
    session_unlock(&first); /* safe twice */
    close(ready[0]);
    close(ready[1]);
}

static void test_history(void)
{
    for (int i = 0; i < 3; i++) {
        json_t *entry =
            json_pack("{s:s, s:i, s:b}", "task_id", "task-7", "run", i, "is_error", i == 2);
        CHECK_INT(session_history_append("hist", entry), 0);
        CHECK(json_object_get(entry, "at_ms") != NULL);
        json_decref(entry);
    }
    char path[600];
    s_home_file(path, sizeof path, "specialists/hist/history.jsonl");
    char *text = testenv_read_file(path);
    CHECK(text != NULL);
    int lines = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        CHECK(next != NULL);
        if (next == NULL)
            break;
        *next++ = '\0';
        json_error_t error;
        json_t *obj = json_loads(line, 0, &error);
        CHECK(obj != NULL);
        CHECK_INT(json_integer_value(json_object_get(obj, "run")), lines);
        CHECK_STR(json_string_value(json_object_get(obj, "task_id")), "task-7");
        json_decref(obj);
        lines++;
    }
    CHECK_INT(lines, 3);
    free(text);
    json_t *not_object = json_array();
    CHECK_INT(session_history_append("hist", not_object), FAILURE_INVALID);
    json_decref(not_object);
}

/* A history past SESSION_HISTORY_MAX_BYTES is rotated before the next append. */
static void test_history_rotates(void)
{
    char path[600], old[640];
    s_home_file(path, sizeof path, "specialists/big/history.jsonl");
    snprintf(old, sizeof old, "%s.1", path);
    json_t *entry = json_pack("{s:s}", "task_id", "first");
    CHECK_INT(session_history_append("big", entry), 0); /* makes the directory */
    json_decref(entry);
    CHECK(truncate(path, SESSION_HISTORY_MAX_BYTES) == 0);
    entry = json_pack("{s:s}", "task_id", "after");
    CHECK_INT(session_history_append("big", entry), 0);
    json_decref(entry);
    struct stat st;
    CHECK(stat(old, &st) == 0 && st.st_size == SESSION_HISTORY_MAX_BYTES);
    char *text = testenv_read_file(path);
    CHECK(text != NULL && strstr(text, "\"after\"") != NULL && strchr(text, '\n') ==
                                                                   text + strlen(text) - 1);
    free(text);
}

int main(void)
{
    env = testenv_new("session");
    if (env == NULL)
        return 1;
    test_ids_and_names();
    test_create_update_load();
    test_atomic_write();
    test_corrupt_is_no_session();
    test_reset();
    test_lock_excludes();
    test_history();
    test_history_rotates();
    testenv_destroy(&env);
    return check_exit_code("test_session");
}
