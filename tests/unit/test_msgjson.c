/* msgjson: msgpack strings that are not valid UTF-8 still become JSON that dumps (U+FFFD
 * for each bad byte), non-finite floats become null, and UTF-8 cuts fall on character
 * boundaries. */
#include "check.h"
#include "msgjson.h"
#include "utf8.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FFFD "\xEF\xBF\xBD"

/* The JSON string msgjson makes of `len` raw bytes, dumped back to its UTF-8 text (caller
 * frees); NULL when the dump fails. */
static char *s_convert(const char *bytes, size_t len)
{
    json_t *value = msgjson_string(bytes, len);
    CHECK(value != NULL);
    char *text = NULL;
    if (value != NULL) {
        char *dumped = json_dumps(value, JSON_ENCODE_ANY);
        if (dumped != NULL) {
            /* "…" -> … (none of these cases has an escape inside). */
            size_t dumped_len = strlen(dumped);
            text = strndup(dumped + 1, dumped_len - 2);
        }
        free(dumped);
    }
    json_decref(value);
    return text;
}

static void s_expect(const char *bytes, size_t len, const char *expected)
{
    char *text = s_convert(bytes, len);
    CHECK(text != NULL);
    if (text != NULL)
        CHECK_STR(text, expected);
    free(text);
}

static void test_strings(void)
{
    s_expect("plain", 5, "plain");
    s_expect("", 0, "");
    s_expect("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    s_expect("a\xFF" "b", 3, "a" FFFD "b");                    /* never valid */
    s_expect("\x80x", 2, FFFD "x");                          /* stray continuation */
    s_expect("\xC0\x80", 2, FFFD FFFD);                      /* overlong NUL */
    s_expect("\xE0\x80\xAF", 3, FFFD FFFD FFFD);             /* overlong '/' */
    s_expect("\xED\xA0\x80", 3, FFFD FFFD FFFD);             /* a surrogate */
    s_expect("\xF4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD);    /* above U+10FFFF */
    s_expect("ok\xE2\x82", 4, "ok" FFFD FFFD);               /* cut short at the end */
    s_expect("\xE2\x82x", 3, FFFD FFFD "x");                 /* cut short in the middle */
    s_expect("\xF4\x8F\xBF\xBF", 4, "\xF4\x8F\xBF\xBF");     /* U+10FFFF itself */
}

/* A whole msgpack map: bad bytes in a value, in a key and in a nested array; a NaN. */
static void test_objects(void)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_EVENT);
    wire_put_str(w, FIELD_TITLE, "bad \xFF title");
    wire_put_key_str(w, "k\xFE" "y", "value");
    wire_open_array_key(w, "lines");
    wire_put_key_str(w, NULL, "fine");
    wire_put_key_str(w, NULL, "\xC3");
    wire_close(w);
    wire_put_key_float(w, "nan", NAN);
    wire_put_key_float(w, "inf", INFINITY);
    wire_put_key_float(w, "half", 0.5);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    json_t *value = msgjson_from_raw(data, len);
    CHECK(value != NULL);
    CHECK_STR(json_string_value(json_object_get(value, "title")), "bad " FFFD " title");
    CHECK_STR(json_string_value(json_object_get(value, "k" FFFD "y")), "value");
    json_t *lines = json_object_get(value, "lines");
    CHECK_INT(json_array_size(lines), 2);
    CHECK_STR(json_string_value(json_array_get(lines, 1)), FFFD);
    CHECK(json_is_null(json_object_get(value, "nan")));
    CHECK(json_is_null(json_object_get(value, "inf")));
    CHECK(json_real_value(json_object_get(value, "half")) == 0.5);
    char *text = json_dumps(value, JSON_COMPACT);
    CHECK(text != NULL);
    free(text);
    json_decref(value);
    wire_writer_destroy(&w);
}

static void test_utf8_char_and_cut(void)
{
    CHECK_INT(utf8_char("a", 1), 1);
    CHECK_INT(utf8_char("\xC3\xA9", 2), 2);
    CHECK_INT(utf8_char("\xC3\xA9", 1), 0);
    CHECK_INT(utf8_char("\xE2\x82\xAC", 3), 3);
    CHECK_INT(utf8_char("\xF0\x9F\x98\x80", 4), 4);
    CHECK_INT(utf8_char("\xBF", 1), 0);
    /* "aé€" is 1 + 2 + 3 bytes: a cut never lands inside é or €. */
    const char *text = "a\xC3\xA9\xE2\x82\xAC";
    CHECK_INT(utf8_cut(text, 0), 0);
    CHECK_INT(utf8_cut(text, 1), 1);
    CHECK_INT(utf8_cut(text, 2), 1);
    CHECK_INT(utf8_cut(text, 3), 3);
    CHECK_INT(utf8_cut(text, 4), 3);
    CHECK_INT(utf8_cut(text, 5), 3);
    CHECK_INT(utf8_cut(text, 6), 6);
    CHECK_INT(utf8_cut(text, 100), 6);
    /* A bad byte is one character of its own. */
    CHECK_INT(utf8_cut("\xFF\xFF" "a", 2), 2);
}

int main(void)
{
    test_strings();
    test_objects();
    test_utf8_char_and_cut();
    return check_exit_code("test_msgjson");
}
