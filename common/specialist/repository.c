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

static int s_resolve_branch(git_repository *repo, const char *path, const char *branch,
                            char *ref, size_t ref_size, git_oid *oid);

/* `rev` as repository_file_at() reads it: a full commit id, else a branch name
 * (repository_branch_resolve()) -- never a tag or any other revision syntax. */
static int s_lookup_rev(git_repository *repo, const char *workspace, const char *rev,
                        git_commit **commit)
{
    git_oid oid;
    char ref[600];
    int rc = 0;
    if (strlen(rev) == GIT_OID_HEXSZ && git_oid_fromstr(&oid, rev) == 0) {
        if (git_commit_lookup(commit, repo, &oid) < 0)
            rc = failure_set(FAILURE_NOT_FOUND, "no commit %.40s in %s", rev, workspace);
    } else if ((rc = s_resolve_branch(repo, workspace, rev, ref, sizeof ref, &oid)) == 0 &&
               git_commit_lookup(commit, repo, &oid) < 0) {
        rc = failure_set(FAILURE_NOT_FOUND, "branch '%.200s' of %s names no commit", rev,
                         workspace);
    }
    return rc;
}

int repository_file_at(const char *workspace, const char *rev, const char *path, char **text)
{
    *text = NULL;
    git_libgit2_init();
    git_repository *repo = NULL;
    git_tree_entry *entry = NULL;
    git_blob *blob = NULL;
    git_commit *commit = NULL;
    git_tree *tree = NULL;
    int rc = repository_open(&repo, workspace);
    if (rc != 0)
        ; /* repository_open() said why */
    else if ((rc = s_lookup_rev(repo, workspace, rev, &commit)) != 0)
        ; /* the reason is set */
    else if (git_commit_tree(&tree, commit) < 0)
        rc = failure_set(FAILURE_NOT_FOUND, "commit '%.64s' of %s has no tree", rev, workspace);
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

/* git_reference_foreach_glob's callback: collects the remote-tracking refs of one name. */
typedef struct {
    char refs[4][600];
    git_oid oids[4];
    int count;
    git_repository *repo;
    size_t branch_len;
} remote_matches_t;

static int s_remote_match(const char *name, void *arg)
{
    remote_matches_t *matches = arg;
    git_oid oid;
    /* The glob's '*' also spans '/': refs/remotes/origin/a/<branch> is origin's branch
     * "a/<branch>", not a remote "origin/a"'s "<branch>". */
    size_t prefix = strlen("refs/remotes/"), len = strlen(name);
    if (len <= prefix + matches->branch_len + 1 ||
        memchr(name + prefix, '/', len - prefix - matches->branch_len - 1) != NULL)
        return 0;
    if (matches->count < 4 && git_reference_name_to_id(&oid, matches->repo, name) == 0) {
        snprintf(matches->refs[matches->count], sizeof matches->refs[0], "%s", name);
        git_oid_cpy(&matches->oids[matches->count], &oid);
        matches->count++;
    }
    return 0;
}

/* The branch rule of repository_branch_resolve() on an open repository: fills ref and oid,
 * or returns the failure. */
static int s_resolve_branch(git_repository *repo, const char *path, const char *branch,
                            char *ref, size_t ref_size, git_oid *oid)
{
    int valid = 0;
    char name[600];
    snprintf(name, sizeof name, "refs/heads/%.500s", branch);
    if (branch[0] == '\0' || branch[0] == '-' || strncmp(branch, "refs/", 5) == 0 ||
        strlen(branch) > 500 || git_branch_name_is_valid(&valid, branch) < 0 || !valid ||
        git_reference_name_is_valid(&valid, name) < 0 || !valid)
        return failure_set(FAILURE_INVALID, "'%.200s' is not a branch name", branch);
    git_reference *reference = NULL;
    git_object *commit = NULL;
    if (git_reference_lookup(&reference, repo, name) == 0) {
        int rc = git_reference_peel(&commit, reference, GIT_OBJECT_COMMIT);
        git_reference_free(reference);
        if (rc < 0)
            return failure_set(FAILURE_NOT_FOUND, "branch '%.200s' of %s names no commit",
                               branch, path);
        git_oid_cpy(oid, git_object_id(commit));
        git_object_free(commit);
        snprintf(ref, ref_size, "%s", name);
        return 0;
    }
    remote_matches_t matches = {.count = 0, .repo = repo, .branch_len = strlen(branch)};
    char glob[600];
    snprintf(glob, sizeof glob, "refs/remotes/*/%.500s", branch);
    git_reference_foreach_glob(repo, glob, s_remote_match, &matches);
    int first_other = -1;
    for (int i = 1; i < matches.count; i++)
        if (!git_oid_equal(&matches.oids[i], &matches.oids[0]))
            first_other = i;
    if (matches.count == 0)
        return failure_set(FAILURE_NOT_FOUND,
                           "no branch '%.200s' in %s (neither refs/heads/%.200s nor a remote's "
                           "branch; a tag or another ref of that name is not a branch)",
                           branch, path, branch);
    if (first_other >= 0)
        return failure_set(FAILURE_INVALID,
                           "'%.200s' is ambiguous in %s: no local branch, and %s and %s are "
                           "at different commits; name a local branch",
                           branch, path, matches.refs[0], matches.refs[first_other]);
    git_oid_cpy(oid, &matches.oids[0]);
    snprintf(ref, ref_size, "%s", matches.refs[0]);
    return 0;
}

/* Opens the repository containing `path` and resolves `branch` in it (s_resolve_branch).
 * Returns 0, FAILURE_NOT_FOUND/FAILURE_INVALID from the rule, or 1 when `path` is in no
 * repository (with the reason set). */
static int s_open_and_resolve(const char *path, const char *branch, char *ref, size_t ref_size,
                              char *commit, size_t commit_size)
{
    if (ref != NULL && ref_size > 0)
        ref[0] = '\0';
    if (commit != NULL && commit_size > 0)
        commit[0] = '\0';
    git_libgit2_init();
    git_repository *repo = NULL;
    int rc;
    char name[600];
    git_oid oid;
    if (repository_open(&repo, path) != 0) {
        rc = 1; /* repository_open() said why */
    } else {
        rc = s_resolve_branch(repo, path, branch, name, sizeof name, &oid);
    }
    if (rc == 0 && ref != NULL && ref_size > 0)
        snprintf(ref, ref_size, "%s", name);
    if (rc == 0 && commit != NULL && commit_size > 0)
        git_oid_tostr(commit, commit_size, &oid);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

int repository_branch_resolve(const char *path, const char *branch, char *ref, size_t ref_size,
                              char *commit, size_t commit_size)
{
    int rc = s_open_and_resolve(path, branch, ref, ref_size, commit, commit_size);
    return rc == 1 ? FAILURE_NOT_FOUND : rc;
}

int repository_branch_commit(const char *path, const char *branch, char *out, size_t size)
{
    int rc = s_open_and_resolve(path, branch, NULL, 0, out, size);
    return rc == 0 ? 1 : rc == 1 ? -1 : 0;
}

int repository_branch_exists(const char *path, const char *branch)
{
    return repository_branch_commit(path, branch, NULL, 0);
}
