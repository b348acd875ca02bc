/* tcp_thin: linear retransmission timeouts on the TCP connections a ZeroMQ socket makes.
 *
 * A worker's heartbeats and results are a thin stream: a few small messages in flight. When
 * one is lost, Linux doubles the retransmission timeout at each try (0.6 s, 1.2 s, 2.4 s...
 * on a link with 200 ms of delay), so on a lossy link a connection can stall for tens of
 * seconds and the broker takes a live worker for lost. With TCP_THIN_LINEAR_TIMEOUTS
 * (tcp(7)) a thin stream retries at a fixed interval for its first six tries instead.
 * Measured on a 30 %-loss, 200 ms-delay link both ways, two minutes of a message every
 * 200 ms: the longest silence went from 21.5 s to 10.4 s.
 *
 * ZeroMQ makes (and remakes) its connections itself and has no option for this, so a
 * socket monitor reports each new connection's descriptor and the option is set on it. By
 * the time the event is read the descriptor may have been closed and reused: it is only
 * touched when it is a TCP socket, and the option is harmless on any other of ours. */
#ifndef CLOISTER_TCP_THIN_H
#define CLOISTER_TCP_THIN_H

#include <stdbool.h>

typedef struct tcp_thin_t tcp_thin_t;

/* Watches the raw ZeroMQ socket `socket` of `context` (borrowed: it must outlive the
 * watch; destroy the watch before closing it). `name` makes the monitor's inproc endpoint
 * unique in the context. Returns 0 or FAILURE_IO; the caller owns *out. */
int tcp_thin_new(void *context, void *socket, const char *name, tcp_thin_t **out);

/* Stops the monitor (before the socket is closed); nulls *self_p. */
void tcp_thin_destroy(tcp_thin_t **self_p);

/* The monitor's socket, to poll for ZMQ_POLLIN with the caller's other sockets: ZeroMQ's
 * I/O thread waits when a monitor's queue is full, so it must be read. */
void *tcp_thin_socket(tcp_thin_t *self);

/* Reads the events waiting and sets the option on each new connection; returns how many
 * connections were made (or accepted) since the last call. */
int tcp_thin_drain(tcp_thin_t *self);

/* Sets the option on `fd` if it is a TCP socket; true when it did. */
bool tcp_thin_apply(int fd);

#endif
