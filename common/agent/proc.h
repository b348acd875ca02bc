/* proc: run one child process under our control, without a shell.
 *
 * The child runs argv (looked up in PATH, execvp-style) in its own process group, in a
 * chosen directory, with an environment derived from ours (names removed, names set). Its
 * stdin is fed from a buffer and then closed; stdout is split into lines handed to a
 * callback as they arrive; the tail of stderr is kept. Two deadlines guard it: a wall
 * clock and a no-output watchdog. Stopping means SIGTERM to the whole tree — the group and
 * the groups of descendants that left it (a tool run under setsid) — then SIGKILL after a
 * grace period. When the leader exits, whatever is left in its group is killed; what left
 * the group is an orphan for proc_kill_orphans(); so nothing the child started outlives
 * it.
 *
 * Driving it: proc_start() forks; proc_step() waits (poll, no sleeps) up to a timeout for
 * something to happen and handles it — stdin written, lines delivered, a deadline acted
 * on, the child reaped — so a single-threaded service can interleave the child with its
 * own sockets and heartbeats. proc_run() is the blocking convenience built on the two.
 *
 *     proc_t *proc = NULL;
 *     if (proc_start(&proc, &options) == 0) {
 *         while (proc_step(proc, 500) == 0)
 *             heartbeat();
 *         const proc_status_t *st = proc_status(proc);
 *         ...
 *         proc_destroy(&proc);
 *     }
 *
 * Not thread-safe: one thread drives one proc_t. */
#ifndef CLOISTER_PROC_H
#define CLOISTER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct proc_t proc_t;

/* Called once per complete stdout line, in order, without the trailing newline (a final
 * line without a newline is delivered at exit). `line` is NUL-terminated and owned by proc
 * (valid during the call only). Return 0 to go on; any other value stops the child (as
 * proc_stop(PROC_STOP_CALLBACK)) and is kept as proc_status()->callback_code; no further
 * lines are delivered after that. */
typedef int(proc_line_fn)(void *arg, const char *line, size_t len);

typedef struct {
    /* NULL-terminated argument vector; argv[0] is searched in PATH. Used only by
     * proc_start() (not kept). */
    char *const *argv;
    /* Working directory of the child; NULL keeps ours. */
    const char *cwd;
    /* NULL-terminated list of variable names to drop from the inherited environment, or
     * NULL. An entry ending in '*' is a prefix: "CLAUDE_CODE_*". */
    const char *const *env_remove;
    /* NULL-terminated allow-list of variable names the child inherits (an entry ending in
     * '*' is a prefix), or NULL: every variable is inherited (minus env_remove). */
    const char *const *env_keep;
    /* NULL-terminated list of "NAME=value" to set (replacing inherited values), or NULL. */
    const char *const *env_set;
    /* Bytes for the child's stdin, copied by proc_start(); stdin is closed after the last
     * byte. NULL (with len 0) connects stdin to /dev/null. */
    const char *stdin_data;
    size_t stdin_len;
    /* Line callback for stdout and its argument; NULL discards stdout. */
    proc_line_fn *on_line;
    void *on_line_arg;
    /* Wall-clock limit from start, in ms; 0 = none. */
    int64_t timeout_ms;
    /* Stop when neither stdout nor stderr produced a byte for this long, in ms; 0 = none. */
    int64_t no_output_timeout_ms;
    /* Time between SIGTERM and SIGKILL when stopping, in ms; 0 = PROC_DEFAULT_KILL_GRACE_MS. */
    int64_t kill_grace_ms;
    /* Bytes of stderr kept (the tail); 0 = PROC_DEFAULT_STDERR_CAP. */
    size_t stderr_cap;
    /* Longest stdout line delivered; longer lines are dropped with a warning (and
     * counted). 0 = PROC_DEFAULT_MAX_LINE. */
    size_t max_line;
} proc_options_t;

#define PROC_DEFAULT_KILL_GRACE_MS 2000
#define PROC_DEFAULT_STDERR_CAP (64 * 1024)
#define PROC_DEFAULT_MAX_LINE (32 * 1024 * 1024)

/* Why we stopped the child, if we did. */
typedef enum {
    PROC_STOP_NONE = 0,  /* it ended on its own */
    PROC_STOP_TIMEOUT,   /* the wall-clock limit passed */
    PROC_STOP_NO_OUTPUT, /* the no-output watchdog fired */
    PROC_STOP_CALLBACK,  /* the line callback returned non-zero */
    PROC_STOP_REQUESTED  /* proc_stop() was called (cancel, or a caller's own rule) */
} proc_stop_t;

typedef struct {
    bool running; /* false once the child was reaped */
    bool exited;  /* it called exit(): exit_code is valid */
    int exit_code;
    int term_signal; /* the signal that ended it, when !exited */
    proc_stop_t stopped_by;
    int callback_code;       /* the non-zero value the line callback returned, if any */
    int64_t duration_ms;     /* start to reap (so far, while running) */
    size_t lines;            /* stdout lines delivered */
    size_t dropped_lines;    /* stdout lines over max_line */
    const char *stderr_tail; /* NUL-terminated (a NUL byte the child wrote shows as '?');
                                owned by the proc_t */
} proc_status_t;

/* Starts the child. On success *proc_p is a new proc_t the caller owns (free it with
 * proc_destroy()). Returns 0, FAILURE_INVALID (no argv), FAILURE_IO (pipe/fork failed) or
 * FAILURE_NOT_FOUND (the program could not be executed: the reason names it). */
int proc_start(proc_t **proc_p, const proc_options_t *options);

/* Waits up to timeout_ms (-1 = until something happens) and handles what happened:
 * writes stdin, delivers lines, enforces deadlines (never waits past the next one), reaps.
 * Returns 1 once the child has been reaped (and on every later call), 0 while it runs, or
 * FAILURE_IO if poll itself failed. */
int proc_step(proc_t *self, int timeout_ms);

/* Begins stopping the child: SIGTERM to its tree (its group, and every group one of its
 * descendants leads or joined) now, SIGKILL to the tree after the grace period (driven by
 * proc_step()). Only the first reason is kept. No effect once it was reaped. */
void proc_stop(proc_t *self, proc_stop_t reason);

/* Runs options' child to the end (proc_start + proc_step until reaped). On success
 * *proc_p is the finished proc_t for the caller to inspect and proc_destroy(); on failure
 * *proc_p is NULL. Returns as proc_start(), or FAILURE_IO if polling failed. */
int proc_run(proc_t **proc_p, const proc_options_t *options);

/* Runs argv (our environment, no stdin) to the end within timeout_ms, for a check such as
 * `gh --version`: true when it exited 0, with its first stdout line in `out`; false with
 * why in `out` (cannot execute, exit code and stderr, or the time limit), on one line. */
bool proc_probe(char *const *argv, int64_t timeout_ms, char *out, size_t size);

/* Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER): a
 * process a job started that detaches itself (setsid, a double fork) escapes the kill of
 * its process group, but is reparented to us rather than to init, so
 * proc_kill_orphans() can end it. Returns 0 or FAILURE_IO. */
int proc_become_subreaper(void);

/* Kills (SIGKILL) and reaps every child process of ours: call it when no proc_t is running
 * (between jobs), when every child left is an orphan adopted from a finished job. Returns
 * how many there were. */
int proc_kill_orphans(void);

/* The current status; the pointer is owned by self and valid until proc_destroy(). */
const proc_status_t *proc_status(proc_t *self);

/* The child's pid, which is also its process-group id. */
pid_t proc_pid(const proc_t *self);

/* Sends `sig` to every process in group `pgid` (kill(-pgid, sig)). Async-signal-safe, so
 * a signal handler may use it; for that reason it records no failure reason. Returns 0,
 * or FAILURE_NOT_FOUND if no such group exists (or it is not ours to signal). */
int proc_kill_group(pid_t pgid, int sig);

/* Kills a child that still runs (SIGKILL to its group), reaps it, closes everything and
 * frees. Nulls *self_p; safe with NULL. */
void proc_destroy(proc_t **self_p);

#endif
