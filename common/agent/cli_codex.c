/* cli_codex: the adapter for the OpenAI Codex CLI's `codex exec` (docs/agent-codex.md). */
#include "agent_cli.h"

#include "log.h"
#include "msgjson.h"
#include "utf8.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An unattended run: writes inside the workspace only, and never stops to ask. */
#define CODEX_SANDBOX "workspace-write"
#define CODEX_APPROVAL "never"
#define CODEX_LOST_TEXT "no rollout found for thread id"
#define CODEX_NOT_LOGGED_IN_TEXT "Not logged in"
#define CODEX_UNAUTHORIZED_TEXT "401 Unauthorized"
/* The texts of a failing model API (observed against tests/model, §2.4): a retry is
 * "Reconnecting... N/M (<why>)", and <why> names the status when there was one. */
#define CODEX_RETRY_TEXT "Reconnecting... "
#define CODEX_CONTEXT_FULL_TEXT "out of room in the model's context window"
#define CODEX_DISCONNECTED_TEXT "stream disconnected"
#define CODEX_QUOTA_TEXT "Quota exceeded" /* the API's insufficient_quota: billing */

/* Writes `text` to `out` as a TOML basic string: what `-c key=value` parses (§1). */
static void s_put_toml_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

/* A JSON string, array of strings or object of strings as a TOML value. */
static void s_put_toml_value(FILE *out, json_t *value)
{
    const char *key;
    json_t *item;
    size_t i;
    bool first = true;
    if (json_is_array(value)) {
        fputc('[', out);
        json_array_foreach(value, i, item)
        {
            fputs(first ? "" : ", ", out);
            s_put_toml_string(out, json_is_string(item) ? json_string_value(item) : "");
            first = false;
        }
        fputc(']', out);
    } else if (json_is_object(value)) {
        fputc('{', out);
        json_object_foreach(value, key, item)
        {
            fputs(first ? "" : ", ", out);
            s_put_toml_string(out, key);
            fputs(" = ", out);
            s_put_toml_string(out, json_is_string(item) ? json_string_value(item) : "");
            first = false;
        }
        fputc('}', out);
    } else {
        s_put_toml_string(out, json_is_string(value) ? json_string_value(value) : "");
    }
}

/* `-c <key>=<value as TOML>`. */
static void s_add_config(agent_argv_t *argv, const char *key, json_t *value)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL) {
        argv->failed = true;
        return;
    }
    fprintf(out, "%s=", key);
    s_put_toml_value(out, value);
    fclose(out);
    agent_argv_add(argv, "-c");
    agent_argv_add(argv, text);
    free(text);
}

static bool s_plain_name(const char *name)
{
    if (name[0] == '\0')
        return false;
    for (const char *p = name; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return false;
    }
    return true;
}

/* Codex takes MCP servers from its config only: each server of the Claude-style JSON
 * file becomes -c mcp_servers.<name>.{command,args,env}, with its tools approved: under
 * approval_policy "never" a tool that needs approval is refused ("MCP tool call requires
 * approval, but approval policy is never", observed with 0.169.0). */
static void s_add_mcp(agent_argv_t *argv, const char *path)
{
    json_error_t error;
    json_t *config = json_load_file(path, 0, &error);
    json_t *servers = json_object_get(config, "mcpServers");
    if (!json_is_object(servers)) {
        log_warn("codex: cannot read MCP servers from %s: %s", path,
                 config ? "no mcpServers object" : error.text);
        json_decref(config);
        return;
    }
    const char *name;
    json_t *server;
    json_object_foreach(servers, name, server)
    {
        if (!s_plain_name(name) || !json_is_string(json_object_get(server, "command"))) {
            log_warn("codex: skipping MCP server '%s' (needs a plain name and a command)", name);
            continue;
        }
        static const char *const fields[] = {"command", "args", "env", NULL};
        for (size_t i = 0; fields[i] != NULL; i++) {
            json_t *value = json_object_get(server, fields[i]);
            if (value == NULL)
                continue;
            char key[256];
            snprintf(key, sizeof key, "mcp_servers.%s.%s", name, fields[i]);
            s_add_config(argv, key, value);
        }
        char key[256];
        snprintf(key, sizeof key, "mcp_servers.%s.default_tools_approval_mode", name);
        json_t *approve = json_string("approve");
        s_add_config(argv, key, approve);
        json_decref(approve);
    }
    json_decref(config);
}

/* exec [resume|fork] --json --skip-git-repo-check [-m M] -c sandbox/approval/roots
 * [MCP] [extra args] [ID] -   (the prompt on stdin, §1-§2). */
static void s_build_argv(agent_argv_t *argv, const agent_call_t *call)
{
    const agent_settings_t *set = call->settings;
    agent_argv_add(argv, "exec");
    if (call->mode == AGENT_CALL_RESUME)
        agent_argv_add(argv, "resume");
    else if (call->mode == AGENT_CALL_FORK)
        agent_argv_add(argv, "fork");
    agent_argv_add(argv, "--json");
    agent_argv_add(argv, "--skip-git-repo-check");
    if (set->model != NULL) {
        agent_argv_add(argv, "-m");
        agent_argv_add(argv, set->model);
    }
    /* -c rather than -s/--add-dir: `exec resume` and `exec fork` take no such flags. */
    json_t *sandbox = json_string(CODEX_SANDBOX), *approval = json_string(CODEX_APPROVAL);
    json_t *roots = json_array();
    for (size_t i = 0; set->add_dirs != NULL && set->add_dirs[i] != NULL; i++)
        json_array_append_new(roots, json_string(set->add_dirs[i]));
    s_add_config(argv, "sandbox_mode", sandbox);
    s_add_config(argv, "approval_policy", approval);
    if (json_array_size(roots) > 0)
        s_add_config(argv, "sandbox_workspace_write.writable_roots", roots);
    json_decref(sandbox);
    json_decref(approval);
    json_decref(roots);
    if (set->mcp_config != NULL)
        s_add_mcp(argv, set->mcp_config);
    agent_argv_add_list(argv, set->extra_args);
    if (call->mode == AGENT_CALL_RESUME)
        agent_argv_add(argv, call->session_id);
    else if (call->mode == AGENT_CALL_FORK)
        agent_argv_add(argv, call->fork_of);
    agent_argv_add(argv, "-");
}

/* ---------------------------------------------------------------------------------------
 * Reading `--json` (§2). */

static void s_on_item(agent_stream_t *stream, json_t *item)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    if (type == NULL)
        return;
    char summary[161];
    if (strcmp(type, "agent_message") == 0) {
        const char *text = json_string_value(json_object_get(item, "text"));
        if (text != NULL && text[0] != '\0') {
            agent_stream_progress(stream, AGENT_PROGRESS_TEXT, text, "");
            agent_stream_add_text(stream, text, true);
        }
    } else if (strcmp(type, "command_execution") == 0) {
        agent_stream_tool_summary(summary, sizeof summary, item);
        agent_stream_progress(stream, AGENT_PROGRESS_TOOL, "Bash", summary);
    } else if (strcmp(type, "file_change") == 0) {
        json_t *first = json_array_get(json_object_get(item, "changes"), 0);
        agent_stream_tool_summary(summary, sizeof summary, first);
        agent_stream_progress(stream, AGENT_PROGRESS_TOOL, "Edit", summary);
    } else if (strcmp(type, "mcp_tool_call") == 0) {
        const char *server = json_string_value(json_object_get(item, "server"));
        const char *tool = json_string_value(json_object_get(item, "tool"));
        char name[160];
        snprintf(name, sizeof name, "mcp__%s__%s", server ? server : "?", tool ? tool : "?");
        agent_stream_tool_summary(summary, sizeof summary, json_object_get(item, "arguments"));
        agent_stream_progress(stream, AGENT_PROGRESS_TOOL, name, summary);
    } else if (strcmp(type, "web_search") == 0) {
        agent_stream_tool_summary(summary, sizeof summary, item);
        agent_stream_progress(stream, AGENT_PROGRESS_TOOL, "WebSearch", summary);
    }
}

/* turn.completed: a result in Claude's shape, from the turn's usage and the messages. Codex
 * counts cached tokens inside input_tokens and reports no cost. */
static void s_on_turn_completed(agent_stream_t *stream, json_t *event)
{
    json_t *usage = json_object_get(event, "usage");
    int64_t input = agent_stream_count(json_object_get(usage, "input_tokens"));
    int64_t cached = agent_stream_count(json_object_get(usage, "cached_input_tokens"));
    int64_t output = agent_stream_count(json_object_get(usage, "output_tokens"));
    if (cached > input)
        cached = input;
    json_t *result = json_pack(
        "{s:s, s:s, s:b, s:s, s:s, s:f, s:{s:I, s:i, s:I, s:I}, s:i}", "type", "result",
        "subtype", "success", "is_error", 0, "result", stream->text ? stream->text : "",
        "session_id", stream->session_id, "total_cost_usd", 0.0, "usage", "input_tokens",
        (json_int_t)(input - cached), "cache_creation_input_tokens", 0,
        "cache_read_input_tokens", (json_int_t)cached, "output_tokens", (json_int_t)output,
        "num_turns", 1);
    if (input > 0)
        stream->context_tokens = input;
    agent_stream_set_result(stream, result);
    json_decref(result);
}

/* The HTTP status a Codex error message names ("unexpected status 401 Unauthorized",
 * "last status: 429 Too Many Requests"), or 0. */
static int s_status_in(const char *message)
{
    static const char *const marks[] = {"unexpected status ", "last status: ", NULL};
    for (size_t i = 0; message != NULL && marks[i] != NULL; i++) {
        const char *at = strstr(message, marks[i]);
        int status = 0;
        if (at != NULL && sscanf(at + strlen(marks[i]), "%d", &status) == 1 && status >= 100 &&
            status < 1000)
            return status;
    }
    return 0;
}

/* A model API failure in a Codex message: a retry ("Reconnecting... N/M (<why>)") or the
 * final error. */
static void s_on_api_message(agent_stream_t *stream, const char *message)
{
    if (message != NULL)
        utf8_copy(stream->api_detail, sizeof stream->api_detail, message);
    if (agent_cli_mentions(message, CODEX_CONTEXT_FULL_TEXT)) {
        stream->api_error = AGENT_API_PROMPT_TOO_LONG;
        return;
    }
    if (agent_cli_mentions(message, CODEX_QUOTA_TEXT)) {
        agent_stream_api_failure(stream, 0, "billing_error", 0, 0, 0);
        return;
    }
    int status = s_status_in(message);
    bool disconnected = agent_cli_mentions(message, CODEX_DISCONNECTED_TEXT);
    if (status == 0 && !disconnected)
        return;
    int retry = 0, max = 0;
    if (message != NULL && strncmp(message, CODEX_RETRY_TEXT, strlen(CODEX_RETRY_TEXT)) == 0 &&
        sscanf(message + strlen(CODEX_RETRY_TEXT), "%d/%d", &retry, &max) != 2)
        retry = max = 0;
    agent_stream_api_failure(stream, status, disconnected ? "stream disconnected" : NULL, retry,
                             max, 0);
}

static void s_on_turn_failed(agent_stream_t *stream, const char *message)
{
    if (stream->api_error == AGENT_API_OK)
        s_on_api_message(stream, message);
    json_t *result =
        json_pack("{s:s, s:s, s:b, s:[s], s:s}", "type", "result", "subtype",
                  "error_during_execution", "is_error", 1, "errors", message ? message : "",
                  "session_id", stream->session_id);
    agent_stream_set_result(stream, result);
    json_decref(result);
}

static agent_stream_line_t s_read_event(agent_stream_t *stream, json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL)
        return AGENT_STREAM_EVENT;
    /* Who moves next: the model after the turn starts and after each item; a tool while
     * an item runs. */
    if (strcmp(type, "thread.started") == 0) {
        const char *id = json_string_value(json_object_get(event, "thread_id"));
        if (id != NULL && strlen(id) < sizeof stream->session_id)
            utf8_copy(stream->session_id, sizeof stream->session_id, id);
    } else if (strcmp(type, "turn.started") == 0) {
        stream->awaiting_model = true;
    } else if (strcmp(type, "item.started") == 0) {
        stream->awaiting_model = false;
    } else if (strcmp(type, "item.completed") == 0) {
        stream->awaiting_model = true;
        s_on_item(stream, json_object_get(event, "item"));
    } else if (strcmp(type, "turn.completed") == 0) {
        s_on_turn_completed(stream, event);
        return AGENT_STREAM_RESULT;
    } else if (strcmp(type, "turn.failed") == 0) {
        json_t *error = json_object_get(event, "error");
        s_on_turn_failed(stream, json_string_value(json_object_get(error, "message")));
        return AGENT_STREAM_RESULT;
    } else if (strcmp(type, "error") == 0) {
        /* Retries ("Reconnecting... 2/5") and the like: worth a log line, not a result. */
        const char *message = json_string_value(json_object_get(event, "message"));
        log_info("agent %s: codex: %s", stream->name ? stream->name : "", message ? message : "");
        s_on_api_message(stream, message);
    }
    return AGENT_STREAM_EVENT;
}

static agent_failure_kind_t s_classify(const char *stderr_tail, const char *result_text)
{
    if (agent_cli_mentions(stderr_tail, CODEX_LOST_TEXT))
        return AGENT_FAILURE_SESSION_LOST;
    if (agent_cli_mentions(stderr_tail, CODEX_NOT_LOGGED_IN_TEXT) ||
        agent_cli_mentions(stderr_tail, CODEX_UNAUTHORIZED_TEXT) ||
        agent_cli_mentions(result_text, CODEX_UNAUTHORIZED_TEXT))
        return AGENT_FAILURE_NOT_LOGGED_IN;
    return AGENT_FAILURE_OTHER;
}

static const char *const s_login_check[] = {"login", "status", NULL};
/* What Codex sets for the commands it runs: a runner started from inside Codex must not
 * pass them on (§5). */
static const char *const s_env_remove[] = {"CODEX_THREAD_ID", "CODEX_SESSION_ID",
                                           "CODEX_TOOL_CALL_ID", "CODEX_SANDBOX",
                                           "CODEX_SANDBOX_NETWORK_DISABLED", NULL};
/* What `codex exec` sends without `codex login` (OPENAI_API_KEY it ignores, §4-§5). */
static const char *const s_login_env[] = {"CODEX_API_KEY", "CODEX_ACCESS_TOKEN", NULL};

const agent_cli_t agent_cli_codex = {
    .name = "codex",
    .default_command = "codex",
    .names_sessions = true,
    .forks = true,
    .takes_system_prompt = false,
    .usage_is_thread_total = true, /* turn.completed.usage counts the whole thread (§2.3) */
    /* Offline or unauthenticated, `codex exec` retries for ever instead of failing: the
     * check says "Not logged in" in a moment (§4). */
    .login_check = s_login_check,
    .login_env = s_login_env,
    .login_hint = "run `codex login`, or set CODEX_API_KEY",
    .build_argv = s_build_argv,
    .read_event = s_read_event,
    .classify = s_classify,
    .session_exists = NULL,
    .env_remove = s_env_remove,
};
