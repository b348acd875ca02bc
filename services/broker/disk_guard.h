/* disk_guard: keeps the broker up when the disk under its store fills.
 *
 * A commit that fails leaves the broker's memory ahead of its store, which it must then
 * reload from the store (broker.c, s_refuse_iteration), forgetting the iteration. The guard
 * keeps that rare: it looks at the free space of the store's directory (at most every
 * DISK_GUARD_CHECK_MS) and, below `min_free` bytes, says the disk is low. The broker then
 * refuses new submits (code disk_full, nothing acknowledged that was not committed) and
 * keeps everything else going: reads, status, dispatch, and the results of running tasks,
 * which the guard makes room for by deleting its reserve file (`<db>.reserve`, `reserve`
 * bytes written at start). When the free space is back above min_free + reserve, the
 * reserve is written again and submits are accepted: the broker resumes by itself.
 *
 * A disk filled faster than the guard looks (or to its last byte) makes a commit fail: the
 * store then asks the guard for room (disk_guard_give_up), which gives up the reserve and
 * goes low as above, wanting back, besides min_free and the reserve, a margin at least as
 * big as the reserve before it rewrites it; the store writes the commit again, once. */
#ifndef CLOISTER_DISK_GUARD_H
#define CLOISTER_DISK_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#define DISK_GUARD_CHECK_MS 250

typedef struct disk_guard_t disk_guard_t;

/* A guard for the store at db_path. Writes the reserve (a failure to is logged: the guard
 * still watches). Returns NULL only when memory runs out. */
disk_guard_t *disk_guard_new(const char *db_path, int64_t min_free, int64_t reserve);
void disk_guard_destroy(disk_guard_t **self_p);

/* Looks at the free space again if DISK_GUARD_CHECK_MS passed since the last look (now is
 * monotonic ms); logs each change between low and fine. Returns true while the disk is low. */
bool disk_guard_check(disk_guard_t *self, int64_t now);

/* A commit found no room: goes low now (whatever the free space) and deletes the reserve.
 * Returns true when there was a reserve to give up (room was made), false when it was
 * given up already. `now` is monotonic ms. */
bool disk_guard_give_up(disk_guard_t *self, int64_t now);

/* True while the disk is low (as of the last check). */
bool disk_guard_low(const disk_guard_t *self);

/* The free bytes seen at the last check. */
int64_t disk_guard_free(const disk_guard_t *self);

/* One line for a refusal: "disk full: 12 MB free for the store in /var/lib/cloister (at
 * least 64 MB wanted): not accepting new tasks until there is room". Owned by the guard. */
const char *disk_guard_reason(const disk_guard_t *self);

#endif
