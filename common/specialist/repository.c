/* repository: see repository.h. */
#include "repository.h"

#include "failure.h"
#include "protocol.h"

#include <git2.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int repository_open(git_repository **out, const char *path)
{
    *out = NULL;
    int rc = git_repository_open_ext(out, path, 0, NULL);
    if (rc == 0)
        return 0;
    const git_error *why = git_error_last();
    if (rc == GIT_EOWNER ||
        (why != NULL && why->message != NULL && strstr(why->message, "safe.directory"))) {
        /* libgit2's own text ("config value 'safe.directory' was not found") hides why. */
        struct stat st;
        long owner = stat(path, &st) == 0 ? (long)st.st_uid : -1;
        return failure_set(FAILURE_STATE,
                           "git refuses the repository at %s: it belongs to uid %ld and this "
                           "is uid %ld (git's ownership check): run as the repository's owner, "
                           "or trust it with `git config --global --add safe.directory %s`",
                           path, owner, (long)geteuid(), path);
    }
    return failure_set(FAILURE_NOT_FOUND, "%s is not in a git repository", path);
}

int repository_root(const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s", path);
    git_libgit2_init();
    git_repository *repo = NULL;
    int rc = repository_open(&repo, path);
    if (rc != 0) {
        git_libgit2_shutdown();
        return rc;
    }
    char common[PATH_MAX];
    snprintf(common, sizeof common, "%s", git_repository_commondir(repo));
    size_t len = strlen(common);
    while (len > 1 && common[len - 1] == '/')
        common[--len] = '\0';
    /* A non-bare repository's common dir is "<root>/.git". */
    if (!git_repository_is_bare(repo) && len >= 5 && strcmp(common + len - 5, "/.git") == 0)
        common[len - 5] = '\0';
    char resolved[PATH_MAX];
    snprintf(out, size, "%s", realpath(common, resolved) ? resolved : common);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return 0;
}

int repository_worktree(const char *path, char *out, size_t size)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    int rc = repository_open(&repo, path);
    if (rc == 0 && git_repository_workdir(repo) == NULL) {
        rc = failure_set(FAILURE_NOT_FOUND, "%s is not inside a git working tree", path);
    } else if (rc == 0) {
        char root[PATH_MAX];
        snprintf(root, sizeof root, "%s", git_repository_workdir(repo));
        size_t len = strlen(root);
        while (len > 1 && root[len - 1] == '/')
            root[--len] = '\0';
        snprintf(out, size, "%s", root);
    }
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

int repository_merge_group(const char *path, const char *target, char *out, size_t size)
{
    char root[PATH_MAX];
    int rc = repository_root(path, root, sizeof root);
    snprintf(out, size, "merge:%s:%s", root, target);
    return rc;
}

int repository_file_at(const char *workspace, const char *rev, const char *path, char **text)
{
    *text = NULL;
    git_libgit2_init();
    git_repository *repo = NULL;
    git_object *object = NULL;
    git_tree_entry *entry = NULL;
    git_blob *blob = NULL;
    git_commit *commit = NULL;
    git_tree *tree = NULL;
    int rc = repository_open(&repo, workspace);
    if (rc != 0)
        ; /* repository_open() said why */
    else if (rev[0] == '-' || git_revparse_single(&object, repo, rev) < 0 ||
             git_object_peel((git_object **)&commit, object, GIT_OBJECT_COMMIT) < 0 ||
             git_commit_tree(&tree, commit) < 0)
        rc = failure_set(FAILURE_NOT_FOUND, "'%s' is not a commit or branch of %s", rev,
                         workspace);
    else if (git_tree_entry_bypath(&entry, tree, path) == 0 &&
             git_tree_entry_type(entry) == GIT_OBJECT_BLOB &&
             git_blob_lookup(&blob, repo, git_tree_entry_id(entry)) == 0) {
        size_t size = (size_t)git_blob_rawsize(blob);
        if (memchr(git_blob_rawcontent(blob), '\0', size) != NULL)
            rc = failure_set(FAILURE_INVALID, "%.255s:%s is not text", rev, path);
        else if ((*text = malloc(size + 1)) == NULL)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
        else {
            memcpy(*text, git_blob_rawcontent(blob), size);
            (*text)[size] = '\0';
        }
    }
    git_blob_free(blob);
    git_tree_entry_free(entry);
    git_tree_free(tree);
    git_commit_free(commit);
    git_object_free(object);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

int repository_config_at(const char *workspace, const char *rev, config_t **out)
{
    *out = NULL;
    char *text = NULL;
    int rc = repository_file_at(workspace, rev, REPOSITORY_CONFIG_PATH, &text);
    if (rc == 0 && text != NULL) {
        char name[600];
        snprintf(name, sizeof name, "%.255s:%s", rev, REPOSITORY_CONFIG_PATH);
        rc = config_parse_overlay(name, text, strlen(text), out);
    }
    free(text);
    return rc;
}

int repository_review_mode(const config_t *config, const char *workspace, const char *target,
                           char *out, size_t size)
{
    const char *mode = config_string(config, "review", "mode", "normal");
    config_t *own = NULL;
    int rc = workspace != NULL && workspace[0] != '\0'
                 ? repository_config_at(workspace, target ? target : "main", &own)
                 : 0;
    if (rc == FAILURE_NOT_FOUND)
        rc = 0;
    if (rc == 0 && own != NULL)
        mode = config_string(own, "review", "mode", mode);
    if (rc == 0 && review_mode_parse_name(mode) < 0)
        rc = failure_set(FAILURE_INVALID, "review mode '%.32s': expected strict|normal|yolo|disabled",
                         mode);
    snprintf(out, size, "%s", rc == 0 ? mode : "normal");
    config_destroy(&own);
    return rc;
}

bool repository_network_opt_in(const config_t *config, const char *workspace,
                               const char *target, const char *section, char *out,
                               size_t size)
{
    out[0] = '\0';
    const char *rev = target && target[0] ? target : "main";
    config_t *own = NULL;
    int rc = workspace != NULL && workspace[0] != '\0'
                 ? repository_config_at(workspace, rev, &own)
                 : FAILURE_NOT_FOUND;
    bool allowed = false;
    if (rc == 0 && own != NULL && config_has(own, section, "network")) {
        allowed = config_bool(own, section, "network", false);
        if (allowed)
            snprintf(out, size, "[%s] network = true in %.200s:%s", section, rev,
                     REPOSITORY_CONFIG_PATH);
    } else if (rc == 0 || rc == FAILURE_NOT_FOUND) {
        allowed = config_bool(config, section, "network", false);
        if (allowed)
            snprintf(out, size, "[%s] network = true in cloister.toml", section);
    }
    config_destroy(&own);
    return allowed;
}

/* git_reference_foreach_glob's callback: the first match names the branch on a remote. */
static int s_first_remote(const char *name, void *arg)
{
    snprintf(arg, 600, "%s", name);
    return 1; /* stop */
}

int repository_branch_commit(const char *path, const char *branch, char *out, size_t size)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    int answer = -1;
    if (out != NULL && size > 0)
        out[0] = '\0';
    if (repository_open(&repo, path) == 0) {
        char name[600];
        snprintf(name, sizeof name, "refs/heads/%.500s", branch);
        git_oid oid;
        bool found = git_reference_name_to_id(&oid, repo, name) == 0;
        if (!found) {
            char glob[600];
            snprintf(glob, sizeof glob, "refs/remotes/*/%.500s", branch);
            name[0] = '\0';
            git_reference_foreach_glob(repo, glob, s_first_remote, name);
            found = name[0] != '\0' && git_reference_name_to_id(&oid, repo, name) == 0;
        }
        answer = found ? 1 : 0;
        if (found && out != NULL && size > 0)
            git_oid_tostr(out, size, &oid);
    }
    git_repository_free(repo);
    git_libgit2_shutdown();
    return answer;
}

int repository_branch_exists(const char *path, const char *branch)
{
    return repository_branch_commit(path, branch, NULL, 0);
}
