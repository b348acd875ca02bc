/* webhook: one signed POST of an ended task to the operator's URL ([hooks] webhook).
 *
 * The body is the task's event as JSON (with `verdict`). Headers:
 *   Content-Type: application/json
 *   User-Agent: cloister-hooks/<version>
 *   X-Cloister-Event: task.done | task.failed | task.dead | task.cancelled
 *   X-Cloister-Delivery: the event's seq (the same on every retry: a receiver drops repeats)
 *   X-Cloister-Signature-256: sha256=<hex HMAC-SHA256 of the body with [hooks]
 *                             webhook_secret> (GitHub's scheme: a receiver recomputes it over
 *                             the raw body and compares in constant time)
 * Only http and https are spoken, redirects are not followed, and the call is bounded by a
 * timeout. A delivery counts when the server answers 2xx. */
#ifndef CLOISTER_WEBHOOK_H
#define CLOISTER_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sets up the HTTP and crypto libraries once per process. Returns 0 or FAILURE_IO. */
int webhook_init(void);

/* Writes "sha256=<64 hex digits>" (the HMAC-SHA256 of `body`, `len` bytes, with `secret`)
 * into `out` (at least 72 bytes). */
void webhook_sign(const char *secret, const char *body, size_t len, char *out, size_t size);

/* POSTs `body` (`len` bytes, JSON) to `url`, signed with `secret`, for event `event` of
 * delivery `delivery`, within `timeout_ms`. Returns true on a 2xx answer. `outcome` gets
 * one line: "HTTP 200", "HTTP 500", or the transport error ("connection refused", ...). */
bool webhook_post(const char *url, const char *secret, const char *event, int64_t delivery,
                  const char *body, size_t len, long timeout_ms, char *outcome, size_t size);

#endif
