/* replies: the bounded replies of the control socket (see replies.h). */
#include "replies.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

/* What a waiting reply costs beyond its bytes (its record and envelope), for the caps. */
#define REPLIES_ITEM_COST 256

typedef struct {
    zmsg_t *envelope;
    void *data; /* the reply, or the request of a deferred one */
    size_t len;
    bool deferred;
} waiting_t;

typedef struct {
    zlistx_t *waiting; /* waiting_t, oldest first */
    int64_t held;      /* bytes: waiting here, and built but not yet sent */
    int refusals;      /* requests refused since it went over a cap */
} peer_t;

struct replies_t {
    void *router;
    int64_t per_peer, total;
    int64_t held; /* all peers' */
    replies_build_fn build;
    void *arg;
    zhashx_t *peers; /* routing id (hex) -> peer_t; only peers holding something */
    size_t waiting_peers;
    int64_t retry_at;
};

typedef enum { SENT, FULL, GONE } sent_t;

static void s_waiting_destroy(void **item)
{
    waiting_t *waiting = *item;
    if (waiting == NULL)
        return;
    zmsg_destroy(&waiting->envelope);
    free(waiting->data);
    free(waiting);
    *item = NULL;
}

static void s_key_destroy(void **item)
{
    free(*item);
    *item = NULL;
}

static void s_peer_destroy(void **item)
{
    peer_t *peer = *item;
    if (peer == NULL)
        return;
    zlistx_destroy(&peer->waiting);
    free(peer);
    *item = NULL;
}

replies_t *replies_new(void *router, int64_t per_peer, int64_t total, replies_build_fn build,
                       void *arg)
{
    replies_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->router = router;
    self->per_peer = per_peer;
    self->total = total;
    self->build = build;
    self->arg = arg;
    self->retry_at = INT64_MAX;
    self->peers = zhashx_new();
    zhashx_set_destructor(self->peers, s_peer_destroy);
    return self;
}

void replies_destroy(replies_t **self_p)
{
    replies_t *self = *self_p;
    if (self == NULL)
        return;
    zhashx_destroy(&self->peers);
    free(self);
    *self_p = NULL;
}

/* The peer's key: its routing id (the envelope's first frame) in hex. */
static const char *s_key(zmsg_t *envelope, char *buf, size_t size)
{
    zframe_t *frame = zmsg_first(envelope);
    const unsigned char *id = frame ? zframe_data(frame) : NULL;
    size_t len = frame ? zframe_size(frame) : 0;
    size_t at = 0;
    for (size_t i = 0; i < len && at + 3 <= size; i++, at += 2)
        snprintf(buf + at, 3, "%02x", id[i]);
    buf[at] = '\0';
    return buf;
}

static peer_t *s_peer(replies_t *self, zmsg_t *envelope, bool create)
{
    char key[520];
    s_key(envelope, key, sizeof key);
    peer_t *peer = zhashx_lookup(self->peers, key);
    if (peer != NULL || !create)
        return peer;
    peer = calloc(1, sizeof *peer);
    if (peer == NULL)
        return NULL;
    peer->waiting = zlistx_new();
    zlistx_set_destructor(peer->waiting, s_waiting_destroy);
    zhashx_insert(self->peers, key, peer);
    return peer;
}

static void s_count(replies_t *self, peer_t *peer, int64_t bytes)
{
    peer->held += bytes;
    self->held += bytes;
}

/* Forgets a peer that holds nothing any more. */
static void s_forget_if_idle(replies_t *self, zmsg_t *envelope, peer_t *peer)
{
    if (peer->held > 0 || zlistx_size(peer->waiting) > 0)
        return;
    char key[520];
    zhashx_delete(self->peers, s_key(envelope, key, sizeof key));
}

replies_verdict_t replies_admit(replies_t *self, zmsg_t *envelope)
{
    peer_t *peer = s_peer(self, envelope, false);
    int64_t held = peer ? peer->held : 0;
    if (held <= self->per_peer && self->held <= self->total) {
        if (peer != NULL)
            peer->refusals = 0;
        return REPLIES_ANSWER;
    }
    peer = s_peer(self, envelope, true);
    if (peer == NULL || peer->refusals >= REPLIES_MAX_REFUSALS)
        return REPLIES_DROP;
    peer->refusals++;
    return REPLIES_REFUSE;
}

void replies_hold(replies_t *self, zmsg_t *envelope, size_t len)
{
    peer_t *peer = s_peer(self, envelope, true);
    if (peer != NULL)
        s_count(self, peer, (int64_t)len);
}

void replies_release(replies_t *self, zmsg_t *envelope, size_t len)
{
    peer_t *peer = s_peer(self, envelope, false);
    if (peer == NULL)
        return;
    s_count(self, peer, -(int64_t)len);
    s_forget_if_idle(self, envelope, peer);
}

/* Sends one reply if the peer's pipe has room: its routing frame goes first, and only
 * once ZeroMQ took it (the pipe has room) is a deferred reply built. */
static sent_t s_try(replies_t *self, zmsg_t *envelope, const void *data, size_t len,
                    bool deferred)
{
    zframe_t *frame = zmsg_first(envelope);
    if (zmq_send(self->router, zframe_data(frame), zframe_size(frame),
                 ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? FULL : GONE;
    while ((frame = zmsg_next(envelope)) != NULL)
        zmq_send(self->router, zframe_data(frame), zframe_size(frame), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (deferred)
        data = self->build(self->arg, data, len, &len);
    zmq_send(self->router, data, len, ZMQ_DONTWAIT);
    return SENT;
}

/* Queues a copy behind the peer's other waiting replies. */
static void s_wait(replies_t *self, peer_t *peer, zmsg_t *envelope, const void *data, size_t len,
                   bool deferred)
{
    waiting_t *waiting = calloc(1, sizeof *waiting);
    void *copy = malloc(len ? len : 1);
    if (waiting == NULL || copy == NULL) {
        free(waiting);
        free(copy);
        return; /* out of memory: the reply is lost, as ZeroMQ would have dropped it */
    }
    if (len > 0)
        memcpy(copy, data, len);
    *waiting = (waiting_t){zmsg_dup(envelope), copy, len, deferred};
    if (zlistx_size(peer->waiting) == 0)
        self->waiting_peers++;
    zlistx_add_end(peer->waiting, waiting);
    s_count(self, peer, (int64_t)len + REPLIES_ITEM_COST);
    if (self->retry_at == INT64_MAX)
        self->retry_at = 0; /* the next pump tries */
}

/* Sends now, or queues, a reply or a deferred request. */
static void s_send_or_wait(replies_t *self, zmsg_t *envelope, const void *data, size_t len,
                           bool deferred, size_t held)
{
    peer_t *peer = s_peer(self, envelope, true);
    if (peer == NULL)
        return;
    s_count(self, peer, -(int64_t)held);
    if (zlistx_size(peer->waiting) > 0 || s_try(self, envelope, data, len, deferred) == FULL)
        s_wait(self, peer, envelope, data, len, deferred);
    s_forget_if_idle(self, envelope, peer);
}

void replies_send(replies_t *self, zmsg_t *envelope, const void *data, size_t len, size_t held)
{
    s_send_or_wait(self, envelope, data, len, false, held);
}

void replies_defer(replies_t *self, zmsg_t *envelope, const void *request, size_t len,
                   size_t held)
{
    s_send_or_wait(self, envelope, request, len, true, held);
}

/* Sends a peer's waiting replies until its pipe is full; all of them go when the peer is
 * gone. Returns true when none waits any more. */
static bool s_pump_peer(replies_t *self, peer_t *peer)
{
    waiting_t *waiting;
    while ((waiting = zlistx_first(peer->waiting)) != NULL) {
        sent_t sent = s_try(self, waiting->envelope, waiting->data, waiting->len,
                            waiting->deferred);
        if (sent == FULL)
            return false;
        s_count(self, peer, -((int64_t)waiting->len + REPLIES_ITEM_COST));
        zlistx_delete(peer->waiting, zlistx_cursor(peer->waiting));
    }
    self->waiting_peers--;
    return true;
}

int64_t replies_pump(replies_t *self, int64_t now)
{
    if (self->waiting_peers == 0) {
        self->retry_at = INT64_MAX;
        return INT64_MAX;
    }
    if (now < self->retry_at)
        return self->retry_at;
    zlistx_t *idle = zlistx_new(); /* keys of peers left holding nothing */
    zlistx_set_destructor(idle, s_key_destroy);
    for (peer_t *peer = zhashx_first(self->peers); peer; peer = zhashx_next(self->peers)) {
        if (zlistx_size(peer->waiting) > 0 && s_pump_peer(self, peer) && peer->held == 0)
            zlistx_add_end(idle, strdup(zhashx_cursor(self->peers)));
    }
    for (const char *key = zlistx_first(idle); key; key = zlistx_next(idle))
        zhashx_delete(self->peers, key);
    zlistx_destroy(&idle);
    self->retry_at = self->waiting_peers > 0 ? now + REPLIES_RETRY_MS : INT64_MAX;
    return self->retry_at;
}

int64_t replies_held(const replies_t *self)
{
    return self->held;
}

size_t replies_waiting_peers(const replies_t *self)
{
    return self->waiting_peers;
}
