/* specialist: the skeleton every Cloister specialist service is built on.
 *
 * Connect, announce, heartbeat, take one task, run the job, forward progress, enforce the
 * task's timeout, send the result until the broker confirms it, hand the task back on
 * SIGTERM. A job is a function of the task; the skeleton owns everything else.
 *
 * Threads. specialist_run() runs the loop on the calling thread: it owns every socket
 * (a PUSH connected to the broker's `in`, a PULL bound for the broker's task/ack/cancel/
 * ping) and waits in zmq_poll with the next deadline as timeout. Each task's job runs on a
 * thread of its own, because jobs block (libgit2, an agent subprocess). The job talks to
 * the loop only through its specialist_ctx_t: progress (thread-safe, queued and woken
 * through an eventfd), the cancel flag and fd, and the result it builds.
 *
 * The loop, per PROTOCOL.md:
 *  - sends `hello` at start, again when a `ping` carries a new `epoch`, and again when no
 *    ping came for heartbeat_misses intervals (the broker restarted or is away); a hello
 *    names the task still held;
 *  - sends `heartbeat` every heartbeat_ms with the task and attempt whose job runs (also
 *    a cancelled job that has not returned yet: the worker is not free until it does);
 *  - takes a `task` only when idle and addressed to this worker; others are logged and
 *    counted (specialist_stats_t);
 *  - on `cancel` of the running attempt sets the job's cancel flag and sends nothing more
 *    for that attempt (progress and result are dropped);
 *  - when the job returns, sends its `result`, and resends it every heartbeat until the
 *    broker's `ack` for that task and attempt arrives.
 *
 * Timeout. The task's `timeout_s` (else config.default_timeout_s) is enforced here: at
 * the deadline the cancel flag is set (reason SPECIALIST_CANCEL_TIMEOUT) and the job gets
 * grace_ms to return. Whatever it returns other than `done` is sent as `failed` with the
 * error "timed out after N s" (followed by the job's own error, if any).
 *
 * A job that ignores cancellation. Threads cannot be killed safely, and a stuck job may
 * still hold a child process or a repository, so the worker must not take another task.
 * When the grace passes, the skeleton kills the child process group the job registered
 * with specialist_watch_child() (SIGKILL), sends the result itself (`failed`, "timed out
 * after N s; the job did not stop within G ms", or nothing if the broker cancelled it),
 * waits a bounded time (heartbeat_misses intervals) for the ack, sends `bye` and returns
 * SPECIALIST_EXIT_STUCK: the process exits (ending the stuck thread) and its supervisor
 * restarts it. Same after a broker `cancel` the job does not honour.
 *
 * Signals. specialist_run() blocks SIGTERM and SIGINT for the whole process (threads
 * started later inherit the mask; common/proc gives its children a clean mask) and reads
 * them from a signalfd. On the first: the running job is cancelled (reason
 * SPECIALIST_CANCEL_SHUTDOWN) and the loop keeps heartbeating its task while it stops, so
 * the broker keeps the task running and its group locked. Only once the job has returned
 * is `release` sent for the task (the broker requeues it at once without counting a
 * failure) — or its result, if the job returned `done` — then `bye`. A job still running a
 * tenth of grace_ms before the grace ends has its watched child group killed (SIGKILL);
 * if it has not returned when the grace ends, the task is released, `bye` sent and the
 * loop returns SPECIALIST_EXIT_STUCK. Otherwise the loop waits (within grace_ms of the
 * signal) for acks of results still pending, and returns 0. A second signal returns at
 * once (after SIGKILL to the watched child group, then `release` and `bye`) with
 * SPECIALIST_EXIT_STUCK if the job still runs, else 0.
 *
 * SIGHUP is read from the same signalfd: the service's configuration is read again
 * (config.reload) as soon as no job runs -- at once when idle, else when the running job
 * returns, before the next task is taken. What it did is logged and reported
 * (specialist_reload.h). */
#ifndef CLOISTER_SPECIALIST_H
#define CLOISTER_SPECIALIST_H

#include "specialist_reload.h"
#include "testrun.h"

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit code when a job did not stop within its grace period (the process must restart). */
#define SPECIALIST_EXIT_STUCK 3
/* Exit code when the skeleton could not start (bad config, bind failed). */
#define SPECIALIST_EXIT_SETUP 1

#define SPECIALIST_DEFAULT_IN "tcp://127.0.0.1:5560"
#define SPECIALIST_DEFAULT_BIND "tcp://127.0.0.1:*"
#define SPECIALIST_DEFAULT_HEARTBEAT_MS 1000
#define SPECIALIST_DEFAULT_HEARTBEAT_MISSES 3
#define SPECIALIST_DEFAULT_TIMEOUT_S 600
#define SPECIALIST_DEFAULT_GRACE_MS 5000
/* The largest progress text sent; longer texts are cut (at a UTF-8 boundary). */
#define SPECIALIST_PROGRESS_MAX 8192
/* Progress messages queued while the loop is behind; more are dropped and counted. */
#define SPECIALIST_PROGRESS_QUEUE 1024

/* A service's reload: loads its configuration again (specialist_reload_load()) and, if
 * every value is one it accepts, swaps it in and returns 0 with `report` filled; else
 * returns a negative code with the reason in failure_message(), having changed nothing. */
typedef int(specialist_reload_fn)(void *reload_arg, specialist_reload_t *report);

typedef struct {
    /* The specialist (queue) name, e.g. "merge-agent": [a-z0-9][a-z0-9._-]*, <= 64 bytes.
     * Required. */
    const char *specialist;
    /* Broker `in` endpoint. NULL: $CLOISTER_IN, else SPECIALIST_DEFAULT_IN. */
    const char *in_endpoint;
    /* Where this worker binds its PULL socket. NULL: SPECIALIST_DEFAULT_BIND. A wildcard
     * port is resolved after binding (ZMQ_LAST_ENDPOINT). */
    const char *bind_endpoint;
    /* The endpoint announced in hello when the bound one is not reachable by the broker
     * (containers: bind tcp://0.0.0.0:7000, advertise tcp://review-1:7000). A trailing
     * ":*" is replaced by the bound port. NULL: the bound endpoint. */
    const char *advertise;
    /* Heartbeat interval and the pings missed before re-announcing. 0: the defaults. */
    int heartbeat_ms;
    int heartbeat_misses;
    /* Instance id. NULL: "<specialist>-<hostname>-<pid>-<random hex>" (cut to 128 bytes). */
    const char *worker_id;
    /* Lease used when a task carries no timeout_s. 0: SPECIALIST_DEFAULT_TIMEOUT_S. */
    int default_timeout_s;
    /* How long a cancelled job may take to return. 0: SPECIALIST_DEFAULT_GRACE_MS. */
    int grace_ms;
    /* Reads the service's configuration again after SIGHUP (specialist_reload.h), called
     * with reload_arg (borrowed) on the loop's thread when no job runs. NULL: SIGHUP only
     * logs that this service reads its settings at start. */
    specialist_reload_fn *reload;
    void *reload_arg;
} specialist_config_t;

/* The task a job works on, decoded from the broker's `task` message. Every pointer is
 * owned by the skeleton and valid until the job function returns. Absent strings are "". */
typedef struct {
    const char *id;
    int64_t attempt;
    const char *specialist;
    const char *priority;
    const char *source;
    const char *title;
    const char *issue;
    const char *group;
    int64_t max_attempts;
    int64_t timeout_s; /* the lease actually enforced */
    /* payload: as a msgpack map object (NULL when absent), its raw bytes, and as JSON (an
     * object, {} when absent). */
    const msgpack_object *payload;
    const void *payload_raw;
    size_t payload_len;
    const json_t *payload_json;
    /* context from the broker ({"active": [...], "prior": [...]}), as JSON ({} if absent). */
    const json_t *context_json;
    /* The whole task as one JSON object (every field above, payload and context as maps;
     * no "v", "type" or "worker"), e.g. for a command's stdin. */
    const json_t *json;
} specialist_task_t;

typedef enum {
    SPECIALIST_DONE,   /* the work is finished */
    SPECIALIST_FAILED, /* the work cannot be done; the task ends failed */
    SPECIALIST_RETRY   /* a transient failure: the broker retries (counts as a failure) */
} specialist_outcome_t;

typedef enum {
    SPECIALIST_CANCEL_NONE = 0,
    SPECIALIST_CANCEL_REQUESTED, /* the broker sent `cancel` */
    SPECIALIST_CANCEL_TIMEOUT,   /* the task's timeout passed */
    SPECIALIST_CANCEL_SHUTDOWN   /* SIGTERM/SIGINT: the task is released when the job
                                    returns, unless it returns `done` */
} specialist_cancel_t;

typedef struct specialist_ctx_t specialist_ctx_t;

/* A job: does the work of one task and returns its outcome. Runs on its own thread. It
 * should check specialist_cancelled() (or poll specialist_cancel_fd()) and return soon
 * after cancellation; whatever it returns then is handled as the header comment says. */
typedef specialist_outcome_t(specialist_job_fn)(specialist_ctx_t *ctx, void *job_arg);

/* ---- inside a job (these functions are meant for the job's thread) ---- */

/* The task. Owned by the skeleton, valid while the job runs. */
const specialist_task_t *specialist_task(const specialist_ctx_t *ctx);

/* This worker's id, as the broker knows it. Owned by the skeleton. */
const char *specialist_worker_id(const specialist_ctx_t *ctx);

/* How long a child the job runs (agent, test command) may take between SIGTERM and
 * SIGKILL: half the skeleton's grace, so a child that ignores SIGTERM is killed, and the job
 * returns, before the skeleton gives the job up as stuck. */
int specialist_child_kill_grace_ms(const specialist_ctx_t *ctx);

/* A string field of the payload ("workspace", "prUrl", ...), or NULL when absent or not a
 * string. Owned by the skeleton. */
const char *specialist_payload_str(const specialist_ctx_t *ctx, const char *key);

/* Queues a `progress` message (kind e.g. "agent", "tool", "output", "info"; NULL means
 * "info"). Thread-safe; never blocks on the network. The text is copied and cut to
 * SPECIALIST_PROGRESS_MAX bytes. Dropped (silently) once the task was cancelled by the
 * broker or released; dropped and counted when SPECIALIST_PROGRESS_QUEUE messages wait. */
void specialist_progress(specialist_ctx_t *ctx, const char *kind, const char *text);

/* A printf-style specialist_progress(). */
void specialist_progressf(specialist_ctx_t *ctx, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True once the job should stop (broker cancel, timeout or shutdown). Thread-safe. */
bool specialist_cancelled(const specialist_ctx_t *ctx);

/* Why the job was cancelled, or SPECIALIST_CANCEL_NONE. Thread-safe. */
specialist_cancel_t specialist_cancel_reason(const specialist_ctx_t *ctx);

/* A file descriptor that becomes readable (and stays readable) when the job is
 * cancelled, to poll together with the job's own child process or pipes. Owned by the
 * skeleton: never read, write or close it. */
int specialist_cancel_fd(const specialist_ctx_t *ctx);

/* Tells the skeleton the process group of the job's child (0 to clear), so that a job
 * that does not stop within its grace period, or a second SIGTERM, does not leave the
 * child running: the skeleton sends SIGKILL to the group before giving up on the job.
 * Thread-safe. */
void specialist_watch_child(specialist_ctx_t *ctx, pid_t pgid);

/* The job as the owner of a test run (testrun.h): the run's process group is watched and
 * the job's cancel stops it. */
testrun_owner_t specialist_testrun_owner(specialist_ctx_t *ctx);

/* Result fields (the `result` map), set from the job's thread. A key set twice keeps the
 * last value. Strings are copied; a NULL string value is ignored. */
void specialist_result_str(specialist_ctx_t *ctx, const char *key, const char *value);
void specialist_result_int(specialist_ctx_t *ctx, const char *key, int64_t value);
void specialist_result_bool(specialist_ctx_t *ctx, const char *key, bool value);
void specialist_result_float(specialist_ctx_t *ctx, const char *key, double value);
/* Adds `amount` to a number field (0 when not set yet; an integer stays an integer):
 * totals over several runs of one task, e.g. every agent run's cost. */
void specialist_result_add_int(specialist_ctx_t *ctx, const char *key, int64_t amount);
void specialist_result_add_float(specialist_ctx_t *ctx, const char *key, double amount);
/* Any JSON value (object, array, ...). Borrows `value` (the skeleton takes its own
 * reference). */
void specialist_result_json(specialist_ctx_t *ctx, const char *key, json_t *value);

/* The result's `error` text (printf-style; replaces an earlier one). */
void specialist_result_error(specialist_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Hands the task back instead of a result, for a trouble of this worker's rather than of
 * the task's (the model API refused the key, or stayed overloaded): when the job returns,
 * the broker gets `release` with `reason` and requeues the task without counting a
 * failure, due again in delay_ms (0: at once). With `pause` the broker also pauses the
 * specialist: none of its tasks is dispatched until someone resumes it (`pan specialists
 * resume`, or a `pan doctor` whose checks pass). The first call of a job wins; the result
 * the job builds is dropped. From the job's thread. */
void specialist_hand_back(specialist_ctx_t *ctx, const char *reason, int64_t delay_ms, bool pause);

/* Adds a next task: a JSON object with the `submit` fields (id and specialist required),
 * committed by the broker together with this task's result. Borrows `submit`. Returns 0,
 * or FAILURE_INVALID with the reason (e.g. "submit: field 'id' is required") when it is
 * not a valid submit; nothing is added then. */
int specialist_result_next(specialist_ctx_t *ctx, const json_t *submit);

/* ---- running the service ---- */

/* Counters, for logs and tests. */
typedef struct {
    uint64_t tasks_run;
    uint64_t tasks_ignored;      /* addressed to another worker, or arrived while busy */
    uint64_t messages_rejected;  /* undecodable, or an unexpected type */
    uint64_t progress_dropped;
    uint64_t results_resent;
    uint64_t hellos;
} specialist_stats_t;

/* Runs the specialist until SIGTERM/SIGINT: connects, announces, and runs `job` (with
 * `job_arg`, borrowed) for each task. The config and its strings are borrowed for the
 * call. Returns the process exit code: 0 after a clean shutdown, SPECIALIST_EXIT_SETUP
 * when it could not start (the reason is logged and in failure_message()),
 * SPECIALIST_EXIT_STUCK when a job did not stop in time (see above). If `stats` is not
 * NULL it receives the final counters. */
int specialist_run(const specialist_config_t *config, specialist_job_fn *job, void *job_arg,
                   specialist_stats_t *stats);

/* Checks a specialist name: [a-z0-9][a-z0-9._-]*, at most 64 bytes. Returns 0, or
 * FAILURE_INVALID with the reason. */
int specialist_check_name(const char *name);

#endif
