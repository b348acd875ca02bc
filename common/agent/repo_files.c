/* repo_files: see repo_files.h. */
#include "repo_files.h"

#include "failure.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

static repo_files_reader_fn *s_reader;

void repo_files_set_reader(repo_files_reader_fn *reader)
{
    s_reader = reader;
}

char *repo_files_read(const char *repo, const char *rev, const char *path, size_t max)
{
    if (s_reader == NULL || repo == NULL || repo[0] == '\0' || rev == NULL || rev[0] == '\0')
        return NULL;
    char *text = NULL;
    int rc = s_reader(repo, rev, path, &text);
    if (rc != 0) {
        /* No repository or no such branch is common (a task with no workspace yet). */
        if (rc != FAILURE_NOT_FOUND)
            log_warn("%s:%s is not used: %s", rev, path, failure_message());
        free(text);
        return NULL;
    }
    if (text == NULL)
        return NULL;
    size_t n = strlen(text);
    if (n > max) {
        size_t cut = max;
        while (cut > 0 && text[cut - 1] != '\n')
            cut--;
        n = cut > 0 ? cut : max;
    }
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r'))
        n--;
    text[n] = '\0';
    return text;
}
