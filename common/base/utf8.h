/* utf8: UTF-8 text checked, cut without splitting a character, and repaired (U+FFFD for
 * each byte that is not part of a valid character). Used by the wire codec (strings on the
 * bus must be UTF-8), by msgjson (JSON strings must be) and wherever a text is cut to a
 * size. No dependencies: the base layer, under both. */
#ifndef CLOISTER_UTF8_H
#define CLOISTER_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length (1 to 4) of the valid UTF-8 character the `len` (> 0) bytes at `text` start
 * with, or 0 when they do not start with one (a stray continuation byte, a sequence cut
 * short, an overlong form, a surrogate, or a code point above U+10FFFF). */
size_t utf8_char(const char *text, size_t len);

/* True if all `len` bytes at `text` are valid UTF-8 (NUL bytes included: U+0000 is). */
bool utf8_valid(const char *text, size_t len);

/* A malloc'd copy of `len` bytes at `text` with U+FFFD for each byte that is not part of a
 * valid UTF-8 character, NUL-terminated, its length in *out_len; the caller frees. NULL
 * when memory runs out. */
char *utf8_repair(const char *text, size_t len, size_t *out_len);

/* The length of the longest prefix of the NUL-terminated `text` that is at most `max`
 * bytes and does not end inside a valid UTF-8 character (so "%.*s" with it never cuts one
 * in half). Bytes that are not valid UTF-8 count as one character each. */
size_t utf8_cut(const char *text, size_t max);

/* Copies `src` into `dst` (`size` > 0 bytes, NUL-terminated), cut with utf8_cut()
 * so no character is cut in half. */
void utf8_copy(char *dst, size_t size, const char *src);

#endif
