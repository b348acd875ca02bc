/* web_timeline: a timeline from the broker's stored events (see web_timeline.h). */
#include "web_timeline.h"

#include "client.h"
#include "failure.h"
#include "web_broker.h"
#include "wire.h"

#include <string.h>

/* Events asked for per page when reading forward. */
#define TIMELINE_PAGE 1000

/* A replay page of at most `limit` events after `since` (caller owns *events). */
static int s_replay(client_t *client, int64_t since, int limit, json_t **events)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_REPLAY);
    wire_put_int(w, FIELD_SINCE, since);
    wire_put_int(w, FIELD_LIMIT, limit);
    bool truncated;
    int rc = web_broker_ask(client, w, events, &truncated);
    wire_writer_destroy(&w);
    if (rc == 0 && !json_is_array(*events)) {
        json_decref(*events);
        *events = NULL;
        rc = failure_set(FAILURE_INVALID, "the broker's replay is not a list");
    }
    return rc;
}

static int64_t s_int(const json_t *object, const char *key)
{
    return json_integer_value(json_object_get(object, key));
}

/* The broker's last event seq. */
static int s_last_seq(client_t *client, int64_t *last)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    json_t *stats = NULL;
    bool truncated;
    int rc = web_broker_ask(client, w, &stats, &truncated);
    wire_writer_destroy(&w);
    *last = rc == 0 ? s_int(stats, "last_seq") : 0;
    json_decref(stats);
    return rc;
}

/* The largest seq all of whose events up to it are older than `from_ms`: a binary search
 * over pages of one event, relying on events' times growing with their seq. */
static int s_seq_before(client_t *client, int64_t from_ms, int64_t *since)
{
    int64_t last;
    int rc = s_last_seq(client, &last);
    int64_t lo = 0, hi = last;
    while (rc == 0 && hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        json_t *page = NULL;
        rc = s_replay(client, mid, 1, &page);
        const json_t *first = rc == 0 ? json_array_get(page, 0) : NULL;
        if (rc == 0 && first != NULL && s_int(first, "time") < from_ms)
            lo = s_int(first, "seq") > mid ? s_int(first, "seq") : mid + 1;
        else
            hi = mid;
        json_decref(page);
    }
    *since = lo;
    return rc;
}

static bool s_wanted(const json_t *tasks, const json_t *event)
{
    const char *task = json_string_value(json_object_get(event, "task"));
    size_t i;
    const json_t *id;
    json_array_foreach(tasks, i, id)
    {
        if (task != NULL && strcmp(task, json_string_value(id)) == 0)
            return true;
    }
    return false;
}

static bool s_is_progress(const json_t *event)
{
    const char *name = json_string_value(json_object_get(event, "event"));
    return name != NULL && strcmp(name, "task.progress") == 0;
}

/* `events` without its oldest progress events past WEB_TIMELINE_MAX_PROGRESS (a new array);
 * *omitted says how many were left out. */
static json_t *s_cap_progress(const json_t *events, size_t *omitted)
{
    size_t progress = 0, i;
    json_t *event;
    json_array_foreach(events, i, event) progress += s_is_progress(event);
    *omitted = progress > WEB_TIMELINE_MAX_PROGRESS ? progress - WEB_TIMELINE_MAX_PROGRESS : 0;
    json_t *kept = json_array();
    size_t skipped = 0;
    json_array_foreach(events, i, event)
    {
        if (s_is_progress(event) && skipped < *omitted)
            skipped++;
        else
            json_array_append(kept, event);
    }
    return kept;
}

web_reply_t web_timeline(const web_t *web, const json_t *tasks, int64_t from_ms, int64_t to_ms)
{
    client_t *client = client_new(web->control_ep, web->timeout_ms);
    if (client == NULL)
        return web_broker_failure(FAILURE_IO);
    int64_t since = 0;
    int rc = s_seq_before(client, from_ms - WEB_TIMELINE_SLACK_MS, &since);
    json_t *kept = json_array();
    bool ended = false;
    size_t read = 0;
    while (rc == 0 && !ended && read < WEB_TIMELINE_MAX_EVENTS) {
        json_t *page = NULL;
        rc = s_replay(client, since, TIMELINE_PAGE, &page);
        size_t i;
        json_t *event;
        json_array_foreach(page, i, event)
        {
            since = s_int(event, "seq");
            if (s_int(event, "time") > to_ms + WEB_TIMELINE_SLACK_MS) {
                ended = true;
                break;
            }
            if (s_wanted(tasks, event)) {
                json_object_del(event, "result");
                json_array_append(kept, event);
            }
        }
        read += json_array_size(page);
        ended = ended || json_array_size(page) == 0;
        json_decref(page);
    }
    client_destroy(&client);
    if (rc != 0) {
        json_decref(kept);
        return web_broker_failure(rc);
    }
    size_t omitted;
    json_t *events = s_cap_progress(kept, &omitted);
    json_decref(kept);
    json_t *body = json_pack("{s:o, s:b, s:I}", "events", events, "truncated", !ended,
                             "progress_omitted", (json_int_t)omitted);
    return (web_reply_t){.status = 200, .body = body};
}
