/* web_api: the JSON endpoints (see web_api.h). */
#include "web_api.h"

#include "client.h"
#include "clock.h"
#include "failure.h"
#include "merge_queue_store.h"
#include "msgjson.h"
#include "pan_run.h"
#include "session.h"
#include "submit.h"
#include "web_broker.h"
#include "web_timeline.h"
#include "wire.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long `pan approve` may take. */
#define WEB_PAN_TIMEOUT_S 30

/* Sends `request` on a client of its own; the reply's data as JSON (200; a cut listing as
 * {items, truncated}), or the refusal. */
static web_reply_t s_call(const web_t *web, wire_writer_t *request)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    json_t *body = NULL;
    bool truncated = false;
    int rc = web_broker_ask(client, request, &body, &truncated);
    client_destroy(&client);
    if (rc != 0)
        return web_broker_failure(rc);
    if (truncated && json_is_array(body))
        body = json_pack("{s:o, s:b}", "items", body, "truncated", true);
    return (web_reply_t){.status = 200, .body = body};
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

/* Parses an optional non-negative number argument of an endpoint into *out. */
static bool s_number_arg(const char *text, long fallback, long *out)
{
    *out = fallback;
    if (text == NULL || text[0] == '\0')
        return true;
    char *end = NULL;
    *out = strtol(text, &end, 10);
    return *end == '\0' && *out >= 0;
}

/* The queued tasks of every priority of `specialist` in stats.queues. */
static json_int_t s_queue_depth(const json_t *stats, const char *specialist)
{
    const json_t *queue = json_object_get(json_object_get(stats, "queues"), specialist);
    json_int_t total = 0;
    const char *priority;
    json_t *depth;
    json_object_foreach((json_t *)queue, priority, depth) total += json_integer_value(depth);
    return total;
}

web_reply_t web_api_queue(const web_t *web, const char *specialist, const char *offset_arg,
                          const char *limit_arg)
{
    long offset, limit;
    if (!s_number_arg(offset_arg, 0, &offset) || !s_number_arg(limit_arg, WEB_API_PAGE, &limit) ||
        limit < 1 || limit > WEB_API_MAX_PAGE)
        return web_error(400, "offset must be 0 or more, limit 1..%d", WEB_API_MAX_PAGE);
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_QUEUE);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_int(w, FIELD_OFFSET, offset);
    wire_put_int(w, FIELD_LIMIT, limit);
    json_t *items = NULL, *stats = NULL;
    bool truncated = false, ignored;
    int rc = web_broker_ask(client, w, &items, &truncated);
    wire_writer_start(w, MSG_STATS);
    if (rc == 0)
        rc = web_broker_ask(client, w, &stats, &ignored);
    wire_writer_destroy(&w);
    client_destroy(&client);
    if (rc != 0) {
        json_decref(items);
        return web_broker_failure(rc);
    }
    json_t *body = json_pack("{s:s, s:o, s:i, s:i, s:I, s:b}", "specialist", specialist, "items",
                             items, "offset", (int)offset, "limit", (int)limit, "total",
                             s_queue_depth(stats, specialist), "truncated", truncated);
    json_decref(stats);
    return (web_reply_t){.status = 200, .body = body};
}

web_reply_t web_api_task(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_SHOW_TASK, FIELD_ID, id);
}

web_reply_t web_api_cancel(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_CANCEL_TASK, FIELD_ID, id);
}

web_reply_t web_api_retry(const web_t *web, const char *id)
{
    return s_call_one(web, MSG_RETRY_TASK, FIELD_ID, id);
}

web_reply_t web_api_priority(const web_t *web, const char *id, const json_t *body)
{
    const char *priority = json_string_value(json_object_get(body, "priority"));
    if (priority == NULL)
        return web_error(400, "\"priority\" must be urgent, high, normal or low");
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SET_PRIORITY);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_PRIORITY, priority);
    web_reply_t reply = s_call(web, w);
    wire_writer_destroy(&w);
    return reply;
}

/* Whether `needle` (lowercase) is in `text`, ignoring case. */
static bool s_contains(const char *text, const char *needle)
{
    if (text == NULL)
        return false;
    size_t n = strlen(needle);
    for (const char *at = text; *at; at++) {
        size_t i = 0;
        while (i < n && at[i] && tolower((unsigned char)at[i]) == needle[i])
            i++;
        if (i == n)
            return true;
    }
    return false;
}

/* Whether a listed task mentions `needle` in its id, title, issue, error, source or
 * specialist. */
static bool s_task_mentions(const json_t *task, const char *needle)
{
    static const char *const keys[] = {"id", "title", "issue", "error", "source", "specialist"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (s_contains(json_string_value(json_object_get(task, keys[i])), needle))
            return true;
    return false;
}

/* One list_tasks page of `filter` (state, specialist, issue) after `before`; *cut when the
 * broker cut it short of `limit` to keep its reply under the cap (may be NULL). */
static int s_list_page_cut(client_t *client, const char *const filter[3], const char *before,
                           long limit, json_t **page, bool *cut)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_TASKS);
    wire_put_str(w, FIELD_STATE, filter[0]);
    wire_put_str(w, FIELD_SPECIALIST, filter[1]);
    wire_put_str(w, FIELD_ISSUE, filter[2]);
    wire_put_str(w, FIELD_BEFORE, before);
    wire_put_int(w, FIELD_LIMIT, limit);
    bool truncated;
    int rc = web_broker_ask(client, w, page, &truncated);
    wire_writer_destroy(&w);
    if (cut != NULL)
        *cut = truncated;
    return rc;
}

static int s_list_page(client_t *client, const char *const filter[3], const char *before,
                       long limit, json_t **page)
{
    return s_list_page_cut(client, filter, before, limit, page, NULL);
}

/* A filter value from the query: absent or empty is no filter. */
static const char *s_filter(const char *value)
{
    return value != NULL && value[0] != '\0' ? value : NULL;
}

web_reply_t web_api_history(const web_t *web, const web_history_t *query)
{
    long limit;
    if (!s_number_arg(query->limit, WEB_API_PAGE, &limit) || limit < 1 ||
        limit > WEB_API_MAX_PAGE)
        return web_error(400, "limit must be a number 1..%d", WEB_API_MAX_PAGE);
    char needle[256] = "";
    for (size_t i = 0; query->text && query->text[i] && i + 1 < sizeof needle; i++)
        needle[i] = (char)tolower((unsigned char)query->text[i]);
    const char *filter[3] = {s_filter(query->state), s_filter(query->specialist),
                             s_filter(query->issue)};
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    /* Without text, one page of the broker's; with text, pages read until `limit` tasks
     * match or WEB_API_SEARCH_SCAN were read. */
    long page_size = needle[0] ? WEB_API_MAX_PAGE : limit;
    json_t *items = json_array();
    char *next = query->before && query->before[0] ? strdup(query->before) : NULL;
    long scanned = 0;
    bool more = true;
    int rc = 0;
    while (more && (long)json_array_size(items) < limit && scanned < WEB_API_SEARCH_SCAN) {
        json_t *page = NULL;
        bool cut = false;
        rc = s_list_page_cut(client, filter, next, page_size, &page, &cut);
        if (rc != 0)
            break;
        more = cut || (long)json_array_size(page) == page_size;
        size_t i;
        json_t *task;
        json_array_foreach(page, i, task)
        {
            free(next);
            next = strdup(json_string_value(json_object_get(task, "id")));
            scanned++;
            if (needle[0] == '\0' || s_task_mentions(task, needle))
                json_array_append(items, task);
            if ((long)json_array_size(items) == limit) {
                more = more || i + 1 < json_array_size(page);
                break;
            }
        }
        json_decref(page);
    }
    client_destroy(&client);
    if (rc != 0) {
        free(next);
        json_decref(items);
        return web_broker_failure(rc);
    }
    json_t *body = json_pack("{s:o, s:i}", "items", items, "scanned", (int)scanned);
    json_object_set_new(body, "next", more && next ? json_string(next) : json_null());
    free(next);
    return (web_reply_t){.status = 200, .body = body};
}

/* show_task of `id` on `client`: the task with its result (caller owns), or NULL. */
static json_t *s_show(client_t *client, const char *id, int *rc)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    json_t *task = NULL;
    bool truncated;
    *rc = web_broker_ask(client, w, &task, &truncated);
    wire_writer_destroy(&w);
    return task;
}

/* When a task stopped changing: its `updated` once ended, now while it is not. */
static json_int_t s_task_end(const json_t *task)
{
    const char *state = json_string_value(json_object_get(task, "state"));
    bool active = state == NULL || strcmp(state, "queued") == 0 || strcmp(state, "running") == 0;
    return active ? (json_int_t)clock_wall_ms()
                  : json_integer_value(json_object_get(task, "updated"));
}

web_reply_t web_api_task_events(const web_t *web, const char *id)
{
    web_reply_t shown = web_api_task(web, id);
    if (shown.status != 200)
        return shown;
    json_t *ids = json_pack("[s]", id);
    json_int_t created = json_integer_value(json_object_get(shown.body, "created"));
    web_reply_t reply = web_timeline(web, ids, created, s_task_end(shown.body));
    json_decref(ids);
    json_decref(shown.body);
    return reply;
}

web_reply_t web_api_issue(const web_t *web, const char *issue)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    const char *filter[3] = {NULL, NULL, issue};
    json_t *listed = NULL;
    int rc = s_list_page(client, filter, NULL, WEB_API_ISSUE_TASKS, &listed);
    json_t *tasks = json_array(), *ids = json_array();
    double cost = 0;
    json_int_t from = 0, to = 0;
    /* Oldest first: the chain in the order it ran. */
    for (size_t i = json_array_size(listed); rc == 0 && i-- > 0;) {
        const char *id = json_string_value(json_object_get(json_array_get(listed, i), "id"));
        json_t *task = s_show(client, id, &rc);
        if (rc != 0)
            break;
        json_int_t created = json_integer_value(json_object_get(task, "created"));
        from = from == 0 || created < from ? created : from;
        to = s_task_end(task) > to ? s_task_end(task) : to;
        const json_t *task_cost = json_object_get(json_object_get(task, "result"), "cost_usd");
        cost += json_is_number(task_cost) ? json_number_value(task_cost) : 0;
        json_array_append_new(ids, json_string(id));
        json_array_append_new(tasks, task);
    }
    json_decref(listed);
    client_destroy(&client);
    if (rc == 0 && json_array_size(tasks) == 0)
        rc = failure_set(FAILURE_NOT_FOUND, "no task of issue '%.128s'", issue);
    web_reply_t timeline = rc == 0 ? web_timeline(web, ids, from, to) : web_broker_failure(rc);
    json_decref(ids);
    if (timeline.status != 200) {
        json_decref(tasks);
        return timeline;
    }
    json_t *body = json_pack("{s:s, s:o, s:f, s:O, s:O, s:O}", "issue", issue, "tasks", tasks,
                             "cost_usd", cost, "events", json_object_get(timeline.body, "events"),
                             "events_truncated", json_object_get(timeline.body, "truncated"),
                             "progress_omitted",
                             json_object_get(timeline.body, "progress_omitted"));
    json_decref(timeline.body);
    return (web_reply_t){.status = 200, .body = body};
}

/* Whether a finding blocks the gate (older results: its severity is error). */
static bool s_finding_blocks(const json_t *finding)
{
    const json_t *blocking = json_object_get(finding, "blocking");
    if (json_is_boolean(blocking))
        return json_is_true(blocking);
    const char *severity = json_string_value(json_object_get(finding, "severity"));
    return severity != NULL && strcmp(severity, "error") == 0;
}

/* The entry of the reviews page for a finished review (shown: with its result), or NULL
 * when nothing waits on a person: its open gate chained the next task itself, or a merge
 * of its issue was queued after it. */
static json_t *s_review_waiting(client_t *client, const json_t *review, int *rc)
{
    const json_t *result = json_object_get(review, "result");
    if (json_object_get(result, "merge_task") || json_object_get(result, "test_task"))
        return NULL;
    const char *issue = json_string_value(json_object_get(review, "issue"));
    if (issue == NULL) {
        char merge_id[300];
        snprintf(merge_id, sizeof merge_id, "merge-%s",
                 json_string_value(json_object_get(review, "id")));
        json_t *merge = s_show(client, merge_id, rc);
        json_decref(merge);
        if (*rc != FAILURE_NOT_FOUND)
            return NULL; /* approved, or the broker did not answer (*rc says) */
        *rc = 0;
    } else {
        const char *filter[3] = {NULL, "merge-agent", issue};
        json_t *merges = NULL;
        *rc = s_list_page(client, filter, NULL, 1, &merges);
        const json_t *merge = json_array_get(merges, 0);
        bool merged = merge != NULL && json_integer_value(json_object_get(merge, "created")) >=
                                           json_integer_value(json_object_get(review, "created"));
        json_decref(merges);
        if (*rc != 0 || merged)
            return NULL;
    }
    json_t *must_fix = json_array();
    size_t i;
    json_t *finding;
    json_array_foreach(json_object_get(result, "FINDINGS"), i, finding)
    {
        if (s_finding_blocks(finding))
            json_array_append(must_fix, finding);
    }
    const json_t *payload = json_object_get(review, "payload");
    const char *gate = json_string_value(json_object_get(result, "GATE"));
    const char *verdict = json_string_value(json_object_get(result, "REVIEW_RESULT"));
    if (gate == NULL) /* a review-agent of one's own: its verdict decides */
        gate = verdict != NULL && strcmp(verdict, "APPROVED") == 0 ? "open" : "blocked";
    json_t *entry = json_pack("{s:s, s:o}", "gate", gate, "must_fix", must_fix);
    /* Copied when present (a review's title, issue, payload may lack any of them). */
    static const char *const from_task[] = {"id", "title", "updated", "issue"};
    for (size_t k = 0; k < sizeof from_task / sizeof from_task[0]; k++)
        json_object_set(entry, from_task[k], json_object_get(review, from_task[k]));
    static const char *const from_payload[] = {"branch", "workspace", "target"};
    for (size_t k = 0; k < sizeof from_payload / sizeof from_payload[0]; k++)
        json_object_set(entry, from_payload[k], json_object_get(payload, from_payload[k]));
    static const char *const from_result[][2] = {{"review_result", "REVIEW_RESULT"},
                                                 {"review_mode", "review_mode"},
                                                 {"commit", "diff_head"}};
    for (size_t k = 0; k < sizeof from_result / sizeof from_result[0]; k++)
        json_object_set(entry, from_result[k][0], json_object_get(result, from_result[k][1]));
    return entry;
}

web_reply_t web_api_reviews(const web_t *web)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_error(502, "%s", failure_message());
    const char *filter[3] = {"done", "review-agent", NULL};
    json_t *reviews = NULL;
    int rc = s_list_page(client, filter, NULL, WEB_API_MAX_PAGE, &reviews);
    json_t *waiting = json_array(), *seen = json_object();
    size_t i;
    json_t *review;
    json_array_foreach(reviews, i, review)
    {
        /* The newest review of an issue decides (a review without one stands alone). */
        const char *issue = json_string_value(json_object_get(review, "issue"));
        const char *key = issue ? issue : json_string_value(json_object_get(review, "id"));
        if (rc != 0 || json_array_size(waiting) >= WEB_API_REVIEWS ||
            json_object_size(seen) >= WEB_API_REVIEWS_SCAN || json_object_get(seen, key))
            continue;
        json_object_set_new(seen, key, json_true());
        json_t *shown = s_show(client, json_string_value(json_object_get(review, "id")), &rc);
        json_t *entry = rc == 0 ? s_review_waiting(client, shown, &rc) : NULL;
        if (entry != NULL)
            json_array_append_new(waiting, entry);
        json_decref(shown);
    }
    json_decref(reviews);
    json_decref(seen);
    client_destroy(&client);
    if (rc != 0) {
        json_decref(waiting);
        return web_broker_failure(rc);
    }
    return (web_reply_t){.status = 200, .body = waiting};
}

/* pan's refusal in the page's words: no "pan: " prefixes, and the hint about --force said
 * as the page's override. */
static web_reply_t s_refusal(int status, const char *pan_error)
{
    char text[2048] = "";
    size_t used = 0;
    const char *line = pan_error;
    while (*line != '\0' && used + 1 < sizeof text) {
        size_t len = strcspn(line, "\n");
        const char *shown = strncmp(line, "pan: ", 5) == 0 ? line + 5 : line;
        size_t shown_len = len - (size_t)(shown - line);
        if (strncmp(shown, "not merging (--force", 20) == 0) {
            shown = "Not merged. To merge anyway, override the gate and say why: the override "
                    "is recorded with the merge.";
            shown_len = strlen(shown);
        }
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%.*s", used ? "\n" : "",
                                 (int)shown_len, shown);
        line += len + (line[len] == '\n');
    }
    return web_error(status, "%s", text);
}

web_reply_t web_api_approve(const web_t *web, const json_t *body)
{
    /* An issue (its newest review, matched exactly), or a review task's id (pan approve
     * --task): never one taken for the other. */
    const char *issue = json_string_value(json_object_get(body, "issue"));
    const char *task = json_string_value(json_object_get(body, "task"));
    const json_t *force = json_object_get(body, "force");
    const json_t *reason = json_object_get(body, "reason");
    if ((issue == NULL) == (task == NULL))
        return web_error(400, "give either \"issue\" (an issue id) or \"task\" (a review "
                              "task id)");
    const char *what = issue ? issue : task;
    if (what[0] == '\0' || what[0] == '-')
        return web_error(400, "\"%s\" must be an id", issue ? "issue" : "task");
    if (force != NULL && !json_is_boolean(force))
        return web_error(400, "\"force\" must be true or false");
    if (reason != NULL && !json_is_string(reason))
        return web_error(400, "\"reason\" must be a string");
    const char *why = json_string_value(reason);
    if (json_is_true(force) && (why == NULL || why[0] == '\0'))
        return web_error(400, "An override needs a reason: say why the gate is overridden.");
    const char *args[] = {"approve", what, "--json", NULL, NULL, NULL, NULL, NULL};
    int n = 3;
    if (task != NULL)
        args[n++] = "--task";
    if (json_is_true(force)) {
        args[n++] = "--force";
        args[n++] = "--reason";
        args[n++] = why;
    }
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
        reply = s_refusal(run.exit_code == 2 ? 400 : 409, run.error);
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

web_reply_t web_api_merge_queues(void)
{
    char dir[PATH_MAX];
    json_t *queues = NULL;
    if (merge_queue_store_dir(dir, sizeof dir) != 0 || merge_queue_store_list(dir, &queues) != 0)
        return web_error(500, "%s", failure_message());
    return (web_reply_t){.status = 200, .body = queues};
}
