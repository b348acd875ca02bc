/* dblock: who may use the broker's database file.
 *
 * A broker holds a shared lock on "<db>.lock" for as long as its store is open; `pan
 * restore` takes the same lock exclusively while it replaces the file. So a restore never
 * swaps the database under a running broker, and no broker opens a database being swapped.
 * These are flock(2) locks on a file of their own (never on the database, whose POSIX locks
 * belong to SQLite): the kernel releases them when their process ends, however it ends. */
#ifndef CLOISTER_DBLOCK_H
#define CLOISTER_DBLOCK_H

#include <stdbool.h>

/* Takes the lock of the database at `db_path` without waiting: shared (a broker) or
 * exclusive (a restore). Returns the lock's file descriptor (>= 0; release it with
 * dblock_release), FAILURE_STATE when the other kind holds it, or FAILURE_IO. */
int dblock_acquire(const char *db_path, bool exclusive);

/* Releases a lock taken by dblock_acquire (a negative fd is ignored). */
void dblock_release(int fd);

#endif
