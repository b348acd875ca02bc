/* dblock: who may use the broker's database file.
 *
 * A broker holds an exclusive lock on "<db>.lock" for as long as its store is open, and so
 * does `pan restore` while it replaces the file: one broker per store (a second one would
 * write events under the same sequence numbers), a restore never swaps the database under a
 * running broker, and no broker opens a database being swapped.
 * These are flock(2) locks on a file of their own (never on the database, whose POSIX locks
 * belong to SQLite): the kernel releases them when their process ends, however it ends. */
#ifndef CLOISTER_DBLOCK_H
#define CLOISTER_DBLOCK_H


/* Takes the lock of the database at `db_path` without waiting. Returns the lock's file
 * descriptor (>= 0; release it with dblock_release), FAILURE_STATE when another process
 * holds it, or FAILURE_IO. */
int dblock_acquire(const char *db_path);

/* Releases a lock taken by dblock_acquire (a negative fd is ignored). */
void dblock_release(int fd);

#endif
