/* peer_guard: keeps the connections to the broker's bound endpoints under a cap, so that
 * it never runs out of file descriptors.
 *
 * libzmq accepts every connection to a bound endpoint as it comes, each costing a file
 * descriptor, and on ipc:// it aborts the process when accept() finds none left (an
 * assertion on EMFILE in ipc_listener.cpp). The guard watches the connections of `in`,
 * `events` and `control` through a ZeroMQ socket monitor on each (accepted, disconnected),
 * from a thread of its own so that it keeps up however long one iteration of the loop
 * takes, and shuts down (shutdown(2)) every connection accepted while `max_peers` are
 * already connected: ZeroMQ then closes it as a connection whose peer went away (the
 * peer's ZeroMQ reconnects later, and gets in once there is room). A descriptor is shut
 * down only if it still is a connection accepted on that endpoint (same ipc path or tcp
 * port), never one the kernel gave to something else since.
 *
 * With CURVE the same monitors count the handshakes the authenticator refused (ZeroMQ
 * allows one monitor per socket), and each connection over TCP gets linear retransmission
 * timeouts (tcp_thin.h). */
#ifndef CLOISTER_PEER_GUARD_H
#define CLOISTER_PEER_GUARD_H

#include <stdbool.h>
#include <stdint.h>

typedef struct peer_guard_t peer_guard_t;

/* Watches the `n` (at most 3) bound raw ZeroMQ sockets `sockets` of `context` (borrowed;
 * they must outlive the guard) and keeps their connections, together, at `max_peers` at
 * most. `count_handshakes`: count failed handshakes (with CURVE: refused keys). Returns 0
 * or FAILURE_IO; the caller owns *out. */
int peer_guard_new(void *context, void *const *sockets, int n, int64_t max_peers,
                   bool count_handshakes, peer_guard_t **out);

/* Stops the thread and the monitors (before the sockets are closed); nulls *self_p. */
void peer_guard_destroy(peer_guard_t **self_p);

/* Connections refused for the cap, and handshakes that failed, since the last call (each
 * call takes them: the broker adds them to its counts). */
int64_t peer_guard_take_refused(peer_guard_t *self);
int64_t peer_guard_take_failed_handshakes(peer_guard_t *self);
/* Handshakes that ended without a refusal (the peer hung up, or the connection broke, half
 * way: a client that exits at once), counted apart from refused ones. */
int64_t peer_guard_take_aborted_handshakes(peer_guard_t *self);

#endif
