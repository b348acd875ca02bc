/* toml: a reader for the part of TOML that cloister.toml uses.
 *
 * [table] and [a.b] headers, `key = value` lines, comments; values are basic and literal
 * strings (with escapes), integers (decimal, hex, octal, binary, underscores), floats,
 * booleans and one-line or multi-line arrays of one kind. Not supported, each with a clear
 * error: arrays of tables, dotted keys, inline tables, dates, multi-line strings.
 *
 * The reader is a plain recursive-descent parser over a byte buffer that need not be
 * NUL-terminated (the fuzz target hands it raw bytes); it never reads past `len`. It
 * knows nothing of what the keys mean: it hands each header and each key/value to the
 * caller's handler, which keeps what it wants and may refuse with toml_error_at(). Every
 * error reads "file:line:col: expected X, found Y". */
#ifndef CLOISTER_TOML_H
#define CLOISTER_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { TOML_STRING, TOML_INT, TOML_FLOAT, TOML_BOOL, TOML_ARRAY } toml_kind_t;

typedef struct toml_value_t {
    toml_kind_t kind;
    char *string;               /* TOML_STRING */
    int64_t integer;            /* TOML_INT */
    double number;              /* TOML_FLOAT */
    bool boolean;               /* TOML_BOOL */
    struct toml_value_t *items; /* TOML_ARRAY: strings or integers, all of one kind */
    size_t nitems;
} toml_value_t;

/* Frees what `value` owns and zeroes it. */
void toml_value_free(toml_value_t *value);

/* "a string", "an integer", "an array of integers", ...: for messages. */
const char *toml_kind_name(const toml_value_t *value);

/* Where something starts in the text, for an error reported later (the column is worked
 * out only then, so long lines stay linear). */
typedef struct {
    int line; /* 1-based */
    size_t line_start;
    size_t pos;
} toml_mark_t;

typedef struct toml_reader_t toml_reader_t;

/* What the reader calls. Each returns 0 to go on, or a failure (usually from
 * toml_error_at()) that stops the reading and is returned by toml_parse(). */
typedef struct {
    /* A [header]: `name` is its dotted path ("specialists.merge-agent"), `at` its '['. */
    int (*table)(toml_reader_t *reader, toml_mark_t at, const char *name, void *arg);
    /* A `key = value` line of the current table. `value` is the reader's: the handler may
     * take what it owns by moving it out and zeroing *value. */
    int (*key_value)(toml_reader_t *reader, toml_mark_t key_at, const char *key,
                     toml_mark_t value_at, toml_value_t *value, void *arg);
} toml_handler_t;

/* Reads `len` bytes of `text` (`name` for messages) and calls `handler`. Returns 0,
 * FAILURE_INVALID ("name:line:col: expected X, found Y"), FAILURE_MEMORY, or what a
 * handler returned. */
int toml_parse(const char *name, const char *text, size_t len, const toml_handler_t *handler,
               void *arg);

/* Sets the failure "name:line:col: expected <expected>, found <found>" at `at` and returns
 * FAILURE_INVALID. */
int toml_error_at(const toml_reader_t *reader, toml_mark_t at, const char *expected,
                  const char *found);

/* The file name the reader was given (for warnings). */
const char *toml_name(const toml_reader_t *reader);

#endif
