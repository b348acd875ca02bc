/* pan top (also `pan status --watch`): a live view of the system, redrawn every
 * --interval seconds (default 1) until Ctrl-C, or --frames N frames.
 *
 * A frame shows the specialists (workers, how many busy, queued, done/failed/dead since the
 * broker started, the cost of the tasks they finished), queue depths by priority, every
 * running task with its worker, elapsed time and last progress line, and the most recent
 * failures. Progress lines and costs come from the broker's events, replayed since the last
 * one seen (at start, the last TOP_HISTORY_EVENTS); the rest from stats, list_specialists
 * and list_tasks. Nothing beyond a terminal's own escape codes: on a terminal each frame
 * replaces the last (home + clear), lines cut to its width; otherwise frames follow one
 * another, each ending with a line of dashes. A broker that stops answering is said in the
 * frame, and the view goes on trying. */
#include "pan.h"

#include "clock.h"
#include "failure.h"
#include "msgjson.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* Events replayed at start, for the progress lines and costs already there. */
#define TOP_HISTORY_EVENTS 5000
#define TOP_RUNNING_MAX 40
#define TOP_FAILURES_MAX 6

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig)
{
    (void)sig;
    s_stop = 1;
}

typedef struct {
    const pan_t *pan;
    client_t *client;
    json_t *progress; /* task id -> its last progress line */
    json_t *costs;    /* specialist -> cost (real) of the tasks it finished */
    int64_t last_seq;
    int width;
    bool tty;
} top_t;

/* One control request; returns the reply's data (new reference) or NULL with `error` set. */
static json_t *s_request(top_t *top, wire_writer_t *w, char *error, size_t size)
{
    wire_msg_t *reply = NULL;
    int rc = client_call(top->client, w, &reply);
    wire_writer_destroy(&w);
    if (rc != 0) {
        snprintf(error, size, "%s", failure_message());
        return NULL;
    }
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    json_t *value = data ? msgjson_from_object(data) : json_null();
    wire_msg_destroy(&reply);
    return value;
}

static json_t *s_list(top_t *top, const char *state, int limit, char *error, size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_LIST_TASKS);
    wire_put_str(w, FIELD_STATE, state);
    wire_put_int(w, FIELD_LIMIT, limit);
    return s_request(top, w, error, size);
}

static json_t *s_simple(top_t *top, msg_type_t type, char *error, size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, type);
    return s_request(top, w, error, size);
}

/* Keeps what the view needs from one event: a progress line, a finished task's cost. */
static int s_on_event(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    top_t *top = arg;
    const char *name = wire_msg_str(event, FIELD_EVENT, "");
    const char *task = wire_msg_str(event, FIELD_TASK, "");
    if (strcmp(name, "task.progress") == 0 && task[0] != '\0') {
        json_object_set_new(top->progress, task, json_string(wire_msg_str(event, FIELD_TEXT, "")));
    } else if (strcmp(name, "task.done") == 0 || strcmp(name, "task.failed") == 0) {
        json_t *body = msgjson_from_raw(raw, len);
        const json_t *cost = json_object_get(json_object_get(body, "result"), "cost_usd");
        const char *specialist = wire_msg_str(event, FIELD_SPECIALIST, "?");
        if (json_is_number(cost)) {
            double sum = json_number_value(json_object_get(top->costs, specialist));
            json_object_set_new(top->costs, specialist, json_real(sum + json_number_value(cost)));
        }
        json_decref(body);
        json_object_del(top->progress, task);
    }
    return 0;
}

/* Replays the events since the last one seen. */
static void s_follow_events(top_t *top)
{
    client_events_t *events = client_events_new(NULL, "task.");
    if (events == NULL)
        return;
    if (client_events_run(events, top->client, top->last_seq, false, &s_stop, s_on_event, top) ==
        0)
        top->last_seq = client_events_last_seq(events);
    client_events_destroy(&events);
}

/* Writes `text` cut to `width` columns (one byte a column for ASCII; a UTF-8 sequence is
 * never split), control characters as spaces. */
static void s_cell(FILE *out, const char *text, int width)
{
    int used = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && used < width; c++) {
        if ((*c & 0xC0) == 0x80) {
            fputc(*c, out); /* a continuation byte belongs to the character before */
            continue;
        }
        fputc(*c < 0x20 || *c == 0x7f ? ' ' : *c, out);
        used++;
    }
    for (; used < width; used++)
        fputc(' ', out);
}

static void s_render_specialists(top_t *top, FILE *out, const json_t *specialists,
                                 const json_t *running)
{
    fprintf(out, "%-18s %7s %5s %7s %7s %7s %6s %9s\n", "SPECIALIST", "WORKERS", "BUSY", "QUEUED",
            "DONE", "FAILED", "DEAD", "COST");
    size_t i;
    const json_t *entry;
    json_array_foreach(specialists, i, entry)
    {
        const char *name = pan_json_str(entry, "name", "?");
        int64_t busy = 0;
        size_t k;
        const json_t *task;
        json_array_foreach(running, k, task) busy +=
            strcmp(pan_json_str(task, "specialist", ""), name) == 0;
        s_cell(out, name, 18);
        fprintf(out, " %7lld %5lld %7lld %7lld %7lld %6lld %9.2f\n",
                (long long)pan_json_int(entry, "workers", 0), (long long)busy,
                (long long)pan_json_int(entry, "queued", 0),
                (long long)pan_json_int(entry, "done", 0),
                (long long)pan_json_int(entry, "failed", 0),
                (long long)pan_json_int(entry, "dead", 0),
                json_number_value(json_object_get(top->costs, name)));
    }
    if (json_array_size(specialists) == 0)
        fprintf(out, "  (no specialist known yet)\n");
}

static void s_render_queues(FILE *out, const json_t *stats)
{
    const json_t *queues = json_object_get(stats, "queues");
    fprintf(out, "\n%-18s %7s %7s %7s %7s   oldest queued %.1f s\n", "QUEUE", "urgent", "high",
            "normal", "low", (double)pan_json_int(stats, "oldest_queued_age_ms", 0) / 1000.0);
    const char *name;
    const json_t *depth;
    json_object_foreach((json_t *)queues, name, depth)
    {
        s_cell(out, name, 18);
        fprintf(out, " %7lld %7lld %7lld %7lld\n", (long long)pan_json_int(depth, "urgent", 0),
                (long long)pan_json_int(depth, "high", 0),
                (long long)pan_json_int(depth, "normal", 0),
                (long long)pan_json_int(depth, "low", 0));
    }
}

static void s_render_running(top_t *top, FILE *out, const json_t *running)
{
    fprintf(out, "\nRUNNING (%zu)\n", json_array_size(running));
    int64_t now = clock_wall_ms();
    size_t i;
    const json_t *task;
    int rest = top->width - (36 + 1 + 14 + 1 + 14 + 1 + 8 + 1);
    json_array_foreach(running, i, task)
    {
        const char *id = pan_json_str(task, "id", "?");
        char elapsed[32];
        pan_format_age(elapsed, sizeof elapsed, now - pan_json_int(task, "updated", now));
        s_cell(out, id, 36);
        fputc(' ', out);
        s_cell(out, pan_json_str(task, "specialist", "?"), 14);
        fputc(' ', out);
        s_cell(out, pan_json_str(task, "worker", "-"), 14);
        fputc(' ', out);
        s_cell(out, elapsed, 8);
        fputc(' ', out);
        const char *line = json_string_value(json_object_get(top->progress, id));
        s_cell(out, line ? line : pan_json_str(task, "title", ""), rest > 10 ? rest : 10);
        fputc('\n', out);
    }
}

static void s_render_failures(top_t *top, FILE *out, const json_t *failed, const json_t *dead)
{
    fprintf(out, "\nRECENT FAILURES\n");
    int64_t now = clock_wall_ms();
    const json_t *lists[] = {dead, failed};
    int shown = 0;
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        const json_t *task;
        json_array_foreach(lists[l], i, task)
        {
            char age[32];
            pan_format_age(age, sizeof age, now - pan_json_int(task, "updated", now));
            s_cell(out, pan_json_str(task, "id", "?"), 36);
            fputc(' ', out);
            s_cell(out, pan_json_str(task, "state", "?"), 7);
            fputc(' ', out);
            s_cell(out, pan_json_str(task, "specialist", "?"), 14);
            fputc(' ', out);
            s_cell(out, age, 8);
            fputc(' ', out);
            int rest = top->width - (36 + 1 + 7 + 1 + 14 + 1 + 8 + 1);
            s_cell(out, pan_json_str(task, "error", ""), rest > 10 ? rest : 10);
            fputc('\n', out);
            shown++;
        }
    }
    if (shown == 0)
        fprintf(out, "  (none)\n");
}

/* Draws one frame into `out`. */
static void s_render(top_t *top, FILE *out)
{
    char error[512] = "";
    json_t *stats = s_simple(top, MSG_STATS, error, sizeof error);
    json_t *specialists = stats ? s_simple(top, MSG_LIST_SPECIALISTS, error, sizeof error) : NULL;
    json_t *running = specialists ? s_list(top, "running", TOP_RUNNING_MAX, error, sizeof error) : NULL;
    json_t *failed = running ? s_list(top, "failed", TOP_FAILURES_MAX / 2, error, sizeof error) : NULL;
    json_t *dead = failed ? s_list(top, "dead", TOP_FAILURES_MAX / 2, error, sizeof error) : NULL;
    if (dead != NULL)
        s_follow_events(top);
    time_t now = time(NULL);
    char clock_text[32];
    strftime(clock_text, sizeof clock_text, "%H:%M:%S", localtime(&now));
    fprintf(out, "Cloister at %s   %s   (Ctrl-C to quit)\n", top->pan->control_ep, clock_text);
    if (dead == NULL) {
        fprintf(out, "\n  the broker does not answer: %s\n  (trying again)\n", error);
    } else {
        fprintf(out, "Since the broker started: submitted %lld, completed %lld   throughput "
                     "%.2f/s   dead now %lld   workers %lld\n\n",
                (long long)pan_json_int(stats, "submitted", 0),
                (long long)pan_json_int(stats, "completed", 0),
                json_number_value(json_object_get(stats, "throughput_per_s")),
                (long long)pan_json_int(stats, "dead", 0),
                (long long)pan_json_int(stats, "workers", 0));
        s_render_specialists(top, out, specialists, running);
        s_render_queues(out, stats);
        s_render_running(top, out, running);
        s_render_failures(top, out, failed, dead);
    }
    json_decref(stats);
    json_decref(specialists);
    json_decref(running);
    json_decref(failed);
    json_decref(dead);
}

/* Writes the frame: over the last one on a terminal, after it otherwise. */
static void s_show(top_t *top, const char *frame, size_t len)
{
    if (top->tty)
        fputs("\033[H\033[2J", stdout);
    fwrite(frame, 1, len, stdout);
    if (!top->tty)
        fputs("----\n", stdout);
    fflush(stdout);
}

/* Sleeps `ms`, or less when Ctrl-C comes. */
static void s_nap(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (!s_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int cmd_top(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan top [--interval SECONDS] [--frames N]";
    double interval = 1.0;
    int64_t frames = 0;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--interval", &value);
        if (found > 0) {
            char *end = NULL;
            interval = strtod(value, &end);
            if (end == value || *end != '\0' || interval < 0.1 || interval > 3600)
                return pan_usage(usage, "--interval takes seconds from 0.1 to 3600, not '%s'",
                                 value);
            continue;
        }
        if (found == 0)
            found = pan_option(argc, argv, &i, "--frames", &value);
        if (found > 0 && !pan_parse_int(value, 1, 1000000, &frames))
            return pan_usage(usage, "--frames takes a number of frames, not '%s'", value);
        if (found < 0)
            return pan_usage(usage, "%s needs a value", argv[i]);
        if (found == 0 && strcmp(argv[i], "--watch") != 0)
            return pan_usage_unknown(usage, argv[i]);
    }
    top_t top = {.pan = pan, .progress = json_object(), .costs = json_object(), .width = 120,
                 .tty = isatty(STDOUT_FILENO)};
    struct winsize size;
    if (top.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 40)
        top.width = size.ws_col;
    top.client = client_new(pan->control_ep, pan->timeout_ms);
    if (top.client == NULL)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    signal(SIGINT, s_on_signal);
    signal(SIGTERM, s_on_signal);
    char error[256];
    json_t *stats = s_simple(&top, MSG_STATS, error, sizeof error);
    int64_t last = pan_json_int(stats, "last_seq", 0);
    top.last_seq = last > TOP_HISTORY_EVENTS ? last - TOP_HISTORY_EVENTS : 0;
    json_decref(stats);
    for (int64_t shown = 0; !s_stop && (frames == 0 || shown < frames); shown++) {
        char *frame = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&frame, &len);
        if (out == NULL)
            break;
        s_render(&top, out);
        fclose(out);
        s_show(&top, frame, len);
        free(frame);
        if (frames == 0 || shown + 1 < frames)
            s_nap((int64_t)(interval * 1000));
    }
    client_destroy(&top.client);
    json_decref(top.progress);
    json_decref(top.costs);
    return PAN_EXIT_OK;
}
