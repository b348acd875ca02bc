/* pan_wait: waiting for tasks to end, for `pan submit --wait` and `pan task wait`.
 *
 * The watch is set up BEFORE the tasks can end (before the submit, or before looking at
 * existing tasks): an events subscription and the broker's last seq, so an end published
 * in between is still seen (replayed from that seq). While waiting, each task's progress
 * lines go to stderr ("[id] kind: text"); at the end each task's result goes to stdout
 * (the result's fields, one per line, multi-line values indented, then "verdict: NAME";
 * with --json the whole task object with a top-level "verdict", one per line).
 *
 * The exit code is a verdict's (common/bus/verdict.h: 0 passed / gate open / merged, 1 task
 * failed or dead, 3 broker unreachable, 4 timeout, 5 tests failed, 6 gate blocked, 7 merge
 * failed). With `chain`, a task that ends done and handed the change on (its result's
 * `test_task` or `merge_task`, as [pipeline] chains review → test → merge) is followed by
 * the task it handed to, and so on: the last task's verdict is the exit code. Without it,
 * the first of the tasks (in the order given) whose verdict is not 0 decides. */
#ifndef CLOISTER_PAN_WAIT_H
#define CLOISTER_PAN_WAIT_H

#include "pan.h"

typedef struct pan_watch_t pan_watch_t;

/* How to wait. */
typedef struct {
    int timeout_s; /* 0: no limit */
    bool json;     /* print each task as a JSON object */
    bool chain;    /* follow the hand-offs to the last task (above) */
} pan_wait_options_t;

/* Starts watching. Returns a watch (caller finishes it with pan_watch_wait) or NULL after
 * printing why (the exit code is then PAN_EXIT_UNREACHABLE or PAN_EXIT_ERROR, in *code). */
pan_watch_t *pan_watch_start(const pan_t *pan, int *code);

/* Waits until every task of `ids` (n of them; at most 64 in all, with options->chain
 * and the tasks they hand on to) has ended, or options->timeout_s passed, or
 * SIGINT/SIGTERM; prints as above and frees the watch. Returns the exit code above. With
 * n = 0 it only frees the watch. */
int pan_watch_wait(pan_watch_t **watch_p, const char *const *ids, int n,
                   const pan_wait_options_t *options);

#endif
