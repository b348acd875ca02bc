/* failure: the error codes every fallible function in Cloister returns, and the one-line
 * reason that goes with the most recent failure on this thread.
 *
 * Convention (after libgit2): a fallible function returns 0 on success or a negative
 * FAILURE_* code, and records a human-readable reason with failure_set() just before it
 * returns. The caller reads the reason with failure_message() if it wants to report it. */
#ifndef CLOISTER_FAILURE_H
#define CLOISTER_FAILURE_H

typedef enum {
    FAILURE_OK = 0,
    FAILURE_INVALID = -1,   /* bad argument or malformed input (message, config, file) */
    FAILURE_IO = -2,        /* a system call, socket or file operation failed */
    FAILURE_NOT_FOUND = -3, /* the thing asked for does not exist */
    FAILURE_TOO_BIG = -4,   /* input over a size cap */
    FAILURE_STORE = -5,     /* the SQLite store failed */
    FAILURE_TIMEOUT = -6,   /* a deadline passed */
    FAILURE_STATE = -7,     /* the operation is not allowed in the current state */
    FAILURE_GIT = -8,       /* libgit2 reported an error */
    FAILURE_AGENT = -9,     /* the agent CLI failed */
    FAILURE_MEMORY = -10,   /* an allocation failed */
    FAILURE_DISK_FULL = -11, /* too little disk left to accept more work */
    FAILURE_DENIED = -12,    /* the caller's key has no role that allows it */
    FAILURE_OVERLOADED = -13 /* a bound on what the caller may make us hold was reached */
} failure_code_t;

/* Records `fmt` (printf-style) as this thread's last failure and returns `code`, so a
 * function can `return failure_set(FAILURE_INVALID, "...")`. The arguments may include
 * failure_message() itself, to wrap the last reason. */
int failure_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The reason recorded by the last failure_set() on this thread; "" if none. The string is
 * owned by the thread and valid until the next failure_set(). */
const char *failure_message(void);

/* A short name for a code ("invalid", "io", ...), for logs and error replies. */
const char *failure_name(int code);

#endif
