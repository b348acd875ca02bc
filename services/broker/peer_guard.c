/* peer_guard: the cap on connections to the bound endpoints (see peer_guard.h). */
#include "peer_guard.h"

#include "failure.h"
#include "log.h"
#include "monitor_event.h"
#include "tcp_thin.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <zmq.h>

#define GUARD_MAX_SOCKETS 3
#define GUARD_STOP_ENDPOINT "inproc://cloister-peer-guard-stop"

/* Where a bound socket listens: an ipc path or a tcp port (from ZMQ_LAST_ENDPOINT). */
typedef struct {
    char path[512]; /* ipc; "" for tcp */
    int port;       /* tcp */
    char monitor[64];
} listener_t;

struct peer_guard_t {
    void *context;
    void *sockets[GUARD_MAX_SOCKETS];
    listener_t listeners[GUARD_MAX_SOCKETS];
    int n;
    int64_t max_peers;
    /* PAIR sockets, made and connected by peer_guard_new, then used by the thread only: */
    void *monitors[GUARD_MAX_SOCKETS]; /* the events of each bound socket */
    void *stopped;                     /* a message here stops the thread */
    void *stop;                        /* the owner's end of that */
    pthread_t thread;
    bool running;
    atomic_int_fast64_t peers, refused, failed_handshakes, aborted_handshakes;
    log_limit_t warnings; /* the thread's */
};

/* Reads where `socket` listens. */
static int s_listener(void *socket, listener_t *listener)
{
    char endpoint[512];
    size_t size = sizeof endpoint;
    if (zmq_getsockopt(socket, ZMQ_LAST_ENDPOINT, endpoint, &size) != 0)
        return failure_set(FAILURE_IO, "peer guard: %s", zmq_strerror(errno));
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        snprintf(listener->path, sizeof listener->path, "%s", endpoint + 6);
        return 0;
    }
    const char *colon = strrchr(endpoint, ':');
    listener->port = colon ? atoi(colon + 1) : 0;
    if (strncmp(endpoint, "tcp://", 6) != 0 || listener->port <= 0)
        return failure_set(FAILURE_INVALID, "peer guard: cannot watch %s (ipc and tcp only)",
                           endpoint);
    return 0;
}

/* True when `fd` is a connection accepted on `listener`: a socket, not listening, whose
 * local address is the listener's. */
static bool s_accepted_on(int fd, const listener_t *listener)
{
    struct sockaddr_storage address;
    socklen_t len = sizeof address;
    int listening = 0;
    socklen_t flag_len = sizeof listening;
    if (getsockname(fd, (struct sockaddr *)&address, &len) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &flag_len) != 0 || listening)
        return false;
    if (address.ss_family == AF_UNIX) {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&address;
        /* An abstract name ("ipc://@name") starts with a NUL where ZeroMQ writes '@'. */
        const char *path = listener->path[0] == '@' ? listener->path + 1 : listener->path;
        const char *sun = listener->path[0] == '@' ? un->sun_path + 1 : un->sun_path;
        return listener->path[0] != '\0' && strncmp(sun, path, sizeof un->sun_path - 1) == 0;
    }
    if (address.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&address)->sin_port) == listener->port;
    if (address.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&address)->sin6_port) == listener->port;
    return false;
}

/* A connection was accepted on `listener`: counted, and shut down when over the cap. One
 * over TCP retransmits at a fixed interval (tcp_thin.h): what the broker sends on it,
 * events and replies, does not stall for long on a lossy link. */
static void s_accepted(peer_guard_t *self, int fd, const listener_t *listener)
{
    int64_t peers = atomic_fetch_add(&self->peers, 1) + 1;
    bool ours = s_accepted_on(fd, listener);
    if (ours)
        tcp_thin_apply(fd);
    if (peers <= self->max_peers || !ours)
        return;
    shutdown(fd, SHUT_RDWR);
    atomic_fetch_add(&self->refused, 1);
    log_warn_limited(&self->warnings,
                     "refusing new connections: %lld peers are connected ([broker] max_peers "
                     "%lld, within the open-files limit)",
                     (long long)peers - 1, (long long)self->max_peers);
}

/* Handles the events waiting on one monitor. */
static void s_drain(peer_guard_t *self, void *monitor, const listener_t *listener)
{
    uint16_t event;
    uint32_t value;
    while (monitor_event_read(monitor, &event, &value)) {
        if (event == ZMQ_EVENT_ACCEPTED)
            s_accepted(self, (int)value, listener);
        else if (event == ZMQ_EVENT_DISCONNECTED && atomic_load(&self->peers) > 0)
            atomic_fetch_sub(&self->peers, 1);
        else if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL))
            atomic_fetch_add(&self->failed_handshakes, 1);
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            atomic_fetch_add(&self->aborted_handshakes, 1);
    }
}

/* A PAIR socket connected to `endpoint`, reading without a high-water mark, or NULL. */
static void *s_pair(void *context, const char *endpoint)
{
    void *pair = zmq_socket(context, ZMQ_PAIR);
    int linger = 0, unlimited = 0;
    if (pair == NULL)
        return NULL;
    zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof linger);
    /* Every event must be read: a dropped "disconnected" would leave a peer counted. */
    zmq_setsockopt(pair, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
    if (zmq_connect(pair, endpoint) != 0) {
        zmq_close(pair);
        return NULL;
    }
    return pair;
}

static void *s_main(void *arg)
{
    peer_guard_t *self = arg;
    zmq_pollitem_t items[GUARD_MAX_SOCKETS + 1] = {{0}};
    int n = self->n;
    for (int i = 0; i < n; i++)
        items[i] = (zmq_pollitem_t){self->monitors[i], 0, ZMQ_POLLIN, 0};
    items[n] = (zmq_pollitem_t){self->stopped, 0, ZMQ_POLLIN, 0};
    for (;;) {
        if (zmq_poll(items, n + 1, -1) < 0 && errno != EINTR)
            break;
        if (items[n].revents & ZMQ_POLLIN)
            break;
        for (int i = 0; i < n; i++) {
            if (items[i].revents & ZMQ_POLLIN)
                s_drain(self, items[i].socket, &self->listeners[i]);
        }
    }
    return NULL;
}

int peer_guard_new(void *context, void *const *sockets, int n, int64_t max_peers,
                   bool count_handshakes, peer_guard_t **out)
{
    *out = NULL;
    if (n > GUARD_MAX_SOCKETS)
        return failure_set(FAILURE_INVALID, "peer guard: at most %d sockets", GUARD_MAX_SOCKETS);
    peer_guard_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    self->context = context;
    self->n = n;
    self->max_peers = max_peers;
    self->warnings.every_ms = 10000;
    int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED;
    if (count_handshakes)
        events |= ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        self->sockets[i] = sockets[i];
        snprintf(self->listeners[i].monitor, sizeof self->listeners[i].monitor,
                 "inproc://cloister-peer-guard-%d", i);
        rc = s_listener(sockets[i], &self->listeners[i]);
        if (rc == 0 && zmq_socket_monitor(sockets[i], self->listeners[i].monitor, events) != 0)
            rc = failure_set(FAILURE_IO, "peer guard: cannot monitor: %s", zmq_strerror(errno));
        /* Read at once: an event with no reader would block ZeroMQ's I/O thread. */
        self->monitors[i] = rc == 0 ? s_pair(context, self->listeners[i].monitor) : NULL;
        if (rc == 0 && self->monitors[i] == NULL)
            rc = failure_set(FAILURE_IO, "peer guard: %s", zmq_strerror(errno));
    }
    int linger = 0;
    self->stop = rc == 0 ? zmq_socket(context, ZMQ_PAIR) : NULL;
    if (self->stop != NULL)
        zmq_setsockopt(self->stop, ZMQ_LINGER, &linger, sizeof linger);
    if (rc == 0 && (self->stop == NULL || zmq_bind(self->stop, GUARD_STOP_ENDPOINT) != 0))
        rc = failure_set(FAILURE_IO, "peer guard: %s", zmq_strerror(errno));
    self->stopped = rc == 0 ? s_pair(context, GUARD_STOP_ENDPOINT) : NULL;
    if (rc == 0 && self->stopped == NULL)
        rc = failure_set(FAILURE_IO, "peer guard: %s", zmq_strerror(errno));
    if (rc == 0 && pthread_create(&self->thread, NULL, s_main, self) != 0)
        rc = failure_set(FAILURE_IO, "peer guard: cannot start its thread");
    self->running = rc == 0;
    if (rc != 0) {
        peer_guard_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void peer_guard_destroy(peer_guard_t **self_p)
{
    peer_guard_t *self = *self_p;
    if (self == NULL)
        return;
    /* The monitors first, while the thread still reads them: ZeroMQ's I/O thread sends
     * their events blocking, so one with nobody left to read it would never return. */
    for (int i = 0; i < self->n; i++) {
        if (self->sockets[i] != NULL)
            zmq_socket_monitor(self->sockets[i], NULL, 0);
    }
    if (self->running) {
        zmq_send(self->stop, "", 0, 0);
        pthread_join(self->thread, NULL);
    }
    for (int i = 0; i < self->n; i++) {
        if (self->monitors[i] != NULL)
            zmq_close(self->monitors[i]);
    }
    if (self->stopped != NULL)
        zmq_close(self->stopped);
    if (self->stop != NULL)
        zmq_close(self->stop);
    free(self);
    *self_p = NULL;
}

int64_t peer_guard_take_refused(peer_guard_t *self)
{
    return atomic_exchange(&self->refused, 0);
}

int64_t peer_guard_take_aborted_handshakes(peer_guard_t *self)
{
    return atomic_exchange(&self->aborted_handshakes, 0);
}

int64_t peer_guard_take_failed_handshakes(peer_guard_t *self)
{
    return atomic_exchange(&self->failed_handshakes, 0);
}
