/* pan events: the live stream from now on (like tail -f) until SIGINT or SIGTERM; with
 * --since SEQ (0: everything stored) the stored events after SEQ, then with --follow the
 * live stream. --task, --issue, --specialist filter. The subscription is made before the
 * replay and events are deduplicated by seq (client_events_run), so nothing is missed or
 * printed twice. One line an event, cut to the terminal's width; -v: whole, with the
 * result; --json: one JSON object an event. */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"
#include "utf8.h"
#include "verdict.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t s_stop;

static void s_on_signal(int signal_number)
{
    (void)signal_number;
    s_stop = 1;
}

typedef struct {
    bool json;
    bool verbose;                          /* the whole line, with the result */
    int width;                             /* cut lines to this many characters (0: never) */
    const char *task, *issue, *specialist; /* filters (NULL: any) */
    int64_t limit;                         /* 0: no limit */
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

/* Writes `line` (escaped, so one line) cut to `width` characters with "…" at the cut
 * (width 0: whole), then a newline. */
static void s_put_cut(const char *line, size_t len, int width)
{
    size_t chars = 0, at = 0;
    while (at < len && (width <= 0 || chars < (size_t)width)) {
        size_t step = utf8_char(line + at, len - at);
        at += step ? step : 1;
        chars++;
    }
    if (at < len) {
        /* One character less, for the ellipsis. */
        while (at > 0 && ((unsigned char)line[at - 1] & 0xC0) == 0x80)
            at--;
        at = at > 0 ? at - 1 : 0;
        while (at > 0 && ((unsigned char)line[at] & 0xC0) == 0x80)
            at--;
        fwrite(line, 1, at, stdout);
        fputs("…\n", stdout);
        return;
    }
    fwrite(line, 1, len, stdout);
    putchar('\n');
}

/* The verdict an ended task's event says (task.done / task.failed with its result), or
 * NULL for other events. */
static const char *s_event_verdict(const wire_msg_t *event)
{
    static const char *const ends[] = {"task.done", "task.failed", "task.dead", "task.cancelled"};
    const char *name = wire_msg_str(event, FIELD_EVENT, "");
    bool ended = false;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        ended = ended || strcmp(name, ends[i]) == 0;
    if (!ended)
        return NULL;
    const msgpack_object *result = wire_msg_object(event, FIELD_RESULT);
    json_t *task = json_pack("{s:s}", "state", name + 5);
    if (task != NULL && result != NULL)
        json_object_set_new(task, "result", msgjson_from_object(result));
    const char *verdict = task != NULL ? verdict_name(verdict_of_task(task)) : NULL;
    json_decref(task);
    return verdict;
}

/* One event as one readable line, whatever its text holds (pan_print_escaped):
 * `#12 14:03:22 task.done merge-agent t-1 attempt=1 worker=w-1 ... verdict=merged`, cut to
 * `width` characters (0: whole). With `verbose` the whole line, with the result as JSON.
 * Returns false when the line cannot be built or its result written as JSON. */
static bool s_print_line(const wire_msg_t *event, int width, bool verbose)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (out == NULL)
        return false;
    time_t seconds = (time_t)(wire_msg_int(event, FIELD_TIME, 0) / 1000);
    struct tm tm;
    char clock_text[16] = "--:--:--";
    if (localtime_r(&seconds, &tm) != NULL)
        strftime(clock_text, sizeof clock_text, "%H:%M:%S", &tm);
    fprintf(out, "#%lld %s ", (long long)wire_msg_int(event, FIELD_SEQ, 0), clock_text);
    pan_fprint_escaped(out, wire_msg_str(event, FIELD_EVENT, "?"));
    fputc(' ', out);
    pan_fprint_escaped(out, wire_msg_str(event, FIELD_SPECIALIST, "-"));
    fputc(' ', out);
    pan_fprint_escaped(out, wire_msg_str(event, FIELD_TASK, "-"));
    const char *verdict = s_event_verdict(event);
    if (verdict != NULL)
        fprintf(out, " verdict=%s", verdict);
    static const field_t strings[] = {FIELD_PRIORITY, FIELD_STATE, FIELD_WORKER, FIELD_KIND,
                                      FIELD_ISSUE,    FIELD_GROUP, FIELD_PARENT};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        if (wire_msg_has(event, strings[i])) {
            fprintf(out, " %s=", field_name(strings[i]));
            pan_fprint_escaped(out, wire_msg_str(event, strings[i], ""));
        }
    }
    if (wire_msg_has(event, FIELD_ATTEMPT))
        fprintf(out, " attempt=%lld", (long long)wire_msg_int(event, FIELD_ATTEMPT, 0));
    static const struct {
        field_t field;
        const char *label;
    } quoted[] = {{FIELD_TITLE, ""}, {FIELD_TEXT, "text="}, {FIELD_ERROR, "error="}};
    for (size_t i = 0; i < sizeof quoted / sizeof quoted[0]; i++) {
        if (wire_msg_has(event, quoted[i].field)) {
            fprintf(out, " %s\"", quoted[i].label);
            pan_fprint_escaped(out, wire_msg_str(event, quoted[i].field, ""));
            fputc('"', out);
        }
    }
    bool ok = true;
    const msgpack_object *result = verbose ? wire_msg_object(event, FIELD_RESULT) : NULL;
    if (result != NULL) {
        json_t *object = msgjson_from_object(result);
        char *text = object ? json_dumps(object, JSON_COMPACT) : NULL;
        if (text != NULL)
            fprintf(out, " result=%s", text);
        ok = text != NULL;
        free(text);
        json_decref(object);
    }
    if (fclose(out) != 0 || buf == NULL) {
        free(buf);
        return false;
    }
    s_put_cut(buf, len, verbose ? 0 : width);
    free(buf);
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
    bool ok = out->json ? s_print_json(raw, len) : s_print_line(event, out->width, out->verbose);
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

/* The terminal's width when stdout is one, else $COLUMNS, else 0 (lines are not cut). */
static int s_terminal_width(void)
{
    struct winsize size;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
        return size.ws_col;
    int64_t columns = 0;
    const char *text = getenv("COLUMNS");
    if (text != NULL && pan_parse_int(text, 20, 10000, &columns))
        return (int)columns;
    return 0;
}

int cmd_events(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan events [--since SEQ] [--follow] [--topic PREFIX] [--task ID] [--issue I]\n"
        "           [--specialist S] [--limit N] [--json] [--verbose]";
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
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            out.verbose = true;
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
    /* --task takes the unique start of an id too; a text no task id starts with is kept
     * as it is (a task still to come, when following). */
    char task_id[256];
    if (out.task != NULL) {
        int code = pan_task_id_resolve_quiet(pan, out.task, task_id, sizeof task_id);
        if (code == PAN_EXIT_OK)
            out.task = task_id;
        else if (task_id[0] != '\0' || code != PAN_EXIT_ERROR)
            return code;
    }
    /* Without --since, events are followed from now on, as `tail -f` does. */
    if (since_text == NULL)
        follow = true;
    out.width = s_terminal_width();
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
