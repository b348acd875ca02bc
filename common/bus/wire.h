/* wire: Cloister's msgpack codec, driven by the message table in proto/messages.h.
 *
 * Decoding: wire_decode() checks the size cap before touching the bytes, then the
 * version, the type and every field the table declares (presence of required fields,
 * types, string caps). Keys the table does not know are ignored. A failure is
 * FAILURE_INVALID or FAILURE_TOO_BIG with a one-line reason in failure_message(), e.g.
 * "submit: field 'priority' must be a string". The decoded message keeps its own copy of
 * everything it hands out, so the input buffer may be freed right after decoding.
 *
 * Encoding: a wire_writer_t builds one message (or a standalone map) field by field;
 * nested maps and arrays are opened and closed explicitly.
 *
 * Keys are the protocol's field_t (protocol.h), so a misspelt field does not compile. The
 * `_key` variants take a string, for maps whose keys are data rather than protocol (a
 * user's JSON payload, queue names, priority names as counters). */
#ifndef CLOISTER_WIRE_H
#define CLOISTER_WIRE_H

#include "messages.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest message accepted, in bytes. Checked before decoding. */
#define WIRE_MAX_MESSAGE (4 * 1024 * 1024)
/* Deepest nesting accepted inside a map or array field. */
#define WIRE_MAX_DEPTH 32

typedef struct wire_msg_t wire_msg_t;

/* Decodes one message. On success *out is a new message the caller owns (free with
 * wire_msg_destroy). Returns 0, FAILURE_TOO_BIG or FAILURE_INVALID. */
int wire_decode(const void *data, size_t len, wire_msg_t **out);

/* Decodes a map that carries no "v"/"type" (for example an element of a result's "next"
 * array) as a message of type `as_type`. Same ownership and errors as wire_decode. */
int wire_decode_as(const void *data, size_t len, msg_type_t as_type, wire_msg_t **out);

void wire_msg_destroy(wire_msg_t **self_p);

/* The message's type, e.g. MSG_SUBMIT (msg_type_name() spells it). */
msg_type_t wire_msg_type(const wire_msg_t *self);

/* True if the field is present (and not nil). */
bool wire_msg_has(const wire_msg_t *self, field_t field);

/* A string field as a NUL-terminated string owned by the message, or `fallback` if absent.
 * (A string containing NUL bytes is cut at the first one.) */
const char *wire_msg_str(const wire_msg_t *self, field_t field, const char *fallback);

/* An integer or boolean field, or `fallback` if absent. */
int64_t wire_msg_int(const wire_msg_t *self, field_t field, int64_t fallback);
bool wire_msg_bool(const wire_msg_t *self, field_t field, bool fallback);
double wire_msg_float(const wire_msg_t *self, field_t field, double fallback);

/* A map/array/any field as raw msgpack bytes owned by the message; *len gets the size.
 * NULL (and *len = 0) if absent. The bytes are encoded on the first call for the field
 * (so one message must not be read from two threads at once). */
const void *wire_msg_raw(const wire_msg_t *self, field_t field, size_t *len);

/* The decoded msgpack object of a field (for walking nested maps), or NULL. Valid while
 * the message lives. */
const msgpack_object *wire_msg_object(const wire_msg_t *self, field_t field);

/* Looks up `field` (or a string `key`) in a msgpack map object; NULL if `map` is not a
 * map or has no such key. */
const msgpack_object *wire_map_get(const msgpack_object *map, field_t field);
const msgpack_object *wire_map_get_key(const msgpack_object *map, const char *key);

/* Copies a msgpack string object into buf (NUL-terminated, truncated); returns buf, or
 * `fallback` when obj is NULL or not a string. */
const char *wire_obj_str(const msgpack_object *obj, char *buf, size_t size, const char *fallback);

/* ---- encoding ---- */

typedef struct wire_writer_t wire_writer_t;

/* A new writer with an empty buffer. The caller owns it. */
wire_writer_t *wire_writer_new(void);
void wire_writer_destroy(wire_writer_t **self_p);

/* Starts a new top-level message of `type` (writes "v" and "type"); discards anything the
 * writer held before. */
void wire_writer_start(wire_writer_t *self, msg_type_t type);

/* Starts a bare top-level map (no "v"/"type"), e.g. a result map or a next-task. */
void wire_writer_start_map(wire_writer_t *self);

/* Starts a bare top-level array (e.g. the raw bytes of a result's "next"). */
void wire_writer_start_array(wire_writer_t *self);

/* Fields of the innermost open map. A NULL string value writes nothing. */
void wire_put_str(wire_writer_t *self, field_t field, const char *value);
void wire_put_int(wire_writer_t *self, field_t field, int64_t value);
void wire_put_bool(wire_writer_t *self, field_t field, bool value);
void wire_put_float(wire_writer_t *self, field_t field, double value);
/* Writes already-encoded msgpack bytes as the value (NULL/0 writes nothing). */
void wire_put_raw(wire_writer_t *self, field_t field, const void *raw, size_t len);

/* The same with a key that is data, not a protocol field. */
void wire_put_key_str(wire_writer_t *self, const char *key, const char *value);
void wire_put_key_strn(wire_writer_t *self, const char *key, const char *value, size_t len);
void wire_put_key_int(wire_writer_t *self, const char *key, int64_t value);
void wire_put_key_bool(wire_writer_t *self, const char *key, bool value);
void wire_put_key_float(wire_writer_t *self, const char *key, double value);
void wire_put_key_raw(wire_writer_t *self, const char *key, const void *raw, size_t len);

/* Opens a nested map or array under `field` (or `key`; the key is NULL when the parent
 * is an array). One opened WIRE_MAX_DEPTH deep is written as nil and what is put into it
 * dropped, until its wire_close: the message stays valid, and wire_writer_too_deep() says
 * it happened. */
void wire_open_map(wire_writer_t *self, field_t field);
void wire_open_array(wire_writer_t *self, field_t field);
void wire_open_map_key(wire_writer_t *self, const char *key);
void wire_open_array_key(wire_writer_t *self, const char *key);
/* Closes the innermost open map or array. */
void wire_close(wire_writer_t *self);

/* Elements of the innermost open array. */
void wire_elem_str(wire_writer_t *self, const char *value);
void wire_elem_raw(wire_writer_t *self, const void *raw, size_t len);

/* True when a container was opened too deep since the last start (its content is lost):
 * writers of untrusted nesting (JSON from a user or an agent) check it and refuse. */
bool wire_writer_too_deep(const wire_writer_t *self);

/* Bytes written so far (containers still open are counted as they stand). */
size_t wire_writer_size(const wire_writer_t *self);

/* Closes the top-level map and returns the encoded bytes, owned by the writer and valid
 * until the next start/destroy. */
const void *wire_writer_data(wire_writer_t *self, size_t *len);

#endif
