/* worker_harness: what the test_worker_* integration tests share (included by each, so
 * every function is static). A real cloister-broker and real cloister-workers run in a
 * testenv directory over ipc with 100 ms heartbeats; the test submits by PUSHing msgpack
 * `submit` messages to the broker's `in` and records every event from its PUB socket.
 * Worker commands are `/bin/sh -c SCRIPT`; scripts block on "go files" the test creates,
 * so a test decides when a task finishes. */
#ifndef CLOISTER_WORKER_HARNESS_H
#define CLOISTER_WORKER_HARNESS_H

#include "check.h"
#include "msgjson.h"
#include "testbroker.h"
#include "testenv.h"
#include "clock.h"
#include "wire.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define HARNESS_HB "100"
#define HARNESS_MAX_EVENTS 2000

typedef struct {
    testenv_t *env;
    pid_t broker;
    void *zmq;
    void *sub;
    void *push;
    json_t *events[HARNESS_MAX_EVENTS];
    int nevents;
} harness_t;

/* Starts a broker in a fresh testenv, with `config` as its cloister.toml, and connects to
 * it. NULL on failure. */
static inline harness_t *harness_new_config(const char *name, const char *config_text)
{
    harness_t *h = calloc(1, sizeof *h);
    h->env = testenv_new(name);
    if (h->env == NULL) {
        free(h);
        return NULL;
    }
    char config[512];
    snprintf(config, sizeof config, "%s/cloister.toml", h->env->home);
    CHECK(testenv_write_file(config, config_text) == 0);
    h->broker = testbroker_start(h->env, atoi(HARNESS_HB), NULL);
    CHECK(h->broker > 0);
    h->zmq = zmq_ctx_new();
    h->sub = zmq_socket(h->zmq, ZMQ_SUB);
    h->push = zmq_socket(h->zmq, ZMQ_PUSH);
    int linger = 1000;
    zmq_setsockopt(h->push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(h->sub, ZMQ_SUBSCRIBE, "", 0);
    zmq_connect(h->sub, h->env->events_ep);
    zmq_connect(h->push, h->env->in_ep);
    testenv_sleep_ms(200); /* let the subscription reach the broker */
    return h;
}

/* harness_new_config() with the default: quick retries, other-agent declared, and merges
 * without a review (tests submit them by hand; the review gate has its own tests). */
static inline harness_t *harness_new(const char *name)
{
    return harness_new_config(name, "[broker]\nretry_backoff_ms = 50\n\n"
                                    "[security]\nrequire_review = false\n\n"
                                    "[specialists.other-agent]\nenabled = true\n");
}

static inline void harness_destroy(harness_t **h_p)
{
    harness_t *h = *h_p;
    if (h == NULL)
        return;
    check_on_fail(NULL, NULL); /* a hook may point at the events freed here */
    for (int i = 0; i < h->nevents; i++)
        json_decref(h->events[i]);
    zmq_close(h->sub);
    zmq_close(h->push);
    zmq_ctx_term(h->zmq);
    testenv_destroy(&h->env);
    free(h);
    *h_p = NULL;
}

static inline bool harness_wait_joined(harness_t *h, const char *id);

/* Starts a worker `id` of `specialist` running `/bin/sh -c script` with the flags in
 * `flags` (NULL-terminated, borrowed; --specialist, --worker-id, --bind and the command are
 * added here) and returns its pid without waiting for it to join. */
static inline pid_t harness_spawn_worker(harness_t *h, const char *id, const char *specialist,
                                         const char *script, const char *const *flags)
{
    char bind[400];
    snprintf(bind, sizeof bind, "ipc://%s/%s.sock", h->env->dir, id);
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)testenv_bin("cloister-worker");
    argv[n++] = "--specialist";
    argv[n++] = (char *)specialist;
    argv[n++] = "--worker-id";
    argv[n++] = (char *)id;
    argv[n++] = "--bind";
    argv[n++] = bind;
    for (int i = 0; flags != NULL && flags[i] != NULL && n < 26; i++)
        argv[n++] = (char *)flags[i];
    argv[n++] = "--";
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = (char *)script;
    argv[n] = NULL;
    return testenv_spawn(h->env, id, argv);
}

/* Starts a worker `id` of `specialist` running `/bin/sh -c script` (100 ms heartbeats,
 * 3 s grace) and waits until the broker has announced it. */
static inline pid_t harness_worker(harness_t *h, const char *id, const char *specialist,
                                   const char *script)
{
    const char *const flags[] = {"--heartbeat-ms", HARNESS_HB, "--grace-ms", "3000", NULL};
    pid_t pid = harness_spawn_worker(h, id, specialist, script, flags);
    CHECK(harness_wait_joined(h, id));
    return pid;
}

/* PUSHes a submit; `payload_json` (a JSON object text) may be NULL. */
static inline void harness_submit(harness_t *h, const char *id, const char *specialist,
                           const char *priority, int timeout_s, int max_attempts,
                           const char *payload_json)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_SPECIALIST, specialist);
    wire_put_str(w, FIELD_PRIORITY, priority);
    wire_put_str(w, FIELD_TITLE, id);
    if (timeout_s > 0)
        wire_put_int(w, FIELD_TIMEOUT_S, timeout_s);
    if (max_attempts > 0)
        wire_put_int(w, FIELD_MAX_ATTEMPTS, max_attempts);
    if (payload_json != NULL) {
        json_t *payload = json_loads(payload_json, 0, NULL);
        CHECK(payload != NULL);
        if (payload != NULL)
            msgjson_put(w, "payload", payload);
        json_decref(payload);
    }
    size_t len = 0;
    const void *data = wire_writer_data(w, &len);
    CHECK(zmq_send(h->push, data, len, 0) == (int)len);
    wire_writer_destroy(&w);
}

/* Records an event (the harness owns it). One more than HARNESS_MAX_EVENTS fails the test:
 * dropped quietly, it would make a check that some event never came pass. */
static inline void harness_record(harness_t *h, json_t *event)
{
    if (h->nevents == HARNESS_MAX_EVENTS) {
        fprintf(stderr, "harness: more than %d events; raise HARNESS_MAX_EVENTS\n",
                HARNESS_MAX_EVENTS);
        json_decref(event);
        check_fail();
    }
    h->events[h->nevents++] = event;
}

/* Receives events for up to ms milliseconds into h->events. */
static inline void harness_pump(harness_t *h, int ms)
{
    zmq_pollitem_t item = {h->sub, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, ms) <= 0)
        return;
    for (;;) {
        zmq_msg_t topic, body;
        zmq_msg_init(&topic);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&topic, h->sub, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&topic);
            zmq_msg_close(&body);
            return;
        }
        if (zmq_msg_more(&topic) && zmq_msg_recv(&body, h->sub, 0) >= 0) {
            json_t *event = msgjson_from_raw(zmq_msg_data(&body), zmq_msg_size(&body));
            if (event == NULL)
                fprintf(stderr, "harness: the broker published an event that is not msgpack\n");
            CHECK(event != NULL);
            harness_record(h, event);
        }
        zmq_msg_close(&topic);
        zmq_msg_close(&body);
    }
}

static inline const char *harness_field(const json_t *event, const char *key)
{
    const json_t *value = json_object_get(event, key);
    return json_is_string(value) ? json_string_value(value) : "";
}

/* Index of the first recorded event `name` of task `task` (NULL: any) at or after `from`,
 * or -1. */
static inline int harness_find(harness_t *h, int from, const char *name, const char *task)
{
    for (int i = from; i < h->nevents; i++) {
        if (strcmp(harness_field(h->events[i], "event"), name) == 0 &&
            (task == NULL || strcmp(harness_field(h->events[i], "task"), task) == 0))
            return i;
    }
    return -1;
}

/* Waits up to timeout_ms for event `name` of `task`; returns it (owned by the harness)
 * or NULL. */
static inline json_t *harness_wait(harness_t *h, const char *name, const char *task, int timeout_ms)
{
    for (int waited = 0;; waited += 20) {
        int i = harness_find(h, 0, name, task);
        if (i >= 0)
            return h->events[i];
        if (waited >= timeout_ms)
            return NULL;
        harness_pump(h, 20);
    }
}

/* Waits until the broker announced worker `id` (worker.joined); true if it did. */
static inline bool harness_wait_joined(harness_t *h, const char *id)
{
    for (int waited = 0; waited <= 5000; waited += 20) {
        for (int i = 0; (i = harness_find(h, i, "worker.joined", NULL)) >= 0; i++) {
            if (strcmp(harness_field(h->events[i], "worker"), id) == 0)
                return true;
        }
        harness_pump(h, 20);
    }
    return false;
}

/* The one way tests start a specialist service (`program`: cloister-review, cloister-test,
 * cloister-merge): as worker `id` with its own ipc task socket, the harness heartbeat,
 * --grace-ms `grace_ms` and the `extra` flags (NULL-terminated, or NULL); waits until the
 * broker announced it. Returns its pid. */
static inline pid_t harness_service(harness_t *h, const char *program, const char *id,
                                    int grace_ms, const char *const *extra)
{
    char bind[600], grace[32];
    snprintf(bind, sizeof bind, "ipc://%s/%s.sock", h->env->dir, id);
    snprintf(grace, sizeof grace, "%d", grace_ms);
    char *argv[24] = {(char *)testenv_bin(program), "--heartbeat-ms", HARNESS_HB, "--worker-id",
                      (char *)id, "--bind", bind, "--grace-ms", grace};
    int n = 9;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 23; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid_t pid = testenv_spawn(h->env, id, argv);
    CHECK(harness_wait_joined(h, id));
    return pid;
}

/* Number of recorded events `name` of `task`. */
static inline int harness_count(harness_t *h, const char *name, const char *task)
{
    int n = 0;
    for (int i = 0; (i = harness_find(h, i, name, task)) >= 0; i++)
        n++;
    return n;
}

static inline int64_t harness_int(const json_t *event, const char *key)
{
    return json_integer_value(json_object_get(event, key));
}

/* The path of a file in the test directory (static buffer per call slot). */
static inline const char *harness_path(harness_t *h, const char *name)
{
    static char slots[4][512];
    static int next;
    char *slot = slots[next++ % 4];
    snprintf(slot, 512, "%s/%s", h->env->dir, name);
    return slot;
}

/* Creates the go file `name` in the test directory. */
static inline void harness_go(harness_t *h, const char *name)
{
    CHECK(testenv_write_file(harness_path(h, name), "go\n") == 0);
}

/* True if pid no longer runs (gone, or a zombie waiting for its parent). */
static inline bool harness_pid_gone(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *stat = testenv_read_file(path);
    bool gone = stat == NULL || strstr(stat, ") Z ") != NULL;
    free(stat);
    return gone;
}

/* Reads a pid the test's command wrote to `name`; 0 if none. */
static inline pid_t harness_read_pid(harness_t *h, const char *name)
{
    char *text = testenv_read_file(harness_path(h, name));
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid;
}

#endif
