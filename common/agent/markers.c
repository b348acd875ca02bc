/* markers: parser for the `KEY: value` result blocks agents print (see markers.h).
 *
 * Each line is classified once (s_line_read) as blank, fence, marker, bullet item or
 * noise; a small state machine (s_block_feed) then builds the key table. A bullet line that
 * also reads as a marker is ambiguous: under a key written with an empty value (an explicit
 * list such as `FAILURES:`) it is an item, unless that key was itself a bullet and this line
 * is not indented deeper — which is how agents write bulleted marker blocks:
 *
 *     - **FAILURES:**
 *       - test_a - boom          <- item
 *     - **NOTES:** done          <- marker
 */
#include "markers.h"

#include "failure.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *key;
    char *value;
    char **items; /* the `- item` lines under the key */
    size_t nitems;
    char **split; /* value split on commas, computed on first markers_list() */
    size_t nsplit;
    bool split_done;
} s_entry_t;

struct markers_t {
    s_entry_t entries[MARKERS_MAX_KEYS];
    size_t count;
    char *missing;
};

typedef enum { S_LINE_BLANK, S_LINE_FENCE, S_LINE_MARKER, S_LINE_NOISE } s_line_kind_t;

typedef struct {
    s_line_kind_t kind;
    size_t indent;
    bool bullet;      /* starts with "- ", "* " or "+ " */
    const char *item; /* bullet text, trimmed (valid when bullet) */
    size_t item_len;
    const char *key; /* marker key (valid when kind == S_LINE_MARKER) */
    size_t key_len;
    const char *value; /* marker value, trimmed, emphasis removed */
    size_t value_len;
    const char *text; /* the whole line, trimmed */
    size_t text_len;
} s_line_t;

/* Parser state inside one block. */
typedef struct {
    markers_t *m;
    s_entry_t *cur;   /* the key that bullet items attach to, or NULL after noise */
    bool cur_is_list; /* cur was written with an empty value */
    bool cur_bullet;
    size_t cur_indent;
    int error; /* FAILURE_MEMORY once an allocation failed */
} s_block_t;

static bool s_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

static void s_trim(const char **s, size_t *len)
{
    while (*len > 0 && s_is_space(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && s_is_space((*s)[*len - 1]))
        (*len)--;
}

static bool s_starts(const char *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static bool s_ends(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool s_contains(const char *s, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(s + i, needle, n) == 0)
            return true;
    }
    return false;
}

/* Removes markdown emphasis wrapped around a whole value: "**X**", "__X__", "`X`", "*X*"
 * (but not around "`a`, `b`", where the marks belong to the items). */
static void s_unwrap(const char **s, size_t *len)
{
    static const char *const wraps[] = {"**", "__", "`", "*", NULL};
    bool changed = true;
    while (changed) {
        changed = false;
        for (int i = 0; wraps[i]; i++) {
            size_t n = strlen(wraps[i]);
            if (*len >= 2 * n && s_starts(*s, *len, wraps[i]) && s_ends(*s, *len, wraps[i]) &&
                !s_contains(*s + n, *len - 2 * n, wraps[i])) {
                *s += n;
                *len -= 2 * n;
                s_trim(s, len);
                changed = true;
            }
        }
    }
}

/* Reads `KEY: value` (with optional emphasis) from s; fills the marker fields of `line`. */
static bool s_read_marker(const char *s, size_t len, s_line_t *line)
{
    /* Skip a heading or quote prefix. */
    while (len > 0 && (*s == '#' || *s == '>')) {
        s++;
        len--;
    }
    s_trim(&s, &len);
    /* Leading emphasis, remembered so a matching trailer can be dropped from the value. */
    const char *open = s;
    while (len > 0 && (*s == '*' || *s == '_' || *s == '`')) {
        s++;
        len--;
    }
    size_t open_len = (size_t)(s - open);
    if (len == 0 || !(*s >= 'A' && *s <= 'Z'))
        return false;
    const char *key = s;
    while (len > 0 && ((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) {
        s++;
        len--;
    }
    size_t key_len = (size_t)(s - key);
    while (key_len > 0 && key[key_len - 1] == '_') /* "__KEY__:" */
        key_len--;
    if (key_len < 2)
        return false;
    while (len > 0 && (*s == '*' || *s == '`' || *s == ' '))
        s++, len--;
    if (len == 0 || *s != ':')
        return false;
    s++;
    len--;
    while (len > 0 && (*s == '*' || *s == '`'))
        s++, len--;
    s_trim(&s, &len);
    s_unwrap(&s, &len);
    /* "**KEY: value**" or "`KEY: value`": drop the closing emphasis. */
    if (open_len > 0 && len >= open_len && memcmp(s + len - open_len, open, open_len) == 0) {
        len -= open_len;
        s_trim(&s, &len);
    }
    s_unwrap(&s, &len);
    line->key = key;
    line->key_len = key_len;
    line->value = s;
    line->value_len = len;
    return true;
}

/* Length of a list mark opening the line -- "- ", "* ", "+ ", or a number with "." or ")"
 * and a space ("1. ", "12) ") -- or 0 when the line has none. */
static size_t s_bullet_length(const char *s, size_t len)
{
    if (len >= 2 && (s[0] == '-' || s[0] == '*' || s[0] == '+') && (s[1] == ' ' || s[1] == '\t'))
        return 2;
    size_t digits = 0;
    while (digits < len && digits < 4 && s[digits] >= '0' && s[digits] <= '9')
        digits++;
    if (digits > 0 && digits + 1 < len && (s[digits] == '.' || s[digits] == ')') &&
        (s[digits + 1] == ' ' || s[digits + 1] == '\t'))
        return digits + 2;
    return 0;
}

static void s_line_read(const char *s, size_t len, s_line_t *line)
{
    memset(line, 0, sizeof *line);
    while (len > 0 && s[len - 1] == '\r')
        len--;
    while (line->indent < len && (s[line->indent] == ' ' || s[line->indent] == '\t'))
        line->indent++;
    s += line->indent;
    len -= line->indent;
    s_trim(&s, &len);
    line->text = s;
    line->text_len = len;
    if (len == 0) {
        line->kind = S_LINE_BLANK;
        return;
    }
    if (s_starts(s, len, "```") || s_starts(s, len, "~~~")) {
        line->kind = S_LINE_FENCE;
        return;
    }
    size_t mark = s_bullet_length(s, len);
    if (mark > 0) {
        line->bullet = true;
        line->item = s + mark;
        line->item_len = len - mark;
        s_trim(&line->item, &line->item_len);
        s = line->item;
        len = line->item_len;
    }
    line->kind = s_read_marker(s, len, line) ? S_LINE_MARKER : S_LINE_NOISE;
}

static void s_free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void s_entry_clear_lists(s_entry_t *e)
{
    s_free_strings(e->items, e->nitems);
    s_free_strings(e->split, e->nsplit);
    e->items = NULL;
    e->nitems = 0;
    e->split = NULL;
    e->nsplit = 0;
    e->split_done = false;
}

static s_entry_t *s_find(const markers_t *m, const char *key, size_t key_len)
{
    for (size_t i = 0; i < m->count; i++) {
        const s_entry_t *e = &m->entries[i];
        if (strlen(e->key) == key_len && memcmp(e->key, key, key_len) == 0)
            return (s_entry_t *)e;
    }
    return NULL;
}

/* Appends one string to a growing array; returns false on allocation failure. */
static bool s_push(char ***v, size_t *n, const char *s, size_t len)
{
    if (*n >= MARKERS_MAX_ITEMS)
        return true; /* over the cap: dropped on purpose */
    char **grown = realloc(*v, (*n + 1) * sizeof **v);
    if (!grown)
        return false;
    *v = grown;
    grown[*n] = strndup(s, len);
    if (!grown[*n])
        return false;
    (*n)++;
    return true;
}

/* Sets key = value in the block, replacing an earlier value and list of the same key. */
static void s_block_set(s_block_t *b, const s_line_t *line)
{
    s_entry_t *e = s_find(b->m, line->key, line->key_len);
    if (!e) {
        if (b->m->count >= MARKERS_MAX_KEYS) {
            b->cur = NULL; /* over the cap: dropped on purpose */
            return;
        }
        e = &b->m->entries[b->m->count];
        e->key = strndup(line->key, line->key_len);
        if (!e->key) {
            b->error = FAILURE_MEMORY;
            return;
        }
        b->m->count++;
    }
    char *value = strndup(line->value, line->value_len);
    if (!value) {
        b->error = FAILURE_MEMORY;
        return;
    }
    free(e->value);
    e->value = value;
    s_entry_clear_lists(e);
    b->cur = e;
    b->cur_is_list = line->value_len == 0;
    b->cur_bullet = line->bullet;
    b->cur_indent = line->indent;
}

/* Appends " <more>" to *item; returns false on allocation failure. */
static bool s_append(char **item, const char *more, size_t len)
{
    size_t had = strlen(*item);
    char *grown = realloc(*item, had + 1 + len + 1);
    if (!grown)
        return false;
    grown[had] = ' ';
    memcpy(grown + had + 1, more, len);
    grown[had + 1 + len] = '\0';
    *item = grown;
    return true;
}

static void s_block_feed(s_block_t *b, const s_line_t *line)
{
    if (line->kind == S_LINE_BLANK || line->kind == S_LINE_FENCE)
        return;
    if (line->bullet && b->cur) {
        bool is_item;
        if (line->kind != S_LINE_MARKER)
            is_item = true;
        else if (b->cur_is_list)
            is_item = !(b->cur_bullet && line->indent <= b->cur_indent);
        else
            is_item = false;
        if (is_item) {
            if (!s_push(&b->cur->items, &b->cur->nitems, line->item, line->item_len))
                b->error = FAILURE_MEMORY;
            return;
        }
    }
    if (line->kind == S_LINE_MARKER) {
        s_block_set(b, line);
    } else if (b->cur && b->cur->nitems > 0 && line->indent > b->cur_indent) {
        /* An indented line under an item carries on that item. */
        if (!s_append(&b->cur->items[b->cur->nitems - 1], line->text, line->text_len))
            b->error = FAILURE_MEMORY;
    } else {
        b->cur = NULL;
    }
}

static markers_t *s_markers_new(void)
{
    return calloc(1, sizeof(markers_t));
}

void markers_destroy(markers_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    markers_t *self = *self_p;
    for (size_t i = 0; i < self->count; i++) {
        free(self->entries[i].key);
        free(self->entries[i].value);
        s_entry_clear_lists(&self->entries[i]);
    }
    free(self->missing);
    free(self);
    *self_p = NULL;
}

/* Builds the "missing" list for `m`; returns the number of missing keys, or -1 on OOM. */
static int s_check_required(markers_t *m, const char *anchor, const char *const *required)
{
    size_t cap = 1;
    size_t nreq = 0;
    if (anchor)
        cap += strlen(anchor) + 2;
    for (size_t i = 0; required && required[i]; i++, nreq++)
        cap += strlen(required[i]) + 2;
    free(m->missing);
    m->missing = calloc(1, cap);
    if (!m->missing)
        return -1;
    int missing = 0;
    for (size_t i = 0; i <= nreq; i++) {
        const char *key = i == 0 ? anchor : required[i - 1];
        if (!key || (i > 0 && anchor && strcmp(key, anchor) == 0))
            continue;
        if (s_find(m, key, strlen(key)))
            continue;
        if (missing++ > 0)
            strcat(m->missing, ", ");
        strcat(m->missing, key);
    }
    return missing;
}

/* Cuts the next line (without its '\n') from *p and advances *p past it. */
static void s_next_line(const char **p, const char **line, size_t *len)
{
    const char *nl = strchr(*p, '\n');
    *line = *p;
    *len = nl ? (size_t)(nl - *p) : strlen(*p);
    *p = nl ? nl + 1 : *p + *len;
}

/* Moves every key of `from` that `into` lacks over to `into` (the keys an agent wrote just
 * before its first anchor line belong to that block). */
static void s_take_missing(markers_t *into, markers_t *from)
{
    for (size_t i = 0; i < from->count && into->count < MARKERS_MAX_KEYS; i++) {
        s_entry_t *e = &from->entries[i];
        if (s_find(into, e->key, strlen(e->key)) != NULL)
            continue;
        into->entries[into->count++] = *e;
        memset(e, 0, sizeof *e);
    }
}

int markers_parse(markers_t **out, const char *text, const char *anchor,
                  const char *const *required)
{
    *out = NULL;
    markers_t *current = s_markers_new();
    markers_t *best = NULL;     /* the last complete block before `current` */
    markers_t *preamble = s_markers_new(); /* keys before the first anchor */
    if (!current || !preamble) {
        markers_destroy(&current);
        markers_destroy(&preamble);
        return failure_set(FAILURE_MEMORY, "out of memory parsing markers");
    }
    s_block_t before = {.m = preamble};
    s_block_t b = {.m = current};
    bool in_block = false;
    const char *p = text ? text : "";
    int rc = 0;
    while (*p) {
        const char *s;
        size_t len;
        s_next_line(&p, &s, &len);
        s_line_t line;
        s_line_read(s, len, &line);
        bool is_anchor = line.kind == S_LINE_MARKER && line.key_len == strlen(anchor) &&
                         memcmp(line.key, anchor, line.key_len) == 0;
        if (is_anchor && in_block) {
            if (preamble) {
                s_take_missing(current, preamble);
                markers_destroy(&preamble);
            }
            int missing = s_check_required(current, anchor, required);
            markers_t *next = s_markers_new();
            if (missing < 0 || !next) {
                free(next);
                b.error = FAILURE_MEMORY;
                break;
            }
            if (missing == 0) {
                markers_destroy(&best);
                best = current;
            } else {
                markers_destroy(&current);
            }
            current = next;
            b = (s_block_t){.m = current};
        }
        if (is_anchor)
            in_block = true;
        if (in_block)
            s_block_feed(&b, &line);
        else
            s_block_feed(&before, &line);
        if (b.error || before.error) {
            b.error = FAILURE_MEMORY;
            break;
        }
    }
    if (preamble && in_block && !b.error)
        s_take_missing(current, preamble);
    markers_destroy(&preamble);
    int missing = b.error ? -1 : s_check_required(current, anchor, required);
    if (missing < 0) {
        rc = failure_set(FAILURE_MEMORY, "out of memory parsing markers");
        markers_destroy(&current);
        markers_destroy(&best);
        return rc;
    }
    if (missing > 0 && best) {
        markers_destroy(&current);
        current = best;
        best = NULL;
        missing = 0;
    }
    markers_destroy(&best);
    if (missing > 0)
        rc = failure_set(FAILURE_INVALID, "missing %s", current->missing);
    *out = current;
    return rc;
}

int markers_parse_all(markers_t **out, const char *text)
{
    *out = NULL;
    markers_t *m = s_markers_new();
    if (!m)
        return failure_set(FAILURE_MEMORY, "out of memory parsing markers");
    m->missing = strdup("");
    s_block_t b = {.m = m};
    if (!m->missing)
        b.error = FAILURE_MEMORY;
    const char *p = text ? text : "";
    while (*p && !b.error) {
        const char *s;
        size_t len;
        s_next_line(&p, &s, &len);
        s_line_t line;
        s_line_read(s, len, &line);
        s_block_feed(&b, &line);
    }
    if (b.error) {
        markers_destroy(&m);
        return failure_set(FAILURE_MEMORY, "out of memory parsing markers");
    }
    *out = m;
    return 0;
}

const char *markers_get(const markers_t *self, const char *key)
{
    const s_entry_t *e = s_find(self, key, strlen(key));
    return e ? e->value : NULL;
}

static bool s_means_none(const char *v)
{
    size_t len = strlen(v);
    return len == 0 || strcasecmp(v, "none") == 0 || strcasecmp(v, "n/a") == 0 ||
           strcmp(v, "-") == 0 || (v[0] == '(' && v[len - 1] == ')');
}

/* Splits e->value on commas into e->split (once). */
static void s_split(s_entry_t *e)
{
    if (e->split_done)
        return;
    e->split_done = true;
    if (s_means_none(e->value))
        return;
    const char *p = e->value;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        s_trim(&item, &len);
        s_unwrap(&item, &len);
        if (len > 0 && !s_push(&e->split, &e->nsplit, item, len)) {
            /* Out of memory: give back what was split so far rather than nothing. */
            return;
        }
        p = comma ? comma + 1 : p + strlen(p);
    }
}

const char *const *markers_list(markers_t *self, const char *key, size_t *n)
{
    *n = 0;
    s_entry_t *e = s_find(self, key, strlen(key));
    if (!e)
        return NULL;
    if (e->nitems > 0) {
        *n = e->nitems;
        return (const char *const *)e->items;
    }
    s_split(e);
    *n = e->nsplit;
    return e->nsplit > 0 ? (const char *const *)e->split : NULL;
}

/* True when `value` is `word`, or starts with it followed by a note ("SUCCESS - merged",
 * "PASS (42 tests)"), ignoring case. A value holding '|' is an echo of the prompt's
 * template ("SUCCESS|FAILURE") and only matches exactly. */
static bool s_value_is(const char *value, const char *word)
{
    size_t n = strlen(word);
    if (strcasecmp(value, word) == 0)
        return true;
    if (strchr(value, '|') || strncasecmp(value, word, n) != 0)
        return false;
    char next = value[n];
    return next == ' ' || next == '\t' || next == '.' || next == ',' || next == ';' ||
           next == ':' || next == '(' || next == '!' || next == '-';
}

/* True when `word` appears in `value` as a whole word, spelt as given (the prompt's
 * template writes the answers in capitals; "cannot be approved" in a note is not one). */
static bool s_has_word(const char *value, const char *word)
{
    size_t n = strlen(word);
    for (const char *at = value; (at = strstr(at, word)) != NULL; at++) {
        bool starts = at == value || !(isalnum((unsigned char)at[-1]) || at[-1] == '_');
        bool ends = !(isalnum((unsigned char)at[n]) || at[n] == '_');
        if (starts && ends)
            return true;
    }
    return false;
}

int markers_expect(markers_t *self, const char *key, const char *const *allowed)
{
    s_entry_t *e = s_find(self, key, strlen(key));
    if (!e)
        return failure_set(FAILURE_NOT_FOUND, "missing %s", key);
    char expected[512] = "";
    size_t used = 0;
    size_t named = 0;
    for (size_t i = 0; allowed[i]; i++)
        named += s_has_word(e->value, allowed[i]);
    for (size_t i = 0; allowed[i]; i++) {
        /* A value naming two of the answers ("APPROVED, CHANGES_REQUESTED or COMMENTED")
         * is the prompt's template echoed back, not an answer. */
        if (named < 2 && s_value_is(e->value, allowed[i])) {
            char *canonical = strdup(allowed[i]);
            if (!canonical)
                return failure_set(FAILURE_MEMORY, "out of memory checking %s", key);
            free(e->value);
            e->value = canonical;
            e->split_done = false;
            s_free_strings(e->split, e->nsplit);
            e->split = NULL;
            e->nsplit = 0;
            return 0;
        }
        int w = snprintf(expected + used, sizeof expected - used, "%s%s", i ? "|" : "", allowed[i]);
        if (w > 0 && (size_t)w < sizeof expected - used)
            used += (size_t)w;
    }
    return failure_set(FAILURE_INVALID, "%s is \"%.200s\", expected %s", key, e->value, expected);
}

const char *markers_missing(const markers_t *self)
{
    return self->missing ? self->missing : "";
}

size_t markers_count(const markers_t *self)
{
    return self->count;
}

const char *markers_key_at(const markers_t *self, size_t i)
{
    return i < self->count ? self->entries[i].key : NULL;
}

const char *markers_value_at(const markers_t *self, size_t i)
{
    return i < self->count ? self->entries[i].value : NULL;
}
