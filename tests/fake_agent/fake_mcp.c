/* fake_mcp: one MCP tool call over stdio, as the real CLI makes it (see fake_mcp.h). */
#include "fake_mcp.h"

#include "failure.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const json_t *s_configs;

void fake_mcp_set_configs(const json_t *configs)
{
    s_configs = configs;
}

/* The server's entry ({command, args, env}) in the configs, or NULL. New reference. */
static json_t *s_find_server(const char *server)
{
    size_t i;
    const json_t *given;
    json_array_foreach(s_configs, i, given)
    {
        const char *text = json_string_value(given);
        json_t *config = text && text[0] == '{' ? json_loads(text, 0, NULL)
                                                : json_load_file(text ? text : "", 0, NULL);
        json_t *entry = json_object_get(json_object_get(config, "mcpServers"), server);
        json_incref(entry);
        json_decref(config);
        if (entry != NULL)
            return entry;
    }
    return NULL;
}

/* Starts the server with stdin/stdout on pipes. Returns its pid or -1. */
static pid_t s_start(const json_t *entry, FILE **to, FILE **from)
{
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        const char *key;
        const json_t *value;
        json_object_foreach((json_t *)json_object_get(entry, "env"), key, value)
            setenv(key, json_string_value(value) ? json_string_value(value) : "", 1);
        const json_t *args = json_object_get(entry, "args");
        char *argv[64];
        size_t n = 0;
        argv[n++] = (char *)json_string_value(json_object_get(entry, "command"));
        for (size_t i = 0; i < json_array_size(args) && n < 63; i++)
            argv[n++] = (char *)json_string_value(json_array_get(args, i));
        argv[n] = NULL;
        execvp(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = fdopen(in[1], "w");
    *from = fdopen(out[0], "r");
    return pid;
}

/* Sends one message and, for a request, reads lines until the answer with `id`. */
static json_t *s_exchange(FILE *to, FILE *from, json_t *message, int id)
{
    char *text = json_dumps(message, JSON_COMPACT);
    json_decref(message);
    fprintf(to, "%s\n", text);
    fflush(to);
    free(text);
    if (id < 0)
        return NULL;
    char *line = NULL;
    size_t size = 0;
    json_t *answer = NULL;
    while (answer == NULL && getline(&line, &size, from) > 0) {
        json_t *candidate = json_loads(line, 0, NULL);
        if (json_integer_value(json_object_get(candidate, "id")) == id)
            answer = candidate;
        else
            json_decref(candidate);
    }
    free(line);
    return answer;
}

int fake_mcp_call(const char *server, const char *tool, const json_t *arguments, json_t **result)
{
    *result = NULL;
    json_t *entry = s_find_server(server);
    if (entry == NULL)
        return failure_set(FAILURE_NOT_FOUND, "no MCP server '%s' in --mcp-config", server);
    const char *refused = json_string_value(json_object_get(entry, "refused"));
    if (refused != NULL) {
        int rc = failure_set(FAILURE_DENIED, "%s", refused);
        json_decref(entry);
        return rc;
    }
    FILE *to = NULL, *from = NULL;
    pid_t pid = s_start(entry, &to, &from);
    json_decref(entry);
    if (pid < 0 || to == NULL || from == NULL)
        return failure_set(FAILURE_IO, "cannot start MCP server '%s': %s", server, strerror(errno));
    json_t *init = s_exchange(
        to, from,
        json_pack("{s:s, s:i, s:s, s:{s:s, s:{}, s:{s:s, s:s}}}", "jsonrpc", "2.0", "id", 1,
                  "method", "initialize", "params", "protocolVersion", "2025-06-18",
                  "capabilities", "clientInfo", "name", "fake-claude", "version", "1"),
        1);
    json_t *answer = NULL;
    if (init != NULL) {
        s_exchange(to, from,
                   json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/initialized"),
                   -1);
        answer = s_exchange(to, from,
                            json_pack("{s:s, s:i, s:s, s:{s:s, s:O}}", "jsonrpc", "2.0", "id", 2,
                                      "method", "tools/call", "params", "name", tool, "arguments",
                                      arguments),
                            2);
    }
    fclose(to);
    fclose(from);
    int status = 0;
    waitpid(pid, &status, 0);
    int rc = 0;
    if (init == NULL || answer == NULL)
        rc = failure_set(FAILURE_IO, "MCP server '%s' did not answer (exit status %d)", server,
                         status);
    else if (json_object_get(answer, "error") != NULL)
        rc = failure_set(FAILURE_INVALID, "MCP error: %s",
                         json_string_value(json_object_get(json_object_get(answer, "error"),
                                                           "message")));
    else
        *result = json_incref(json_object_get(answer, "result"));
    json_decref(init);
    json_decref(answer);
    return rc;
}
