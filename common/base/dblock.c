/* dblock: the broker database's lock file (see dblock.h). */
#include "dblock.h"

#include "failure.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int dblock_acquire(const char *db_path)
{
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s.lock", db_path) >= sizeof path)
        return failure_set(FAILURE_TOO_BIG, "the database path is too long: %s", db_path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return fd;
    int err = errno;
    close(fd);
    if (err != EWOULDBLOCK)
        return failure_set(FAILURE_IO, "cannot lock %s: %s", path, strerror(err));
    return failure_set(FAILURE_STATE,
                       "%s is in use by another process (a broker, or pan restore: it holds "
                       "%s); stop it first",
                       db_path, path);
}

void dblock_release(int fd)
{
    if (fd >= 0)
        close(fd);
}
