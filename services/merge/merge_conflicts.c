/* merge_conflicts: the in-memory merge and its conflicts named as git names them (see
 * merge_conflicts.h). */
#include "merge_conflicts.h"

#include "failure.h"

#include <git2/sys/index.h>
#include <git2/sys/mempack.h>
#include <git2/sys/odb_backend.h>
#include <stdio.h>
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

/* ---- skipping unchanged subtrees ------------------------------------------------------ */

/* One entry of a tree being rewritten. `name` is borrowed from the tree it came from. */
typedef struct {
    const char *name;
    git_filemode_t mode;
    git_oid id;
} s_tree_entry_t;

/* Git's tree order: names compared bytewise, a directory's as if it ended with '/'. */
static int s_tree_order(const void *a, const void *b)
{
    const s_tree_entry_t *x = a, *y = b;
    size_t i = 0;
    while (x->name[i] != '\0' && x->name[i] == y->name[i])
        i++;
    unsigned char cx = (unsigned char)x->name[i], cy = (unsigned char)y->name[i];
    if (cx == '\0' && x->mode == GIT_FILEMODE_TREE)
        cx = '/';
    if (cy == '\0' && y->mode == GIT_FILEMODE_TREE)
        cy = '/';
    return (int)cx - (int)cy;
}

/* Serialises `n` entries as a tree object into the scratch store; its id into *out. */
static int s_write_scratch_tree(git_odb_backend *scratch, s_tree_entry_t *entries, size_t n,
                                git_oid *out)
{
    qsort(entries, n, sizeof *entries, s_tree_order);
    size_t size = 0;
    for (size_t i = 0; i < n; i++)
        size += 8 + strlen(entries[i].name) + 1 + GIT_OID_RAWSZ;
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        int header = snprintf(buf + used, size + 1 - used, "%o %s", (unsigned)entries[i].mode,
                              entries[i].name);
        used += (size_t)header + 1; /* the name's NUL ends the header */
        memcpy(buf + used, entries[i].id.id, GIT_OID_RAWSZ);
        used += GIT_OID_RAWSZ;
    }
    int rc = 0;
    if (git_odb_hash(out, buf, used, GIT_OBJECT_TREE) < 0 ||
        scratch->write(scratch, out, buf, used, GIT_OBJECT_TREE) < 0)
        rc = s_git_fail("cannot write a scratch tree");
    free(buf);
    return rc;
}

typedef struct {
    git_repository *repo;
    git_odb_backend *scratch;
    merge_conflicts_t *out; /* collects the skipped paths */
} s_prune_t;

static int s_add_skipped(merge_conflicts_t *out, const char *prefix, const char *name)
{
    char **grown = realloc(out->skipped, (out->skipped_count + 1) * sizeof *grown);
    if (grown == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    out->skipped = grown;
    size_t len = strlen(prefix) + strlen(name) + 1;
    grown[out->skipped_count] = malloc(len);
    if (grown[out->skipped_count] == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    snprintf(grown[out->skipped_count], len, "%s%s", prefix, name);
    out->skipped_count++;
    return 0;
}

static int s_prune_dir(s_prune_t *p, const git_oid *const ids[3], const char *prefix,
                       git_oid out[3]);

/* Rewrites tree `tree` (one side) with the entries in `changes` (names borrowed from the
 * base tree) replacing its own, into the scratch store; its id into *out. */
static int s_rewrite_side(s_prune_t *p, const git_tree *tree, const s_tree_entry_t *changes,
                          size_t nchanges, git_oid *out)
{
    size_t n = git_tree_entrycount(tree);
    s_tree_entry_t *entries = calloc(n > 0 ? n : 1, sizeof *entries);
    if (entries == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const git_tree_entry *e = git_tree_entry_byindex(tree, i);
        entries[i].name = git_tree_entry_name(e);
        entries[i].mode = git_tree_entry_filemode(e);
        git_oid_cpy(&entries[i].id, git_tree_entry_id(e));
        for (size_t c = 0; c < nchanges; c++)
            if (strcmp(changes[c].name, entries[i].name) == 0) {
                entries[i].mode = changes[c].mode;
                entries[i].id = changes[c].id;
            }
    }
    int rc = s_write_scratch_tree(p->scratch, entries, n, out);
    free(entries);
    return rc;
}

/* The subdirectory `name` of directory `prefix`, a tree on all three sides: the same tree
 * everywhere becomes a placeholder; otherwise it is pruned in turn. Fills changes[0..2]. */
static int s_prune_subdir(s_prune_t *p, const char *prefix, const char *name,
                          const git_oid *const ids[3], s_tree_entry_t changes[3], bool *changed)
{
    *changed = false;
    for (int s = 0; s < 3; s++) {
        changes[s].name = name;
        changes[s].mode = GIT_FILEMODE_TREE;
        changes[s].id = *ids[s];
    }
    if (git_oid_equal(ids[0], ids[1]) && git_oid_equal(ids[0], ids[2])) {
        for (int s = 0; s < 3; s++)
            changes[s].mode = GIT_FILEMODE_COMMIT;
        *changed = true;
        return s_add_skipped(p->out, prefix, name);
    }
    size_t len = strlen(prefix) + strlen(name) + 2;
    char *sub = malloc(len);
    if (sub == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    snprintf(sub, len, "%s%s/", prefix, name);
    git_oid pruned[3];
    int rc = s_prune_dir(p, ids, sub, pruned);
    free(sub);
    for (int s = 0; rc == 0 && s < 3; s++) {
        *changed = *changed || !git_oid_equal(&pruned[s], ids[s]);
        changes[s].id = pruned[s];
    }
    return rc;
}

/* Directory `prefix` (trees ids[0] ancestor, [1] ours, [2] theirs): every subdirectory
 * that is a tree on all three sides is skipped or pruned; the sides' trees rewritten with
 * the result go to the scratch store. out[s] is side s's tree id, rewritten or not. */
static int s_prune_dir(s_prune_t *p, const git_oid *const ids[3], const char *prefix,
                       git_oid out[3])
{
    git_tree *trees[3] = {NULL, NULL, NULL};
    s_tree_entry_t *changes[3] = {NULL, NULL, NULL};
    size_t nchanges = 0;
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++) {
        out[s] = *ids[s];
        if (git_tree_lookup(&trees[s], p->repo, ids[s]) < 0)
            rc = s_git_fail("cannot read a tree");
    }
    size_t n = rc == 0 ? git_tree_entrycount(trees[0]) : 0;
    for (int s = 0; s < 3 && rc == 0; s++)
        if ((changes[s] = calloc(n > 0 ? n : 1, sizeof *changes[s])) == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < n && rc == 0; i++) {
        const git_tree_entry *base = git_tree_entry_byindex(trees[0], i);
        if (git_tree_entry_filemode(base) != GIT_FILEMODE_TREE)
            continue;
        const char *name = git_tree_entry_name(base);
        const git_tree_entry *ours = git_tree_entry_byname(trees[1], name);
        const git_tree_entry *theirs = git_tree_entry_byname(trees[2], name);
        if (ours == NULL || theirs == NULL || git_tree_entry_filemode(ours) != GIT_FILEMODE_TREE ||
            git_tree_entry_filemode(theirs) != GIT_FILEMODE_TREE)
            continue;
        const git_oid *sub[3] = {git_tree_entry_id(base), git_tree_entry_id(ours),
                                 git_tree_entry_id(theirs)};
        s_tree_entry_t side[3];
        bool changed = false;
        rc = s_prune_subdir(p, prefix, name, sub, side, &changed);
        if (rc == 0 && changed) {
            for (int s = 0; s < 3; s++)
                changes[s][nchanges] = side[s];
            nchanges++;
        }
    }
    for (int s = 0; s < 3 && rc == 0 && nchanges > 0; s++)
        rc = s_rewrite_side(p, trees[s], changes[s], nchanges, &out[s]);
    for (int s = 0; s < 3; s++) {
        free(changes[s]);
        git_tree_free(trees[s]);
    }
    return rc;
}

static int s_compare_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The merge with unchanged subtrees skipped, on the one merge base `base`. */
static int s_merge_pruned(merge_conflicts_t *out, const merge_repo_t *repo, const git_oid *base,
                          git_commit *ours, git_commit *theirs, const git_merge_options *opts)
{
    git_commit *base_commit = NULL;
    if (git_commit_lookup(&base_commit, repo->repo, base) < 0)
        return s_git_fail("cannot read the merge base");
    const git_oid *ids[3] = {git_commit_tree_id(base_commit), git_commit_tree_id(ours),
                             git_commit_tree_id(theirs)};
    s_prune_t prune = {repo->repo, repo->scratch, out};
    git_oid pruned[3];
    git_tree *trees[3] = {NULL, NULL, NULL};
    int rc = s_prune_dir(&prune, ids, "", pruned);
    for (int s = 0; s < 3 && rc == 0; s++)
        if (git_tree_lookup(&trees[s], repo->repo, &pruned[s]) < 0)
            rc = s_git_fail("cannot read a pruned tree");
    if (rc == 0 && git_merge_trees(&out->index, repo->repo, trees[0], trees[1], trees[2], opts) < 0)
        rc = s_git_fail("three-way merge failed");
    for (int s = 0; s < 3; s++)
        git_tree_free(trees[s]);
    git_commit_free(base_commit);
    git_mempack_reset(repo->scratch);
    if (rc == 0 && out->skipped_count > 1)
        qsort(out->skipped, out->skipped_count, sizeof out->skipped[0], s_compare_str);
    return rc;
}

/* out->options for a merge of ours <- theirs: git's rename limit, git's similarity on
 * the three trees (the ancestor's only with one merge base). */
static int s_options(merge_conflicts_t *out, git_repository *repo, const git_oid *base,
                     git_commit *ours, git_commit *theirs)
{
    git_merge_options_init(&out->options, GIT_MERGE_OPTIONS_VERSION);
    out->options.target_limit = merge_conflicts_rename_limit(repo);
    git_commit *base_commit = NULL;
    if ((base != NULL && (git_commit_lookup(&base_commit, repo, base) < 0 ||
                          git_commit_tree(&out->trees[0], base_commit) < 0)) ||
        git_commit_tree(&out->trees[1], ours) < 0 || git_commit_tree(&out->trees[2], theirs) < 0) {
        git_commit_free(base_commit);
        return s_git_fail("cannot read the merge's trees");
    }
    git_commit_free(base_commit);
    merge_similarity_init(&out->similarity, &out->options, out->trees[0], out->trees[1],
                          out->trees[2]);
    return 0;
}

int merge_conflicts_find(merge_conflicts_t *out, const merge_repo_t *repo, const git_oid *ours,
                         const git_oid *theirs)
{
    memset(out, 0, sizeof *out);
    git_commit *our_commit = NULL, *their_commit = NULL;
    git_oidarray bases = {NULL, 0};
    int rc = 0;
    if (git_commit_lookup(&our_commit, repo->repo, ours) < 0 ||
        git_commit_lookup(&their_commit, repo->repo, theirs) < 0)
        rc = s_git_fail("three-way merge failed");
    else if (git_merge_bases(&bases, repo->repo, ours, theirs) < 0)
        git_error_clear(); /* no common history: libgit2 merges on an empty ancestor */
    if (rc == 0)
        rc = s_options(out, repo->repo, bases.count == 1 ? &bases.ids[0] : NULL, our_commit,
                       their_commit);
    if (rc == 0 && bases.count == 1 && repo->scratch != NULL)
        rc = s_merge_pruned(out, repo, &bases.ids[0], our_commit, their_commit, &out->options);
    else if (rc == 0 && git_merge_commits(&out->index, repo->repo, our_commit, their_commit,
                                          &out->options) < 0)
        rc = s_git_fail("three-way merge failed");
    git_oidarray_dispose(&bases);
    git_commit_free(our_commit);
    git_commit_free(their_commit);
    if (rc == 0 && git_index_has_conflicts(out->index))
        rc = s_collect(out);
    return rc;
}

/* ---- writing the merged tree ----------------------------------------------------------- */

static bool s_is_skipped(const merge_conflicts_t *merge, const char *path)
{
    return merge->skipped_count > 0 && bsearch(&path, merge->skipped, merge->skipped_count,
                                               sizeof merge->skipped[0], s_compare_str) != NULL;
}

/* Writes the index entries [lo, hi) -- all below one directory, whose path (with its '/')
 * is `skip` bytes long -- as that directory's tree. Entries below a subdirectory sit
 * together in the index's path order. */
static int s_write_level(git_oid *out, const merge_conflicts_t *merge, git_repository *repo,
                         size_t lo, size_t hi, size_t skip)
{
    git_treebuilder *builder = NULL;
    if (git_treebuilder_new(&builder, repo, NULL) < 0)
        return s_git_fail("cannot build a tree");
    int rc = 0;
    size_t i = lo;
    while (rc == 0 && i < hi) {
        const git_index_entry *entry = git_index_get_byindex(merge->index, i);
        const char *rest = entry->path + skip;
        const char *slash = strchr(rest, '/');
        if (slash == NULL) {
            git_filemode_t mode = (git_filemode_t)entry->mode;
            if (mode == GIT_FILEMODE_COMMIT && s_is_skipped(merge, entry->path))
                mode = GIT_FILEMODE_TREE;
            if (git_treebuilder_insert(NULL, builder, rest, &entry->id, mode) < 0)
                rc = s_git_fail("cannot build a tree");
            i++;
            continue;
        }
        size_t name_len = (size_t)(slash - rest);
        size_t j = i + 1;
        while (j < hi && strncmp(git_index_get_byindex(merge->index, j)->path + skip, rest,
                                 name_len + 1) == 0)
            j++;
        char *name = strndup(rest, name_len);
        git_oid sub;
        if (name == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
        if (rc == 0)
            rc = s_write_level(&sub, merge, repo, i, j, skip + name_len + 1);
        if (rc == 0 && git_treebuilder_insert(NULL, builder, name, &sub, GIT_FILEMODE_TREE) < 0)
            rc = s_git_fail("cannot build a tree");
        free(name);
        i = j;
    }
    if (rc == 0 && git_treebuilder_write(out, builder) < 0)
        rc = s_git_fail("cannot write a tree");
    git_treebuilder_free(builder);
    return rc;
}

int merge_conflicts_write_tree(git_oid *tree, const merge_conflicts_t *merge, git_repository *repo)
{
    if (git_index_has_conflicts(merge->index))
        return failure_set(FAILURE_STATE, "the merge index still has conflicts");
    return s_write_level(tree, merge, repo, 0, git_index_entrycount(merge->index), 0);
}

void merge_conflicts_clear(merge_conflicts_t *conflicts)
{
    for (size_t i = 0; i < conflicts->count; i++)
        free(conflicts->conflicts[i].path);
    free(conflicts->conflicts);
    for (size_t i = 0; i < conflicts->skipped_count; i++)
        free(conflicts->skipped[i]);
    free(conflicts->skipped);
    git_index_free(conflicts->index);
    for (int t = 0; t < 3; t++)
        git_tree_free(conflicts->trees[t]);
    memset(conflicts, 0, sizeof *conflicts);
}
