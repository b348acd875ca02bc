/* merge_locks: stale lock detection and removal (see merge_locks.h). */
#include "merge_locks.h"

#include "failure.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The kernel stamps lock files with the real time, so their age is measured against the
 * real clock, not clock_wall_ms() (which tests may shift). */
static int64_t s_real_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int merge_locks_check(const char *const *paths, size_t n, int64_t stale_ms,
                      merge_locks_note_fn note, void *arg)
{
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (lstat(paths[i], &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR)
                continue;
            return failure_set(FAILURE_IO, "cannot inspect %s: %s", paths[i], strerror(errno));
        }
        int64_t mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        int64_t age_ms = s_real_now_ms() - mtime_ms;
        if (age_ms < stale_ms)
            return failure_set(FAILURE_STATE, "repository busy: %s is locked", paths[i]);
        if (unlink(paths[i]) != 0 && errno != ENOENT)
            return failure_set(FAILURE_IO, "cannot remove stale lock %s: %s", paths[i],
                               strerror(errno));
        if (note != NULL) {
            char text[1200];
            snprintf(text, sizeof text, "removed stale lock %s (%lld s old)", paths[i],
                     (long long)(age_ms / 1000));
            note(text, arg);
        }
    }
    return 0;
}
