/* pan task show / wait / fence, cancel, retry, priority, status, reload: one task, or the broker's
 * numbers and settings (task list, dead and retry --all-dead are in cmd_list.c). */
#include "pan.h"
#include "pan_wait.h"

#include "clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses `<id> [--json]` (json may be NULL when --json is not accepted) and resolves the
 * id, whole or a unique prefix, into `id` (`size` bytes). */
static int s_parse_id(const pan_t *pan, int argc, char **argv, const char *usage, char *id,
                      size_t size, bool *json)
{
    const char *given = NULL;
    for (int i = 0; i < argc; i++) {
        if (json != NULL && strcmp(argv[i], "--json") == 0)
            *json = true;
        else if (argv[i][0] == '-')
            return pan_usage_unknown(usage, argv[i]);
        else if (given != NULL)
            return pan_usage_unknown(usage, argv[i]);
        else
            given = argv[i];
    }
    if (given == NULL)
        return pan_usage(usage, "which task id?");
    return pan_task_id_resolve(pan, given, id, size);
}

/* Sends `<type> {id}` and returns the exit code; *task gets the reply's task. */
static int s_task_request(const pan_t *pan, msg_type_t type, const char *id, json_t **task)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, type);
    wire_put_str(writer, FIELD_ID, id);
    int code = pan_call(pan, writer, task);
    wire_writer_destroy(&writer);
    return code;
}

static void s_print_time_line(const char *label, const json_t *task, const char *key)
{
    int64_t when = pan_json_int(task, key, 0);
    if (when <= 0)
        return;
    char at[64], age[32];
    pan_format_time(at, sizeof at, when);
    int64_t delta = clock_wall_ms() - when;
    if (delta >= 0) {
        pan_format_age(age, sizeof age, delta);
        printf("  %-12s %s (%s%s)\n", label, at, age, strcmp(age, "just now") ? " ago" : "");
    } else {
        printf("  %-12s %s\n", label, at);
    }
}

/* Prints "  <label> <text>" with the text escaped, when there is text. */
static void s_print_text_line(const char *label, const char *text)
{
    printf("  %-12s ", label);
    pan_print_escaped(text);
    putchar('\n');
}

/* The task's place in a chain of hand-offs: who handed it on (payload.handoff; its
 * context is in the payload below) and to whom it handed on (result.handoffs), each with
 * its reason. */
static void s_print_handoffs(const json_t *task)
{
    const json_t *from = json_object_get(json_object_get(task, "payload"), "handoff");
    char line[8192];
    if (json_is_object(from)) {
        const char *from_task = pan_json_str(from, "from_task", "");
        const char *reason = pan_json_str(from, "reason", "");
        snprintf(line, sizeof line, "%s%s%s%s%s", pan_json_str(from, "from", "an agent"),
                 from_task[0] ? " (task " : "", from_task, from_task[0] ? ")" : "",
                 reason[0] ? ": " : "");
        size_t used = strlen(line);
        snprintf(line + used, sizeof line - used, "%s", reason);
        s_print_text_line("Handed from:", line);
    }
    size_t i;
    const json_t *to;
    json_array_foreach(json_object_get(json_object_get(task, "result"), "handoffs"), i, to)
    {
        const char *reason = pan_json_str(to, "reason", "");
        snprintf(line, sizeof line, "%s as task %s%s%s", pan_json_str(to, "specialist", "?"),
                 pan_json_str(to, "id", "?"), reason[0] ? ": " : "", reason);
        s_print_text_line("Handed to:", line);
    }
}

static void s_print_task(const json_t *task)
{
    pan_print_verdict(task);
    fputs("\nTask ", stdout);
    pan_print_escaped(pan_json_str(task, "id", "?"));
    putchar('\n');
    printf("  %-12s %s\n", "Specialist:", pan_json_str(task, "specialist", "?"));
    printf("  %-12s %s\n", "State:", pan_json_str(task, "state", "?"));
    printf("  %-12s %s\n", "Priority:", pan_json_str(task, "priority", "normal"));
    /* Attempts count dispatches, failures count against max_attempts (a manual retry
     * starts them again), so the two are shown apart: never "4 of 3". */
    printf("  %-12s %lld (failed attempts: %lld of %lld allowed)\n", "Attempt:",
           (long long)pan_json_int(task, "attempt", 0), (long long)pan_json_int(task, "failures", 0),
           (long long)pan_json_int(task, "max_attempts", 0));
    static const char *const text_fields[][2] = {
        {"Title:", "title"},   {"Issue:", "issue"},   {"Source:", "source"}, {"Group:", "group"},
        {"Worker:", "worker"}, {"Phase:", "phase"},   {"Parent:", "parent"}, {"Error:", "error"},
    };
    for (size_t i = 0; i < sizeof text_fields / sizeof text_fields[0]; i++) {
        const char *value = pan_json_str(task, text_fields[i][1], NULL);
        if (value != NULL && value[0] != '\0') {
            printf("  %-12s ", text_fields[i][0]);
            pan_print_escaped(value);
            putchar('\n');
        }
    }
    s_print_handoffs(task);
    s_print_time_line("Created:", task, "created");
    s_print_time_line("Updated:", task, "updated");
    s_print_time_line("Not before:", task, "not_before");
    static const char *const maps[][2] = {{"Payload:", "payload"}, {"Result:", "result"}};
    for (size_t i = 0; i < 2; i++) {
        json_t *value = json_object_get(task, maps[i][1]);
        if (!json_is_object(value) || json_object_size(value) == 0)
            continue;
        printf("  %s\n", maps[i][0]);
        pan_print_fields(value, "    ");
    }
}

/* pan task wait ID... [--timeout S] [--chain] [--json]: see pan_wait.h. */
static int s_wait(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan task wait <id>... [--timeout SECONDS] [--chain] [--json]";
    const char *ids[64];
    char resolved[64][256];
    int n = 0;
    pan_wait_options_t options = {0};
    int64_t timeout_s = 0;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--timeout", &value);
        if (found < 0 || (found > 0 && !pan_parse_int(value, 1, 7 * 24 * 3600, &timeout_s)))
            return pan_usage(usage, "--timeout takes a number of seconds");
        if (found > 0)
            continue;
        if (strcmp(argv[i], "--json") == 0)
            options.json = true;
        else if (strcmp(argv[i], "--chain") == 0)
            options.chain = true;
        else if (argv[i][0] == '-')
            return pan_usage_unknown(usage, argv[i]);
        else if (n < 64)
            ids[n++] = argv[i];
        else
            return pan_usage(usage, "at most 64 tasks at once");
    }
    if (n == 0)
        return pan_usage(usage, "wait for which task?");
    for (int i = 0; i < n; i++) {
        int code = pan_task_id_resolve(pan, ids[i], resolved[i], sizeof resolved[i]);
        if (code != PAN_EXIT_OK)
            return code;
        ids[i] = resolved[i];
    }
    int code = PAN_EXIT_OK;
    pan_watch_t *watch = pan_watch_start(pan, &code);
    if (watch == NULL)
        return code;
    options.timeout_s = (int)timeout_s;
    return pan_watch_wait(&watch, ids, n, &options);
}

/* pan task fence <id> <attempt>: the fencing check a command makes before a side effect
 * that must happen once (a worker runs each task at least once, and a stopped worker's
 * command may run on beside the attempt that replaced it). Exit 0 when `attempt` is the
 * task's running attempt; 1, saying what the broker has, when it is not (superseded,
 * finished, cancelled); 3 when the broker does not answer. */
static int s_fence(const pan_t *pan, int argc, char **argv, const char *usage)
{
    int64_t attempt = 0;
    if (argc != 2 || !pan_parse_int(argv[1], 1, INT32_MAX, &attempt))
        return pan_usage(usage, "fence takes a task id and its attempt number");
    char id[256];
    int code = pan_task_id_resolve(pan, argv[0], id, sizeof id);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *task = NULL;
    code = s_task_request(pan, MSG_SHOW_TASK, id, &task);
    if (code != PAN_EXIT_OK)
        return code;
    const char *state = pan_json_str(task, "state", "?");
    int64_t running = pan_json_int(task, "attempt", 0);
    bool holds = strcmp(state, "running") == 0 && running == attempt;
    if (holds)
        printf("attempt %lld of %s holds the task\n", (long long)attempt, id);
    else
        fprintf(stderr, "pan: attempt %lld of %s no longer holds the task: it is %s, at "
                        "attempt %lld\n",
                (long long)attempt, id, state, (long long)running);
    json_decref(task);
    return holds ? PAN_EXIT_OK : PAN_EXIT_ERROR;
}

int cmd_task(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan task list [options] | show <id> [--json] | wait <id>... [--timeout S] [--chain]\n"
        "       | fence <id> <attempt>";
    if (argc < 1)
        return pan_usage(usage, "task what?");
    if (strcmp(argv[0], "list") == 0)
        return cmd_task_list(pan, argc - 1, argv + 1);
    if (strcmp(argv[0], "wait") == 0)
        return s_wait(pan, argc - 1, argv + 1);
    if (strcmp(argv[0], "fence") == 0)
        return s_fence(pan, argc - 1, argv + 1, usage);
    static const char *const commands[] = {"list", "show", "wait", "fence", NULL};
    if (strcmp(argv[0], "show") != 0)
        return pan_usage_unknown_command(usage, "task ", argv[0], commands);
    char id[256];
    bool json = false;
    int code = s_parse_id(pan, argc - 1, argv + 1, usage, id, sizeof id, &json);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *task = NULL;
    code = s_task_request(pan, MSG_SHOW_TASK, id, &task);
    if (code != PAN_EXIT_OK)
        return code;
    if (json)
        code = pan_print_json(task);
    else
        s_print_task(task);
    json_decref(task);
    return code;
}

/* cancel / retry: one request, one confirmation line. */
static int s_change(const pan_t *pan, int argc, char **argv, const char *usage, msg_type_t request,
                    const char *verb)
{
    char id[256];
    int code = s_parse_id(pan, argc, argv, usage, id, sizeof id, NULL);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *task = NULL;
    code = s_task_request(pan, request, id, &task);
    if (code != PAN_EXIT_OK)
        return code;
    printf("%s %s (state: %s)\n", verb, pan_json_str(task, "id", id),
           pan_json_str(task, "state", "?"));
    json_decref(task);
    return PAN_EXIT_OK;
}

int cmd_cancel(const pan_t *pan, int argc, char **argv)
{
    return s_change(pan, argc, argv, "pan cancel <id>", MSG_CANCEL_TASK, "Cancelled");
}

int cmd_retry(const pan_t *pan, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--all-dead") == 0) {
            memmove(argv + i, argv + i + 1, (size_t)(argc - i - 1) * sizeof *argv);
            return cmd_retry_all_dead(pan, argc - 1, argv);
        }
    }
    return s_change(pan, argc, argv, "pan retry <id>", MSG_RETRY_TASK, "Requeued");
}

/* priority <id> <urgent|high|normal|low>: a queued task moves to another priority, at its
 * submit-order place there. */
int cmd_priority(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan priority <id> urgent|high|normal|low";
    static const char *const priorities[] = {"urgent", "high", "normal", "low", NULL};
    if (argc != 2)
        return pan_usage(usage, "%s", argc < 2 ? "which task id and which priority?"
                                               : "one task id and one priority");
    const char *priority = argv[1];
    bool known = false;
    for (int i = 0; priorities[i] != NULL; i++)
        known = known || strcmp(priority, priorities[i]) == 0;
    if (!known)
        return pan_usage(usage, "priority is one of urgent, high, normal, low");
    char id[256];
    int code = s_parse_id(pan, 1, argv, usage, id, sizeof id, NULL);
    if (code != PAN_EXIT_OK)
        return code;
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_SET_PRIORITY);
    wire_put_str(writer, FIELD_ID, id);
    wire_put_str(writer, FIELD_PRIORITY, priority);
    json_t *task = NULL;
    code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    if (code != PAN_EXIT_OK)
        return code;
    printf("Moved %s to %s (state: %s)\n", pan_json_str(task, "id", id),
           pan_json_str(task, "priority", priority), pan_json_str(task, "state", "?"));
    json_decref(task);
    return PAN_EXIT_OK;
}

static void s_print_stats(const pan_t *pan, const json_t *stats, const json_t *specialists)
{
    printf("Broker at %s\n\n", pan->control_ep);
    json_t *queues = json_object_get(stats, "queues");
    printf("%-24s %7s %7s %7s %7s\n", "Queue", "urgent", "high", "normal", "low");
    if (json_object_size(queues) == 0)
        printf("  (no queued tasks)\n");
    const char *name;
    json_t *depth;
    json_object_foreach(queues, name, depth)
    {
        printf("%-24s %7lld %7lld %7lld %7lld\n", name, (long long)pan_json_int(depth, "urgent", 0),
               (long long)pan_json_int(depth, "high", 0),
               (long long)pan_json_int(depth, "normal", 0),
               (long long)pan_json_int(depth, "low", 0));
    }
    printf("\nRunning: %lld   Dead: %lld   Workers: %lld\n",
           (long long)pan_json_int(stats, "running", 0), (long long)pan_json_int(stats, "dead", 0),
           (long long)pan_json_int(stats, "workers", 0));
    /* What the running tasks said they are doing ("resolving conflicts in 2 files"). */
    size_t k;
    const json_t *specialist, *phase;
    json_array_foreach(specialists, k, specialist)
    {
        size_t p;
        json_array_foreach(json_object_get(specialist, "phases"), p, phase)
        {
            printf("  %s: ", pan_json_str(specialist, "name", "?"));
            pan_print_escaped(pan_json_str(phase, "phase", "?"));
            printf(" (task ");
            pan_print_escaped(pan_json_str(phase, "task", "?"));
            printf(")\n");
        }
    }
    /* Outcomes since the broker started, summed over the specialists. */
    int64_t done = 0, failed = 0, dead = 0;
    size_t i;
    const json_t *entry;
    json_array_foreach(specialists, i, entry)
    {
        done += pan_json_int(entry, "done", 0);
        failed += pan_json_int(entry, "failed", 0);
        dead += pan_json_int(entry, "dead", 0);
    }
    json_t *throughput = json_object_get(stats, "throughput_per_s");
    /* Two counts of their own: the broker's since its start, the specialists' stored ones
     * (kept across restarts), never mixed on one line. */
    printf("Since the broker started: submitted %lld, completed %lld, %.2f a second\n",
           (long long)pan_json_int(stats, "submitted", 0),
           (long long)pan_json_int(stats, "completed", 0),
           json_is_number(throughput) ? json_number_value(throughput) : 0.0);
    printf("In all (kept across restarts): done %lld, failed %lld, died %lld\n", (long long)done,
           (long long)failed, (long long)dead);
    json_array_foreach(specialists, i, entry)
    {
        const char *paused = pan_json_str(entry, "paused", NULL);
        if (paused != NULL)
            printf("PAUSED: %s takes no task until `pan specialists resume %s` (or a `pan "
                   "doctor` that passes): %s\n",
                   pan_json_str(entry, "name", "?"), pan_json_str(entry, "name", "?"), paused);
    }
    int64_t oldest = pan_json_int(stats, "oldest_queued_age_ms", -1);
    if (oldest >= 0)
        printf("Oldest queued: %.1f s\n", (double)oldest / 1000.0);
    json_t *latency = json_object_get(stats, "commit_latency_ms");
    if (json_is_object(latency)) {
        json_t *p50 = json_object_get(latency, "p50"), *p99 = json_object_get(latency, "p99");
        printf("Commit latency: p50 %.2f ms, p99 %.2f ms\n",
               json_is_number(p50) ? json_number_value(p50) : 0.0,
               json_is_number(p99) ? json_number_value(p99) : 0.0);
    }
    if (json_object_get(stats, "disk_free_mb") != NULL)
        printf("Disk: %lld MB free for the store%s\n",
               (long long)pan_json_int(stats, "disk_free_mb", 0),
               json_is_true(json_object_get(stats, "disk_low"))
                   ? " -- LOW: new submits are refused (disk_full)"
                   : "");
    json_t *rejected = json_object_get(stats, "rejected");
    if (json_object_size(rejected) > 0) {
        printf("Rejected:");
        json_t *count;
        json_object_foreach(rejected, name, count)
        {
            printf(" %s=%lld", name,
                   json_is_integer(count) ? (long long)json_integer_value(count) : 0LL);
        }
        printf("\n");
    }
    printf("Last event: #%lld\n", (long long)pan_json_int(stats, "last_seq", 0));
}

/* Sends a request with no fields of its own; the exit code, and its data in *data. */
static int s_plain_request(const pan_t *pan, msg_type_t type, json_t **data)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, type);
    int code = pan_call(pan, writer, data);
    wire_writer_destroy(&writer);
    return code;
}

/* Parses `[--json]` for a command that takes nothing else. */
static int s_parse_json_only(int argc, char **argv, const char *usage, bool *json)
{
    *json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            *json = true;
        else
            return pan_usage_unknown(usage, argv[i]);
    }
    return PAN_EXIT_OK;
}

int cmd_status(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan status [--json] | status --watch [--interval S]";
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--watch") == 0)
            return cmd_top(pan, argc, argv);
    }
    int code = s_parse_json_only(argc, argv, usage, &json);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *stats = NULL;
    code = s_plain_request(pan, MSG_STATS, &stats);
    if (code != PAN_EXIT_OK)
        return code;
    if (json) {
        code = pan_print_json(stats);
        json_decref(stats);
        return code;
    }
    json_t *specialists = NULL;
    code = s_plain_request(pan, MSG_LIST_SPECIALISTS, &specialists);
    if (code == PAN_EXIT_OK)
        s_print_stats(pan, stats, specialists);
    json_decref(stats);
    json_decref(specialists);
    return code;
}

/* How long `pan reload` waits for the launched specialists' reports. */
#define PAN_RELOAD_WAIT_MS 5000

/* One line per launched service: what its reload did. Returns false if one refused. */
static bool s_print_services(const json_t *services)
{
    bool ok = true;
    if (json_array_size(services) == 0) {
        printf("No service started by deploy/run-local.sh runs here; a specialist started "
               "otherwise reads cloister.toml again on SIGHUP (kill -HUP PID)\n");
        return ok;
    }
    printf("Services started by deploy/run-local.sh:\n");
    size_t i;
    json_t *entry;
    json_array_foreach(services, i, entry)
    {
        const char *state = pan_json_str(entry, "state", "");
        const char *applied = pan_json_str(entry, "applied", "");
        const char *restart = pan_json_str(entry, "restart", "");
        printf("  %s (pid %lld): ", pan_json_str(entry, "name", "?"),
               (long long)pan_json_int(entry, "pid", 0));
        if (strcmp(state, "reloaded") == 0) {
            printf("reloaded; applied %s", applied[0] ? applied : "nothing (no change it reads)");
            if (restart[0])
                printf("; needs a restart: %s (deploy/run-local.sh restart)", restart);
        } else if (strcmp(state, "refused") == 0) {
            ok = false;
            printf("NOT reloaded, keeps the settings in use: ");
            pan_print_escaped(pan_json_str(entry, "error", "?"));
        } else if (strcmp(state, "pending") == 0) {
            printf("busy with task %s; reloads when it ends (see its log)",
                   pan_json_str(entry, "task", "?"));
        } else if (strcmp(state, "start-only") == 0 || strcmp(state, "unsupported") == 0) {
            printf("reads cloister.toml only at start (deploy/run-local.sh restart)");
        } else if (strcmp(state, "gone") == 0) {
            printf("no longer runs");
        } else {
            ok = false;
            printf("did not answer within %d s (see its log)", PAN_RELOAD_WAIT_MS / 1000);
        }
        printf("\n");
    }
    return ok;
}

int cmd_reload(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan reload [--json]";
    bool json = false;
    int code = s_parse_json_only(argc, argv, usage, &json);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *report = NULL;
    code = s_plain_request(pan, MSG_RELOAD, &report);
    if (code != PAN_EXIT_OK)
        return code;
    json_t *services = pan_launched_reload(PAN_RELOAD_WAIT_MS);
    if (json) {
        json_object_set(report, "services", services);
        code = pan_print_json(report);
    } else {
        const char *applied = pan_json_str(report, "applied", "");
        const char *restart = pan_json_str(report, "restart", "");
        printf("Reloaded cloister.toml at %s\n", pan->control_ep);
        printf("  applied:              %s\n", applied[0] ? applied : "nothing changed");
        if (restart[0])
            printf("  needs a restart:      %s (deploy/run-local.sh restart)\n", restart);
        printf("  workspaces accepted:  %s\n", pan_json_str(report, "workspace_roots", "?"));
        if (!s_print_services(services))
            code = PAN_EXIT_ERROR;
    }
    json_decref(services);
    json_decref(report);
    return code;
}
