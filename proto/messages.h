/* messages: the single table of Cloister's wire messages (protocol version 1).
 *
 * Every message is one msgpack map with at least "v" (the protocol version) and "type".
 * The codec in common/bus/wire.c is driven by this table: it checks that required fields are
 * present, that every known field has its declared type and fits its size cap, and ignores
 * keys it does not know. proto/PROTOCOL.md describes the same messages for people.
 *
 * Changing this table (a field's type, a new required field, a removed message) means
 * bumping WIRE_VERSION and saying what changed in PROTOCOL.md. Adding an optional field or
 * a new message type is compatible and does not bump the version. */
#ifndef CLOISTER_MESSAGES_H
#define CLOISTER_MESSAGES_H

#include "protocol.h"

#include <stdbool.h>
#include <stddef.h>

#define WIRE_VERSION 1

typedef enum {
    WIRE_STR,   /* UTF-8 string (msgpack str or bin) */
    WIRE_INT,   /* integer (positive or negative fixint, int/uint 8..64) */
    WIRE_BOOL,  /* true / false */
    WIRE_FLOAT, /* float32/64, or an integer (widened) */
    WIRE_MAP,   /* a map, kept as raw msgpack for the receiver */
    WIRE_ARRAY, /* an array, kept as raw msgpack */
    WIRE_ANY    /* any value, kept as raw msgpack */
} wire_type_t;

typedef struct {
    field_t field;
    wire_type_t type;
    bool required;
    size_t max_len; /* strings: byte cap; 0 means the message cap only */
} wire_field_t;

typedef struct {
    msg_type_t type;             /* the "type" value */
    const wire_field_t *fields;  /* excluding "v" and "type" */
    size_t nfields;
} wire_spec_t;

/* The byte cap of ids and issues (task, worker, parent): a submit's `payload.issueId`,
 * which becomes the task's `issue`, must fit it too. */
#define MESSAGES_ID_CAP 128

/* The whole table, indexed by msg_type_t, and its length (MSG_COUNT). */
extern const wire_spec_t messages_table[];
extern const size_t messages_count;

/* The spec for a message type named on the wire, or NULL if the type is unknown. */
const wire_spec_t *messages_find(const char *type, size_t type_len);

#endif
