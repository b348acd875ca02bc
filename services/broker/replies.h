/* replies: what the broker sends on `control`, peer by peer, within bounds.
 *
 * Every control request gets one reply, sent to the peer that asked (the ROUTER's routing
 * id, the first frame of the request's envelope). A peer that does not read its replies
 * must not make the broker hold them without end:
 * - ZeroMQ queues at most REPLIES_HWM replies for a peer (ZMQ_SNDHWM, with
 *   ZMQ_ROUTER_MANDATORY: a full pipe answers EAGAIN instead of dropping the reply, and a
 *   peer that went away EHOSTUNREACH); what does not fit waits here, in the peer's queue,
 *   until its pipe has room (the loop tries again every REPLIES_RETRY_MS);
 * - a deferred reply (a replay page) waits as its request, a few hundred bytes, and is
 *   built only when its peer's pipe has room for it (replies_build_fn);
 * - a peer holding more than `per_peer` bytes -- replies waiting here, or built this
 *   iteration and not sent yet -- is refused: its next requests get ok:false "too many
 *   unread replies" (after REPLIES_MAX_REFUSALS of those, no answer at all, until it
 *   reads); so is every peer whose request comes while all peers together hold more than
 *   `total`.
 * What sits in ZeroMQ's pipe (REPLIES_HWM replies a peer at most) is not counted. */
#ifndef CLOISTER_REPLIES_H
#define CLOISTER_REPLIES_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Replies ZeroMQ queues for one peer (the ROUTER's ZMQ_SNDHWM). */
#define REPLIES_HWM 2
/* How often the replies waiting for a full pipe are tried again, in ms. */
#define REPLIES_RETRY_MS 20
/* Refusals a peer over a cap is sent; its later requests get no answer until it reads. */
#define REPLIES_MAX_REFUSALS 1000

typedef struct replies_t replies_t;

/* Builds the reply to a deferred request (`request`, `len` bytes) and returns it (valid
 * until the next call; never NULL: a failure is an error reply), its size in *reply_len. */
typedef const void *(*replies_build_fn)(void *arg, const void *request, size_t len,
                                        size_t *reply_len);

/* Replies sent on `router` (a raw ROUTER socket, borrowed, given ZMQ_SNDHWM = REPLIES_HWM
 * and ZMQ_ROUTER_MANDATORY before it was bound), at most `per_peer` bytes held for one peer and `total` for
 * all; deferred replies built by `build` (with `arg`). NULL when memory runs out. */
replies_t *replies_new(void *router, int64_t per_peer, int64_t total, replies_build_fn build,
                       void *arg);
void replies_destroy(replies_t **self_p);

typedef enum {
    REPLIES_ANSWER, /* under the caps: handle the request */
    REPLIES_REFUSE, /* over: answer "too many unread replies" */
    REPLIES_DROP    /* far over: answer nothing */
} replies_verdict_t;

/* What to do with a request from the peer of `envelope` (borrowed). */
replies_verdict_t replies_admit(replies_t *self, zmsg_t *envelope);

/* A reply of `len` bytes was built for the peer of `envelope` and waits for the commit:
 * counted as held until replies_send or replies_release. */
void replies_hold(replies_t *self, zmsg_t *envelope, size_t len);
/* Forgets a hold of `len` bytes without sending (the reply was dropped). */
void replies_release(replies_t *self, zmsg_t *envelope, size_t len);

/* Sends a reply (envelope and data borrowed; copied if it must wait), after the peer's
 * earlier replies. `held`: the bytes replies_hold counted for it, now released. */
void replies_send(replies_t *self, zmsg_t *envelope, const void *data, size_t len, size_t held);

/* Answers `request` (borrowed; copied) when the peer's pipe has room, with what `build`
 * makes of it then; after the peer's earlier replies. `held` as for replies_send. */
void replies_defer(replies_t *self, zmsg_t *envelope, const void *request, size_t len,
                   size_t held);

/* Sends what waits and can go now. Returns when to try again (monotonic ms), INT64_MAX
 * when nothing waits. */
int64_t replies_pump(replies_t *self, int64_t now);

/* Bytes held for all peers, and how many peers have replies waiting. */
int64_t replies_held(const replies_t *self);
size_t replies_waiting_peers(const replies_t *self);

#endif
