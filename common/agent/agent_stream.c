/* agent_stream: reading the agent CLI's stream-json output (see agent_stream.h and
 * docs/agent-cli.md). */
#include "agent_stream.h"

#include "log.h"
#include "msgjson.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* Tool input summaries in progress events. */
#define AGENT_SUMMARY_MAX 160
/* What a NUL byte in a string of the agent's stream becomes: U+FFFD. */
#define AGENT_NUL_REPLACEMENT "\xEF\xBF\xBD"

void agent_stream_progress(agent_stream_t *stream, agent_progress_kind_t kind, const char *text,
                           const char *detail)
{
    if (stream->progress == NULL)
        return;
    agent_progress_t progress = {kind, text ? text : "", detail ? detail : ""};
    stream->progress(stream->progress_arg, &progress);
}

void agent_stream_tool_summary(char *out, size_t size, json_t *input)
{
    static const char *const keys[] = {"command",     "file_path", "path",  "pattern", "url",
                                       "description", "prompt",    "query", NULL};
    const char *text = NULL;
    char *dumped = NULL;
    for (int i = 0; keys[i] != NULL && text == NULL; i++)
        text = json_string_value(json_object_get(input, keys[i]));
    if (text == NULL && input != NULL)
        text = dumped = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
    utf8_copy(out, size, text ? text : "");
    for (char *p = out; *p; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    }
    free(dumped);
}

/* A count the CLI reports (tokens, turns, milliseconds), believed in 0..10^12: its output
 * is untrusted, a double outside int64's range cannot even be converted, and sums of
 * believable counts cannot overflow. Anything else counts as 0. */
int64_t agent_stream_count(const json_t *v)
{
    if (!json_is_number(v))
        return 0;
    double n = json_number_value(v);
    return n >= 0 && n <= 1e12 ? (int64_t)n : 0;
}

static int64_t s_usage_int(const json_t *usage, const char *key)
{
    return agent_stream_count(json_object_get(usage, key));
}

/* input + cache creation + cache read of a `usage` object: what the call read as input,
 * i.e. the size of the conversation it was given. */
int64_t agent_stream_input_tokens(const json_t *usage)
{
    return s_usage_int(usage, "input_tokens") +
           s_usage_int(usage, "cache_creation_input_tokens") +
           s_usage_int(usage, "cache_read_input_tokens");
}

static bool s_is(const char *text, const char *expected)
{
    return text != NULL && strcmp(text, expected) == 0;
}

/* An HTTP status the CLI reported (a number), or 0. */
static int s_status(const json_t *value)
{
    int64_t status = agent_stream_count(value);
    return status < 1000 ? (int)status : 0;
}

/* The failure an HTTP status and the CLI's name for it mean (docs/agent-cli.md §3.3). */
static agent_api_error_t s_api_error_kind(int status, const char *error)
{
    if (status == 401 || status == 402 || status == 403 || s_is(error, "authentication_failed") ||
        s_is(error, "billing_error") || s_is(error, "permission_error"))
        return AGENT_API_KEY_REFUSED;
    if (status == 429 || status == 503 || status == 529 || s_is(error, "rate_limit") ||
        s_is(error, "overloaded"))
        return AGENT_API_OVERLOADED;
    if (status >= 400 && status < 500)
        return AGENT_API_OK; /* the request itself was refused: the run's error says why */
    return AGENT_API_UNREACHABLE;
}

const char *agent_stream_api_error_name(agent_api_error_t error, int status)
{
    switch (error) {
    case AGENT_API_KEY_REFUSED: return "refused the key";
    case AGENT_API_OVERLOADED: return status == 429 ? "rate limited" : "overloaded";
    case AGENT_API_PROMPT_TOO_LONG: return "says the prompt is too long";
    case AGENT_API_UNREACHABLE: return "unreachable";
    case AGENT_API_TOO_SLOW: return "too slow";
    case AGENT_API_OK: break;
    }
    return "failing";
}

void agent_stream_api_failure(agent_stream_t *stream, int status, const char *error, int retry,
                              int max_retries, int64_t delay_ms)
{
    agent_api_error_t kind = s_api_error_kind(status, error);
    if (kind == AGENT_API_OK)
        return;
    if (status == 0 && s_is(error, "rate_limit"))
        status = 429; /* the API's rate_limit_error is its 429 */
    stream->api_error = kind;
    stream->api_status = status;
    char why[96];
    if (status > 0)
        snprintf(why, sizeof why, "HTTP %d%s%.40s", status, error ? " " : "", error ? error : "");
    else
        snprintf(why, sizeof why, "%.60s", error && !s_is(error, "unknown") ? error : "no answer");
    char text[256];
    if (kind == AGENT_API_KEY_REFUSED) {
        stream->api_stop = true;
        snprintf(text, sizeof text, "model API refused the key (%s): stopping the agent", why);
        agent_stream_progress(stream, AGENT_PROGRESS_API, text, "");
    } else if (retry > 0) {
        stream->api_retries = retry;
        stream->api_retry_delay_ms = delay_ms;
        stream->awaiting_model = true;
        int n = snprintf(text, sizeof text, "model API %s (%s): retry %d of %d",
                         agent_stream_api_error_name(kind, status), why, retry, max_retries);
        if (delay_ms > 0 && n > 0 && (size_t)n < sizeof text) /* a CLI may not say */
            snprintf(text + n, sizeof text - (size_t)n, " in %lld s",
                     (long long)((delay_ms + 500) / 1000));
        agent_stream_progress(stream, AGENT_PROGRESS_API, text, "");
    }
}

/* The first text block of an assistant message, or NULL. */
static const char *s_first_text(json_t *message)
{
    size_t i;
    json_t *block;
    json_array_foreach(json_object_get(message, "content"), i, block)
    {
        if (s_is(json_string_value(json_object_get(block, "type")), "text"))
            return json_string_value(json_object_get(block, "text"));
    }
    return NULL;
}

/* A synthetic assistant message says why the API call did not happen (§2, §3.3): no
 * credentials, a refused key, a conversation too long, the API's own failure. */
static void s_on_api_error_message(agent_stream_t *stream, json_t *event, const char *error)
{
    int status = s_status(json_object_get(event, "api_error_status"));
    const char *text = s_first_text(json_object_get(event, "message"));
    if (s_is(error, "authentication_failed") && status == 0) {
        stream->not_logged_in = true;
    } else if (text != NULL && strncmp(text, "Prompt is too long", 18) == 0) {
        stream->api_error = AGENT_API_PROMPT_TOO_LONG;
        stream->api_status = status;
    } else {
        agent_stream_api_failure(stream, status, error, 0, 0, 0);
    }
}

static void s_on_assistant(agent_stream_t *stream, json_t *event)
{
    stream->awaiting_model = false;
    const char *error = json_string_value(json_object_get(event, "error"));
    if (error != NULL)
        s_on_api_error_message(stream, event, error);
    json_t *message = json_object_get(event, "message");
    /* Each assistant message is one API call, and its usage is that call's alone: the input
     * side of the latest one is the conversation's current size. A subagent's calls
     * (parent_tool_use_id set) have their own context, and synthetic error messages carry
     * zero usage: neither replaces it. */
    json_t *parent = json_object_get(event, "parent_tool_use_id");
    int64_t context = agent_stream_input_tokens(json_object_get(message, "usage"));
    if ((parent == NULL || json_is_null(parent)) && context > 0)
        stream->context_tokens = context;

    json_t *content = json_object_get(message, "content");
    size_t i;
    json_t *block;
    json_array_foreach(content, i, block)
    {
        const char *type = json_string_value(json_object_get(block, "type"));
        if (type == NULL)
            continue;
        if (strcmp(type, "text") == 0) {
            const char *text = json_string_value(json_object_get(block, "text"));
            if (text != NULL && text[0] != '\0')
                agent_stream_progress(stream, AGENT_PROGRESS_TEXT, text, "");
        } else if (strcmp(type, "tool_use") == 0) {
            const char *name = json_string_value(json_object_get(block, "name"));
            char summary[AGENT_SUMMARY_MAX + 1];
            agent_stream_tool_summary(summary, sizeof summary, json_object_get(block, "input"));
            agent_stream_progress(stream, AGENT_PROGRESS_TOOL, name ? name : "tool", summary);
        }
    }
}

/* Replaces every NUL byte in the strings of `value` (and of everything it holds) with
 * U+FFFD, so that json_string_value() gives the whole text as a C string. */
static void s_scrub_nuls(json_t *value)
{
    if (json_is_string(value)) {
        const char *text = json_string_value(value);
        size_t len = json_string_length(value);
        if (strlen(text) == len)
            return;
        char *clean = malloc(3 * len + 1);
        if (clean == NULL)
            return;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == '\0') {
                memcpy(clean + n, AGENT_NUL_REPLACEMENT, 3);
                n += 3;
            } else {
                clean[n++] = text[i];
            }
        }
        json_string_setn_nocheck(value, clean, n);
        free(clean);
    } else if (json_is_object(value)) {
        const char *key;
        json_t *item;
        json_object_foreach(value, key, item)
        {
            s_scrub_nuls(item);
        }
    } else if (json_is_array(value)) {
        size_t i;
        json_t *item;
        json_array_foreach(value, i, item)
        {
            s_scrub_nuls(item);
        }
    }
}

/* The final result: the API failure it names, if no event named one before. */
static void s_on_result(agent_stream_t *stream, json_t *event)
{
    stream->awaiting_model = false;
    if (s_is(json_string_value(json_object_get(event, "terminal_reason")), "prompt_too_long")) {
        stream->api_error = AGENT_API_PROMPT_TOO_LONG;
    } else if (stream->api_error == AGENT_API_OK &&
               !json_is_false(json_object_get(event, "is_error"))) {
        int status = s_status(json_object_get(event, "api_error_status"));
        if (status > 0)
            agent_stream_api_failure(stream, status, NULL, 0, 0, 0);
    }
}

/* Claude Code's stream-json events (docs/agent-cli.md §2). */
static agent_stream_line_t s_claude_event(agent_stream_t *stream, json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    if (type == NULL)
        return AGENT_STREAM_EVENT; /* no type: nothing we know */
    if (strcmp(type, "assistant") == 0) {
        s_on_assistant(stream, event);
    } else if (strcmp(type, "user") == 0) {
        stream->awaiting_model = true; /* tool results go back to the model */
    } else if (strcmp(type, "result") == 0) {
        s_on_result(stream, event);
        agent_stream_set_result(stream, event);
        return AGENT_STREAM_RESULT;
    } else if (strcmp(type, "system") == 0) {
        const char *subtype = json_string_value(json_object_get(event, "subtype"));
        const char *version = json_string_value(json_object_get(event, "claude_code_version"));
        if (s_is(subtype, "init")) {
            stream->awaiting_model = true;
            if (version != NULL)
                utf8_copy(stream->cli_version, sizeof stream->cli_version, version);
        } else if (s_is(subtype, "model_fallback")) {
            char text[256];
            snprintf(text, sizeof text, "model API %s: switched from %.60s to %.60s",
                     s_is(json_string_value(json_object_get(event, "trigger")), "overloaded")
                         ? "overloaded"
                         : "failing",
                     json_string_value(json_object_get(event, "original_model"))
                         ? json_string_value(json_object_get(event, "original_model"))
                         : "?",
                     json_string_value(json_object_get(event, "fallback_model"))
                         ? json_string_value(json_object_get(event, "fallback_model"))
                         : "?");
            agent_stream_progress(stream, AGENT_PROGRESS_API, text, "");
        } else if (s_is(subtype, "api_retry")) {
            int64_t attempt = agent_stream_count(json_object_get(event, "attempt"));
            int64_t max = agent_stream_count(json_object_get(event, "max_retries"));
            agent_stream_api_failure(stream, s_status(json_object_get(event, "error_status")),
                                     json_string_value(json_object_get(event, "error")),
                                     attempt > 0 && attempt < 1000 ? (int)attempt : 1,
                                     max < 1000 ? (int)max : 0,
                                     agent_stream_count(json_object_get(event, "retry_delay_ms")));
        }
    }
    return AGENT_STREAM_EVENT;
}

agent_stream_line_t agent_stream_read(agent_stream_t *stream, const char *line, size_t len)
{
    if (len == 0)
        return AGENT_STREAM_SKIPPED;
    json_error_t error;
    /* A text may hold \u0000: take the line anyway, with each NUL made U+FFFD. */
    json_t *event = json_loadb(line, len, JSON_ALLOW_NUL, &error);
    s_scrub_nuls(event);
    if (!json_is_object(event)) {
        log_warn("agent %s: skipping a line that is not a JSON object: %.*s",
                 stream->name ? stream->name : "", (int)(len < 120 ? len : 120), line);
        json_decref(event);
        return AGENT_STREAM_SKIPPED;
    }
    agent_stream_event_fn *on_event = stream->on_event ? stream->on_event : s_claude_event;
    agent_stream_line_t kind = on_event(stream, event);
    json_decref(event);
    return kind;
}

void agent_stream_set_result(agent_stream_t *stream, json_t *result)
{
    json_decref(stream->result);
    stream->result = json_incref(result);
}

void agent_stream_add_text(agent_stream_t *stream, const char *text, bool paragraph)
{
    size_t had = stream->text ? strlen(stream->text) : 0;
    char *grown = realloc(stream->text, had + strlen(text) + 3);
    if (grown == NULL)
        return; /* the text is a convenience; the run goes on without the rest of it */
    grown[had] = '\0';
    if (paragraph && had > 0)
        strcat(grown, "\n\n");
    strcat(grown, text);
    stream->text = grown;
}

void agent_stream_reset(agent_stream_t *stream)
{
    json_decref(stream->result);
    stream->result = NULL;
    stream->context_tokens = 0;
    stream->session_id[0] = '\0';
    stream->not_logged_in = false;
    stream->api_error = AGENT_API_OK;
    stream->api_status = 0;
    stream->api_retries = 0;
    stream->api_retry_delay_ms = 0;
    stream->api_detail[0] = '\0';
    stream->api_stop = false;
    stream->awaiting_model = false;
    free(stream->text);
    stream->text = NULL;
}
