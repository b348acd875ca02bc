#include "tcp_thin.h"

#include "failure.h"
#include "monitor_event.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

struct tcp_thin_t {
    void *socket;  /* watched (borrowed) */
    void *monitor; /* PAIR connected to the monitor's endpoint (owned) */
};

bool tcp_thin_apply(int fd)
{
    int type = 0, domain = 0, on = 1;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
        return false;
    len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 ||
        (domain != AF_INET && domain != AF_INET6))
        return false;
    return setsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &on, sizeof on) == 0;
}

int tcp_thin_new(void *context, void *socket, const char *name, tcp_thin_t **out)
{
    *out = NULL;
    tcp_thin_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "inproc://cloister-tcp-thin-%s", name);
    if (zmq_socket_monitor(socket, endpoint, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_ACCEPTED) != 0) {
        free(self);
        return failure_set(FAILURE_IO, "cannot monitor the connections of %s: %s", name,
                           zmq_strerror(errno));
    }
    self->socket = socket;
    self->monitor = zmq_socket(context, ZMQ_PAIR);
    int linger = 0;
    if (self->monitor != NULL)
        zmq_setsockopt(self->monitor, ZMQ_LINGER, &linger, sizeof linger);
    if (self->monitor == NULL || zmq_connect(self->monitor, endpoint) != 0) {
        int rc = failure_set(FAILURE_IO, "cannot read the monitor of %s: %s", name,
                             zmq_strerror(errno));
        tcp_thin_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void tcp_thin_destroy(tcp_thin_t **self_p)
{
    tcp_thin_t *self = *self_p;
    if (self == NULL)
        return;
    zmq_socket_monitor(self->socket, NULL, 0);
    if (self->monitor != NULL)
        zmq_close(self->monitor);
    free(self);
    *self_p = NULL;
}

void *tcp_thin_socket(tcp_thin_t *self)
{
    return self->monitor;
}

int tcp_thin_drain(tcp_thin_t *self)
{
    uint16_t event;
    uint32_t value;
    int connections = 0;
    while (monitor_event_read(self->monitor, &event, &value)) {
        if (event == ZMQ_EVENT_CONNECTED || event == ZMQ_EVENT_ACCEPTED) {
            tcp_thin_apply((int)value);
            connections++;
        }
    }
    return connections;
}
