/* listener: whether anything listens on a broker endpoint, told at once -- for a client
 * that should say "Cloister is not running" rather than wait out a request's deadline
 * (ZeroMQ connects lazily and retries, so a REQ to nothing only ever times out).
 *
 * tcp://HOST:PORT is asked with a plain TCP connection (non-blocking, answered within
 * LISTENER_PROBE_MS: a refused connection means nothing listens; one that is accepted or
 * still pending means something may); ipc://PATH with a Unix socket connection (a missing
 * file or a refused connection means nothing listens). Any other transport, or an address
 * that cannot be read, counts as listened on: only a certain "no" is reported. */
#ifndef CLOISTER_LISTENER_H
#define CLOISTER_LISTENER_H

#include <stdbool.h>

/* The longest a probe waits for a TCP answer, in ms. */
#define LISTENER_PROBE_MS 500

/* True when nothing listens on `endpoint` (see above). */
bool listener_absent(const char *endpoint);

#endif
