/* merge_conflicts: the in-memory merge and its conflicts named as git names them (see
 * merge_conflicts.h). */
#include "merge_conflicts.h"

#include "failure.h"

#include <git2/sys/index.h>
#include <stdlib.h>
#include <string.h>

static int s_git_fail(const char *what)
{
    const git_error *e = git_error_last();
    return failure_set(FAILURE_GIT, "%s: %s", what, e && e->message ? e->message : "unknown");
}

unsigned int merge_conflicts_rename_limit(git_repository *repo)
{
    static const char *const keys[] = {"merge.renameLimit", "diff.renameLimit"};
    git_config *config = NULL;
    unsigned int limit = MERGE_CONFLICTS_RENAME_LIMIT;
    if (git_repository_config_snapshot(&config, repo) < 0) {
        git_error_clear();
        return limit;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int32_t value = 0;
        if (git_config_get_int32(&value, config, keys[i]) == 0) {
            if (value > 0)
                limit = (unsigned int)value;
            break;
        }
    }
    git_error_clear();
    git_config_free(config);
    return limit;
}

static bool s_same(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Both sides renamed the file, each to a path of its own: git lists all three paths. */
static bool s_renamed_one_to_two(const git_index_name_entry *name)
{
    return name->ours != NULL && name->theirs != NULL && !s_same(name->ours, name->ancestor) &&
           !s_same(name->theirs, name->ancestor) && !s_same(name->ours, name->theirs);
}

/* True when the conflict at `path` (sides `ours`, `theirs`) is only the old path of a
 * rename git names by its new path: a NAME entry renames `path` away on at least one
 * side, and each side present at `path` is that side's own path in the NAME entry. */
static bool s_old_path_of_rename(git_index *index, const char *path, const git_index_entry *ours,
                                 const git_index_entry *theirs)
{
    size_t n = git_index_name_entrycount(index);
    for (size_t i = 0; i < n; i++) {
        const git_index_name_entry *name = git_index_name_get_byindex(index, i);
        if (name == NULL || !s_same(name->ancestor, path) || s_renamed_one_to_two(name))
            continue;
        bool renamed = (name->ours != NULL && !s_same(name->ours, path)) ||
                       (name->theirs != NULL && !s_same(name->theirs, path));
        if (renamed && (ours == NULL || s_same(name->ours, path)) &&
            (theirs == NULL || s_same(name->theirs, path)))
            return true;
    }
    return false;
}

/* The entry of `stage` (2 ours, 3 theirs) at `path`, or NULL. */
static const git_index_entry *s_stage_entry(git_index *index, const char *path, int stage)
{
    const git_index_entry *entry = git_index_get_bypath(index, path, stage);
    if (entry == NULL)
        git_error_clear();
    return entry;
}

/* A side absent at a renamed path holds the file at its own path, named by the NAME
 * entry that has `path` on the other side. */
static const git_index_entry *s_renamed_side(git_index *index, const char *path, int stage)
{
    size_t n = git_index_name_entrycount(index);
    for (size_t i = 0; i < n; i++) {
        const git_index_name_entry *name = git_index_name_get_byindex(index, i);
        if (name == NULL)
            continue;
        const char *other = stage == 2 ? name->theirs : name->ours;
        const char *own = stage == 2 ? name->ours : name->theirs;
        if (s_same(other, path) && own != NULL && !s_same(own, path))
            return s_stage_entry(index, own, stage);
    }
    return NULL;
}

static int s_add(merge_conflicts_t *out, const char *path, const git_index_entry *ours,
                 const git_index_entry *theirs)
{
    for (size_t i = 0; i < out->count; i++)
        if (strcmp(out->conflicts[i].path, path) == 0)
            return 0;
    merge_conflict_t *grown = realloc(out->conflicts, (out->count + 1) * sizeof *grown);
    if (grown == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    out->conflicts = grown;
    merge_conflict_t *c = &grown[out->count];
    memset(c, 0, sizeof *c);
    c->path = strdup(path);
    if (c->path == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    out->count++;
    if (ours == NULL)
        ours = s_renamed_side(out->index, path, 2);
    if (theirs == NULL)
        theirs = s_renamed_side(out->index, path, 3);
    if (ours != NULL) {
        c->has_ours = true;
        c->ours = ours->id;
    }
    if (theirs != NULL) {
        c->has_theirs = true;
        c->theirs = theirs->id;
    }
    return 0;
}

static int s_compare_conflicts(const void *a, const void *b)
{
    return strcmp(((const merge_conflict_t *)a)->path, ((const merge_conflict_t *)b)->path);
}

static int s_collect(merge_conflicts_t *out)
{
    git_index_conflict_iterator *it = NULL;
    if (git_index_conflict_iterator_new(&it, out->index) < 0)
        return s_git_fail("cannot list conflicts");
    const git_index_entry *ancestor, *ours, *theirs;
    int rc = 0;
    while (rc == 0 && git_index_conflict_next(&ancestor, &ours, &theirs, it) == 0) {
        const git_index_entry *any = ours ? ours : theirs ? theirs : ancestor;
        if (!s_old_path_of_rename(out->index, any->path, ours, theirs))
            rc = s_add(out, any->path, ours, theirs);
    }
    git_index_conflict_iterator_free(it);
    if (rc == 0 && out->count > 1)
        qsort(out->conflicts, out->count, sizeof out->conflicts[0], s_compare_conflicts);
    return rc;
}

int merge_conflicts_find(merge_conflicts_t *out, git_repository *repo, const git_oid *ours,
                         const git_oid *theirs)
{
    memset(out, 0, sizeof *out);
    git_commit *our_commit = NULL, *their_commit = NULL;
    git_merge_options opts;
    git_merge_options_init(&opts, GIT_MERGE_OPTIONS_VERSION);
    opts.target_limit = merge_conflicts_rename_limit(repo);
    int rc = 0;
    if (git_commit_lookup(&our_commit, repo, ours) < 0 ||
        git_commit_lookup(&their_commit, repo, theirs) < 0 ||
        git_merge_commits(&out->index, repo, our_commit, their_commit, &opts) < 0)
        rc = s_git_fail("three-way merge failed");
    git_commit_free(our_commit);
    git_commit_free(their_commit);
    if (rc == 0 && git_index_has_conflicts(out->index))
        rc = s_collect(out);
    return rc;
}

void merge_conflicts_clear(merge_conflicts_t *conflicts)
{
    for (size_t i = 0; i < conflicts->count; i++)
        free(conflicts->conflicts[i].path);
    free(conflicts->conflicts);
    git_index_free(conflicts->index);
    memset(conflicts, 0, sizeof *conflicts);
}
