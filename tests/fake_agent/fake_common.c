/* fake_common: what the CLI doubles share (see fake_common.h). */
#include "fake_common.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

char *fake_read_stdin(int first_data_ms, bool *timed_out)
{
    if (timed_out != NULL)
        *timed_out = false;
    if (isatty(0))
        return NULL;
    size_t used = 0, size = 4096;
    char *text = malloc(size);
    if (text == NULL)
        return NULL;
    struct pollfd pfd = {.fd = 0, .events = POLLIN};
    if (first_data_ms >= 0 && poll(&pfd, 1, first_data_ms) == 0) {
        if (timed_out != NULL)
            *timed_out = true;
        text[0] = '\0';
        return text;
    }
    for (;;) {
        if (used + 1 >= size) {
            char *bigger = realloc(text, size * 2);
            if (bigger == NULL)
                break;
            text = bigger;
            size *= 2;
        }
        ssize_t n = read(0, text + used, size - used - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    text[used] = '\0';
    return text;
}

void fake_log_invocation(const char *path, int argc, char **argv, const char *stdin_text,
                         const char *const *env_names)
{
    if (path == NULL || *path == '\0')
        return;
    json_t *args = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_t *env = json_object();
    for (int i = 0; env_names != NULL && env_names[i] != NULL; i++) {
        const char *value = getenv(env_names[i]);
        json_object_set_new(env, env_names[i], value != NULL ? json_string(value) : json_null());
    }
    char cwd[PATH_MAX];
    json_t *entry = json_pack("{s:o, s:s?, s:o, s:o}", "argv", args, "cwd",
                              getcwd(cwd, sizeof cwd) != NULL ? cwd : NULL, "stdin",
                              stdin_text != NULL ? json_string(stdin_text) : json_null(), "env",
                              env);
    char *line = entry != NULL ? json_dumps(entry, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
    if (line != NULL) {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            size_t len = strlen(line);
            line[len] = '\n'; /* replaces the NUL: one write(2) for the whole line */
            if (write(fd, line, len + 1) < 0)
                fprintf(stderr, "fake: cannot write %s: %s\n", path, strerror(errno));
            close(fd);
        }
        free(line);
    }
    json_decref(entry);
}

void fake_new_uuid(char out[40])
{
    uuid_t id;
    uuid_generate_random(id);
    uuid_unparse_lower(id, out);
}

void fake_new_uuid_v7(char out[40])
{
    uuid_t id;
    uuid_generate_random(id); /* the random bits; the time and version go on top */
    uint64_t ms = (uint64_t)clock_wall_ms();
    for (int i = 0; i < 6; i++)
        id[i] = (unsigned char)(ms >> (40 - 8 * i));
    id[6] = (unsigned char)(0x70 | (id[6] & 0x0f));
    id[8] = (unsigned char)(0x80 | (id[8] & 0x3f));
    uuid_unparse_lower(id, out);
}

bool fake_is_uuid(const char *text)
{
    uuid_t parsed;
    return text != NULL && strlen(text) == 36 && uuid_parse(text, parsed) == 0;
}

int fake_env_int(const char *name, int fallback)
{
    const char *text = getenv(name);
    if (text == NULL || *text == '\0')
        return fallback;
    char *end = NULL;
    long value = strtol(text, &end, 10);
    return (*end == '\0' && value >= 0 && value <= INT_MAX) ? (int)value : fallback;
}

const char *fake_env_or(const char *name, const char *fallback)
{
    const char *value = getenv(name);
    return value != NULL && *value != '\0' ? value : fallback;
}

void fake_timestamp(char out[40])
{
    int64_t ms = clock_wall_ms();
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t used = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + used, 40 - used, ".%03uZ", (unsigned)(ms % 1000) % 1000u);
}

void fake_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void fake_hang(void)
{
    for (;;)
        pause();
}

void fake_mkdirs(const char *path)
{
    char copy[PATH_MAX + 512];
    snprintf(copy, sizeof copy, "%s", path);
    for (char *p = copy + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(copy, 0700);
            *p = '/';
        }
    }
    mkdir(copy, 0700);
}

int fake_copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    FILE *out = fopen(to, "wb");
    int rc = in != NULL && out != NULL ? 0 : -1;
    if (rc == 0) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            if (fwrite(buf, 1, n, out) != n)
                rc = -1;
    }
    if (in != NULL)
        fclose(in);
    if (out != NULL && fclose(out) != 0)
        rc = -1;
    return rc;
}

int fake_append_json(const char *path, const json_t *line)
{
    FILE *f = fopen(path, "ab");
    if (f == NULL)
        return -1;
    int rc = json_dumpf(line, f, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (rc == 0 && fputc('\n', f) == EOF)
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

void fake_print_json(json_t *event)
{
    if (event == NULL)
        return;
    json_dumpf(event, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(event);
}

char *fake_join_lines(const json_t *said)
{
    size_t len = 1;
    size_t i;
    json_t *item;
    json_array_foreach(said, i, item) len += strlen(json_string_value(item)) + 1;
    char *text = calloc(1, len);
    if (text == NULL)
        return NULL;
    json_array_foreach(said, i, item) {
        if (i > 0)
            strcat(text, "\n");
        strcat(text, json_string_value(item));
    }
    return text;
}

char *fake_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t used = 0, size = 4096;
    char *text = malloc(size);
    while (text != NULL) {
        if (used + 1 >= size) {
            char *bigger = realloc(text, size * 2);
            if (bigger == NULL) {
                free(text);
                text = NULL;
                break;
            }
            text = bigger;
            size *= 2;
        }
        size_t n = fread(text + used, 1, size - used - 1, f);
        if (n == 0)
            break;
        used += n;
    }
    fclose(f);
    if (text != NULL)
        text[used] = '\0';
    return text;
}
