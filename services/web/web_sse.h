/* web_sse: GET /api/events -- the broker's events as Server-Sent Events.
 *
 * Each event is one SSE message: `id:` its seq, `data:` the event as JSON. A browser that
 * reconnects sends Last-Event-ID and gets what it missed first (a replay from the broker's
 * store, then the live stream: client_events_run), so a dashboard never skips an event. A
 * comment line every WEB_SSE_KEEPALIVE_MS keeps proxies from closing a quiet stream (and
 * bounds how long a stopping server waits for a quiet stream's connection thread).
 *
 * One thread per stream follows the events and writes them into a pipe the HTTP
 * connection reads from; when the browser goes away the pipe's reader end is closed, the
 * thread's next write fails and it stops. */
#ifndef CLOISTER_WEB_SSE_H
#define CLOISTER_WEB_SSE_H

#include "web.h"

#include <microhttpd.h>
#include <stdint.h>

#define WEB_SSE_KEEPALIVE_MS 5000

/* A response streaming the events after seq `since` (< 0: from now on). NULL when the
 * stream cannot be started (no memory, no thread). */
struct MHD_Response *web_sse_response(const web_t *web, int64_t since);

#endif
