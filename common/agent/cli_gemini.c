/* cli_gemini: the adapter for the Google Gemini CLI in headless mode (docs/agent-gemini.md). */
#include "agent_cli.h"

#include "log.h"
#include "msgjson.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* `-p` text is appended to what stdin carries (§1.1): the task comes on stdin, this says so. */
#define GEMINI_PROMPT_TAIL "Carry out the task above."
#define GEMINI_LOST_TEXT "Invalid session identifier"
#define GEMINI_NO_SESSIONS_TEXT "No previous sessions found" /* exit 42, none at all (§3) */
#define GEMINI_NOT_LOGGED_IN_TEXT "Please set an Auth method"
#define GEMINI_IN_USE_TEXT "already exists. Use --resume" /* exit 42: the id is taken (§3.1) */
/* A failed model call's result says "[API Error: {"error":{"code":401,...}}]" (observed
 * against tests/model); a conversation too long for the model is a 400 saying so. */
#define GEMINI_API_CODE_TEXT "\"code\":"
#define GEMINI_TOO_LONG_TEXT "exceeds the maximum number of tokens"

/* -o stream-json [-m M] --approval-mode yolo --skip-trust [--include-directories D]...
 * [extra args] (--session-id ID | --resume ID) -p TAIL   (§1). */
static void s_build_argv(agent_argv_t *argv, const agent_call_t *call)
{
    const agent_settings_t *set = call->settings;
    agent_argv_add(argv, "-o");
    agent_argv_add(argv, "stream-json");
    if (set->model != NULL) {
        agent_argv_add(argv, "-m");
        agent_argv_add(argv, set->model);
    }
    /* Nobody is there to approve a tool call; without --skip-trust an untrusted folder
     * turns yolo back into "default" (observed, §1.2). */
    agent_argv_add(argv, "--approval-mode");
    agent_argv_add(argv, "yolo");
    agent_argv_add(argv, "--skip-trust");
    for (size_t i = 0; set->add_dirs != NULL && set->add_dirs[i] != NULL; i++) {
        agent_argv_add(argv, "--include-directories");
        agent_argv_add(argv, set->add_dirs[i]);
    }
    agent_argv_add_list(argv, set->extra_args);
    agent_argv_add(argv, call->mode == AGENT_CALL_RESUME ? "--resume" : "--session-id");
    agent_argv_add(argv, call->session_id);
    agent_argv_add(argv, "-p");
    agent_argv_add(argv, GEMINI_PROMPT_TAIL);
}

/* The model API failure a failed result names, if any. Retries happen on stderr only
 * ("Attempt N failed with status 429. Retrying with backoff..."), so none is shown. */
static void s_on_api_error(agent_stream_t *stream, const char *message)
{
    if (message == NULL)
        return;
    utf8_copy(stream->api_detail, sizeof stream->api_detail, message);
    if (agent_cli_mentions(message, GEMINI_TOO_LONG_TEXT)) {
        stream->api_error = AGENT_API_PROMPT_TOO_LONG;
        return;
    }
    const char *code = strstr(message, GEMINI_API_CODE_TEXT);
    int status = 0;
    if (code != NULL && sscanf(code + strlen(GEMINI_API_CODE_TEXT), "%d", &status) == 1 &&
        status >= 100 && status < 1000)
        agent_stream_api_failure(stream, status, NULL, 0, 0, 0);
}

/* The result event in Claude's shape. stats.input_tokens counts the cached tokens too;
 * stats.input is the rest (§2). No cost is reported. */
static void s_on_result(agent_stream_t *stream, json_t *event)
{
    const char *status = json_string_value(json_object_get(event, "status"));
    bool ok = status != NULL && strcmp(status, "success") == 0;
    json_t *stats = json_object_get(event, "stats");
    int64_t prompt = agent_stream_count(json_object_get(stats, "input_tokens"));
    int64_t cached = agent_stream_count(json_object_get(stats, "cached"));
    if (cached > prompt)
        cached = prompt;
    json_t *result = json_pack(
        "{s:s, s:s, s:b, s:s, s:f, s:{s:I, s:i, s:I, s:I}, s:i, s:I}", "type", "result",
        "subtype", ok ? "success" : "error_during_execution", "is_error", !ok, "session_id",
        stream->session_id, "total_cost_usd", 0.0, "usage", "input_tokens",
        (json_int_t)(prompt - cached), "cache_creation_input_tokens", 0,
        "cache_read_input_tokens", (json_int_t)cached, "output_tokens",
        (json_int_t)agent_stream_count(json_object_get(stats, "output_tokens")), "num_turns",
        1, "duration_ms", (json_int_t)agent_stream_count(json_object_get(stats, "duration_ms")));
    if (result == NULL)
        return;
    if (ok) {
        json_object_set_new(result, "result", json_string(stream->text ? stream->text : ""));
    } else {
        const char *message =
            json_string_value(json_object_get(json_object_get(event, "error"), "message"));
        json_object_set_new(result, "errors", json_pack("[s]", message ? message : "failed"));
        if (agent_cli_mentions(message, GEMINI_NOT_LOGGED_IN_TEXT))
            stream->not_logged_in = true;
        else
            s_on_api_error(stream, message);
    }
    if (prompt > 0)
        stream->context_tokens = prompt;
    agent_stream_set_result(stream, result);
    json_decref(result);
}

/* Assistant text: whole messages, or `delta` pieces of one (joined without a break). */
static void s_on_message(agent_stream_t *stream, json_t *event)
{
    const char *role = json_string_value(json_object_get(event, "role"));
    const char *content = json_string_value(json_object_get(event, "content"));
    if (role == NULL || strcmp(role, "assistant") != 0 || content == NULL || content[0] == '\0')
        return;
    bool delta = json_is_true(json_object_get(event, "delta"));
    agent_stream_add_text(stream, content, !delta);
    agent_stream_progress(stream, AGENT_PROGRESS_TEXT, content, "");
}

static agent_stream_line_t s_read_event(agent_stream_t *stream, json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL)
        return AGENT_STREAM_EVENT;
    /* The model moves next unless a tool runs (between tool_use and its tool_result). */
    stream->awaiting_model = strcmp(type, "tool_use") != 0;
    if (strcmp(type, "init") == 0) {
        const char *id = json_string_value(json_object_get(event, "session_id"));
        if (id != NULL && strlen(id) < sizeof stream->session_id)
            utf8_copy(stream->session_id, sizeof stream->session_id, id);
    } else if (strcmp(type, "message") == 0) {
        s_on_message(stream, event);
    } else if (strcmp(type, "tool_use") == 0) {
        const char *name = json_string_value(json_object_get(event, "tool_name"));
        char summary[161];
        agent_stream_tool_summary(summary, sizeof summary, json_object_get(event, "parameters"));
        agent_stream_progress(stream, AGENT_PROGRESS_TOOL, name ? name : "tool", summary);
    } else if (strcmp(type, "error") == 0) {
        const char *message = json_string_value(json_object_get(event, "message"));
        log_info("agent %s: gemini: %s", stream->name ? stream->name : "", message ? message : "");
    } else if (strcmp(type, "result") == 0) {
        s_on_result(stream, event);
        return AGENT_STREAM_RESULT;
    }
    return AGENT_STREAM_EVENT;
}

/* ---------------------------------------------------------------------------------------
 * MCP servers. Gemini reads them only from settings files: the one the runner can own is
 * the workdir's project settings, <workdir>/.gemini/settings.json, which Gemini loads in a
 * trusted folder (GEMINI_CLI_TRUST_WORKSPACE=true; --skip-trust alone does not load it,
 * observed). The file is Cloister's when .gemini/.cloister-owned sits beside it; a settings
 * file of someone else's is never touched (the run goes without Cloister's tools). */

#define GEMINI_OWNED_MARK ".cloister-owned"

static bool s_path_in(char *buf, size_t size, const char *workdir, const char *name)
{
    int n = snprintf(buf, size, "%s/.gemini%s%s", workdir, name[0] ? "/" : "", name);
    return n > 0 && (size_t)n < size;
}

/* Writes `settings` (borrowed) as the project settings, atomically. */
static int s_write_settings(const char *dir, const char *path, const char *mark, json_t *settings)
{
    char temp[PATH_MAX + 16];
    snprintf(temp, sizeof temp, "%s.tmp", path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    int fd = open(mark, O_WRONLY | O_CREAT, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    if (json_dump_file(settings, temp, JSON_INDENT(2)) != 0 || rename(temp, path) != 0) {
        unlink(temp);
        return -1;
    }
    return 0;
}

static void s_prepare(const agent_settings_t *settings)
{
    char dir[PATH_MAX], path[PATH_MAX], mark[PATH_MAX];
    if (!s_path_in(dir, sizeof dir, settings->workdir, "") ||
        !s_path_in(path, sizeof path, settings->workdir, "settings.json") ||
        !s_path_in(mark, sizeof mark, settings->workdir, GEMINI_OWNED_MARK))
        return;
    bool ours = access(mark, F_OK) == 0;
    bool theirs = !ours && access(path, F_OK) == 0;
    if (settings->mcp_config == NULL) {
        if (ours) /* no stale task's server for a run that has none */
            unlink(path);
        return;
    }
    if (theirs) {
        log_warn("agent %s: %s is not Cloister's: gemini runs without Cloister's tools",
                 settings->specialist, path);
        return;
    }
    json_error_t error;
    json_t *config = json_load_file(settings->mcp_config, 0, &error);
    json_t *servers = json_object_get(config, "mcpServers");
    json_t *project = json_is_object(servers) ? json_pack("{s:O}", "mcpServers", servers) : NULL;
    if (project == NULL || s_write_settings(dir, path, mark, project) != 0)
        log_warn("agent %s: cannot give gemini its MCP servers in %s: %s", settings->specialist,
                 path, project == NULL ? "no mcpServers in the MCP config" : strerror(errno));
    json_decref(project);
    json_decref(config);
}

static agent_failure_kind_t s_classify(const char *stderr_tail, const char *result_text)
{
    if (agent_cli_mentions(stderr_tail, GEMINI_LOST_TEXT) ||
        agent_cli_mentions(result_text, GEMINI_LOST_TEXT) ||
        agent_cli_mentions(stderr_tail, GEMINI_NO_SESSIONS_TEXT))
        return AGENT_FAILURE_SESSION_LOST;
    /* A session our id started whose first run was stopped before it completed: resumed. */
    if (agent_cli_mentions(stderr_tail, GEMINI_IN_USE_TEXT))
        return AGENT_FAILURE_SESSION_IN_USE;
    if (agent_cli_mentions(stderr_tail, GEMINI_NOT_LOGGED_IN_TEXT) ||
        agent_cli_mentions(result_text, GEMINI_NOT_LOGGED_IN_TEXT))
        return AGENT_FAILURE_NOT_LOGGED_IN;
    return AGENT_FAILURE_OTHER;
}

/* What Gemini sets for the commands it runs (§5). */
static const char *const s_env_remove[] = {"GEMINI_CLI", NULL};
/* A trusted folder, so that the project settings (the MCP servers) are read (§1.2). */
static const char *const s_env_set[] = {"GEMINI_CLI_TRUST_WORKSPACE=true", NULL};

const agent_cli_t agent_cli_gemini = {
    .name = "gemini",
    .default_command = "gemini",
    .names_sessions = false, /* --session-id starts a session with our id */
    .forks = false,          /* no fork: a fork is a fresh session (said in the outcome) */
    .takes_system_prompt = false,
    .slash_is_command = true, /* §6 */
    .login_check = NULL, /* not logged in, it exits 41 at once and says so */
    .login_env = NULL,
    .login_hint = "set GEMINI_API_KEY, or choose an auth method in ~/.gemini/settings.json",
    .build_argv = s_build_argv,
    .read_event = s_read_event,
    .classify = s_classify,
    .session_exists = NULL,
    .env_remove = s_env_remove,
    .env_set = s_env_set,
    .prepare = s_prepare,
};
