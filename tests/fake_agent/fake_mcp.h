/* fake_mcp: the part of the fake claude that, like the real CLI, starts a stdio MCP server
 * named in its --mcp-config files and calls one of its tools (initialize,
 * notifications/initialized, tools/call), so a test can see a specialist's agent use
 * cloister-mcp for real. */
#ifndef FAKE_MCP_H
#define FAKE_MCP_H

#include <jansson.h>

/* The --mcp-config files (a JSON array of paths or inline JSON texts; borrowed). A server
 * whose entry has a "refused" text is never started: a call of it fails with that text (a
 * fake's own rule, e.g. fake-codex's approval policy). */
void fake_mcp_set_configs(const json_t *configs);

/* Calls `tool` of server `server` with `arguments` (an object). On 0, *result is the
 * CallToolResult (caller owns). Returns FAILURE_NOT_FOUND (no such server in the configs),
 * FAILURE_IO (it could not be started or did not answer), FAILURE_INVALID (it answered
 * with a JSON-RPC error) or FAILURE_DENIED (refused, above), with the reason. */
int fake_mcp_call(const char *server, const char *tool, const json_t *arguments, json_t **result);

#endif
