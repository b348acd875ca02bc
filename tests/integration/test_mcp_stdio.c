/* cloister-mcp's protocol handling over its real stdin/stdout: version negotiation, ping,
 * notifications, tools/list paging, and garbage -- invalid JSON, batches, wrong types,
 * huge ids, unknown methods, a line over 4 MiB -- each answered with its JSON-RPC error
 * while the server goes on answering. Inside a task (--task, --handoff-file) handoff_to
 * writes the chained next task to the handoff file (a specialist the broker does not know
 * is refused at once), and a tool whose broker does not answer is a tool error, not a
 * hang. */
#include "check.h"
#include "clock.h"
#include "testbroker.h"
#include "testenv.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char s_out[1 << 20];

/* Runs cloister-mcp (with `flags`, a shell word list) on the input file; the responses, one
 * per line, in s_out. Returns the exit code. */
static int s_serve(testenv_t *env, const char *input, const char *flags)
{
    char script[2048];
    snprintf(script, sizeof script, "exec \"$0\" %s < \"$1\" 2>/dev/null", flags);
    char *argv[] = {"/bin/sh", "-c", script, (char *)testenv_bin("cloister-mcp"), (char *)input,
                    NULL};
    return testenv_run(env, argv, s_out, sizeof s_out, 30000);
}

/* Response number `n` (0-based) of s_out, parsed (caller frees), or NULL. */
static json_t *s_response(int n)
{
    const char *line = s_out;
    for (int i = 0; i < n && line != NULL; i++) {
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    if (line == NULL || *line == '\0')
        return NULL;
    return json_loadb(line, strcspn(line, "\n"), 0, NULL);
}

static int s_lines(void)
{
    int n = 0;
    for (const char *c = s_out; *c; c++)
        n += *c == '\n';
    return n;
}

static json_int_t s_error_code(const json_t *response)
{
    return json_integer_value(json_object_get(json_object_get(response, "error"), "code"));
}

/* Checks that response `n` is the error `code` with the `id` (a JSON text: "null", "7"). */
static void s_expect_error(int n, int code, const char *id)
{
    json_t *response = s_response(n);
    CHECK(response != NULL);
    json_t *expected = json_loads(id, JSON_DECODE_ANY, NULL);
    if (s_error_code(response) != code || !json_equal(json_object_get(response, "id"), expected)) {
        char *text = json_dumps(response, JSON_COMPACT);
        fprintf(stderr, "response %d: %s (expected error %d, id %s)\n", n, text, code, id);
        free(text);
    }
    CHECK_INT((int)s_error_code(response), code);
    CHECK(json_equal(json_object_get(response, "id"), expected));
    json_decref(expected);
    json_decref(response);
}

static void test_garbage(testenv_t *env, const char *input)
{
    FILE *file = fopen(input, "w");
    CHECK(file != NULL);
    fputs("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
          "\"1999-01-01\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}\n"
          "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
          "this is not json\n"
          "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}]\n"
          "{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999999999,\"method\":\"ping\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":42}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":[1]}\n"
          "\"just a string\"\n"
          "\n",
          file);
    /* A line over 4 MiB: refused without being kept, and the next line is answered. */
    fputs("{\"padding\": \"", file);
    for (int i = 0; i < 5 * 1024 * 1024; i++)
        fputc('x', file);
    fputs("\"}", file);
    fputs("\n{\"jsonrpc\":\"2.0\",\"id\":\"after\",\"method\":\"ping\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{\"cursor\":\"8\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\",\"params\":{\"cursor\":\"x\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
          "\"2025-06-18\"}}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":10,\"result\":{}}\n"
          "{\"id\":12,\"method\":\"ping\"}\n"
          "{\"jsonrpc\":\"1.0\",\"id\":13,\"method\":\"ping\"}\n"
          "{\"method\":\"notifications/initialized\"}\n"
          "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}",
          file);
    fclose(file);

    CHECK_INT(s_serve(env, input, ""), 0);
    json_t *init = s_response(0);
    CHECK(init != NULL);
    const json_t *result = json_object_get(init, "result");
    CHECK_STR(json_string_value(json_object_get(result, "protocolVersion")), "2025-11-25");
    CHECK_STR(json_string_value(json_object_get(json_object_get(result, "serverInfo"), "name")),
              "cloister");
    CHECK(json_is_object(json_object_get(json_object_get(result, "capabilities"), "tools")));
    json_decref(init);
    s_expect_error(1, -32700, "null");  /* not JSON */
    s_expect_error(2, -32600, "null");  /* a batch */
    s_expect_error(3, -32700, "null");  /* an id too big for any integer */
    s_expect_error(4, -32600, "null");  /* an id that is an object */
    s_expect_error(5, -32601, "3");     /* an unknown method */
    s_expect_error(6, -32600, "4");     /* a method that is not a string */
    s_expect_error(7, -32602, "5");     /* an unknown tool */
    s_expect_error(8, -32602, "6");     /* params not an object */
    s_expect_error(9, -32600, "null");  /* not an object */
    s_expect_error(10, -32600, "null"); /* over 4 MiB */
    json_t *after = s_response(11);
    CHECK_STR(json_string_value(json_object_get(after, "id")), "after");
    CHECK(json_is_object(json_object_get(after, "result")));
    json_decref(after);
    json_t *page = s_response(12);
    const json_t *tools = json_object_get(json_object_get(page, "result"), "tools");
    CHECK_INT((int)json_array_size(tools), 4); /* tools 8 to 11 of 12 */
    json_decref(page);
    s_expect_error(13, -32602, "8");
    json_t *again = s_response(14);
    CHECK_STR(json_string_value(json_object_get(json_object_get(again, "result"),
                                                "protocolVersion")),
              "2025-06-18");
    json_decref(again);
    /* Without "jsonrpc": "2.0" a request is refused (it was answered as if it had it); the
     * notification without it gets no answer. */
    s_expect_error(15, -32600, "12");
    s_expect_error(16, -32600, "13");
    json_t *last = s_response(17); /* the response to us (id 10) got no answer */
    CHECK_INT((int)json_integer_value(json_object_get(last, "id")), 11);
    json_decref(last);
    CHECK_INT(s_lines(), 18);
}

/* Inside a task, handoff_to writes the next task to the handoff file: nothing is submitted. */
static void test_handoff_in_task(testenv_t *env, const char *input)
{
    char handoff[600], flags[1024];
    snprintf(handoff, sizeof handoff, "%s/handoff.jsonl", env->dir);
    snprintf(flags, sizeof flags, "--task parent-7 --handoff-file '%s'", handoff);
    CHECK(testenv_write_file(
              input,
              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"handoff_to\",\"arguments\":{\"specialist\":\"test-agent\",\"message\":\"run the "
              "tests\",\"context\":\"the parser changed\",\"branch\":\"feature\",\"issue\":\"I-9\"}}}\n"
              "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"handoff_to\",\"arguments\":{\"specialist\":\"Not A Name\",\"message\":\"x\"}}}\n"
              "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
              "\"handoff_to\",\"arguments\":{\"specialist\":\"nobody-agent\",\"message\":\"x\"}}}\n") == 0);
    CHECK_INT(s_serve(env, input, flags), 0);
    json_t *first = s_response(0);
    const json_t *result = json_object_get(first, "result");
    CHECK(json_is_false(json_object_get(result, "isError")));
    const json_t *structured = json_object_get(result, "structuredContent");
    CHECK_STR(json_string_value(json_object_get(structured, "chainedTo")), "parent-7");
    const char *id = json_string_value(json_object_get(structured, "id"));
    CHECK(id != NULL && strlen(id) == 36);

    json_error_t error;
    json_t *submit = json_load_file(handoff, JSON_DISABLE_EOF_CHECK, &error);
    CHECK(submit != NULL);
    CHECK_STR(json_string_value(json_object_get(submit, "id")), id);
    CHECK_STR(json_string_value(json_object_get(submit, "specialist")), "test-agent");
    CHECK_STR(json_string_value(json_object_get(submit, "issue")), "I-9");
    const json_t *payload = json_object_get(submit, "payload");
    CHECK_STR(json_string_value(json_object_get(payload, "task")), "run the tests");
    CHECK_STR(json_string_value(json_object_get(payload, "branch")), "feature");
    CHECK_STR(json_string_value(json_object_get(json_object_get(payload, "handoff"), "context")),
              "the parser changed");
    json_decref(submit);
    json_decref(first);

    json_t *second = s_response(1);
    result = json_object_get(second, "result");
    CHECK(json_is_true(json_object_get(result, "isError")));
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
    CHECK(text != NULL && strstr(text, "invalid specialist name") != NULL);
    json_decref(second);
    /* A specialist the broker does not know: refused now, not when the result comes. */
    json_t *third = s_response(2);
    result = json_object_get(third, "result");
    CHECK(json_is_true(json_object_get(result, "isError")));
    text = json_string_value(
        json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
    CHECK(text != NULL && strstr(text, "unknown specialist 'nobody-agent'") != NULL);
    json_decref(third);
    /* Only the accepted handoff is in the file. */
    char *lines = testenv_read_file(handoff);
    CHECK(lines != NULL && strchr(lines, '\n') == lines + strlen(lines) - 1);
    free(lines);
}

/* No broker: a tool that needs it says so at once (not after the control deadline), and
 * how to start Cloister; over tcp too (a port nothing listens on). */
static void test_no_broker(testenv_t *env, const char *input)
{
    CHECK(testenv_write_file(input, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\","
                                    "\"params\":{\"name\":\"task_status\",\"arguments\":"
                                    "{\"id\":\"t1\"}}}\n"
                                    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                                    "\"params\":{\"name\":\"list_tasks\","
                                    "\"arguments\":{}}}\n") == 0);
    static const char *const flags[] = {"", "--control tcp://127.0.0.1:1"};
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        int64_t start = clock_now_ms();
        CHECK_INT(s_serve(env, input, flags[f]), 0);
        CHECK(clock_now_ms() - start < 2000); /* two calls, each far below the 3 s deadline */
        for (int n = 0; n < 2; n++) {
            json_t *response = s_response(n);
            const json_t *result = json_object_get(response, "result");
            CHECK(json_is_true(json_object_get(result, "isError")));
            const char *text = json_string_value(
                json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
            CHECK(text != NULL && strncmp(text, "Cloister is not running", 23) == 0 &&
                  strstr(text, "deploy/run-local.sh") != NULL);
            json_decref(response);
        }
    }
}

int main(void)
{
    testenv_t *env = testenv_new("mcp-stdio");
    CHECK(env != NULL);
    char input[600];
    snprintf(input, sizeof input, "%s/input.jsonl", env->dir);
    test_garbage(env, input);
    test_no_broker(env, input);
    CHECK(testbroker_start(env, 0, NULL) > 0);
    test_handoff_in_task(env, input);
    testenv_destroy(&env);
    return check_exit_code("test_mcp_stdio");
}
