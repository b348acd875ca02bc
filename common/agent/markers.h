/* markers: reads the result-marker blocks that agents end their output with.
 *
 * A specialist's prompt asks the agent to finish with lines such as
 *
 *     MERGE_RESULT: SUCCESS
 *     RESOLVED_FILES: src/a.ts, src/b.ts
 *     TESTS: PASS
 *     FAILURES:
 *     - test/foo.spec.ts: edge case - AssertionError
 *     NOTES: kept both imports
 *
 * A marker line is `KEY: value` where KEY is UPPER_SNAKE (a capital letter, then capitals,
 * digits or '_'; at least two characters). Agents decorate these lines, so the parser also
 * accepts `**KEY:** value`, `**KEY**: value`, `` `KEY: value` ``, a leading bullet (`- `,
 * `* `, `+ `), a heading (`## `) or a quote (`> `), CRLF line ends and code fences. A key
 * with an empty value followed by item lines (`- item`, `* item`, `1. item`, `2) item`) is a
 * list; a line indented under an item carries on that item. Other lines are noise: they
 * are ignored and end a list.
 *
 * A *block* starts at a line whose key is the anchor (MERGE_RESULT, REVIEW_RESULT,
 * TEST_RESULT, ...) and runs to the next anchor line or the end of the text; keys written
 * before the first anchor line belong to the first block unless it sets them itself. Inside
 * a block a repeated key keeps its last value. markers_parse() picks the last block that has
 * every required key; if none has, the last block (so the caller still sees what the agent
 * said).
 *
 * The result owns copies of every key, value and item. Agent output is untrusted: nothing
 * here asserts on it, and at most MARKERS_MAX_KEYS keys and MARKERS_MAX_ITEMS items per key
 * are kept (extra ones are dropped). */
#ifndef CLOISTER_MARKERS_H
#define CLOISTER_MARKERS_H

#include <stddef.h>

#define MARKERS_MAX_KEYS 128
#define MARKERS_MAX_ITEMS 500

typedef struct markers_t markers_t;

/* Parses `text` (the agent's whole output, NUL-terminated) for the last block anchored at
 * `anchor`, and checks that every key in `required` (a NULL-terminated array, or NULL for
 * none) is present; the anchor itself is always required.
 * On return *out holds what was found (possibly nothing) even when the result is an error;
 * the caller owns it and frees it with markers_destroy().
 * Returns 0; FAILURE_INVALID when required keys are missing, with the reason
 * "missing MERGE_RESULT, TESTS" (markers_missing() gives the same list); FAILURE_MEMORY
 * (and *out NULL) if an allocation failed. */
int markers_parse(markers_t **out, const char *text, const char *anchor,
                  const char *const *required);

/* Collects every marker line in `text`, with no anchor and no block: a key seen twice
 * keeps its last value (and its last list). For generic workers that report free-form
 * markers. Returns 0 with *out owned by the caller, or FAILURE_MEMORY (and *out NULL). */
int markers_parse_all(markers_t **out, const char *text);

/* Frees the markers and nulls the caller's pointer. Safe on NULL. */
void markers_destroy(markers_t **self_p);

/* The trimmed value of `key` (without markdown emphasis), "" for a key written with an
 * empty value, or NULL when the key is absent. The string is owned by the markers. */
const char *markers_get(const markers_t *self, const char *key);

/* The items of `key`: its `- item` lines when it has any, otherwise its value split on
 * commas (items trimmed, empty ones dropped). A value of "none", "n/a", "-" or one in
 * parentheses such as "(if any)" gives zero items. Sets *n and returns the array, or NULL
 * with *n = 0 when the key is absent or has no items. The array and its strings are owned
 * by the markers and live until markers_destroy(). */
const char *const *markers_list(markers_t *self, const char *key, size_t *n);

/* Checks that the value of `key` is one of `allowed` (NULL-terminated), ignoring case; a
 * value that starts with an allowed word and goes on with a note ("SUCCESS - merged
 * cleanly", "PASS (42 tests)") also matches, but a template echo like "SUCCESS|FAILURE" or
 * "SUCCESS or FAILURE" (a value naming two of the allowed words) never does. On a match the stored value becomes the spelling in `allowed`, so callers can
 * compare with strcmp. Returns 0, FAILURE_NOT_FOUND if the key is absent, FAILURE_INVALID
 * with a reason like "MERGE_RESULT is \"MAYBE\", expected SUCCESS|FAILURE", or
 * FAILURE_MEMORY. */
int markers_expect(markers_t *self, const char *key, const char *const *allowed);

/* The required keys that were missing, comma-separated ("MERGE_RESULT, TESTS"), or "" when
 * none were. Owned by the markers. Always "" after markers_parse_all(). */
const char *markers_missing(const markers_t *self);

/* Number of keys found, and the key / value at index i (0 <= i < count), in the order the
 * keys first appeared. Strings owned by the markers. */
size_t markers_count(const markers_t *self);
const char *markers_key_at(const markers_t *self, size_t i);
const char *markers_value_at(const markers_t *self, size_t i);

#endif
