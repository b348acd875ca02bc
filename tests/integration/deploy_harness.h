/* deploy_harness: what the tests of deploy/run-local.sh share: the pid a pid file names,
 * and whether a process still runs. */
#ifndef CLOISTER_DEPLOY_HARNESS_H
#define CLOISTER_DEPLOY_HARNESS_H

#include "testenv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pid in $PANOPTICON_HOME/run/<name>.pid (its first line), or 0. */
static inline pid_t deploy_pid_of(const testenv_t *env, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/run/%s.pid", env->home, name);
    char *text = testenv_read_file(path);
    pid_t pid = text ? (pid_t)atol(text) : 0;
    free(text);
    return pid;
}

/* True while `pid` exists and is not a zombie (a process killed, not yet reaped by init).
 * /proc files report size 0, so /proc/<pid>/stat is read with read(), not
 * testenv_read_file(). */
static inline bool deploy_alive(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
        return false;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, stat, sizeof stat - 1);
    close(fd);
    if (n <= 0)
        return false;
    stat[n] = '\0';
    const char *end = strrchr(stat, ')');
    return end == NULL || end[1] != ' ' || end[2] != 'Z';
}

#endif
