/* null_broker: the floor under bench_broker's figures. It is not a broker: it speaks just
 * enough of the protocol for bench_broker's submitter and fast workers (hello, submit,
 * result, heartbeat; task, ack and one published event per change) and keeps its queue
 * in memory, with no store, no leases, no retries and no session context.
 *
 * It uses the same sockets as cloister-broker (PULL `in`, PUB `events`, one PUSH per
 * worker, all on ipc) and the same codec, so `bench_broker --null` measures what the
 * machine can move through ZeroMQ with the load generator on it: an upper bound for any
 * broker of this shape on that machine.
 *
 * usage: null_broker <in endpoint> <events endpoint> (runs until killed) */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define MAX_WORKERS 4096
#define BATCH_LIMIT 2048

typedef struct {
    char *id;
    void *push;
    char *task; /* the task it holds, or NULL */
} null_worker_t;

typedef struct {
    void *context, *in, *events;
    null_worker_t workers[MAX_WORKERS];
    int worker_count;
    char **queue; /* ring of queued task ids */
    size_t queue_cap, queue_head, queue_len;
    wire_writer_t *writer;
    int64_t seq;
} null_broker_t;

static void s_send(void *socket, wire_writer_t *w)
{
    size_t len;
    const void *data = wire_writer_data(w, &len);
    zmq_send(socket, data, len, ZMQ_DONTWAIT);
}

static void s_publish(null_broker_t *self, const char *event, const char *task)
{
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_EVENT);
    wire_put_int(w, FIELD_SEQ, ++self->seq);
    wire_put_str(w, FIELD_EVENT, event);
    wire_put_str(w, FIELD_TASK, task);
    wire_put_str(w, FIELD_SPECIALIST, "bench-agent");
    zmq_send(self->events, event, strlen(event), ZMQ_SNDMORE);
    s_send(self->events, w);
}

static null_worker_t *s_worker(null_broker_t *self, const char *id)
{
    for (int i = 0; i < self->worker_count; i++)
        if (strcmp(self->workers[i].id, id) == 0)
            return &self->workers[i];
    return NULL;
}

static void s_enqueue(null_broker_t *self, const char *id)
{
    if (self->queue_len == self->queue_cap) {
        size_t cap = self->queue_cap ? self->queue_cap * 2 : 1024;
        char **grown = malloc(cap * sizeof *grown);
        for (size_t i = 0; i < self->queue_len; i++)
            grown[i] = self->queue[(self->queue_head + i) % self->queue_cap];
        free(self->queue);
        self->queue = grown;
        self->queue_cap = cap;
        self->queue_head = 0;
    }
    self->queue[(self->queue_head + self->queue_len++) % self->queue_cap] = strdup(id);
    s_publish(self, "task.queued", id);
}

static void s_hello(null_broker_t *self, const wire_msg_t *msg)
{
    const char *id = wire_msg_str(msg, FIELD_WORKER, "");
    if (s_worker(self, id) != NULL || self->worker_count == MAX_WORKERS)
        return;
    null_worker_t *worker = &self->workers[self->worker_count++];
    worker->id = strdup(id);
    worker->push = zmq_socket(self->context, ZMQ_PUSH);
    zmq_connect(worker->push, wire_msg_str(msg, FIELD_ENDPOINT, ""));
}

static void s_result(null_broker_t *self, const wire_msg_t *msg)
{
    null_worker_t *worker = s_worker(self, wire_msg_str(msg, FIELD_WORKER, ""));
    const char *task = wire_msg_str(msg, FIELD_TASK, "");
    if (worker == NULL || worker->task == NULL || strcmp(worker->task, task) != 0)
        return;
    s_publish(self, "task.done", task);
    wire_writer_t *w = self->writer;
    wire_writer_start(w, MSG_ACK);
    wire_put_str(w, FIELD_WORKER, worker->id);
    wire_put_str(w, FIELD_TASK, task);
    wire_put_int(w, FIELD_ATTEMPT, wire_msg_int(msg, FIELD_ATTEMPT, 1));
    s_send(worker->push, w);
    free(worker->task);
    worker->task = NULL;
}

static void s_handle(null_broker_t *self, const void *data, size_t len)
{
    wire_msg_t *msg = NULL;
    if (wire_decode(data, len, &msg) != 0)
        return;
    msg_type_t type = wire_msg_type(msg);
    if (type == MSG_SUBMIT)
        s_enqueue(self, wire_msg_str(msg, FIELD_ID, ""));
    else if (type == MSG_HELLO)
        s_hello(self, msg);
    else if (type == MSG_RESULT)
        s_result(self, msg);
    wire_msg_destroy(&msg);
}

static void s_dispatch(null_broker_t *self)
{
    for (int i = 0; i < self->worker_count && self->queue_len > 0; i++) {
        null_worker_t *worker = &self->workers[i];
        if (worker->task != NULL)
            continue;
        worker->task = self->queue[self->queue_head];
        self->queue_head = (self->queue_head + 1) % self->queue_cap;
        self->queue_len--;
        s_publish(self, "task.dispatched", worker->task);
        wire_writer_t *w = self->writer;
        wire_writer_start(w, MSG_TASK);
        wire_put_str(w, FIELD_WORKER, worker->id);
        wire_put_str(w, FIELD_ID, worker->task);
        wire_put_int(w, FIELD_ATTEMPT, 1);
        wire_put_str(w, FIELD_SPECIALIST, "bench-agent");
        wire_put_str(w, FIELD_PRIORITY, "normal");
        s_send(worker->push, w);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: null_broker <in endpoint> <events endpoint>\n");
        return 2;
    }
    static null_broker_t self;
    self.context = zmq_ctx_new();
    self.in = zmq_socket(self.context, ZMQ_PULL);
    self.events = zmq_socket(self.context, ZMQ_PUB);
    self.writer = wire_writer_new();
    if (zmq_bind(self.in, argv[1]) != 0 || zmq_bind(self.events, argv[2]) != 0) {
        fprintf(stderr, "null_broker: cannot bind: %s\n", zmq_strerror(errno));
        return 1;
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    zmq_pollitem_t items[] = {{self.in, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 1, -1) < 0)
            continue;
        for (int i = 0; i < BATCH_LIMIT && zmq_msg_recv(&msg, self.in, ZMQ_DONTWAIT) >= 0; i++)
            s_handle(&self, zmq_msg_data(&msg), zmq_msg_size(&msg));
        s_dispatch(&self);
    }
}
