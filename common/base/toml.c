/* toml: a reader for the part of TOML that cloister.toml uses (see toml.h).
 *
 * Every error goes through s_error() / toml_error_at(), which build "file:line:col:
 * expected X, found Y"; `found` is described by s_describe() from the bytes at the error
 * position, or given explicitly when the problem is a whole value (a wrong type, a
 * duplicate). */
#include "toml.h"

#include "failure.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void toml_value_free(toml_value_t *value)
{
    free(value->string);
    for (size_t i = 0; i < value->nitems; i++)
        toml_value_free(&value->items[i]);
    free(value->items);
    memset(value, 0, sizeof *value);
}

struct toml_reader_t {
    const char *name; /* file name for messages */
    const char *text;
    size_t len;
    size_t pos;
    int line;          /* 1-based line of `pos` */
    size_t line_start; /* offset of the first byte of that line */
    const toml_handler_t *handler;
    void *arg;
};

static toml_mark_t s_mark(const toml_reader_t *p)
{
    return (toml_mark_t){p->line, p->line_start, p->pos};
}

int toml_error_at(const toml_reader_t *p, toml_mark_t at, const char *expected,
                  const char *found)
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

static bool s_at_end(const toml_reader_t *p)
{
    return p->pos >= p->len;
}

static int s_peek(const toml_reader_t *p, size_t ahead)
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

static bool s_at_newline(const toml_reader_t *p)
{
    return s_peek(p, 0) == '\n' || (s_peek(p, 0) == '\r' && s_peek(p, 1) == '\n');
}

/* Describes what is at the current position, for the "found ..." half of a message. */
static void s_describe(const toml_reader_t *p, char *buf, size_t size)
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

static int s_error(const toml_reader_t *p, const char *expected)
{
    char found[64];
    s_describe(p, found, sizeof found);
    return toml_error_at(p, s_mark(p), expected, found);
}

static void s_skip_spaces(toml_reader_t *p)
{
    while (s_peek(p, 0) == ' ' || s_peek(p, 0) == '\t')
        p->pos++;
}

/* Consumes a newline (LF or CRLF), which the caller has checked is there. */
static void s_take_newline(toml_reader_t *p)
{
    p->pos += s_peek(p, 0) == '\r' ? 2 : 1;
    p->line++;
    p->line_start = p->pos;
}

/* Skips a `#` comment up to (not including) the end of the line. */
static int s_skip_comment(toml_reader_t *p)
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
static int s_finish_line(toml_reader_t *p)
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
static int s_parse_escape(toml_reader_t *p, strbuf_t *buf)
{
    toml_mark_t at = s_mark(p);
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
        return toml_error_at(p, at,
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
        return toml_error_at(p, at, "a Unicode character other than NUL or a surrogate", found);
    }
    return s_strbuf_add_utf8(buf, cp);
}

/* A "basic" or 'literal' string on one line; p->pos is at the opening quote. On success
 * *out is a new NUL-terminated string the caller owns. */
static int s_parse_string(toml_reader_t *p, char **out)
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
static int s_parse_key(toml_reader_t *p, char **out)
{
    toml_mark_t at = s_mark(p);
    int c = s_peek(p, 0);
    if (c == '"' || c == '\'') {
        int rc = s_parse_string(p, out);
        if (rc != 0)
            return rc;
        if ((*out)[0] == '\0') {
            free(*out);
            *out = NULL;
            return toml_error_at(p, at, "a non-empty key", "an empty quoted key");
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
static int s_parse_token(toml_reader_t *p, toml_value_t *out, const char *expected)
{
    size_t start = p->pos;
    while (s_is_token_char(s_peek(p, 0)))
        p->pos++;
    const char *tok = p->text + start;
    size_t n = p->pos - start;
    if (n == 0)
        return s_error(p, expected);
    if (n == 4 && strncmp(tok, "true", 4) == 0) {
        *out = (toml_value_t){.kind = TOML_BOOL, .boolean = true};
        return 0;
    }
    if (n == 5 && strncmp(tok, "false", 5) == 0) {
        *out = (toml_value_t){.kind = TOML_BOOL, .boolean = false};
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
        *out = (toml_value_t){.kind = TOML_FLOAT, .number = number};
    } else {
        long long integer = strtoll(digits, NULL, 10);
        if (errno == ERANGE) {
            p->pos = start;
            return s_error(p, "a 64-bit integer");
        }
        *out = (toml_value_t){.kind = TOML_INT, .integer = integer};
    }
    return 0;
}

/* Skips spaces, newlines and comments between array elements. */
static int s_skip_array_space(toml_reader_t *p)
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

const char *toml_kind_name(const toml_value_t *value)
{
    switch (value->kind) {
    case TOML_STRING: return "a string";
    case TOML_INT: return "an integer";
    case TOML_FLOAT: return "a float";
    case TOML_BOOL: return "a boolean";
    case TOML_ARRAY:
        if (value->nitems > 0 && value->items[0].kind == TOML_INT)
            return "an array of integers";
        return "an array";
    }
    return "a value";
}

static int s_parse_value(toml_reader_t *p, toml_value_t *out, bool in_array);

/* An array of strings or of integers; p->pos is at '['. */
static int s_parse_array(toml_reader_t *p, toml_value_t *out)
{
    toml_value_t array = {.kind = TOML_ARRAY};
    size_t capacity = 0;
    int rc;
    p->pos++; /* '[' */
    for (;;) {
        rc = s_skip_array_space(p);
        if (rc != 0)
            goto out;
        if (s_peek(p, 0) == ']')
            break;
        toml_mark_t at = s_mark(p);
        toml_value_t item = {0};
        rc = s_parse_value(p, &item, true);
        if (rc != 0)
            goto out;
        if (item.kind != TOML_STRING && item.kind != TOML_INT) {
            rc = toml_error_at(p, at, "a string or an integer", toml_kind_name(&item));
            toml_value_free(&item);
            goto out;
        }
        if (array.nitems > 0 && item.kind != array.items[0].kind) {
            rc = toml_error_at(p, at,
                            array.items[0].kind == TOML_STRING
                                ? "a string like the first element"
                                : "an integer like the first element",
                            toml_kind_name(&item));
            toml_value_free(&item);
            goto out;
        }
        if (array.nitems == capacity) {
            capacity = capacity ? capacity * 2 : 4;
            toml_value_t *items = realloc(array.items, capacity * sizeof *items);
            if (items == NULL) {
                toml_value_free(&item);
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
    toml_value_free(&array);
    return rc;
}

static int s_parse_value(toml_reader_t *p, toml_value_t *out, bool in_array)
{
    const char *expected = in_array ? "a string or an integer" : VALUE_EXPECTED;
    int c = s_peek(p, 0);
    if (c == '"' || c == '\'') {
        if (s_peek(p, 1) == c && s_peek(p, 2) == c) {
            char found[64];
            snprintf(found, sizeof found, "'%c%c%c' (multi-line strings are not supported)",
                     c, c, c);
            return toml_error_at(p, s_mark(p), expected, found);
        }
        char *text = NULL;
        int rc = s_parse_string(p, &text);
        if (rc != 0)
            return rc;
        *out = (toml_value_t){.kind = TOML_STRING, .string = text};
        return 0;
    }
    if (c == '[') {
        if (in_array)
            return toml_error_at(p, s_mark(p), expected,
                              "'[' (nested arrays are not supported)");
        return s_parse_array(p, out);
    }
    if (c == '{')
        return toml_error_at(p, s_mark(p), expected, "'{' (inline tables are not supported)");
    return s_parse_token(p, out, expected);
}

/* The known key for `key` in table `table_name`, or NULL. */

/* A `[a.b.c]` header; p->pos is at '['. */
static int s_parse_header(toml_reader_t *p)
{
    toml_mark_t at = s_mark(p);
    strbuf_t name = {0};
    int rc = s_strbuf_add(&name, "", 0);
    p->pos++; /* '[' */
    if (rc == 0 && s_peek(p, 0) == '[')
        rc = toml_error_at(p, at, "a table name", "'[[' (arrays of tables are not supported)");
    while (rc == 0) {
        s_skip_spaces(p);
        toml_mark_t key_at = s_mark(p);
        char *key = NULL;
        rc = s_parse_key(p, &key);
        if (rc != 0)
            break;
        if (strchr(key, '.') != NULL) {
            rc = toml_error_at(p, key_at, "a table name part without '.'", "a quoted '.'");
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
    if (rc == 0)
        rc = p->handler->table(p, at, name.data, p->arg);
    free(name.data);
    return rc == 0 ? s_finish_line(p) : rc;
}

/* A `key = value` line; p->pos is at the key. */
static int s_parse_key_value(toml_reader_t *p)
{
    toml_mark_t key_at = s_mark(p);
    char *key = NULL;
    toml_value_t value = {0};
    int rc = s_parse_key(p, &key);
    if (rc != 0)
        return rc;
    s_skip_spaces(p);
    if (s_peek(p, 0) == '.') {
        rc = toml_error_at(p, s_mark(p), "'='",
                           "'.' (dotted keys are not supported; use a [table])");
        goto out;
    }
    if (s_peek(p, 0) != '=') {
        rc = s_error(p, "'='");
        goto out;
    }
    p->pos++;
    s_skip_spaces(p);
    toml_mark_t value_at = s_mark(p);
    rc = s_parse_value(p, &value, false);
    if (rc == 0)
        rc = p->handler->key_value(p, key_at, key, value_at, &value, p->arg);
    if (rc == 0)
        rc = s_finish_line(p);
out:
    toml_value_free(&value);
    free(key);
    return rc;
}

int toml_parse(const char *name, const char *text, size_t len, const toml_handler_t *handler,
               void *arg)
{
    toml_reader_t reader = {
        .name = name,
        .text = text,
        .len = text ? len : 0,
        .line = 1,
        .handler = handler,
        .arg = arg,
    };
    toml_reader_t *p = &reader;
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

const char *toml_name(const toml_reader_t *reader)
{
    return reader->name;
}
