/* test_fake_codex_gemini: the fake Codex and Gemini CLIs (tests/fake_agent) keep their
 * contracts (docs/agent-codex.md, docs/agent-gemini.md).
 *
 * Every case runs the built `fake-codex` / `fake-gemini` in a fresh temporary directory with
 * its own HOME (and CODEX_HOME), with the argv the agent runner spawns, stdin from a file,
 * and checks exit code, stdout events, stderr texts and the session files on disk. */
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

#define GID_A "11111111-2222-4333-8444-555555555555"
#define GID_B "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
#define CODEX_UNKNOWN "0199aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"

/* One test's world: a temp dir with work/ (the cwd), home/ ($HOME) and codex/ ($CODEX_HOME). */
typedef struct {
    testenv_t *env;
    char work[600];
    char home[600];
    char codex_home[600];
    int runs;
} world_t;

typedef struct {
    int code;  /* exit code, 128+signal, or -1 on timeout */
    char *out; /* stdout */
    char *err; /* stderr */
} result_t;

static const char *const s_knobs[] = {
    "FAKE_CODEX_SCENARIO",  "FAKE_CODEX_RESULT",         "FAKE_CODEX_DELAY_MS",
    "FAKE_CODEX_LOG",       "FAKE_CODEX_ACTIONS",        "FAKE_CODEX_INPUT_TOKENS",
    "FAKE_CODEX_OUTPUT_TOKENS", "FAKE_GEMINI_SCENARIO",  "FAKE_GEMINI_RESULT",
    "FAKE_GEMINI_DELAY_MS", "FAKE_GEMINI_LOG",           "FAKE_GEMINI_ACTIONS",
    "FAKE_GEMINI_INPUT_TOKENS", "FAKE_GEMINI_OUTPUT_TOKENS", "GEMINI_CLI_HOME",
    "GEMINI_CLI_TRUST_WORKSPACE", "GEMINI_MODEL",        "CI",
    "GITHUB_ACTIONS",       NULL};

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
    snprintf(w->home, sizeof w->home, "%s/home", real);
    snprintf(w->codex_home, sizeof w->codex_home, "%s/codex", real);
    mkdir(w->work, 0755);
    mkdir(w->home, 0755);
    mkdir(w->codex_home, 0755);
    setenv("HOME", w->home, 1);
    setenv("CODEX_HOME", w->codex_home, 1);
    for (int k = 0; s_knobs[k] != NULL; k++)
        unsetenv(s_knobs[k]);
}

static void s_world_close(world_t *w)
{
    testenv_destroy(&w->env);
}

/* Starts `program` in w->work with `args` (NULL-terminated, without argv[0]); stdin is
 * `stdin_text` (NULL: /dev/null); stdout/stderr go to files named after the run number. */
static pid_t s_start(world_t *w, const char *program, const char *stdin_text,
                     const char *const *args, char *out_path, char *err_path, size_t path_size)
{
    w->runs++;
    char in_path[700];
    snprintf(in_path, sizeof in_path, "%s/run%d.in", w->env->dir, w->runs);
    snprintf(out_path, path_size, "%s/run%d.out", w->env->dir, w->runs);
    snprintf(err_path, path_size, "%s/run%d.err", w->env->dir, w->runs);
    CHECK(testenv_write_file(in_path, stdin_text != NULL ? stdin_text : "") == 0);
    const char *argv[64];
    int argc = 0;
    argv[argc++] = testenv_bin(program);
    for (int i = 0; args[i] != NULL && argc < 63; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;
    return testenv_start_io(w->work, argv, stdin_text != NULL ? in_path : NULL, out_path,
                            err_path);
}

static result_t s_run_timeout(world_t *w, const char *program, const char *stdin_text,
                              const char *const *args, int timeout_ms)
{
    char out_path[700], err_path[700];
    pid_t pid = s_start(w, program, stdin_text, args, out_path, err_path, sizeof out_path);
    result_t r = {testenv_wait_exit(pid, timeout_ms), NULL, NULL};
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

static result_t s_run(world_t *w, const char *program, const char *stdin_text,
                      const char *const *args)
{
    return s_run_timeout(w, program, stdin_text, args, 10000);
}

static void s_result_free(result_t *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

static int s_count_lines(const char *text)
{
    int count = 0;
    for (const char *p = text; p != NULL && *p; p++)
        if (*p == '\n')
            count++;
    return count;
}

/* Line `index` of `text` parsed as JSON (negative: from the end), or NULL. Caller decrefs. */
static json_t *s_line(const char *text, int index)
{
    int count = s_count_lines(text);
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

static const char *s_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static json_int_t s_int(const json_t *obj, const char *key)
{
    return json_integer_value(json_object_get(obj, key));
}

/* The "type" of each line of `text`, joined with spaces ("item.started:command_execution"
 * for item events), so a test states a whole event sequence in one string. */
static char *s_types(const char *text)
{
    size_t size = 4096, used = 0;
    char *out = calloc(1, size);
    int lines = s_count_lines(text);
    for (int i = 0; i < lines && out != NULL; i++) {
        json_t *event = s_line(text, i);
        const char *type = s_str(event, "type");
        const char *item = s_str(json_object_get(event, "item"), "type");
        const char *role = s_str(event, "role");
        used += (size_t)snprintf(out + used, size - used, "%s%s%s%s", i ? " " : "",
                                 type ? type : "?", item || role ? ":" : "",
                                 item ? item : role ? role : "");
        json_decref(event);
    }
    return out;
}

/* `text` starts with `prefix`. */
static bool s_starts_with(const char *text, const char *prefix)
{
    return text != NULL && strncmp(text, prefix, strlen(prefix)) == 0;
}

#define CHECK_TYPES(text, expected)                                                          \
    do {                                                                                     \
        char *types_ = s_types(text);                                                        \
        CHECK_STR(types_, expected);                                                         \
        free(types_);                                                                        \
    } while (0)

/* Finds, under `dir`, a file whose name ends with `suffix` (the first one met). */
static bool s_find_file(const char *dir, const char *suffix, char *out, size_t size)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    bool found = false;
    struct dirent *entry;
    while (!found && (entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        size_t len = strlen(entry->d_name), slen = strlen(suffix);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            found = s_find_file(path, suffix, out, size);
        else if (len >= slen && strcmp(entry->d_name + len - slen, suffix) == 0) {
            snprintf(out, size, "%s", path);
            found = true;
        }
    }
    closedir(d);
    return found;
}

/* How many files under `dir` end with `suffix`. */
static int s_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        size_t len = strlen(entry->d_name), slen = strlen(suffix);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            count += s_count_files(path, suffix);
        else if (len >= slen && strcmp(entry->d_name + len - slen, suffix) == 0)
            count++;
    }
    closedir(d);
    return count;
}

/* Lines of file `path` that contain `needle`, or -1 when it cannot be read. */
static int s_grep_count(const char *path, const char *needle)
{
    char *text = testenv_read_file(path);
    if (text == NULL)
        return -1;
    int count = 0;
    for (char *line = text, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strstr(line, needle) != NULL)
            count++;
    }
    free(text);
    return count;
}

static void s_write_work(const world_t *w, const char *rel, const char *text)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", w->work, rel);
    CHECK(testenv_write_file(path, text) == 0);
}

static char *s_read_work(const world_t *w, const char *rel)
{
    char path[800];
    snprintf(path, sizeof path, "%s/%s", w->work, rel);
    return testenv_read_file(path);
}

/* Writes an action script under the temp dir and points `knob` at it. */
static void s_actions(const world_t *w, const char *knob, const char *script)
{
    char path[700];
    snprintf(path, sizeof path, "%s/actions.txt", w->env->dir);
    CHECK(testenv_write_file(path, script) == 0);
    setenv(knob, path, 1);
}

/* ---------------------------------------------------------------------------------------
 * fake-codex */

/* The argv the runner spawns for a new thread, a resume and a fork (docs/agent-codex.md §7). */
#define CODEX_NEW(...)                                                                       \
    (const char *[])                                                                         \
    {                                                                                        \
        "exec", "--json", "--skip-git-repo-check", "-m", "gpt-6.1-sol", "-c",                \
            "sandbox_mode=\"workspace-write\"", "-c", "approval_policy=\"never\"", __VA_ARGS__ \
    }
#define CODEX_CONTINUE(verb, id)                                                             \
    (const char *[])                                                                         \
    {                                                                                        \
        "exec", verb, "--json", "--skip-git-repo-check", "-m", "gpt-6.1-sol", "-c",          \
            "sandbox_mode=\"workspace-write\"", "-c", "approval_policy=\"never\"", id, "-",  \
            NULL                                                                             \
    }

static void test_codex_flags(void)
{
    world_t w;
    s_world_open(&w, "codex-flags");
    result_t r = s_run(&w, "fake-codex", NULL, (const char *[]){"--version", NULL});
    CHECK_INT(r.code, 0);
    CHECK_STR(r.out, "codex-cli 0.169.0\n");
    s_result_free(&r);

    /* clap: exit 2, the tip, the usage lines */
    r = s_run(&w, "fake-codex", "hi", (const char *[]){"exec", "--json", "--bogus-flag", "-", NULL});
    CHECK_INT(r.code, 2);
    CHECK_STR(r.err, "error: unexpected argument '--bogus-flag' found\n\n"
                     "  tip: to pass '--bogus-flag' as a value, use '-- --bogus-flag'\n\n"
                     "Usage: codex exec [OPTIONS] [PROMPT]\n"
                     "       codex exec [OPTIONS] <COMMAND> [ARGS]\n\n"
                     "For more information, try '--help'.\n");
    CHECK_STR(r.out, "");
    s_result_free(&r);

    r = s_run(&w, "fake-codex", "hi", (const char *[]){"exec", "--jsn", "-", NULL});
    CHECK_INT(r.code, 2);
    CHECK(strstr(r.err, "  tip: a similar argument exists: '--json'\n") != NULL);
    s_result_free(&r);

    /* resume has no --add-dir (nor --sandbox, --cd): the usage line lists what was used */
    r = s_run(&w, "fake-codex", "hi",
              (const char *[]){"exec", "resume", "--json", "-m", "m", "--add-dir", "/tmp",
                               CODEX_UNKNOWN, "-", NULL});
    CHECK_INT(r.code, 2);
    CHECK_STR(r.err, "error: unexpected argument '--add-dir' found\n\n"
                     "  tip: to pass '--add-dir' as a value, use '-- --add-dir'\n\n"
                     "Usage: codex exec resume --json --model <MODEL> [SESSION_ID] [PROMPT]\n\n"
                     "For more information, try '--help'.\n");
    s_result_free(&r);

    r = s_run(&w, "fake-codex", "hi", (const char *[]){"exec", "--sandbox", "bogus", "-", NULL});
    CHECK_INT(r.code, 2);
    CHECK_STR(r.err, "error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'\n"
                     "  [possible values: read-only, workspace-write, danger-full-access]\n\n"
                     "For more information, try '--help'.\n");
    s_result_free(&r);

    r = s_run(&w, "fake-codex", "hi",
              (const char *[]){"exec", "--skip-git-repo-check", "-c", "sandbox_mode=bogus", "-",
                               NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error loading config.toml: unknown variant `bogus`, expected one of "
                     "`read-only`, `workspace-write`, `danger-full-access`\nin `sandbox_mode`\n\n");
    s_result_free(&r);

    /* the prompt is read before the git check; both fail with exit 1 */
    r = s_run(&w, "fake-codex", "", (const char *[]){"exec", "--skip-git-repo-check", "-", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "No prompt provided via stdin.\n");
    s_result_free(&r);
    r = s_run(&w, "fake-codex", "hi", (const char *[]){"exec", "--json", "-", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Not inside a trusted directory and --skip-git-repo-check was not specified.\n");
    s_result_free(&r);
    s_world_close(&w);
}

static void test_codex_success(void)
{
    world_t w;
    s_world_open(&w, "codex-success");
    char log[700];
    snprintf(log, sizeof log, "%s/codex.log", w.env->dir);
    setenv("FAKE_CODEX_LOG", log, 1);
    setenv("FAKE_CODEX_INPUT_TOKENS", "100", 1);
    setenv("FAKE_CODEX_OUTPUT_TOKENS", "10", 1);
    s_write_work(&w, "old.txt", "old\n");
    s_actions(&w, "FAKE_CODEX_ACTIONS",
              "write new.txt hello\\n\nappend old.txt more\\n\nrun echo hi\nrun false\n"
              "say All done.\n");
    result_t r = s_run(&w, "fake-codex", "the task\n",
                       CODEX_NEW("--add-dir", "/tmp", "-", NULL));
    CHECK_INT(r.code, 0);
    CHECK_TYPES(r.out, "thread.started turn.started item.started:file_change "
                       "item.completed:file_change item.started:file_change "
                       "item.completed:file_change item.started:command_execution "
                       "item.completed:command_execution item.started:command_execution "
                       "item.completed:command_execution item.completed:reasoning "
                       "item.completed:agent_message turn.completed");
    json_t *started = s_line(r.out, 0);
    char thread[64];
    snprintf(thread, sizeof thread, "%s", s_str(started, "thread_id"));
    CHECK_INT(strlen(thread), 36);
    CHECK(thread[14] == '7'); /* a UUIDv7, like the real thread ids */
    json_decref(started);

    json_t *add = s_line(r.out, 3);
    json_t *item = json_object_get(add, "item");
    CHECK_STR(s_str(item, "id"), "item_0");
    CHECK_STR(s_str(item, "status"), "completed");
    json_t *change = json_array_get(json_object_get(item, "changes"), 0);
    char expected[800];
    snprintf(expected, sizeof expected, "%s/new.txt", w.work);
    CHECK_STR(s_str(change, "path"), expected);
    CHECK_STR(s_str(change, "kind"), "add");
    json_decref(add);
    json_t *update = s_line(r.out, 5);
    CHECK_STR(s_str(json_array_get(json_object_get(json_object_get(update, "item"), "changes"), 0),
                    "kind"),
              "update");
    json_decref(update);

    json_t *ran = s_line(r.out, 6);
    item = json_object_get(ran, "item");
    CHECK_STR(s_str(item, "command"), "/bin/bash -lc 'echo hi'");
    CHECK_STR(s_str(item, "status"), "in_progress");
    CHECK(json_is_null(json_object_get(item, "exit_code")));
    json_decref(ran);
    ran = s_line(r.out, 7);
    item = json_object_get(ran, "item");
    CHECK_STR(s_str(item, "aggregated_output"), "hi\n");
    CHECK_INT(s_int(item, "exit_code"), 0);
    CHECK_STR(s_str(item, "status"), "completed");
    json_decref(ran);
    json_t *failed = s_line(r.out, 9);
    item = json_object_get(failed, "item");
    CHECK_INT(s_int(item, "exit_code"), 1);
    CHECK_STR(s_str(item, "status"), "failed");
    CHECK_STR(s_str(item, "aggregated_output"), "");
    json_decref(failed);

    json_t *message = s_line(r.out, -2);
    CHECK_STR(s_str(json_object_get(message, "item"), "text"), "All done.");
    json_decref(message);
    /* five model calls (four actions and the answer) of 100/10 tokens, 100 of them cached */
    json_t *done = s_line(r.out, -1);
    json_t *usage = json_object_get(done, "usage");
    CHECK_INT(s_int(usage, "input_tokens"), 500);
    CHECK_INT(s_int(usage, "cached_input_tokens"), 500);
    CHECK_INT(s_int(usage, "output_tokens"), 50);
    CHECK(json_object_get(usage, "reasoning_output_tokens") != NULL);
    CHECK(json_object_get(done, "total_cost_usd") == NULL); /* codex reports no cost */
    json_decref(done);
    s_result_free(&r);

    char *text = s_read_work(&w, "new.txt");
    CHECK_STR(text, "hello\n");
    free(text);

    /* the rollout: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl */
    char suffix[80], rollout[1400], sessions[700];
    snprintf(suffix, sizeof suffix, "-%s.jsonl", thread);
    snprintf(sessions, sizeof sessions, "%s/sessions", w.codex_home);
    CHECK(s_find_file(sessions, suffix, rollout, sizeof rollout));
    CHECK(strstr(rollout, "/rollout-") != NULL);
    CHECK_INT(s_grep_count(rollout, "\"session_meta\""), 1);
    CHECK_INT(s_grep_count(rollout, "the task"), 1);

    /* the log: argv, cwd and stdin of the run */
    char *logged = testenv_read_file(log);
    json_t *entry = s_line(logged, 0);
    CHECK_STR(s_str(entry, "cwd"), w.work);
    CHECK_STR(s_str(entry, "stdin"), "the task\n");
    CHECK_STR(json_string_value(json_array_get(json_object_get(entry, "argv"), 1)), "exec");
    CHECK_STR(s_str(json_object_get(entry, "env"), "CODEX_HOME"), w.codex_home);
    json_decref(entry);
    free(logged);
    s_world_close(&w);
}

static void test_codex_resume_fork(void)
{
    world_t w;
    s_world_open(&w, "codex-resume");
    setenv("FAKE_CODEX_INPUT_TOKENS", "100", 1);
    setenv("FAKE_CODEX_OUTPUT_TOKENS", "10", 1);
    result_t r = s_run(&w, "fake-codex", "first", CODEX_NEW("-", NULL));
    CHECK_INT(r.code, 0);
    json_t *started = s_line(r.out, 0);
    char thread[64];
    snprintf(thread, sizeof thread, "%s", s_str(started, "thread_id"));
    json_decref(started);
    s_result_free(&r);
    char suffix[80], rollout[1400], sessions[700];
    snprintf(suffix, sizeof suffix, "-%s.jsonl", thread);
    snprintf(sessions, sizeof sessions, "%s/sessions", w.codex_home);
    CHECK(s_find_file(sessions, suffix, rollout, sizeof rollout));

    /* resume continues the same thread and file; usage is the thread's running total */
    r = s_run(&w, "fake-codex", "second", CODEX_CONTINUE("resume", thread));
    CHECK_INT(r.code, 0);
    CHECK_TYPES(r.out, "thread.started turn.started item.completed:reasoning "
                       "item.completed:agent_message turn.completed");
    started = s_line(r.out, 0);
    CHECK_STR(s_str(started, "thread_id"), thread);
    json_decref(started);
    json_t *done = s_line(r.out, -1);
    CHECK_INT(s_int(json_object_get(done, "usage"), "input_tokens"), 200);
    json_decref(done);
    s_result_free(&r);
    CHECK_INT(s_count_files(sessions, ".jsonl"), 1);
    CHECK_INT(s_grep_count(rollout, "\"role\":\"user\""), 2);

    /* fork: a new thread and file with the history (and totals) copied; the parent stays */
    r = s_run(&w, "fake-codex", "third", CODEX_CONTINUE("fork", thread));
    CHECK_INT(r.code, 0);
    started = s_line(r.out, 0);
    char forked[64];
    snprintf(forked, sizeof forked, "%s", s_str(started, "thread_id"));
    json_decref(started);
    CHECK(strcmp(forked, thread) != 0);
    done = s_line(r.out, -1);
    CHECK_INT(s_int(json_object_get(done, "usage"), "input_tokens"), 300);
    json_decref(done);
    s_result_free(&r);
    CHECK_INT(s_count_files(sessions, ".jsonl"), 2);
    CHECK_INT(s_grep_count(rollout, "\"role\":\"user\""), 2);
    char fork_file[1400];
    snprintf(suffix, sizeof suffix, "-%s.jsonl", forked);
    CHECK(s_find_file(sessions, suffix, fork_file, sizeof fork_file));
    CHECK_INT(s_grep_count(fork_file, "\"role\":\"user\""), 3);
    CHECK_INT(s_grep_count(fork_file, "second"), 1);

    /* an unknown id: the real CLI's error, exit 1, nothing on stdout */
    r = s_run(&w, "fake-codex", "x", CODEX_CONTINUE("resume", CODEX_UNKNOWN));
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: thread/resume: thread/resume failed: no rollout found for thread id "
                     CODEX_UNKNOWN " (code -32600)\n");
    CHECK_STR(r.out, "");
    s_result_free(&r);
    r = s_run(&w, "fake-codex", "x", CODEX_CONTINUE("fork", CODEX_UNKNOWN));
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Error: thread/fork: thread/fork failed: no rollout found for thread id "
                     CODEX_UNKNOWN " (code -32600)\n");
    s_result_free(&r);

    /* a resume "id" that is not a UUID is a thread name; an unknown name starts a new thread */
    r = s_run(&w, "fake-codex", "x", CODEX_CONTINUE("resume", "no-such-name"));
    CHECK_INT(r.code, 0);
    started = s_line(r.out, 0);
    CHECK(strcmp(s_str(started, "thread_id"), thread) != 0);
    json_decref(started);
    s_result_free(&r);
    CHECK_INT(s_count_files(sessions, ".jsonl"), 3);

    /* --ephemeral writes no rollout */
    r = s_run(&w, "fake-codex", "x", CODEX_NEW("--ephemeral", "-", NULL));
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    CHECK_INT(s_count_files(sessions, ".jsonl"), 3);
    s_world_close(&w);
}

static void test_codex_scenarios(void)
{
    world_t w;
    s_world_open(&w, "codex-scenarios");
    setenv("FAKE_CODEX_SCENARIO", "auth", 1);
    result_t r = s_run(&w, "fake-codex", "x", CODEX_NEW("-", NULL));
    CHECK_INT(r.code, 1);
    CHECK_TYPES(r.out, "thread.started turn.started error error error error error error "
                       "turn.failed");
    json_t *failed = s_line(r.out, -1);
    const char *why = s_str(json_object_get(failed, "error"), "message");
    CHECK(why != NULL && strstr(why, "unexpected status 401 Unauthorized") != NULL);
    json_decref(failed);
    s_result_free(&r);
    r = s_run(&w, "fake-codex", NULL, (const char *[]){"login", "status", NULL});
    CHECK_INT(r.code, 1);
    CHECK_STR(r.err, "Not logged in\n");
    s_result_free(&r);

    setenv("FAKE_CODEX_SCENARIO", "turn_failed", 1);
    r = s_run(&w, "fake-codex", "x", CODEX_NEW("-", NULL));
    CHECK_INT(r.code, 1);
    CHECK_TYPES(r.out, "thread.started turn.started error turn.failed");
    s_result_free(&r);

    setenv("FAKE_CODEX_SCENARIO", "crash", 1);
    r = s_run(&w, "fake-codex", "x", CODEX_NEW("-", NULL));
    CHECK_INT(r.code, 2);
    CHECK_TYPES(r.out, "thread.started turn.started");
    s_result_free(&r);

    setenv("FAKE_CODEX_SCENARIO", "hang", 1);
    r = s_run_timeout(&w, "fake-codex", "x", CODEX_NEW("-", NULL), 300);
    CHECK_INT(r.code, -1);
    CHECK_STR(r.out, "");
    s_result_free(&r);

    /* a failing action ends the turn with the CLI's failure events */
    unsetenv("FAKE_CODEX_SCENARIO");
    s_actions(&w, "FAKE_CODEX_ACTIONS", "resolve missing.txt ours\n");
    r = s_run(&w, "fake-codex", "x", CODEX_NEW("-", NULL));
    CHECK_INT(r.code, 1);
    CHECK_TYPES(r.out, "thread.started turn.started item.started:file_change "
                       "item.completed:file_change error turn.failed");
    s_result_free(&r);
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * fake-gemini */

/* The argv the runner spawns (docs/agent-gemini.md §7): --session-id to start, --resume. */
#define GEMINI_RUN(session_flag, id)                                                         \
    (const char *[])                                                                         \
    {                                                                                        \
        "-o", "stream-json", "-m", "gemini-2.5-pro", "--approval-mode", "yolo", "--skip-trust", \
            "--include-directories", "/tmp", session_flag, id, "-p", "Do the task on stdin.", \
            NULL                                                                             \
    }

/* The chat file of `id` under $HOME/.gemini/tmp/work/chats (the project is named "work"). */
static bool s_chat_file(const world_t *w, const char *id, char *out, size_t size)
{
    char dir[800], suffix[32];
    snprintf(dir, sizeof dir, "%s/.gemini/tmp/work/chats", w->home);
    snprintf(suffix, sizeof suffix, "-%.8s.jsonl", id);
    return s_find_file(dir, suffix, out, size);
}

static void test_gemini_flags(void)
{
    world_t w;
    s_world_open(&w, "gemini-flags");
    result_t r = s_run(&w, "fake-gemini", NULL, (const char *[]){"--version", NULL});
    CHECK_INT(r.code, 0);
    CHECK_STR(r.out, "0.61.0\n");
    s_result_free(&r);

    /* yargs: the message, then the whole help, on stderr; exit 1 */
    r = s_run(&w, "fake-gemini", "x", (const char *[]){"--bogus-flag", "-p", "hi", NULL});
    CHECK_INT(r.code, 1);
    CHECK(s_starts_with(r.err, "Unknown arguments: bogus-flag, bogusFlag\nUsage: gemini [options] "
                               "[command]\n"));
    CHECK(strstr(r.err, "  -h, --help                      Show help  [boolean]\n") != NULL);
    CHECK_STR(r.out, "");
    s_result_free(&r);

    r = s_run(&w, "fake-gemini", "x", (const char *[]){"-o", "xml", "-p", "hi", NULL});
    CHECK_INT(r.code, 1);
    CHECK(s_starts_with(r.err, "Invalid values:\n  Argument: output-format, Given: \"xml\", "
                               "Choices: \"text\", \"json\", \"stream-json\"\nUsage:"));
    s_result_free(&r);

    r = s_run(&w, "fake-gemini", "x",
              (const char *[]){"--resume", "latest", "--session-id", "abc", "-p", "hi", NULL});
    CHECK_INT(r.code, 1);
    CHECK(s_starts_with(r.err, "The flags --resume, --session-id, and --session-file are "
                               "mutually exclusive. Please provide only one.\nUsage:"));
    s_result_free(&r);

    /* without --skip-trust a headless run in an untrusted folder stops with 55 */
    r = s_run(&w, "fake-gemini", "x",
              (const char *[]){"-o", "stream-json", "--approval-mode", "yolo", "-p", "hi", NULL});
    CHECK_INT(r.code, 55);
    CHECK(strstr(r.err, "Approval mode overridden to \"default\" because the current folder is "
                        "not trusted.\n") != NULL);
    CHECK(strstr(r.err, "Gemini CLI is not running in a trusted directory.") != NULL);
    CHECK_STR(r.out, "");
    s_result_free(&r);
    setenv("GEMINI_CLI_TRUST_WORKSPACE", "true", 1);
    r = s_run(&w, "fake-gemini", "x", (const char *[]){"-o", "stream-json", "-p", "hi", NULL});
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    s_world_close(&w);
}

static void test_gemini_success(void)
{
    world_t w;
    s_world_open(&w, "gemini-success");
    char log[700];
    snprintf(log, sizeof log, "%s/gemini.log", w.env->dir);
    setenv("FAKE_GEMINI_LOG", log, 1);
    setenv("FAKE_GEMINI_INPUT_TOKENS", "100", 1);
    setenv("FAKE_GEMINI_OUTPUT_TOKENS", "10", 1);
    s_actions(&w, "FAKE_GEMINI_ACTIONS", "write new.txt hello\\n\nrun echo hi\nsay All done.\n");
    result_t r = s_run(&w, "fake-gemini", "the task\n", GEMINI_RUN("--session-id", GID_A));
    CHECK_INT(r.code, 0);
    CHECK_TYPES(r.out, "init message:user tool_use tool_result tool_use tool_result "
                       "message:assistant message:assistant result");
    json_t *init = s_line(r.out, 0);
    CHECK_STR(s_str(init, "session_id"), GID_A);
    CHECK_STR(s_str(init, "model"), "gemini-2.5-pro");
    CHECK(s_str(init, "timestamp") != NULL);
    json_decref(init);
    /* stdin first, a blank line, then the -p text */
    json_t *user = s_line(r.out, 1);
    CHECK_STR(s_str(user, "content"), "the task\n\n\nDo the task on stdin.");
    json_decref(user);

    json_t *use = s_line(r.out, 2);
    CHECK_STR(s_str(use, "tool_name"), "write_file");
    CHECK_STR(s_str(json_object_get(use, "parameters"), "file_path"), "new.txt");
    json_t *result = s_line(r.out, 3);
    CHECK_STR(s_str(result, "tool_id"), s_str(use, "tool_id"));
    CHECK_STR(s_str(result, "status"), "success");
    json_decref(use);
    json_decref(result);
    use = s_line(r.out, 4);
    CHECK_STR(s_str(use, "tool_name"), "run_shell_command");
    CHECK_STR(s_str(json_object_get(use, "parameters"), "command"), "echo hi");
    json_decref(use);
    result = s_line(r.out, 5);
    CHECK_STR(s_str(result, "output"), "hi");
    json_decref(result);

    /* the answer comes as deltas to concatenate */
    json_t *first = s_line(r.out, 6), *second = s_line(r.out, 7);
    CHECK(json_is_true(json_object_get(first, "delta")));
    char answer[256];
    snprintf(answer, sizeof answer, "%s%s", s_str(first, "content"), s_str(second, "content"));
    CHECK_STR(answer, "All done.");
    json_decref(first);
    json_decref(second);

    json_t *end = s_line(r.out, -1);
    CHECK_STR(s_str(end, "status"), "success");
    CHECK(json_object_get(end, "error") == NULL);
    json_t *stats = json_object_get(end, "stats");
    CHECK_INT(s_int(stats, "input_tokens"), 300); /* three calls: two tools, the answer */
    CHECK_INT(s_int(stats, "output_tokens"), 30);
    CHECK_INT(s_int(stats, "total_tokens"), 330);
    CHECK_INT(s_int(stats, "tool_calls"), 2);
    CHECK(json_object_get(json_object_get(stats, "models"), "gemini-2.5-pro") != NULL);
    json_decref(end);
    s_result_free(&r);

    /* the chat: $HOME/.gemini/tmp/<project>/chats/session-<minute>-<id[0:8]>.jsonl */
    char chat[1400];
    CHECK(s_chat_file(&w, GID_A, chat, sizeof chat));
    CHECK_INT(s_grep_count(chat, "\"type\":\"user\""), 1);
    char registry[800];
    snprintf(registry, sizeof registry, "%s/.gemini/projects.json", w.home);
    json_t *projects = json_load_file(registry, 0, NULL);
    CHECK_STR(s_str(json_object_get(projects, "projects"), w.work), "work");
    json_decref(projects);

    char *logged = testenv_read_file(log);
    json_t *entry = s_line(logged, 0);
    CHECK_STR(s_str(entry, "stdin"), "the task\n");
    CHECK_STR(s_str(entry, "cwd"), w.work);
    json_decref(entry);
    free(logged);
    s_world_close(&w);
}

static void test_gemini_sessions(void)
{
    world_t w;
    s_world_open(&w, "gemini-sessions");
    /* no session yet: resume says there is none, exit 42 */
    result_t r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--resume", GID_A));
    CHECK_INT(r.code, 42);
    CHECK_STR(r.err, "Error resuming session: No previous sessions found for this project.\n");
    CHECK_STR(r.out, "");
    s_result_free(&r);

    r = s_run(&w, "fake-gemini", "first", GEMINI_RUN("--session-id", GID_A));
    CHECK_INT(r.code, 0);
    s_result_free(&r);
    char chat[1400];
    CHECK(s_chat_file(&w, GID_A, chat, sizeof chat));

    /* resume continues the stored session in its file; the stats are this run's */
    r = s_run(&w, "fake-gemini", "second", GEMINI_RUN("--resume", GID_A));
    CHECK_INT(r.code, 0);
    json_t *init = s_line(r.out, 0);
    CHECK_STR(s_str(init, "session_id"), GID_A);
    json_decref(init);
    json_t *end = s_line(r.out, -1);
    CHECK_INT(s_int(json_object_get(end, "stats"), "input_tokens"), 1000);
    json_decref(end);
    s_result_free(&r);
    CHECK_INT(s_grep_count(chat, "\"type\":\"user\""), 2);
    CHECK_INT(s_grep_count(chat, "second"), 1);

    /* an unknown id next to existing sessions */
    r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--resume", GID_B));
    CHECK_INT(r.code, 42);
    char expected[1600];
    snprintf(expected, sizeof expected,
             "Error resuming session: Invalid session identifier \"" GID_B "\".\n"
             "  Searched for sessions in %s/.gemini/tmp/work/chats.\n"
             "  Use --list-sessions to see available sessions, then use --resume {number}, "
             "--resume {uuid}, or --resume latest.\n",
             w.home);
    CHECK_STR(r.err, expected);
    s_result_free(&r);

    /* a chosen id that is taken is refused */
    r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--session-id", GID_A));
    CHECK_INT(r.code, 42);
    CHECK_STR(r.err, "Error starting session: Session ID \"" GID_A "\" already exists. Use "
                     "--resume to resume it, or provide a different ID.\n");
    s_result_free(&r);

    /* "latest" and an index pick stored sessions too */
    r = s_run(&w, "fake-gemini", "third", GEMINI_RUN("--resume", "latest"));
    CHECK_INT(r.code, 0);
    init = s_line(r.out, 0);
    CHECK_STR(s_str(init, "session_id"), GID_A);
    json_decref(init);
    s_result_free(&r);
    CHECK_INT(s_grep_count(chat, "\"type\":\"user\""), 3);
    s_world_close(&w);
}

static void test_gemini_scenarios(void)
{
    world_t w;
    s_world_open(&w, "gemini-scenarios");
    setenv("FAKE_GEMINI_SCENARIO", "auth", 1);
    result_t r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--session-id", GID_A));
    CHECK_INT(r.code, 41);
    char expected[1200];
    snprintf(expected, sizeof expected,
             "YOLO mode is enabled. All tool calls will be automatically approved.\n"
             "Please set an Auth method in your %s/.gemini/settings.json or specify one of the "
             "following environment variables before running: GEMINI_API_KEY, "
             "GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n",
             w.home);
    CHECK_STR(r.err, expected);
    CHECK_STR(r.out, "");
    s_result_free(&r);
    char chat[1400];
    CHECK(!s_chat_file(&w, GID_A, chat, sizeof chat)); /* nothing was recorded */

    setenv("FAKE_GEMINI_SCENARIO", "error", 1);
    r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--session-id", GID_A));
    CHECK_INT(r.code, 1);
    CHECK_TYPES(r.out, "init message:user result");
    json_t *end = s_line(r.out, -1);
    CHECK_STR(s_str(end, "status"), "error");
    CHECK(s_str(json_object_get(end, "error"), "message") != NULL);
    CHECK(json_object_get(end, "stats") != NULL);
    json_decref(end);
    s_result_free(&r);

    setenv("FAKE_GEMINI_SCENARIO", "crash", 1);
    r = s_run(&w, "fake-gemini", "x", GEMINI_RUN("--session-id", GID_B));
    CHECK_INT(r.code, 2);
    CHECK_TYPES(r.out, "init message:user");
    s_result_free(&r);

    setenv("FAKE_GEMINI_SCENARIO", "hang", 1);
    r = s_run_timeout(&w, "fake-gemini", "x", GEMINI_RUN("--resume", GID_B), 300);
    CHECK_INT(r.code, -1);
    CHECK_STR(r.out, "");
    s_result_free(&r);

    /* no input at all: exit 42 */
    unsetenv("FAKE_GEMINI_SCENARIO");
    r = s_run(&w, "fake-gemini", NULL,
              (const char *[]){"-o", "stream-json", "--skip-trust", "-p", "", NULL});
    CHECK_INT(r.code, 42);
    CHECK_STR(r.err, "No input provided via stdin. Input can be provided by piping data into "
                     "gemini or using the --prompt option.\n");
    s_result_free(&r);
    s_world_close(&w);
}

/* ---------------------------------------------------------------------------------------
 * Signals: what a runner's stop looks like. */

static int s_signal_hanging(world_t *w, const char *program, const char *const *args, int sig)
{
    char out_path[700], err_path[700];
    pid_t pid = s_start(w, program, "x", args, out_path, err_path, sizeof out_path);
    testenv_sleep_ms(200);
    kill(pid, sig);
    int code = testenv_wait_exit(pid, 5000);
    if (code == -1)
        testenv_kill_group(pid);
    char *out = testenv_read_file(out_path);
    CHECK_STR(out, "");
    free(out);
    return code;
}

static void test_signals(void)
{
    world_t w;
    s_world_open(&w, "fake-signals");
    setenv("FAKE_CODEX_SCENARIO", "hang", 1);
    CHECK_INT(s_signal_hanging(&w, "fake-codex", CODEX_NEW("-", NULL), SIGINT), 1);
    CHECK_INT(s_signal_hanging(&w, "fake-codex", CODEX_NEW("-", NULL), SIGTERM), 128 + SIGTERM);
    /* gemini exits 0 on SIGTERM: only the missing result shows the run did not finish */
    setenv("FAKE_GEMINI_SCENARIO", "hang", 1);
    CHECK_INT(s_signal_hanging(&w, "fake-gemini", GEMINI_RUN("--session-id", GID_A), SIGTERM), 0);
    s_world_close(&w);
}

int main(void)
{
    test_codex_flags();
    test_codex_success();
    test_codex_resume_fork();
    test_codex_scenarios();
    test_gemini_flags();
    test_gemini_success();
    test_gemini_sessions();
    test_gemini_scenarios();
    test_signals();
    return check_exit_code("test_fake_codex_gemini");
}
