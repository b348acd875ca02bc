/* replica: which copy of a scaled specialist this process is.
 *
 * `docker compose up --scale test-agent=3` runs three test-agents on one state volume.
 * Each must keep an agent session of its own (sharing one would serialise their runs on
 * the session's lock and mix their conversations), and a container recreated must find its
 * session again. So a process claims a slot: the lowest k (0, 1, 2, ...) whose file
 * specialists/<name>.replica-<k> it can hold an exclusive flock on, for its whole life.
 * The kernel drops the lock when the process dies, so a restarted copy takes a free slot
 * back -- the same one when the others are still running.
 *
 * Slot 0 keeps the names a single instance always had (specialists/<name>.session, the
 * .../work directory); slot k > 0 has its own: the session key "<name>~<k>"
 * (specialists/<name>~<k>.session) and the work directory ".../work-<k>". The history
 * (specialists/<name>/history.jsonl) stays one per specialist, each line saying its
 * replica. */
#ifndef CLOISTER_REPLICA_H
#define CLOISTER_REPLICA_H

#include <stdbool.h>
#include <stddef.h>

/* How many copies of one specialist may run on one state directory. */
#define REPLICA_MAX 64

/* Claims this process's slot for `specialist` (once per process and name: a second call
 * returns the same slot). The lock is held until the process exits. Returns the slot
 * (>= 0), or FAILURE_STATE when all REPLICA_MAX are taken, FAILURE_IO. */
int replica_claim(const char *specialist);

/* Whether a live process holds slot `index` of `specialist`. */
bool replica_live(const char *specialist, int index);

/* The session key of slot `index`: "<specialist>", or "<specialist>~<index>". */
void replica_session_key(char *buf, size_t size, const char *specialist, int index);

#endif
