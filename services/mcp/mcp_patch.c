/* mcp_patch: apply_patch with libgit2 (see mcp_patch.h). */
#include "mcp_patch.h"

#include "failure.h"

#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* True when `path` stays inside the work tree: relative, no `..` component, and not in
 * the repository's own `.git`. */
static bool s_path_allowed(const char *path)
{
    if (path == NULL || path[0] == '\0' || path[0] == '/')
        return false;
    const char *part = path;
    while (*part != '\0') {
        size_t len = strcspn(part, "/");
        if ((len == 2 && strncmp(part, "..", 2) == 0) ||
            (len == 4 && strncasecmp(part, ".git", 4) == 0))
            return false;
        part += len;
        while (*part == '/')
            part++;
    }
    return true;
}

/* The delta callback of a one-file check: applies only delta number `wanted`. */
typedef struct {
    size_t wanted;
    size_t seen;
} one_file_t;

static int s_only_one(const git_diff_delta *delta, void *payload)
{
    (void)delta;
    one_file_t *one = payload;
    return one->seen++ == one->wanted ? 0 : 1;
}

static const char *s_git_error(void)
{
    const git_error *error = git_error_last();
    return error && error->message ? error->message : "unknown libgit2 error";
}

/* True when the file a delta creates is already in the work tree: git_apply's check
 * passes it, and only writing it would find the conflict. */
static bool s_creates_existing(git_repository *repo, const git_diff_delta *delta)
{
    char path[PATH_MAX];
    struct stat st;
    return delta->status == GIT_DELTA_ADDED &&
           snprintf(path, sizeof path, "%s%s", git_repository_workdir(repo),
                    delta->new_file.path) < (int)sizeof path &&
           lstat(path, &st) == 0;
}

/* Checks every file on its own; appends its line to `files`. Returns how many fail, or -1
 * when a path is refused (failure_message() says which). */
static int s_check_files(git_repository *repo, git_diff *diff, json_t *files)
{
    int failing = 0;
    size_t n = git_diff_num_deltas(diff);
    for (size_t i = 0; i < n; i++) {
        const git_diff_delta *delta = git_diff_get_delta(diff, i);
        const char *path = delta->new_file.path ? delta->new_file.path : delta->old_file.path;
        if (!s_path_allowed(delta->old_file.path) || !s_path_allowed(delta->new_file.path)) {
            failure_set(FAILURE_INVALID, "patch refused: '%s' is outside the workspace", path);
            return -1;
        }
        one_file_t one = {.wanted = i};
        git_apply_options options;
        git_apply_options_init(&options, GIT_APPLY_OPTIONS_VERSION);
        options.delta_cb = s_only_one;
        options.payload = &one;
        options.flags = GIT_APPLY_CHECK;
        json_t *line = json_pack("{s:s}", "path", path);
        if (s_creates_existing(repo, delta)) {
            json_object_set_new(line, "ok", json_false());
            json_object_set_new(line, "error", json_string("it already exists in the work tree"));
            failing++;
        } else if (git_apply(repo, diff, GIT_APPLY_LOCATION_WORKDIR, &options) == 0) {
            json_object_set_new(line, "ok", json_true());
        } else {
            json_object_set_new(line, "ok", json_false());
            json_object_set_new(line, "error", json_string(s_git_error()));
            failing++;
        }
        json_array_append_new(files, line);
    }
    return failing;
}

int mcp_patch_apply(const char *workspace, const char *text, size_t len, bool check_only,
                    json_t *files)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    git_diff *diff = NULL;
    int rc = 0;
    if (git_repository_open_ext(&repo, workspace, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) != 0 ||
        git_repository_is_bare(repo)) {
        rc = failure_set(FAILURE_NOT_FOUND, "%s is not the root of a git work tree: %s",
                         workspace, repo ? "the repository is bare" : s_git_error());
    } else if (git_diff_from_buffer(&diff, text, len) != 0) {
        rc = failure_set(FAILURE_INVALID, "not a unified diff: %s", s_git_error());
    } else if (git_diff_num_deltas(diff) == 0) {
        rc = failure_set(FAILURE_INVALID, "the diff names no file (expected `--- a/…` and "
                                          "`+++ b/…` headers and hunks)");
    } else {
        int failing = s_check_files(repo, diff, files);
        if (failing < 0)
            rc = FAILURE_INVALID;
        else if (failing > 0)
            rc = failure_set(FAILURE_STATE, "%d of %zu file(s) do not apply: nothing was written",
                             failing, git_diff_num_deltas(diff));
        else if (!check_only && git_apply(repo, diff, GIT_APPLY_LOCATION_WORKDIR, NULL) != 0)
            rc = failure_set(FAILURE_STATE, "applying the patch: %s", s_git_error());
    }
    git_diff_free(diff);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}
