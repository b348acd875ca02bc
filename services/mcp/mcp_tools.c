/* mcp_tools: the tools, their schemas and their calls (see mcp_tools.h). */
#include "mcp_tools.h"
#include "pan_run.h"
#include "mcp_patch.h"

#include "client.h"
#include "clock.h"
#include "failure.h"
#include "handoff.h"
#include "listener.h"
#include "msgjson.h"
#include "utf8.h"
#include "verdict.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest a tool waits for a task, and the default. */
#define WAIT_MAX_S 3600
#define WAIT_DEFAULT_S 300
/* Seconds pan gets beyond a wait, to start and to print. */
#define PAN_SLACK_S 30

typedef json_t *(tool_fn)(const mcp_settings_t *settings, const json_t *args);

typedef struct {
    const char *name;
    const char *title;
    const char *description;
    const char *schema; /* JSON Schema of the arguments */
    tool_fn *call;
} tool_t;

/* ---- results ---- */

/* A successful result: `structured` (stolen) and a readable text (printf). */
static json_t *s_ok(json_t *structured, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *s_ok(json_t *structured, const char *fmt, ...)
{
    char text[8192];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    return json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", text,
                     "structuredContent", structured ? structured : json_object(), "isError", 0);
}

/* Longest JSON put in a result's text; the rest is in structuredContent only. */
#define DATA_TEXT_MAX (256 * 1024)

/* A successful result whose text is `summary` then `data` as JSON (cut at DATA_TEXT_MAX,
 * saying so), so a client that reads only the text has the data too; `structured` is
 * stolen. */
static json_t *s_ok_data(json_t *structured, const char *summary, const json_t *data)
{
    char *json = json_dumps(data, JSON_COMPACT);
    char *text = NULL;
    size_t len = json ? strlen(json) : 0;
    if (len > DATA_TEXT_MAX)
        len = utf8_cut(json, DATA_TEXT_MAX);
    if (asprintf(&text, "%s\n%.*s%s", summary, (int)len, json ? json : "[]",
                 json && len < strlen(json) ? "\n(cut: structuredContent has all of it)" : "") < 0)
        text = NULL;
    json_t *result = json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text",
                               text ? text : summary, "structuredContent",
                               structured ? structured : json_object(), "isError", 0);
    free(text);
    free(json);
    return result;
}

/* A tool error: the reason as text, isError true. */
static json_t *s_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *s_error(const char *fmt, ...)
{
    char text[8192];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError",
                     1);
}

static const char *s_str(const json_t *object, const char *key)
{
    return json_string_value(json_object_get(object, key));
}

/* pan's complaint as a tool's: its "pan: " prefixes and usage lines dropped, and its flags
 * named as the tool's arguments ("--force" is `force: true`). */
static json_t *s_tool_error(const char *pan_error)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return s_error("%s", pan_error);
    bool usage = false, first = true;
    for (const char *line = pan_error; *line != '\0';) {
        size_t n = strcspn(line, "\n");
        /* A usage text and its indented continuation lines say how to run pan, not MCP. */
        if (strncmp(line, "usage:", 6) == 0)
            usage = true;
        else if (line[0] != ' ')
            usage = false;
        if (!usage && n > 0) {
            const char *at = line;
            size_t left = n;
            if (left >= 5 && strncmp(at, "pan: ", 5) == 0) {
                at += 5;
                left -= 5;
            }
            fputs(first ? "" : "\n", f);
            first = false;
            for (size_t i = 0; i < left; i++) {
                if (left - i >= 7 && strncmp(at + i, "--force", 7) == 0) {
                    fputs("`force: true`", f);
                    i += 6;
                } else {
                    fputc(at[i], f);
                }
            }
        }
        line += n;
        line += *line == '\n';
    }
    json_t *error = fclose(f) == 0 ? s_error("%s", text && text[0] ? text : pan_error)
                                   : s_error("%s", pan_error);
    free(text);
    return error;
}

static json_int_t s_int(const json_t *object, const char *key, json_int_t fallback)
{
    const json_t *value = json_object_get(object, key);
    return json_is_integer(value) ? json_integer_value(value) : fallback;
}

/* ---- checking arguments against the schema ---- */

/* Checks one value against its property schema. Returns NULL or why not (static text). */
static const char *s_check_value(const json_t *property, const json_t *value, char *why,
                                 size_t size)
{
    const char *type = s_str(property, "type");
    bool fits = type == NULL || (strcmp(type, "string") == 0 && json_is_string(value)) ||
                (strcmp(type, "integer") == 0 && json_is_integer(value)) ||
                (strcmp(type, "boolean") == 0 && json_is_boolean(value)) ||
                (strcmp(type, "object") == 0 && json_is_object(value));
    if (!fits) {
        snprintf(why, size, "must be %s %s", type[0] == 'i' ? "an" : "a", type);
        return why;
    }
    const json_t *options = json_object_get(property, "enum");
    if (options != NULL) {
        size_t i;
        const json_t *option;
        json_array_foreach(options, i, option)
        {
            if (json_equal(option, value))
                return NULL;
        }
        snprintf(why, size, "must be one of the schema's values");
        return why;
    }
    json_int_t number = json_integer_value(value);
    const json_t *min = json_object_get(property, "minimum");
    const json_t *max = json_object_get(property, "maximum");
    if (json_is_integer(value) && ((min && number < json_integer_value(min)) ||
                                   (max && number > json_integer_value(max)))) {
        snprintf(why, size, "must be from %lld to %lld",
                 (long long)(min ? json_integer_value(min) : 0),
                 (long long)(max ? json_integer_value(max) : 0));
        return why;
    }
    const json_t *longest = json_object_get(property, "maxLength");
    if (json_is_string(value) && longest &&
        json_string_length(value) > (size_t)json_integer_value(longest)) {
        snprintf(why, size, "is longer than %lld bytes", (long long)json_integer_value(longest));
        return why;
    }
    return NULL;
}

/* Checks `args` against `schema`: required properties present, known ones only, each of
 * its type. Returns NULL, or a tool error saying which argument is wrong. */
static json_t *s_check_arguments(const json_t *schema, const json_t *args)
{
    const json_t *properties = json_object_get(schema, "properties");
    size_t i;
    const json_t *name;
    json_array_foreach(json_object_get(schema, "required"), i, name)
    {
        if (json_object_get(args, json_string_value(name)) == NULL)
            return s_error("missing required argument '%s'", json_string_value(name));
    }
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)args, key, value)
    {
        const json_t *property = json_object_get(properties, key);
        if (property == NULL)
            return s_error("unknown argument '%.100s'", key);
        char why[128];
        if (s_check_value(property, value, why, sizeof why) != NULL)
            return s_error("argument '%s' %s", key, why);
    }
    return NULL;
}

/* ---- through pan ---- */

/* Appends "--flag value" to argv when `value` is set. */
static void s_flag(const char **argv, size_t *n, const char *flag, const char *value)
{
    if (value != NULL && value[0] != '\0') {
        argv[(*n)++] = flag;
        argv[(*n)++] = value;
    }
}

/* pan_run() with this server's pan and broker. */
static int s_run_pan(const mcp_settings_t *settings, const char **argv, int timeout_s,
                     pan_run_t *run)
{
    pan_run_settings_t pan = {.pan = settings->pan,
                              .control_ep = settings->control_ep,
                              .events_ep = settings->events_ep,
                              .in_ep = settings->in_ep};
    return pan_run(&pan, argv, timeout_s, run);
}

/* Runs pan; returns its answer (a new reference) and sets *exit_code, or NULL with *error
 * set to a tool error (pan could not run, said no, or printed no JSON). */
static json_t *s_pan(const mcp_settings_t *settings, const char **argv, int timeout_s,
                     int *exit_code, json_t **error)
{
    pan_run_t run;
    int rc = s_run_pan(settings, argv, timeout_s, &run);
    json_t *answer = rc == 0 ? pan_run_answer(&run) : NULL;
    *exit_code = run.exit_code;
    *error = NULL;
    if (rc != 0)
        *error = s_tool_error(run.error);
    else if (answer == NULL || run.exit_code == VERDICT_EXIT_USAGE ||
             run.exit_code == VERDICT_EXIT_UNREACHABLE)
        *error = s_tool_error(run.error[0] ? run.error : "pan gave no answer");
    else if (run.exit_code == 1 && !json_is_object(answer))
        *error = s_tool_error(run.error);
    json_incref(*error ? NULL : answer);
    pan_run_clear(&run);
    return *error ? NULL : answer;
}

/* `pan submit <specialist> --json` with the arguments that are pan's flags. */
static json_t *s_submit_with(const mcp_settings_t *settings, const char *specialist,
                             const json_t *args, const json_t *payload)
{
    const char *argv[48];
    size_t n = 0;
    char attempts[32] = "", timeout[32] = "";
    if (json_object_get(args, "max_attempts"))
        snprintf(attempts, sizeof attempts, "%lld", (long long)s_int(args, "max_attempts", 0));
    if (json_object_get(args, "timeout_s"))
        snprintf(timeout, sizeof timeout, "%lld", (long long)s_int(args, "timeout_s", 0));
    char *payload_text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
    argv[n++] = "submit";
    argv[n++] = specialist;
    argv[n++] = "--json";
    s_flag(argv, &n, "--source", settings->source);
    static const char *const flags[][2] = {
        {"priority", "--priority"}, {"issue", "--issue"},   {"workspace", "--workspace"},
        {"branch", "--branch"},     {"target", "--target"}, {"title", "--title"},
        {"description", "--description"}, {"group", "--group"}, {"id", "--id"},
        {"pr_url", "--pr-url"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        s_flag(argv, &n, flags[i][1], s_str(args, flags[i][0]));
    s_flag(argv, &n, "--max-attempts", attempts);
    s_flag(argv, &n, "--timeout", timeout);
    s_flag(argv, &n, "--payload", payload_text);
    argv[n] = NULL;
    int code;
    json_t *error = NULL;
    json_t *task = s_pan(settings, argv, PAN_SLACK_S, &code, &error);
    free(payload_text);
    if (task == NULL)
        return error;
    json_t *result = s_ok(json_pack("{s:O}", "task", task), "Task %s queued for %s (state %s)",
                          s_str(task, "id"), s_str(task, "specialist"), s_str(task, "state"));
    json_decref(task);
    return result;
}

static json_t *s_submit_task(const mcp_settings_t *settings, const json_t *args)
{
    return s_submit_with(settings, s_str(args, "specialist"), args,
                         json_object_get(args, "payload"));
}

static json_t *s_pan_wait(const mcp_settings_t *settings, const char **argv, const char *id,
                          int timeout_s);

/* request_review: queued, or with `wait` followed to its end (as run_tests). */
static json_t *s_request_review(const mcp_settings_t *settings, const json_t *args)
{
    if (!json_is_true(json_object_get(args, "wait")))
        return s_submit_with(settings, "review-agent", args, NULL);
    int timeout_s = (int)s_int(args, "timeout_s", WAIT_DEFAULT_S);
    char timeout[32], id[CLIENT_ID_SIZE];
    snprintf(timeout, sizeof timeout, "%d", timeout_s);
    client_new_id(id, sizeof id);
    const char *argv[40];
    size_t n = 0;
    argv[n++] = "submit";
    argv[n++] = "review-agent";
    argv[n++] = "--id";
    argv[n++] = id;
    s_flag(argv, &n, "--source", settings->source);
    static const char *const flags[][2] = {
        {"workspace", "--workspace"}, {"branch", "--branch"},     {"target", "--target"},
        {"issue", "--issue"},         {"title", "--title"},       {"description", "--description"},
        {"pr_url", "--pr-url"},       {"priority", "--priority"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        s_flag(argv, &n, flags[i][1], s_str(args, flags[i][0]));
    argv[n++] = "--wait";
    argv[n++] = "--wait-timeout";
    argv[n++] = timeout;
    argv[n++] = "--json";
    argv[n] = NULL;
    return s_pan_wait(settings, argv, id, timeout_s);
}

/* How a waited-for task ended: the task, and its verdict (common/bus/verdict.h) as the
 * top-level `verdict` an agent tests, in the structured result and the text's first line. */
static json_t *s_ended(json_t *task, int exit_code, const char *id, int timeout_s)
{
    if (exit_code == VERDICT_EXIT_TIMEOUT)
        return s_ok(json_pack("{s:s, s:b, s:s}", "id", id, "timedOut", 1, "verdict",
                              verdict_name(VERDICT_TIMEOUT)),
                    "Task %s is still running after %d s (verdict timeout); call wait_task "
                    "again to keep waiting",
                    id, timeout_s);
    const char *verdict = verdict_name(verdict_of_task(task));
    const json_t *result = json_object_get(task, "result");
    char *text = json_dumps(result ? result : json_object(), JSON_COMPACT);
    json_t *answer = s_ok(json_pack("{s:O, s:s}", "task", task, "verdict", verdict),
                          "Task %s %s (verdict %s)%s%s\nresult: %s", s_str(task, "id"),
                          s_str(task, "state"), verdict, s_str(task, "error") ? ": " : "",
                          s_str(task, "error") ? s_str(task, "error") : "", text ? text : "{}");
    free(text);
    return answer;
}

/* Runs a waiting pan (`task wait`, `submit --wait`) for task `id` and says how it ended,
 * or that the time ran out (pan's exit 4, VERDICT_EXIT_TIMEOUT). */
static json_t *s_pan_wait(const mcp_settings_t *settings, const char **argv, const char *id,
                          int timeout_s)
{
    int code;
    json_t *error = NULL;
    json_t *task = s_pan(settings, argv, timeout_s + PAN_SLACK_S, &code, &error);
    if (task == NULL && code != VERDICT_EXIT_TIMEOUT)
        return error;
    json_decref(error);
    json_t *result = s_ended(task, code, id, timeout_s);
    json_decref(task);
    return result;
}

static json_t *s_wait_task(const mcp_settings_t *settings, const json_t *args)
{
    /* pan reads it as an argument: one that starts with '-' would be one of its options. */
    if (s_str(args, "id")[0] == '-')
        return s_error("'id' must be a task id, not '%s'", s_str(args, "id"));
    int timeout_s = (int)s_int(args, "timeout_s", WAIT_DEFAULT_S);
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", timeout_s);
    const char *id = s_str(args, "id");
    const char *argv[] = {"task", "wait", id, "--timeout", timeout, "--json", NULL};
    return s_pan_wait(settings, argv, id, timeout_s);
}

static json_t *s_run_tests(const mcp_settings_t *settings, const json_t *args)
{
    int timeout_s = (int)s_int(args, "timeout_s", WAIT_DEFAULT_S);
    char timeout[32], id[CLIENT_ID_SIZE];
    snprintf(timeout, sizeof timeout, "%d", timeout_s);
    client_new_id(id, sizeof id);
    json_t *payload = json_object();
    if (s_str(args, "commit") != NULL)
        json_object_set_new(payload, "commit", json_string(s_str(args, "commit")));
    char *payload_text = json_dumps(payload, JSON_COMPACT);
    json_decref(payload);
    const char *argv[32];
    size_t n = 0;
    argv[n++] = "submit";
    argv[n++] = "test-agent";
    argv[n++] = "--id";
    argv[n++] = id;
    s_flag(argv, &n, "--source", settings->source);
    s_flag(argv, &n, "--workspace", s_str(args, "workspace"));
    s_flag(argv, &n, "--branch", s_str(args, "branch"));
    s_flag(argv, &n, "--issue", s_str(args, "issue"));
    s_flag(argv, &n, "--payload", payload_text);
    argv[n++] = "--wait";
    argv[n++] = "--wait-timeout";
    argv[n++] = timeout;
    argv[n++] = "--json";
    argv[n] = NULL;
    json_t *result = s_pan_wait(settings, argv, id, timeout_s);
    free(payload_text);
    return result;
}

static json_t *s_request_merge(const mcp_settings_t *settings, const json_t *args)
{
    /* pan reads it as an argument: one that starts with '-' would be one of its options. */
    if (s_str(args, "review")[0] == '-')
        return s_error("'review' must be an issue or task id, not '%s'", s_str(args, "review"));
    const char *argv[12];
    size_t n = 0;
    argv[n++] = "approve";
    argv[n++] = s_str(args, "review");
    argv[n++] = "--json";
    if (json_is_true(json_object_get(args, "task")))
        argv[n++] = "--task";
    s_flag(argv, &n, "--priority", s_str(args, "priority"));
    if (json_is_true(json_object_get(args, "force")))
        argv[n++] = "--force";
    argv[n] = NULL;
    int code;
    json_t *error = NULL;
    json_t *task = s_pan(settings, argv, PAN_SLACK_S, &code, &error);
    if (task == NULL)
        return error;
    json_t *result = s_ok(json_pack("{s:O}", "task", task), "Merge %s queued (state %s)",
                          s_str(task, "id"), s_str(task, "state"));
    json_decref(task);
    return result;
}

static json_t *s_recent_events(const mcp_settings_t *settings, const json_t *args)
{
    char since[32], limit[32];
    snprintf(since, sizeof since, "%lld", (long long)s_int(args, "since", 0));
    snprintf(limit, sizeof limit, "%lld", (long long)s_int(args, "limit", 50));
    const char *argv[24];
    size_t n = 0;
    argv[n++] = "events";
    argv[n++] = "--json";
    argv[n++] = "--since";
    argv[n++] = since;
    argv[n++] = "--limit";
    argv[n++] = limit;
    s_flag(argv, &n, "--task", s_str(args, "task"));
    s_flag(argv, &n, "--issue", s_str(args, "issue"));
    s_flag(argv, &n, "--specialist", s_str(args, "specialist"));
    s_flag(argv, &n, "--topic", s_str(args, "topic"));
    argv[n] = NULL;
    pan_run_t run;
    int rc = s_run_pan(settings, argv, PAN_SLACK_S, &run);
    if (rc != 0 || run.exit_code != 0) {
        json_t *error = s_tool_error(run.error[0] ? run.error : "pan events failed");
        pan_run_clear(&run);
        return error;
    }
    size_t count = json_array_size(run.values);
    char summary[64];
    snprintf(summary, sizeof summary, "%zu event(s)%s", count, count ? ", oldest first:" : "");
    json_t *result = s_ok_data(json_pack("{s:O}", "events", run.values), summary, run.values);
    pan_run_clear(&run);
    return result;
}

/* ---- straight to the broker ---- */

/* Sends `request` on control; returns the reply's data (new reference) or NULL with
 * *error set to a tool error. */
static json_t *s_control(const mcp_settings_t *settings, wire_writer_t *request, bool *truncated,
                         json_t **error)
{
    *error = NULL;
    client_t *client = client_new(settings->control_ep, settings->timeout_ms);
    wire_msg_t *reply = NULL;
    int rc = client ? client_call(client, request, &reply) : FAILURE_MEMORY;
    client_destroy(&client);
    if (rc != 0) {
        *error = s_error("%s", failure_message());
        return NULL;
    }
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    json_t *value = data ? msgjson_from_object(data) : json_null();
    if (truncated != NULL)
        *truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
    wire_msg_destroy(&reply);
    if (value == NULL)
        *error = s_error("the broker's answer could not be read");
    return value;
}

static json_t *s_task_status(const mcp_settings_t *settings, const json_t *args)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, s_str(args, "id"));
    json_t *error = NULL;
    json_t *task = s_control(settings, w, NULL, &error);
    wire_writer_destroy(&w);
    if (task == NULL)
        return error;
    json_t *result =
        s_ok(json_pack("{s:O}", "task", task), "Task %s: %s (%s), attempt %lld of %lld%s%s",
             s_str(task, "id"), s_str(task, "state"), s_str(task, "specialist"),
             (long long)s_int(task, "attempt", 0), (long long)s_int(task, "max_attempts", 0),
             s_str(task, "error") ? "; " : "", s_str(task, "error") ? s_str(task, "error") : "");
    json_decref(task);
    return result;
}

static json_t *s_list_tasks(const mcp_settings_t *settings, const json_t *args)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_TASKS);
    wire_put_str(w, FIELD_STATE, s_str(args, "state"));
    wire_put_str(w, FIELD_SPECIALIST, s_str(args, "specialist"));
    wire_put_str(w, FIELD_ISSUE, s_str(args, "issue"));
    wire_put_str(w, FIELD_BEFORE, s_str(args, "before"));
    if (json_object_get(args, "since_s") != NULL)
        wire_put_int(w, FIELD_CREATED_AFTER,
                     clock_wall_ms() - (int64_t)s_int(args, "since_s", 0) * 1000);
    wire_put_int(w, FIELD_LIMIT, s_int(args, "limit", 20));
    bool truncated = false;
    json_t *error = NULL;
    json_t *tasks = s_control(settings, w, &truncated, &error);
    wire_writer_destroy(&w);
    if (tasks == NULL)
        return error;
    char summary[96];
    snprintf(summary, sizeof summary, "%zu task(s), newest first%s", json_array_size(tasks),
             truncated ? " (cut to fit the reply: ask again with before)" : ":");
    json_t *result = s_ok_data(json_pack("{s:O, s:b}", "tasks", tasks, "truncated", truncated),
                               summary, tasks);
    json_decref(tasks);
    return result;
}

/* cancel_task / retry_task: one control request on a task; the task as it is now. */
static json_t *s_change_task(const mcp_settings_t *settings, const json_t *args, msg_type_t type,
                             const char *verb)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, FIELD_ID, s_str(args, "id"));
    if (type == MSG_CANCEL_TASK)
        wire_put_str(w, FIELD_REASON, s_str(args, "reason"));
    json_t *error = NULL;
    json_t *task = s_control(settings, w, NULL, &error);
    wire_writer_destroy(&w);
    if (task == NULL)
        return error;
    json_t *result = s_ok(json_pack("{s:O}", "task", task), "Task %s %s (state %s)",
                          s_str(task, "id"), verb, s_str(task, "state"));
    json_decref(task);
    return result;
}

static json_t *s_cancel_task(const mcp_settings_t *settings, const json_t *args)
{
    return s_change_task(settings, args, MSG_CANCEL_TASK, "cancelled");
}

static json_t *s_retry_task(const mcp_settings_t *settings, const json_t *args)
{
    return s_change_task(settings, args, MSG_RETRY_TASK, "requeued");
}

/* ---- in this process ---- */

/* True when `dir` (resolved) is `root` (resolved) or inside it. */
static bool s_inside(const char *dir, const char *root)
{
    char real_dir[PATH_MAX], real_root[PATH_MAX];
    if (realpath(dir, real_dir) == NULL || realpath(root, real_root) == NULL)
        return false;
    size_t len = strlen(real_root);
    return strncmp(real_dir, real_root, len) == 0 &&
           (real_dir[len] == '\0' || real_dir[len] == '/' || strcmp(real_root, "/") == 0);
}

static json_t *s_apply_patch(const mcp_settings_t *settings, const json_t *args)
{
    const char *workspace = s_str(args, "workspace");
    bool allowed = settings->roots == NULL;
    for (size_t i = 0; !allowed && settings->roots[i] != NULL; i++)
        allowed = s_inside(workspace, settings->roots[i]);
    if (!allowed)
        return s_error("patch refused: %s is not this task's work tree (apply_patch writes only "
                       "in %s%s)",
                       workspace, settings->roots[0] ? settings->roots[0] : "nothing",
                       settings->roots[0] && settings->roots[1] ? " and the task's other "
                                                                  "directories"
                                                                : "");
    const json_t *diff = json_object_get(args, "diff");
    json_t *files = json_array();
    bool check_only = json_is_true(json_object_get(args, "check_only"));
    int rc = mcp_patch_apply(workspace, json_string_value(diff),
                             json_string_length(diff), check_only, files);
    json_t *structured = json_pack("{s:b, s:o}", "applied", rc == 0 && !check_only, "files", files);
    if (rc == 0)
        return s_ok(structured, "%s %zu file(s)", check_only ? "Would apply" : "Applied",
                    json_array_size(files));
    char *report = json_dumps(json_object_get(structured, "files"), JSON_COMPACT);
    json_t *result = s_error("%s\nfiles: %s", failure_message(), report ? report : "[]");
    json_object_set_new(result, "structuredContent", structured);
    free(report);
    return result;
}

/* payload.handoff of a handoff: who hands off, why, and what the next one needs to know
 * (the specialist running the task replaces `from` with its own name and `from_task`). */
static json_t *s_handoff_record(const mcp_settings_t *settings, const json_t *args)
{
    const char *from = settings->parent_task ? settings->parent_task
                       : settings->source    ? settings->source
                                             : "an agent";
    json_t *record = json_pack("{s:s, s:s, s:s}", "from", from, "reason",
                               s_str(args, "reason") ? s_str(args, "reason") : "", "context",
                               s_str(args, "context") ? s_str(args, "context") : "");
    if (record != NULL && settings->parent_task != NULL)
        json_object_set_new(record, "from_task", json_string(settings->parent_task));
    return record;
}

/* The submit a handoff makes: the message is the task, the reason and context come along. */
static json_t *s_handoff_submit(const mcp_settings_t *settings, const json_t *args, char *id)
{
    client_new_id(id, CLIENT_ID_SIZE);
    json_t *payload = json_pack("{s:s}", "task", s_str(args, "message"));
    json_object_set_new(payload, "handoff", s_handoff_record(settings, args));
    static const char *const copied[][2] = {
        {"workspace", "workspace"}, {"branch", "branch"}, {"target", "target"}, {"issue", "issueId"}};
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        if (s_str(args, copied[i][0]) != NULL)
            json_object_set_new(payload, copied[i][1], json_string(s_str(args, copied[i][0])));
    }
    json_t *submit = json_pack("{s:s, s:s, s:s, s:o}", "id", id, "specialist",
                               s_str(args, "specialist"), "source",
                               settings->source ? settings->source : "cloister-mcp", "payload",
                               payload);
    static const char *const fields[] = {"priority", "issue", "title"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (s_str(args, fields[i]) != NULL)
            json_object_set_new(submit, fields[i], json_string(s_str(args, fields[i])));
    }
    if (settings->parent_task != NULL)
        json_object_set_new(submit, "parent", json_string(settings->parent_task));
    return submit;
}

static json_t *s_handoff_to(const mcp_settings_t *settings, const json_t *args)
{
    if (settings->handoff_file == NULL) {
        /* Outside a task there is no result to chain to: submitted now. */
        json_t *payload = json_pack("{s:s, s:o}", "task", s_str(args, "message"), "handoff",
                                    s_handoff_record(settings, args));
        json_t *result = s_submit_with(settings, s_str(args, "specialist"), args, payload);
        json_decref(payload);
        return result;
    }
    if (!submit_specialist_name_valid(s_str(args, "specialist")))
        return s_error("handoff refused: invalid specialist name '%s'", s_str(args, "specialist"));
    /* A next task for a specialist the broker does not know would be refused only when the
     * result comes: asked now, so the agent hears it. */
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_QUEUE);
    wire_put_str(w, FIELD_SPECIALIST, s_str(args, "specialist"));
    json_t *error = NULL;
    json_t *queue = s_control(settings, w, NULL, &error);
    wire_writer_destroy(&w);
    if (queue == NULL) {
        json_decref(error);
        return s_error("handoff refused: %s", failure_message());
    }
    json_decref(queue);
    char id[CLIENT_ID_SIZE];
    json_t *submit = s_handoff_submit(settings, args, id);
    json_object_del(submit, "parent"); /* the broker sets a next task's parent itself */
    int rc = handoff_append(settings->handoff_file, submit);
    json_decref(submit);
    if (rc != 0)
        return s_error("handoff refused: %s", failure_message());
    return s_ok(json_pack("{s:s, s:s, s:s}", "id", id, "specialist", s_str(args, "specialist"),
                          "chainedTo", settings->parent_task),
                "Handed off to %s as task %s: it is queued when task %s finishes (its chained "
                "next task, committed with its result)",
                s_str(args, "specialist"), id, settings->parent_task);
}

/* ---- the table ---- */

#define PRIORITY_SCHEMA "{\"type\": \"string\", \"enum\": [\"urgent\", \"high\", \"normal\", \"low\"]}"
#define TEXT(desc) "{\"type\": \"string\", \"maxLength\": 4096, \"description\": \"" desc "\"}"
#define ID_SCHEMA "{\"type\": \"string\", \"maxLength\": 256, \"description\": \"a task id\"}"

static const tool_t s_tools[] = {
    {"submit_task", "Submit a task",
     "Queues a task for a specialist (review-agent, test-agent, merge-agent or one of the "
     "configuration's) and returns it as the broker committed it. The work goes in the "
     "payload by the usual names (workspace, branch, target, issueId, description).",
     "{\"type\": \"object\", \"properties\": {"
     "\"specialist\": " TEXT("the queue: review-agent, test-agent, merge-agent, ...") ","
     "\"priority\": " PRIORITY_SCHEMA ","
     "\"issue\": " TEXT("the issue id (prior attempts of it reach the specialist)") ","
     "\"workspace\": " TEXT("the repository's directory (relative to this server's)") ","
     "\"branch\": " TEXT("the branch to work on") ","
     "\"target\": " TEXT("the branch it goes into (default main)") ","
     "\"title\": " TEXT("one line for people") ","
     "\"description\": " TEXT("what to do") ","
     "\"group\": " TEXT("serialisation key: one task of a group runs at a time") ","
     "\"id\": " ID_SCHEMA ","
     "\"max_attempts\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 100},"
     "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 604800},"
     "\"payload\": {\"type\": \"object\", \"description\": \"more of the work, by the payload's names\"}"
     "}, \"required\": [\"specialist\"], \"additionalProperties\": false}",
     s_submit_task},
    {"handoff_to", "Hand off to a specialist",
     "Hands the current work to a specialist: `message` says what to do, `reason` why it is "
     "handed on, `context` what the specialist needs to know (what was done, found, tried). "
     "The specialist's agent starts with \"[System] Handoff from <you> to <it>: <context>\", "
     "the reason and the message. Inside a Cloister task the new task is that task's chained "
     "next task, queued when it finishes; otherwise it is queued now. Returns the new task's "
     "id.",
     "{\"type\": \"object\", \"properties\": {"
     "\"specialist\": " TEXT("who takes over: review-agent, test-agent, merge-agent, ...") ","
     "\"message\": {\"type\": \"string\", \"maxLength\": 65536, \"description\": \"what to do\"},"
     "\"reason\": " TEXT("why the work is handed on") ","
     "\"context\": {\"type\": \"string\", \"maxLength\": 262144, \"description\": \"what the specialist needs to know\"},"
     "\"workspace\": " TEXT("the repository's directory") ","
     "\"branch\": " TEXT("the branch") ","
     "\"target\": " TEXT("the target branch") ","
     "\"issue\": " TEXT("the issue id") ","
     "\"title\": " TEXT("one line for people") ","
     "\"priority\": " PRIORITY_SCHEMA
     "}, \"required\": [\"specialist\", \"message\"], \"additionalProperties\": false}",
     s_handoff_to},
    {"run_tests", "Run the tests",
     "Runs the repository's tests on a branch or commit through the test-agent and waits for "
     "the answer (at most timeout_s): `verdict` (passed, tests_failed, task_failed when the "
     "tests could not run, timeout), TEST_RESULT, TESTS_RUN/PASSED/FAILED/SKIPPED and the "
     "FAILURES by name. The command is the repository's own ([tests] command in its "
     ".cloister/config.toml, else detected), never one given here.",
     "{\"type\": \"object\", \"properties\": {"
     "\"workspace\": " TEXT("the repository's directory") ","
     "\"branch\": " TEXT("the branch to test (default: the checked-out one)") ","
     "\"commit\": " TEXT("a 40-hex commit the branch must be at") ","
     "\"issue\": " TEXT("the issue id") ","
     "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": \"how long to wait (default 300)\"}"
     "}, \"required\": [\"workspace\"], \"additionalProperties\": false}",
     s_run_tests},
    {"apply_patch", "Apply a patch",
     "Applies a unified diff to a repository's work tree (libgit2). Every file is checked "
     "first and reported; nothing is written unless every file applies. Paths outside the "
     "workspace are refused.",
     "{\"type\": \"object\", \"properties\": {"
     "\"workspace\": " TEXT("the repository's root directory") ","
     "\"diff\": {\"type\": \"string\", \"maxLength\": 3145728, \"description\": \"a unified diff (git diff format)\"},"
     "\"check_only\": {\"type\": \"boolean\", \"description\": \"only say whether it applies\"}"
     "}, \"required\": [\"workspace\", \"diff\"], \"additionalProperties\": false}",
     s_apply_patch},
    {"task_status", "Task status", "A task as the broker has it now: state, attempts, error, result.",
     "{\"type\": \"object\", \"properties\": {\"id\": " ID_SCHEMA
     "}, \"required\": [\"id\"], \"additionalProperties\": false}",
     s_task_status},
    {"wait_task", "Wait for a task",
     "Waits until a task ends (done, failed, dead or cancelled), at most timeout_s, and "
     "returns it with its result and its `verdict`: passed, gate_open, merged or done when "
     "it went well; tests_failed, gate_blocked, merge_failed, task_failed, task_dead, "
     "task_cancelled or timeout (still running) when not.",
     "{\"type\": \"object\", \"properties\": {\"id\": " ID_SCHEMA ","
     "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, \"description\": \"default 300\"}"
     "}, \"required\": [\"id\"], \"additionalProperties\": false}",
     s_wait_task},
    {"list_tasks", "List tasks",
     "Tasks of every state, newest first, filtered by state, specialist, issue and age; "
     "`before` (a task id) gives the next page.",
     "{\"type\": \"object\", \"properties\": {"
     "\"state\": {\"type\": \"string\", \"enum\": [\"queued\", \"running\", \"done\", \"failed\", \"dead\", \"cancelled\"]},"
     "\"specialist\": " TEXT("only this specialist's") ","
     "\"issue\": " TEXT("only this issue's") ","
     "\"since_s\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 31536000, \"description\": \"only tasks created in the last so many seconds\"},"
     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 1000, \"description\": \"default 20\"},"
     "\"before\": " ID_SCHEMA
     "}, \"additionalProperties\": false}",
     s_list_tasks},
    {"recent_events", "Recent events",
     "What happened, from the broker's stored events: the newest `limit` after seq `since`, "
     "oldest first, filtered by task, issue, specialist or topic prefix (task.done/, ...).",
     "{\"type\": \"object\", \"properties\": {"
     "\"since\": {\"type\": \"integer\", \"minimum\": 0, \"description\": \"events after this seq (default 0)\"},"
     "\"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 1000, \"description\": \"default 50\"},"
     "\"task\": " ID_SCHEMA ","
     "\"issue\": " TEXT("the issue id") ","
     "\"specialist\": " TEXT("the specialist") ","
     "\"topic\": " TEXT("a topic prefix such as task.failed/")
     "}, \"additionalProperties\": false}",
     s_recent_events},
    {"request_review", "Request a review",
     "Queues a review-agent review of a branch against its target; its result carries the "
     "merge GATE and the FINDINGS. With `wait`, returns once the review ends (at most "
     "timeout_s), with its result and its `verdict`.",
     "{\"type\": \"object\", \"properties\": {"
     "\"workspace\": " TEXT("the repository's directory") ","
     "\"branch\": " TEXT("the branch to review") ","
     "\"target\": " TEXT("the branch it goes into (default main)") ","
     "\"issue\": " TEXT("the issue id") ","
     "\"title\": " TEXT("one line for people") ","
     "\"description\": " TEXT("what the change is for") ","
     "\"pr_url\": " TEXT("the pull request") ","
     "\"priority\": " PRIORITY_SCHEMA ","
     "\"wait\": {\"type\": \"boolean\", \"description\": \"wait for the review's end and "
     "return it with its verdict (gate_open, gate_blocked, ...)\"},"
     "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 3600, "
     "\"description\": \"with wait: how long (default 300)\"}"
     "}, \"required\": [\"workspace\", \"branch\"], \"additionalProperties\": false}",
     s_request_review},
    {"cancel_task", "Cancel a task",
     "Cancels a queued or running task (a running one's worker is told to stop); `reason` is "
     "kept in its error. Your own tasks, or any with an admin key.",
     "{\"type\": \"object\", \"properties\": {\"id\": " ID_SCHEMA ","
     "\"reason\": " TEXT("why, for the task's error and events")
     "}, \"required\": [\"id\"], \"additionalProperties\": false}",
     s_cancel_task},
    {"retry_task", "Retry a task",
     "Puts a failed or cancelled task (a dead one with an admin key) back in its queue with a "
     "fresh count of failures; returns it.",
     "{\"type\": \"object\", \"properties\": {\"id\": " ID_SCHEMA
     "}, \"required\": [\"id\"], \"additionalProperties\": false}",
     s_retry_task},
    {"request_merge", "Request the merge",
     "Queues the merge of a reviewed issue or review task (as `pan approve`): refused with "
     "the blocking findings when the review's gate is blocked, unless force is set (the "
     "override is recorded).",
     "{\"type\": \"object\", \"properties\": {"
     "\"review\": " TEXT("an issue id (its newest finished review, the issue matched exactly), "
                          "or with task = true a review task's id") ","
     "\"task\": {\"type\": \"boolean\", \"description\": \"review is a review task's id (or "
     "the unique start of one), not an issue\"},"
     "\"force\": {\"type\": \"boolean\", \"description\": \"merge although the gate is blocked\"},"
     "\"priority\": " PRIORITY_SCHEMA
     "}, \"required\": [\"review\"], \"additionalProperties\": false}",
     s_request_merge},
};

#define TOOL_COUNT (sizeof s_tools / sizeof s_tools[0])

size_t mcp_tools_count(void)
{
    return TOOL_COUNT;
}

json_t *mcp_tool_describe(size_t index)
{
    const tool_t *tool = &s_tools[index];
    json_t *schema = json_loads(tool->schema, 0, NULL);
    return json_pack("{s:s, s:s, s:s, s:o}", "name", tool->name, "title", tool->title,
                     "description", tool->description, "inputSchema",
                     schema ? schema : json_object());
}

static const tool_t *s_find(const char *name)
{
    for (size_t i = 0; i < TOOL_COUNT; i++) {
        if (strcmp(s_tools[i].name, name) == 0)
            return &s_tools[i];
    }
    return NULL;
}

bool mcp_tool_exists(const char *name)
{
    return s_find(name) != NULL;
}

/* True when `specialist` names the merge queue, in any spelling the broker takes for it. */
static bool s_is_merge(const char *specialist)
{
    const char *want = "merge-agent";
    size_t i = 0;
    for (; specialist[i] != '\0' && want[i] != '\0'; i++) {
        char c = specialist[i] == '_' ? '-' : (char)tolower((unsigned char)specialist[i]);
        if (c != want[i])
            return false;
    }
    return specialist[i] == '\0' && want[i] == '\0';
}

/* Inside a task the caller is that task's agent, whose instructions a branch's content may
 * have written: it never approves a merge nor forces one. The broker holds the same line
 * with the agent key the specialist gives this server (key_roles.h); this says why early.
 * Returns the refusal, or NULL. */
static json_t *s_agent_refusal(const mcp_settings_t *settings, const tool_t *tool,
                               const json_t *args)
{
    if (settings->parent_task == NULL)
        return NULL;
    const json_t *payload = json_object_get(args, "payload");
    bool force = json_is_true(json_object_get(args, "force")) ||
                 json_is_true(json_object_get(payload, "force"));
    if (force)
        return s_error("an agent inside a task cannot force past the review gate: hand the "
                       "work off and let the gate decide, or tell the user to run `pan "
                       "approve --force`");
    if (tool->call == s_request_merge ||
        (tool->call == s_submit_task && s_str(args, "specialist") != NULL &&
         s_is_merge(s_str(args, "specialist"))))
        return s_error("an agent inside a task cannot approve a merge: handoff_to merge-agent "
                       "chains it behind this task's result, and the review gate decides");
    return NULL;
}

json_t *mcp_tool_call(const mcp_settings_t *settings, const char *name, const json_t *arguments)
{
    const tool_t *tool = s_find(name);
    json_t *schema = json_loads(tool->schema, 0, NULL);
    json_t *refused = schema ? s_check_arguments(schema, arguments)
                             : s_error("tool %s: its schema does not load", name);
    json_decref(schema);
    if (refused == NULL)
        refused = s_agent_refusal(settings, tool, arguments);
    if (refused != NULL)
        return refused;
    /* Every tool but apply_patch needs the broker: with nothing listening, say so now
     * rather than after a request's deadline. */
    if (tool->call != s_apply_patch && listener_absent(settings->control_ep))
        return s_error("Cloister is not running (nothing listens on %s): start it with "
                       "`deploy/run-local.sh --detach` from Cloister's source tree (or run "
                       "cloister-broker and the specialists), then call %s again",
                       settings->control_ep, name);
    json_t *result = tool->call(settings, arguments);
    return result ? result : s_error("tool %s: out of memory", name);
}
