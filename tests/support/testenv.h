/* testenv: what integration tests need to run real processes in a private directory.
 *
 * testenv_new() makes a fresh temporary directory (PANOPTICON_HOME points into it) and
 * picks ipc:// endpoints inside it, so concurrent tests never collide on ports.
 * Processes started with testenv_spawn() are killed (SIGKILL to their process group) and
 * reaped by testenv_destroy(), which also removes the directory: no orphans, no litter.
 * An environment still alive when the program exits (a failed CHECK exits at once) is
 * destroyed by an atexit handler, in the process that created it only. */
#ifndef CLOISTER_TESTENV_H
#define CLOISTER_TESTENV_H

#include <stdbool.h>
#include <sys/types.h>

#define TESTENV_MAX_PROCS 32

typedef struct {
    char dir[256];         /* the temporary directory */
    char home[300];        /* $PANOPTICON_HOME for the processes under test */
    char in_ep[320];       /* broker endpoints (ipc) */
    char events_ep[320];
    char control_ep[320];
    pid_t procs[TESTENV_MAX_PROCS];
    int nprocs;
    char mounted[300];     /* a tmpfs mounted by testenv_mount_tmpfs, or "" */
} testenv_t;

/* Creates the directory and sets PANOPTICON_HOME, CLOISTER_IN, CLOISTER_EVENTS and
 * CLOISTER_CONTROL in this process's environment (children inherit them). Returns NULL
 * and prints why on failure. The caller owns the result; free it with testenv_destroy(). */
testenv_t *testenv_new(const char *name);

/* Mounts a tmpfs of `mb` MiB on `dir` (an empty directory inside the environment, e.g. its
 * home), for tests of a full disk. The mount is made in a mount namespace of the test's own
 * (entered first; not root, inside a user namespace of its own too, which Debian allows),
 * so nobody else sees it and it goes when the test ends; testenv_destroy unmounts it. Call
 * it before any thread or child exists. Returns true, or false having said why. */
bool testenv_mount_tmpfs(testenv_t *self, const char *dir, int mb);

/* Kills every spawned process still alive, reaps them, removes the directory, frees. */
void testenv_destroy(testenv_t **self_p);

/* Path of a built program: "$CLOISTER_BIN_DIR/<name>". Static buffer per call slot (4). */
const char *testenv_bin(const char *name);

/* Starts argv[0] (a path) with argv in its own process group, stdout/stderr appended to
 * "<dir>/<log_name>.log" (log_name may be NULL: inherit). Returns the pid, or -1. */
pid_t testenv_spawn(testenv_t *self, const char *log_name, char *const argv[]);

/* Sends `sig` to the process group of `pid`. */
void testenv_signal(pid_t pid, int sig);

/* Waits up to timeout_ms for `pid` to exit; returns its exit status as from waitpid, or
 * -1 if it is still running. A process reaped here is forgotten by the environment. */
int testenv_wait(testenv_t *self, pid_t pid, int timeout_ms);

/* Runs argv to completion (timeout_ms), capturing stdout into `out` (NUL-terminated,
 * truncated to out_size). Returns the exit code, or -1 on timeout/spawn failure. */
int testenv_run(testenv_t *self, char *const argv[], char *out, size_t out_size, int timeout_ms);

/* Starts argv (argv[0] a path) in `cwd`, in a process group of its own, stdin from the file
 * `stdin_path` (NULL: /dev/null), stdout and stderr into the files out_path and err_path
 * (created or truncated). The environment does not track it: end it with
 * testenv_wait_exit() or testenv_kill_group(). Returns the pid (= the group), or -1. */
pid_t testenv_start_io(const char *cwd, const char *const argv[], const char *stdin_path,
                       const char *out_path, const char *err_path);

/* Waits up to timeout_ms for `pid`; returns its exit code, 128 + the signal that ended it,
 * or -1 while it still runs. */
int testenv_wait_exit(pid_t pid, int timeout_ms);

/* SIGKILLs the process group `pid` and reaps its leader. */
void testenv_kill_group(pid_t pid);

/* True when a process whose command line contains `marker` is running (any process of
 * the machine: pick a marker nothing else has, e.g. "sleep 47.311"). */
bool testenv_process_running(const char *marker);

/* testenv_wait_until's predicate: true when no process's command line contains `marker`
 * (a const char *). */
bool testenv_process_gone(void *marker);

/* True when bubblewrap runs a trivial command on this machine (with a network namespace of
 * its own when `own_network`): the test's own look at the machine, so that a sandbox the
 * service under test failed to set up is a failure, not "bwrap does not work here". */
bool testenv_bwrap_works(bool own_network);

/* Polls until `pred(arg)` is true or timeout_ms passes; returns the final value. */
bool testenv_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms);

/* Sleeps for ms milliseconds (tests only; services never sleep). */
void testenv_sleep_ms(int ms);

/* Reads a whole file into a malloc'd NUL-terminated string (caller frees), or NULL. */
char *testenv_read_file(const char *path);

/* Writes `text` to `path` (creating parent directories); returns 0 or -1. */
int testenv_write_file(const char *path, const char *text);

#endif
