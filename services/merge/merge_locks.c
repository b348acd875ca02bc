/* merge_locks: stale lock detection and removal (see merge_locks.h). */
#include "merge_locks.h"

#include "failure.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
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

/* True when `dir` is `root` or inside it. */
static bool s_inside(const char *dir, const char *root)
{
    size_t len = strlen(root);
    while (len > 1 && root[len - 1] == '/')
        len--;
    return strncmp(dir, root, len) == 0 && (dir[len] == '\0' || dir[len] == '/');
}

/* A live process named "git" whose working directory is inside one of `workdirs`: its pid
 * (and that directory in `cwd`), or 0. */
static pid_t s_git_working_in(const char *const *workdirs, char *cwd, size_t size)
{
    DIR *proc = opendir("/proc");
    if (proc == NULL || workdirs == NULL) {
        if (proc != NULL)
            closedir(proc);
        return 0;
    }
    pid_t found = 0;
    struct dirent *entry;
    while (found == 0 && (entry = readdir(proc)) != NULL) {
        char *end = NULL;
        long pid = strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0')
            continue;
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        FILE *file = fopen(path, "r");
        if (file == NULL)
            continue;
        bool is_git = fgets(comm, sizeof comm, file) != NULL && strcmp(comm, "git\n") == 0;
        fclose(file);
        if (!is_git)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/cwd", pid);
        ssize_t len = readlink(path, cwd, size - 1);
        if (len <= 0)
            continue;
        cwd[len] = '\0';
        for (size_t i = 0; workdirs[i] != NULL && found == 0; i++)
            if (s_inside(cwd, workdirs[i]))
                found = (pid_t)pid;
    }
    closedir(proc);
    return found;
}

int merge_locks_check(const char *const *paths, size_t n, int64_t stale_ms,
                      const char *const *workdirs, merge_locks_note_fn note, void *arg)
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
        char cwd[1024];
        pid_t git = s_git_working_in(workdirs, cwd, sizeof cwd);
        if (git != 0)
            return failure_set(FAILURE_STATE,
                               "repository busy: %s is locked (%lld s), and git (pid %ld) is "
                               "working in %s",
                               paths[i], (long long)(age_ms / 1000), (long)git, cwd);
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
