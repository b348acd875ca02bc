/* fence: before a side effect that must happen at most once (a merge's push), a job asks
 * the broker whether its attempt still holds the task.
 *
 * A worker that was stopped (SIGSTOP, a frozen VM) or cut off for longer than its lease
 * loses the task: the broker requeues it and another worker may be running it. The stopped
 * job, once it runs again, learns it is stale at its next heartbeat (the broker answers with
 * `cancel`) — but a job already past its last cancel check would push before that answer
 * lands. The fence closes that gap: it asks on the control socket (show_task) and accepts
 * only "running, this attempt, on this worker". The broker cannot be asked (restarting,
 * unreachable)? It keeps asking, up to `wait_ms` or until the job is cancelled, and then
 * refuses: a side effect nobody confirmed is not made. */
#ifndef CLOISTER_FENCE_H
#define CLOISTER_FENCE_H

#include "specialist.h"

/* How long fence_check() keeps asking a broker that does not answer, by default. */
#define FENCE_DEFAULT_WAIT_MS 15000

/* Returns 0 when the job's attempt holds its task; FAILURE_STATE when it is stale (the
 * message says what the broker has: "task T is queued at the broker; this is attempt 1 on
 * W") or the job was cancelled meanwhile; FAILURE_IO when the broker did not answer within
 * `wait_ms` (worth another attempt: the task may still be this worker's). */
int fence_check(specialist_ctx_t *ctx, const char *control_endpoint, int wait_ms);

#endif
