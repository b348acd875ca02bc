/* fake-codex: a stand-in for `codex exec --json` 0.169.0 (docs/agent-codex.md; knobs in
 * README.md). Speaks the JSONL events, keeps threads under $CODEX_HOME/sessions, resumes
 * and forks them, refuses what clap refuses, and answers `login status`. */
#include "fake_actions.h"
#include "fake_cli.h"
#include "failure.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CODEX_VERSION "codex-cli 0.169.0"

typedef struct {
    const char *mode; /* "new", "resume", "fork" */
    const char *thread;     /* resume/fork: the id given */
    const char *prompt_arg; /* the positional prompt ("-" = stdin) */
    bool json;
    char *stdin_text;
    int items;
    json_t *said;
} codex_t;

/* clap's refusal: exit 2. */
static int s_usage(const char *arg)
{
    fprintf(stderr,
            "error: unexpected argument '%s' found\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\n"
            "For more information, try '--help'.\n",
            arg);
    return 2;
}

static bool s_takes_value(const char *flag, bool exec_only_ok)
{
    static const char *const both[] = {"-m", "--model", "-c", "--config", "-o",
                                       "--output-last-message", "--output-schema", "-i",
                                       "--image", "--enable", "--disable", "-p", "--profile",
                                       NULL};
    static const char *const exec_only[] = {"-s", "--sandbox", "-C", "--cd", "--add-dir",
                                            "--color", "--local-provider", NULL};
    for (size_t i = 0; both[i]; i++)
        if (strcmp(flag, both[i]) == 0)
            return true;
    for (size_t i = 0; exec_only_ok && exec_only[i]; i++)
        if (strcmp(flag, exec_only[i]) == 0)
            return true;
    return false;
}

static bool s_is_switch(const char *flag)
{
    static const char *const all[] = {"--json", "--skip-git-repo-check", "--ephemeral",
                                      "--dangerously-bypass-approvals-and-sandbox", "--oss",
                                      "--strict-config", "--ignore-user-config", "--last",
                                      "--all", NULL};
    for (size_t i = 0; all[i]; i++)
        if (strcmp(flag, all[i]) == 0)
            return true;
    return false;
}

/* Parses `exec [resume|fork] ...`; returns 0 or an exit code. */
static int s_parse(codex_t *c, int argc, char **argv)
{
    int i = 2;
    c->mode = "new";
    if (i < argc && (strcmp(argv[i], "resume") == 0 || strcmp(argv[i], "fork") == 0))
        c->mode = argv[i++];
    bool is_new = strcmp(c->mode, "new") == 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            c->json = true;
        } else if (s_is_switch(a)) {
        } else if (s_takes_value(a, is_new)) {
            if (++i >= argc)
                return s_usage(a);
        } else if (a[0] == '-' && strcmp(a, "-") != 0) {
            return s_usage(a);
        } else if (!is_new && c->thread == NULL) {
            c->thread = a;
        } else if (c->prompt_arg == NULL) {
            c->prompt_arg = a;
        } else {
            return s_usage(a);
        }
    }
    if (!is_new && c->thread == NULL) {
        fprintf(stderr, "error: the following required arguments were not provided:\n"
                        "  <SESSION_ID>\n");
        return 2;
    }
    return 0;
}

static void s_item(codex_t *c, const char *type, json_t *fields)
{
    char id[32];
    snprintf(id, sizeof id, "item_%d", c->items++);
    json_t *item = json_pack("{s:s, s:s}", "id", id, "type", type);
    json_object_update(item, fields);
    json_decref(fields);
    fake_cli_emit(json_pack("{s:s, s:O}", "type", "item.started", "item", item));
    fake_cli_emit(json_pack("{s:s, s:o}", "type", "item.completed", "item", item));
}

static void s_report(const fake_step_t *step, void *arg)
{
    codex_t *c = arg;
    if (strcmp(step->tool, "Bash") == 0) {
        const char *command = json_string_value(json_object_get(step->input, "command"));
        s_item(c, "command_execution",
               json_pack("{s:s, s:s, s:i, s:s}", "command", command ? command : "",
                         "aggregated_output", step->output, "exit_code", step->exit_code,
                         "status", step->exit_code == 0 ? "completed" : "failed"));
    } else if (strncmp(step->tool, "mcp__", 5) == 0) {
        s_item(c, "mcp_tool_call", json_pack("{s:s, s:s, s:s}", "server", "cloister", "tool",
                                             step->tool + 5, "status", "completed"));
    } else {
        const char *path = json_string_value(json_object_get(step->input, "file_path"));
        s_item(c, "file_change",
               json_pack("{s:[{s:s, s:s}], s:s}", "changes", "path", path ? path : "", "kind",
                         "update", "status", step->is_error ? "failed" : "completed"));
    }
    fake_cli_sleep_ms(fake_cli_env_int("FAKE_CODEX_DELAY_MS", 0));
}

/* Where the thread `id` is kept (the real CLI adds a date path and a timestamp). */
static bool s_rollout(char *buf, size_t size, const char *id)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sessions", getenv("CODEX_HOME"));
    return fake_cli_session_path(buf, size, dir, "rollout-", id);
}

/* The thread this run writes to, or an exit code (unknown thread). */
static int s_open_thread(codex_t *c, char *thread, char *path, size_t size)
{
    if (strcmp(c->mode, "new") == 0) {
        fake_cli_new_uuid(thread);
        s_rollout(path, size, thread);
        return 0;
    }
    char from[PATH_MAX];
    s_rollout(from, sizeof from, c->thread);
    if (access(from, F_OK) != 0) {
        fprintf(stderr, "Error: thread/%s: thread/%s failed: no rollout found for thread id %s "
                        "(code -32600)\n",
                c->mode, c->mode, c->thread);
        return 1;
    }
    if (strcmp(c->mode, "resume") == 0) {
        snprintf(thread, 40, "%s", c->thread);
        snprintf(path, size, "%s", from);
        return 0;
    }
    fake_cli_new_uuid(thread);
    s_rollout(path, size, thread);
    fake_cli_session_copy(from, path);
    return 0;
}

static void s_finish_turn(codex_t *c, const char *scenario, const char *error)
{
    if (error != NULL || strcmp(scenario, "turn_failed") == 0) {
        fake_cli_emit(json_pack("{s:s, s:{s:s}}", "type", "turn.failed", "error", "message",
                                error ? error : "stream error: the model failed"));
        return;
    }
    const char *text = fake_cli_env("FAKE_CODEX_RESULT", NULL);
    char *joined = NULL;
    if (text == NULL && json_array_size(c->said) > 0) {
        size_t i;
        json_t *line;
        size_t len = 1;
        json_array_foreach(c->said, i, line) len += strlen(json_string_value(line)) + 1;
        joined = calloc(1, len);
        json_array_foreach(c->said, i, line)
        {
            if (i > 0)
                strcat(joined, "\n");
            strcat(joined, json_string_value(line));
        }
    }
    s_item(c, "agent_message", json_pack("{s:s}", "text", text ? text : joined ? joined : "Done."));
    free(joined);
    fake_cli_emit(json_pack("{s:s, s:{s:i, s:i, s:i}}", "type", "turn.completed", "usage",
                            "input_tokens", fake_cli_env_int("FAKE_CODEX_INPUT_TOKENS", 1000),
                            "cached_input_tokens", fake_cli_env_int("FAKE_CODEX_CACHED_TOKENS", 400),
                            "output_tokens", fake_cli_env_int("FAKE_CODEX_OUTPUT_TOKENS", 200)));
}

static int s_exec(int argc, char **argv)
{
    codex_t c = {0};
    int rc = s_parse(&c, argc, argv);
    if (rc != 0)
        return rc;
    const char *home = getenv("CODEX_HOME");
    struct stat st;
    if (home == NULL || stat(home, &st) != 0) {
        fprintf(stderr, "Error: CODEX_HOME points to %s, but that path does not exist\n",
                home ? home : "(unset)");
        return 1;
    }
    if (c.prompt_arg == NULL || strcmp(c.prompt_arg, "-") == 0)
        c.stdin_text = fake_cli_read_stdin();
    fake_cli_log("FAKE_CODEX_LOG", argc, argv, c.stdin_text);
    const char *prompt = c.stdin_text ? c.stdin_text : c.prompt_arg;
    if (prompt == NULL || prompt[0] == '\0') {
        fprintf(stderr, "No prompt provided via stdin.\n");
        return 1;
    }
    char thread[40], path[PATH_MAX];
    if ((rc = s_open_thread(&c, thread, path, sizeof path)) != 0)
        return rc;
    fake_cli_session_append(path, prompt);
    const char *scenario = fake_cli_env("FAKE_CODEX_SCENARIO", "success");
    fake_cli_emit(json_pack("{s:s, s:s}", "type", "thread.started", "thread_id", thread));
    fake_cli_emit(json_pack("{s:s}", "type", "turn.started"));
    if (strcmp(scenario, "hang") == 0) { /* what it does offline: retry for ever */
        for (;;) {
            fake_cli_emit(json_pack("{s:s, s:s}", "type", "error", "message",
                                    "Reconnecting... waiting for network"));
            fake_cli_sleep_ms(1000);
        }
    }
    if (strcmp(scenario, "crash") == 0)
        return 2;
    if (strcmp(scenario, "auth") == 0) {
        const char *m = "unexpected status 401 Unauthorized: Missing bearer or basic "
                        "authentication in header";
        fake_cli_emit(json_pack("{s:s, s:s}", "type", "error", "message", m));
        s_finish_turn(&c, scenario, m);
        return 1;
    }
    c.said = json_array();
    const char *actions = fake_cli_env("FAKE_CODEX_ACTIONS", NULL);
    char error[512] = "";
    if (actions != NULL && fake_actions_run(actions, s_report, &c, c.said) != 0)
        snprintf(error, sizeof error, "%s", failure_message());
    s_finish_turn(&c, scenario, error[0] ? error : NULL);
    json_decref(c.said);
    free(c.stdin_text);
    return error[0] || strcmp(scenario, "turn_failed") == 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("%s\n", CODEX_VERSION);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "login") == 0 && strcmp(argv[2], "status") == 0) {
        char auth[PATH_MAX];
        const char *home = getenv("CODEX_HOME");
        snprintf(auth, sizeof auth, "%s/auth.json", home ? home : "");
        if (home == NULL || access(auth, F_OK) != 0) {
            fprintf(stderr, "Not logged in\n");
            return 1;
        }
        fprintf(stderr, "Logged in using an API key\n");
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "exec") == 0)
        return s_exec(argc, argv);
    fprintf(stderr, "error: unrecognized subcommand '%s'\n", argc >= 2 ? argv[1] : "");
    return 2;
}
