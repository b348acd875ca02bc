/* merge_repos: open repositories kept across merge tasks, checked by a fingerprint before
 * they are lent again (see merge_repos.h). */
#include "merge_repos.h"

#include "failure.h"

#include <dirent.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file or directory looked like: a change to it changes one of these. */
typedef struct {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} s_stamp_t;

typedef struct {
    s_stamp_t *stamps;
    size_t count, cap;
    bool failed; /* out of memory: such a fingerprint never matches */
} s_print_t;

/* One lent or kept handle. `lent` comes first: a merge_repo_t * is its entry. */
typedef struct {
    merge_repo_t lent;
    char *path;      /* the path it was asked for (the key) */
    char *gitdir;    /* lent.gitdir */
    char *workdir;   /* lent.workdir */
    s_print_t print; /* the repository as the last task left it */
    bool out;        /* lent to a task now */
    bool kept;       /* in the set; false: an extra handle, closed when put back */
    uint64_t used;   /* when it was last lent (a counter), for eviction */
} s_entry_t;

struct merge_repos_t {
    pthread_mutex_t lock;
    s_entry_t *entries[MERGE_REPOS_MAX];
    size_t count;
    uint64_t clock;
    size_t opened;
};

/* ---- fingerprints ---------------------------------------------------------------------- */

static void s_print_add(s_print_t *print, const char *path)
{
    if (print->failed)
        return;
    if (print->count == print->cap) {
        size_t cap = print->cap ? print->cap * 2 : 32;
        s_stamp_t *grown = realloc(print->stamps, cap * sizeof *grown);
        if (grown == NULL) {
            print->failed = true;
            return;
        }
        print->stamps = grown;
        print->cap = cap;
    }
    s_stamp_t *stamp = &print->stamps[print->count++];
    memset(stamp, 0, sizeof *stamp);
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    stamp->exists = true;
    stamp->dev = st.st_dev;
    stamp->ino = st.st_ino;
    stamp->size = st.st_size;
    stamp->mtime = st.st_mtim;
}

/* Stamps `dir` and every directory below it (a ref update renames into one of them). */
static void s_print_dirs(s_print_t *print, const char *dir, int depth)
{
    s_print_add(print, dir);
    DIR *d = depth < 32 ? opendir(dir) : NULL;
    if (d == NULL)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.' &&
            (entry->d_name[1] == '\0' || (entry->d_name[1] == '.' && entry->d_name[2] == '\0')))
            continue;
        char sub[4096];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, entry->d_name) >= sizeof sub)
            continue;
        struct stat st;
        bool is_dir = entry->d_type == DT_DIR ||
                      (entry->d_type == DT_UNKNOWN && lstat(sub, &st) == 0 && S_ISDIR(st.st_mode));
        if (is_dir)
            s_print_dirs(print, sub, depth + 1);
    }
    closedir(d);
}

static void s_print_take(s_print_t *print, git_repository *repo)
{
    static const char *const files[] = {"",        "packed-refs",  "config",
                                        "objects", "objects/pack", "objects/info/alternates"};
    print->count = 0;
    print->failed = false;
    const char *common = git_repository_commondir(repo);
    char path[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s%s", common, files[i]);
        s_print_add(print, path);
    }
    snprintf(path, sizeof path, "%srefs", common);
    s_print_dirs(print, path, 0);
}

static bool s_print_equal(const s_print_t *a, const s_print_t *b)
{
    if (a->failed || b->failed || a->count != b->count)
        return false;
    for (size_t i = 0; i < a->count; i++) {
        const s_stamp_t *x = &a->stamps[i], *y = &b->stamps[i];
        if (x->exists != y->exists || x->dev != y->dev || x->ino != y->ino || x->size != y->size ||
            x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec)
            return false;
    }
    return true;
}

/* ---- entries --------------------------------------------------------------------------- */

static void s_entry_free(s_entry_t *entry)
{
    if (entry == NULL)
        return;
    git_repository_free(entry->lent.repo);
    free(entry->path);
    free(entry->gitdir);
    free(entry->workdir);
    free(entry->print.stamps);
    free(entry);
}

/* Adds the scratch store to the repository's object database (which then owns it), with
 * a priority below the loose objects' (1): libgit2 writes into the first backend that
 * takes a write, so its own writes still go to disk. */
static int s_add_scratch(s_entry_t *entry)
{
    git_odb *odb = NULL;
    git_odb_backend *scratch = NULL;
    if (git_repository_odb(&odb, entry->lent.repo) < 0 || git_mempack_new(&scratch) < 0 ||
        git_odb_add_backend(odb, scratch, 0) < 0) {
        const git_error *e = git_error_last();
        if (scratch != NULL && scratch->free != NULL)
            scratch->free(scratch);
        git_odb_free(odb);
        return failure_set(FAILURE_GIT, "cannot add a scratch object store: %s",
                           e && e->message ? e->message : "unknown");
    }
    git_odb_free(odb);
    entry->lent.scratch = scratch;
    return 0;
}

/* Opens the repository `path` belongs to into a new entry. A linked worktree resolves to
 * the repository it is a worktree of, so refs, worktrees and locks are the shared ones. */
static int s_entry_open(s_entry_t **out, const char *path)
{
    *out = NULL;
    git_repository *opened = NULL;
    int open_rc = git_repository_open_ext(&opened, path, 0, NULL);
    const git_error *why = open_rc < 0 ? git_error_last() : NULL;
    if (open_rc == GIT_EOWNER ||
        (why != NULL && why->message != NULL && strstr(why->message, "safe.directory"))) {
        /* libgit2's message ("config value 'safe.directory' was not found") hides why. */
        struct stat st;
        long owner = stat(path, &st) == 0 ? (long)st.st_uid : -1;
        return failure_set(FAILURE_STATE,
                           "repository %s belongs to uid %ld, not to this service (uid %ld), "
                           "and git refuses to open it: run the merge-agent as the "
                           "repository's owner, or trust it with `git config --global --add "
                           "safe.directory %s` as uid %ld",
                           path, owner, (long)geteuid(), path, (long)geteuid());
    }
    if (open_rc < 0)
        return failure_set(FAILURE_GIT, "cannot open repository: %s",
                           why && why->message ? why->message : "unknown");
    s_entry_t *entry = calloc(1, sizeof *entry);
    if (entry == NULL) {
        git_repository_free(opened);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    entry->path = strdup(path);
    entry->gitdir = strdup(git_repository_path(opened));
    if (git_repository_workdir(opened) != NULL)
        entry->workdir = strdup(git_repository_workdir(opened));
    if (entry->path == NULL || entry->gitdir == NULL ||
        (git_repository_workdir(opened) != NULL && entry->workdir == NULL)) {
        git_repository_free(opened);
        s_entry_free(entry);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    if (git_repository_is_worktree(opened)) {
        int rc = git_repository_open(&entry->lent.repo, git_repository_commondir(opened));
        git_repository_free(opened);
        if (rc < 0) {
            const git_error *e = git_error_last();
            s_entry_free(entry);
            return failure_set(FAILURE_GIT, "cannot open the repository of the worktree: %s",
                               e && e->message ? e->message : "unknown");
        }
    } else {
        entry->lent.repo = opened;
    }
    entry->lent.gitdir = entry->gitdir;
    entry->lent.workdir = entry->workdir;
    int rc = s_add_scratch(entry);
    if (rc != 0) {
        s_entry_free(entry);
        return rc;
    }
    *out = entry;
    return 0;
}

static void s_remove(merge_repos_t *self, size_t i)
{
    s_entry_free(self->entries[i]);
    self->entries[i] = self->entries[--self->count];
}

/* Room for one more kept entry: closes the least recently used one not lent. Returns
 * false when every kept entry is out. */
static bool s_make_room(merge_repos_t *self)
{
    if (self->count < MERGE_REPOS_MAX)
        return true;
    size_t oldest = self->count;
    for (size_t i = 0; i < self->count; i++)
        if (!self->entries[i]->out &&
            (oldest == self->count || self->entries[i]->used < self->entries[oldest]->used))
            oldest = i;
    if (oldest == self->count)
        return false;
    s_remove(self, oldest);
    return true;
}

/* ---- the set --------------------------------------------------------------------------- */

int merge_repos_new(merge_repos_t **out)
{
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    pthread_mutex_init(&(*out)->lock, NULL);
    git_libgit2_init();
    return 0;
}

void merge_repos_destroy(merge_repos_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    merge_repos_t *self = *self_p;
    while (self->count > 0)
        s_remove(self, self->count - 1);
    pthread_mutex_destroy(&self->lock);
    free(self);
    git_libgit2_shutdown();
    *self_p = NULL;
}

int merge_repos_get(merge_repos_t *self, const char *path, merge_repo_t **out)
{
    *out = NULL;
    pthread_mutex_lock(&self->lock);
    s_entry_t *found = NULL;
    for (size_t i = 0; i < self->count && found == NULL; i++) {
        if (strcmp(self->entries[i]->path, path) != 0)
            continue;
        found = self->entries[i];
        if (found->out)
            break;
        s_print_t now = {0};
        s_print_take(&now, found->lent.repo);
        bool same = s_print_equal(&now, &found->print);
        free(now.stamps);
        if (!same) {
            s_remove(self, i);
            found = NULL;
            break;
        }
    }
    if (found != NULL && !found->out) {
        found->out = true;
        found->used = ++self->clock;
        *out = &found->lent;
        pthread_mutex_unlock(&self->lock);
        return 0;
    }
    s_entry_t *entry = NULL;
    int rc = s_entry_open(&entry, path);
    if (rc == 0) {
        self->opened++;
        entry->out = true;
        entry->used = ++self->clock;
        entry->kept = found == NULL && s_make_room(self);
        if (entry->kept)
            self->entries[self->count++] = entry;
        *out = &entry->lent;
    }
    pthread_mutex_unlock(&self->lock);
    return rc;
}

void merge_repos_put(merge_repos_t *self, merge_repo_t **repo_p)
{
    if (repo_p == NULL || *repo_p == NULL)
        return;
    s_entry_t *entry = (s_entry_t *)*repo_p;
    *repo_p = NULL;
    pthread_mutex_lock(&self->lock);
    if (entry->kept) {
        s_print_take(&entry->print, entry->lent.repo);
        entry->out = false;
    } else {
        s_entry_free(entry);
    }
    pthread_mutex_unlock(&self->lock);
}

size_t merge_repos_opened(const merge_repos_t *self)
{
    pthread_mutex_lock((pthread_mutex_t *)&self->lock);
    size_t opened = self->opened;
    pthread_mutex_unlock((pthread_mutex_t *)&self->lock);
    return opened;
}
