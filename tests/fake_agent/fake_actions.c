/* fake_actions: runs a FAKE_*_ACTIONS script (see fake_actions.h). */
#define _XOPEN_SOURCE 700
#include "fake_actions.h"
#include "fake_common.h"
#include "fake_mcp.h"

#include "failure.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAKE_RUN_OUTPUT_MAX (64 * 1024)
#define FAKE_ARGV_MAX 64

/* Re-records the current failure reason behind `prefix` (the reason is copied first: it
 * lives in the buffer failure_set() writes). Returns `code`. */
static int s_prefix_failure(int code, const char *prefix)
{
    char reason[512];
    snprintf(reason, sizeof reason, "%s", failure_message());
    return failure_set(code, "%s%s", prefix, reason);
}

/* Reports one step; `input` is taken. */
static void s_report(fake_actions_report_fn *report, void *arg, const char *tool, json_t *input,
                     const char *output, bool is_error, int exit_code)
{
    fake_step_t step = {tool, input, output, is_error, exit_code, false};
    report(&step, arg);
    json_decref(input);
}

/* The same for a write or append that created its file. */
static void s_report_file(fake_actions_report_fn *report, void *arg, const char *tool,
                          json_t *input, const char *output, bool is_error, bool created)
{
    fake_step_t step = {tool, input, output, is_error, 0, created};
    report(&step, arg);
    json_decref(input);
}

/* Turns \n, \t and \\ into the characters they name. Caller frees. */
static char *s_unescape(const char *text)
{
    char *out = malloc(strlen(text) + 1);
    if (out == NULL)
        return NULL;
    char *w = out;
    for (const char *r = text; *r; r++) {
        if (*r == '\\' && r[1] == 'n') {
            *w++ = '\n';
            r++;
        } else if (*r == '\\' && r[1] == 't') {
            *w++ = '\t';
            r++;
        } else if (*r == '\\' && r[1] == '\\') {
            *w++ = '\\';
            r++;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return out;
}

/* Creates the parent directories of `path` (like the Write tool does). */
static void s_make_parents(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    for (char *p = copy + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(copy, 0755);
            *p = '/';
        }
    }
}

static int s_write_file(const char *path, const char *text, const char *mode)
{
    s_make_parents(path);
    FILE *f = fopen(path, mode);
    if (f == NULL)
        return failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len;
    if (fclose(f) != 0 || !ok)
        return failure_set(FAILURE_IO, "cannot write %s", path);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Conflict markers. */

/* True when `line` starts with the 7-character `marker` followed by a space or the end of
 * the line ("=======" must be alone on its line). */
static bool s_is_marker(const char *line, const char *marker, bool needs_alone)
{
    if (strncmp(line, marker, 7) != 0)
        return false;
    char next = line[7];
    if (next == '\n' || next == '\0' || (next == '\r' && (line[8] == '\n' || line[8] == '\0')))
        return true;
    return !needs_alone && next == ' ';
}

static bool s_has_markers(const char *text)
{
    for (const char *line = text; line != NULL && *line; ) {
        if (s_is_marker(line, "<<<<<<<", false))
            return true;
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return false;
}

char *fake_actions_resolve_text(const char *text, const char *rule, int *blocks)
{
    bool keep_ours = strcmp(rule, "ours") == 0 || strcmp(rule, "both") == 0;
    bool keep_theirs = strcmp(rule, "theirs") == 0 || strcmp(rule, "both") == 0;
    *blocks = 0;
    if (!keep_ours && !keep_theirs) {
        failure_set(FAILURE_INVALID, "unknown resolve rule '%s' (ours, theirs or both)", rule);
        return NULL;
    }
    enum { OUTSIDE, OURS, BASE, THEIRS } state = OUTSIDE;
    char *out = malloc(strlen(text) + 1);
    if (out == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        return NULL;
    }
    size_t used = 0;
    int line_no = 0, block_start = 0;
    for (const char *line = text; *line; ) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) + 1 : strlen(line);
        line_no++;
        bool keep = false;
        if (state == OUTSIDE && s_is_marker(line, "<<<<<<<", false)) {
            state = OURS;
            block_start = line_no;
        } else if (state == OURS && s_is_marker(line, "|||||||", false)) {
            state = BASE;
        } else if ((state == OURS || state == BASE) && s_is_marker(line, "=======", true)) {
            state = THEIRS;
        } else if (state == THEIRS && s_is_marker(line, ">>>>>>>", false)) {
            state = OUTSIDE;
            (*blocks)++;
        } else {
            keep = state == OUTSIDE || (state == OURS && keep_ours) ||
                   (state == THEIRS && keep_theirs);
        }
        if (keep) {
            memcpy(out + used, line, len);
            used += len;
        }
        line += len;
    }
    out[used] = '\0';
    if (state != OUTSIDE) {
        free(out);
        failure_set(FAILURE_INVALID, "conflict block starting at line %d is not terminated",
                    block_start);
        return NULL;
    }
    return out;
}

/* Resolves one file in place. Returns 0 or a FAILURE_* code. */
static int s_resolve_file(const char *path, const char *rule, int *blocks)
{
    char *text = fake_read_file(path);
    if (text == NULL)
        return failure_set(FAILURE_NOT_FOUND, "cannot read %s: %s", path, strerror(errno));
    char *resolved = fake_actions_resolve_text(text, rule, blocks);
    free(text);
    if (resolved == NULL) {
        char prefix[4200];
        snprintf(prefix, sizeof prefix, "%s: ", path);
        return s_prefix_failure(FAILURE_INVALID, prefix);
    }
    int rc = s_write_file(path, resolved, "wb");
    free(resolved);
    return rc;
}

/* nftw has no user argument: the walk collects into this list. */
static json_t *s_conflicted;

static int s_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    const char *name = path + ftw->base;
    if (flag == FTW_D && strcmp(name, ".git") == 0)
        return FTW_SKIP_SUBTREE;
    if (flag != FTW_F)
        return FTW_CONTINUE;
    char *text = fake_read_file(path);
    if (text != NULL && s_has_markers(text))
        json_array_append_new(s_conflicted, json_string(strncmp(path, "./", 2) == 0 ? path + 2
                                                                                    : path));
    free(text);
    return FTW_CONTINUE;
}

static int s_compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---------------------------------------------------------------------------------------
 * The actions. Each returns 0 or a FAILURE_* code, and reports its step. */

static int s_action_write(char *rest, bool append, fake_actions_report_fn *report, void *arg)
{
    char *space = strchr(rest, ' ');
    const char *raw = space != NULL ? space + 1 : "";
    if (space != NULL)
        *space = '\0';
    const char *tool = append ? "Edit" : "Write";
    if (*rest == '\0') {
        int rc = failure_set(FAILURE_INVALID, "%s needs a path", append ? "append" : "write");
        s_report(report, arg, tool, json_object(), failure_message(), true, 0);
        return rc;
    }
    char *text = s_unescape(raw);
    if (text == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    bool created = access(rest, F_OK) != 0;
    int rc = s_write_file(rest, text, append ? "ab" : "wb");
    json_t *input = json_pack("{s:s, s:s}", "file_path", rest, "content", text);
    if (append)
        json_object_set_new(input, "append", json_true());
    char output[4200];
    if (rc == 0)
        snprintf(output, sizeof output, "%s %s", append ? "Appended to" : "Wrote", rest);
    else
        snprintf(output, sizeof output, "%s", failure_message());
    s_report_file(report, arg, tool, input, output, rc != 0, created && rc == 0);
    free(text);
    if (rc != 0)
        return failure_set(rc, "%s", output);
    return 0;
}

static int s_action_resolve(char *rest, fake_actions_report_fn *report, void *arg)
{
    char *space = strchr(rest, ' ');
    const char *rule = space != NULL ? space + 1 : "";
    if (space != NULL)
        *space = '\0';
    json_t *input = json_pack("{s:s, s:s}", "file_path", rest, "rule", rule);
    int blocks = 0;
    int rc;
    char *text = fake_read_file(rest);
    if (text == NULL)
        rc = failure_set(FAILURE_NOT_FOUND, "resolve: cannot read %s: %s", rest,
                         strerror(errno));
    else if (!s_has_markers(text))
        rc = failure_set(FAILURE_INVALID, "resolve: no conflict markers in %s", rest);
    else
        rc = s_resolve_file(rest, rule, &blocks);
    free(text);
    char output[4200];
    if (rc == 0)
        snprintf(output, sizeof output, "Resolved %d conflict block(s) in %s keeping %s", blocks,
                 rest, rule);
    else
        snprintf(output, sizeof output, "%s", failure_message());
    s_report(report, arg, "Edit", input, output, rc != 0, 0);
    return rc != 0 ? failure_set(rc, "%s", output) : 0;
}

static int s_action_resolve_all(const char *rule, fake_actions_report_fn *report, void *arg)
{
    json_t *input = json_pack("{s:s, s:s}", "file_path", ".", "rule", rule);
    int rc = 0;
    char output[8192] = "";
    if (strcmp(rule, "ours") != 0 && strcmp(rule, "theirs") != 0 && strcmp(rule, "both") != 0) {
        rc = failure_set(FAILURE_INVALID, "resolve-all: unknown rule '%s' (ours, theirs or both)",
                         rule);
        snprintf(output, sizeof output, "%s", failure_message());
        s_report(report, arg, "Edit", input, output, true, 0);
        return rc;
    }
    s_conflicted = json_array();
    nftw(".", s_visit, 16, FTW_PHYS | FTW_ACTIONRETVAL);
    size_t count = json_array_size(s_conflicted);
    const char **paths = calloc(count + 1, sizeof *paths);
    for (size_t i = 0; paths != NULL && i < count; i++)
        paths[i] = json_string_value(json_array_get(s_conflicted, i));
    if (paths != NULL)
        qsort(paths, count, sizeof *paths, s_compare_strings);
    size_t used = (size_t)snprintf(output, sizeof output, "Resolved %zu file(s) keeping %s",
                                   count, rule);
    for (size_t i = 0; paths != NULL && i < count && rc == 0; i++) {
        int blocks = 0;
        rc = s_resolve_file(paths[i], rule, &blocks);
        if (rc == 0 && used < sizeof output)
            used += (size_t)snprintf(output + used, sizeof output - used, "\n%s (%d block(s))",
                                     paths[i], blocks);
    }
    if (rc != 0) {
        rc = s_prefix_failure(rc, "resolve-all: ");
        snprintf(output, sizeof output, "%s", failure_message());
    }
    free(paths);
    json_decref(s_conflicted);
    s_conflicted = NULL;
    s_report(report, arg, "Edit", input, output, rc != 0, 0);
    return rc;
}

/* Why `run` is refused, or NULL (fake_actions_refuse_run()). */
static const char *s_run_refusal;

void fake_actions_refuse_run(const char *why)
{
    s_run_refusal = why;
}

/* Runs argv (split on spaces) with stdin from /dev/null and stdout+stderr captured, in a
 * session of its own (as Claude Code's Bash tool runs its commands: docs/agent-cli.md
 * §3.3), unless `run` is refused: then an error step, and the script goes on. */
static int s_action_run(const char *rest, fake_actions_report_fn *report, void *arg)
{
    json_t *input = json_pack("{s:s, s:s}", "command", rest, "description", "fake agent run");
    if (s_run_refusal != NULL) {
        s_report(report, arg, "Bash", input, s_run_refusal, true, 0);
        return 0;
    }
    char *copy = strdup(rest);
    char *argv[FAKE_ARGV_MAX + 1];
    int argc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok != NULL && argc < FAKE_ARGV_MAX;
         tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    if (argc == 0) {
        free(copy);
        int rc = failure_set(FAILURE_INVALID, "run needs a command");
        s_report(report, arg, "Bash", input, failure_message(), true, 0);
        return rc;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        free(copy);
        int rc = failure_set(FAILURE_IO, "run: pipe: %s", strerror(errno));
        s_report(report, arg, "Bash", input, failure_message(), true, 0);
        return rc;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    char *output = malloc(FAKE_RUN_OUTPUT_MAX + 64);
    size_t used = 0;
    ssize_t n;
    char buf[4096];
    while ((n = read(fds[0], buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        size_t take = (size_t)n;
        if (used + take > FAKE_RUN_OUTPUT_MAX)
            take = FAKE_RUN_OUTPUT_MAX - used;
        if (output != NULL)
            memcpy(output + used, buf, take);
        used += take;
    }
    close(fds[0]);
    int status = 0, exit_code = 127;
    if (pid > 0 && waitpid(pid, &status, 0) == pid)
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (output != NULL) {
        output[used] = '\0';
        if (exit_code != 0)
            snprintf(output + used, 64, "%sExit code %d", used > 0 ? "\n" : "", exit_code);
    }
    s_report(report, arg, "Bash", input, output != NULL ? output : "", exit_code != 0, exit_code);
    free(output);
    free(copy);
    return 0;
}

/* mcp <server> <tool> <json arguments>: one MCP tool call, reported as the real CLI names
 * it (mcp__<server>__<tool>); an error result is an error step, not a failed script. */
static int s_action_mcp(char *rest, fake_actions_report_fn *report, void *arg)
{
    char *save = NULL;
    char *server = strtok_r(rest, " ", &save);
    char *tool = server ? strtok_r(NULL, " ", &save) : NULL;
    char *text = tool ? save : NULL;
    json_t *arguments = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_object(arguments)) {
        json_decref(arguments);
        return failure_set(FAILURE_INVALID, "mcp needs <server> <tool> <json object>");
    }
    char name[256];
    snprintf(name, sizeof name, "mcp__%s__%s", server, tool);
    json_t *result = NULL;
    int rc = fake_mcp_call(server, tool, arguments, &result);
    const char *output = rc != 0 ? failure_message()
                                 : json_string_value(json_object_get(
                                       json_array_get(json_object_get(result, "content"), 0),
                                       "text"));
    bool is_error = rc != 0 || json_is_true(json_object_get(result, "isError"));
    s_report(report, arg, name, arguments, output ? output : "", is_error, 0);
    json_decref(result);
    return 0;
}

/* Runs one script line (modified in place). */
static int s_action(char *line, fake_actions_report_fn *report, void *arg, json_t *said)
{
    char *space = strchr(line, ' ');
    char *rest = space != NULL ? space + 1 : line + strlen(line);
    if (space != NULL)
        *space = '\0';
    if (strcmp(line, "write") == 0)
        return s_action_write(rest, false, report, arg);
    if (strcmp(line, "append") == 0)
        return s_action_write(rest, true, report, arg);
    if (strcmp(line, "resolve") == 0)
        return s_action_resolve(rest, report, arg);
    if (strcmp(line, "resolve-all") == 0)
        return s_action_resolve_all(rest, report, arg);
    if (strcmp(line, "run") == 0)
        return s_action_run(rest, report, arg);
    if (strcmp(line, "mcp") == 0)
        return s_action_mcp(rest, report, arg);
    if (strcmp(line, "say") == 0) {
        char *text = s_unescape(rest);
        json_array_append_new(said, json_string(text != NULL ? text : ""));
        free(text);
        return 0;
    }
    if (strcmp(line, "sleep") == 0) {
        char *end = NULL;
        long ms = strtol(rest, &end, 10);
        if (*rest == '\0' || *end != '\0' || ms < 0)
            return failure_set(FAILURE_INVALID, "sleep needs milliseconds, got '%s'", rest);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        return 0;
    }
    return failure_set(FAILURE_INVALID, "unknown action '%s'", line);
}

int fake_actions_run(const char *path, fake_actions_report_fn *report, void *arg, json_t *said)
{
    char *script = fake_read_file(path);
    if (script == NULL)
        return failure_set(FAILURE_NOT_FOUND, "cannot read the action script %s: %s", path,
                           strerror(errno));
    int rc = 0;
    int line_no = 0;
    for (char *line = script, *next; line != NULL && rc == 0; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        line_no++;
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[len - 1] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        rc = s_action(line, report, arg, said);
        if (rc != 0) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "action on line %d: ", line_no);
            rc = s_prefix_failure(rc, prefix);
        }
    }
    free(script);
    return rc;
}
