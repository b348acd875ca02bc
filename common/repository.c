/* repository: see repository.h. */
#include "repository.h"

#include "failure.h"

#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int repository_root(const char *path, char *out, size_t size)
{
    snprintf(out, size, "%s", path);
    git_libgit2_init();
    git_repository *repo = NULL;
    if (git_repository_open_ext(&repo, path, 0, NULL) != 0) {
        git_libgit2_shutdown();
        return failure_set(FAILURE_NOT_FOUND, "%s is not inside a git repository", path);
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

int repository_merge_group(const char *path, const char *target, char *out, size_t size)
{
    char root[PATH_MAX];
    int rc = repository_root(path, root, sizeof root);
    snprintf(out, size, "merge:%s:%s", root, target);
    return rc;
}
