/* pan: what every command shares -- the control call and its exit codes, and formatting
 * (see pan.h). */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"
#include "utf8.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int pan_call(const pan_t *pan, wire_writer_t *request, json_t **data)
{
    bool truncated;
    return pan_call_listing(pan, request, data, &truncated);
}

int pan_call_listing(const pan_t *pan, wire_writer_t *request, json_t **data, bool *truncated)
{
    *data = NULL;
    *truncated = false;
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    if (client == NULL)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    wire_msg_t *reply = NULL;
    int rc = client_call(client, request, &reply);
    client_destroy(&client);
    if (rc == FAILURE_TIMEOUT || rc == FAILURE_IO)
        return pan_fail(PAN_EXIT_UNREACHABLE, "%s", failure_message());
    if (rc != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    const msgpack_object *object = wire_msg_object(reply, FIELD_DATA);
    *data = object ? msgjson_from_object(object) : json_null();
    *truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
    wire_msg_destroy(&reply);
    if (*data == NULL)
        return pan_fail(PAN_EXIT_ERROR, "out of memory");
    return PAN_EXIT_OK;
}

int pan_resume_specialist(const pan_t *pan, const char *name, json_t **data)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_RESUME);
    wire_put_str(writer, FIELD_SPECIALIST, name);
    int code = pan_call(pan, writer, data);
    wire_writer_destroy(&writer);
    return code;
}

int pan_fail(int code, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%span:%s ", pan_colour(stderr, PAN_COLOUR_BAD), pan_colour_end(stderr));
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    return code;
}

int pan_usage(const char *usage, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "%span:%s ", pan_colour(stderr, PAN_COLOUR_BAD), pan_colour_end(stderr));
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    fprintf(stderr, "usage: %s\n", usage);
    return PAN_EXIT_USAGE;
}

int pan_option(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) != 0)
        return 0;
    if (arg[len] == '=') {
        *value = arg + len + 1;
        return 1;
    }
    if (arg[len] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *i += 1;
    *value = argv[*i];
    return 1;
}

int pan_print_json(const json_t *value)
{
    char *text = value ? json_dumps(value, JSON_INDENT(2) | JSON_ENCODE_ANY) : NULL;
    if (text == NULL)
        return pan_fail(PAN_EXIT_ERROR, "cannot write the answer as JSON");
    puts(text);
    free(text);
    return PAN_EXIT_OK;
}

bool pan_parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
    if (text == NULL || text[0] == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    long long value = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max)
        return false;
    *out = value;
    return true;
}

const char *pan_plural(int64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

void pan_format_age(char *buf, size_t size, int64_t age_ms)
{
    int64_t minutes = age_ms / 60000;
    if (minutes < 1)
        snprintf(buf, size, "just now");
    else if (minutes < 60)
        snprintf(buf, size, "%lldm", (long long)minutes);
    else if (minutes < 24 * 60)
        snprintf(buf, size, "%lldh", (long long)(minutes / 60));
    else
        snprintf(buf, size, "%lldd", (long long)(minutes / (24 * 60)));
}

void pan_format_time(char *buf, size_t size, int64_t wall_ms)
{
    time_t seconds = (time_t)(wall_ms / 1000);
    struct tm tm;
    if (localtime_r(&seconds, &tm) == NULL || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, size, "%lld", (long long)wall_ms);
}

const char *pan_json_str(const json_t *object, const char *key, const char *fallback)
{
    const char *value = json_string_value(json_object_get(object, key));
    return value ? value : fallback;
}

int pan_absolute_path(const char *path, char *out, size_t size)
{
    char resolved[PATH_MAX];
    if (realpath(path, resolved) != NULL) {
        snprintf(out, size, "%s", resolved);
        return 0;
    }
    if (path[0] == '/') {
        snprintf(out, size, "%s", path);
        return 0;
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL)
        return failure_set(FAILURE_IO, "cannot read the current directory");
    if ((size_t)snprintf(out, size, "%s/%s", cwd, path) >= size)
        return failure_set(FAILURE_TOO_BIG, "workspace path too long");
    return 0;
}

json_t *pan_override_new(const char *reason, const char *review)
{
    const struct passwd *user = getpwuid(getuid());
    const char *name = user != NULL ? user->pw_name : getenv("USER");
    char at[32];
    time_t now = time(NULL);
    struct tm utc;
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
    json_t *record = json_pack("{s:s, s:s, s:s}", "by", name ? name : "unknown", "at", at,
                               "reason", reason);
    if (record != NULL && review != NULL)
        json_object_set_new(record, "review", json_string(review));
    return record;
}

int64_t pan_json_int(const json_t *object, const char *key, int64_t fallback)
{
    json_t *value = json_object_get(object, key);
    if (json_is_integer(value))
        return json_integer_value(value);
    if (json_is_real(value))
        return (int64_t)json_real_value(value);
    return fallback;
}

void pan_fprint_escaped(FILE *out, const char *text)
{
    size_t len = strlen(text);
    for (size_t at = 0; at < len;) {
        unsigned char c = (unsigned char)text[at];
        size_t step = utf8_char(text + at, len - at);
        if (c == '\n')
            fputs("\\n", out);
        else if (c == '\r')
            fputs("\\r", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f || step == 0)
            fprintf(out, "\\x%02x", c);
        else if (c == 0xC2 && (unsigned char)text[at + 1] < 0xA0)
            fprintf(out, "\\u%04x", (unsigned char)text[at + 1]); /* C1: U+0080..U+009F */
        else
            fwrite(text + at, 1, step, out);
        at += step ? step : 1;
    }
}

void pan_print_escaped(const char *text)
{
    pan_fprint_escaped(stdout, text);
}
