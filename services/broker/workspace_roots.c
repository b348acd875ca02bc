/* workspace_roots: the directories a task's repository may be in (see workspace_roots.h). */
#include "workspace_roots.h"

#include "failure.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKSPACE_ROOTS_MAX 32

struct workspace_roots_t {
    char *roots[WORKSPACE_ROOTS_MAX]; /* absolute, without a trailing '/' ("" is "/") */
    int count;
    char text[4096];
};

/* Adds `root` ("~" and "~/..." from $HOME), without its trailing slashes. */
static int s_add(workspace_roots_t *self, const char *root)
{
    char expanded[PATH_MAX];
    const char *home = getenv("HOME");
    if (root[0] == '~' && (root[1] == '\0' || root[1] == '/')) {
        if (home == NULL || home[0] != '/')
            return failure_set(FAILURE_INVALID,
                               "workspace root '%s': HOME is not set to an absolute path", root);
        snprintf(expanded, sizeof expanded, "%s%s", home, root + 1);
        root = expanded;
    }
    if (root[0] != '/')
        return failure_set(FAILURE_INVALID, "workspace root '%s' is not an absolute path", root);
    if (self->count == WORKSPACE_ROOTS_MAX)
        return failure_set(FAILURE_INVALID, "more than %d workspace roots", WORKSPACE_ROOTS_MAX);
    char *copy = strdup(root);
    if (copy == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t len = strlen(copy);
    while (len > 0 && copy[len - 1] == '/')
        copy[--len] = '\0';
    self->roots[self->count++] = copy;
    size_t used = strlen(self->text);
    snprintf(self->text + used, sizeof self->text - used, "%s%s", used ? ", " : "",
             len ? copy : "/");
    return 0;
}

/* Adds each root of a colon-separated list. */
static int s_add_list(workspace_roots_t *self, const char *list)
{
    char *copy = strdup(list);
    if (copy == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *root = strtok_r(copy, ":", &save); rc == 0 && root != NULL;
         root = strtok_r(NULL, ":", &save))
        rc = s_add(self, root);
    free(copy);
    return rc;
}

int workspace_roots_new(const config_t *config, workspace_roots_t **out)
{
    *out = NULL;
    workspace_roots_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    const char *from_env = getenv("CLOISTER_WORKSPACE_ROOTS");
    int rc = 0;
    if (from_env != NULL && from_env[0] != '\0') {
        rc = s_add_list(self, from_env);
    } else if (config_has(config, "security", "workspace_roots")) {
        size_t n = config_array_len(config, "security", "workspace_roots");
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const char *root = config_array_string(config, "security", "workspace_roots", i);
            rc = s_add(self, root ? root : "");
        }
    } else if (getenv("HOME") != NULL && getenv("HOME")[0] == '/') {
        rc = s_add(self, "~");
    }
    if (rc != 0) {
        workspace_roots_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void workspace_roots_destroy(workspace_roots_t **self_p)
{
    workspace_roots_t *self = *self_p;
    if (self == NULL)
        return;
    for (int i = 0; i < self->count; i++)
        free(self->roots[i]);
    free(self);
    *self_p = NULL;
}

const char *workspace_roots_text(const workspace_roots_t *self)
{
    return self->count ? self->text : "none";
}

/* True when `path` has a "." or ".." component. */
static bool s_has_dot_component(const char *path)
{
    for (const char *c = path; (c = strchr(c, '/')) != NULL; c++) {
        const char *name = c + 1;
        size_t len = strcspn(name, "/");
        if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
            return true;
    }
    return false;
}

/* True when `path` is `root` or below it. */
static bool s_under(const char *path, const char *root)
{
    size_t len = strlen(root);
    return strncmp(path, root, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

/* The index of the first root `path` is under, or -1. */
static int s_root_of(const workspace_roots_t *self, const char *path)
{
    for (int i = 0; i < self->count; i++) {
        if (s_under(path, self->roots[i]))
            return i;
    }
    return -1;
}

int workspace_roots_check(const workspace_roots_t *self, const char *workspace)
{
    if (workspace[0] != '/')
        return failure_set(FAILURE_INVALID, "payload.workspace '%.200s' is not an absolute path",
                           workspace);
    if (s_has_dot_component(workspace))
        return failure_set(FAILURE_INVALID,
                           "payload.workspace '%.200s' has a '.' or '..' component", workspace);
    int root = s_root_of(self, workspace);
    if (root < 0)
        return failure_set(FAILURE_INVALID,
                           "payload.workspace '%.200s' is outside the workspace roots (%s); "
                           "add its directory to [security] workspace_roots",
                           workspace, workspace_roots_text(self));
    /* Where the broker can see the directory: a symlink must not lead out of the roots. */
    char real_path[PATH_MAX], real_root[PATH_MAX];
    if (realpath(workspace, real_path) != NULL &&
        realpath(self->roots[root][0] ? self->roots[root] : "/", real_root) != NULL &&
        strcmp(real_root, "/") != 0 && s_root_of(self, real_path) < 0 &&
        !s_under(real_path, real_root))
        return failure_set(FAILURE_INVALID,
                           "payload.workspace '%.200s' leads to %.200s, outside the workspace "
                           "roots (%s)",
                           workspace, real_path, workspace_roots_text(self));
    return 0;
}
