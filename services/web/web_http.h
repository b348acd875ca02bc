/* web_http: cloister-web's HTTP server (libmicrohttpd, a thread per connection).
 *
 * Routes:
 *   GET  /, /index.html, /app.css, /app.js    the page (no token: it holds no data)
 *   POST /api/session                         the token (header) exchanged for the cookie
 *   GET  /api/status                          stats and specialists
 *   GET  /api/tasks?state=&specialist=&issue=&q=&before=&limit=   history, newest first
 *   GET  /api/tasks/ID, /api/tasks/ID/events  one task with its result; its stored events
 *   GET  /api/issues/ID                       an issue's chain and its stored events
 *   GET  /api/queues/NAME?offset=&limit=      a queue in dispatch order
 *   GET  /api/reviews                         reviews awaiting approval
 *   GET  /api/figures                         the sampled figures
 *   GET  /api/events?since=SEQ                Server-Sent Events (Last-Event-ID wins)
 *   POST /api/tasks/ID/cancel, /retry, /priority {"priority"}
 *   POST /api/approve                         {"issue", "force", "reason"}
 *   POST /api/specialists/NAME/wake           {"task", "workspace", "branch", ...}
 *
 * Every request must name the dashboard in its Host header (else 421): localhost, a
 * loopback address, the address it listens on (any IPv4 address when that is 0.0.0.0), or
 * a name in [web] hosts, with any port. A page another site serves whose name was made to
 * resolve to this machine (DNS rebinding) sends that site's name, and is refused before it
 * reads anything, even the page.
 *
 * Every /api request shows the dashboard's token: in the X-Cloister-Token header (scripts,
 * and the page once), or as the session cookie POST /api/session set (the page: HttpOnly,
 * SameSite=Strict, Path=/api, named cloister_<port>), compared in constant time; 401
 * without it. A POST must also come from the page's own origin: an Origin header equal to
 * http://<Host> (403 otherwise), and one is required when the cookie authenticates it,
 * since a browser sends a cookie by itself. A POST carries a JSON body when it takes one
 * (400 for bad JSON, 413 over WEB_HTTP_MAX_BODY). Unknown paths are 404, a known path with
 * the wrong method 405. Every response forbids framing and sniffing, and the page runs
 * under a Content-Security-Policy that allows only its own script: no inline script, so
 * an injected tag cannot run. */
#ifndef CLOISTER_WEB_HTTP_H
#define CLOISTER_WEB_HTTP_H

#include "web.h"

#include <stdint.h>

#define WEB_HTTP_MAX_BODY (64 * 1024)

typedef struct web_http_t web_http_t;

/* Listens on `bind_address`:`port` (port 0: any free port). Returns the server, or NULL
 * with failure_message(). */
web_http_t *web_http_start(web_t *web, const char *bind_address, uint16_t port);

/* The port it listens on. */
uint16_t web_http_port(const web_http_t *self);

/* Stops listening, ends the connections and frees; nulls *self_p. */
void web_http_stop(web_http_t **self_p);

#endif
