/* pan merge-queue [REPO] [--json]: the merge queues the merge-agents on this host keep
 * (common/specialist/merge_queue_store.h; how they work: services/merge/merge_queue.h),
 * each item with its state, candidate, time in queue and test runs.
 * pan merge-queue pause|resume REPO TARGET: freezes a queue (no new candidate is built or
 * tested; those under way finish and passed items still land, so it drains) or lets it go.
 * Reads the queue files directly, under their locks: no broker is needed. */
#include "pan.h"

#include "failure.h"
#include "merge_queue_store.h"
#include "repository.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

static const char *const s_usage = "pan merge-queue [REPO] [--json]\n"
                                   "       pan merge-queue pause|resume REPO TARGET";

static const char *s_str(const json_t *object, const char *key)
{
    const char *value = json_string_value(json_object_get(object, key));
    return value ? value : "";
}

static int64_t s_int(const json_t *object, const char *key)
{
    return json_integer_value(json_object_get(object, key));
}

static int64_t s_now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* What an item is doing, in words: its state, or the work a worker claimed for it. */
static void s_state(const json_t *item, char *buf, size_t size)
{
    const char *state = s_str(item, "state");
    const char *kind = s_str(item, "claim_kind");
    if (strcmp(kind, "build") == 0)
        snprintf(buf, size, "building");
    else if (strcmp(kind, "test") == 0)
        snprintf(buf, size, "testing");
    else if (strcmp(state, "ejected") == 0 || strcmp(state, "failed") == 0)
        snprintf(buf, size, "%s: %s", state, s_str(item, "reason"));
    else
        snprintf(buf, size, "%s", state);
    /* One line per item: the reason may quote test output. */
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == ' ')
        buf[--len] = '\0';
}

/* "4.2 s", "3 min 5 s", "2 h 10 min". */
static void s_duration(char *buf, size_t size, int64_t ms)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, size, "%.1f s", (double)ms / 1000.0);
    else if (s < 3600)
        snprintf(buf, size, "%lld min %lld s", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, size, "%lld h %lld min", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

static void s_print_queue(const json_t *queue)
{
    const json_t *items = json_object_get(queue, "items");
    int64_t landed = s_int(queue, "landed"), runs = s_int(queue, "test_runs");
    size_t active = 0, i;
    const json_t *item;
    json_array_foreach(items, i, item)
    {
        const char *state = s_str(item, "state");
        active += strcmp(state, "landed") != 0 && strcmp(state, "ejected") != 0;
    }
    printf("%s into %s%s: %zu queued, %lld landed, %lld ejected, %lld test runs", s_str(queue, "repo"),
           s_str(queue, "target"), json_is_true(json_object_get(queue, "paused")) ? " (paused)" : "",
           active, (long long)landed, (long long)s_int(queue, "ejected"), (long long)runs);
    if (landed > 0)
        printf(" (%.2f per landed merge)", (double)runs / (double)landed);
    if (s_int(queue, "window") > 0)
        printf(", window %lld", (long long)s_int(queue, "window"));
    putchar('\n');
    int64_t now = s_now_ms();
    json_array_foreach(items, i, item)
    {
        char state[1200], age[64];
        s_state(item, state, sizeof state);
        int64_t end = s_int(item, "ended_ms") > 0 ? s_int(item, "ended_ms") : now;
        s_duration(age, sizeof age, end - s_int(item, "enqueued_ms"));
        const char *candidate = s_str(item, "candidate");
        printf("  #%-4lld %-20s %-24s %-12.12s %3lld run%s  %-10s %s\n",
               (long long)s_int(item, "seq"), s_str(item, "id"), s_str(item, "source"),
               candidate[0] ? candidate : "-", (long long)s_int(item, "tests"),
               s_int(item, "tests") == 1 ? " " : "s", age, state);
    }
}

static int s_list(const char *dir, const char *repo, bool json)
{
    char root[PATH_MAX] = "";
    if (repo != NULL && repository_root(repo, root, sizeof root) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s is not in a git repository", repo);
    json_t *all = NULL;
    if (merge_queue_store_list(dir, &all) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    json_t *shown = json_array();
    size_t i;
    json_t *queue;
    json_array_foreach(all, i, queue)
    {
        if (root[0] == '\0' || strcmp(s_str(queue, "repo"), root) == 0)
            json_array_append(shown, queue);
    }
    json_decref(all);
    int code = PAN_EXIT_OK;
    if (json) {
        code = pan_print_json(shown);
    } else if (json_array_size(shown) == 0) {
        printf("no merge queue%s%s\n", root[0] ? " for " : "", root);
    } else {
        json_array_foreach(shown, i, queue)
        {
            s_print_queue(queue);
        }
    }
    json_decref(shown);
    return code;
}

static int s_pause(const char *dir, bool pause, const char *repo, const char *target)
{
    char root[PATH_MAX];
    if (repository_root(repo, root, sizeof root) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s is not in a git repository", repo);
    merge_queue_store_t *store = NULL;
    if (merge_queue_store_open(&store, dir, root, target) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    json_object_set_new(merge_queue_store_json(store), "paused", json_boolean(pause));
    int rc = merge_queue_store_save(store);
    merge_queue_store_close(&store);
    if (rc != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    printf("merge queue of %s into %s %s\n", root, target,
           pause ? "paused: nothing new is built or tested; what is under way finishes and "
                   "passed merges still land"
                 : "resumed");
    return PAN_EXIT_OK;
}

int cmd_merge_queue(const pan_t *pan, int argc, char **argv)
{
    (void)pan;
    char dir[PATH_MAX];
    if (merge_queue_store_dir(dir, sizeof dir) != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    if (argc >= 1 && (strcmp(argv[0], "pause") == 0 || strcmp(argv[0], "resume") == 0)) {
        if (argc != 3)
            return pan_usage(s_usage, "%s needs REPO and TARGET", argv[0]);
        return s_pause(dir, strcmp(argv[0], "pause") == 0, argv[1], argv[2]);
    }
    const char *repo = NULL;
    bool json = false;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (argv[i][0] == '-' || repo != NULL)
            return pan_usage_unknown(s_usage, argv[i]);
        else
            repo = argv[i];
    }
    return s_list(dir, repo, json);
}
