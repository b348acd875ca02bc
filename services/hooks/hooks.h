/* hooks: the cloister-hooks service -- tells the world outside (a tracker, a chat, a CI)
 * that a task ended, as [hooks] in cloister.toml says:
 *   after_review, after_test, after_merge   a command (hook_command.h) run once for each
 *                                           ended task of the review-agent, test-agent,
 *                                           merge-agent; its failure is reported, never
 *                                           fatal, and never retried (a command need not
 *                                           be idempotent)
 *   webhook (+ webhook_secret)              a signed POST (webhook.h) of every ended task,
 *                                           retried with exponential backoff
 *                                           (webhook_backoff_ms, doubling, webhook_attempts
 *                                           in all)
 * An ended task is one whose event is task.done, task.failed, task.dead or task.cancelled.
 * Each delivery is reported in the task's own events: a `note_task` request makes the
 * broker publish a `task.note` event (kind `hook.<name>` or `webhook`, text the outcome),
 * so `pan events --task`, `pan task show`'s events and the dashboard show it.
 *
 * Why a process of its own, a client of the broker like pan: it sees every ended task,
 * from whichever worker (dead and cancelled ones too, which no worker reports); a slow
 * tracker or a dead URL delays nobody's task, the broker's loop or a worker's lease; and
 * the broker stays free of HTTP, credentials and operator commands.
 *
 * Delivery is at least once. The broker's stored events are read in order (replay) from
 * a cursor kept in $PANOPTICON_HOME/hooks/cursor: the seq up to which every delivery is
 * finished (delivered, given up, or a command run). A SUB socket subscribed to the ended
 * tasks' topics is the doorbell that says when to read (and the reads at 50 ms, 250 ms,
 * 1 s and 3 s after the start catch an event published before the subscription reached
 * the broker). A restart reads again from the cursor, so a delivery cut short by the
 * restart is made again: receivers drop repeats by X-Cloister-Delivery. The very first
 * start begins at the broker's newest event (nothing from before it is delivered). */
#ifndef CLOISTER_HOOKS_H
#define CLOISTER_HOOKS_H

#include <signal.h>
#include <stdint.h>

/* The three command hooks, by specialist. */
typedef enum {
    HOOKS_AFTER_REVIEW = 0,
    HOOKS_AFTER_TEST,
    HOOKS_AFTER_MERGE,
    HOOKS_COUNT
} hooks_kind_t;

#define HOOKS_DEFAULT_TIMEOUT_S 30
#define HOOKS_DEFAULT_WEBHOOK_ATTEMPTS 5
#define HOOKS_DEFAULT_WEBHOOK_BACKOFF_MS 1000

/* What to deliver, and where the broker is. Strings are borrowed for hooks_run(). */
typedef struct {
    const char *control_ep, *events_ep;
    const char *commands[HOOKS_COUNT]; /* [hooks] after_*: NULL or "" for none */
    int timeout_s;                     /* each command's and each POST's limit */
    const char *webhook_url;           /* NULL or "" for none */
    const char *webhook_secret;        /* required with a webhook */
    int webhook_attempts;              /* in all, >= 1 */
    int64_t webhook_backoff_ms;        /* before the second attempt; doubles each time */
} hooks_settings_t;

/* The hook's name: "after_review", "after_test", "after_merge". */
const char *hooks_kind_name(hooks_kind_t kind);

/* Delivers until *stop becomes nonzero (a signal handler sets it). Returns 0 then, or a
 * FAILURE_* code with the reason when it cannot start (the cursor cannot be written, the
 * sockets cannot be made). A broker that does not answer is waited for, never fatal. */
int hooks_run(const hooks_settings_t *settings, volatile sig_atomic_t *stop);

#endif
