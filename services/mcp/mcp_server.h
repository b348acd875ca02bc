/* mcp_server: the Model Context Protocol over stdio (JSON-RPC 2.0, one message per line),
 * as a coding agent (Claude Code, Codex, Gemini CLI) starts a local MCP server.
 *
 * What it answers: `initialize` (the client's protocol version when supported, else the
 * newest this server speaks), `ping`, `tools/list` (paged by `cursor`), `tools/call` (see
 * mcp_tools.h); notifications (`notifications/initialized`, `notifications/cancelled`)
 * get no answer. Errors as JSON-RPC says: a line that is not JSON -32700 (id null), not a
 * request object (a batch, a bad id, no method) -32600, an unknown method -32601, bad
 * params or an unknown tool -32602. A line over MCP_MAX_LINE bytes is refused (-32600)
 * and skipped to its end, never buffered. Nothing stops the server but the end of stdin. */
#ifndef CLOISTER_MCP_SERVER_H
#define CLOISTER_MCP_SERVER_H

#include "mcp_tools.h"

#include <jansson.h>
#include <stdio.h>

/* The longest message read: 4 MiB. */
#define MCP_MAX_LINE (4 * 1024 * 1024)

/* The protocol version answered when the client asks for one this server does not know. */
#define MCP_LATEST_VERSION "2025-11-25"

/* Answers one message (`line`, `len` bytes, no newline). Returns the response to write
 * (caller owns), or NULL when there is none (a notification, a response, a blank line). */
json_t *mcp_server_handle(const mcp_settings_t *settings, const char *line, size_t len);

/* Reads messages from `in_fd` and writes each response as one line to `out`, until the
 * end of input. Returns 0, or FAILURE_IO when reading or writing failed. */
int mcp_server_run(const mcp_settings_t *settings, int in_fd, FILE *out);

#endif
