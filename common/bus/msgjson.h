/* msgjson: conversion between msgpack values and JSON (jansson), for the places where
 * Cloister meets people and scripts: `pan ... --json`, the task a generic worker hands its
 * command on stdin, and JSON given on the command line. */
#ifndef CLOISTER_MSGJSON_H
#define CLOISTER_MSGJSON_H

#include "wire.h"

#include <jansson.h>

/* A new JSON value for a msgpack object (maps with non-string keys get the keys rendered
 * as strings; bin becomes a string; a NaN or infinite float becomes null, which JSON has
 * no number for). Strings and keys that are not valid UTF-8 get U+FFFD for each byte that
 * is not part of a valid character, so the value can always be dumped as JSON. The caller
 * owns the result (json_decref); NULL only when memory runs out. */
json_t *msgjson_from_object(const msgpack_object *obj);

/* A new JSON string for `len` bytes at `text` (borrowed; may hold NUL bytes), with U+FFFD
 * for every byte that is not part of a valid UTF-8 character. The caller owns the result;
 * NULL only when memory runs out. */
json_t *msgjson_string(const char *text, size_t len);

/* Decodes raw msgpack bytes into a new JSON value; NULL if the bytes are not one valid
 * msgpack value. The caller owns the result. */
json_t *msgjson_from_raw(const void *raw, size_t len);

/* Writes a JSON value as the value of `key` in the writer's innermost container (key NULL
 * inside an array). */
void msgjson_put(wire_writer_t *writer, const char *key, const json_t *value);

/* Starts the writer with a bare map holding the members of JSON object `object` (the raw
 * bytes are then wire_writer_data()). Returns 0, or FAILURE_INVALID when `object` is not
 * an object or is nested deeper than the writer takes. */
int msgjson_to_map(wire_writer_t *writer, const json_t *object);

#endif
