/* fd_reserve: accepting a connection never fails for want of a file descriptor.
 *
 * libzmq accepts connections on its I/O thread and, on ipc://, aborts the process when
 * accept() answers EMFILE (an assertion in its ipc_listener.cpp; on tcp:// it spins on the
 * waiting connection instead). The broker keeps its connections under a cap (peer_guard.h)
 * well before the open-files limit, but a burst of connections can outrun the guard's
 * thread. So this module defines accept() and accept4() -- libzmq's calls resolve to the
 * executable's definitions before the C library's -- and passes every call to the kernel,
 * except that when the process has no descriptor left it frees the one it keeps in reserve,
 * accepts the waiting connection, closes it at once, takes the reserve again and answers
 * ECONNABORTED, which libzmq takes as a connection that went away before it was accepted
 * (the reserve-descriptor answer to EMFILE, as in libev or nginx). The peer sees its
 * connection closed and its ZeroMQ retries later. */
#ifndef CLOISTER_FD_RESERVE_H
#define CLOISTER_FD_RESERVE_H

#include <stdint.h>

/* Opens the reserve descriptor (call once, at start, before any connection). Returns 0 or
 * FAILURE_IO. */
int fd_reserve_init(void);

/* Connections closed for want of a descriptor since the last call. */
int64_t fd_reserve_take_dropped(void);

#endif
