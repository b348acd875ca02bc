/* web_api: the JSON endpoints (see web_api.h). */
#include "web_api.h"

#include "client.h"
#include "failure.h"
#include "msgjson.h"
#include "pan_run.h"
#include "session.h"
#include "submit.h"
#include "wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long `pan approve` may take. */
#define WEB_PAN_TIMEOUT_S 30

web_reply_t web_error(int status, const char *fmt, ...)
{
    char message[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    json_t *body = json_object();
    json_object_set_new(body, "error", msgjson_string(message, strlen(message)));
    return (web_reply_t){.status = status, .body = body};
}

/* The HTTP status for a failed control request: the broker's refusal, or its absence. */
static int s_status_of(int rc)
{
    switch (rc) {
    case FAILURE_NOT_FOUND: return 404;
    case FAILURE_INVALID: return 400;
    case FAILURE_TOO_BIG: return 413;
    case FAILURE_TIMEOUT:
    case FAILURE_IO: return 502;
    default: return 409; /* the broker said no: a state that does not allow it */
    }
}

/* Sends `request` on control; the reply's data as JSON (200), or the refusal. */
static web_reply_t s_call(const web_t *web, wire_writer_t *request)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    wire_msg_t *reply = NULL;
    int rc = client_call(client, request, &reply);
    client_destroy(&client);
    if (rc != 0)
        return web_error(s_status_of(rc), "%s", failure_message());
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    json_t *body = data != NULL ? msgjson_from_object(data) : json_null();
    if (wire_msg_bool(reply, FIELD_TRUNCATED, false) && json_is_array(body)) {
        json_t *wrapped = json_pack("{s:o, s:b}", "items", body, "truncated", true);
        body = wrapped;
    }
    wire_msg_destroy(&reply);
    return body != NULL ? (web_reply_t){.status = 200, .body = body}
                        : web_error(500, "out of memory");
}

/* A request of `type` with one string field (skipped when value is NULL). */
static web_reply_t s_call_one(const web_t *web, msg_type_t type, field_t field, const char *value)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    wire_put_str(w, field, value);
    web_reply_t reply = s_call(web, w);
    wire_writer_destroy(&w);
    return reply;
}

/* Adds the session its agent keeps to a specialist's entry (as pan specialists list). */
static void s_add_session(json_t *entry)
{
    const char *name = json_string_value(json_object_get(entry, "name"));
    session_state_t session;
    if (name == NULL || !session_name_valid(name) || session_load(name, &session) != 0)
        return;
    json_object_set_new(entry, "session",
                        json_pack("{s:s, s:s, s:I, s:I, s:f, s:I}", "id", session.session_id,
                                  "agent", session.cli, "runs",
                                  (json_int_t)session.runs, "contextTokens",
                                  (json_int_t)session.context_tokens, "costUsd",
                                  session.cost_usd, "lastRunAt",
                                  (json_int_t)session.last_run_at_ms));
}

web_reply_t web_api_status(const web_t *web)
{
    web_reply_t stats = s_call_one(web, MSG_STATS, FIELD_ID, NULL);
    if (stats.status != 200)
        return stats;
    web_reply_t specialists = s_call_one(web, MSG_LIST_SPECIALISTS, FIELD_ID, NULL);
    if (specialists.status != 200) {
        json_decref(stats.body);
        return specialists;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(specialists.body, i, entry) s_add_session(entry);
    json_t *body = json_pack("{s:o, s:o}", "stats", stats.body, "specialists", specialists.body);
    return (web_reply_t){.status = 200, .body = body};
}

web_reply_t web_api_tasks(const web_t *web, const char *state, const char *specialist,
                          const char *issue, const char *limit, const char *before)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_TASKS);
    wire_put_str(w, FIELD_STATE, state);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_str(w, FIELD_ISSUE, issue);
    wire_put_str(w, FIELD_BEFORE, before);
    if (limit != NULL) {
        char *end = NULL;
        long value = strtol(limit, &end, 10);
        if (end == limit || *end != '\0') {
            wire_writer_destroy(&w);
            return web_error(400, "limit must be a number, not '%.40s'", limit);
        }
        wire_put_int(w, FIELD_LIMIT, value);
    }
    web_reply_t reply = s_call(web, w);
    wire_writer_destroy(&w);
    return reply;
}

web_reply_t web_api_task(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_SHOW_TASK, FIELD_ID, id);
}

web_reply_t web_api_queue(const web_t *web, const char *specialist)
{
    return s_call_one(web, MSG_LIST_QUEUE, FIELD_SPECIALIST, specialist);
}

web_reply_t web_api_cancel(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_CANCEL_TASK, FIELD_ID, id);
}

web_reply_t web_api_retry(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_RETRY_TASK, FIELD_ID, id);
}

web_reply_t web_api_approve(const web_t *web, const json_t *body)
{
    const char *issue = json_string_value(json_object_get(body, "issue"));
    const json_t *force = json_object_get(body, "force");
    if (issue == NULL || issue[0] == '\0' || issue[0] == '-')
        return web_error(400, "\"issue\" must be an issue id or a review task id");
    if (force != NULL && !json_is_boolean(force))
        return web_error(400, "\"force\" must be true or false");
    const char *args[] = {"approve", issue, "--json", json_is_true(force) ? "--force" : NULL,
                          NULL};
    pan_run_settings_t settings = {.pan = web->pan,
                                   .control_ep = web->control_ep,
                                   .events_ep = web->events_ep,
                                   .in_ep = web->in_ep};
    pan_run_t run;
    int rc = pan_run(&settings, args, WEB_PAN_TIMEOUT_S, &run);
    json_t *answer = rc == 0 ? pan_run_answer(&run) : NULL;
    web_reply_t reply;
    if (rc != 0)
        reply = web_error(502, "%s", run.error);
    else if (run.exit_code == 0 && answer != NULL)
        reply = (web_reply_t){.status = 200, .body = json_incref(answer)};
    else if (run.exit_code == 3)
        reply = web_error(502, "%s", run.error);
    else /* refused: the gate, no review, a bad id -- pan says which */
        reply = web_error(run.exit_code == 2 ? 400 : 409, "%s",
                          strncmp(run.error, "pan: ", 5) == 0 ? run.error + 5 : run.error);
    pan_run_clear(&run);
    return reply;
}

/* A member of the wake request: absent, or a string. */
static bool s_optional_string(const json_t *body, const char *key, const char **out)
{
    const json_t *value = json_object_get(body, key);
    *out = json_string_value(value);
    return value == NULL || *out != NULL;
}

web_reply_t web_api_wake(const web_t *web, const char *specialist, const json_t *body)
{
    const char *text, *workspace, *branch, *target, *priority;
    if (!s_optional_string(body, "task", &text) ||
        !s_optional_string(body, "workspace", &workspace) ||
        !s_optional_string(body, "branch", &branch) ||
        !s_optional_string(body, "target", &target) ||
        !s_optional_string(body, "priority", &priority))
        return web_error(400, "task, workspace, branch, target and priority must be strings");
    char id[CLIENT_ID_SIZE], title[300];
    client_new_id(id, sizeof id);
    wire_writer_t *payload = wire_writer_new();
    submit_wake(specialist, text, workspace, branch, target, title, sizeof title, payload);
    submit_t submit = {.id = id,
                       .specialist = specialist,
                       .priority = priority,
                       .source = "cloister-web",
                       .title = title};
    submit.payload = wire_writer_data(payload, &submit.payload_len);
    web_reply_t reply;
    if (submit_check(&submit) != 0) {
        reply = web_error(400, "%s", failure_message());
    } else {
        wire_writer_t *w = wire_writer_new();
        submit_encode(w, &submit);
        reply = s_call(web, w);
        wire_writer_destroy(&w);
    }
    wire_writer_destroy(&payload);
    return reply;
}
