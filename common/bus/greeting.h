/* greeting: which security mechanism a ZeroMQ endpoint speaks, read from the greeting it
 * sends. A ZMTP 3 peer answers the first 11 bytes of a greeting (signature and major
 * version) with its own whole 64-byte greeting, which names its mechanism ("NULL",
 * "CURVE", "PLAIN") at byte 12; nothing more is sent, so the peer just sees a connection
 * that went away before its handshake.
 *
 * Why: when a request gets no answer, the client's handshake monitor cannot always say
 * that CURVE is on one side only, because the side that sees the mismatch first hangs up
 * and the other may only see the connection reset. Asking the greeting settles it. */
#ifndef CLOISTER_GREETING_H
#define CLOISTER_GREETING_H

#include <stddef.h>

/* Connects to `endpoint` (tcp://HOST:PORT or ipc://PATH) with a plain socket and reads its
 * greeting, waiting at most `timeout_ms` in all. Returns 0 with the mechanism's name in
 * `mechanism` (NUL-terminated, cut to `size`), or -1 when it cannot tell: another
 * transport, nothing listening, no ZMTP 3 greeting in time. Sets no failure: the caller
 * only uses the answer to explain one of its own. */
int greeting_mechanism(const char *endpoint, int timeout_ms, char *mechanism, size_t size);

#endif
