/* pan_result: a task's result or payload for a person (see pan_print_fields in pan.h). */
#include "pan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes `len` bytes of untrusted text escaped (pan_print_escaped wants a C string). */
static void s_escaped(const char *text, size_t len)
{
    char *copy = strndup(text, len);
    pan_print_escaped(copy ? copy : "?");
    free(copy);
}

/* A multi-line string as an indented block, each line escaped. */
static void s_block(const char *indent, const char *key, const char *text)
{
    printf("%s%s:\n", indent, key);
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] == '\n')
        len--;
    for (size_t at = 0; at < len;) {
        const char *end = memchr(text + at, '\n', len - at);
        size_t line = end ? (size_t)(end - (text + at)) : len - at;
        printf("%s    ", indent);
        s_escaped(text + at, line);
        putchar('\n');
        at += line + 1;
    }
}

/* FINDINGS: one a line -- severity, file:line, message, and whether it blocks the gate. */
static void s_findings(const char *indent, const json_t *findings)
{
    printf("%sFINDINGS (%zu):\n", indent, json_array_size(findings));
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        char where[512] = "-";
        const char *file = pan_json_str(finding, "file", "");
        int64_t line = pan_json_int(finding, "line", 0);
        if (file[0] != '\0' && line > 0)
            snprintf(where, sizeof where, "%s:%lld", file, (long long)line);
        else if (file[0] != '\0')
            snprintf(where, sizeof where, "%s", file);
        printf("%s    %-8s ", indent, pan_json_str(finding, "severity", "?"));
        pan_print_escaped(where);
        fputs("  ", stdout);
        pan_print_escaped(pan_json_str(finding, "message", pan_json_str(finding, "title", "")));
        if (json_is_true(json_object_get(finding, "blocking")))
            fputs("  [blocks the gate]", stdout);
        putchar('\n');
    }
}

/* True when every element of the array is a string. */
static bool s_strings(const json_t *array)
{
    size_t i;
    const json_t *item;
    json_array_foreach(array, i, item)
    {
        if (!json_is_string(item))
            return false;
    }
    return true;
}

/* A number for a person: a cost in dollars rounded to the cent, other reals to two
 * places, integers as they are. */
static void s_number(const char *key, const json_t *value)
{
    double number = json_number_value(value);
    if (strstr(key, "cost") != NULL && number > 0 && number < 0.005)
        fputs("< $0.01", stdout);
    else if (strstr(key, "cost") != NULL)
        printf("$%.2f", number);
    else if (json_is_integer(value))
        printf("%lld", (long long)json_integer_value(value));
    else
        printf("%.2f", number);
}

static void s_field(const char *indent, const char *key, const json_t *value);

/* An object's fields, or an array's items ("[1]", "[2]", ...), one level deeper. */
static void s_nested(const char *indent, const json_t *value)
{
    char deeper[128];
    snprintf(deeper, sizeof deeper, "%s    ", indent);
    if (json_is_object(value)) {
        pan_print_fields(value, deeper);
        return;
    }
    size_t i;
    const json_t *item;
    json_array_foreach(value, i, item)
    {
        char label[32];
        snprintf(label, sizeof label, "[%zu]", i + 1);
        s_field(deeper, label, item);
    }
}

static void s_field(const char *indent, const char *key, const json_t *value)
{
    if (strcmp(key, "FINDINGS") == 0 && json_is_array(value) && json_array_size(value) > 0) {
        s_findings(indent, value);
    } else if (json_is_string(value) && strchr(json_string_value(value), '\n') != NULL) {
        s_block(indent, key, json_string_value(value));
    } else if (json_is_string(value)) {
        printf("%s%s: ", indent, key);
        pan_print_escaped(json_string_value(value));
        putchar('\n');
    } else if (json_is_array(value) && json_array_size(value) > 0 && s_strings(value)) {
        printf("%s%s (%zu):\n", indent, key, json_array_size(value));
        size_t i;
        const json_t *item;
        json_array_foreach(value, i, item)
        {
            printf("%s    - ", indent);
            pan_print_escaped(json_string_value(item));
            putchar('\n');
        }
    } else if (json_is_array(value) && json_array_size(value) > 0) {
        printf("%s%s (%zu):\n", indent, key, json_array_size(value));
        s_nested(indent, value);
    } else if (json_is_object(value) && json_object_size(value) > 0) {
        printf("%s%s:\n", indent, key);
        s_nested(indent, value);
    } else {
        printf("%s%s: ", indent, key);
        if (json_is_number(value))
            s_number(key, value);
        else
            fputs(json_is_true(value) ? "yes" : json_is_false(value) ? "no" : "none", stdout);
        putchar('\n');
    }
}

void pan_print_fields(const json_t *object, const char *indent)
{
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)object, key, value)
    {
        s_field(indent, key, value);
    }
}
