/* pan specialists list / queue / wake / reset / resume: the original CLI's surface over the
 * broker, and resuming a specialist the broker paused (its model API refused the key).
 *
 * The output keeps the original's shapes (`Specialist Agents:`, `Queue is empty - no
 * pending work`, `Total items: N`, `{hasWork, urgentCount, items}`, the `✓` lines) and adds
 * what the broker and the session store know: queued / running / workers, the session's
 * tokens, cost and last run, and the PR, workspace and branch of queued items (which the
 * original meant to show but never did).
 *
 * Known specialists: the three defaults, every [specialists.<name>] in the config, and any
 * name the broker reports. */
#include "pan.h"

#include "clock.h"
#include "failure.h"
#include "msgjson.h"
#include "replica.h"
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAN_MAX_SPECIALISTS 64
/* How long reset --force waits for a cancelled task's run to let go of the session. */
#define S_RESET_WAIT_MS 30000

static const char *const s_defaults[] = {"merge-agent", "review-agent", "test-agent"};

typedef struct {
    const char *names[PAN_MAX_SPECIALISTS]; /* borrowed from the defaults, config or broker */
    size_t count;
    json_t *broker; /* list_specialists data (owned), NULL when not asked or unreachable */
} known_t;

static void s_known_add(known_t *known, const char *name)
{
    for (size_t i = 0; i < known->count; i++)
        if (strcmp(known->names[i], name) == 0)
            return;
    if (known->count < PAN_MAX_SPECIALISTS)
        known->names[known->count++] = name;
}

static int s_compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

typedef enum { BROKER_REQUIRED, BROKER_OPTIONAL } broker_need_t;

/* The broker's list_specialists data (caller owns), or NULL. When the broker is optional
 * its silence is not reported. Returns the exit code. */
static int s_broker_list(const pan_t *pan, broker_need_t need, json_t **data)
{
    *data = NULL;
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_SPECIALISTS);
    int code = PAN_EXIT_OK;
    if (need == BROKER_REQUIRED) {
        code = pan_call(pan, writer, data);
    } else {
        client_t *client = client_new(pan->control_ep, pan->timeout_ms);
        wire_msg_t *reply = NULL;
        if (client != NULL && client_call(client, writer, &reply) == 0) {
            const msgpack_object *object = wire_msg_object(reply, FIELD_DATA);
            *data = object ? msgjson_from_object(object) : NULL;
        }
        wire_msg_destroy(&reply);
        client_destroy(&client);
    }
    wire_writer_destroy(&writer);
    return code;
}

/* Collects the known names: the defaults, the configured ones and the broker's. */
static int s_known_load(const pan_t *pan, known_t *known, broker_need_t need)
{
    memset(known, 0, sizeof *known);
    for (size_t i = 0; i < sizeof s_defaults / sizeof s_defaults[0]; i++)
        s_known_add(known, s_defaults[i]);
    for (size_t i = 0; i < config_table_count(pan->config); i++) {
        const char *table = config_table_name(pan->config, i);
        if (strncmp(table, "specialists.", 12) == 0 && table[12] != '\0' &&
            strchr(table + 12, '_') == NULL)
            s_known_add(known, table + 12);
    }
    json_t *data = NULL;
    int code = s_broker_list(pan, need, &data);
    if (code != PAN_EXIT_OK)
        return code;
    if (json_is_array(data)) {
        known->broker = data;
        size_t i;
        json_t *item;
        json_array_foreach(data, i, item)
        {
            const char *name = pan_json_str(item, "name", NULL);
            if (name != NULL)
                s_known_add(known, name);
        }
    } else {
        json_decref(data);
    }
    qsort(known->names, known->count, sizeof known->names[0], s_compare_names);
    return PAN_EXIT_OK;
}

static void s_known_free(known_t *known)
{
    json_decref(known->broker);
    known->broker = NULL;
}

static bool s_known_has(const known_t *known, const char *name)
{
    for (size_t i = 0; i < known->count; i++)
        if (strcmp(known->names[i], name) == 0)
            return true;
    return false;
}

/* The known name `name` most likely misspells, or NULL (also when it is known). */
static const char *s_near(const known_t *known, const char *name)
{
    const char *candidates[PAN_MAX_SPECIALISTS + 1];
    for (size_t i = 0; i < known->count; i++)
        candidates[i] = known->names[i];
    candidates[known->count] = NULL;
    const char *near = pan_suggest(name, candidates);
    return near != NULL && strcmp(near, name) != 0 ? near : NULL;
}

/* The original's error for an unknown name, with the likeliest meant one; returns
 * PAN_EXIT_ERROR (a name is known once a worker of it has joined: not a usage error). */
static int s_unknown(const known_t *known, const char *name)
{
    fprintf(stderr, "Error: Unknown specialist '%s'\n", name);
    const char *near = s_near(known, name);
    if (near != NULL)
        fprintf(stderr, "Did you mean '%s'?\n", near);
    fprintf(stderr, "Valid specialists: ");
    for (size_t i = 0; i < known->count; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", known->names[i]);
    fputc('\n', stderr);
    return PAN_EXIT_ERROR;
}

void pan_suggest_specialist(const pan_t *pan, const char *name)
{
    known_t known;
    if (s_known_load(pan, &known, BROKER_OPTIONAL) != PAN_EXIT_OK)
        return;
    const char *near = s_near(&known, name);
    if (near != NULL)
        fprintf(stderr, "pan: did you mean '%s'?\n", near);
    s_known_free(&known);
}

/* The broker's entry for `name`, or NULL. */
static json_t *s_broker_entry(const known_t *known, const char *name)
{
    size_t i;
    json_t *item;
    json_array_foreach(known->broker, i, item)
    {
        if (strcmp(pan_json_str(item, "name", ""), name) == 0)
            return item;
    }
    return NULL;
}

/* "merge-agent" -> "Merge Agent". */
static void s_display_name(const char *name, char *buf, size_t size)
{
    size_t used = 0;
    bool word_start = true;
    for (const char *p = name; *p && used + 1 < size; p++) {
        char c = *p;
        if (c == '-' || c == '_' || c == '.') {
            buf[used++] = ' ';
            word_start = true;
            continue;
        }
        buf[used++] = (word_start && c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
        word_start = false;
    }
    buf[used] = '\0';
}

static const char *s_description(const char *name)
{
    if (strcmp(name, "merge-agent") == 0)
        return "Merges approved branches, resolves conflicts, runs the tests and pushes";
    if (strcmp(name, "review-agent") == 0)
        return "Reviews changes, runs the checks, approves or requests changes";
    if (strcmp(name, "test-agent") == 0)
        return "Detects and runs the test suite, analyses failures, attempts simple fixes";
    return "Custom specialist";
}

/* True for the specialists that run an agent CLI (review, test, merge). */
static bool s_runs_agent(const char *name)
{
    return strcmp(name, "merge-agent") == 0 || strcmp(name, "review-agent") == 0 ||
           strcmp(name, "test-agent") == 0;
}

/* 45000 -> "45,000". */
static void s_format_count(char *buf, size_t size, int64_t value)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", (long long)(value < 0 ? -value : value));
    size_t len = strlen(digits), used = 0;
    if (value < 0 && used + 1 < size)
        buf[used++] = '-';
    for (size_t i = 0; i < len && used + 1 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0 && used + 1 < size)
            buf[used++] = ',';
        if (used + 1 < size)
            buf[used++] = digits[i];
    }
    buf[used] = '\0';
}

static void s_iso_time(char *buf, size_t size, int64_t wall_ms)
{
    time_t seconds = (time_t)(wall_ms / 1000);
    struct tm tm;
    if (gmtime_r(&seconds, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, size, "%lld", (long long)wall_ms);
}

/* ---- list ---- */

/* The replicas of a scaled specialist (replica.h): each slot a live process holds or
 * whose session is kept, as [{replica, live, sessionId, runs, contextTokens, costUsd}];
 * NULL when there is one copy at most (the single-instance view says it all). */
static json_t *s_replicas(const char *name)
{
    json_t *replicas = json_array();
    for (int k = 0; replicas != NULL && k < REPLICA_MAX; k++) {
        char key[SESSION_NAME_MAX + 8];
        replica_session_key(key, sizeof key, name, k);
        session_state_t session;
        bool has_session = session_load(key, &session) == 0;
        bool live = replica_live(name, k);
        if (!has_session && !live)
            continue;
        json_t *entry = json_pack("{s:i, s:b}", "replica", k, "live", live);
        if (entry != NULL && has_session) {
            json_object_set_new(entry, "sessionId", json_string(session.session_id));
            json_object_set_new(entry, "runs", json_integer(session.runs));
            json_object_set_new(entry, "contextTokens", json_integer(session.context_tokens));
            json_object_set_new(entry, "costUsd", json_real(session.cost_usd));
        }
        json_array_append_new(replicas, entry);
    }
    if (json_array_size(replicas) <= 1) {
        json_decref(replicas);
        return NULL;
    }
    return replicas;
}

static void s_print_replicas(const json_t *replicas)
{
    size_t i, live = 0;
    json_t *entry;
    json_array_foreach(replicas, i, entry) live += json_is_true(json_object_get(entry, "live"));
    printf("  Replicas: %zu, %zu live\n", json_array_size(replicas), live);
    json_array_foreach(replicas, i, entry)
    {
        const char *session = pan_json_str(entry, "sessionId", NULL);
        printf("    #%lld %s", (long long)pan_json_int(entry, "replica", 0),
               json_is_true(json_object_get(entry, "live")) ? "live   " : "stopped");
        if (session != NULL)
            printf("  session %.8s..., %lld runs", session,
                   (long long)pan_json_int(entry, "runs", 0));
        printf("\n");
    }
}

/* One specialist's entry of `pan specialists list --json` (caller owns), or NULL when it
 * cannot be built. Names from the configuration that are not UTF-8 get U+FFFD. */
static json_t *s_status_json(const pan_t *pan, const known_t *known, const char *name)
{
    json_t *entry = s_broker_entry(known, name);
    int64_t running = pan_json_int(entry, "running", 0),
            workers = pan_json_int(entry, "workers", 0);
    const char *paused = pan_json_str(entry, "paused", NULL);
    const char *state = paused != NULL ? "paused"
                        : running > 0  ? "running"
                        : workers > 0  ? "idle"
                                       : "offline";
    char display[128];
    s_display_name(name, display, sizeof display);
    json_t *status =
        json_pack("{s:o, s:o, s:s, s:b, s:b, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name",
                  msgjson_string(name, strlen(name)), "displayName",
                  msgjson_string(display, strlen(display)), "description", s_description(name),
                  "enabled",
                  config_specialist_enabled(pan->config, name), "autoWake",
                  config_specialist_auto_wake(pan->config, name), "state", state, "isRunning",
                  running > 0, "queued", (json_int_t)pan_json_int(entry, "queued", 0), "running",
                  (json_int_t)running, "workers", (json_int_t)workers, "idleWorkers",
                  (json_int_t)pan_json_int(entry, "idle_workers", 0), "done",
                  (json_int_t)pan_json_int(entry, "done", 0), "failed",
                  (json_int_t)pan_json_int(entry, "failed", 0), "dead",
                  (json_int_t)pan_json_int(entry, "dead", 0));
    /* Only the built-in specialists run an agent CLI; any other name is a generic worker's,
     * whose command is its own (agent: null). */
    if (status != NULL)
        json_object_set_new(status, "agent",
                            s_runs_agent(name)
                                ? json_string(config_specialist_cli(pan->config, name))
                                : json_null());
    /* What its running tasks are doing ("resolving conflicts in 2 files"). */
    const json_t *phases = json_object_get(entry, "phases");
    if (status != NULL && json_array_size(phases) > 0)
        json_object_set(status, "phases", (json_t *)phases);
    if (status != NULL && paused != NULL)
        json_object_set_new(status, "pausedBecause", msgjson_string(paused, strlen(paused)));
    session_state_t session;
    if (status != NULL && session_load(name, &session) == 0) {
        json_object_set_new(status, "sessionId",
                            msgjson_string(session.session_id, strlen(session.session_id)));
        json_object_set_new(status, "sessionAgent", json_string(session.cli));
        /* The context is the conversation's current size (what rotation measures); a file
         * written before it was recorded only has the accumulated input tokens. */
        int64_t context =
            session.context_tokens > 0 ? session.context_tokens : session.input_tokens;
        json_object_set_new(status, "contextTokens", json_integer(context));
        json_object_set_new(status, "inputTokens", json_integer(session.input_tokens));
        json_object_set_new(status, "outputTokens", json_integer(session.output_tokens));
        json_object_set_new(status, "costUsd", json_real(session.cost_usd));
        json_object_set_new(status, "runs", json_integer(session.runs));
        if (session.last_run_at_ms > 0) {
            char when[64];
            s_iso_time(when, sizeof when, session.last_run_at_ms);
            json_object_set_new(status, "lastWake", json_string(when));
        }
    }
    json_t *replicas = status != NULL ? s_replicas(name) : NULL;
    if (replicas != NULL)
        json_object_set_new(status, "replicas", replicas);
    return status;
}

static void s_print_status(const json_t *status, bool color)
{
    const char *state = pan_json_str(status, "state", "offline");
    bool enabled = json_is_true(json_object_get(status, "enabled"));
    const char *icon = "○", *on = color ? "\033[2m" : "";
    if (enabled && strcmp(state, "running") == 0) {
        icon = "●";
        on = color ? "\033[32m" : "";
    } else if (enabled && strcmp(state, "idle") == 0) {
        icon = "●";
        on = color ? "\033[33m" : "";
    } else if (strcmp(state, "paused") == 0) {
        icon = "⏸";
        on = color ? "\033[31m" : "";
    }
    printf("%s%s%s %s (%s)\n", on, icon, color ? "\033[0m" : "",
           pan_json_str(status, "displayName", "?"), enabled ? "enabled" : "disabled");
    printf("  %s\n", pan_json_str(status, "description", ""));
    printf("  Status: %s\n", state);
    const char *paused = pan_json_str(status, "pausedBecause", NULL);
    if (paused != NULL)
        printf("  Paused: %s\n  (no task of it runs until `pan specialists resume %s`, or a "
               "`pan doctor` that passes)\n",
               paused, pan_json_str(status, "name", "?"));
    size_t i;
    const json_t *phase;
    json_array_foreach(json_object_get(status, "phases"), i, phase)
    {
        printf("  Now: ");
        pan_print_escaped(pan_json_str(phase, "phase", "?"));
        printf(" (task ");
        pan_print_escaped(pan_json_str(phase, "task", "?"));
        printf(")\n");
    }
    printf("  Queue: %lld queued, %lld running, %lld done, %lld failed, %lld dead\n",
           (long long)pan_json_int(status, "queued", 0),
           (long long)pan_json_int(status, "running", 0),
           (long long)pan_json_int(status, "done", 0), (long long)pan_json_int(status, "failed", 0),
           (long long)pan_json_int(status, "dead", 0));
    printf("  Workers: %lld (%lld idle)\n", (long long)pan_json_int(status, "workers", 0),
           (long long)pan_json_int(status, "idleWorkers", 0));
    const char *agent = pan_json_str(status, "agent", NULL);
    const char *session_agent = pan_json_str(status, "sessionAgent", agent);
    if (agent == NULL)
        printf("  Agent: none (its worker runs a command of its own)\n");
    else if (session_agent == NULL || strcmp(agent, session_agent) == 0)
        printf("  Agent: %s\n", agent);
    else
        printf("  Agent: %s (the session is %s's: the next run starts a fresh one)\n", agent,
               session_agent);
    const char *session = pan_json_str(status, "sessionId", NULL);
    if (session != NULL) {
        char tokens[32];
        s_format_count(tokens, sizeof tokens, pan_json_int(status, "contextTokens", 0));
        json_t *cost = json_object_get(status, "costUsd");
        printf("  Session: %.8s...\n", session);
        printf("  Context: %s tokens (cost $%.2f, %lld runs)\n", tokens,
               json_is_number(cost) ? json_number_value(cost) : 0.0,
               (long long)pan_json_int(status, "runs", 0));
    }
    const json_t *replicas = json_object_get(status, "replicas");
    if (replicas != NULL)
        s_print_replicas(replicas);
    const char *last = pan_json_str(status, "lastWake", NULL);
    if (last != NULL) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        char age[32] = "";
        if (strptime(last, "%Y-%m-%dT%H:%M:%SZ", &tm) != NULL) {
            pan_format_age(age, sizeof age, clock_wall_ms() - (int64_t)timegm(&tm) * 1000);
            printf("  Last wake: %s%s\n", age, strcmp(age, "just now") ? " ago" : "");
        }
    }
    printf("\n");
}

static int s_list(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists list [--json]";
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else
            return pan_usage_unknown(usage, argv[i]);
    }
    known_t known;
    int code = s_known_load(pan, &known, BROKER_REQUIRED);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *all = json_array();
    for (size_t i = 0; i < known.count && code == PAN_EXIT_OK; i++) {
        json_t *status = s_status_json(pan, &known, known.names[i]);
        if (status == NULL || json_array_append_new(all, status) != 0)
            code = pan_fail(PAN_EXIT_ERROR, "cannot describe specialist '%s' as JSON",
                            known.names[i]);
    }
    if (code == PAN_EXIT_OK && json) {
        code = pan_print_json(all);
    } else if (code == PAN_EXIT_OK) {
        printf("Specialist Agents:\n\n");
        bool color = isatty(STDOUT_FILENO);
        size_t i;
        json_t *status;
        json_array_foreach(all, i, status) s_print_status(status, color);
    }
    json_decref(all);
    s_known_free(&known);
    return code;
}

/* ---- queue ---- */

/* The original's queue item, plus title, state, attempt and the whole payload (caller
 * owns), or NULL when it cannot be built. */
static json_t *s_queue_item(const json_t *task, int64_t now)
{
    int64_t created = pan_json_int(task, "created", now);
    char age[32];
    pan_format_age(age, sizeof age, now - created);
    json_t *item = json_pack(
        "{s:s, s:s, s:s, s:s?, s:s?, s:s?, s:I, s:s, s:I, s:I}", "id", pan_json_str(task, "id", ""),
        "type", "task", "priority", pan_json_str(task, "priority", "normal"), "source",
        pan_json_str(task, "source", NULL), "issue", pan_json_str(task, "issue", NULL), "title",
        pan_json_str(task, "title", NULL), "createdAt", (json_int_t)created, "age", age, "ageMs",
        (json_int_t)(now - created), "attempt", (json_int_t)pan_json_int(task, "attempt", 0));
    json_t *payload = json_object_get(task, "payload");
    if (item != NULL)
        json_object_set_new(item, "payload",
                            json_is_object(payload) ? json_incref(payload) : json_object());
    return item;
}

static void s_print_item(size_t index, const json_t *item)
{
    char upper[16] = "";
    const char *priority = pan_json_str(item, "priority", "normal");
    for (size_t i = 0; priority[i] && i + 1 < sizeof upper; i++)
        upper[i] =
            (char)(priority[i] >= 'a' && priority[i] <= 'z' ? priority[i] - 32 : priority[i]);
    printf("%zu. %s\n", index, upper);
    printf("   ID: %s\n", pan_json_str(item, "id", ""));
    const json_t *payload = json_object_get(item, "payload");
    const char *lines[][2] = {
        {"Title", pan_json_str(item, "title", NULL)},
        {"Source", pan_json_str(item, "source", NULL)},
        {"Issue", pan_json_str(item, "issue", pan_json_str(payload, "issueId", NULL))},
        {"Age", pan_json_str(item, "age", NULL)},
        {"PR", pan_json_str(payload, "prUrl", NULL)},
        {"Workspace", pan_json_str(payload, "workspace", NULL)},
        {"Branch", pan_json_str(payload, "branch", NULL)},
        {"Task", pan_json_str(payload, "task", NULL)},
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (lines[i][1] != NULL && lines[i][1][0] != '\0')
            printf("   %s: %s\n", lines[i][0], lines[i][1]);
}

static int s_queue(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists queue <name> [--json]";
    const char *name = NULL;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (argv[i][0] == '-' || name != NULL)
            return pan_usage_unknown(usage, argv[i]);
        else
            name = argv[i];
    }
    if (name == NULL)
        return pan_usage(usage, "which specialist?");
    known_t known;
    int code = s_known_load(pan, &known, BROKER_REQUIRED);
    if (code != PAN_EXIT_OK)
        return code;
    if (!s_known_has(&known, name)) {
        code = s_unknown(&known, name);
        s_known_free(&known);
        return code;
    }
    /* The broker's counts of the whole queue: a cut listing shows only its head. */
    json_t *entry = s_broker_entry(&known, name);
    int64_t total = pan_json_int(entry, "queued", -1),
            total_urgent = pan_json_int(entry, "urgent", 0);
    s_known_free(&known);

    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_QUEUE);
    wire_put_str(writer, FIELD_SPECIALIST, name);
    json_t *tasks = NULL;
    bool truncated = false;
    code = pan_call_listing(pan, writer, &tasks, &truncated);
    wire_writer_destroy(&writer);
    if (code != PAN_EXIT_OK)
        return code;
    int64_t now = clock_wall_ms();
    json_t *items = json_array();
    int64_t urgent = 0;
    size_t i;
    json_t *task;
    json_array_foreach(tasks, i, task)
    {
        json_t *item = s_queue_item(task, now);
        if (item == NULL || json_array_append_new(items, item) != 0) {
            code = pan_fail(PAN_EXIT_ERROR, "cannot describe queued task %s as JSON",
                            pan_json_str(task, "id", "?"));
            break;
        }
        if (strcmp(pan_json_str(task, "priority", ""), "urgent") == 0)
            urgent++;
    }
    size_t shown = json_array_size(items);
    if (truncated && urgent < total_urgent)
        urgent = total_urgent;
    if (code == PAN_EXIT_OK && json) {
        json_t *out = json_pack("{s:b, s:I, s:O}", "hasWork", shown > 0, "urgentCount",
                                (json_int_t)urgent, "items", items);
        if (out != NULL && truncated &&
            (json_object_set_new(out, "truncated", json_true()) != 0 ||
             (total > (int64_t)shown &&
              json_object_set_new(out, "total", json_integer(total)) != 0))) {
            json_decref(out);
            out = NULL;
        }
        code = pan_print_json(out);
        json_decref(out);
    } else if (code == PAN_EXIT_OK) {
        char display[128];
        s_display_name(name, display, sizeof display);
        printf("%s Queue:\n\n", display);
        if (shown == 0) {
            printf("Queue is empty - no pending work\n");
        } else {
            if (!truncated)
                printf("Total items: %zu\n", shown);
            else if (total > (int64_t)shown)
                printf("Total items: %lld (showing %zu of %lld: the broker cut the listing "
                       "to fit its reply)\n",
                       (long long)total, shown, (long long)total);
            else
                printf("Total items: more than %zu (showing %zu: the broker cut the listing "
                       "to fit its reply)\n",
                       shown, shown);
            if (urgent > 0)
                printf("Urgent items: %lld\n", (long long)urgent);
            json_t *item;
            json_array_foreach(items, i, item)
            {
                printf("\n");
                s_print_item(i + 1, item);
            }
        }
    }
    json_decref(items);
    json_decref(tasks);
    return code;
}

/* ---- wake ---- */

/* True for the built-in specialists, whose tasks are about a repository (a workspace). */
static bool s_needs_workspace(const char *name)
{
    return strcmp(name, "review-agent") == 0 || strcmp(name, "test-agent") == 0 ||
           strcmp(name, "merge-agent") == 0;
}

/* How long wake waits for a worker the launcher started to join the broker. */
#define PAN_WAKE_JOIN_MS 20000

/* How many workers of `name` the broker counts now (0 when it does not answer). */
static int64_t s_workers_now(const pan_t *pan, const char *name)
{
    json_t *data = NULL;
    int64_t workers = 0;
    if (s_broker_list(pan, BROKER_OPTIONAL, &data) == PAN_EXIT_OK) {
        size_t i;
        json_t *item;
        json_array_foreach(data, i, item)
        {
            if (strcmp(pan_json_str(item, "name", ""), name) == 0)
                workers = pan_json_int(item, "workers", 0);
        }
    }
    json_decref(data);
    return workers;
}

/* No worker of `name` is connected, and the launcher runs (its script is `script`): has it
 * start one, then waits (up to PAN_WAKE_JOIN_MS) until the worker joins the broker. Says
 * what happened; true once a worker is connected. */
static bool s_wake_through_launcher(const pan_t *pan, const char *script, const char *name)
{
    char answer[1024];
    bool started = pan_launcher_start(script, name, answer, sizeof answer);
    /* A refusal reads "exited 1: <why>": the why is what matters. */
    const char *why = strncmp(answer, "exited ", 7) == 0 && strstr(answer, ": ")
                          ? strstr(answer, ": ") + 2
                          : answer;
    if (!started) {
        fprintf(stderr,
                "pan: no %s worker is running, and the launcher did not start one: %s\n"
                "  the task waits in the queue until one starts\n",
                name, why);
        return false;
    }
    printf("Started %s through the launcher (deploy/run-local.sh start %s): %s\n", name, name, why);
    /* The broker says when the worker has joined; ask it again every 200 ms. */
    int64_t deadline = clock_now_ms() + PAN_WAKE_JOIN_MS;
    while (s_workers_now(pan, name) == 0) {
        if (clock_now_ms() >= deadline) {
            fprintf(stderr,
                    "pan: the launcher started %s, but no worker joined the broker within "
                    "%d s (see its log, logs/%s.log); the task waits in the queue\n",
                    name, PAN_WAKE_JOIN_MS / 1000, name);
            return false;
        }
        struct timespec pause = {.tv_nsec = 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return true;
}

static int s_wake(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan specialists wake <name> [--task TEXT] [--priority P] [--workspace DIR]\n"
        "       [--branch B] [--target T]";
    const char *name = NULL, *text = NULL, *priority = "urgent";
    const char *workspace_arg = NULL, *branch = NULL, *target = NULL;
    for (int i = 0; i < argc; i++) {
        const char *const names[] = {"--task", "--priority", "--workspace", "--branch", "--target"};
        const char **values[] = {&text, &priority, &workspace_arg, &branch, &target};
        int found = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && found == 0; k++)
            found = pan_option(argc, argv, &i, names[k], values[k]);
        if (found < 0)
            return pan_usage(usage, "%s needs a value", argv[i]);
        if (found > 0)
            continue;
        if (argv[i][0] == '-' || name != NULL)
            return pan_usage_unknown(usage, argv[i]);
        name = argv[i];
    }
    if (name == NULL)
        return pan_usage(usage, "which specialist?");
    if (priority_parse(priority) < 0)
        return pan_usage(usage, "invalid priority '%s' (urgent, high, normal, low)", priority);
    if (workspace_arg == NULL && s_needs_workspace(name))
        return pan_usage(usage, "%s works on a repository: say which with --workspace DIR%s", name,
                         strcmp(name, "merge-agent") == 0 ? " --branch B" : "");
    char workspace[PATH_MAX] = "";
    if (workspace_arg != NULL &&
        pan_absolute_path(workspace_arg, workspace, sizeof workspace) != 0)
        return pan_fail(PAN_EXIT_ERROR, "--workspace: %s", failure_message());
    known_t known;
    int code = s_known_load(pan, &known, BROKER_REQUIRED);
    if (code != PAN_EXIT_OK)
        return code;
    if (!s_known_has(&known, name)) {
        code = s_unknown(&known, name);
        s_known_free(&known);
        return code;
    }
    json_t *entry = s_broker_entry(&known, name);
    int64_t workers = pan_json_int(entry, "workers", 0);
    if (!config_specialist_enabled(pan->config, name))
        fprintf(stderr, "Warning: %s is disabled in cloister.toml; queueing anyway\n", name);

    char id[CLIENT_ID_SIZE], title[512];
    client_new_id(id, sizeof id);
    wire_writer_t *payload = wire_writer_new();
    submit_wake(name, text, workspace[0] ? workspace : NULL, branch, target, title, sizeof title,
                payload);
    submit_t submit = {
        .id = id, .specialist = name, .priority = priority, .source = "pan-wake", .title = title};
    submit.payload = wire_writer_data(payload, &submit.payload_len);
    wire_writer_t *writer = wire_writer_new();
    submit_encode(writer, &submit);
    wire_writer_destroy(&payload);
    json_t *task = NULL;
    code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    char script[PATH_MAX];
    if (code == PAN_EXIT_OK && workers == 0 && pan_launcher_script(script, sizeof script)) {
        printf("Queued %s task %s for %s\n", priority, pan_json_str(task, "id", id), name);
        if (s_wake_through_launcher(pan, script, name))
            printf("%s Specialist %s woken up successfully\n", pan_check_mark(), name);
    } else if (code == PAN_EXIT_OK && workers > 0) {
        printf("%s Specialist %s woken up successfully\n", pan_check_mark(), name);
        printf("  Queued %s task %s\n", priority, pan_json_str(task, "id", id));
    } else if (code == PAN_EXIT_OK) {
        /* Queued, nothing will take it, and no launcher to start a worker: not "woken up". */
        printf("Queued %s task %s for %s\n", priority, pan_json_str(task, "id", id), name);
        fprintf(stderr,
                "pan: no %s worker is running, so nothing wakes up: the task waits in the "
                "queue until one starts (deploy/run-local.sh starts the specialists%s)\n",
                name,
                config_specialist_enabled(pan->config, name)
                    ? ""
                    : "; this one is disabled in cloister.toml: set enabled = true");
    }
    if (code == PAN_EXIT_OK) {
        if (text != NULL)
            printf("  Task: %s\n", text);
        printf("  Follow with: pan events --follow --topic task.\n");
    }
    json_decref(task);
    s_known_free(&known);
    return code;
}

/* ---- reset ---- */

/* Asks "Continue? [y/N]" on the terminal; true only for an explicit yes. */
static bool s_confirm(const char *question)
{
    printf("%s Continue? [y/N] ", question);
    fflush(stdout);
    char answer[16];
    if (fgets(answer, sizeof answer, stdin) == NULL)
        return false;
    return answer[0] == 'y' || answer[0] == 'Y';
}

/* Resets the specialist's session and those of its replicas (replica.h). A session in use
 * by a run (its lock held) is waited for until `deadline_ms` (clock_now_ms(); 0: not at
 * all) -- the run of a task just cancelled, stopping. */
static int s_reset_one(const char *name, int64_t deadline_ms)
{
    for (int k = 0; k < REPLICA_MAX; k++) {
        char key[SESSION_NAME_MAX + 8];
        replica_session_key(key, sizeof key, name, k);
        session_state_t session;
        if (k > 0 && session_load(key, &session) == FAILURE_NOT_FOUND)
            continue;
        int rc;
        while ((rc = session_reset(key)) == FAILURE_STATE && clock_now_ms() < deadline_ms) {
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
        }
        if (rc != 0)
            return pan_fail(PAN_EXIT_ERROR, "cannot reset %s: %s", key, failure_message());
    }
    return PAN_EXIT_OK;
}

/* The tasks `name` runs now, as the broker lists them (caller owns; an empty array when
 * the broker does not answer: then nothing is known to run). */
static json_t *s_running(const pan_t *pan, const char *name)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_TASKS);
    wire_put_str(writer, FIELD_STATE, "running");
    wire_put_str(writer, FIELD_SPECIALIST, name);
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    wire_msg_t *reply = NULL;
    json_t *tasks = NULL;
    if (client != NULL && client_call(client, writer, &reply) == 0) {
        const msgpack_object *object = wire_msg_object(reply, FIELD_DATA);
        tasks = object ? msgjson_from_object(object) : NULL;
    }
    wire_msg_destroy(&reply);
    client_destroy(&client);
    wire_writer_destroy(&writer);
    if (!json_is_array(tasks)) {
        json_decref(tasks);
        tasks = json_array();
    }
    return tasks;
}

/* --force on a busy specialist: each running task is cancelled, with the reason. */
static int s_cancel_running(const pan_t *pan, const char *name, const json_t *tasks)
{
    size_t i;
    const json_t *task;
    json_array_foreach(tasks, i, task)
    {
        const char *id = pan_json_str(task, "id", "?");
        wire_writer_t *writer = wire_writer_new();
        wire_writer_start(writer, MSG_CANCEL_TASK);
        wire_put_str(writer, FIELD_ID, id);
        wire_put_str(writer, FIELD_REASON, "pan specialists reset --force: the specialist's "
                                           "session is being reset");
        json_t *cancelled = NULL;
        int code = pan_call(pan, writer, &cancelled);
        wire_writer_destroy(&writer);
        json_decref(cancelled);
        if (code != PAN_EXIT_OK)
            return code;
        printf("%s: cancelled its running task %s\n", name, id);
    }
    return PAN_EXIT_OK;
}

/* Without --force, a specialist that runs a task is not reset: PAN_EXIT_ERROR saying so,
 * or PAN_EXIT_OK when it runs none. */
static int s_refuse_busy(const char *name, const json_t *tasks)
{
    if (json_array_size(tasks) == 0)
        return PAN_EXIT_OK;
    return pan_fail(PAN_EXIT_ERROR,
                    "%s is running task %s: resetting its session under it would lose the "
                    "run; `pan specialists reset %s --force` cancels the task first",
                    name, pan_json_str(json_array_get(tasks, 0), "id", "?"), name);
}

/* Resets one specialist: refused while it runs a task unless `force`, which cancels the
 * task first and waits for its run to let go of the session. */
static int s_reset_busy_aware(const pan_t *pan, const char *name, bool force)
{
    json_t *tasks = s_running(pan, name);
    int code = PAN_EXIT_OK;
    if (!force)
        code = s_refuse_busy(name, tasks);
    else if (json_array_size(tasks) > 0)
        code = s_cancel_running(pan, name, tasks);
    if (code == PAN_EXIT_OK)
        code = s_reset_one(name, force ? clock_now_ms() + S_RESET_WAIT_MS : 0);
    json_decref(tasks);
    return code;
}

static int s_reset(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists reset <name>|--all [--force]";
    const char *name = NULL;
    bool all = false, force = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--all") == 0)
            all = true;
        else if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
            force = true;
        else if (argv[i][0] == '-' || name != NULL)
            return pan_usage_unknown(usage, argv[i]);
        else
            name = argv[i];
    }
    if (all == (name != NULL))
        return pan_usage(usage, all ? "give a name or --all, not both" : "which specialist?");
    known_t known;
    /* Resetting works on local files: a broker that does not answer only means fewer
     * known names (and no running task known to cancel). */
    int code = s_known_load(pan, &known, BROKER_OPTIONAL);
    if (code != PAN_EXIT_OK)
        return code;
    if (name != NULL && !s_known_has(&known, name)) {
        code = s_unknown(&known, name);
        s_known_free(&known);
        return code;
    }
    if (!all) {
        session_state_t session;
        if (session_load(name, &session) == 0)
            printf("%s: session %.8s... (%lld runs, %lld tokens)\n", name, session.session_id,
                   (long long)session.runs,
                   (long long)(session.input_tokens + session.output_tokens));
        else
            printf("%s: no session\n", name);
        char question[160];
        snprintf(question, sizeof question, "Reset %s (its next wake starts a fresh session)?",
                 name);
        /* A busy one is refused before the question is asked. */
        json_t *tasks = force ? NULL : s_running(pan, name);
        code = s_refuse_busy(name, tasks);
        json_decref(tasks);
        if (code == PAN_EXIT_OK && !force && !s_confirm(question)) {
            printf("Cancelled\n");
        } else if (code == PAN_EXIT_OK &&
                   (code = s_reset_busy_aware(pan, name, force)) == PAN_EXIT_OK) {
            printf("%s Specialist %s has been reset\n", pan_check_mark(), name);
            printf("  Next wake will start a fresh session\n");
        }
    } else if (!force && !s_confirm("Reset every specialist's session?")) {
        printf("Cancelled\n");
    } else {
        size_t done = 0;
        for (size_t i = 0; i < known.count; i++) {
            int one = s_reset_busy_aware(pan, known.names[i], force);
            if (one == PAN_EXIT_OK)
                done++;
            else
                code = one;
        }
        printf("%s Reset %zu specialist(s)\n", pan_check_mark(), done);
    }
    s_known_free(&known);
    return code;
}

/* ---- resume ---- */

/* pan specialists resume NAME: the broker dispatches the paused specialist's tasks again. */
static int s_resume(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists resume <name> [--json]";
    bool json = false;
    const char *name = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (name == NULL && argv[i][0] != '-')
            name = argv[i];
        else
            return pan_usage(usage, "unexpected argument '%s'", argv[i]);
    }
    if (name == NULL)
        return pan_usage(usage, "which specialist?");
    json_t *data = NULL;
    int code = pan_resume_specialist(pan, name, &data);
    if (code == PAN_EXIT_OK && json) {
        code = pan_print_json(data);
    } else if (code == PAN_EXIT_OK && json_is_true(json_object_get(data, "paused"))) {
        printf("%s Resumed %s (it was paused: %s)\n", pan_check_mark(), name,
               pan_json_str(data, "reason", "?"));
    } else if (code == PAN_EXIT_OK) {
        printf("%s %s was not paused\n", pan_check_mark(), name);
    }
    json_decref(data);
    return code;
}

/* ---- alive ---- */

/* pan specialists alive WORKER_ID: exit 0 when the broker has that worker registered (a
 * container's liveness check), 1 when not, 3 when the broker does not answer. */
static int s_alive(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists alive <worker-id>";
    if (argc != 1)
        return pan_usage(usage, "which worker?");
    json_t *data = NULL;
    int code = s_broker_list(pan, BROKER_REQUIRED, &data);
    if (code != PAN_EXIT_OK)
        return code;
    const char *found = NULL;
    size_t i, k;
    json_t *item, *id;
    json_array_foreach(data, i, item)
    {
        json_array_foreach(json_object_get(item, "worker_ids"), k, id)
        {
            if (json_is_string(id) && strcmp(json_string_value(id), argv[0]) == 0)
                found = pan_json_str(item, "name", "?");
        }
    }
    if (found != NULL)
        printf("worker %s is registered for %s\n", argv[0], found);
    else
        code = pan_fail(PAN_EXIT_ERROR, "the broker has no worker '%s'", argv[0]);
    json_decref(data);
    return code;
}

int cmd_specialists(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan specialists list|queue|wake|reset|resume|alive ...";
    if (argc < 1)
        return pan_usage(usage, "specialists what?");
    const char *sub = argv[0];
    if (strcmp(sub, "list") == 0)
        return s_list(pan, argc - 1, argv + 1);
    if (strcmp(sub, "queue") == 0)
        return s_queue(pan, argc - 1, argv + 1);
    if (strcmp(sub, "wake") == 0)
        return s_wake(pan, argc - 1, argv + 1);
    if (strcmp(sub, "reset") == 0)
        return s_reset(pan, argc - 1, argv + 1);
    if (strcmp(sub, "alive") == 0)
        return s_alive(pan, argc - 1, argv + 1);
    if (strcmp(sub, "resume") == 0)
        return s_resume(pan, argc - 1, argv + 1);
    static const char *const commands[] = {"list",   "queue", "wake", "reset",
                                           "resume", "alive", NULL};
    return pan_usage_unknown_command(usage, "specialists ", sub, commands);
}
