/* pan task list, pan dead, pan retry --all-dead: tasks of every state, newest first, from
 * the broker's `list_tasks` (served from the store's indexes, so a page costs the same
 * with a million tasks stored).
 *
 * A page ends with a line on stderr naming the `--before` that continues it, when more
 * may follow; stdout holds only the tasks (a table, or with --json an array). */
#include "pan.h"

#include "clock.h"
#include "failure.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tasks asked for per page by `retry --all-dead` (the broker's most). */
#define RETRY_PAGE 1000

typedef struct {
    const char *state, *specialist, *issue, *since, *before, *limit;
    bool json;
} list_args_t;

/* Parses a duration: a whole number followed by s, m, h or d (no unit: seconds). */
static bool s_parse_duration(const char *text, int64_t *ms)
{
    char *end = NULL;
    long long value = strtoll(text, &end, 10);
    if (end == text || value < 0 || value > 100LL * 365 * 24 * 3600)
        return false;
    int64_t unit = 1000;
    if (*end == 'm')
        unit = 60 * 1000;
    else if (*end == 'h')
        unit = 3600 * 1000;
    else if (*end == 'd')
        unit = 24 * 3600 * 1000;
    else if (*end != 's' && *end != '\0')
        return false;
    if (*end != '\0' && end[1] != '\0')
        return false;
    *ms = (int64_t)value * unit;
    return true;
}

/* Parses the options in `allowed` (a list of names) into *args. Returns PAN_EXIT_OK or the
 * usage error's exit code. */
static int s_parse(int argc, char **argv, const char *usage, const char *const *allowed,
                   list_args_t *args)
{
    struct {
        const char *name;
        const char **value;
    } options[] = {
        {"--state", &args->state},   {"--specialist", &args->specialist},
        {"--issue", &args->issue},   {"--since", &args->since},
        {"--before", &args->before}, {"--limit", &args->limit},
    };
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            args->json = true;
            continue;
        }
        int found = 0;
        for (size_t k = 0; k < sizeof options / sizeof options[0] && found == 0; k++) {
            bool permitted = false;
            for (const char *const *name = allowed; *name && !permitted; name++)
                permitted = strcmp(*name, options[k].name) == 0;
            if (!permitted)
                continue;
            found = pan_option(argc, argv, &i, options[k].name, options[k].value);
            if (found < 0)
                return pan_usage(usage, "%s needs a value", options[k].name);
        }
        if (found == 0)
            return pan_usage_unknown(usage, argv[i]);
    }
    return PAN_EXIT_OK;
}

/* Asks for one page. Returns the exit code; on PAN_EXIT_OK *tasks is the array. */
static int s_request(const pan_t *pan, const list_args_t *args, const char *before, int64_t limit,
                     json_t **tasks, bool *truncated)
{
    int64_t since_ms = 0;
    if (args->since != NULL && !s_parse_duration(args->since, &since_ms))
        return pan_fail(PAN_EXIT_USAGE,
                        "--since takes a duration like 90s, 15m, 2h or 7d, not '%s'", args->since);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_TASKS);
    wire_put_str(writer, FIELD_STATE, args->state);
    wire_put_str(writer, FIELD_SPECIALIST, args->specialist);
    wire_put_str(writer, FIELD_ISSUE, args->issue);
    if (args->since != NULL)
        wire_put_int(writer, FIELD_CREATED_AFTER, clock_wall_ms() - since_ms);
    wire_put_str(writer, FIELD_BEFORE, before);
    wire_put_int(writer, FIELD_LIMIT, limit);
    int code = pan_call_listing(pan, writer, tasks, truncated);
    wire_writer_destroy(&writer);
    if (code == PAN_EXIT_ERROR && args->specialist != NULL &&
        strstr(failure_message(), "unknown specialist") != NULL)
        pan_suggest_specialist(pan, args->specialist);
    if (code == PAN_EXIT_OK && !json_is_array(*tasks)) {
        json_decref(*tasks);
        *tasks = NULL;
        return pan_fail(PAN_EXIT_ERROR, "the broker's task list is not an array");
    }
    return code;
}

static void s_print_table(const json_t *tasks)
{
    if (json_array_size(tasks) == 0) {
        printf("(no tasks)\n");
        return;
    }
    printf("%-36s %-9s %-14s %-7s %-8s %-7s %s\n", "ID", "STATE", "SPECIALIST", "PRIO", "AGE",
           "TRIES", "TITLE");
    int64_t now = clock_wall_ms();
    size_t index;
    const json_t *task;
    json_array_foreach(tasks, index, task)
    {
        char age[32], tries[32];
        int64_t created = pan_json_int(task, "created", 0);
        pan_format_age(age, sizeof age, created > 0 && now > created ? now - created : 0);
        snprintf(tries, sizeof tries, "%lld/%lld", (long long)pan_json_int(task, "attempt", 0),
                 (long long)pan_json_int(task, "max_attempts", 0));
        /* The whole id, never cut: it is what the other commands take back. */
        const char *id = pan_json_str(task, "id", "?");
        pan_print_escaped(id);
        printf("%*s ", strlen(id) < 36 ? (int)(36 - strlen(id)) : 0, "");
        const char *state = pan_json_str(task, "state", "?");
        printf("%s%-9s%s %-14s %-7s %-8s %-7s ", pan_colour(stdout, pan_colour_of_state(state)),
               state, pan_colour_end(stdout), pan_json_str(task, "specialist", "?"),
               pan_json_str(task, "priority", "normal"), age, tries);
        const char *title = pan_json_str(task, "title", "");
        const char *error = pan_json_str(task, "error", "");
        pan_print_escaped(title[0] ? title : error);
        putchar('\n');
    }
}

/* Prints a page and, when more may follow, how to get the next one. */
static int s_print_page(json_t *tasks, bool truncated, int64_t limit, bool json)
{
    int code = json ? pan_print_json(tasks) : PAN_EXIT_OK;
    if (!json)
        s_print_table(tasks);
    fflush(stdout); /* the page before the hint, when both go to one terminal or file */
    size_t n = json_array_size(tasks);
    if (n > 0 && (truncated || (int64_t)n == limit))
        fprintf(stderr, "pan: more may follow: add --before %s for the next page\n",
                pan_json_str(json_array_get(tasks, n - 1), "id", "?"));
    return code;
}

/* "Issue PAN-42: agent cost $0.31, tokens 52000 in / 3100 out, over the 3 tasks listed": the
 * sums of the tasks' results (each task's own sum over every agent run it made), read
 * with one show_task per task of the page. */
static int s_print_issue_cost(const pan_t *pan, const char *issue, const json_t *tasks)
{
    double cost = 0;
    int64_t tokens_in = 0, tokens_out = 0;
    size_t index;
    const json_t *listed;
    json_array_foreach(tasks, index, listed)
    {
        wire_writer_t *writer = wire_writer_new();
        wire_writer_start(writer, MSG_SHOW_TASK);
        wire_put_str(writer, FIELD_ID, pan_json_str(listed, "id", ""));
        json_t *task = NULL;
        int code = pan_call(pan, writer, &task);
        wire_writer_destroy(&writer);
        if (code != PAN_EXIT_OK)
            return code;
        const json_t *result = json_object_get(task, "result");
        const json_t *task_cost = json_object_get(result, "cost_usd");
        cost += json_is_number(task_cost) ? json_number_value(task_cost) : 0;
        tokens_in += pan_json_int(result, "input_tokens", 0);
        tokens_out += pan_json_int(result, "output_tokens", 0);
        json_decref(task);
    }
    printf("Issue ");
    pan_print_escaped(issue);
    printf(": agent cost $%.2f, tokens %lld in / %lld out, over the %zu %s listed\n", cost,
           (long long)tokens_in, (long long)tokens_out, json_array_size(tasks),
           pan_plural((int64_t)json_array_size(tasks), "task", "tasks"));
    return PAN_EXIT_OK;
}

static int s_list(const pan_t *pan, const list_args_t *args)
{
    int64_t limit = 50;
    if (args->limit != NULL && !pan_parse_int(args->limit, 1, 1000, &limit))
        return pan_fail(PAN_EXIT_USAGE, "--limit takes a number from 1 to 1000, not '%s'",
                        args->limit);
    json_t *tasks = NULL;
    bool truncated = false;
    int code = s_request(pan, args, args->before, limit, &tasks, &truncated);
    if (code != PAN_EXIT_OK)
        return code;
    code = s_print_page(tasks, truncated, limit, args->json);
    if (code == PAN_EXIT_OK && args->issue != NULL && !args->json && json_array_size(tasks) > 0)
        code = s_print_issue_cost(pan, args->issue, tasks);
    json_decref(tasks);
    return code;
}

int cmd_task_list(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan task list [--state queued|running|done|failed|dead|cancelled] [--specialist S]\n"
        "       [--issue I] [--since DURATION] [--limit N] [--before ID] [--json]";
    static const char *const allowed[] = {"--state", "--specialist", "--issue", "--since",
                                          "--before", "--limit", NULL};
    list_args_t args = {0};
    int code = s_parse(argc, argv, usage, allowed, &args);
    return code != PAN_EXIT_OK ? code : s_list(pan, &args);
}

int cmd_dead(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage =
        "pan dead [--specialist S] [--issue I] [--since DURATION] [--limit N] [--before ID] "
        "[--json]";
    static const char *const allowed[] = {"--specialist", "--issue", "--since", "--before",
                                          "--limit", NULL};
    list_args_t args = {0};
    int code = s_parse(argc, argv, usage, allowed, &args);
    args.state = "dead";
    return code != PAN_EXIT_OK ? code : s_list(pan, &args);
}

/* Retries one task; returns the exit code (the reason printed when it failed). */
static int s_retry_one(const pan_t *pan, const char *id)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_RETRY_TASK);
    wire_put_str(writer, FIELD_ID, id);
    json_t *task = NULL;
    int code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    json_decref(task);
    return code;
}

/* Retries every task of one page; counts into *retried / *failed. Returns the exit code of
 * a broker that stopped answering (the rest is not tried), else PAN_EXIT_OK. */
static int s_retry_page(const pan_t *pan, const json_t *tasks, int64_t *retried, int64_t *failed)
{
    size_t index;
    const json_t *task;
    json_array_foreach(tasks, index, task)
    {
        int code = s_retry_one(pan, pan_json_str(task, "id", ""));
        if (code == PAN_EXIT_UNREACHABLE)
            return code;
        *(code == PAN_EXIT_OK ? retried : failed) += 1;
    }
    return PAN_EXIT_OK;
}

/* pan retry --all-dead [--specialist S]: every dead task back to its queue, page by page
 * (the cursor is the last task of the page before, so a task is never asked twice). */
int cmd_retry_all_dead(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan retry --all-dead [--specialist S] [--issue I] [--json]";
    static const char *const allowed[] = {"--specialist", "--issue", NULL};
    list_args_t args = {0};
    int code = s_parse(argc, argv, usage, allowed, &args);
    if (code != PAN_EXIT_OK)
        return code;
    args.state = "dead";
    int64_t retried = 0, failed = 0;
    char before[256] = "";
    for (;;) {
        json_t *tasks = NULL;
        bool truncated = false;
        code = s_request(pan, &args, before[0] ? before : NULL, RETRY_PAGE, &tasks, &truncated);
        if (code != PAN_EXIT_OK)
            return code;
        size_t n = json_array_size(tasks);
        if (n > 0)
            snprintf(before, sizeof before, "%s",
                     pan_json_str(json_array_get(tasks, n - 1), "id", ""));
        code = s_retry_page(pan, tasks, &retried, &failed);
        json_decref(tasks);
        if (code != PAN_EXIT_OK || n == 0 || (!truncated && n < RETRY_PAGE))
            break;
    }
    if (args.json) {
        json_t *summary = json_pack("{sIsI}", "retried", (json_int_t)retried, "failed",
                                    (json_int_t)failed);
        int printed = pan_print_json(summary);
        json_decref(summary);
        if (code == PAN_EXIT_OK)
            code = printed;
    } else {
        printf("Requeued %lld dead task%s", (long long)retried, retried == 1 ? "" : "s");
        if (failed > 0)
            printf(" (%lld could not be retried; see above)", (long long)failed);
        putchar('\n');
    }
    if (code == PAN_EXIT_OK && failed > 0)
        code = PAN_EXIT_ERROR;
    return code;
}
