/* session: the per-specialist session store (see session.h).
 *
 * File format (specialists/<name>.session), one JSON object:
 *   {"format":1,"cli":"claude","session_id":"<uuid>","cwd":"/abs","created_at_ms":…,"last_run_at_ms":…,
 *    "runs":…,"context_tokens":…,"input_tokens":…,"output_tokens":…,"cost_usd":…,"cli_version":"…",
 *    "fresh_reason":"…"}
 * Unknown keys are ignored and missing numbers read as 0 (files written before
 * "context_tokens" existed load with a context of 0, before "cli" as Claude's); a missing
 * or non-UUID session_id ("" is allowed: not named yet) or a missing cwd makes the file
 * invalid. */
#include "session.h"

#include "clock.h"
#include "failure.h"
#include "home.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uuid/uuid.h>

#define SESSION_FORMAT 1
#define SESSION_PATH_SIZE 1200

struct session_lock_t {
    int fd;
};

bool session_name_valid(const char *name)
{
    if (name == NULL || name[0] == '\0' || name[0] == '.' || name[0] == '~' ||
        strlen(name) > SESSION_NAME_MAX)
        return false;
    const char *replica = strchr(name, '~'); /* a replica's key: "<name>~<digits>" */
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = p > replica && replica != NULL
                      ? c >= '0' && c <= '9'
                      : (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
                            p == replica;
        if (!ok)
            return false;
    }
    return replica == NULL || replica[1] != '\0';
}

void session_new_id(char id[SESSION_ID_SIZE])
{
    uuid_t uu;
    uuid_generate_random(uu);
    uuid_unparse_lower(uu, id);
}

/* "<home>/specialists/<name><suffix>" into buf. */
static int s_path(char *buf, size_t size, const char *name, const char *suffix)
{
    if (!session_name_valid(name))
        return failure_set(FAILURE_INVALID, "invalid specialist name \"%s\"",
                           name ? name : "(null)");
    char relative[SESSION_NAME_MAX + 64];
    snprintf(relative, sizeof relative, "specialists/%s%s", name, suffix);
    return home_path(buf, size, relative);
}

static int s_specialists_dir(char *buf, size_t size)
{
    int rc = home_path(buf, size, "specialists");
    return rc != 0 ? rc : home_mkdirs(buf);
}

static int64_t s_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    return 0;
}

static void s_copy_string(char *dst, size_t size, json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    snprintf(dst, size, "%s", v ? v : "");
}

int session_load(const char *name, session_state_t *state)
{
    char path[SESSION_PATH_SIZE];
    int rc = s_path(path, sizeof path, name, ".session");
    if (rc != 0)
        return rc;
    memset(state, 0, sizeof *state);
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return failure_set(FAILURE_NOT_FOUND, "no session for %s", name);

    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (root == NULL) {
        rc = failure_set(FAILURE_INVALID, "session file %s is unreadable: %s (line %d)", path,
                         error.text, error.line);
        goto out;
    }
    const char *id = json_string_value(json_object_get(root, "session_id"));
    const char *cwd = json_string_value(json_object_get(root, "cwd"));
    uuid_t parsed;
    /* "" is a session whose CLI names it and has not said the name yet (agent_cli.h). */
    if (!json_is_object(root) || id == NULL ||
        (id[0] != '\0' && (strlen(id) != SESSION_ID_SIZE - 1 || uuid_parse(id, parsed) != 0))) {
        rc = failure_set(FAILURE_INVALID, "session file %s has no valid session_id", path);
        goto out;
    }
    if (cwd == NULL || cwd[0] != '/' || strlen(cwd) >= SESSION_CWD_SIZE) {
        rc = failure_set(FAILURE_INVALID, "session file %s has no valid cwd", path);
        goto out;
    }
    snprintf(state->session_id, sizeof state->session_id, "%s", id);
    snprintf(state->cwd, sizeof state->cwd, "%s", cwd);
    state->created_at_ms = s_int(root, "created_at_ms");
    state->last_run_at_ms = s_int(root, "last_run_at_ms");
    state->runs = s_int(root, "runs");
    state->context_tokens = s_int(root, "context_tokens");
    state->input_tokens = s_int(root, "input_tokens");
    state->output_tokens = s_int(root, "output_tokens");
    json_t *cost = json_object_get(root, "cost_usd");
    state->cost_usd = json_is_number(cost) ? json_number_value(cost) : 0.0;
    s_copy_string(state->cli_version, sizeof state->cli_version, root, "cli_version");
    s_copy_string(state->cli, sizeof state->cli, root, "cli");
    if (state->cli[0] == '\0') /* a file from before there was a choice */
        snprintf(state->cli, sizeof state->cli, "claude");
    s_copy_string(state->fresh_reason, sizeof state->fresh_reason, root, "fresh_reason");

out:
    if (rc == FAILURE_INVALID) {
        log_warn("%s; treating it as no session", failure_message());
        memset(state, 0, sizeof *state);
    }
    json_decref(root);
    return rc;
}

/* Writes all of buf to fd; returns 0 or -1 with errno set. */
static int s_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int session_save(const char *name, const session_state_t *state)
{
    char path[SESSION_PATH_SIZE], temp[SESSION_PATH_SIZE + 32], dir[SESSION_PATH_SIZE];
    int rc = s_path(path, sizeof path, name, ".session");
    if (rc != 0)
        return rc;
    if ((rc = s_specialists_dir(dir, sizeof dir)) != 0)
        return rc;
    snprintf(temp, sizeof temp, "%s.tmp.%d", path, (int)getpid());

    json_t *root = json_pack(
        "{s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:s, s:s}", "format",
        SESSION_FORMAT, "cli", state->cli[0] ? state->cli : "claude",
        "session_id", state->session_id, "cwd", state->cwd, "created_at_ms",
        (json_int_t)state->created_at_ms, "last_run_at_ms", (json_int_t)state->last_run_at_ms,
        "runs", (json_int_t)state->runs, "context_tokens", (json_int_t)state->context_tokens,
        "input_tokens", (json_int_t)state->input_tokens,
        "output_tokens", (json_int_t)state->output_tokens, "cost_usd", state->cost_usd,
        "cli_version", state->cli_version, "fresh_reason", state->fresh_reason);
    char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (text == NULL)
        return failure_set(FAILURE_INVALID, "session for %s cannot be encoded (not UTF-8?)", name);

    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = failure_set(FAILURE_IO, "cannot create %s: %s", temp, strerror(errno));
        goto out;
    }
    if (s_write_all(fd, text, strlen(text)) != 0 || s_write_all(fd, "\n", 1) != 0 ||
        fsync(fd) != 0) {
        rc = failure_set(FAILURE_IO, "cannot write %s: %s", temp, strerror(errno));
        close(fd);
        unlink(temp);
        goto out;
    }
    close(fd);
    if (rename(temp, path) != 0) {
        rc = failure_set(FAILURE_IO, "cannot rename %s to %s: %s", temp, path, strerror(errno));
        unlink(temp);
        goto out;
    }
    /* Make the rename itself durable. */
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        fsync(dir_fd);
        close(dir_fd);
    }
out:
    free(text);
    return rc;
}

int session_lock_try(session_lock_t **lock_p, const char *name)
{
    char path[SESSION_PATH_SIZE], dir[SESSION_PATH_SIZE];
    *lock_p = NULL;
    int rc = s_path(path, sizeof path, name, ".lock");
    if (rc != 0)
        return rc;
    if ((rc = s_specialists_dir(dir, sizeof dir)) != 0)
        return rc;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        int err = errno;
        close(fd);
        if (err == EWOULDBLOCK)
            return failure_set(FAILURE_STATE, "specialist %s is busy (another run holds its lock)",
                               name);
        return failure_set(FAILURE_IO, "cannot lock %s: %s", path, strerror(err));
    }
    session_lock_t *lock = malloc(sizeof *lock);
    if (lock == NULL) {
        close(fd);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    lock->fd = fd;
    *lock_p = lock;
    return 0;
}

void session_unlock(session_lock_t **lock_p)
{
    if (lock_p == NULL || *lock_p == NULL)
        return;
    close((*lock_p)->fd); /* closing the only descriptor releases the flock */
    free(*lock_p);
    *lock_p = NULL;
}

int session_reset(const char *name)
{
    char path[SESSION_PATH_SIZE];
    int rc = s_path(path, sizeof path, name, ".session");
    if (rc != 0)
        return rc;
    session_lock_t *lock = NULL;
    if ((rc = session_lock_try(&lock, name)) != 0)
        return rc;
    if (unlink(path) != 0 && errno != ENOENT)
        rc = failure_set(FAILURE_IO, "cannot delete %s: %s", path, strerror(errno));
    session_unlock(&lock);
    return rc;
}

/* A history past SESSION_HISTORY_MAX_BYTES becomes history.jsonl.1 (the one before is
 * dropped), so the file does not grow for ever. */
static void s_rotate_history(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size < SESSION_HISTORY_MAX_BYTES)
        return;
    char old[SESSION_PATH_SIZE + 40];
    snprintf(old, sizeof old, "%s.1", path);
    if (rename(path, old) != 0)
        log_warn("cannot rotate %s: %s", path, strerror(errno));
}

int session_history_append(const char *name, json_t *entry)
{
    char dir[SESSION_PATH_SIZE], path[SESSION_PATH_SIZE + 32];
    int rc = s_path(dir, sizeof dir, name, "");
    if (rc != 0)
        return rc;
    if (!json_is_object(entry))
        return failure_set(FAILURE_INVALID, "history entry for %s is not an object", name);
    if ((rc = home_mkdirs(dir)) != 0)
        return rc;
    snprintf(path, sizeof path, "%s/history.jsonl", dir);
    if (json_object_get(entry, "at_ms") == NULL)
        json_object_set_new(entry, "at_ms", json_integer((json_int_t)clock_wall_ms()));
    char *text = json_dumps(entry, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (text == NULL)
        return failure_set(FAILURE_INVALID, "history entry for %s cannot be encoded", name);
    size_t len = strlen(text);
    char *line = realloc(text, len + 2);
    if (line == NULL) {
        free(text);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    line[len] = '\n';
    line[len + 1] = '\0';
    s_rotate_history(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    } else {
        if (s_write_all(fd, line, len + 1) != 0)
            rc = failure_set(FAILURE_IO, "cannot append to %s: %s", path, strerror(errno));
        close(fd);
    }
    free(line);
    return rc;
}
