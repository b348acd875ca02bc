/* disk_guard: the broker's answer to a full disk (see disk_guard.h). */
#include "disk_guard.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct disk_guard_t {
    char dir[4096];
    char reserve_path[4200];
    int64_t min_free;
    int64_t reserve;
    int64_t free_bytes;
    int64_t checked_at;
    bool checked;
    bool low;
    int64_t rearm; /* while low: the free bytes that end it */
    char reason[4400];
};

/* After a commit found no room, the reserve is rewritten only when this much more than it
 * is free too: else writing it would fill the disk again at once. */
#define DISK_GUARD_MARGIN (1LL << 20)

/* Writes the reserve file (all its blocks allocated). */
static void s_write_reserve(disk_guard_t *self)
{
    if (self->reserve <= 0) {
        unlink(self->reserve_path); /* one kept from an earlier setting */
        return;
    }
    int fd = open(self->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    int rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)self->reserve);
    if (fd >= 0)
        close(fd);
    if (rc != 0) {
        log_warn("disk guard: cannot write the reserve %s: %s", self->reserve_path, strerror(rc));
        unlink(self->reserve_path);
    }
}

disk_guard_t *disk_guard_new(const char *db_path, int64_t min_free, int64_t reserve)
{
    disk_guard_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", db_path);
    snprintf(self->dir, sizeof self->dir, "%s", dirname(copy));
    snprintf(self->reserve_path, sizeof self->reserve_path, "%s.reserve", db_path);
    self->min_free = min_free;
    self->reserve = reserve;
    s_write_reserve(self);
    return self;
}

void disk_guard_destroy(disk_guard_t **self_p)
{
    free(*self_p);
    *self_p = NULL;
}

bool disk_guard_check(disk_guard_t *self, int64_t now)
{
    if (self->checked && now - self->checked_at < DISK_GUARD_CHECK_MS)
        return self->low;
    self->checked = true;
    self->checked_at = now;
    struct statvfs fs;
    if (statvfs(self->dir, &fs) != 0)
        return self->low; /* unknown: keep the last answer */
    self->free_bytes = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
    if (!self->low && self->free_bytes < self->min_free) {
        self->low = true;
        self->rearm = self->min_free + self->reserve;
        snprintf(self->reason, sizeof self->reason,
                 "disk full: %lld MB free for the store in %s (at least %lld MB wanted): not "
                 "accepting new tasks until there is room",
                 (long long)(self->free_bytes >> 20), self->dir,
                 (long long)(self->min_free >> 20));
        log_error("%s; the reserve is given up so running tasks can still finish",
                  self->reason);
        unlink(self->reserve_path);
    } else if (self->low && self->free_bytes >= self->rearm) {
        self->low = false;
        log_info("disk guard: %lld MB free in %s again: accepting tasks",
                 (long long)(self->free_bytes >> 20), self->dir);
        s_write_reserve(self);
    }
    return self->low;
}

bool disk_guard_give_up(disk_guard_t *self, int64_t now)
{
    struct statvfs fs;
    if (statvfs(self->dir, &fs) == 0)
        self->free_bytes = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
    self->checked = true;
    self->checked_at = now;
    int64_t margin = self->reserve > DISK_GUARD_MARGIN ? self->reserve : DISK_GUARD_MARGIN;
    self->rearm = self->min_free + self->reserve + margin;
    if (!self->low)
        snprintf(self->reason, sizeof self->reason,
                 "disk full: the store found no room in %s: not accepting new tasks until "
                 "%lld MB are free",
                 self->dir, (long long)(self->rearm >> 20));
    self->low = true;
    bool had_reserve = unlink(self->reserve_path) == 0;
    if (had_reserve)
        log_error("%s; the reserve (%lld MB) is given up so the commit can be made again",
                  self->reason, (long long)(self->reserve >> 20));
    return had_reserve;
}

bool disk_guard_low(const disk_guard_t *self)
{
    return self->low;
}

int64_t disk_guard_free(const disk_guard_t *self)
{
    return self->free_bytes;
}

const char *disk_guard_reason(const disk_guard_t *self)
{
    return self->reason;
}
