/* session: what a specialist remembers between agent runs, under $PANOPTICON_HOME.
 *
 *   specialists/<name>.session        the current agent session (JSON, replaced atomically)
 *   specialists/<name>.lock           flock'd for the whole of a run: runs never overlap
 *   specialists/<name>/history.jsonl  one JSON line appended per run (and per job, by services)
 *
 * The session file records the agent CLI's session id, the cwd it belongs to, when it was
 * created and last used, how many runs it served, the size of its context (the input side of
 * the latest API call: what rotation compares with the token limit), the accumulated tokens
 * and cost, the CLI version seen, and why the last fresh start happened. A file that cannot be parsed is
 * treated as "no session" (the reason is logged and returned), never as a crash.
 *
 * Locking: session_lock_try() never blocks; a caller with a deadline retries it from its
 * own poll loop (the agent runner does, see agent.h). The lock is an flock on its own file,
 * opened close-on-exec, so agents we spawn never inherit it; the kernel drops it when the
 * holder dies. */
#ifndef CLOISTER_SESSION_H
#define CLOISTER_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define SESSION_ID_SIZE 37 /* a lowercase UUID plus NUL */
#define SESSION_CWD_SIZE 4096
#define SESSION_VERSION_SIZE 64
#define SESSION_REASON_SIZE 256
#define SESSION_NAME_MAX 64

#define SESSION_CLI_SIZE 16

typedef struct {
    char cli[SESSION_CLI_SIZE];       /* the agent CLI whose session this is (agent_cli.h) */
    char session_id[SESSION_ID_SIZE]; /* "" until a CLI that names its sessions said it */
    char cwd[SESSION_CWD_SIZE]; /* the absolute directory the agent runs in */
    int64_t created_at_ms;      /* wall clock, ms since the epoch */
    int64_t last_run_at_ms;     /* 0 = never ran */
    int64_t runs;
    int64_t context_tokens; /* the conversation's size: input + cache creation + cache read
                               of the latest API call (assigned each run, not summed); 0 if
                               unknown (a new session, or a file from before this field) */
    int64_t input_tokens;   /* accumulated input + cache creation + cache read of all calls */
    int64_t output_tokens;
    double cost_usd;
    char cli_version[SESSION_VERSION_SIZE]; /* "" if unknown */
    char fresh_reason[SESSION_REASON_SIZE]; /* why this session was started */
} session_state_t;

typedef struct session_lock_t session_lock_t;

/* True if `name` is usable as a session key: a specialist name (1..SESSION_NAME_MAX
 * characters from [A-Za-z0-9._-], not starting with '.'), optionally with a replica's
 * "~<digits>" (replica.h). */
bool session_name_valid(const char *name);

/* Writes a fresh random session id (lowercase UUID, libuuid) into id. */
void session_new_id(char id[SESSION_ID_SIZE]);

/* Reads specialists/<name>.session into *state (also what `pan specialists list` shows).
 * Returns 0; FAILURE_NOT_FOUND if there is no session; FAILURE_INVALID if the file is
 * unreadable or malformed (logged; the caller treats it as no session and may report
 * failure_message() as the reason for starting fresh). */
int session_load(const char *name, session_state_t *state);

/* Writes *state as specialists/<name>.session: temp file, fsync, rename, fsync of the
 * directory, so a reader sees the old or the new file, never half of one. Creates the
 * directory if needed. Returns 0, FAILURE_INVALID (bad name) or FAILURE_IO. */
int session_save(const char *name, const session_state_t *state);

/* Deletes specialists/<name>.session so the next run starts fresh (`pan specialists
 * reset`). History is kept. Takes the lock without waiting: returns FAILURE_STATE if a run
 * holds it. Returns 0 also when there was no session. */
int session_reset(const char *name);

/* Tries to take the exclusive run lock of `name` without blocking. On success *lock_p is
 * the held lock (the caller owns it; release with session_unlock()). Returns 0,
 * FAILURE_STATE if another holder has it (any process, or another lock in this one), or
 * FAILURE_IO / FAILURE_INVALID. */
int session_lock_try(session_lock_t **lock_p, const char *name);

/* Releases and frees the lock; nulls *lock_p; safe with NULL. */
void session_unlock(session_lock_t **lock_p);

/* A history.jsonl past this size is rotated to history.jsonl.1 before the next append. */
#define SESSION_HISTORY_MAX_BYTES (16 * 1024 * 1024)

/* Appends `entry` (borrowed; an "at_ms" key, wall clock, is added to it when absent) as one
 * compact JSON line to
 * specialists/<name>/history.jsonl, creating the directory. One write(2) with O_APPEND,
 * so concurrent appenders do not interleave within a line. Past
 * SESSION_HISTORY_MAX_BYTES the file is first renamed history.jsonl.1 (the older one is
 * dropped). Returns 0 or a FAILURE_*. */
int session_history_append(const char *name, json_t *entry);

#endif
