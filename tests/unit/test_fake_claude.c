/* test_fake_claude: the fake Claude Code CLI (tests/fake_agent) keeps its contract.
 *
 * Every case runs the built `fake-claude` in a fresh temporary directory with its own
 * HOME and CLAUDE_CONFIG_DIR, feeds stdin from a file, and checks exit code, stdout,
 * stderr, the session store and the files the action scripts touch. */
#include "check.h"
#include "testenv.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SID_A "11111111-2222-4333-8444-555555555555"
#define SID_B "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
#define SID_C "99999999-8888-4777-8666-555555555555"

/* One test's world: a temp dir with work/ (the cwd) and config/ (CLAUDE_CONFIG_DIR). */
typedef struct {
    testenv_t *env;
    char work[600];
    char config[600];
    char project[1400]; /* config/projects/<encoded work dir> */
    int runs;
} world_t;

typedef struct {
    int code;  /* exit code, 128+signal, or -1 on timeout */
    char *out; /* stdout (caller frees via s_result_free) */
    char *err; /* stderr */
} result_t;

static const char *const s_knobs[] = {"FAKE_CLAUDE_SCENARIO", "FAKE_CLAUDE_RESULT",
                                      "FAKE_CLAUDE_DELAY_MS", "FAKE_CLAUDE_LOG",
                                      "FAKE_CLAUDE_ACTIONS",  "FAKE_CLAUDE_INPUT_TOKENS",
                                      "CLAUDECODE",           "PANOPTICON_AGENT_ID",
                                      NULL};

static void s_world_open(world_t *w, const char *name)
{
    memset(w, 0, sizeof *w);
    w->env = testenv_new(name);
    if (w->env == NULL) {
        fprintf(stderr, "cannot create test environment\n");
        exit(1);
    }
    char real[512];
    if (realpath(w->env->dir, real) == NULL)
        snprintf(real, sizeof real, "%s", w->env->dir);
    snprintf(w->work, sizeof w->work, "%s/work", real);
    snprintf(w->config, sizeof w->config, "%s/config", real);
    mkdir(w->work, 0755);
    char encoded[600];
    size_t i = 0;
    for (; w->work[i] != '\0'; i++) {
        char c = w->work[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        encoded[i] = keep ? c : '-';
    }
    encoded[i] = '\0';
    snprintf(w->project, sizeof w->project, "%s/projects/%s", w->config, encoded);
    setenv("CLAUDE_CONFIG_DIR", w->config, 1);
    setenv("HOME", real, 1);
    setenv("IS_SANDBOX", "1", 1);
    for (int k = 0; s_knobs[k] != NULL; k++)
        unsetenv(s_knobs[k]);
}

static void s_world_close(world_t *w)
{
    testenv_destroy(&w->env);
}

static void s_path(const world_t *w, const char *rel, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", w->work, rel);
}

/* Starts fake-claude in w->work with `args` (NULL-terminated, without argv[0]); stdin is
 * `stdin_text` (NULL: /dev/null); stdout/stderr go to files named after the run number. */
static pid_t s_start(world_t *w, const char *stdin_text, const char *const *args,
                     char *out_path, char *err_path, size_t path_size)
{
    w->runs++;
    char in_path[600];
    snprintf(in_path, sizeof in_path, "%s/run%d.in", w->env->dir, w->runs);
    snprintf(out_path, path_size, "%s/run%d.out", w->env->dir, w->runs);
    snprintf(err_path, path_size, "%s/run%d.err", w->env->dir, w->runs);
    CHECK(testenv_write_file(in_path, stdin_text != NULL ? stdin_text : "") == 0);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = testenv_bin("fake-claude");
    for (int i = 0; args[i] != NULL && argc < 63; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    return testenv_start_io(w->work, argv, stdin_text != NULL ? in_path : NULL, out_path,
                            err_path);
}

static result_t s_run(world_t *w, const char *stdin_text, const char *const *args)
{
    char out_path[600], err_path[600];
    pid_t pid = s_start(w, stdin_text, args, out_path, err_path, sizeof out_path);
    result_t r = {testenv_wait_exit(pid, 10000), NULL, NULL};
    if (r.code == -1)
        testenv_kill_group(pid);
    r.out = testenv_read_file(out_path);
    r.err = testenv_read_file(err_path);
    if (r.out == NULL)
        r.out = strdup("");
    if (r.err == NULL)
        r.err = strdup("");
    return r;
}

static void s_result_free(result_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

/* Line `index` of `text` parsed as JSON (negative: from the end), or NULL. Caller decrefs. */
static json_t *s_line(const char *text, int index)
{
    int count = 0;
    for (const char *p = text; *p; p++)
        if (*p == '\n')
            count++;
    if (index < 0)
        index += count;
    if (index < 0 || index >= count)
        return NULL;
    const char *line = text;
    for (int i = 0; i < index; i++)
        line = strchr(line, '\n') + 1;
    const char *end = strchr(line, '\n');
    return json_loadb(line, (size_t)(end - line), 0, NULL);
}

static int s_count_lines(const char *text)
{
    int count = 0;
    for (const char *p = text; p != NULL && *p; p++)
        if (*p == '\n')
            count++;
    return count;
}

static const char *s_str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static void s_session_file(const world_t *w, const char *id, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.jsonl", w->project, id);
}

/* Lines in the transcript of `id`, or -1 when it does not exist. */
static int s_session_lines(const world_t *w, const char *id)
{
    char path[1600];
    s_session_file(w, id, path, sizeof path);
    char *text = testenv_read_file(path);
    if (text == NULL)
        return -1;
    int lines = s_count_lines(text);
    free(text);
    return lines;
}

static int s_count_sessions(const world_t *w)
{
    DIR *dir = opendir(w->project);
    if (dir == NULL)
        return 0;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL)
        if (strstr(entry->d_name, ".jsonl") != NULL)
            count++;
    closedir(dir);
    return count;
}

/* The result of a json-format run with `args`; checks it is one object on one line. */
static json_t *s_json_result(const result_t *r)
{
    CHECK_INT(s_count_lines(r->out), 1);
    json_t *obj = json_loads(r->out, 0, NULL);
    CHECK(json_is_object(obj));
    return obj;
}

/* ---------------------------------------------------------------------------------------
 * Flags and validation. */

static void test_version_and_unknown_flag(void)
{
    world_t w;
    s_world_open(&w, "fake-version");
    result_t r = s_run(&w, NULL, (const char *[]){"--version", NULL});
    CHECK_INT(r.code, 0);
    CHECK_STR(r.out, "2.1.330 (Claude Code)\n");
    s_result_free(&r);

    r = s_run(&w, "hi", (const char *[]){"-p", "--bogus-flag", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "error: unknown option '--bogus-flag'\n");
    CHECK_STR(r.out, "");
    s_result_free(&r);

    /* Variadic options take values up to the next flag; -p after them is still a flag. */
    r = s_run(&w, NULL,
              (const char *[]){"--allowedTools", "Bash(git *)", "Edit", "--add-dir", "/tmp",
                               "--tools", "Bash,Edit", "-p", "--output-format", "json", "--",
                               "-looks like a flag", NULL});
    CHECK_INT(r.code, 0);
    json_t *obj = s_json_result(&r);
    CHECK(json_is_false(json_object_get(obj, "is_error")));
    json_decref(obj);
    s_result_free(&r);

    r = s_run(&w, "hi", (const char *[]){"-p", "--permission-mode", "bogus", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "error: option '--permission-mode <mode>' argument 'bogus' is invalid. "
                     "Allowed choices are acceptEdits, auto, bypassPermissions, manual, "
                     "dontAsk, plan.\n");
    s_result_free(&r);

    r = s_run(&w, "hi", (const char *[]){"-p", "--permission-mode", "default", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    s_world_close(&w);
}

static void test_validation_order(void)
{
    world_t w;
    s_world_open(&w, "fake-validate");
    /* Each case also breaks every later rule, so only the earliest message may appear. */
    result_t r = s_run(&w, NULL,
                       (const char *[]){"-p", "--output-format", "stream-json", "--input-format",
                                        "stream-json", "--session-id", "bogus", "--resume", "x",
                                        NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: When using --print, --output-format=stream-json requires --verbose\n");
    s_result_free(&r);

    r = s_run(&w, NULL,
              (const char *[]){"-p", "--output-format", "json", "--input-format", "stream-json",
                               "--session-id", "bogus", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: --input-format=stream-json requires output-format=stream-json.\n");
    s_result_free(&r);

    r = s_run(&w, NULL, (const char *[]){"-p", "--session-id", "bogus", "--resume", "x", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: Invalid session ID. Must be a valid UUID.\n");
    s_result_free(&r);

    r = s_run(&w, NULL, (const char *[]){"-p", "--session-id", SID_A, "--resume", "x", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: --session-id with --continue or --resume also needs --fork-session.\n");
    s_result_free(&r);

    r = s_run(&w, "first", (const char *[]){"-p", "--session-id", SID_A, NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    r = s_run(&w, NULL,
              (const char *[]){"-p", "--session-id", SID_A, "--resume", "x", "--fork-session",
                               NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: Session ID " SID_A " is already in use.\n");
    s_result_free(&r);

    r = s_run(&w, NULL, (const char *[]){"-p", "--resume", "x", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: --resume requires a valid session ID or session title when used "
                     "with --print. Usage: claude -p --resume <session-id|title>. Provided "
                     "value \"x\" is not a UUID and does not match any session title.\n");
    s_result_free(&r);

    /* Missing resume id: json prints nothing on stdout; stream-json prints the result. */
    r = s_run(&w, NULL, (const char *[]){"-p", "--output-format", "json", "--resume", SID_B, NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "No conversation found with session ID: " SID_B "\n");
    CHECK_STR(r.out, "");
    s_result_free(&r);
    r = s_run(&w, NULL,
              (const char *[]){"-p", "--output-format", "stream-json", "--verbose", "--resume",
                               SID_B, NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "No conversation found with session ID: " SID_B "\n");
    CHECK_INT(s_count_lines(r.out), 1);
    json_t *res = s_line(r.out, 0);
    CHECK_STR(s_str(res, "type"), "result");
    CHECK_STR(s_str(res, "subtype"), "error_during_execution");
    CHECK(json_is_true(json_object_get(res, "is_error")));
    CHECK(json_object_get(res, "result") == NULL);
    CHECK_STR(json_string_value(json_array_get(json_object_get(res, "errors"), 0)),
              "No conversation found with session ID: " SID_B);
    CHECK_STR(s_str(res, "session_id"), SID_B);
    json_decref(res);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_B), -1);

    r = s_run(&w, NULL, (const char *[]){"-p", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: Input must be provided either through stdin or as a prompt "
                     "argument when using --print\n");
    s_result_free(&r);
    s_world_close(&w);
}

static void test_root_bypass(void)
{
    world_t w;
    s_world_open(&w, "fake-root");
    unsetenv("IS_SANDBOX");
    result_t r = s_run(&w, "hi", (const char *[]){"-p", "--dangerously-skip-permissions", NULL});
    if (getuid() == 0) {
        CHECK_INT(r.code, 1);
        CHECK_STR(r.err, "--dangerously-skip-permissions cannot be used with root/sudo "
                         "privileges for security reasons\n");
    } else {
        CHECK_INT(r.code, 0);
    }
    s_result_free(&r);
    r = s_run(&w, "hi", (const char *[]){"-p", "--permission-mode", "bypassPermissions", NULL});
    CHECK_INT(r.code, getuid() == 0 ? 1 : 0);
    s_result_free(&r);
    setenv("IS_SANDBOX", "1", 1);
    r = s_run(&w, "hi", (const char *[]){"-p", "--permission-mode", "bypassPermissions", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * Sessions and prompts. */

static void test_sessions(void)
{
    world_t w;
    s_world_open(&w, "fake-sessions");
    result_t r = s_run(&w, "one",
                       (const char *[]){"-p", "--output-format", "json", "--session-id", SID_A,
                                        NULL});
    CHECK_INT(r.code, 0);
    json_t *obj = s_json_result(&r);
    CHECK_STR(s_str(obj, "session_id"), SID_A);
    json_decref(obj);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_A), 1);

    r = s_run(&w, "two", (const char *[]){"-p", "--output-format", "json", "-r", SID_A, NULL});
    CHECK_INT(r.code, 0);
    obj = s_json_result(&r);
    CHECK_STR(s_str(obj, "session_id"), SID_A);
    json_decref(obj);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_A), 2);

    r = s_run(&w, "three", (const char *[]){"-p", "--output-format", "json", "--continue", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_A), 3);

    /* The transcript holds the prompts. */
    char path[1600];
    s_session_file(&w, SID_A, path, sizeof path);
    char *text = testenv_read_file(path);
    json_t *line = s_line(text, 1);
    CHECK_STR(s_str(line, "prompt"), "two");
    CHECK_STR(s_str(line, "sessionId"), SID_A);
    json_decref(line);
    free(text);

    /* No persistence: nothing new on disk, even on resume. */
    r = s_run(&w, "four", (const char *[]){"-p", "--no-session-persistence", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    r = s_run(&w, "five",
              (const char *[]){"-p", "--no-session-persistence", "--resume", SID_A, NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    CHECK_INT(s_count_sessions(&w), 1);
    CHECK_INT(s_session_lines(&w, SID_A), 3);

    /* Without CLAUDE_CONFIG_DIR the store is under $HOME/.claude. */
    unsetenv("CLAUDE_CONFIG_DIR");
    r = s_run(&w, "home", (const char *[]){"-p", "--session-id", SID_B, NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    char home_path[1600];
    snprintf(home_path, sizeof home_path, "%s/.claude/projects/%s/%s.jsonl", getenv("HOME"),
             strrchr(w.project, '/') + 1, SID_B);
    CHECK(access(home_path, F_OK) == 0);
    s_world_close(&w);
}

static void test_fork(void)
{
    world_t w;
    s_world_open(&w, "fake-fork");
    result_t r = s_run(&w, "one", (const char *[]){"-p", "--session-id", SID_A, NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);

    r = s_run(&w, "two",
              (const char *[]){"-p", "--output-format", "json", "--resume", SID_A,
                               "--fork-session", NULL});
    CHECK_INT(r.code, 0);
    json_t *obj = s_json_result(&r);
    const char *forked = s_str(obj, "session_id");
    CHECK(forked != NULL && strcmp(forked, SID_A) != 0);
    CHECK_INT(s_session_lines(&w, forked != NULL ? forked : "none"), 2);
    json_decref(obj);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_A), 1);

    r = s_run(&w, "three",
              (const char *[]){"-p", "--output-format", "json", "--resume", SID_A,
                               "--fork-session", "--session-id", SID_C, NULL});
    CHECK_INT(r.code, 0);
    obj = s_json_result(&r);
    CHECK_STR(s_str(obj, "session_id"), SID_C);
    json_decref(obj);
    s_result_free(&r);
    CHECK_INT(s_session_lines(&w, SID_C), 2);
    CHECK_INT(s_session_lines(&w, SID_A), 1);
    s_world_close(&w);
}

static void test_prompt_and_log(void)
{
    world_t w;
    s_world_open(&w, "fake-log");
    char log_path[600];
    snprintf(log_path, sizeof log_path, "%s/fake.log", w.env->dir);
    setenv("FAKE_CLAUDE_LOG", log_path, 1);
    setenv("PANOPTICON_AGENT_ID", "review-1", 1);
    result_t r = s_run(&w, "line1\nline2 from stdin",
                       (const char *[]){"-p", "--session-id", SID_A, "argprompt", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    setenv("CLAUDECODE", "1", 1);
    r = s_run(&w, NULL, (const char *[]){"-p", "--bogus", NULL});
    CHECK_INT(r.code, 1);
    s_result_free(&r);

    char *log = testenv_read_file(log_path);
    CHECK_INT(s_count_lines(log), 2);
    json_t *first = s_line(log != NULL ? log : "", 0);
    json_t *argv = json_object_get(first, "argv");
    CHECK_INT(json_array_size(argv), 5);
    CHECK_STR(json_string_value(json_array_get(argv, 4)), "argprompt");
    CHECK_STR(s_str(first, "cwd"), w.work);
    CHECK_STR(s_str(first, "stdin"), "line1\nline2 from stdin");
    json_t *env = json_object_get(first, "env");
    CHECK_STR(s_str(env, "PANOPTICON_AGENT_ID"), "review-1");
    CHECK(json_is_null(json_object_get(env, "CLAUDECODE")));
    json_t *second = s_line(log != NULL ? log : "", 1);
    CHECK_STR(s_str(json_object_get(second, "env"), "CLAUDECODE"), "1");
    json_decref(first);
    json_decref(second);
    free(log);

    /* The stored prompt is the argument, a newline, then stdin. */
    char path[1600];
    s_session_file(&w, SID_A, path, sizeof path);
    char *text = testenv_read_file(path);
    json_t *line = s_line(text != NULL ? text : "", 0);
    CHECK_STR(s_str(line, "prompt"), "argprompt\nline1\nline2 from stdin");
    json_decref(line);
    free(text);
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * Output formats. */

static void test_stream_json_shape(void)
{
    world_t w;
    s_world_open(&w, "fake-stream");
    result_t r = s_run(&w, "hello",
                       (const char *[]){"-p", "--output-format", "stream-json", "--verbose",
                                        "--session-id", SID_A, "--model", "sonnet",
                                        "--permission-mode", "acceptEdits", NULL});
    CHECK_INT(r.code, 0);
    CHECK_STR(r.err, "");
    int lines = s_count_lines(r.out);
    CHECK(lines >= 4);
    json_t *init = s_line(r.out, 0);
    CHECK_STR(s_str(init, "type"), "system");
    CHECK_STR(s_str(init, "subtype"), "init");
    CHECK_STR(s_str(init, "session_id"), SID_A);
    CHECK_STR(s_str(init, "cwd"), w.work);
    CHECK_STR(s_str(init, "model"), "claude-sonnet-5");
    CHECK_STR(s_str(init, "permissionMode"), "acceptEdits");
    CHECK_STR(s_str(init, "claude_code_version"), "2.1.330");
    CHECK(json_array_size(json_object_get(init, "tools")) > 0);
    json_decref(init);

    bool unknown = false, text = false;
    for (int i = 1; i < lines - 1; i++) {
        json_t *ev = s_line(r.out, i);
        const char *type = s_str(ev, "type");
        if (type != NULL && strcmp(type, "rate_limit_event") == 0)
            unknown = true;
        if (type != NULL && strcmp(type, "assistant") == 0)
            text = true;
        json_decref(ev);
    }
    CHECK(unknown);
    CHECK(text);

    json_t *res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "type"), "result");
    CHECK_STR(s_str(res, "subtype"), "success");
    CHECK(json_is_false(json_object_get(res, "is_error")));
    CHECK_STR(s_str(res, "session_id"), SID_A);
    CHECK_STR(s_str(res, "result"), "Done.");
    CHECK(json_is_number(json_object_get(res, "total_cost_usd")));
    CHECK(json_is_integer(json_object_get(res, "num_turns")));
    CHECK(json_is_integer(json_object_get(res, "duration_ms")));
    json_t *usage = json_object_get(res, "usage");
    CHECK_INT(json_integer_value(json_object_get(usage, "input_tokens")), 1000);
    CHECK(json_is_integer(json_object_get(usage, "cache_creation_input_tokens")));
    CHECK(json_is_integer(json_object_get(usage, "cache_read_input_tokens")));
    CHECK(json_is_integer(json_object_get(usage, "output_tokens")));
    json_decref(res);
    /* 2.1.330 key order: the result line does not start with "type". */
    const char *last = r.out + strlen(r.out) - 1;
    while (last > r.out && last[-1] != '\n')
        last--;
    CHECK(strncmp(last, "{\"type\"", 7) != 0);
    s_result_free(&r);
    s_world_close(&w);
}

static void test_json_and_text(void)
{
    world_t w;
    s_world_open(&w, "fake-json");
    setenv("FAKE_CLAUDE_RESULT", "Review complete: 2 issues", 1);
    setenv("FAKE_CLAUDE_INPUT_TOKENS", "150000", 1);
    result_t r = s_run(&w, "x", (const char *[]){"-p", "--output-format", "json", NULL});
    CHECK_INT(r.code, 0);
    json_t *obj = s_json_result(&r);
    CHECK_STR(s_str(obj, "type"), "result");
    CHECK_STR(s_str(obj, "result"), "Review complete: 2 issues");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(obj, "usage"), "input_tokens")),
              150000);
    json_decref(obj);
    s_result_free(&r);

    /* json + --verbose: the real CLI prints an array of every message (docs/agent-cli.md §1). */
    r = s_run(&w, "x", (const char *[]){"-p", "--output-format", "json", "--verbose", NULL});
    CHECK_INT(r.code, 0);
    json_t *all = json_loads(r.out, 0, NULL);
    CHECK(json_is_array(all));
    CHECK_STR(s_str(json_array_get(all, 0), "subtype"), "init");
    CHECK_STR(s_str(json_array_get(all, json_array_size(all) - 1), "type"), "result");
    json_decref(all);
    s_result_free(&r);

    r = s_run(&w, "x", (const char *[]){"-p", NULL});
    CHECK_INT(r.code, 0);
    CHECK_STR(r.out, "Review complete: 2 issues\n");
    s_result_free(&r);
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * Scenarios. */

static result_t s_stream(world_t *w, const char *scenario, const char *const *extra)
{
    setenv("FAKE_CLAUDE_SCENARIO", scenario, 1);
    const char *args[32] = {"-p", "--output-format", "stream-json", "--verbose"};
    int n = 4;
    for (int i = 0; extra[i] != NULL && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    result_t r = s_run(w, "prompt", args);
    unsetenv("FAKE_CLAUDE_SCENARIO");
    return r;
}

static void test_scenarios(void)
{
    world_t w;
    s_world_open(&w, "fake-scenarios");
    result_t r = s_stream(&w, "crash", (const char *[]){NULL});
    CHECK_INT(r.code, 2);
    CHECK(strstr(r.out, "\"result\"") == NULL);
    s_result_free(&r);

    r = s_stream(&w, "auth", (const char *[]){NULL});
    CHECK_INT(r.code, 1);
    json_t *res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "subtype"), "success");
    CHECK(json_is_true(json_object_get(res, "is_error")));
    CHECK_STR(s_str(res, "result"), "Not logged in · Please run /login");
    json_decref(res);
    json_t *assistant = s_line(r.out, -2);
    CHECK_STR(s_str(assistant, "type"), "assistant");
    CHECK_STR(s_str(assistant, "error"), "authentication_failed");
    json_decref(assistant);
    s_result_free(&r);

    r = s_stream(&w, "max_turns", (const char *[]){"--max-turns", "3", NULL});
    CHECK_INT(r.code, 1);
    res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "subtype"), "error_max_turns");
    CHECK(json_is_true(json_object_get(res, "is_error")));
    CHECK(json_object_get(res, "result") == NULL);
    CHECK_STR(json_string_value(json_array_get(json_object_get(res, "errors"), 0)),
              "Reached maximum number of turns (3)");
    json_decref(res);
    s_result_free(&r);
    setenv("FAKE_CLAUDE_SCENARIO", "max_turns", 1);
    r = s_run(&w, "x", (const char *[]){"-p", "--max-turns", "3", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.out, "Error: Reached max turns (3)\n");
    s_result_free(&r);
    unsetenv("FAKE_CLAUDE_SCENARIO");

    r = s_stream(&w, "budget", (const char *[]){"--max-budget-usd", "2", NULL});
    CHECK_INT(r.code, 1);
    res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "subtype"), "error_max_budget_usd");
    CHECK_STR(json_string_value(json_array_get(json_object_get(res, "errors"), 0)),
              "Reached maximum budget ($2)");
    json_decref(res);
    s_result_free(&r);

    r = s_stream(&w, "exec_error", (const char *[]){NULL});
    CHECK_INT(r.code, 1);
    res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "subtype"), "error_during_execution");
    CHECK(json_is_true(json_object_get(res, "is_error")));
    json_decref(res);
    s_result_free(&r);

    r = s_stream(&w, "exit0_on_error", (const char *[]){NULL});
    CHECK_INT(r.code, 0);
    res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "type"), "result");
    CHECK(json_is_true(json_object_get(res, "is_error")));
    json_decref(res);
    s_result_free(&r);

    r = s_stream(&w, "bogus_init_id", (const char *[]){"--session-id", SID_A, NULL});
    CHECK_INT(r.code, 0);
    json_t *init = s_line(r.out, 0);
    res = s_line(r.out, -1);
    const char *init_id = s_str(init, "session_id");
    CHECK(init_id != NULL && strcmp(init_id, SID_A) != 0);
    CHECK_INT(s_session_lines(&w, init_id != NULL ? init_id : "none"), -1);
    CHECK_STR(s_str(res, "session_id"), SID_A);
    CHECK_INT(s_session_lines(&w, SID_A), 1);
    json_decref(init);
    json_decref(res);
    s_result_free(&r);

    r = s_stream(&w, "new_id_on_resume", (const char *[]){"--resume", SID_A, NULL});
    CHECK_INT(r.code, 0);
    res = s_line(r.out, -1);
    const char *new_id = s_str(res, "session_id");
    CHECK(new_id != NULL && strcmp(new_id, SID_A) != 0);
    CHECK_INT(s_session_lines(&w, new_id != NULL ? new_id : "none"), 2);
    CHECK_INT(s_session_lines(&w, SID_A), 1);
    json_decref(res);
    s_result_free(&r);

    r = s_stream(&w, "in_use", (const char *[]){"--resume", SID_A, NULL});
    CHECK_INT(r.code, 1);
    CHECK(strstr(r.err, "is already in use") != NULL);
    s_result_free(&r);
    r = s_stream(&w, "in_use", (const char *[]){"--resume", SID_A, "--fork-session", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    s_world_close(&w);
}

static bool s_file_has_result(void *arg)
{
    char *text = testenv_read_file(arg);
    bool found = text != NULL && strstr(text, "\"type\":\"result\"") != NULL;
    free(text);
    return found;
}

static bool s_file_has_init(void *arg)
{
    char *text = testenv_read_file(arg);
    bool found = text != NULL && strstr(text, "\"subtype\":\"init\"") != NULL;
    free(text);
    return found;
}

static void test_hang_and_delay(void)
{
    world_t w;
    s_world_open(&w, "fake-hang");
    char out[600], err[600];
    const char *args[] = {"-p", "--output-format", "stream-json", "--verbose", NULL};

    setenv("FAKE_CLAUDE_SCENARIO", "hang", 1);
    pid_t pid = s_start(&w, "x", args, out, err, sizeof out);
    CHECK_INT(testenv_wait_exit(pid, 300), -1);
    char *text = testenv_read_file(out);
    CHECK_STR(text, "");
    free(text);
    testenv_kill_group(pid);

    setenv("FAKE_CLAUDE_SCENARIO", "hang_after_result", 1);
    pid = s_start(&w, "x", args, out, err, sizeof out);
    CHECK(testenv_wait_until(s_file_has_result, out, 5000));
    CHECK_INT(testenv_wait_exit(pid, 200), -1);
    testenv_kill_group(pid);
    unsetenv("FAKE_CLAUDE_SCENARIO");

    /* Events arrive one by one: init is visible well before the result. */
    setenv("FAKE_CLAUDE_DELAY_MS", "250", 1);
    pid = s_start(&w, "x", args, out, err, sizeof out);
    CHECK(testenv_wait_until(s_file_has_init, out, 5000));
    CHECK(!s_file_has_result(out));
    CHECK_INT(testenv_wait_exit(pid, 5000), 0);
    CHECK(s_file_has_result(out));
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * Actions. */

static const char *const s_conflict =
    "top\n"
    "<<<<<<< HEAD\n"
    "ours line\n"
    "=======\n"
    "theirs line\n"
    ">>>>>>> feature\n"
    "middle\n"
    "<<<<<<< HEAD\n"
    "ours 2\n"
    "||||||| base\n"
    "base 2\n"
    "=======\n"
    "theirs 2\n"
    ">>>>>>> feature\n"
    "bottom\n";

static char *s_read_work(const world_t *w, const char *rel)
{
    char path[800];
    s_path(w, rel, path, sizeof path);
    return testenv_read_file(path);
}

static void s_write_work(const world_t *w, const char *rel, const char *text)
{
    char path[800];
    s_path(w, rel, path, sizeof path);
    CHECK(testenv_write_file(path, text) == 0);
}

/* Runs the action script with Bash granted (--allowedTools Bash), unless `asking`: then
 * in the default permission mode, which asks before a command. */
static result_t s_act_as(world_t *w, const char *script, bool asking)
{
    char path[600];
    snprintf(path, sizeof path, "%s/actions%d.txt", w->env->dir, w->runs + 1);
    CHECK(testenv_write_file(path, script) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", path, 1);
    result_t r = s_run(w, "do it",
                       asking ? (const char *[]){"-p", "--output-format", "stream-json",
                                                 "--verbose", NULL}
                              : (const char *[]){"-p", "--output-format", "stream-json",
                                                 "--verbose", "--allowedTools",
                                                 "Read,Bash(git *)", "Bash", NULL});
    unsetenv("FAKE_CLAUDE_ACTIONS");
    return r;
}

static result_t s_act(world_t *w, const char *script)
{
    return s_act_as(w, script, false);
}

/* A command the permission mode would ask about is refused, as by the real CLI with
 * nobody to ask; the run goes on. */
static void test_run_needs_permission(void)
{
    world_t w;
    s_world_open(&w, "fake-permission");
    result_t r = s_act_as(&w, "run touch ran.txt\nsay done\n", true);
    CHECK_INT(r.code, 0);
    char *text = s_read_work(&w, "ran.txt");
    CHECK(text == NULL);
    free(text);
    CHECK(strstr(r.out, "This command requires approval") != NULL);
    json_t *res = s_line(r.out, -1);
    CHECK_STR(s_str(res, "result"), "done");
    json_decref(res);
    s_result_free(&r);
    s_world_close(&w);
}

static void test_actions(void)
{
    world_t w;
    s_world_open(&w, "fake-actions");
    s_write_work(&w, "a.txt", s_conflict);
    s_write_work(&w, "b.txt", s_conflict);
    s_write_work(&w, "c.txt", s_conflict);
    s_write_work(&w, "sub/d.txt", s_conflict);
    s_write_work(&w, ".git/MERGE_MSG", s_conflict);

    result_t r = s_act(&w, "# edit things\n"
                           "write out/new.txt hello\\nworld\\n\n"
                           "append out/new.txt more\\n\n"
                           "resolve a.txt ours\n"
                           "resolve b.txt theirs\n"
                           "resolve c.txt both\n"
                           "\n"
                           "run sh -c exit\n"
                           "run false\n"
                           "sleep 5\n"
                           "say MERGE_RESULT: SUCCESS\n"
                           "say all good\n");
    CHECK_INT(r.code, 0);
    char *text = s_read_work(&w, "out/new.txt");
    CHECK_STR(text, "hello\nworld\nmore\n");
    free(text);
    text = s_read_work(&w, "a.txt");
    CHECK_STR(text, "top\nours line\nmiddle\nours 2\nbottom\n");
    free(text);
    text = s_read_work(&w, "b.txt");
    CHECK_STR(text, "top\ntheirs line\nmiddle\ntheirs 2\nbottom\n");
    free(text);
    text = s_read_work(&w, "c.txt");
    CHECK_STR(text, "top\nours line\ntheirs line\nmiddle\nours 2\ntheirs 2\nbottom\n");
    free(text);

    /* 7 tool steps: each an assistant tool_use then a user tool_result. */
    int tool_uses = 0, tool_results = 0, failed_results = 0;
    int lines = s_count_lines(r.out);
    for (int i = 0; i < lines; i++) {
        json_t *ev = s_line(r.out, i);
        const char *type = s_str(ev, "type");
        json_t *block = json_array_get(json_object_get(json_object_get(ev, "message"), "content"), 0);
        if (type != NULL && strcmp(type, "assistant") == 0 &&
            strcmp(s_str(block, "type"), "tool_use") == 0)
            tool_uses++;
        if (type != NULL && strcmp(type, "user") == 0) {
            tool_results++;
            if (json_is_true(json_object_get(block, "is_error"))) {
                failed_results++;
                CHECK_INT(json_integer_value(json_object_get(
                              json_object_get(ev, "tool_use_result"), "exit_code")),
                          1);
            }
        }
        json_decref(ev);
    }
    CHECK_INT(tool_uses, 7);
    CHECK_INT(tool_results, 7);
    CHECK_INT(failed_results, 1);
    json_t *res = s_line(r.out, -1);
    CHECK(json_is_false(json_object_get(res, "is_error")));
    CHECK_STR(s_str(res, "result"), "MERGE_RESULT: SUCCESS\nall good");
    CHECK_INT(json_integer_value(json_object_get(res, "num_turns")), 8);
    json_decref(res);
    s_result_free(&r);

    /* resolve-all: every file with markers under cwd except .git. */
    s_write_work(&w, "a.txt", s_conflict);
    r = s_act(&w, "resolve-all theirs\n");
    CHECK_INT(r.code, 0);
    text = s_read_work(&w, "a.txt");
    CHECK_STR(text, "top\ntheirs line\nmiddle\ntheirs 2\nbottom\n");
    free(text);
    text = s_read_work(&w, "sub/d.txt");
    CHECK_STR(text, "top\ntheirs line\nmiddle\ntheirs 2\nbottom\n");
    free(text);
    text = s_read_work(&w, ".git/MERGE_MSG");
    CHECK_STR(text, s_conflict);
    free(text);
    s_result_free(&r);

    /* Errors: missing file, bad rule, unterminated block, unknown action. */
    const char *const bad[] = {"resolve missing.txt ours\n", "resolve-all mine\n",
                               "write broken.txt <<<<<<< HEAD\\nx\\n\nresolve broken.txt ours\n",
                               "frobnicate now\n"};
    const char *const expect[] = {"missing.txt", "mine", "not terminated", "frobnicate"};
    for (int i = 0; i < 4; i++) {
        r = s_act(&w, bad[i]);
        CHECK_INT(r.code, 1);
        res = s_line(r.out, -1);
        CHECK_STR(s_str(res, "subtype"), "error_during_execution");
        CHECK(json_is_true(json_object_get(res, "is_error")));
        const char *why = json_string_value(json_array_get(json_object_get(res, "errors"), 0));
        CHECK(why != NULL && strstr(why, expect[i]) != NULL);
        if (why == NULL || strstr(why, expect[i]) == NULL)
            fprintf(stderr, "case %d: errors[0] = %s\n", i, why ? why : "(null)");
        json_decref(res);
        s_result_free(&r);
    }
    s_world_close(&w);
}

int main(void)
{
    test_version_and_unknown_flag();
    test_validation_order();
    test_root_bypass();
    test_sessions();
    test_fork();
    test_prompt_and_log();
    test_stream_json_shape();
    test_json_and_text();
    test_scenarios();
    test_hang_and_delay();
    test_actions();
    test_run_needs_permission();
    return check_exit_code("test_fake_claude");
}
