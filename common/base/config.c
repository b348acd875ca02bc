/* config: the cloister.toml parser, the known-key schema with its defaults, the
 * environment overrides and the getters (see config.h).
 *
 * Notes for readers:
 * - The parser is a plain recursive-descent reader over a byte buffer that need not be
 *   NUL-terminated (the fuzz target hands it raw bytes). It never reads past `len`.
 * - Every error goes through s_error(), which builds "file:line:col: expected X, found Y".
 *   `found` is described by s_describe() from the bytes at the error position, or given
 *   explicitly when the problem is a whole value (a wrong type, a duplicate).
 * - Defaults are real entries (from_file == false) placed in the tables before parsing, so
 *   the generic getters find them; a file entry replaces a default, and a second file
 *   entry for the same key is a duplicate. Likewise a table's `declared` flag tells a
 *   default table from one whose [header] has already appeared.
 * - Specialist tables have per-specialist defaults, so they are not pre-filled; the
 *   config_specialist_*() getters supply those defaults. */
#include "config.h"

#include "failure.h"
#include "home.h"
#include "log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { VALUE_STRING, VALUE_INT, VALUE_FLOAT, VALUE_BOOL, VALUE_ARRAY } value_kind_t;

typedef struct value_t {
    value_kind_t kind;
    char *string;          /* VALUE_STRING */
    int64_t integer;       /* VALUE_INT */
    double number;         /* VALUE_FLOAT */
    bool boolean;          /* VALUE_BOOL */
    struct value_t *items; /* VALUE_ARRAY: strings or integers, all of one kind */
    size_t nitems;
} value_t;

typedef struct {
    char *key;
    value_t value;
    bool from_file; /* false for a default or an environment override */
    int line;       /* where the file set it (0 if not from the file) */
} entry_t;

typedef struct {
    char *name; /* dotted path, specialist names normalised */
    entry_t *entries;
    size_t count;
    size_t capacity;
    bool declared; /* its [header] appeared in the file */
    int line;      /* where that header was */
} table_t;

struct config_t {
    table_t *tables;
    size_t count;
    size_t capacity;
};

/* ---------------------------------------------------------------- schema -------------- */

typedef enum {
    SCHEMA_STRING,
    SCHEMA_INT,
    SCHEMA_FLOAT,
    SCHEMA_BOOL,
    SCHEMA_STRING_ARRAY
} schema_type_t;

/* One known key. `table` "specialists.*" stands for every [specialists.<name>] table. */
typedef struct {
    const char *table;
    const char *key;
    schema_type_t type;
    bool has_default;
    const char *default_string;
    int64_t default_int;
    int64_t min;         /* smallest accepted integer / float */
    const char *choices; /* "a|b|c": the only accepted strings, or NULL */
} schema_t;

#define SPECIALIST_TABLE "specialists.*"
#define SPECIALIST_PREFIX "specialists."

static const schema_t s_schema[] = {
    {"broker", "in", SCHEMA_STRING, true, "tcp://127.0.0.1:5560", 0, 0, NULL},
    {"broker", "events", SCHEMA_STRING, true, "tcp://127.0.0.1:5561", 0, 0, NULL},
    {"broker", "control", SCHEMA_STRING, true, "tcp://127.0.0.1:5562", 0, 0, NULL},
    {"broker", "sync", SCHEMA_STRING, true, "full", 0, 0, "full|normal|off"},
    {"broker", "heartbeat_ms", SCHEMA_INT, true, NULL, 1000, 1, NULL},
    {"broker", "heartbeat_misses", SCHEMA_INT, true, NULL, 3, 1, NULL},
    {"broker", "event_retention", SCHEMA_INT, true, NULL, 100000, 1, NULL},
    {"broker", "max_attempts", SCHEMA_INT, true, NULL, 3, 1, NULL},
    {"broker", "retry_backoff_ms", SCHEMA_INT, true, NULL, 1000, 0, NULL},
    {"broker", "wal_limit_mb", SCHEMA_INT, true, NULL, 64, 1, NULL},
    {"broker", "min_free_mb", SCHEMA_INT, true, NULL, 64, 0, NULL},
    {"broker", "reserve_mb", SCHEMA_INT, true, NULL, 16, 0, NULL},
    {"broker", "keep_finished_days", SCHEMA_INT, true, NULL, 30, 0, NULL},

    {"agent", "command", SCHEMA_STRING, true, "claude", 0, 0, NULL},
    {"agent", "args", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "permission_mode", SCHEMA_STRING, true, "acceptEdits", 0, 0, NULL},
    {"agent", "allowed_tools", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "disallowed_tools", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "max_turns", SCHEMA_INT, true, NULL, 50, 1, NULL},
    {"agent", "max_budget_usd", SCHEMA_FLOAT, false, NULL, 0, 0, NULL},
    {"agent", "session_token_limit", SCHEMA_INT, true, NULL, 150000, 1, NULL},
    {"agent", "no_output_timeout", SCHEMA_INT, true, NULL, 300, 1, NULL},
    {"agent", "result_grace_ms", SCHEMA_INT, true, NULL, 2000, 0, NULL},
    {"agent", "append_system_prompt", SCHEMA_STRING, false, NULL, 0, 0, NULL},

    {"agent", "prompts_dir", SCHEMA_STRING, false, NULL, 0, 0, NULL},

    {"review", "mode", SCHEMA_STRING, true, "normal", 0, 0, "strict|normal|yolo|disabled"},
    {"review", "checks", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"review", "check_timeout_s", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"review", "diff_budget_chars", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"review", "post", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"review", "gh_command", SCHEMA_STRING, false, NULL, 0, 0, NULL},

    {"context", "custom_instructions", SCHEMA_STRING, true, "", 0, 0, NULL},
    {"context", "relevant_files_limit", SCHEMA_INT, true, NULL, 10, 0, NULL},
    {"context", "tree_budget_chars", SCHEMA_INT, true, NULL, 4000, 0, NULL},
    {"context", "files_budget_chars", SCHEMA_INT, true, NULL, 12000, 0, NULL},
    {"context", "session_context_limit", SCHEMA_INT, true, NULL, 10, 0, NULL},

    {"merge", "remote", SCHEMA_STRING, true, "origin", 0, 0, NULL},
    {"merge", "push_retries", SCHEMA_INT, true, NULL, 3, 0, NULL},

    {"tests", "command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"tests", "timeout_s", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"tests", "sandbox", SCHEMA_STRING, false, NULL, 0, 0, "auto|bwrap|none"},
    {"tests", "env", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},

    {"security", "curve", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "allow_insecure", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "require_review", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "workspace_roots", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},

    {"pipeline", "after_review", SCHEMA_STRING, true, "merge", 0, 0, "merge|test|none"},
    {"pipeline", "after_test", SCHEMA_STRING, true, "none", 0, 0, "merge|none"},

    {SPECIALIST_TABLE, "enabled", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "auto_wake", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "model", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "test_command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "timeout", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {SPECIALIST_TABLE, "workdir", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "max_attempts", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {SPECIALIST_TABLE, "fix", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
};

#define SCHEMA_COUNT (sizeof s_schema / sizeof s_schema[0])

/* ---------------------------------------------------------------- values and tables --- */

static void s_value_free(value_t *value)
{
    free(value->string);
    for (size_t i = 0; i < value->nitems; i++)
        s_value_free(&value->items[i]);
    free(value->items);
    memset(value, 0, sizeof *value);
}

/* True if `name` is "specialists.<x>" with no further dot. */
static bool s_is_specialist_table(const char *name)
{
    size_t prefix = strlen(SPECIALIST_PREFIX);
    return strncmp(name, SPECIALIST_PREFIX, prefix) == 0 && name[prefix] != '\0'
        && strchr(name + prefix, '.') == NULL;
}

/* Compares a stored (normalised) table name with a name a caller asked for, treating `_`
 * in the caller's specialist segment as `-`. */
static bool s_table_name_equal(const char *stored, const char *query)
{
    size_t prefix = strlen(SPECIALIST_PREFIX);
    bool specialist = strncmp(query, SPECIALIST_PREFIX, prefix) == 0;
    bool in_segment = false;
    size_t i = 0;
    for (; stored[i] != '\0' && query[i] != '\0'; i++) {
        char q = query[i];
        if (specialist && i == prefix)
            in_segment = true;
        if (in_segment && q == '.')
            in_segment = false;
        if (in_segment && q == '_')
            q = '-';
        if (stored[i] != q)
            return false;
    }
    return stored[i] == query[i];
}

/* In a "specialists.<name>..." path, turns `_` into `-` within <name>. */
static void s_normalise_table_name(char *name)
{
    size_t prefix = strlen(SPECIALIST_PREFIX);
    if (strncmp(name, SPECIALIST_PREFIX, prefix) != 0)
        return;
    for (char *c = name + prefix; *c != '\0' && *c != '.'; c++) {
        if (*c == '_')
            *c = '-';
    }
}

static table_t *s_find_table(const config_t *self, const char *name)
{
    if (self == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < self->count; i++) {
        if (s_table_name_equal(self->tables[i].name, name))
            return &self->tables[i];
    }
    return NULL;
}

static entry_t *s_find_entry(const table_t *table, const char *key)
{
    if (table == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < table->count; i++) {
        if (strcmp(table->entries[i].key, key) == 0)
            return &table->entries[i];
    }
    return NULL;
}

static const value_t *s_find_value(const config_t *self, const char *table, const char *key)
{
    entry_t *entry = s_find_entry(s_find_table(self, table), key);
    return entry ? &entry->value : NULL;
}

/* Returns the table called `name` (already normalised), creating it if needed; NULL if
 * memory runs out. The pointer is valid until the next table is added. */
static table_t *s_add_table(config_t *self, const char *name)
{
    table_t *found = s_find_table(self, name);
    if (found != NULL)
        return found;
    if (self->count == self->capacity) {
        size_t capacity = self->capacity ? self->capacity * 2 : 8;
        table_t *tables = realloc(self->tables, capacity * sizeof *tables);
        if (tables == NULL)
            return NULL;
        self->tables = tables;
        self->capacity = capacity;
    }
    table_t *table = &self->tables[self->count];
    memset(table, 0, sizeof *table);
    table->name = strdup(name);
    if (table->name == NULL)
        return NULL;
    self->count++;
    return table;
}

/* Sets `key` in `table` to `*value`, taking ownership of the value's memory (it is zeroed
 * in the caller) whether or not this succeeds. Replaces an existing entry. Returns 0 or
 * FAILURE_MEMORY. */
static int s_table_set(table_t *table, const char *key, value_t *value, bool from_file, int line)
{
    entry_t *entry = s_find_entry(table, key);
    if (entry == NULL) {
        if (table->count == table->capacity) {
            size_t capacity = table->capacity ? table->capacity * 2 : 8;
            entry_t *entries = realloc(table->entries, capacity * sizeof *entries);
            if (entries == NULL) {
                s_value_free(value);
                return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
            }
            table->entries = entries;
            table->capacity = capacity;
        }
        entry = &table->entries[table->count];
        memset(entry, 0, sizeof *entry);
        entry->key = strdup(key);
        if (entry->key == NULL) {
            s_value_free(value);
            return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
        }
        table->count++;
    } else {
        s_value_free(&entry->value);
    }
    entry->value = *value;
    entry->from_file = from_file;
    entry->line = line;
    memset(value, 0, sizeof *value);
    return 0;
}

static int s_set_string(config_t *self, const char *table_name, const char *key,
                        const char *text)
{
    table_t *table = s_add_table(self, table_name);
    value_t value = {.kind = VALUE_STRING, .string = strdup(text)};
    if (table == NULL || value.string == NULL) {
        free(value.string);
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    }
    return s_table_set(table, key, &value, false, 0);
}

/* True if `text` is one of the `|`-separated words in `choices`. */
static bool s_is_choice(const char *choices, const char *text)
{
    size_t len = strlen(text);
    const char *word = choices;
    while (*word != '\0') {
        const char *end = strchr(word, '|');
        size_t word_len = end ? (size_t)(end - word) : strlen(word);
        if (word_len == len && strncmp(word, text, len) == 0)
            return true;
        if (end == NULL)
            break;
        word = end + 1;
    }
    return false;
}

/* ---------------------------------------------------------------- parser ------------- */

typedef struct {
    const char *name; /* file name for messages */
    const char *text;
    size_t len;
    size_t pos;
    int line;          /* 1-based line of `pos` */
    size_t line_start; /* offset of the first byte of that line */
    config_t *config;
    size_t table; /* index of the current table */
} parser_t;

/* A position remembered for an error reported later (a value's type, a duplicate). The
 * column is worked out only when an error is reported, so long lines stay linear. */
typedef struct {
    int line;
    size_t line_start;
    size_t pos;
} mark_t;

static mark_t s_mark(const parser_t *p)
{
    return (mark_t){p->line, p->line_start, p->pos};
}

static int s_error_at(const parser_t *p, mark_t at, const char *expected, const char *found)
{
    /* Columns count characters, so skip UTF-8 continuation bytes. */
    int col = 1;
    for (size_t i = at.line_start; i < at.pos; i++) {
        if (((unsigned char)p->text[i] & 0xC0) != 0x80)
            col++;
    }
    return failure_set(FAILURE_INVALID, "%s:%d:%d: expected %s, found %s", p->name, at.line,
                       col, expected, found);
}

static bool s_at_end(const parser_t *p)
{
    return p->pos >= p->len;
}

static int s_peek(const parser_t *p, size_t ahead)
{
    return p->pos + ahead < p->len ? (unsigned char)p->text[p->pos + ahead] : -1;
}

static bool s_is_bare_key_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
        || c == '_' || c == '-';
}

/* Characters that make up an unquoted value token (numbers, booleans, junk like `yes`). */
static bool s_is_token_char(int c)
{
    return s_is_bare_key_char(c) || c == '+' || c == '.';
}

static bool s_is_control(int c)
{
    return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7F;
}

static bool s_at_newline(const parser_t *p)
{
    return s_peek(p, 0) == '\n' || (s_peek(p, 0) == '\r' && s_peek(p, 1) == '\n');
}

/* Describes what is at the current position, for the "found ..." half of a message. */
static void s_describe(const parser_t *p, char *buf, size_t size)
{
    int c = s_peek(p, 0);
    if (c < 0) {
        snprintf(buf, size, "end of file");
    } else if (s_at_newline(p)) {
        snprintf(buf, size, "end of line");
    } else if (s_is_control(c)) {
        snprintf(buf, size, "control character 0x%02x", (unsigned)c);
    } else {
        size_t n = 1;
        if (s_is_token_char(c)) {
            while (n < 32 && s_is_token_char(s_peek(p, n)))
                n++;
        } else {
            while (n < 4 && (s_peek(p, n) & 0xC0) == 0x80)
                n++; /* the rest of a UTF-8 character */
        }
        bool longer = s_is_token_char(c) && s_is_token_char(s_peek(p, n));
        snprintf(buf, size, "'%.*s%s'", (int)n, p->text + p->pos, longer ? "..." : "");
    }
}

static int s_error(const parser_t *p, const char *expected)
{
    char found[64];
    s_describe(p, found, sizeof found);
    return s_error_at(p, s_mark(p), expected, found);
}

static void s_skip_spaces(parser_t *p)
{
    while (s_peek(p, 0) == ' ' || s_peek(p, 0) == '\t')
        p->pos++;
}

/* Consumes a newline (LF or CRLF), which the caller has checked is there. */
static void s_take_newline(parser_t *p)
{
    p->pos += s_peek(p, 0) == '\r' ? 2 : 1;
    p->line++;
    p->line_start = p->pos;
}

/* Skips a `#` comment up to (not including) the end of the line. */
static int s_skip_comment(parser_t *p)
{
    p->pos++; /* '#' */
    while (!s_at_end(p) && !s_at_newline(p)) {
        if (s_is_control(s_peek(p, 0)))
            return s_error(p, "comment text");
        p->pos++;
    }
    return 0;
}

/* After a header or a key/value: spaces, an optional comment, then a newline or the end. */
static int s_finish_line(parser_t *p)
{
    s_skip_spaces(p);
    if (s_peek(p, 0) == '#') {
        int rc = s_skip_comment(p);
        if (rc != 0)
            return rc;
    }
    if (s_at_end(p))
        return 0;
    if (!s_at_newline(p))
        return s_error(p, "end of line");
    s_take_newline(p);
    return 0;
}

/* A growable byte buffer for string values. */
typedef struct {
    char *data;
    size_t len;
    size_t capacity;
} strbuf_t;

static int s_strbuf_add(strbuf_t *buf, const char *bytes, size_t n)
{
    if (buf->len + n + 1 > buf->capacity) {
        size_t capacity = buf->capacity ? buf->capacity : 32;
        while (capacity < buf->len + n + 1)
            capacity *= 2;
        char *data = realloc(buf->data, capacity);
        if (data == NULL)
            return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
        buf->data = data;
        buf->capacity = capacity;
    }
    memcpy(buf->data + buf->len, bytes, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return 0;
}

/* Appends code point `cp` (a valid Unicode scalar value) as UTF-8. */
static int s_strbuf_add_utf8(strbuf_t *buf, uint32_t cp)
{
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return s_strbuf_add(buf, out, n);
}

static int s_hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The escape after a backslash in a basic string; p->pos is at the backslash. */
static int s_parse_escape(parser_t *p, strbuf_t *buf)
{
    mark_t at = s_mark(p);
    int c = s_peek(p, 1);
    const char *simple = NULL;
    switch (c) {
    case '"': simple = "\""; break;
    case '\\': simple = "\\"; break;
    case 'b': simple = "\b"; break;
    case 't': simple = "\t"; break;
    case 'n': simple = "\n"; break;
    case 'f': simple = "\f"; break;
    case 'r': simple = "\r"; break;
    default: break;
    }
    if (simple != NULL) {
        p->pos += 2;
        return s_strbuf_add(buf, simple, 1);
    }
    if (c != 'u' && c != 'U') {
        char found[64];
        if (c > 0x20 && c < 0x7F) {
            snprintf(found, sizeof found, "'\\%c'", c);
        } else {
            p->pos++;
            s_describe(p, found, sizeof found);
        }
        return s_error_at(p, at,
                          "an escape (\\\" \\\\ \\b \\t \\n \\f \\r \\uXXXX or \\UXXXXXXXX)",
                          found);
    }
    size_t digits = c == 'u' ? 4 : 8;
    p->pos += 2;
    uint32_t cp = 0;
    for (size_t i = 0; i < digits; i++) {
        int v = s_hex_value(s_peek(p, 0));
        if (v < 0)
            return s_error(p, c == 'u' ? "4 hex digits after \\u" : "8 hex digits after \\U");
        cp = cp * 16 + (uint32_t)v;
        p->pos++;
    }
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
        char found[32];
        snprintf(found, sizeof found, "U+%04X", (unsigned)cp);
        return s_error_at(p, at, "a Unicode character other than NUL or a surrogate", found);
    }
    return s_strbuf_add_utf8(buf, cp);
}

/* A "basic" or 'literal' string on one line; p->pos is at the opening quote. On success
 * *out is a new NUL-terminated string the caller owns. */
static int s_parse_string(parser_t *p, char **out)
{
    char quote = (char)s_peek(p, 0);
    strbuf_t buf = {0};
    int rc = s_strbuf_add(&buf, "", 0);
    p->pos++;
    while (rc == 0) {
        int c = s_peek(p, 0);
        if (c == quote) {
            p->pos++;
            *out = buf.data;
            return 0;
        }
        if (c < 0 || s_at_newline(p)) {
            rc = s_error(p, quote == '"' ? "a closing '\"'" : "a closing \"'\"");
        } else if (s_is_control(c)) {
            rc = s_error(p, "a string character");
        } else if (c == '\\' && quote == '"') {
            rc = s_parse_escape(p, &buf);
        } else {
            rc = s_strbuf_add(&buf, p->text + p->pos, 1);
            p->pos++;
        }
    }
    free(buf.data);
    return rc;
}

/* A bare or quoted key; on success *out is a new string the caller owns. */
static int s_parse_key(parser_t *p, char **out)
{
    mark_t at = s_mark(p);
    int c = s_peek(p, 0);
    if (c == '"' || c == '\'') {
        int rc = s_parse_string(p, out);
        if (rc != 0)
            return rc;
        if ((*out)[0] == '\0') {
            free(*out);
            *out = NULL;
            return s_error_at(p, at, "a non-empty key", "an empty quoted key");
        }
        return 0;
    }
    if (!s_is_bare_key_char(c))
        return s_error(p, "a key (letters, digits, '_', '-' or a quoted string)");
    size_t start = p->pos;
    while (s_is_bare_key_char(s_peek(p, 0)))
        p->pos++;
    *out = strndup(p->text + start, p->pos - start);
    if (*out == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    return 0;
}

/* Reads the digits of an integer part, fraction or exponent: at least one digit, `_` only
 * between digits. Copies the digits (without `_`) into out. Returns false if malformed. */
static bool s_scan_digits(const char *tok, size_t n, size_t *i, char *out, size_t *o)
{
    size_t start = *i;
    while (*i < n && ((tok[*i] >= '0' && tok[*i] <= '9') || tok[*i] == '_')) {
        if (tok[*i] == '_') {
            bool digit_before = *i > start && tok[*i - 1] != '_';
            bool digit_after = *i + 1 < n && tok[*i + 1] >= '0' && tok[*i + 1] <= '9';
            if (!digit_before || !digit_after)
                return false;
        } else {
            out[(*o)++] = tok[*i];
        }
        (*i)++;
    }
    return *i > start;
}

#define VALUE_EXPECTED "a value (string, number, boolean or array)"

/* An unquoted token: true, false, an integer or a float. `expected` describes what may
 * stand here, for the message when the token is none of those. */
static int s_parse_token(parser_t *p, value_t *out, const char *expected)
{
    size_t start = p->pos;
    while (s_is_token_char(s_peek(p, 0)))
        p->pos++;
    const char *tok = p->text + start;
    size_t n = p->pos - start;
    if (n == 0)
        return s_error(p, expected);
    if (n == 4 && strncmp(tok, "true", 4) == 0) {
        *out = (value_t){.kind = VALUE_BOOL, .boolean = true};
        return 0;
    }
    if (n == 5 && strncmp(tok, "false", 5) == 0) {
        *out = (value_t){.kind = VALUE_BOOL, .boolean = false};
        return 0;
    }

    /* A number: [sign] digits [. digits] [e [sign] digits], no leading zeros. */
    char digits[80];
    size_t o = 0, i = 0;
    bool ok = n < 64;
    bool is_float = false;
    if (ok && (tok[0] == '+' || tok[0] == '-'))
        digits[o++] = tok[i++];
    size_t int_start = i;
    ok = ok && s_scan_digits(tok, n, &i, digits, &o);
    ok = ok && !(tok[int_start] == '0' && i > int_start + 1); /* leading zero */
    if (ok && i < n && tok[i] == '.') {
        is_float = true;
        digits[o++] = tok[i++];
        ok = s_scan_digits(tok, n, &i, digits, &o);
    }
    if (ok && i < n && (tok[i] == 'e' || tok[i] == 'E')) {
        is_float = true;
        digits[o++] = tok[i++];
        if (i < n && (tok[i] == '+' || tok[i] == '-'))
            digits[o++] = tok[i++];
        ok = s_scan_digits(tok, n, &i, digits, &o);
    }
    ok = ok && i == n;
    if (!ok) {
        p->pos = start;
        return s_error(p, expected);
    }
    digits[o] = '\0';
    errno = 0;
    if (is_float) {
        double number = strtod(digits, NULL);
        if (!isfinite(number)) {
            p->pos = start;
            return s_error(p, "a float within range");
        }
        *out = (value_t){.kind = VALUE_FLOAT, .number = number};
    } else {
        long long integer = strtoll(digits, NULL, 10);
        if (errno == ERANGE) {
            p->pos = start;
            return s_error(p, "a 64-bit integer");
        }
        *out = (value_t){.kind = VALUE_INT, .integer = integer};
    }
    return 0;
}

/* Skips spaces, newlines and comments between array elements. */
static int s_skip_array_space(parser_t *p)
{
    for (;;) {
        s_skip_spaces(p);
        if (s_peek(p, 0) == '#') {
            int rc = s_skip_comment(p);
            if (rc != 0)
                return rc;
        } else if (s_at_newline(p)) {
            s_take_newline(p);
        } else {
            return 0;
        }
    }
}

static const char *s_kind_name(const value_t *value)
{
    switch (value->kind) {
    case VALUE_STRING: return "a string";
    case VALUE_INT: return "an integer";
    case VALUE_FLOAT: return "a float";
    case VALUE_BOOL: return "a boolean";
    case VALUE_ARRAY:
        if (value->nitems > 0 && value->items[0].kind == VALUE_INT)
            return "an array of integers";
        return "an array";
    }
    return "a value";
}

static int s_parse_value(parser_t *p, value_t *out, bool in_array);

/* An array of strings or of integers; p->pos is at '['. */
static int s_parse_array(parser_t *p, value_t *out)
{
    value_t array = {.kind = VALUE_ARRAY};
    size_t capacity = 0;
    int rc;
    p->pos++; /* '[' */
    for (;;) {
        rc = s_skip_array_space(p);
        if (rc != 0)
            goto out;
        if (s_peek(p, 0) == ']')
            break;
        mark_t at = s_mark(p);
        value_t item = {0};
        rc = s_parse_value(p, &item, true);
        if (rc != 0)
            goto out;
        if (item.kind != VALUE_STRING && item.kind != VALUE_INT) {
            rc = s_error_at(p, at, "a string or an integer", s_kind_name(&item));
            s_value_free(&item);
            goto out;
        }
        if (array.nitems > 0 && item.kind != array.items[0].kind) {
            rc = s_error_at(p, at,
                            array.items[0].kind == VALUE_STRING
                                ? "a string like the first element"
                                : "an integer like the first element",
                            s_kind_name(&item));
            s_value_free(&item);
            goto out;
        }
        if (array.nitems == capacity) {
            capacity = capacity ? capacity * 2 : 4;
            value_t *items = realloc(array.items, capacity * sizeof *items);
            if (items == NULL) {
                s_value_free(&item);
                rc = failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
                goto out;
            }
            array.items = items;
        }
        array.items[array.nitems++] = item;
        rc = s_skip_array_space(p);
        if (rc != 0)
            goto out;
        if (s_peek(p, 0) == ',') {
            p->pos++;
        } else if (s_peek(p, 0) != ']') {
            rc = s_error(p, "',' or ']'");
            goto out;
        }
    }
    p->pos++; /* ']' */
    *out = array;
    return 0;
out:
    s_value_free(&array);
    return rc;
}

static int s_parse_value(parser_t *p, value_t *out, bool in_array)
{
    const char *expected = in_array ? "a string or an integer" : VALUE_EXPECTED;
    int c = s_peek(p, 0);
    if (c == '"' || c == '\'') {
        if (s_peek(p, 1) == c && s_peek(p, 2) == c) {
            char found[64];
            snprintf(found, sizeof found, "'%c%c%c' (multi-line strings are not supported)",
                     c, c, c);
            return s_error_at(p, s_mark(p), expected, found);
        }
        char *text = NULL;
        int rc = s_parse_string(p, &text);
        if (rc != 0)
            return rc;
        *out = (value_t){.kind = VALUE_STRING, .string = text};
        return 0;
    }
    if (c == '[') {
        if (in_array)
            return s_error_at(p, s_mark(p), expected,
                              "'[' (nested arrays are not supported)");
        return s_parse_array(p, out);
    }
    if (c == '{')
        return s_error_at(p, s_mark(p), expected, "'{' (inline tables are not supported)");
    return s_parse_token(p, out, expected);
}

/* The known key for `key` in table `table_name`, or NULL. */
static const schema_t *s_schema_find(const char *table_name, const char *key)
{
    for (size_t i = 0; i < SCHEMA_COUNT; i++) {
        const schema_t *s = &s_schema[i];
        bool table_matches = strcmp(s->table, SPECIALIST_TABLE) == 0
                                 ? s_is_specialist_table(table_name)
                                 : strcmp(s->table, table_name) == 0;
        if (table_matches && strcmp(s->key, key) == 0)
            return s;
    }
    return NULL;
}

/* True if Cloister reads table `table_name` (so a key it does not know there is a typo,
 * not somebody else's setting). */
static bool s_known_table(const char *table_name)
{
    if (s_is_specialist_table(table_name))
        return true;
    for (size_t i = 0; i < SCHEMA_COUNT; i++)
        if (strcmp(s_schema[i].table, table_name) == 0)
            return true;
    return false;
}

/* A key Cloister does not know in a table it reads is kept (see config.h), but most likely
 * a misspelling that would otherwise silently do nothing: say so. */
static void s_warn_unknown(const parser_t *p, mark_t at, const char *table_name, const char *key)
{
    if (s_known_table(table_name))
        log_warn("%s:%d: unknown key '%s' in [%s] (ignored; misspelt?)", p->name, at.line, key,
                 table_name);
}

/* Checks a file value against the schema (and turns an integer into a float for a float
 * key). `at` is where the value starts. */
static int s_check_schema(parser_t *p, mark_t at, const char *table_name, const char *key,
                          value_t *value)
{
    const schema_t *s = s_schema_find(table_name, key);
    if (s == NULL) {
        s_warn_unknown(p, at, table_name, key);
        return 0;
    }
    char expected[160];
    char found[160];
    snprintf(found, sizeof found, "%s", s_kind_name(value));
    bool ok = true;
    switch (s->type) {
    case SCHEMA_STRING:
        snprintf(expected, sizeof expected, "a string for %s.%s", table_name, key);
        ok = value->kind == VALUE_STRING;
        if (ok && s->choices != NULL && !s_is_choice(s->choices, value->string)) {
            snprintf(expected, sizeof expected, "one of %s for %s.%s", s->choices, table_name,
                     key);
            snprintf(found, sizeof found, "\"%.100s\"", value->string);
            ok = false;
        }
        break;
    case SCHEMA_INT:
        snprintf(expected, sizeof expected, "an integer >= %lld for %s.%s", (long long)s->min,
                 table_name, key);
        ok = value->kind == VALUE_INT;
        if (ok && value->integer < s->min) {
            snprintf(found, sizeof found, "%lld", (long long)value->integer);
            ok = false;
        }
        break;
    case SCHEMA_FLOAT:
        snprintf(expected, sizeof expected, "a number >= %lld for %s.%s", (long long)s->min,
                 table_name, key);
        if (value->kind == VALUE_INT)
            *value = (value_t){.kind = VALUE_FLOAT, .number = (double)value->integer};
        ok = value->kind == VALUE_FLOAT;
        if (ok && value->number < (double)s->min) {
            snprintf(found, sizeof found, "%g", value->number);
            ok = false;
        }
        break;
    case SCHEMA_BOOL:
        snprintf(expected, sizeof expected, "a boolean for %s.%s", table_name, key);
        ok = value->kind == VALUE_BOOL;
        break;
    case SCHEMA_STRING_ARRAY:
        snprintf(expected, sizeof expected, "an array of strings for %s.%s", table_name, key);
        ok = value->kind == VALUE_ARRAY
          && (value->nitems == 0 || value->items[0].kind == VALUE_STRING);
        break;
    }
    return ok ? 0 : s_error_at(p, at, expected, found);
}

/* A `[a.b.c]` header; p->pos is at '['. */
static int s_parse_header(parser_t *p)
{
    mark_t at = s_mark(p);
    strbuf_t name = {0};
    int rc = s_strbuf_add(&name, "", 0);
    p->pos++; /* '[' */
    if (rc == 0 && s_peek(p, 0) == '[')
        rc = s_error_at(p, at, "a table name", "'[[' (arrays of tables are not supported)");
    while (rc == 0) {
        s_skip_spaces(p);
        mark_t key_at = s_mark(p);
        char *key = NULL;
        rc = s_parse_key(p, &key);
        if (rc != 0)
            break;
        if (strchr(key, '.') != NULL) {
            rc = s_error_at(p, key_at, "a table name part without '.'", "a quoted '.'");
        } else {
            if (name.len > 0)
                rc = s_strbuf_add(&name, ".", 1);
            if (rc == 0)
                rc = s_strbuf_add(&name, key, strlen(key));
        }
        free(key);
        if (rc != 0)
            break;
        s_skip_spaces(p);
        if (s_peek(p, 0) == ']') {
            p->pos++;
            break;
        }
        if (s_peek(p, 0) != '.') {
            rc = s_error(p, "'.' or ']'");
            break;
        }
        p->pos++;
    }
    if (rc == 0) {
        s_normalise_table_name(name.data);
        table_t *table = s_find_table(p->config, name.data);
        if (table != NULL && table->declared) {
            char found[600];
            snprintf(found, sizeof found, "[%.500s] again (first at line %d)", name.data,
                     table->line);
            rc = s_error_at(p, at, "a new table", found);
        } else if (table == NULL && p->config->count >= CONFIG_MAX_TABLES) {
            char expected[64];
            snprintf(expected, sizeof expected, "at most %d tables", CONFIG_MAX_TABLES);
            rc = s_error_at(p, at, expected, "one more");
        } else {
            table = s_add_table(p->config, name.data);
            if (table == NULL) {
                rc = failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
            } else {
                table->declared = true;
                table->line = at.line;
                p->table = (size_t)(table - p->config->tables);
            }
        }
    }
    free(name.data);
    return rc == 0 ? s_finish_line(p) : rc;
}

/* A `key = value` line; p->pos is at the key. */
static int s_parse_key_value(parser_t *p)
{
    mark_t key_at = s_mark(p);
    char *key = NULL;
    value_t value = {0};
    int rc = s_parse_key(p, &key);
    if (rc != 0)
        return rc;
    table_t *table = &p->config->tables[p->table];
    entry_t *existing = s_find_entry(table, key);
    if (existing != NULL && existing->from_file) {
        char found[200];
        snprintf(found, sizeof found, "'%.100s' again (first at line %d)", key,
                 existing->line);
        rc = s_error_at(p, key_at, "a new key", found);
        goto out;
    }
    if (existing == NULL && table->count >= CONFIG_MAX_KEYS) {
        char expected[64];
        snprintf(expected, sizeof expected, "at most %d keys in a table", CONFIG_MAX_KEYS);
        rc = s_error_at(p, key_at, expected, "one more");
        goto out;
    }
    s_skip_spaces(p);
    if (s_peek(p, 0) == '.') {
        rc = s_error_at(p, s_mark(p), "'='", "'.' (dotted keys are not supported; use a [table])");
        goto out;
    }
    if (s_peek(p, 0) != '=') {
        rc = s_error(p, "'='");
        goto out;
    }
    p->pos++;
    s_skip_spaces(p);
    mark_t value_at = s_mark(p);
    rc = s_parse_value(p, &value, false);
    if (rc != 0)
        goto out;
    rc = s_check_schema(p, value_at, table->name, key, &value);
    if (rc != 0)
        goto out;
    rc = s_table_set(table, key, &value, true, key_at.line);
    if (rc != 0)
        goto out;
    rc = s_finish_line(p);
out:
    s_value_free(&value);
    free(key);
    return rc;
}

static int s_parse(parser_t *p)
{
    while (!s_at_end(p)) {
        s_skip_spaces(p);
        int c = s_peek(p, 0);
        int rc = 0;
        if (c < 0)
            break;
        if (c == '#') {
            rc = s_finish_line(p);
        } else if (s_at_newline(p)) {
            s_take_newline(p);
        } else if (c == '[') {
            rc = s_parse_header(p);
        } else if (s_is_bare_key_char(c) || c == '"' || c == '\'') {
            rc = s_parse_key_value(p);
        } else {
            rc = s_error(p, "a key, a [table] header or a comment");
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- loading ------------ */

config_t *config_defaults(void)
{
    config_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    if (s_add_table(self, "") == NULL)
        goto fail;
    for (size_t i = 0; i < SCHEMA_COUNT; i++) {
        const schema_t *s = &s_schema[i];
        if (!s->has_default)
            continue;
        table_t *table = s_add_table(self, s->table);
        if (table == NULL)
            goto fail;
        value_t value = {0};
        switch (s->type) {
        case SCHEMA_STRING:
            value = (value_t){.kind = VALUE_STRING, .string = strdup(s->default_string)};
            if (value.string == NULL)
                goto fail;
            break;
        case SCHEMA_INT: value = (value_t){.kind = VALUE_INT, .integer = s->default_int}; break;
        case SCHEMA_FLOAT:
            value = (value_t){.kind = VALUE_FLOAT, .number = (double)s->default_int};
            break;
        case SCHEMA_BOOL: value = (value_t){.kind = VALUE_BOOL, .boolean = s->default_int}; break;
        case SCHEMA_STRING_ARRAY: value = (value_t){.kind = VALUE_ARRAY}; break;
        }
        if (s_table_set(table, s->key, &value, false, 0) != 0)
            goto fail;
    }
    return self;
fail:
    config_destroy(&self);
    return NULL;
}

void config_destroy(config_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    config_t *self = *self_p;
    for (size_t t = 0; t < self->count; t++) {
        table_t *table = &self->tables[t];
        for (size_t e = 0; e < table->count; e++) {
            free(table->entries[e].key);
            s_value_free(&table->entries[e].value);
        }
        free(table->entries);
        free(table->name);
    }
    free(self->tables);
    free(self);
    *self_p = NULL;
}

/* Parses text into `config` (which holds at least the "" table first); on success *out is
 * it, on failure it is destroyed. */
static int s_parse_into(config_t *config, const char *name, const char *text, size_t len,
                        config_t **out)
{
    *out = NULL;
    if (config == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    parser_t p = {
        .name = name ? name : "cloister.toml",
        .text = text,
        .len = text ? len : 0,
        .line = 1,
        .config = config,
        .table = 0, /* the "" table created first */
    };
    int rc = s_parse(&p);
    if (rc != 0) {
        config_destroy(&config);
        return rc;
    }
    *out = config;
    return 0;
}

int config_parse_buffer(const char *name, const char *text, size_t len, config_t **out)
{
    return s_parse_into(config_defaults(), name, text, len, out);
}

int config_parse_overlay(const char *name, const char *text, size_t len, config_t **out)
{
    config_t *config = calloc(1, sizeof *config);
    if (config != NULL && s_add_table(config, "") == NULL)
        config_destroy(&config);
    return s_parse_into(config, name, text, len, out);
}

/* Applies CLOISTER_* variables over the loaded values. */
static int s_apply_environment(config_t *self)
{
    static const struct {
        const char *variable;
        const char *table;
        const char *key;
    } overrides[] = {
        {"CLOISTER_IN", "broker", "in"},
        {"CLOISTER_EVENTS", "broker", "events"},
        {"CLOISTER_CONTROL", "broker", "control"},
        {"CLOISTER_SYNC", "broker", "sync"},
        {"CLOISTER_AGENT_COMMAND", "agent", "command"},
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++) {
        const char *text = getenv(overrides[i].variable);
        if (text == NULL || text[0] == '\0')
            continue;
        const schema_t *s = s_schema_find(overrides[i].table, overrides[i].key);
        if (s != NULL && s->choices != NULL && !s_is_choice(s->choices, text))
            return failure_set(FAILURE_INVALID, "%s: expected one of %s, found \"%.100s\"",
                               overrides[i].variable, s->choices, text);
        int rc = s_set_string(self, overrides[i].table, overrides[i].key, text);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Reads the whole file. Returns 0 with *text (caller frees) and *len, FAILURE_NOT_FOUND if
 * the file does not exist, or FAILURE_IO / FAILURE_TOO_BIG. */
static int s_read_file(const char *path, char **text, size_t *len)
{
    *text = NULL;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        if (errno == ENOENT)
            return FAILURE_NOT_FOUND;
        return failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    }
    int rc = 0;
    struct stat st;
    if (fstat(fileno(file), &st) != 0) {
        rc = failure_set(FAILURE_IO, "cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_size > CONFIG_MAX_FILE_BYTES) {
        rc = failure_set(FAILURE_TOO_BIG, "%s is larger than %d bytes", path,
                         CONFIG_MAX_FILE_BYTES);
        goto out;
    }
    *text = malloc((size_t)st.st_size + 1);
    if (*text == NULL) {
        rc = failure_set(FAILURE_MEMORY, "out of memory reading %s", path);
        goto out;
    }
    *len = fread(*text, 1, (size_t)st.st_size, file);
    if (ferror(file)) {
        rc = failure_set(FAILURE_IO, "cannot read %s", path);
        free(*text);
        *text = NULL;
    }
out:
    fclose(file);
    return rc;
}

int config_load(const char *path, config_t **out)
{
    *out = NULL;
    char default_path[1100];
    if (path == NULL) {
        int rc = home_path(default_path, sizeof default_path, "cloister.toml");
        if (rc != 0)
            return rc;
        path = default_path;
    }
    char *text = NULL;
    size_t len = 0;
    config_t *config = NULL;
    int rc = s_read_file(path, &text, &len);
    if (rc == FAILURE_NOT_FOUND) {
        config = config_defaults(); /* no file: defaults, and the file stays absent */
        rc = config ? 0 : failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    } else if (rc == 0) {
        rc = config_parse_buffer(path, text, len, &config);
    }
    free(text);
    if (rc == 0)
        rc = s_apply_environment(config);
    if (rc != 0) {
        config_destroy(&config);
        return rc;
    }
    *out = config;
    return 0;
}

/* ---------------------------------------------------------------- getters ------------ */

const char *config_string(const config_t *self, const char *table, const char *key,
                          const char *fallback)
{
    const value_t *value = s_find_value(self, table, key);
    return value && value->kind == VALUE_STRING ? value->string : fallback;
}

int64_t config_int(const config_t *self, const char *table, const char *key, int64_t fallback)
{
    const value_t *value = s_find_value(self, table, key);
    return value && value->kind == VALUE_INT ? value->integer : fallback;
}

double config_double(const config_t *self, const char *table, const char *key, double fallback)
{
    const value_t *value = s_find_value(self, table, key);
    if (value && value->kind == VALUE_FLOAT)
        return value->number;
    if (value && value->kind == VALUE_INT)
        return (double)value->integer;
    return fallback;
}

bool config_bool(const config_t *self, const char *table, const char *key, bool fallback)
{
    const value_t *value = s_find_value(self, table, key);
    return value && value->kind == VALUE_BOOL ? value->boolean : fallback;
}

bool config_has(const config_t *self, const char *table, const char *key)
{
    return s_find_value(self, table, key) != NULL;
}

size_t config_array_len(const config_t *self, const char *table, const char *key)
{
    const value_t *value = s_find_value(self, table, key);
    return value && value->kind == VALUE_ARRAY ? value->nitems : 0;
}

const char *config_array_string(const config_t *self, const char *table, const char *key,
                                size_t i)
{
    const value_t *value = s_find_value(self, table, key);
    if (value == NULL || value->kind != VALUE_ARRAY || i >= value->nitems)
        return NULL;
    return value->items[i].kind == VALUE_STRING ? value->items[i].string : NULL;
}

int64_t config_array_int(const config_t *self, const char *table, const char *key, size_t i,
                         int64_t fallback)
{
    const value_t *value = s_find_value(self, table, key);
    if (value == NULL || value->kind != VALUE_ARRAY || i >= value->nitems)
        return fallback;
    return value->items[i].kind == VALUE_INT ? value->items[i].integer : fallback;
}

size_t config_table_count(const config_t *self)
{
    return self ? self->count : 0;
}

const char *config_table_name(const config_t *self, size_t i)
{
    return self && i < self->count ? self->tables[i].name : NULL;
}

/* ---------------------------------------------------------------- specialists -------- */

/* Writes "specialists.<name>" into buf; returns false if it does not fit. */
static bool s_specialist_table(char *buf, size_t size, const char *specialist)
{
    int n = snprintf(buf, size, "%s%s", SPECIALIST_PREFIX, specialist ? specialist : "");
    return n > 0 && (size_t)n < size;
}

/* True if `specialist` names `canonical` ("merge-agent"), `_` and `-` being the same. */
static bool s_specialist_is(const char *specialist, const char *canonical)
{
    if (specialist == NULL)
        return false;
    size_t i = 0;
    for (; specialist[i] != '\0' && canonical[i] != '\0'; i++) {
        char c = specialist[i] == '_' ? '-' : specialist[i];
        if (c != canonical[i])
            return false;
    }
    return specialist[i] == canonical[i];
}

const char *config_specialist_model(const config_t *self, const char *specialist)
{
    const char *fallback = s_specialist_is(specialist, "test-agent") ? "haiku" : "sonnet";
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_string(self, table, "model", fallback);
}

int64_t config_specialist_timeout_s(const config_t *self, const char *specialist)
{
    int64_t fallback = s_specialist_is(specialist, "merge-agent") ? 900 : 600;
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_int(self, table, "timeout", fallback);
}

const char *config_specialist_test_command(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return NULL;
    return config_string(self, table, "test_command", NULL);
}

const char *config_specialist_workdir(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return NULL;
    return config_string(self, table, "workdir", NULL);
}

bool config_specialist_enabled(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return true;
    return config_bool(self, table, "enabled", true);
}

bool config_specialist_auto_wake(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return false;
    return config_bool(self, table, "auto_wake", false);
}

int64_t config_specialist_max_attempts(const config_t *self, const char *specialist)
{
    int64_t fallback = config_int(self, "broker", "max_attempts", 3);
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_int(self, table, "max_attempts", fallback);
}
