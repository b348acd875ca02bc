/* pan_wait: waiting for tasks to end, for `pan submit --wait` and `pan task wait`.
 *
 * The watch is set up BEFORE the tasks can end (before the submit, or before looking at
 * existing tasks): an events subscription and the broker's last seq, so an end published
 * in between is still seen (replayed from that seq). While waiting, each task's progress
 * lines go to stderr ("[id] kind: text"); at the end each task's result goes to stdout
 * (the result's fields, one per line, multi-line values indented; with --json the whole
 * task object, one per line). */
#ifndef CLOISTER_PAN_WAIT_H
#define CLOISTER_PAN_WAIT_H

#include "pan.h"

/* Exit code when the wait's time ran out. */
#define PAN_EXIT_TIMEOUT 4

typedef struct pan_watch_t pan_watch_t;

/* Starts watching. Returns a watch (caller finishes it with pan_watch_wait) or NULL after
 * printing why (the exit code is then PAN_EXIT_UNREACHABLE or PAN_EXIT_ERROR, in *code). */
pan_watch_t *pan_watch_start(const pan_t *pan, int *code);

/* Waits until every task of `ids` (n of them) has ended, or `timeout_s` (0: no limit)
 * passed, or SIGINT/SIGTERM; prints as above and frees the watch. Returns PAN_EXIT_OK when
 * all are done, PAN_EXIT_ERROR when one failed, died or was cancelled, PAN_EXIT_TIMEOUT,
 * or PAN_EXIT_UNREACHABLE. */
int pan_watch_wait(pan_watch_t **watch_p, const char *const *ids, int n, int timeout_s,
                   bool json);

#endif
