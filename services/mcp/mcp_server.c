/* mcp_server: JSON-RPC framing and the MCP lifecycle methods (see mcp_server.h). */
#include "mcp_server.h"

#include "failure.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602

/* Tools per tools/list page: all of them today, but a client that sends the cursor it was
 * given always gets the rest. */
#define TOOLS_PAGE 50

/* Protocol versions this server speaks, newest first. */
static const char *const s_versions[] = {MCP_LATEST_VERSION, "2025-06-18", "2025-03-26",
                                         "2024-11-05", NULL};

static json_t *s_error(json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", message);
}

static json_t *s_result(json_t *id, json_t *result)
{
    if (result == NULL) /* a request is always answered, if only with why not */
        return s_error(id, -32603, "Internal error: out of memory");
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

static json_t *s_initialize(json_t *id, const json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = MCP_LATEST_VERSION;
    for (size_t i = 0; asked != NULL && s_versions[i] != NULL; i++) {
        if (strcmp(asked, s_versions[i]) == 0)
            version = s_versions[i];
    }
    const char *client = json_string_value(
        json_object_get(json_object_get(params, "clientInfo"), "name"));
    log_info("initialize: client %s asks for %s, answering %s", client ? client : "(unnamed)",
             asked ? asked : "(none)", version);
    return s_result(
        id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                      "capabilities", "tools", "listChanged", 0, "serverInfo", "name",
                      "cloister", "title", "Cloister", "version", CLOISTER_VERSION,
                      "instructions",
                      "Cloister runs specialist agents (review-agent, test-agent, merge-agent) "
                      "behind a durable queue. submit_task or request_review to publish work, "
                      "wait_task or task_status for its answer, run_tests to test a branch and "
                      "wait, request_merge to merge a reviewed branch (the review gate holds), "
                      "handoff_to to hand the current work to a specialist."));
}

static json_t *s_tools_list(json_t *id, const json_t *params)
{
    size_t start = 0;
    const json_t *cursor = json_object_get(params, "cursor");
    if (cursor != NULL && !json_is_null(cursor)) {
        const char *text = json_string_value(cursor);
        char *end = NULL;
        long value = text ? strtol(text, &end, 10) : -1;
        if (text == NULL || end == text || *end != '\0' || value < 0 ||
            (size_t)value > mcp_tools_count())
            return s_error(id, RPC_INVALID_PARAMS, "tools/list: unknown cursor");
        start = (size_t)value;
    }
    json_t *tools = json_array();
    size_t end = start + TOOLS_PAGE < mcp_tools_count() ? start + TOOLS_PAGE : mcp_tools_count();
    for (size_t i = start; i < end; i++)
        json_array_append_new(tools, mcp_tool_describe(i));
    json_t *result = json_pack("{s:o}", "tools", tools);
    if (end < mcp_tools_count()) {
        char next[32];
        snprintf(next, sizeof next, "%zu", end);
        json_object_set_new(result, "nextCursor", json_string(next));
    }
    return s_result(id, result);
}

static json_t *s_tools_call(const mcp_settings_t *settings, json_t *id, const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    if (name == NULL)
        return s_error(id, RPC_INVALID_PARAMS, "tools/call: params.name must be a tool's name");
    if (!mcp_tool_exists(name)) {
        char message[160];
        snprintf(message, sizeof message, "Unknown tool: %.100s", name);
        return s_error(id, RPC_INVALID_PARAMS, message);
    }
    json_t *arguments = json_object_get(params, "arguments");
    if (arguments != NULL && !json_is_object(arguments) && !json_is_null(arguments))
        return s_error(id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object");
    json_t *empty = json_object();
    json_t *result = mcp_tool_call(settings, name, json_is_object(arguments) ? arguments : empty);
    json_decref(empty);
    return s_result(id, result);
}

/* An id as JSON-RPC allows it here: a string or an integer (never null, a real or a bool). */
static bool s_valid_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

json_t *mcp_server_handle(const mcp_settings_t *settings, const char *line, size_t len)
{
    size_t blank = 0;
    while (blank < len && (line[blank] == ' ' || line[blank] == '\t' || line[blank] == '\r'))
        blank++;
    if (blank == len)
        return NULL;
    json_error_t parse;
    json_t *message = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &parse);
    if (message == NULL) {
        char text[256];
        snprintf(text, sizeof text, "Parse error: %s (column %d)", parse.text, parse.column);
        return s_error(NULL, RPC_PARSE_ERROR, text);
    }
    json_t *reply = NULL;
    json_t *id = json_object_get(message, "id");
    const char *method = json_string_value(json_object_get(message, "method"));
    const json_t *params = json_object_get(message, "params");
    if (!json_is_object(message)) {
        reply = s_error(NULL, RPC_INVALID_REQUEST,
                        json_is_array(message) ? "Invalid Request: batches are not supported"
                                               : "Invalid Request: not an object");
    } else if (id != NULL && !s_valid_id(id)) {
        reply = s_error(NULL, RPC_INVALID_REQUEST,
                        "Invalid Request: id must be a string or an integer");
    } else if (!json_is_string(json_object_get(message, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(message, "jsonrpc")), "2.0") != 0) {
        /* Not JSON-RPC 2.0: a request is told so; a notification or a response, which get
         * no answer, is dropped. */
        if (method != NULL && id != NULL)
            reply = s_error(id, RPC_INVALID_REQUEST,
                            "Invalid Request: \"jsonrpc\" must be \"2.0\"");
        else
            log_debug("a message without \"jsonrpc\": \"2.0\" dropped");
    } else if (method == NULL) {
        /* A response to us (we send no requests) is dropped; anything else is wrong. */
        if (id == NULL || (json_object_get(message, "result") == NULL &&
                           json_object_get(message, "error") == NULL))
            reply = s_error(id, RPC_INVALID_REQUEST, "Invalid Request: no method");
    } else if (id == NULL) {
        log_debug("notification %s", method);
    } else if (params != NULL && !json_is_object(params)) {
        reply = s_error(id, RPC_INVALID_PARAMS, "Invalid params: params must be an object");
    } else if (strcmp(method, "initialize") == 0) {
        reply = s_initialize(id, params);
    } else if (strcmp(method, "ping") == 0) {
        reply = s_result(id, json_object());
    } else if (strcmp(method, "tools/list") == 0) {
        reply = s_tools_list(id, params);
    } else if (strcmp(method, "tools/call") == 0) {
        reply = s_tools_call(settings, id, params);
    } else {
        char text[160];
        snprintf(text, sizeof text, "Method not found: %.100s", method);
        reply = s_error(id, RPC_METHOD_NOT_FOUND, text);
    }
    json_decref(message);
    return reply;
}

/* Writes one response as a line. Returns 0 or FAILURE_IO. */
static int s_write(FILE *out, json_t *reply)
{
    char *text = json_dumps(reply, JSON_COMPACT | JSON_ENSURE_ASCII);
    int rc = 0;
    if (text == NULL || fprintf(out, "%s\n", text) < 0 || fflush(out) != 0)
        rc = failure_set(FAILURE_IO, "writing a response: %s",
                         text ? strerror(errno) : "out of memory");
    free(text);
    return rc;
}

/* The bytes read and not yet handled. */
typedef struct {
    char *data;
    size_t len;
    bool skipping; /* inside a line over MCP_MAX_LINE: dropped up to its newline */
} line_buffer_t;

/* Handles every complete line in the buffer and keeps the rest. Returns 0 or FAILURE_IO. */
static int s_drain(const mcp_settings_t *settings, line_buffer_t *buf, FILE *out)
{
    size_t start = 0;
    int rc = 0;
    for (;;) {
        char *newline = memchr(buf->data + start, '\n', buf->len - start);
        if (newline == NULL)
            break;
        size_t len = (size_t)(newline - (buf->data + start));
        if (!buf->skipping) {
            json_t *reply = mcp_server_handle(settings, buf->data + start, len);
            if (reply != NULL)
                rc = s_write(out, reply);
            json_decref(reply);
        }
        buf->skipping = false;
        start += len + 1;
        if (rc != 0)
            return rc;
    }
    memmove(buf->data, buf->data + start, buf->len - start);
    buf->len -= start;
    if (buf->len >= MCP_MAX_LINE) {
        /* Refused once, then everything up to the next newline is dropped unread. */
        if (!buf->skipping) {
            json_t *reply = s_error(NULL, RPC_INVALID_REQUEST,
                                    "Invalid Request: message over 4 MiB refused");
            rc = s_write(out, reply);
            json_decref(reply);
            log_warn("a message over %d bytes was refused", MCP_MAX_LINE);
        }
        buf->skipping = true;
        buf->len = 0;
    }
    return rc;
}

int mcp_server_run(const mcp_settings_t *settings, int in_fd, FILE *out)
{
    line_buffer_t buf = {.data = malloc(MCP_MAX_LINE + 65536)};
    if (buf.data == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int rc = 0;
    while (rc == 0) {
        size_t room = MCP_MAX_LINE + 65536 - buf.len;
        ssize_t n = read(in_fd, buf.data + buf.len, room > 65536 ? 65536 : room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = failure_set(FAILURE_IO, "reading stdin: %s", strerror(errno));
            break;
        }
        if (n == 0) {
            /* A last message without its newline still counts. */
            if (buf.len > 0 && !buf.skipping) {
                json_t *reply = mcp_server_handle(settings, buf.data, buf.len);
                if (reply != NULL)
                    rc = s_write(out, reply);
                json_decref(reply);
            }
            break;
        }
        buf.len += (size_t)n;
        rc = s_drain(settings, &buf, out);
    }
    free(buf.data);
    return rc;
}
