/* fakeworker: a worker played by the test itself, speaking the protocol directly, so
 * broker tests control exactly when a worker says hello, heartbeats, answers or vanishes.
 * It binds a PULL socket on ipc in the test's directory and PUSHes to the broker's `in`. */
#ifndef CLOISTER_FAKEWORKER_H
#define CLOISTER_FAKEWORKER_H

#include "wire.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct fakeworker_t fakeworker_t;

/* A worker `id` of `specialist`, its PULL bound at ipc://<dir>/<id>.sock, connected to
 * `in_ep`. Sends nothing yet. The caller owns it. */
fakeworker_t *fakeworker_new(const char *dir, const char *in_ep, const char *specialist,
                             const char *id);
/* The same with its sockets in `context`, which the caller keeps (and terminates after the
 * last worker is destroyed): many workers of a benchmark share one context's I/O thread
 * instead of running one each. */
fakeworker_t *fakeworker_new_in(void *context, const char *dir, const char *in_ep,
                                const char *specialist, const char *id);
void fakeworker_destroy(fakeworker_t **self_p);

/* hello, optionally holding `task`/`attempt` (task NULL: idle). */
void fakeworker_hello(fakeworker_t *self, const char *task, int attempt);
/* heartbeat, holding `task` or idle (NULL). */
void fakeworker_heartbeat(fakeworker_t *self, const char *task, int attempt);
/* An idle heartbeat that echoes `ping_seq`: the last ping the worker says it received. */
void fakeworker_heartbeat_echo(fakeworker_t *self, int64_t ping_seq);
/* An idle hello, and an idle heartbeat echoing `ping_seq`, that list `task`/`attempt` as a
 * result sent and not yet acknowledged (`unacked`). */
void fakeworker_hello_unacked(fakeworker_t *self, const char *task, int attempt);
void fakeworker_heartbeat_unacked(fakeworker_t *self, int64_t ping_seq, const char *task,
                                  int attempt);
void fakeworker_progress(fakeworker_t *self, const char *task, int attempt, const char *text);
/* result with `outcome`; `next_raw` is an encoded msgpack array of submit maps, or NULL. */
void fakeworker_result(fakeworker_t *self, const char *task, int attempt, const char *outcome,
                       const char *error, const void *next_raw, size_t next_len);
/* result with `outcome` and the result map `result_raw` (an encoded msgpack map, as a
 * specialist reports REVIEW_RESULT, FINDINGS, ...). */
void fakeworker_result_map(fakeworker_t *self, const char *task, int attempt, const char *outcome,
                           const char *error, const void *result_raw, size_t result_len);
void fakeworker_release(fakeworker_t *self, const char *task, int attempt);
void fakeworker_bye(fakeworker_t *self);

/* Waits up to timeout_ms for a message of `type` ("task", "ack", "cancel"; pings are
 * skipped unless asked for). Returns it (caller owns) or NULL. Keeps heartbeating with
 * `holding` (NULL = idle) every 50 ms while it waits, so the broker does not lose it. */
wire_msg_t *fakeworker_expect(fakeworker_t *self, msg_type_t type, int timeout_ms,
                              const char *holding, int holding_attempt);

/* For a caller that serves many workers from one poll (a benchmark): the worker's PULL
 * socket (the worker keeps it), and the next message of `type` already waiting on it,
 * without waiting or heartbeating -- messages of other types before it are dropped.
 * fakeworker_take() returns the message (caller owns) or NULL when none is waiting. */
void *fakeworker_socket(fakeworker_t *self);
wire_msg_t *fakeworker_take(fakeworker_t *self, msg_type_t type);

#endif
