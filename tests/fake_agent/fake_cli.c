/* fake_cli: shared pieces of the Codex and Gemini stand-ins (see fake_cli.h). */
#include "fake_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

char *fake_cli_read_stdin(void)
{
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    if (text == NULL)
        return NULL;
    if (!isatty(STDIN_FILENO)) {
        ssize_t n;
        while ((n = read(STDIN_FILENO, text + len, cap - len - 1)) != 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                break;
            len += (size_t)n;
            if (len + 1 == cap) {
                char *grown = realloc(text, cap *= 2);
                if (grown == NULL)
                    break;
                text = grown;
            }
        }
    }
    text[len] = '\0';
    return text;
}

static json_t *s_env_or_null(const char *name)
{
    const char *value = getenv(name);
    return value != NULL ? json_string(value) : json_null();
}

void fake_cli_log(const char *log_env, int argc, char **argv, const char *stdin_text)
{
    const char *path = getenv(log_env);
    if (path == NULL || *path == '\0')
        return;
    json_t *args = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    char cwd[PATH_MAX];
    json_t *entry = json_pack("{s:o, s:s?, s:s?, s:{s:o, s:o}}", "argv", args, "cwd",
                              getcwd(cwd, sizeof cwd) ? cwd : NULL, "stdin", stdin_text, "env",
                              "PANOPTICON_AGENT_ID", s_env_or_null("PANOPTICON_AGENT_ID"),
                              "CLOISTER_REVIEWER", s_env_or_null("CLOISTER_REVIEWER"));
    char *line = entry ? json_dumps(entry, JSON_COMPACT) : NULL;
    int fd = line ? open(path, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
    if (fd >= 0) {
        size_t len = strlen(line);
        line[len] = '\n'; /* one write(2) for the whole line */
        if (write(fd, line, len + 1) < 0)
            fprintf(stderr, "fake: cannot write %s: %s\n", path, strerror(errno));
        close(fd);
    }
    free(line);
    json_decref(entry);
}

int fake_cli_env_int(const char *name, int fallback)
{
    const char *text = getenv(name);
    char *end = NULL;
    long value = text && *text ? strtol(text, &end, 10) : -1;
    return (end != NULL && *end == '\0' && value >= 0 && value <= INT_MAX) ? (int)value
                                                                          : fallback;
}

const char *fake_cli_env(const char *name, const char *fallback)
{
    const char *text = getenv(name);
    return text != NULL && *text != '\0' ? text : fallback;
}

void fake_cli_emit(json_t *event)
{
    char *line = event ? json_dumps(event, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (line != NULL)
        printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(event);
}

void fake_cli_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void fake_cli_new_uuid(char out[40])
{
    uuid_t id;
    uuid_generate_random(id);
    uuid_unparse_lower(id, out);
}

bool fake_cli_is_uuid(const char *text)
{
    uuid_t parsed;
    return text != NULL && strlen(text) == 36 && uuid_parse(text, parsed) == 0;
}

/* mkdir -p */
static void s_mkdirs(const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    }
    mkdir(path, 0700);
}

bool fake_cli_session_path(char *buf, size_t size, const char *dir, const char *prefix,
                           const char *id)
{
    s_mkdirs(dir);
    int n = snprintf(buf, size, "%s/%s%s.jsonl", dir, prefix, id);
    return n > 0 && (size_t)n < size;
}

void fake_cli_session_append(const char *path, const char *prompt)
{
    json_t *line = json_pack("{s:s}", "prompt", prompt);
    char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    FILE *f = text ? fopen(path, "a") : NULL;
    if (f != NULL) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
    free(text);
    json_decref(line);
}

bool fake_cli_session_copy(const char *from, const char *to)
{
    FILE *in = fopen(from, "r"), *out = in ? fopen(to, "w") : NULL;
    int c;
    while (out != NULL && (c = fgetc(in)) != EOF)
        fputc(c, out);
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return out != NULL;
}

int fake_cli_count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}
