/* client: what a program needs to talk to the broker (see proto/PROTOCOL.md).
 *
 * - client_t: the control socket (REQ). Every request has a deadline: a broker that does
 *   not answer gives FAILURE_TIMEOUT with "no reply from broker at <endpoint> within 3s",
 *   never a hang (a poll deadline, linger 0; after a timeout the REQ socket is replaced so
 *   the next request works and never takes the late answer to the old one).
 * - client_submit(): a task committed through control (the reply comes after the commit),
 *   and submit_encode() to push the same submit fire-and-forget to `in`.
 * - client_events_t: an events subscriber that replays what is stored, then follows the
 *   PUB stream. It subscribes BEFORE replaying and drops every event whose seq it has
 *   already delivered, so nothing is missed or doubled. A subscription reaches the broker
 *   asynchronously, so until the first live event arrives the subscriber replays again
 *   from the last delivered seq (at 50 ms, 250 ms, 1 s and 3 s, and when that first event
 *   arrives): an event published in between is still delivered, in order.
 *
 * Not thread-safe: use one client_t / client_events_t per thread. */
#ifndef CLOISTER_CLIENT_H
#define CLOISTER_CLIENT_H

#include "submit.h"
#include "wire.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default control deadline, in milliseconds. */
#define CLIENT_TIMEOUT_MS 3000
/* Events asked for per replay request. */
#define CLIENT_REPLAY_PAGE 200
/* Room for a task id made by client_new_id() (a lowercase uuid and its NUL). */
#define CLIENT_ID_SIZE 37

typedef struct client_t client_t;

/* Connects a control socket to `control_ep` (copied). `timeout_ms` (> 0) is the deadline
 * of each request. Returns a new client the caller owns, or NULL with the reason in
 * failure_message(). Connecting never waits for the broker. */
client_t *client_new(const char *control_ep, int timeout_ms);

/* Closes the socket (linger 0) and frees; nulls *self_p. Accepts NULL. */
void client_destroy(client_t **self_p);

/* The endpoint the client talks to (owned by the client). */
const char *client_endpoint(const client_t *self);

/* Sends one encoded request (`data`/`len`, borrowed: e.g. from wire_writer_data()) and waits
 * for the broker's reply until the deadline. On 0, *reply is the decoded `reply` message
 * (the caller owns it; wire_msg_destroy), whether it says ok or not. Errors, with *reply
 * NULL: FAILURE_TIMEOUT (no reply in time), FAILURE_IO (socket error), FAILURE_INVALID or
 * FAILURE_TOO_BIG (the answer is not a valid `reply`). */
int client_request(client_t *self, const void *data, size_t len, wire_msg_t **reply);

/* client_request() that also looks at `ok`: returns 0 with *reply set when ok is true.
 * When ok is false, *reply is NULL and the result is the error code the broker named
 * (`invalid` FAILURE_INVALID, `not_found` FAILURE_NOT_FOUND, `too_big` FAILURE_TOO_BIG,
 * `disk_full` FAILURE_DISK_FULL, `overloaded` FAILURE_OVERLOADED, anything else
 * FAILURE_STATE) with the broker's one-line `error` in failure_message().
 * Transport errors as client_request(). */
int client_call(client_t *self, wire_writer_t *request, wire_msg_t **reply);

/* Writes a fresh lowercase uuid into `buf` (at least CLIENT_ID_SIZE bytes). */
void client_new_id(char *buf, size_t size);

/* Submits `task` through control and waits until it is committed (task->id NULL: a new
 * uuid; the broker checks it, with submit_check() among others). The id used (task->id,
 * or a new uuid) is copied to `id_out` when it is not NULL (`id_size` >= CLIENT_ID_SIZE
 * for a generated one). On 0, *reply is the broker's reply (caller owns) whose `data` is
 * the task -- the existing one when the id was already known. Errors as client_call(). */
int client_submit(client_t *self, const submit_t *task, char *id_out, size_t id_size,
                  wire_msg_t **reply);

/* ---- events ---- */

/* Called once per event, in seq order, never twice for one seq. `event` is the decoded
 * event (type "event"); `raw`/`len` its msgpack map. Both are only valid during the call.
 * Return 0 to go on, anything else to stop client_events_run(). */
typedef int (*client_event_fn)(const wire_msg_t *event, const void *raw, size_t len, void *arg);

typedef struct client_events_t client_events_t;

/* A subscriber for events whose topic starts with `topic` (NULL or "" for everything;
 * copied). With an `events_ep` it connects a SUB socket and subscribes at once, so events
 * published from now on are kept for client_events_run(); with NULL it can only replay.
 * Returns a new subscriber the caller owns, or NULL with failure_message(). */
client_events_t *client_events_new(const char *events_ep, const char *topic);

/* Closes and frees; nulls *self_p. Accepts NULL. */
void client_events_destroy(client_events_t **self_p);

/* Delivers events to `fn`:
 * - since >= 0: first every stored event with seq > since, through `replay` requests on
 *   `control` (pages of CLIENT_REPLAY_PAGE; a page the broker marks `truncated` is never
 *   taken for the last one);
 * - follow: then the live stream (needs an events endpoint). Following every event (no
 *   topic), a gap in the sequence numbers -- events the publisher dropped while this
 *   subscriber was cut off or too slow -- is filled by a replay before the next event.
 *   Events dropped with none after them show no gap: after 2 s without an event (once
 *   there is a seq to replay from), a replay asks for what came since, topic or not.
 *   While following, a replay the broker does not answer (a partition, a restart) is asked
 *   again until it is answered or *stop is set.
 * Delivery ends when `fn` returns nonzero or `*stop` (may be NULL) becomes nonzero -- e.g.
 * set by a SIGINT handler; *stop is checked before every event and every request, in the
 * replay as while following. With since < 0 there is no replay: delivery starts with the
 * first live event.
 * Returns 0 when the replay is over (no follow), when fn or *stop ended it; otherwise a
 * FAILURE_* code from the control requests (see client_call) or FAILURE_IO. */
int client_events_run(client_events_t *self, client_t *control, int64_t since, bool follow,
                      volatile sig_atomic_t *stop, client_event_fn fn, void *arg);

/* The seq of the last event delivered (the `since` given to client_events_run() before
 * the first one). */
int64_t client_events_last_seq(const client_events_t *self);

#endif
