/* fake-gemini: a stand-in for the Gemini CLI 0.61.0 in headless mode (docs/agent-gemini.md;
 * knobs in README.md). Speaks `-o stream-json`, keeps sessions under
 * $HOME/.gemini/tmp/<project>/chats, starts one with --session-id and resumes it with
 * --resume, exits 41 without credentials, refuses what yargs refuses. */
#include "failure.h"
#include "fake_actions.h"
#include "fake_cli.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEMINI_VERSION "0.61.0"

typedef struct {
    const char *output, *model, *resume, *session_id, *prompt;
    int tools;
} gemini_t;

static int s_unknown(const char *arg)
{
    fprintf(stderr, "Usage: gemini [options] [command]\n\nUnknown argument: %s\n", arg);
    return 1;
}

/* Parses the flags; returns 0 or an exit code. */
static int s_parse(gemini_t *g, int argc, char **argv)
{
    static const char *const switches[] = {"--skip-trust", "-y", "--yolo", "-s", "--sandbox",
                                           "-d", "--debug", "--raw-output",
                                           "--accept-raw-output-risk", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        bool known = false;
        for (size_t k = 0; switches[k] && !known; k++)
            known = strcmp(a, switches[k]) == 0;
        if (known)
            continue;
        const char **slot = NULL;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--output-format") == 0)
            slot = &g->output;
        else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0)
            slot = &g->model;
        else if (strcmp(a, "-r") == 0 || strcmp(a, "--resume") == 0)
            slot = &g->resume;
        else if (strcmp(a, "--session-id") == 0)
            slot = &g->session_id;
        else if (strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0)
            slot = &g->prompt;
        else if (strcmp(a, "--approval-mode") != 0 && strcmp(a, "--include-directories") != 0)
            return s_unknown(a);
        if (value == NULL) {
            fprintf(stderr, "Not enough arguments following: %s\n", a + 1);
            return 1;
        }
        if (strcmp(a, "--approval-mode") == 0 && strcmp(value, "default") != 0 &&
            strcmp(value, "auto_edit") != 0 && strcmp(value, "yolo") != 0 &&
            strcmp(value, "plan") != 0) {
            fprintf(stderr, "Invalid values:\n  Argument: approval-mode, Given: \"%s\"\n", value);
            return 1;
        }
        if (slot != NULL)
            *slot = value;
        i++;
    }
    return 0;
}

/* $HOME/.gemini/tmp/<cwd, '/' → '-'>/chats */
static void s_chats_dir(char *buf, size_t size)
{
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
        cwd[0] = '\0';
    for (char *p = cwd; *p; p++)
        if (*p == '/')
            *p = '-';
    snprintf(buf, size, "%s/.gemini/tmp/%s/chats", getenv("HOME") ? getenv("HOME") : "", cwd);
}

static bool s_has_sessions(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool any = false;
    while (d != NULL && !any && (e = readdir(d)) != NULL)
        any = strncmp(e->d_name, "session-", 8) == 0;
    if (d)
        closedir(d);
    return any;
}

static bool s_logged_in(void)
{
    char settings[PATH_MAX];
    snprintf(settings, sizeof settings, "%s/.gemini/settings.json",
             getenv("HOME") ? getenv("HOME") : "");
    return fake_cli_env("GEMINI_API_KEY", NULL) != NULL || access(settings, F_OK) == 0;
}

static void s_report(const fake_step_t *step, void *arg)
{
    gemini_t *g = arg;
    char id[32];
    snprintf(id, sizeof id, "tool_%d", ++g->tools);
    fake_cli_emit(json_pack("{s:s, s:s, s:s, s:O}", "type", "tool_use", "tool_name",
                            step->tool, "tool_id", id, "parameters", step->input));
    fake_cli_emit(json_pack("{s:s, s:s, s:s, s:s}", "type", "tool_result", "tool_id", id,
                            "status", step->is_error ? "error" : "success", "output",
                            step->output));
    fake_cli_sleep_ms(fake_cli_env_int("FAKE_GEMINI_DELAY_MS", 0));
}

/* The answer in two `delta` pieces, as the CLI streams it. */
static void s_answer(json_t *said)
{
    const char *text = fake_cli_env("FAKE_GEMINI_RESULT", NULL);
    char buf[4096] = "";
    size_t i;
    json_t *line;
    json_array_foreach(said, i, line)
    {
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, "%s%s", i ? "\n" : "", json_string_value(line));
    }
    if (text == NULL)
        text = buf[0] ? buf : "Done.";
    size_t half = strlen(text) / 2;
    char first[4096];
    snprintf(first, sizeof first, "%.*s", (int)half, text);
    fake_cli_emit(json_pack("{s:s, s:s, s:s, s:b}", "type", "message", "role", "assistant",
                            "content", first, "delta", 1));
    fake_cli_emit(json_pack("{s:s, s:s, s:s, s:b}", "type", "message", "role", "assistant",
                            "content", text + half, "delta", 1));
}

static int s_result(gemini_t *g, const char *error)
{
    int input = fake_cli_env_int("FAKE_GEMINI_INPUT_TOKENS", 1000);
    int cached = fake_cli_env_int("FAKE_GEMINI_CACHED_TOKENS", 300);
    int output = fake_cli_env_int("FAKE_GEMINI_OUTPUT_TOKENS", 200);
    json_t *result = json_pack(
        "{s:s, s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i}}", "type", "result", "status",
        error ? "error" : "success", "stats", "total_tokens", input + output, "input_tokens",
        input, "output_tokens", output, "cached", cached, "input", input - cached,
        "duration_ms", 42, "tool_calls", g->tools);
    if (error != NULL)
        json_object_set_new(result, "error", json_pack("{s:s, s:s}", "type", "Error", "message",
                                                       error));
    fake_cli_emit(result);
    return error ? 1 : 0;
}

/* The run proper, once stdin is read (`input`, borrowed). */
static int s_session_run(gemini_t *g, char *input)
{
    if (!s_logged_in()) {
        fprintf(stderr, "Please set an Auth method in your %s/.gemini/settings.json or specify "
                        "one of the following environment variables before running: "
                        "GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n",
                getenv("HOME") ? getenv("HOME") : "");
        return 41;
    }
    char dir[PATH_MAX], path[PATH_MAX + 64], id[40];
    s_chats_dir(dir, sizeof dir);
    if (g->resume != NULL) {
        if (!s_has_sessions(dir)) {
            fprintf(stderr, "Error resuming session: No previous sessions found for this "
                            "project.\n");
            return 42;
        }
        fake_cli_session_path(path, sizeof path, dir, "session-", g->resume);
        if (access(path, F_OK) != 0) {
            fprintf(stderr, "Error resuming session: Invalid session identifier \"%s\".\n",
                    g->resume);
            return 42;
        }
        snprintf(id, sizeof id, "%s", g->resume);
    } else {
        if (g->session_id != NULL && !fake_cli_is_uuid(g->session_id)) {
            fprintf(stderr, "Invalid session id: %s\n", g->session_id);
            return 1;
        }
        if (g->session_id != NULL)
            snprintf(id, sizeof id, "%s", g->session_id);
        else
            fake_cli_new_uuid(id);
        fake_cli_session_path(path, sizeof path, dir, "session-", id);
    }
    char *prompt = NULL;
    if (asprintf(&prompt, "%s%s%s", input ? input : "", input && *input ? "\n\n" : "",
                 g->prompt) < 0)
        return 1;
    fake_cli_session_append(path, prompt);
    bool stream = g->output != NULL && strcmp(g->output, "stream-json") == 0;
    if (!stream) {
        fprintf(stderr, "fake-gemini: only -o stream-json is implemented\n");
        return 1;
    }
    fake_cli_emit(json_pack("{s:s, s:s, s:s}", "type", "init", "session_id", id, "model",
                            g->model ? g->model : "gemini-2.5-pro"));
    fake_cli_emit(json_pack("{s:s, s:s, s:s}", "type", "message", "role", "user", "content",
                            prompt));
    free(prompt);
    const char *scenario = fake_cli_env("FAKE_GEMINI_SCENARIO", "success");
    if (strcmp(scenario, "hang") == 0)
        for (;;)
            fake_cli_sleep_ms(1000);
    if (strcmp(scenario, "crash") == 0)
        return 2;
    if (strcmp(scenario, "error") == 0)
        return s_result(g, "[API Error: quota exceeded]");
    json_t *said = json_array();
    const char *actions = fake_cli_env("FAKE_GEMINI_ACTIONS", NULL);
    int rc;
    if (actions != NULL && fake_actions_run(actions, s_report, g, said) != 0) {
        rc = s_result(g, failure_message());
    } else {
        s_answer(said);
        rc = s_result(g, NULL);
    }
    json_decref(said);
    return rc;
}

static int s_run(gemini_t *g, int argc, char **argv)
{
    char *input = fake_cli_read_stdin();
    fake_cli_log("FAKE_GEMINI_LOG", argc, argv, input);
    int rc = s_session_run(g, input);
    free(input);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0)) {
        printf("%s\n", GEMINI_VERSION);
        return 0;
    }
    gemini_t g = {0};
    int rc = s_parse(&g, argc, argv);
    if (rc != 0)
        return rc;
    if (g.prompt == NULL) {
        fprintf(stderr, "fake-gemini: no interactive mode; pass -p\n");
        return 1;
    }
    return s_run(&g, argc, argv);
}
