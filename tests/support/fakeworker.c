/* fakeworker: a protocol-level worker for broker tests (see fakeworker.h). */
#include "fakeworker.h"

#include "clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

struct fakeworker_t {
    void *context;
    bool own_context;
    void *pull, *push;
    char id[128];
    char specialist[64];
    char endpoint[512];
    wire_writer_t *w;
};

fakeworker_t *fakeworker_new_in(void *context, const char *dir, const char *in_ep,
                                const char *specialist, const char *id)
{
    fakeworker_t *self = calloc(1, sizeof *self);
    snprintf(self->id, sizeof self->id, "%s", id);
    snprintf(self->specialist, sizeof self->specialist, "%s", specialist);
    snprintf(self->endpoint, sizeof self->endpoint, "ipc://%s/%s.sock", dir, id);
    self->context = context;
    self->pull = zmq_socket(self->context, ZMQ_PULL);
    self->push = zmq_socket(self->context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(self->pull, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(self->push, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(self->pull, self->endpoint) != 0 || zmq_connect(self->push, in_ep) != 0) {
        fprintf(stderr, "fakeworker: cannot bind %s / connect %s\n", self->endpoint, in_ep);
        fakeworker_destroy(&self);
        return NULL;
    }
    self->w = wire_writer_new();
    return self;
}

fakeworker_t *fakeworker_new(const char *dir, const char *in_ep, const char *specialist,
                             const char *id)
{
    void *context = zmq_ctx_new();
    fakeworker_t *self = fakeworker_new_in(context, dir, in_ep, specialist, id);
    if (self == NULL) {
        zmq_ctx_term(context);
        return NULL;
    }
    self->own_context = true;
    return self;
}

void fakeworker_destroy(fakeworker_t **self_p)
{
    fakeworker_t *self = *self_p;
    if (self == NULL)
        return;
    zmq_close(self->pull);
    zmq_close(self->push);
    if (self->own_context)
        zmq_ctx_term(self->context);
    wire_writer_destroy(&self->w);
    free(self);
    *self_p = NULL;
}

static void s_send(fakeworker_t *self)
{
    size_t len;
    const void *data = wire_writer_data(self->w, &len);
    zmq_send(self->push, data, len, 0);
}

static void s_start(fakeworker_t *self, msg_type_t type)
{
    wire_writer_start(self->w, type);
    wire_put_str(self->w, FIELD_WORKER, self->id);
}

void fakeworker_hello(fakeworker_t *self, const char *task, int attempt)
{
    s_start(self, MSG_HELLO);
    wire_put_str(self->w, FIELD_SPECIALIST, self->specialist);
    wire_put_str(self->w, FIELD_ENDPOINT, self->endpoint);
    wire_put_int(self->w, FIELD_PID, getpid());
    if (task != NULL) {
        wire_put_str(self->w, FIELD_TASK, task);
        wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    }
    s_send(self);
}

void fakeworker_heartbeat(fakeworker_t *self, const char *task, int attempt)
{
    s_start(self, MSG_HEARTBEAT);
    if (task != NULL) {
        wire_put_str(self->w, FIELD_TASK, task);
        wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    }
    s_send(self);
}

void fakeworker_heartbeat_echo(fakeworker_t *self, int64_t ping_seq)
{
    s_start(self, MSG_HEARTBEAT);
    wire_put_int(self->w, FIELD_PING_SEQ, ping_seq);
    s_send(self);
}

static void s_put_unacked(fakeworker_t *self, const char *task, int attempt)
{
    wire_open_array(self->w, FIELD_UNACKED);
    wire_open_map_key(self->w, NULL);
    wire_put_str(self->w, FIELD_TASK, task);
    wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    wire_close(self->w);
    wire_close(self->w);
}

void fakeworker_hello_unacked(fakeworker_t *self, const char *task, int attempt)
{
    s_start(self, MSG_HELLO);
    wire_put_str(self->w, FIELD_SPECIALIST, self->specialist);
    wire_put_str(self->w, FIELD_ENDPOINT, self->endpoint);
    wire_put_int(self->w, FIELD_PID, getpid());
    s_put_unacked(self, task, attempt);
    s_send(self);
}

void fakeworker_heartbeat_unacked(fakeworker_t *self, int64_t ping_seq, const char *task,
                                  int attempt)
{
    s_start(self, MSG_HEARTBEAT);
    wire_put_int(self->w, FIELD_PING_SEQ, ping_seq);
    s_put_unacked(self, task, attempt);
    s_send(self);
}

void fakeworker_progress(fakeworker_t *self, const char *task, int attempt, const char *text)
{
    s_start(self, MSG_PROGRESS);
    wire_put_str(self->w, FIELD_TASK, task);
    wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    wire_put_str(self->w, FIELD_TEXT, text);
    wire_put_str(self->w, FIELD_KIND, "info");
    s_send(self);
}

void fakeworker_result(fakeworker_t *self, const char *task, int attempt, const char *outcome,
                       const char *error, const void *next_raw, size_t next_len)
{
    s_start(self, MSG_RESULT);
    wire_put_str(self->w, FIELD_TASK, task);
    wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    wire_put_str(self->w, FIELD_OUTCOME, outcome);
    wire_put_str(self->w, FIELD_ERROR, error);
    wire_open_map(self->w, FIELD_RESULT);
    wire_put_key_str(self->w, "RESULT", outcome);
    wire_close(self->w);
    wire_put_raw(self->w, FIELD_NEXT, next_raw, next_len);
    s_send(self);
}

void fakeworker_result_map(fakeworker_t *self, const char *task, int attempt, const char *outcome,
                           const char *error, const void *result_raw, size_t result_len)
{
    s_start(self, MSG_RESULT);
    wire_put_str(self->w, FIELD_TASK, task);
    wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    wire_put_str(self->w, FIELD_OUTCOME, outcome);
    wire_put_str(self->w, FIELD_ERROR, error);
    wire_put_raw(self->w, FIELD_RESULT, result_raw, result_len);
    s_send(self);
}

void fakeworker_release(fakeworker_t *self, const char *task, int attempt)
{
    s_start(self, MSG_RELEASE);
    wire_put_str(self->w, FIELD_TASK, task);
    wire_put_int(self->w, FIELD_ATTEMPT, attempt);
    wire_put_str(self->w, FIELD_REASON, "test release");
    s_send(self);
}

void fakeworker_bye(fakeworker_t *self)
{
    s_start(self, MSG_BYE);
    s_send(self);
}

/* The next message on the socket if it is of `type`, else NULL (and the message is
 * dropped); `flags` ZMQ_DONTWAIT or 0. *received says whether there was one. */
static wire_msg_t *s_receive(fakeworker_t *self, msg_type_t type, int flags, bool *received)
{
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    *received = zmq_msg_recv(&msg, self->pull, flags) >= 0;
    wire_msg_t *decoded = NULL;
    if (*received)
        wire_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &decoded);
    zmq_msg_close(&msg);
    if (decoded != NULL && wire_msg_type(decoded) == type)
        return decoded;
    wire_msg_destroy(&decoded);
    return NULL;
}

wire_msg_t *fakeworker_expect(fakeworker_t *self, msg_type_t type, int timeout_ms,
                              const char *holding, int holding_attempt)
{
    int64_t deadline = clock_now_ms() + timeout_ms;
    int64_t next_beat = 0;
    for (;;) {
        int64_t now = clock_now_ms();
        if (now >= deadline)
            return NULL;
        if (now >= next_beat) {
            fakeworker_heartbeat(self, holding, holding_attempt);
            next_beat = now + 50;
        }
        zmq_pollitem_t item = {self->pull, 0, ZMQ_POLLIN, 0};
        long wait = (long)((next_beat < deadline ? next_beat : deadline) - now);
        if (zmq_poll(&item, 1, wait) <= 0)
            continue;
        bool received;
        wire_msg_t *decoded = s_receive(self, type, 0, &received);
        if (decoded != NULL)
            return decoded;
    }
}

void *fakeworker_socket(fakeworker_t *self)
{
    return self->pull;
}

wire_msg_t *fakeworker_take(fakeworker_t *self, msg_type_t type)
{
    bool received = true;
    while (received) {
        wire_msg_t *decoded = s_receive(self, type, ZMQ_DONTWAIT, &received);
        if (decoded != NULL)
            return decoded;
    }
    return NULL;
}
