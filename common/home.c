/* home: the state directory (see home.h). */
#include "home.h"

#include "failure.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *home_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PANOPTICON_HOME");
    if (env != NULL && env[0] != '\0') {
        snprintf(dir, sizeof dir, "%s", env);
    } else {
        const char *user_home = getenv("HOME");
        snprintf(dir, sizeof dir, "%s/.panopticon", user_home ? user_home : ".");
    }
    return dir;
}

int home_path(char *buf, size_t size, const char *relative)
{
    int n = snprintf(buf, size, "%s/%s", home_dir(), relative);
    if (n < 0 || (size_t)n >= size)
        return failure_set(FAILURE_TOO_BIG, "path under %s is too long", home_dir());
    return 0;
}

int home_mkdirs(const char *path)
{
    char copy[1024];
    int n = snprintf(copy, sizeof copy, "%s", path);
    if (n < 0 || (size_t)n >= sizeof copy)
        return failure_set(FAILURE_TOO_BIG, "path too long: %s", path);
    for (char *p = copy + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(copy, 0700) != 0 && errno != EEXIST)
                return failure_set(FAILURE_IO, "cannot create %s: %s", copy, strerror(errno));
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    return 0;
}
