/* pan_wait: see pan_wait.h. */
#include "pan_wait.h"

#include "failure.h"
#include "msgjson.h"
#include "verdict.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Tasks one wait follows: those given, and with --chain the ones they hand on to. */
#define PAN_WAIT_MAX 64

struct pan_watch_t {
    const pan_t *pan;
    client_t *control;
    client_events_t *events;
    int64_t since; /* the broker's last seq when the watch started */
};

/* One task waited for: its end state ("" while it runs). */
typedef struct {
    char id[160];
    char state[16];
    bool handed_on; /* with --chain: ended done and handed the change on */
} waited_t;

typedef struct {
    waited_t tasks[PAN_WAIT_MAX];
    int n;
    int open;  /* tasks still running */
    bool chain;
    client_t *control; /* the watch's: show_task for the hand-offs */
} wait_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int signal_number)
{
    (void)signal_number;
    s_stop = 1;
}

/* The broker's last seq (stats), or -1 after recording why. */
static int64_t s_last_seq(client_t *control)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(control, w, &reply);
    wire_writer_destroy(&w);
    const msgpack_object *seq =
        rc == 0 ? wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_LAST_SEQ) : NULL;
    int64_t last = seq != NULL && seq->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                       ? (int64_t)seq->via.u64
                       : rc == 0 ? 0 : -1;
    wire_msg_destroy(&reply);
    return last;
}

pan_watch_t *pan_watch_start(const pan_t *pan, int *code)
{
    pan_watch_t *watch = calloc(1, sizeof *watch);
    if (watch == NULL) {
        *code = pan_fail(PAN_EXIT_ERROR, "out of memory");
        return NULL;
    }
    watch->pan = pan;
    watch->control = client_new(pan->control_ep, pan->timeout_ms);
    watch->events = watch->control ? client_events_new(pan->events_ep, "task.") : NULL;
    watch->since = watch->events ? s_last_seq(watch->control) : -1;
    if (watch->since < 0) {
        *code = pan_fail(PAN_EXIT_UNREACHABLE, "%s", failure_message());
        client_events_destroy(&watch->events);
        client_destroy(&watch->control);
        free(watch);
        return NULL;
    }
    return watch;
}

static waited_t *s_find(wait_t *wait, const char *id)
{
    for (int i = 0; i < wait->n; i++)
        if (strcmp(wait->tasks[i].id, id) == 0)
            return &wait->tasks[i];
    return NULL;
}

static bool s_is_end(const char *state)
{
    return strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "dead") == 0 || strcmp(state, "cancelled") == 0;
}

/* The task as show_task gives it (caller owns), or NULL when it cannot be read. */
static json_t *s_show(client_t *control, const char *id)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    json_t *data = NULL;
    if (client_call(control, w, &reply) == 0 && wire_msg_object(reply, FIELD_DATA) != NULL)
        data = msgjson_from_object(wire_msg_object(reply, FIELD_DATA));
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    return data;
}

static void s_add(wait_t *wait, const char *id);

/* With --chain: the task a done task handed the change on to (its result's test_task or
 * merge_task) is waited for next. */
static void s_follow(wait_t *wait, waited_t *task)
{
    json_t *data = s_show(wait->control, task->id);
    const json_t *result = json_object_get(data, "result");
    const char *next = pan_json_str(result, "test_task", pan_json_str(result, "merge_task", ""));
    if (next[0] != '\0' && wait->n < PAN_WAIT_MAX && s_find(wait, next) == NULL) {
        task->handed_on = true;
        fprintf(stderr, "pan: %s handed on to %s, waiting for it too\n", task->id, next);
        s_add(wait, next);
    }
    json_decref(data);
}

/* Marks a task ended in `state` (once), and follows its hand-off with --chain. */
static void s_ended(wait_t *wait, waited_t *task, const char *state)
{
    if (task->state[0] != '\0')
        return;
    snprintf(task->state, sizeof task->state, "%s", state);
    wait->open--;
    if (wait->chain && strcmp(state, "done") == 0)
        s_follow(wait, task);
}

/* The task's state now, through show_task ("" when it cannot be read). */
static void s_state_now(client_t *control, const char *id, char *state, size_t size)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    state[0] = '\0';
    if (client_call(control, w, &reply) == 0)
        wire_obj_str(wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_STATE), state, size,
                     "");
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
}

/* Waits for task `id` too (once; up to PAN_WAIT_MAX tasks): one already over is marked
 * ended at once. */
static void s_add(wait_t *wait, const char *id)
{
    if (wait->n >= PAN_WAIT_MAX || s_find(wait, id) != NULL)
        return;
    waited_t *task = &wait->tasks[wait->n++];
    snprintf(task->id, sizeof task->id, "%s", id);
    task->state[0] = '\0';
    task->handed_on = false;
    wait->open++;
    char state[16];
    s_state_now(wait->control, id, state, sizeof state);
    if (s_is_end(state))
        s_ended(wait, task, state);
}

static int s_on_event(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    (void)raw;
    (void)len;
    wait_t *wait = arg;
    waited_t *task = s_find(wait, wire_msg_str(event, FIELD_TASK, ""));
    if (task == NULL || task->state[0] != '\0')
        return 0;
    const char *name = wire_msg_str(event, FIELD_EVENT, "");
    if (strcmp(name, "task.progress") == 0)
        fprintf(stderr, "[%s] %s: %s\n", task->id, wire_msg_str(event, FIELD_KIND, "info"),
                wire_msg_str(event, FIELD_TEXT, ""));
    else if (strncmp(name, "task.", 5) == 0 && s_is_end(name + 5))
        s_ended(wait, task, name + 5);
    return wait->open == 0 ? 1 : 0;
}

/* Prints one ended task's result (or, with json, the task object) with its verdict, and
 * returns the verdict (unreachable when the task can no longer be read). */
static verdict_t s_print_result(client_t *control, const waited_t *task, bool json)
{
    json_t *data = s_show(control, task->id);
    verdict_t verdict = data != NULL ? verdict_of_task(data) : VERDICT_UNREACHABLE;
    if (json) {
        if (data != NULL)
            json_object_set_new(data, "verdict", json_string(verdict_name(verdict)));
        char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
        puts(text ? text : "null");
        free(text);
    } else {
        /* The verdict and what to do next first (it names the error), then the result. */
        pan_print_escaped(task->id);
        fputs(": ", stdout);
        if (data != NULL)
            pan_print_verdict(data);
        else
            printf("%s\n", task->state);
        pan_print_fields(json_object_get(data, "result"), "    ");
        printf("verdict: %s\n", verdict_name(verdict));
    }
    json_decref(data);
    return verdict;
}

int pan_watch_wait(pan_watch_t **watch_p, const char *const *ids, int n,
                   const pan_wait_options_t *options)
{
    pan_watch_t *watch = *watch_p;
    wait_t wait = {.chain = options->chain, .control = watch->control};
    for (int i = 0; i < n; i++)
        s_add(&wait, ids[i]);
    struct sigaction action = {0}, old_int, old_term, old_alarm;
    action.sa_handler = s_on_signal;
    sigaction(SIGINT, &action, &old_int);
    sigaction(SIGTERM, &action, &old_term);
    sigaction(SIGALRM, &action, &old_alarm);
    s_stop = 0;
    if (options->timeout_s > 0)
        alarm((unsigned)options->timeout_s);
    int rc = 0;
    if (wait.open > 0)
        rc = client_events_run(watch->events, watch->control, watch->since, true, &s_stop,
                               s_on_event, &wait);
    alarm(0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGALRM, &old_alarm, NULL);
    int code = PAN_EXIT_OK;
    if (rc != 0 && wait.open > 0)
        code = pan_fail(VERDICT_EXIT_UNREACHABLE, "%s", failure_message());
    else if (wait.open > 0 && options->timeout_s > 0)
        code = pan_fail(VERDICT_EXIT_TIMEOUT, "%d of %d %s still running after %d s",
                        wait.open, wait.n, pan_plural(wait.n, "task", "tasks"),
                        options->timeout_s);
    else if (wait.open > 0)
        code = pan_fail(VERDICT_EXIT_TIMEOUT, "interrupted: %d of %d %s still running",
                        wait.open, wait.n, pan_plural(wait.n, "task", "tasks"));
    for (int i = 0; i < wait.n; i++) {
        if (wait.tasks[i].state[0] == '\0')
            continue;
        verdict_t verdict = s_print_result(watch->control, &wait.tasks[i], options->json);
        /* A task that handed the change on is judged by the task it handed on to. */
        if (!wait.tasks[i].handed_on && code == PAN_EXIT_OK)
            code = verdict_exit_code(verdict);
    }
    client_events_destroy(&watch->events);
    client_destroy(&watch->control);
    free(watch);
    *watch_p = NULL;
    return code;
}
