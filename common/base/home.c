/* home: the state directory (see home.h). */
#include "home.h"

#include "failure.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The user's home: $HOME, or the password database's entry when HOME is unset (cron,
 * systemd units), so every program finds the same state wherever it is started. */
static const char *s_user_home(void)
{
    const char *home = getenv("HOME");
    if (home != NULL && home[0] != '\0')
        return home;
    struct passwd *entry = getpwuid(getuid());
    if (entry != NULL && entry->pw_dir != NULL && entry->pw_dir[0] != '\0')
        return entry->pw_dir;
    return ".";
}

const char *home_dir(void)
{
    static char dir[1024];
    const char *env = getenv("PANOPTICON_HOME");
    if (env != NULL && env[0] != '\0')
        snprintf(dir, sizeof dir, "%s", env);
    else
        snprintf(dir, sizeof dir, "%s/.panopticon", s_user_home());
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

/* The umask the process started with, before home_secure() narrowed it; -1 until then. */
static int s_user_umask = -1;

mode_t home_user_umask(void)
{
    if (s_user_umask >= 0)
        return (mode_t)s_user_umask;
    mode_t current = umask(077);
    umask(current);
    return current;
}

int home_secure(void)
{
    mode_t before = umask(077);
    if (s_user_umask < 0)
        s_user_umask = (int)before;
    const char *dir = home_dir();
    int rc = home_mkdirs(dir);
    if (rc != 0)
        return rc;
    struct stat st;
    if (stat(dir, &st) != 0)
        return failure_set(FAILURE_IO, "cannot read %s: %s", dir, strerror(errno));
    if (st.st_uid == getuid() && (st.st_mode & 077) != 0 && chmod(dir, 0700) != 0)
        return failure_set(FAILURE_IO, "cannot make %s private (0700): %s", dir,
                           strerror(errno));
    return 0;
}
