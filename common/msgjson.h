/* msgjson: conversion between msgpack values and JSON (jansson), for the places where
 * Cloister meets people and scripts: `pan ... --json`, the task a generic worker hands its
 * command on stdin, and JSON given on the command line. */
#ifndef CLOISTER_MSGJSON_H
#define CLOISTER_MSGJSON_H

#include "wire.h"

#include <jansson.h>

/* A new JSON value for a msgpack object (maps with non-string keys get the keys rendered
 * as strings; bin becomes a string). The caller owns the result (json_decref). */
json_t *msgjson_from_object(const msgpack_object *obj);

/* Decodes raw msgpack bytes into a new JSON value; NULL if the bytes are not one valid
 * msgpack value. The caller owns the result. */
json_t *msgjson_from_raw(const void *raw, size_t len);

/* Writes a JSON value as the value of `key` in the writer's innermost container (key NULL
 * inside an array). */
void msgjson_put(wire_writer_t *writer, const char *key, const json_t *value);

#endif
