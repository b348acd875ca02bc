/* pan_wait: see pan_wait.h. */
#include "pan_wait.h"

#include "failure.h"
#include "msgjson.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAN_WAIT_MAX 64

struct pan_watch_t {
    const pan_t *pan;
    client_t *control;
    client_events_t *events;
    int64_t since; /* the broker's last seq when the watch started */
};

/* One task waited for: its end state ("" while it runs). */
typedef struct {
    const char *id;
    char state[16];
} waited_t;

typedef struct {
    waited_t tasks[PAN_WAIT_MAX];
    int n;
    int open; /* tasks still running */
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

/* Marks a task ended in `state` (once). */
static void s_ended(wait_t *wait, waited_t *task, const char *state)
{
    if (task->state[0] != '\0')
        return;
    snprintf(task->state, sizeof task->state, "%s", state);
    wait->open--;
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
    else if (strcmp(name, "task.done") == 0 || strcmp(name, "task.failed") == 0 ||
             strcmp(name, "task.dead") == 0 || strcmp(name, "task.cancelled") == 0)
        s_ended(wait, task, name + strlen("task."));
    return wait->open == 0 ? 1 : 0;
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
        wire_obj_str(wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_STATE), state, size, "");
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
}

/* Prints one ended task's result (or, with json, the task object). */
static void s_print_result(client_t *control, const waited_t *task, bool json)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SHOW_TASK);
    wire_put_str(w, FIELD_ID, task->id);
    wire_msg_t *reply = NULL;
    json_t *data = NULL;
    if (client_call(control, w, &reply) == 0 && wire_msg_object(reply, FIELD_DATA) != NULL)
        data = msgjson_from_object(wire_msg_object(reply, FIELD_DATA));
    wire_msg_destroy(&reply);
    wire_writer_destroy(&w);
    if (json) {
        char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
        puts(text ? text : "null");
        free(text);
    } else {
        printf("%s %s\n", task->id, task->state);
        const char *error = pan_json_str(data, "error", "");
        if (error[0] != '\0')
            fputs("error: ", stdout), pan_print_escaped(error), putchar('\n');
        pan_print_fields(json_object_get(data, "result"), "");
    }
    json_decref(data);
}

int pan_watch_wait(pan_watch_t **watch_p, const char *const *ids, int n, int timeout_s,
                   bool json)
{
    pan_watch_t *watch = *watch_p;
    wait_t wait = {.n = n < PAN_WAIT_MAX ? n : PAN_WAIT_MAX};
    for (int i = 0; i < wait.n; i++) {
        wait.tasks[i].id = ids[i];
        char state[16];
        s_state_now(watch->control, ids[i], state, sizeof state);
        bool ended = strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
                     strcmp(state, "dead") == 0 || strcmp(state, "cancelled") == 0;
        wait.tasks[i].state[0] = '\0';
        if (ended)
            snprintf(wait.tasks[i].state, sizeof wait.tasks[i].state, "%s", state);
        else
            wait.open++;
    }
    struct sigaction action = {0}, old_int, old_term, old_alarm;
    action.sa_handler = s_on_signal;
    sigaction(SIGINT, &action, &old_int);
    sigaction(SIGTERM, &action, &old_term);
    sigaction(SIGALRM, &action, &old_alarm);
    s_stop = 0;
    if (timeout_s > 0)
        alarm((unsigned)timeout_s);
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
        code = pan_fail(PAN_EXIT_UNREACHABLE, "%s", failure_message());
    else if (wait.open > 0 && timeout_s > 0)
        code = pan_fail(PAN_EXIT_TIMEOUT, "%d of %d task(s) still running after %d s",
                        wait.open, wait.n, timeout_s);
    else if (wait.open > 0)
        code = pan_fail(PAN_EXIT_TIMEOUT, "interrupted: %d of %d task(s) still running",
                        wait.open, wait.n);
    for (int i = 0; i < wait.n; i++) {
        if (wait.tasks[i].state[0] == '\0')
            continue;
        s_print_result(watch->control, &wait.tasks[i], json);
        if (strcmp(wait.tasks[i].state, "done") != 0 && code == PAN_EXIT_OK)
            code = PAN_EXIT_ERROR;
    }
    client_events_destroy(&watch->events);
    client_destroy(&watch->control);
    free(watch);
    *watch_p = NULL;
    return code;
}
