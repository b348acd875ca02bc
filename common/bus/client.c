/* client: the broker's control and events sockets, seen from a client (see client.h). */
#include "client.h"

#include "clock.h"
#include "curve.h"
#include "failure.h"
#include "greeting.h"

#include <czmq.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

/* Longest single wait while following, so a stop flag set between two checks is seen. */
#define CLIENT_STOP_CHECK_MS 250

/* How long a follower hears nothing before it asks the broker for what it may have missed
 * (client_events_run). The publisher drops events for a subscriber it cannot reach (cut
 * off, or too slow); a gap in the sequence numbers shows that only when a later event gets
 * through, and when none follows, only this check does. */
#define CLIENT_SILENCE_CHECK_MS 2000

/* How long a request nobody answered waits more to read the broker's greeting (why). */
#define CLIENT_GREETING_MS 500

struct client_t {
    zsock_t *req;
    zsock_t *handshakes; /* the req socket's failed handshakes (a monitor), or NULL */
    char *endpoint;
    int timeout_ms;
};

struct client_events_t {
    zsock_t *sub; /* NULL: replay only */
    char *topic;
    int64_t last_seq;
};

/* Watches the req socket's handshakes, so a request nobody answers can say why when the
 * reason is the handshake (CURVE on one side only, a key the broker does not know). A
 * client without the watch still works; its timeouts just say less. */
static void s_watch_handshakes(client_t *self)
{
    /* A name of its own each time: a socket made after one was closed may get the closed
     * one's address, while the old monitor's endpoint is still bound (libzmq closes sockets
     * in the background), and the watch could not be set up then. */
    static atomic_uint s_watches;
    char endpoint[96];
    snprintf(endpoint, sizeof endpoint, "inproc://cloister-client-%p-%u", (void *)self->req,
             atomic_fetch_add(&s_watches, 1));
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (zmq_socket_monitor(zsock_resolve(self->req), endpoint, events) != 0)
        return;
    self->handshakes = zsock_new(ZMQ_PAIR);
    if (self->handshakes != NULL && zsock_connect(self->handshakes, "%s", endpoint) != 0)
        zsock_destroy(&self->handshakes);
}

/* Drops the req socket and its watch. */
static void s_disconnect(client_t *self)
{
    zsock_destroy(&self->handshakes);
    zsock_destroy(&self->req);
}

/* Creates and connects the REQ socket. Returns 0 or a FAILURE_* code. */
static int s_connect(client_t *self)
{
    self->req = zsock_new(ZMQ_REQ);
    if (self->req == NULL)
        return failure_set(FAILURE_IO, "cannot create a control socket");
    zsock_set_linger(self->req, 0);
    zsock_set_sndtimeo(self->req, self->timeout_ms);
    if (curve_client() != NULL)
        curve_apply_client(curve_client(), self->req);
    s_watch_handshakes(self);
    if (zsock_connect(self->req, "%s", self->endpoint) != 0) {
        s_disconnect(self);
        return failure_set(FAILURE_INVALID, "cannot connect to control endpoint '%s': %s",
                           self->endpoint, zmq_strerror(zmq_errno()));
    }
    return 0;
}

client_t *client_new(const char *control_ep, int timeout_ms)
{
    if (control_ep == NULL || control_ep[0] == '\0') {
        failure_set(FAILURE_INVALID, "no control endpoint");
        return NULL;
    }
    client_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        return NULL;
    }
    self->timeout_ms = timeout_ms > 0 ? timeout_ms : CLIENT_TIMEOUT_MS;
    self->endpoint = strdup(control_ep);
    if (self->endpoint == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        client_destroy(&self);
        return NULL;
    }
    if (s_connect(self) != 0)
        client_destroy(&self);
    return self;
}

void client_destroy(client_t **self_p)
{
    client_t *self = *self_p;
    if (self == NULL)
        return;
    s_disconnect(self);
    free(self->endpoint);
    free(self);
    *self_p = NULL;
}

const char *client_endpoint(const client_t *self)
{
    return self->endpoint;
}

/* "3s" for whole seconds, "500ms" otherwise: how the deadline reads in an error. */
static void s_format_timeout(char *buf, size_t size, int timeout_ms)
{
    if (timeout_ms % 1000 == 0)
        snprintf(buf, size, "%ds", timeout_ms / 1000);
    else
        snprintf(buf, size, "%dms", timeout_ms);
}

/* What the failed handshakes the watch saw say (several attempts, each failing, may each
 * fail a little differently: the side that sees the mismatch first hangs up). */
typedef struct {
    bool mechanism_mismatch; /* CURVE on one side only */
    bool refused;            /* the broker's authenticator refused the key */
} handshakes_t;

static handshakes_t s_failed_handshakes(client_t *self)
{
    handshakes_t seen = {false, false};
    while (self->handshakes != NULL) {
        zmsg_t *event = zmsg_recv_nowait(self->handshakes);
        if (event == NULL)
            break;
        zframe_t *head = zmsg_first(event);
        if (head != NULL && zframe_size(head) >= 6) {
            uint16_t id;
            uint32_t value;
            memcpy(&id, zframe_data(head), sizeof id);
            memcpy(&value, zframe_data(head) + 2, sizeof value);
            seen.mechanism_mismatch |= id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                                       value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
            seen.refused |= id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
        }
        zmsg_destroy(&event);
    }
    return seen;
}

/* After a request got no answer the REQ socket still waits for it: it is dropped, and the
 * next request connects a fresh one, so a late answer is never taken for the next one. The
 * error says why when the handshake said it: the broker and this client disagree on CURVE,
 * or the broker does not know this client's key. */
static int s_no_reply(client_t *self)
{
    handshakes_t seen = s_failed_handshakes(self);
    s_disconnect(self);
    bool curve_here = curve_client() != NULL;
    const char *mine = curve_here ? "on" : "off";
    const char *theirs = curve_here ? "off" : "on";
    char mechanism[32];
    if (!seen.mechanism_mismatch && !seen.refused &&
        greeting_mechanism(self->endpoint, CLIENT_GREETING_MS, mechanism, sizeof mechanism) == 0)
        seen.mechanism_mismatch = (strcmp(mechanism, "CURVE") == 0) != curve_here;
    if (seen.mechanism_mismatch)
        return failure_set(FAILURE_IO,
                           "the broker at %s does not speak this client's security: CURVE is %s "
                           "here and %s there. Set [security] curve the same on both sides (or "
                           "CLOISTER_CURVE=1|0 for this client)",
                           self->endpoint, mine, theirs);
    if (seen.refused)
        return failure_set(FAILURE_IO,
                           "the broker at %s refused this client's CURVE key: it is not in the "
                           "broker's keys/authorized/ (there: pan keys add NAME --role ROLE, "
                           "then use keys/clients/NAME_secret here through CLOISTER_CURVE_CERT)",
                           self->endpoint);
    char when[32];
    s_format_timeout(when, sizeof when, self->timeout_ms);
    return failure_set(FAILURE_TIMEOUT, "no reply from broker at %s within %s", self->endpoint,
                       when);
}

/* Waits until `sock` is readable or the deadline (monotonic ms) passes. A signal does not
 * end the wait early unless *stop is set. Returns 1 readable, 0 deadline/stop, -1 error. */
static int s_wait_readable(zsock_t *sock, int64_t deadline, volatile sig_atomic_t *stop)
{
    for (;;) {
        if (stop != NULL && *stop)
            return 0;
        int64_t left = deadline < 0 ? -1 : deadline - clock_now_ms();
        if (deadline >= 0 && left <= 0)
            return 0;
        if (stop != NULL && (left < 0 || left > CLIENT_STOP_CHECK_MS))
            left = CLIENT_STOP_CHECK_MS;
        zmq_pollitem_t item = {zsock_resolve(sock), 0, ZMQ_POLLIN, 0};
        int rc = zmq_poll(&item, 1, (long)left);
        if (rc > 0)
            return 1;
        if (rc < 0 && zmq_errno() != EINTR)
            return -1;
    }
}

/* Receives one whole message from `sock` and copies its last frame (the map; an event's
 * topic frame comes first) to *data (malloc'd, caller frees). Returns 0 or FAILURE_IO,
 * FAILURE_INVALID, FAILURE_MEMORY, FAILURE_TOO_BIG. */
static int s_receive(zsock_t *sock, void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    zmsg_t *msg = zmsg_recv(sock);
    if (msg == NULL)
        return failure_set(FAILURE_IO, "receive failed: %s", zmq_strerror(zmq_errno()));
    zframe_t *last = zmsg_last(msg);
    int rc = 0;
    if (last == NULL) {
        rc = failure_set(FAILURE_INVALID, "empty message");
    } else if (zframe_size(last) > WIRE_MAX_MESSAGE) {
        rc = failure_set(FAILURE_TOO_BIG, "message of %zu bytes is over the %d-byte cap",
                         zframe_size(last), WIRE_MAX_MESSAGE);
    } else {
        *len = zframe_size(last);
        *data = malloc(*len ? *len : 1);
        if (*data == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
        else
            memcpy(*data, zframe_data(last), *len);
    }
    zmsg_destroy(&msg);
    return rc;
}

int client_request(client_t *self, const void *data, size_t len, wire_msg_t **reply)
{
    *reply = NULL;
    int rc = 0;
    if (self->req == NULL && (rc = s_connect(self)) != 0)
        return rc;
    int64_t deadline = clock_now_ms() + self->timeout_ms;
    if (zmq_send(zsock_resolve(self->req), data, len, 0) < 0) {
        if (zmq_errno() == EAGAIN)
            return s_no_reply(self);
        return failure_set(FAILURE_IO, "cannot send to broker at %s: %s", self->endpoint,
                           zmq_strerror(zmq_errno()));
    }
    int ready = s_wait_readable(self->req, deadline, NULL);
    if (ready == 0)
        return s_no_reply(self);
    if (ready < 0) {
        s_disconnect(self);
        return failure_set(FAILURE_IO, "poll on %s failed: %s", self->endpoint,
                           zmq_strerror(zmq_errno()));
    }
    void *bytes = NULL;
    size_t size = 0;
    rc = s_receive(self->req, &bytes, &size);
    if (rc == FAILURE_IO)
        s_disconnect(self);
    if (rc == 0)
        rc = wire_decode(bytes, size, reply);
    free(bytes);
    if (rc != 0)
        return failure_set(rc, "bad reply from broker at %s: %s", self->endpoint,
                           failure_message());
    if (wire_msg_type(*reply) != MSG_REPLY) {
        rc = failure_set(FAILURE_INVALID, "broker at %s answered with a '%s', not a reply",
                         self->endpoint, msg_type_name(wire_msg_type(*reply)));
        wire_msg_destroy(reply);
    }
    return rc;
}

static int s_code_from_name(const char *code)
{
    if (strcmp(code, "invalid") == 0)
        return FAILURE_INVALID;
    if (strcmp(code, "not_found") == 0)
        return FAILURE_NOT_FOUND;
    if (strcmp(code, "too_big") == 0)
        return FAILURE_TOO_BIG;
    if (strcmp(code, "disk_full") == 0)
        return FAILURE_DISK_FULL;
    if (strcmp(code, "overloaded") == 0)
        return FAILURE_OVERLOADED;
    return FAILURE_STATE;
}

int client_call(client_t *self, wire_writer_t *request, wire_msg_t **reply)
{
    size_t len;
    const void *data = wire_writer_data(request, &len);
    int rc = client_request(self, data, len, reply);
    if (rc != 0)
        return rc;
    if (wire_msg_bool(*reply, FIELD_OK, false))
        return 0;
    rc = failure_set(s_code_from_name(wire_msg_str(*reply, FIELD_CODE, "")), "%s",
                     wire_msg_str(*reply, FIELD_ERROR, "the broker refused the request"));
    wire_msg_destroy(reply);
    return rc;
}

void client_new_id(char *buf, size_t size)
{
    uuid_t uuid;
    char text[CLIENT_ID_SIZE];
    uuid_generate(uuid);
    uuid_unparse_lower(uuid, text);
    snprintf(buf, size, "%s", text);
}

int client_submit(client_t *self, const submit_t *task, char *id_out, size_t id_size,
                  wire_msg_t **reply)
{
    *reply = NULL;
    submit_t copy = *task;
    char fresh[CLIENT_ID_SIZE];
    if (copy.id == NULL) {
        client_new_id(fresh, sizeof fresh);
        copy.id = fresh;
    }
    if (id_out != NULL)
        snprintf(id_out, id_size, "%s", copy.id);
    wire_writer_t *writer = wire_writer_new();
    if (writer == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    submit_encode(writer, &copy);
    int rc = client_call(self, writer, reply);
    wire_writer_destroy(&writer);
    return rc;
}

/* ---- events ---- */

client_events_t *client_events_new(const char *events_ep, const char *topic)
{
    client_events_t *self = calloc(1, sizeof *self);
    if (self == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        return NULL;
    }
    self->topic = strdup(topic ? topic : "");
    if (self->topic == NULL) {
        failure_set(FAILURE_MEMORY, "out of memory");
        client_events_destroy(&self);
        return NULL;
    }
    if (events_ep == NULL)
        return self;
    self->sub = zsock_new(ZMQ_SUB);
    if (self->sub == NULL) {
        failure_set(FAILURE_IO, "cannot create an events socket");
        client_events_destroy(&self);
        return NULL;
    }
    zsock_set_linger(self->sub, 0);
    if (curve_client() != NULL)
        curve_apply_client(curve_client(), self->sub);
    zsock_set_subscribe(self->sub, self->topic);
    if (zsock_connect(self->sub, "%s", events_ep) != 0) {
        failure_set(FAILURE_INVALID, "cannot connect to events endpoint '%s': %s", events_ep,
                    zmq_strerror(zmq_errno()));
        client_events_destroy(&self);
        return NULL;
    }
    return self;
}

void client_events_destroy(client_events_t **self_p)
{
    client_events_t *self = *self_p;
    if (self == NULL)
        return;
    zsock_destroy(&self->sub);
    free(self->topic);
    free(self);
    *self_p = NULL;
}

int64_t client_events_last_seq(const client_events_t *self)
{
    return self->last_seq;
}

/* Hands one event to fn unless its seq was delivered already. Returns 1 when fn asked to
 * stop, else 0. */
static int s_deliver(client_events_t *self, const wire_msg_t *event, const void *raw, size_t len,
                     client_event_fn fn, void *arg)
{
    int64_t seq = wire_msg_int(event, FIELD_SEQ, -1);
    if (seq <= self->last_seq)
        return 0;
    self->last_seq = seq;
    return fn(event, raw, len, arg) != 0 ? 1 : 0;
}

/* True once the caller's stop flag (may be NULL) is set. */
static bool s_stopped(volatile sig_atomic_t *stop)
{
    return stop != NULL && *stop;
}

/* One replay reply: how many events it held and whether the broker cut it short. */
typedef struct {
    size_t count;
    bool truncated;
} replay_page_t;

/* Asks control for one page of events after self->last_seq and delivers them, stopping
 * early once *stop is set. Fills *page. Returns 1 when fn or *stop asked to stop, 0, or a
 * negative FAILURE_* code. */
static int s_replay_page(client_events_t *self, client_t *control, volatile sig_atomic_t *stop,
                         client_event_fn fn, void *arg, replay_page_t *page)
{
    page->count = 0;
    page->truncated = false;
    wire_writer_t *writer = wire_writer_new();
    if (writer == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    wire_writer_start(writer, MSG_REPLAY);
    wire_put_int(writer, FIELD_SINCE, self->last_seq);
    wire_put_str(writer, FIELD_TOPIC, self->topic);
    wire_put_int(writer, FIELD_LIMIT, CLIENT_REPLAY_PAGE);
    wire_msg_t *reply = NULL;
    int rc = client_call(control, writer, &reply);
    wire_writer_destroy(&writer);
    if (rc != 0)
        return rc;
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    if (data == NULL || data->type != MSGPACK_OBJECT_ARRAY) {
        wire_msg_destroy(&reply);
        return failure_set(FAILURE_INVALID, "replay: the broker's data is not an array");
    }
    page->count = data->via.array.size;
    page->truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
    msgpack_sbuffer buffer;
    msgpack_sbuffer_init(&buffer);
    msgpack_packer packer;
    msgpack_packer_init(&packer, &buffer, msgpack_sbuffer_write);
    for (uint32_t i = 0; i < data->via.array.size && rc == 0; i++) {
        if (s_stopped(stop)) {
            rc = 1;
            break;
        }
        msgpack_sbuffer_clear(&buffer);
        msgpack_pack_object(&packer, data->via.array.ptr[i]);
        wire_msg_t *event = NULL;
        if (wire_decode_as(buffer.data, buffer.size, MSG_EVENT, &event) != 0) {
            rc = failure_set(FAILURE_INVALID, "replay: bad event: %s", failure_message());
            break;
        }
        rc = s_deliver(self, event, buffer.data, buffer.size, fn, arg);
        wire_msg_destroy(&event);
    }
    msgpack_sbuffer_destroy(&buffer);
    wire_msg_destroy(&reply);
    return rc;
}

/* Replays every stored event after self->last_seq, page after page. A page is the last
 * one when it is short and the broker did not cut it (`truncated`: cut to stay under the
 * reply cap, more may follow). *stop is checked before every page and every event.
 * Returns 1 (fn or *stop asked to stop), 0 (all replayed), or an error. */
static int s_replay_all(client_events_t *self, client_t *control, volatile sig_atomic_t *stop,
                        client_event_fn fn, void *arg)
{
    for (;;) {
        if (s_stopped(stop))
            return 1;
        replay_page_t page;
        int rc = s_replay_page(self, control, stop, fn, arg, &page);
        if (rc != 0)
            return rc;
        if (page.truncated && page.count == 0)
            return failure_set(FAILURE_INVALID,
                               "replay: the broker cut a page after event #%lld without any "
                               "event in it: the replay cannot go on",
                               (long long)self->last_seq);
        if (!page.truncated && page.count < CLIENT_REPLAY_PAGE)
            return 0;
    }
}

/* While following, the broker may be out of reach for a while (a partition, a restart): a
 * replay that gets no answer is asked again until it is answered or *stop is set. The
 * events are stored, so nothing is lost meanwhile. Returns as s_replay_all(). */
static int s_replay_while_following(client_events_t *self, client_t *control,
                                    volatile sig_atomic_t *stop, client_event_fn fn, void *arg)
{
    for (;;) {
        int rc = s_replay_all(self, control, stop, fn, arg);
        if (rc != FAILURE_TIMEOUT || s_stopped(stop))
            return rc;
    }
}

int client_events_run(client_events_t *self, client_t *control, int64_t since, bool follow,
                      volatile sig_atomic_t *stop, client_event_fn fn, void *arg)
{
    bool replayed = since >= 0;
    if (replayed) {
        self->last_seq = since;
        int rc = s_replay_all(self, control, stop, fn, arg);
        if (rc != 0)
            return rc > 0 ? 0 : rc;
    }
    if (!follow)
        return 0;
    if (self->sub == NULL)
        return failure_set(FAILURE_INVALID, "following events needs an events endpoint");
    /* Until the first live event proves the subscription reached the broker, a few
     * catch-up replays close the window in which an event could have been published
     * before the broker knew about us (and no later event would reveal the gap). */
    static const int64_t catchup_after_ms[] = {50, 250, 1000, 3000};
    size_t catchups = replayed ? 0 : sizeof catchup_after_ms / sizeof catchup_after_ms[0];
    int64_t started = clock_now_ms();
    int64_t heard = started; /* when the events socket last gave something, or a replay ran */
    bool live = false;
    for (;;) {
        bool catching_up = !live && catchups < sizeof catchup_after_ms / sizeof catchup_after_ms[0];
        /* Silence is checked once there is a seq to replay from. */
        bool checking = replayed || live;
        int64_t deadline = catching_up ? started + catchup_after_ms[catchups]
                           : checking  ? heard + CLIENT_SILENCE_CHECK_MS
                                       : -1;
        int ready = s_wait_readable(self->sub, deadline, stop);
        if (ready == 0 && !s_stopped(stop) && (catching_up || checking)) {
            if (catching_up)
                catchups++;
            int rc = s_replay_while_following(self, control, stop, fn, arg);
            if (rc != 0)
                return rc > 0 ? 0 : rc;
            heard = clock_now_ms();
            continue;
        }
        if (ready == 0)
            return 0;
        if (ready < 0)
            return failure_set(FAILURE_IO, "poll on the events socket failed: %s",
                               zmq_strerror(zmq_errno()));
        void *raw = NULL;
        size_t len = 0;
        int rc = s_receive(self->sub, &raw, &len);
        heard = clock_now_ms();
        wire_msg_t *event = NULL;
        if (rc == 0)
            rc = wire_decode(raw, len, &event);
        if (rc == FAILURE_IO) {
            free(raw);
            return rc;
        }
        if (rc != 0 || wire_msg_type(event) != MSG_EVENT) {
            /* Not an event we can read: skip it rather than stop following. */
            wire_msg_destroy(&event);
            free(raw);
            continue;
        }
        if (!live) {
            live = true;
            if (replayed)
                rc = s_replay_while_following(self, control, stop, fn, arg);
            else
                self->last_seq = wire_msg_int(event, FIELD_SEQ, 0) - 1;
        }
        /* A gap: events were published while this subscriber could not take them (cut off,
         * or too slow: the publisher drops what a full pipe cannot hold). They are stored,
         * so they are replayed, in order, before this one (which the replay includes).
         * Seen only without a topic: a topic's events skip the others' sequence numbers. */
        int64_t seq = wire_msg_int(event, FIELD_SEQ, -1);
        bool everything = self->topic == NULL || self->topic[0] == '\0';
        if (rc == 0 && live && everything && seq > self->last_seq + 1)
            rc = s_replay_while_following(self, control, stop, fn, arg);
        if (rc == 0)
            rc = s_deliver(self, event, raw, len, fn, arg);
        wire_msg_destroy(&event);
        free(raw);
        if (rc != 0)
            return rc > 0 ? 0 : rc;
    }
}
