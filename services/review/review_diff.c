/* review_diff: the branch's changes against the merge base, with libgit2 (see
 * review_diff.h). */
#include "review_diff.h"

#include "failure.h"
#include "repository.h"
#include "template.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int s_git_failure(const char *what)
{
    const git_error *e = git_error_last();
    return failure_set(FAILURE_GIT, "%s: %s", what, e && e->message ? e->message : "libgit2 error");
}

/* Resolves `name` to a commit id: "" is HEAD, anything else a branch by the one rule of
 * repository_branch_resolve() (never a tag or another revision). */
static int s_resolve(git_oid *oid, git_repository *repo, const char *repo_path, const char *name)
{
    if (name[0] == '\0') {
        if (git_reference_name_to_id(oid, repo, "HEAD") == 0)
            return 0;
        return failure_set(FAILURE_NOT_FOUND, "%s has no commit at HEAD", repo_path);
    }
    char hex[GIT_OID_HEXSZ + 1];
    int rc = repository_branch_resolve(repo_path, name, NULL, 0, hex, sizeof hex);
    if (rc == 0 && git_oid_fromstr(oid, hex) != 0)
        rc = failure_set(FAILURE_GIT, "branch '%s' names '%s', not a commit id", name, hex);
    return rc;
}

static char s_status_letter(git_delta_t status)
{
    char letter = git_diff_status_char(status);
    return letter == ' ' ? '?' : letter;
}

void review_diff_destroy(review_diff_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    review_diff_t *self = *self_p;
    for (size_t i = 0; i < self->nfiles; i++) {
        free(self->files[i]);
        free(self->paths[i]);
        free(self->added[i]);
    }
    free(self->files);
    free(self->paths);
    free(self->added);
    free(self->nadded);
    free(self->patch);
    free(self);
    *self_p = NULL;
}

/* git_diff_foreach's state while the added lines are collected. */
typedef struct {
    review_diff_t *diff;
    size_t file; /* the delta being walked, +1 (0 before the first) */
    bool out_of_memory;
} s_added_walk_t;

static int s_added_file(const git_diff_delta *delta, float progress, void *arg)
{
    (void)delta;
    (void)progress;
    ((s_added_walk_t *)arg)->file++;
    return 0;
}

static int s_added_line(const git_diff_delta *delta, const git_diff_hunk *hunk,
                        const git_diff_line *line, void *arg)
{
    (void)delta;
    (void)hunk;
    s_added_walk_t *walk = arg;
    if (line->origin != GIT_DIFF_LINE_ADDITION || line->new_lineno <= 0 || walk->file == 0)
        return 0;
    review_diff_t *self = walk->diff;
    size_t i = walk->file - 1, count = self->nadded[i];
    /* The array's room doubles each time its count reaches a power of two. */
    if ((count & (count - 1)) == 0) {
        unsigned *grown = realloc(self->added[i], (count ? 2 * count : 1) * sizeof *grown);
        if (grown == NULL) {
            walk->out_of_memory = true;
            return -1;
        }
        self->added[i] = grown;
    }
    self->added[i][self->nadded[i]++] = (unsigned)line->new_lineno;
    return 0;
}

static int s_fill(review_diff_t *self, git_diff *diff, size_t budget)
{
    size_t n = git_diff_num_deltas(diff);
    self->files = calloc(n ? n : 1, sizeof *self->files);
    self->paths = calloc(n ? n : 1, sizeof *self->paths);
    self->added = calloc(n ? n : 1, sizeof *self->added);
    self->nadded = calloc(n ? n : 1, sizeof *self->nadded);
    if (self->files == NULL || self->paths == NULL || self->added == NULL || self->nadded == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const git_diff_delta *delta = git_diff_get_delta(diff, i);
        const char *path = delta->new_file.path ? delta->new_file.path : delta->old_file.path;
        char *file = NULL;
        char *copy = strdup(path);
        if (copy == NULL || asprintf(&file, "%c %s", s_status_letter(delta->status), path) < 0) {
            free(copy);
            return failure_set(FAILURE_MEMORY, "out of memory");
        }
        self->files[i] = file;
        self->paths[i] = copy;
        self->nfiles++;
    }
    s_added_walk_t walk = {.diff = self};
    if (git_diff_foreach(diff, s_added_file, NULL, NULL, s_added_line, &walk) != 0)
        return walk.out_of_memory ? failure_set(FAILURE_MEMORY, "out of memory")
                                  : s_git_failure("reading the added lines");
    git_buf buf = {0};
    if (git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) != 0)
        return s_git_failure("formatting the diff");
    size_t len = buf.size;
    self->patch_full_len = len;
    if (len > budget) {
        /* Cut at a line end inside the budget. */
        len = budget;
        while (len > 0 && buf.ptr[len - 1] != '\n')
            len--;
        self->patch_truncated = true;
    }
    self->patch = strndup(buf.ptr ? buf.ptr : "", len);
    git_buf_dispose(&buf);
    return self->patch ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
}

/* Chooses where the diff starts: `since` when it is a proper ancestor of head, else the
 * merge base (saying why in self->scope_note). */
static void s_choose_base(review_diff_t *self, git_repository *repo, const git_oid *head,
                          const git_oid *merge_base, const char *since, git_oid *base)
{
    git_oid_cpy(base, merge_base);
    git_oid since_oid;
    if (since == NULL || since[0] == '\0') {
        snprintf(self->scope_note, sizeof self->scope_note, "full review: the branch from "
                                                            "its merge base");
        return;
    }
    if (git_oid_fromstr(&since_oid, since) != 0 || git_oid_equal(&since_oid, head)) {
        snprintf(self->scope_note, sizeof self->scope_note,
                 "full review: nothing was committed since the last review of %.12s", since);
        return;
    }
    if (git_graph_descendant_of(repo, head, &since_oid) != 1) {
        snprintf(self->scope_note, sizeof self->scope_note,
                 "full review: the last reviewed commit %.12s is no longer in the branch "
                 "(force-pushed)",
                 since);
        return;
    }
    git_oid_cpy(base, &since_oid);
    self->incremental = true;
    snprintf(self->scope_note, sizeof self->scope_note,
             "incremental review: only the commits since the last review of %.12s", since);
}

int review_diff_compute(review_diff_t **out, const char *repo_path, const char *branch,
                        const char *target, const char *since, size_t budget)
{
    *out = NULL;
    git_libgit2_init();
    git_repository *repo = NULL;
    git_commit *base_commit = NULL, *head_commit = NULL;
    git_tree *base_tree = NULL, *head_tree = NULL;
    git_diff *diff = NULL;
    review_diff_t *self = calloc(1, sizeof *self);
    int rc;
    if (self == NULL) {
        rc = failure_set(FAILURE_MEMORY, "out of memory");
        goto out;
    }
    if (git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0) {
        rc = failure_set(FAILURE_NOT_FOUND, "%s is not a git repository", repo_path);
        goto out;
    }
    git_oid head, target_oid, merge_base, base;
    if ((rc = s_resolve(&head, repo, repo_path, branch)) != 0 ||
        (rc = s_resolve(&target_oid, repo, repo_path, target)) != 0)
        goto out;
    if (git_merge_base(&merge_base, repo, &head, &target_oid) != 0) {
        rc = failure_set(FAILURE_NOT_FOUND, "'%s' and '%s' have no common ancestor",
                         branch[0] ? branch : "HEAD", target);
        goto out;
    }
    s_choose_base(self, repo, &head, &merge_base, since, &base);
    git_oid_tostr(self->merge_base, sizeof self->merge_base, &merge_base);
    git_oid_tostr(self->base, sizeof self->base, &base);
    git_oid_tostr(self->head, sizeof self->head, &head);
    git_diff_options options;
    git_diff_options_init(&options, GIT_DIFF_OPTIONS_VERSION);
    if (git_commit_lookup(&base_commit, repo, &base) != 0 ||
        git_commit_lookup(&head_commit, repo, &head) != 0 ||
        git_commit_tree(&base_tree, base_commit) != 0 ||
        git_commit_tree(&head_tree, head_commit) != 0 ||
        git_diff_tree_to_tree(&diff, repo, base_tree, head_tree, &options) != 0) {
        rc = s_git_failure("diffing the branch");
        goto out;
    }
    git_diff_find_options find;
    git_diff_find_options_init(&find, GIT_DIFF_FIND_OPTIONS_VERSION);
    if (git_diff_find_similar(diff, &find) != 0) {
        rc = s_git_failure("finding renames");
        goto out;
    }
    rc = s_fill(self, diff, budget);
out:
    git_diff_free(diff);
    git_tree_free(base_tree);
    git_tree_free(head_tree);
    git_commit_free(base_commit);
    git_commit_free(head_commit);
    git_repository_free(repo);
    if (rc == 0)
        *out = self;
    else
        review_diff_destroy(&self);
    git_libgit2_shutdown();
    return rc;
}

char *review_diff_render(const review_diff_t *diff)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    /* Only an incremental review says so: the full one reads as it always did. */
    if (diff->incremental)
        fprintf(f, "Scope: %s (%.12s..%.12s); the earlier commits were reviewed before.\n\n",
                diff->scope_note, diff->base, diff->head);
    fprintf(f, "Files changed (%zu):\n", diff->nfiles);
    for (size_t i = 0; i < diff->nfiles; i++)
        fprintf(f, "- %s\n", diff->files[i]);
    if (diff->nfiles == 0)
        fputs(diff->incremental ? "(no changes since the last review)\n"
                                : "(no changes between the merge base and the branch)\n",
              f);
    fputc('\n', f);
    char *fenced = template_fence_data("unified diff of the branch", diff->patch);
    if (fenced != NULL)
        fputs(fenced, f);
    free(fenced);
    if (diff->patch_truncated)
        fprintf(f, "(patch cut at %zu of %zu characters)\n", strlen(diff->patch),
                diff->patch_full_len);
    if (fclose(f) != 0 || fenced == NULL) {
        free(text);
        return NULL;
    }
    return text;
}
