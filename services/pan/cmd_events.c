/* pan events: the broker's stored events, then (with --follow) the live stream until
 * SIGINT or SIGTERM. --follow alone starts at the present (like tail -f); --since SEQ
 * (0: everything stored) replays first. --task, --issue, --specialist filter. The subscription is made before the replay and events are
 * deduplicated by seq (client_events_run), so nothing is missed or printed twice. */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t s_stop;

static void s_on_signal(int signal_number)
{
    (void)signal_number;
    s_stop = 1;
}

typedef struct {
    bool json;
    const char *task, *issue, *specialist; /* filters (NULL: any) */
    int64_t limit; /* 0: no limit */
    int64_t printed;
    int64_t failed_seq; /* the event that could not be written as JSON, or 0 */
} events_out_t;

/* One event as one JSON line: every field of the event, with `type` being the event name
 * (task.done, ...) rather than the envelope's "event". Returns false when the event
 * cannot be written as JSON. */
static bool s_print_json(const void *raw, size_t len)
{
    json_t *object = msgjson_from_raw(raw, len);
    if (object == NULL)
        return false;
    json_t *name = json_object_get(object, "event");
    if (json_is_string(name))
        json_object_set(object, "type", name);
    char *text = json_dumps(object, JSON_COMPACT);
    if (text != NULL)
        puts(text);
    free(text);
    json_decref(object);
    return text != NULL;
}

/* One event as one readable line, whatever its text holds (pan_print_escaped):
 * `#12 14:03:22 task.done merge-agent t-1 attempt=1 worker=w-1 ... result={...}`. Returns
 * false when its result cannot be written as JSON (the line is still ended). */
static bool s_print_line(const wire_msg_t *event)
{
    time_t seconds = (time_t)(wire_msg_int(event, FIELD_TIME, 0) / 1000);
    struct tm tm;
    char clock_text[16] = "--:--:--";
    if (localtime_r(&seconds, &tm) != NULL)
        strftime(clock_text, sizeof clock_text, "%H:%M:%S", &tm);
    printf("#%lld %s ", (long long)wire_msg_int(event, FIELD_SEQ, 0), clock_text);
    pan_print_escaped(wire_msg_str(event, FIELD_EVENT, "?"));
    putchar(' ');
    pan_print_escaped(wire_msg_str(event, FIELD_SPECIALIST, "-"));
    putchar(' ');
    pan_print_escaped(wire_msg_str(event, FIELD_TASK, "-"));
    static const field_t strings[] = {FIELD_PRIORITY, FIELD_STATE, FIELD_WORKER, FIELD_KIND,
                                      FIELD_ISSUE,    FIELD_GROUP, FIELD_PARENT};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        if (wire_msg_has(event, strings[i])) {
            printf(" %s=", field_name(strings[i]));
            pan_print_escaped(wire_msg_str(event, strings[i], ""));
        }
    }
    if (wire_msg_has(event, FIELD_ATTEMPT))
        printf(" attempt=%lld", (long long)wire_msg_int(event, FIELD_ATTEMPT, 0));
    static const struct {
        field_t field;
        const char *label;
    } quoted[] = {{FIELD_TITLE, ""}, {FIELD_TEXT, "text="}, {FIELD_ERROR, "error="}};
    for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++) {
        if (wire_msg_has(event, quoted[i].field)) {
            printf(" %s\"", quoted[i].label);
            pan_print_escaped(wire_msg_str(event, quoted[i].field, ""));
            putchar('"');
        }
    }
    bool ok = true;
    const msgpack_object *result = wire_msg_object(event, FIELD_RESULT);
    if (result != NULL) {
        json_t *object = msgjson_from_object(result);
        char *text = object ? json_dumps(object, JSON_COMPACT) : NULL;
        if (text != NULL)
            printf(" result=%s", text);
        ok = text != NULL;
        free(text);
        json_decref(object);
    }
    putchar('\n');
    return ok;
}

static int s_on_event(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    events_out_t *out = arg;
    if ((out->task != NULL && strcmp(wire_msg_str(event, FIELD_TASK, ""), out->task) != 0) ||
        (out->issue != NULL && strcmp(wire_msg_str(event, FIELD_ISSUE, ""), out->issue) != 0) ||
        (out->specialist != NULL &&
         strcmp(wire_msg_str(event, FIELD_SPECIALIST, ""), out->specialist) != 0))
        return 0;
    bool ok = out->json ? s_print_json(raw, len) : s_print_line(event);
    fflush(stdout);
    if (!ok) {
        out->failed_seq = wire_msg_int(event, FIELD_SEQ, -1);
        return 1;
    }
    out->printed++;
    return out->limit > 0 && out->printed >= out->limit;
}

/* The seq of the newest stored event (stats' last_seq), or -1 when the broker does not
 * say (the replay that follows reports why). */
static int64_t s_newest_seq(client_t *control)
{
    wire_writer_t *writer = wire_writer_new();
    if (writer == NULL)
        return -1;
    wire_writer_start(writer, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(control, writer, &reply);
    wire_writer_destroy(&writer);
    if (rc != 0)
        return -1;
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    json_t *stats = data ? msgjson_from_object(data) : NULL;
    int64_t newest = pan_json_int(stats, "last_seq", -1);
    json_decref(stats);
    wire_msg_destroy(&reply);
    return newest;
}

/* --since past the newest event shows nothing (no event has such a seq yet, e.g. after
 * the broker started on a new database): says so on stderr rather than stay silent. */
static void s_warn_since_beyond(client_t *control, int64_t since, bool follow)
{
    int64_t newest = s_newest_seq(control);
    if (newest < 0 || since <= newest)
        return;
    if (follow)
        fprintf(stderr,
                "pan: warning: --since %lld is beyond the newest event (#%lld): nothing to "
                "replay, and only events after #%lld will be shown\n",
                (long long)since, (long long)newest, (long long)since);
    else
        fprintf(stderr,
                "pan: warning: --since %lld is beyond the newest event (#%lld): nothing to "
                "show\n",
                (long long)since, (long long)newest);
}

int cmd_events(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan events [--since SEQ] [--follow] [--topic PREFIX] [--task ID] [--issue I]\n"
        "           [--specialist S] [--limit N] [--json]";
    const char *since_text = NULL, *topic = "", *limit_text = NULL;
    bool follow = false;
    events_out_t out = {0};
    for (int i = 0; i < argc; i++) {
        int found = 0;
        if (strcmp(argv[i], "--json") == 0) {
            out.json = true;
            continue;
        }
        if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0) {
            follow = true;
            continue;
        }
        if ((found = pan_option(argc, argv, &i, "--since", &since_text)) == 0 &&
            (found = pan_option(argc, argv, &i, "--topic", &topic)) == 0 &&
            (found = pan_option(argc, argv, &i, "--task", &out.task)) == 0 &&
            (found = pan_option(argc, argv, &i, "--issue", &out.issue)) == 0 &&
            (found = pan_option(argc, argv, &i, "--specialist", &out.specialist)) == 0)
            found = pan_option(argc, argv, &i, "--limit", &limit_text);
        if (found < 0)
            return pan_usage(usage, "%s needs a value", argv[i]);
        if (found == 0)
            return pan_usage_unknown(usage, argv[i]);
    }
    int64_t since = 0;
    if (since_text != NULL && !pan_parse_int(since_text, 0, INT64_MAX, &since))
        return pan_usage(usage, "--since takes an event number, not '%s'", since_text);
    if (limit_text != NULL && !pan_parse_int(limit_text, 1, INT64_MAX, &out.limit))
        return pan_usage(usage, "--limit takes a positive count, not '%s'", limit_text);

    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = s_on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);

    client_t *control = client_new(pan->control_ep, pan->timeout_ms);
    client_events_t *events =
        control ? client_events_new(follow ? pan->events_ep : NULL, topic) : NULL;
    int code = PAN_EXIT_OK;
    if (events == NULL) {
        code = pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    } else {
        if (since_text != NULL)
            s_warn_since_beyond(control, since, follow);
        /* Following starts at the present, as `tail -f` does; --since replays. */
        int64_t newest = follow && since_text == NULL ? s_newest_seq(control) : -1;
        if (newest > 0)
            since = newest;
        int rc = client_events_run(events, control, since, follow, &s_stop, s_on_event, &out);
        if (rc == FAILURE_TIMEOUT || rc == FAILURE_IO)
            code = pan_fail(PAN_EXIT_UNREACHABLE, "%s", failure_message());
        else if (rc != 0)
            code = pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
        else if (out.failed_seq != 0)
            code = pan_fail(PAN_EXIT_ERROR, "cannot write event #%lld as JSON: stopped",
                            (long long)out.failed_seq);
    }
    client_events_destroy(&events);
    client_destroy(&control);
    return code;
}
