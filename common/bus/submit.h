/* submit: a task as its submitter gives it -- the typed form of the `submit` message (and
 * of each entry of a result's `next`), its one encoder and its one validator.
 *
 * The broker reads what arrives with submit_read() and checks it with submit_check();
 * pan and the client library check the same way before they send, so a bad submit gets
 * the same one-line reason on both sides. What only the broker can know (whether the
 * specialist exists, its default timeout, free disk) is checked in the broker. */
#ifndef CLOISTER_SUBMIT_H
#define CLOISTER_SUBMIT_H

#include "wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds a submit must keep. */
#define SUBMIT_MAX_ATTEMPTS 100
#define SUBMIT_MAX_TIMEOUT_S (7 * 24 * 3600)
/* A payload leaves room in the 4 MiB task message for the session context. */
#define SUBMIT_PAYLOAD_CAP (2 * 1024 * 1024)
#define SUBMIT_SPECIALIST_NAME_MAX 64

/* Every pointer is borrowed; NULL / 0 leaves the field out so the broker's default
 * applies. */
typedef struct {
    const char *id;         /* the idempotency key; required */
    const char *specialist; /* required */
    const char *priority;   /* urgent | high | normal | low; NULL: normal */
    const char *source;
    const char *title;
    const char *issue;
    const char *group;
    int64_t max_attempts; /* 0: the specialist's default */
    int64_t timeout_s;    /* 0: the specialist's default */
    int64_t not_before;  /* ms since the epoch; 0: now */
    const void *payload; /* an encoded msgpack map (e.g. from a writer's start_map) */
    size_t payload_len;
} submit_t;

/* True for a specialist name of 1..64 lowercase letters, digits, '-', '_', '.', not
 * starting with punctuation. */
bool submit_specialist_name_valid(const char *name);

/* The one spelling of a specialist name: `_` and `-` are one (`merge_agent` is
 * `merge-agent`, as in cloister.toml's tables), kept as `-`. Writes it into `buf` (at
 * least SUBMIT_SPECIALIST_NAME_MAX + 1 bytes; a longer name is cut, and is refused as
 * invalid anyway) and returns buf. Every reader of a name (the broker's queues and gate,
 * pan) uses this, so no check can be passed under another spelling. */
char *submit_specialist_canonical(const char *name, char *buf);

/* Checks the fields a submit carries, without the broker's state, and the payload members
 * read as paths, refs and ids (workspace, branch, target, commit, issueId, prUrl), which
 * like every declared string must not hold a NUL byte. Returns 0, or FAILURE_INVALID /
 * FAILURE_TOO_BIG with the reason in failure_message(). */
int submit_check(const submit_t *task);

/* Fills *out from a decoded `submit` message (or a `next` entry decoded as one); the
 * strings and payload are borrowed from `msg`. */
void submit_read(const wire_msg_t *msg, submit_t *out);

/* Starts `writer` with a `submit` message for `task` (task->id must be set). The bytes are
 * then in wire_writer_data(writer) -- for control, or to PUSH to `in`. */
void submit_encode(wire_writer_t *writer, const submit_t *task);

/* A "wake": a task that asks a specialist to look at something (pan specialists wake, the
 * dashboard's Wake). Its title ("Wake <specialist>: <the first 200 bytes of text, cut
 * between two characters>") goes into title (at least 300 bytes) and its payload map
 * ({task, workspace, branch, target}; NULL ones left out, task "Manual wake" when NULL)
 * into payload_writer, whose bytes the caller puts in the submit. */
void submit_wake(const char *specialist, const char *text, const char *workspace,
                 const char *branch, const char *target, char *title, size_t title_size,
                 wire_writer_t *payload_writer);

#endif
