/* handoff: next tasks kept in a file until the task's result (see handoff.h). */
#include "handoff.h"

#include "failure.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How many lines the file already has (0 when it does not exist). */
static int s_count_lines(const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0;
    int lines = 0, c;
    while ((c = fgetc(file)) != EOF)
        lines += c == '\n';
    fclose(file);
    return lines;
}

int handoff_append(const char *path, const json_t *submit)
{
    if (s_count_lines(path) >= HANDOFF_MAX)
        return failure_set(FAILURE_TOO_BIG, "this task already handed off %d times (the most)",
                           HANDOFF_MAX);
    char *text = json_dumps(submit, JSON_COMPACT);
    if (text == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' NUL becomes the line's end: one write for the line */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0 || write(fd, text, len + 1) != (ssize_t)(len + 1) || fsync(fd) != 0)
        rc = failure_set(FAILURE_IO, "writing the handoff to %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

int handoff_take(const char *path, int (*fn)(const json_t *submit, void *arg), void *arg)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return errno == ENOENT ? 0
                               : failure_set(FAILURE_IO, "reading %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t size = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &size, file) > 0) {
        json_t *submit = json_loads(line, 0, NULL);
        if (json_is_object(submit))
            rc = fn(submit, arg);
        else
            log_warn("handoff: a line of %s is not a JSON object; skipped", path);
        json_decref(submit);
    }
    free(line);
    fclose(file);
    if (rc == 0 && unlink(path) != 0)
        rc = failure_set(FAILURE_IO, "removing %s: %s", path, strerror(errno));
    return rc;
}
