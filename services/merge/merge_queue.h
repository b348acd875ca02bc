/* merge_queue: the speculative merge queue of one target branch of one repository
 * (Zuul's dependent pipeline), run by the merge-agents themselves.
 *
 * DESIGN NOTES
 *  - Where the state lives. The broker keeps the tasks (one merge-agent task per queued
 *    merge, durable, re-dispatched after a crash) but never opens a repository, so the
 *    queue's order and state live with the merge-agents: one JSON file per (repository
 *    root, target) in $PANOPTICON_HOME/specialists/merge-agent/queue/ (merge_queue_store.h),
 *    changed only under its flock and saved by an atomic rename. Replicas on one host share
 *    it.
 *  - Items. A task entering the queue becomes an item: (priority rank, arrival seq),
 *    source branch, the reviewed commit it is pinned to. Active items are kept in
 *    (rank, seq) order: an urgent item goes ahead of every normal one not yet landed.
 *  - Candidates. The head item's candidate is the target's tip merged with its branch;
 *    each next item's candidate is the candidate ahead of it merged with its branch (the
 *    agent resolves conflicts on that candidate, as for a single merge). Its `base` is the
 *    commit it was built on. An item whose base is not the tip / the candidate of the item
 *    ahead any more (ejection ahead, an urgent item cutting in, the target moved) is reset
 *    (`gen` + 1) and rebuilt; a result for an older gen is dropped.
 *  - Work. Every merge-agent task of the queue runs the same loop until its own item is
 *    landed or ejected: under the lock, land what can land, then claim the first piece of
 *    work within the window (build a candidate whose base is ready, or test a built one),
 *    unlock, do it, lock, record it. So N workers test N candidates in parallel, any worker
 *    does any item's work, and a worker killed mid-work only loses its claim: claims are
 *    flock'd files (claim-<pid>-<n>.lock) the kernel unlocks when the worker dies, after
 *    which another worker takes the work over.
 *  - Landing. Only the head item, only when it `passed`, only when its base is the target's
 *    tip, and only as a fast-forward to exactly the tested candidate (a compare-and-swap of
 *    the local ref, or a non-forced push that fails unless the remote is still at the base).
 *    The state is saved after the ref moved; a crash in between is recognised at the next
 *    look (the tip IS the head's candidate: it landed), so nothing lands twice and nothing
 *    untested lands.
 *  - Failure. A failing test run marks its item `failed`: the items behind it are rebuilt
 *    without it at once, and it is ejected (state `ejected`, the failing test in `reason`,
 *    the candidate kept as refs/cloister-queue/<target>/<seq>) as soon as every item ahead
 *    of it passed -- until then the failure may be the fault of one of them (if one is
 *    ejected, the failed item is rebuilt and tested again). A conflict the agent cannot resolve, or a branch that
 *    moved since its review, ejects that item only. Transient trouble (a busy repository,
 *    I/O) puts the work back for another try.
 *  - Bounds. The window caps the active items that may be built or tested ahead: adaptive
 *    as Zuul's, it starts at the setting ([merge] queue_window, also its ceiling), grows by
 *    one with each landing and halves (to at least 1) with each ejection for failed tests
 *    (queue field `window`); `paused` stops new builds and tests (in-flight ones finish and
 *    passed items still land: the queue drains).
 *
 * Item fields: id (the task), attempt, seq, rank, workspace, source, commit, state
 * (waiting | built | passed | landed | ejected), gen, base, candidate, claim, claim_kind,
 * strategy, tests (test runs spent on it), verdict, reason, retry (ejected because a landing
 * failed for a transient reason: the task is tried again), enqueued_ms, ended_ms. */
#ifndef CLOISTER_MERGE_QUEUE_H
#define CLOISTER_MERGE_QUEUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define MERGE_QUEUE_DEFAULT_WINDOW 8
#define MERGE_QUEUE_POLL_MS 50
/* Ended items kept in the file for `pan merge-queue`. */
#define MERGE_QUEUE_KEEP_ENDED 100

/* What the queue asks of the merge-agent: the git work and the agent. `item` arguments
 * are borrowed for the call; strings written into `out` buffers are 40-hex commit ids.
 * `facts` (an empty object) may be given fields (notes, files) that are copied into the
 * item when the work is recorded. */
typedef struct {
    /* The target's tip now, into `out`. Returns 0 or a FAILURE_* with the reason. */
    int (*tip)(char out[41], void *arg);
    /* Builds `item`'s candidate: its branch merged onto `base`, the agent resolving any
     * conflict. Returns 0 with `out` and *strategy (static text); 1 when the item must be
     * ejected, with *reason (malloc'd); a negative FAILURE_* for transient trouble (tried
     * again later), with *reason. */
    int (*build)(const json_t *item, const char *base, char out[41], const char **strategy,
                 json_t *facts, char **reason, void *arg);
    /* Runs the tests on `candidate`. Returns 0 (passed or no tests: *verdict "PASS" or
     * "SKIP"), 1 (failed: *reason names the failing tests), or a negative FAILURE_*
     * (tried again later); *reason malloc'd or NULL. */
    int (*test)(const json_t *item, const char *candidate, const char **verdict, json_t *facts,
                char **reason, void *arg);
    /* Moves the target from `base` to `candidate` (a fast-forward), nothing else. Returns
     * 0 when it landed (facts about the landing may be set in `facts`, an object merged
     * into the item), 1 when the target is not at `base` any more, 2 when the landing is
     * refused for good (the item is ejected), a negative FAILURE_* for transient trouble
     * (tried again later); *reason malloc'd or NULL. */
    int (*land)(const json_t *item, const char *base, const char *candidate, json_t *facts,
                char **reason, void *arg);
    /* One transition of the queue (`kind` e.g. "merge-queue.landed"), for the events. */
    void (*event)(const char *kind, const char *text, void *arg);
    /* 0 go on; 1 stop and leave the item queued (shutdown); 2 stop and withdraw it. */
    int (*stop)(void *arg);
    void *arg;
} merge_queue_hooks_t;

/* One task's item and the queue it joins. Strings are borrowed. */
typedef struct {
    const char *dir;       /* merge_queue_store_dir() */
    const char *repo;      /* repository root */
    const char *target;
    const char *id;        /* the task id */
    int64_t attempt;       /* the task's attempt */
    int rank;              /* 0 urgent .. 3 low */
    const char *workspace; /* where the branch is */
    const char *source;
    const char *commit;    /* the reviewed commit, or NULL */
    int window;            /* active items built or tested ahead (>= 1) */
    const json_t *extra;   /* more fields for a new item (what its build needs to know,
                              e.g. the review's merge base), or NULL */
    int64_t deadline_ms;   /* on clock_now_ms(): stop waiting (the item stays queued) */
} merge_queue_request_t;

typedef enum {
    MERGE_QUEUE_LANDED = 0, /* the item's candidate is the target (or contained in it) */
    MERGE_QUEUE_EJECTED,    /* the item left the queue: reason in the item */
    MERGE_QUEUE_WAITING,    /* stopped (deadline or shutdown) with the item still queued */
    MERGE_QUEUE_WITHDRAWN   /* stop() said 2: the item was removed */
} merge_queue_end_t;

/* Queues the request's item (or finds it again: the same task after a crash resumes its
 * item; an ejected item is queued afresh by a later attempt) and works the queue until the
 * item ends or the deadline passes. Returns 0 with *end and *item (a copy of the item's
 * final JSON, caller owns), or a FAILURE_* (the state file unusable) with the reason. */
int merge_queue_run(const merge_queue_request_t *request, const merge_queue_hooks_t *hooks,
                    merge_queue_end_t *end, json_t **item);

/* 0 urgent, 1 high, 2 normal, 3 low (unknown: normal). */
int merge_queue_rank(const char *priority);

#endif
