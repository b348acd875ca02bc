/* merge_checkout: the user's checkout of a branch (see merge_checkout.h). */
#include "merge_checkout.h"

#include "failure.h"
#include "home.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct merge_checkout_t {
    git_repository *repo; /* the working tree opened as a repository (owned) */
    char *ref_name;       /* "refs/heads/<branch>" */
    char *path;           /* its directory, without a trailing slash */
};

static int s_git_fail(const char *what)
{
    const git_error *e = git_error_last();
    return failure_set(FAILURE_GIT, "%s: %s", what, e && e->message ? e->message : "unknown");
}

/* True when the HEAD of `repo` is the symbolic ref `ref_name`. */
static bool s_head_is(git_repository *repo, const char *ref_name)
{
    git_reference *head = NULL;
    if (git_reference_lookup(&head, repo, "HEAD") < 0) {
        git_error_clear();
        return false;
    }
    const char *target = git_reference_type(head) == GIT_REFERENCE_SYMBOLIC
                             ? git_reference_symbolic_target(head)
                             : NULL;
    bool is = target != NULL && strcmp(target, ref_name) == 0;
    git_reference_free(head);
    return is;
}

/* Takes `wt_repo` (owned) as the checkout when its HEAD is the branch; else frees it. */
static int s_consider(merge_checkout_t **out, git_repository *wt_repo, const char *ref_name)
{
    const char *workdir = git_repository_workdir(wt_repo);
    if (workdir == NULL || !s_head_is(wt_repo, ref_name)) {
        git_repository_free(wt_repo);
        return 0;
    }
    merge_checkout_t *self = calloc(1, sizeof *self);
    if (self != NULL) {
        self->repo = wt_repo;
        self->ref_name = strdup(ref_name);
        self->path = strdup(workdir);
    }
    if (self == NULL || self->ref_name == NULL || self->path == NULL) {
        if (self == NULL)
            git_repository_free(wt_repo);
        merge_checkout_destroy(&self);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    size_t len = strlen(self->path);
    if (len > 1 && self->path[len - 1] == '/')
        self->path[len - 1] = '\0';
    *out = self;
    return 0;
}

int merge_checkout_find(merge_checkout_t **out, git_repository *repo, const char *branch)
{
    *out = NULL;
    char ref_name[1024];
    if (snprintf(ref_name, sizeof ref_name, "refs/heads/%s", branch) >= (int)sizeof ref_name)
        return failure_set(FAILURE_INVALID, "branch name too long");
    /* The main working tree, unless the repository is bare. */
    if (!git_repository_is_bare(repo)) {
        git_repository *main_repo = NULL;
        if (git_repository_open(&main_repo, git_repository_workdir(repo)) < 0)
            return s_git_fail("cannot open the main working tree");
        int rc = s_consider(out, main_repo, ref_name);
        if (rc != 0 || *out != NULL)
            return rc;
    }
    git_strarray names = {NULL, 0};
    if (git_worktree_list(&names, repo) < 0)
        return s_git_fail("cannot list the worktrees");
    int rc = 0;
    for (size_t i = 0; i < names.count && rc == 0 && *out == NULL; i++) {
        git_worktree *worktree = NULL;
        git_repository *wt_repo = NULL;
        /* A worktree whose directory is gone (prunable) has no checkout to look at. */
        if (git_worktree_lookup(&worktree, repo, names.strings[i]) < 0 ||
            git_worktree_validate(worktree) < 0 ||
            git_repository_open_from_worktree(&wt_repo, worktree) < 0)
            git_error_clear();
        else
            rc = s_consider(out, wt_repo, ref_name);
        git_worktree_free(worktree);
    }
    git_strarray_dispose(&names);
    return rc;
}

const char *merge_checkout_path(const merge_checkout_t *self)
{
    return self->path;
}

int merge_checkout_dirty(merge_checkout_t *self, char *first, size_t size)
{
    git_status_options opts;
    git_status_options_init(&opts, GIT_STATUS_OPTIONS_VERSION);
    opts.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
    opts.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES;
    git_status_list *list = NULL;
    if (git_status_list_new(&list, self->repo, &opts) < 0)
        return s_git_fail("cannot read the status of the checkout");
    size_t count = git_status_list_entrycount(list);
    if (count > 0) {
        const git_status_entry *entry = git_status_byindex(list, 0);
        const git_diff_delta *delta =
            entry->index_to_workdir ? entry->index_to_workdir : entry->head_to_index;
        const char *path = delta && delta->new_file.path ? delta->new_file.path : "?";
        if (count == 1)
            snprintf(first, size, "%s", path);
        else
            snprintf(first, size, "%s and %zu more", path, count - 1);
    }
    git_status_list_free(list);
    return count > 0 ? 1 : 0;
}

/* What a checkout writes into the user's tree: libgit2 makes files and directories with
 * the process's umask, and the services' is 077 (home.h), which would leave merged files
 * 0600 in the user's checkout. Each written path (and each directory that did not exist
 * before) is given afterwards the mode git gives it under the user's umask. */
typedef struct {
    const char *root;  /* the checkout's directory */
    char **paths;      /* written files, relative to root; then created directories */
    bool *executable;  /* per path: an executable blob (files only) */
    bool *directory;   /* per path: a directory made by the checkout */
    size_t count;
    bool failed;       /* out of memory: the modes cannot all be fixed */
} s_written_t;

static void s_written_add(s_written_t *w, const char *path, bool executable, bool directory)
{
    char **paths = realloc(w->paths, (w->count + 1) * sizeof *paths);
    bool *exec = realloc(w->executable, (w->count + 1) * sizeof *exec);
    bool *dirs = realloc(w->directory, (w->count + 1) * sizeof *dirs);
    if (paths != NULL)
        w->paths = paths;
    if (exec != NULL)
        w->executable = exec;
    if (dirs != NULL)
        w->directory = dirs;
    char *copy = strdup(path);
    if (paths == NULL || exec == NULL || dirs == NULL || copy == NULL) {
        free(copy);
        w->failed = true;
        return;
    }
    w->paths[w->count] = copy;
    w->executable[w->count] = executable;
    w->directory[w->count] = directory;
    w->count++;
}

/* Called before anything is written, for each file the checkout updates or adds. */
static int s_notify(git_checkout_notify_t why, const char *path, const git_diff_file *baseline,
                    const git_diff_file *target, const git_diff_file *workdir, void *payload)
{
    (void)why;
    (void)baseline;
    (void)workdir;
    s_written_t *w = payload;
    if (target == NULL || target->mode == 0 || target->mode == GIT_FILEMODE_LINK)
        return 0;
    /* Its missing parent directories, outermost first. */
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", w->root, path);
    size_t root_len = strlen(w->root);
    for (char *slash = strchr(full + root_len + 1, '/'); slash != NULL;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        struct stat st;
        if (lstat(full, &st) != 0 && errno == ENOENT)
            s_written_add(w, full + root_len + 1, false, true);
        *slash = '/';
    }
    s_written_add(w, path, target->mode == GIT_FILEMODE_BLOB_EXECUTABLE, false);
    return 0;
}

/* After the checkout: the modes git gives under the user's umask. */
static void s_written_fix_modes(const s_written_t *w)
{
    mode_t mask = home_user_umask();
    for (size_t i = 0; i < w->count; i++) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", w->root, w->paths[i]);
        struct stat st;
        if (lstat(full, &st) != 0)
            continue;
        if (w->directory[i] ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))
            chmod(full, (w->directory[i] || w->executable[i] ? 0777 : 0666) & ~mask);
    }
}

static void s_written_free(s_written_t *w)
{
    for (size_t i = 0; i < w->count; i++)
        free(w->paths[i]);
    free(w->paths);
    free(w->executable);
    free(w->directory);
}

/* Writes the tree of commit `to` into the checkout, from the tree of `from` (safe: a file
 * that is not as `from` has it is never overwritten), with the modes git gives. */
static int s_write_files(merge_checkout_t *self, const git_oid *from, const git_oid *to)
{
    s_written_t written = {.root = self->path};
    git_commit *old_commit = NULL, *new_commit = NULL;
    git_tree *old_tree = NULL;
    int rc = 0;
    if (git_commit_lookup(&old_commit, self->repo, from) < 0 ||
        git_commit_lookup(&new_commit, self->repo, to) < 0 ||
        git_commit_tree(&old_tree, old_commit) < 0) {
        rc = s_git_fail("cannot read the commits");
        goto out;
    }
    git_checkout_options opts;
    git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION);
    opts.checkout_strategy = GIT_CHECKOUT_SAFE | GIT_CHECKOUT_DONT_OVERWRITE_IGNORED;
    opts.baseline = old_tree;
    opts.notify_flags = GIT_CHECKOUT_NOTIFY_UPDATED;
    opts.notify_cb = s_notify;
    opts.notify_payload = &written;
    int checked = git_checkout_tree(self->repo, (const git_object *)new_commit, &opts);
    if (checked == 0 && written.failed)
        rc = failure_set(FAILURE_MEMORY, "out of memory: the merged files' modes are not set");
    else if (checked == 0)
        s_written_fix_modes(&written);
    if (checked == GIT_ECONFLICT) {
        const git_error *e = git_error_last();
        rc = failure_set(FAILURE_STATE, "a file is in the way: %s",
                         e && e->message ? e->message : "conflict");
    } else if (checked < 0) {
        rc = s_git_fail("cannot write the files");
    }
out:
    s_written_free(&written);
    git_tree_free(old_tree);
    git_commit_free(new_commit);
    git_commit_free(old_commit);
    return rc;
}

int merge_checkout_advance(merge_checkout_t *self, const git_oid *from, const git_oid *to,
                           const char *message)
{
    int rc = s_write_files(self, from, to);
    if (rc != 0)
        return rc;
    git_reference *moved = NULL;
    int swapped =
        git_reference_create_matching(&moved, self->repo, self->ref_name, to, 1, from, message);
    git_reference_free(moved);
    if (swapped == 0)
        return 0;
    /* The branch moved meanwhile: the files go back to what the branch had. */
    char reason[512];
    const git_error *e = git_error_last();
    snprintf(reason, sizeof reason, "%s", e && e->message ? e->message : "unknown");
    if (s_write_files(self, to, from) != 0)
        return failure_set(FAILURE_GIT, "the branch moved during the update (%s) and the files "
                                        "could not be put back: %s",
                           reason, failure_message());
    if (swapped == GIT_EMODIFIED)
        return 1;
    return failure_set(FAILURE_GIT, "cannot move the branch: %s", reason);
}

void merge_checkout_destroy(merge_checkout_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    merge_checkout_t *self = *self_p;
    git_repository_free(self->repo);
    free(self->ref_name);
    free(self->path);
    free(self);
    *self_p = NULL;
}
