/* merge_queue_store: see merge_queue_store.h. */
#include "merge_queue_store.h"

#include "home.h"
#include "failure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_SPECIALIST "merge-agent"

struct merge_queue_store_t {
    int lock_fd;
    char path[PATH_MAX];
    json_t *json;
};

int merge_queue_store_dir(char *buf, size_t size)
{
    int rc = home_path(buf, size, "specialists/" S_SPECIALIST "/queue");
    if (rc != 0)
        return rc;
    return home_mkdirs(buf);
}

/* FNV-1a over root, a NUL and target: the file's name. */
static uint64_t s_hash(const char *repo, const char *target)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = repo; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h *= 1099511628211ULL;
    for (const char *p = target; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    return h;
}

static int s_lock(const char *path)
{
    char lock[PATH_MAX + 8];
    snprintf(lock, sizeof lock, "%s.lock", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return failure_set(FAILURE_IO, "cannot open %s: %s", lock, strerror(errno));
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int err = errno;
            close(fd);
            return failure_set(FAILURE_IO, "cannot lock %s: %s", lock, strerror(err));
        }
    }
    return fd;
}

/* Reads the file at `path` (locked) into *out: NULL when there is none. */
static int s_read(const char *path, json_t **out)
{
    *out = NULL;
    if (access(path, F_OK) != 0)
        return errno == ENOENT ? 0 : failure_set(FAILURE_IO, "cannot read %s: %s", path,
                                                 strerror(errno));
    json_error_t error;
    *out = json_load_file(path, 0, &error);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return failure_set(FAILURE_STATE, "merge queue %s is damaged: %s", path, error.text);
    }
    return 0;
}

int merge_queue_store_open(merge_queue_store_t **out, const char *dir, const char *repo,
                           const char *target)
{
    *out = NULL;
    merge_queue_store_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    snprintf(self->path, sizeof self->path, "%s/q-%016llx.json", dir,
             (unsigned long long)s_hash(repo, target));
    self->lock_fd = s_lock(self->path);
    if (self->lock_fd < 0) {
        int rc = self->lock_fd;
        free(self);
        return rc;
    }
    int rc = s_read(self->path, &self->json);
    if (rc == 0 && self->json == NULL) {
        self->json = json_pack("{s:s, s:s, s:b, s:i, s:i, s:i, s:i, s:[]}", "repo", repo, "target",
                               target, "paused", 0, "next_seq", 1, "test_runs", 0, "landed", 0,
                               "ejected", 0, "items");
        if (self->json == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
    } else if (rc == 0) {
        const char *r = json_string_value(json_object_get(self->json, "repo"));
        const char *t = json_string_value(json_object_get(self->json, "target"));
        if (r == NULL || t == NULL || strcmp(r, repo) != 0 || strcmp(t, target) != 0 ||
            !json_is_array(json_object_get(self->json, "items")))
            rc = failure_set(FAILURE_STATE, "merge queue %s is not the queue of %s into %s",
                             self->path, repo, target);
    }
    if (rc != 0) {
        merge_queue_store_close(&self);
        return rc;
    }
    *out = self;
    return 0;
}

json_t *merge_queue_store_json(merge_queue_store_t *self)
{
    return self->json;
}

int merge_queue_store_save(merge_queue_store_t *self)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", self->path);
    char *text = json_dumps(self->json, JSON_INDENT(1) | JSON_SORT_KEYS);
    if (text == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t len = strlen(text);
    bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int err = errno;
    free(text);
    if (fd >= 0 && close(fd) != 0)
        ok = false;
    if (ok && rename(tmp, self->path) != 0) {
        err = errno;
        ok = false;
    }
    if (!ok) {
        unlink(tmp);
        return failure_set(FAILURE_IO, "cannot write %s: %s", self->path, strerror(err));
    }
    return 0;
}

void merge_queue_store_close(merge_queue_store_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    merge_queue_store_t *self = *self_p;
    if (self->lock_fd >= 0)
        close(self->lock_fd); /* drops the flock */
    json_decref(self->json);
    free(self);
    *self_p = NULL;
}

static int s_by_queue(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    int c = strcmp(json_string_value(json_object_get(x, "repo")),
                   json_string_value(json_object_get(y, "repo")));
    return c != 0 ? c
                  : strcmp(json_string_value(json_object_get(x, "target")),
                           json_string_value(json_object_get(y, "target")));
}

int merge_queue_store_list(const char *dir, json_t **out)
{
    *out = json_array();
    if (*out == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    DIR *d = opendir(dir);
    if (d == NULL)
        return errno == ENOENT ? 0 : failure_set(FAILURE_IO, "cannot list %s: %s", dir,
                                                 strerror(errno));
    struct dirent *entry;
    int rc = 0;
    while (rc == 0 && (entry = readdir(d)) != NULL) {
        size_t len = strlen(entry->d_name);
        if (strncmp(entry->d_name, "q-", 2) != 0 || len < 6 ||
            strcmp(entry->d_name + len - 5, ".json") != 0)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        int fd = s_lock(path);
        if (fd < 0) {
            rc = fd;
            break;
        }
        json_t *queue = NULL;
        rc = s_read(path, &queue);
        close(fd);
        if (rc == 0 && json_is_string(json_object_get(queue, "repo")) &&
            json_is_string(json_object_get(queue, "target")))
            json_array_append_new(*out, queue);
        else
            json_decref(queue);
    }
    closedir(d);
    size_t n = json_array_size(*out);
    json_t **all = n ? calloc(n, sizeof *all) : NULL;
    if (n > 0 && all != NULL) {
        for (size_t i = 0; i < n; i++)
            all[i] = json_incref(json_array_get(*out, i));
        qsort(all, n, sizeof *all, s_by_queue);
        json_array_clear(*out);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(*out, all[i]);
        free(all);
    }
    if (rc != 0) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}
