/* test_tree: the tree a test job runs in (see test_tree.h). */
#include "test_tree.h"

#include "repository.h"

#include "failure.h"
#include "repository.h"
#include "worktree.h"

#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct test_tree_t {
    git_repository *repo; /* NULL outside git */
    worktree_t *worktree;
    char dir[PATH_MAX];
    char commit[GIT_OID_HEXSZ + 1];
    char source[600];
};

/* Chooses the commit to test (see test_tree.h) into *oid and self->source. */
static int s_choose(test_tree_t *self, const char *workspace, const char *branch,
                    const char *commit, git_oid *oid)
{
    git_object *object = NULL;
    if (commit != NULL && commit[0] != '\0') {
        /* A commit id (at least 7 hex digits), never a name a tag could take over. */
        size_t len = strlen(commit);
        git_oid prefix;
        if (len < 7 || len > GIT_OID_HEXSZ || strspn(commit, "0123456789abcdefABCDEF") != len ||
            git_oid_fromstrn(&prefix, commit, len) < 0 ||
            git_object_lookup_prefix(&object, self->repo, &prefix, len, GIT_OBJECT_COMMIT) < 0)
            return failure_set(FAILURE_NOT_FOUND, "commit '%s' not found in %s", commit,
                               workspace);
        git_oid_cpy(oid, git_object_id(object));
        snprintf(self->source, sizeof self->source, "commit %.12s", git_oid_tostr_s(oid));
    } else if (branch != NULL && branch[0] != '\0') {
        /* The one rule for branch names (repository.h): local, else a remote's branch. */
        char hex[GIT_OID_HEXSZ + 1];
        if (repository_branch_resolve(workspace, branch, NULL, 0, hex, sizeof hex) != 0)
            return FAILURE_NOT_FOUND; /* the reason is set */
        if (git_oid_fromstr(oid, hex) != 0)
            return failure_set(FAILURE_GIT, "branch '%s' names '%s', not a commit", branch, hex);
        snprintf(self->source, sizeof self->source, "branch %.500s", branch);
    } else {
        if (git_reference_name_to_id(oid, self->repo, "HEAD") < 0)
            return failure_set(FAILURE_NOT_FOUND, "%s has no commits to test", workspace);
        snprintf(self->source, sizeof self->source, "no branch given: the workspace's HEAD %.12s",
                 git_oid_tostr_s(oid));
    }
    git_object_free(object);
    git_oid_tostr(self->commit, sizeof self->commit, oid);
    return 0;
}

int test_tree_open(test_tree_t **out, const char *workspace, const char *branch,
                   const char *commit, const char *worktrees_dir)
{
    *out = NULL;
    test_tree_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int opened = repository_open(&self->repo, workspace);
    if (opened == FAILURE_STATE) {
        /* A repository git refuses (another uid's): its commands must not run in the
         * user's checkout as it is; say why instead. */
        free(self);
        return opened;
    }
    if (opened != 0) {
        self->repo = NULL;
        bool asked = (branch != NULL && branch[0] != '\0') || (commit != NULL && commit[0] != '\0');
        if (asked) {
            free(self);
            return failure_set(FAILURE_INVALID,
                               "%s is not in a git repository: cannot test %s '%s'", workspace,
                               commit && commit[0] ? "commit" : "branch",
                               commit && commit[0] ? commit : branch);
        }
        snprintf(self->dir, sizeof self->dir, "%s", workspace);
        snprintf(self->source, sizeof self->source,
                 "not a git repository: the directory as it is");
        *out = self;
        return 0;
    }
    git_oid oid;
    int rc = s_choose(self, workspace, branch, commit, &oid);
    if (rc == 0 && worktree_clean_stale(self->repo, worktrees_dir, NULL, NULL) != 0)
        rc = failure_set(FAILURE_GIT, "cannot clean old worktrees in %s: %s", worktrees_dir,
                         failure_message());
    if (rc == 0)
        rc = worktree_add(&self->worktree, self->repo, worktrees_dir, &oid);
    if (rc != 0) {
        test_tree_close(&self);
        return rc;
    }
    snprintf(self->dir, sizeof self->dir, "%s", worktree_path(self->worktree));
    *out = self;
    return 0;
}

const char *test_tree_dir(const test_tree_t *self)
{
    return self->dir;
}

const char *test_tree_commit(const test_tree_t *self)
{
    return self->commit;
}

const char *test_tree_source(const test_tree_t *self)
{
    return self->source;
}

bool test_tree_isolated(const test_tree_t *self)
{
    return self->worktree != NULL;
}

char *test_tree_changes(test_tree_t *self, size_t cap)
{
    if (self->worktree == NULL)
        return NULL;
    git_repository *repo = worktree_repo(self->worktree);
    git_object *head = NULL;
    git_tree *tree = NULL;
    git_diff *diff = NULL;
    git_buf buf = {0};
    git_diff_options options;
    git_diff_options_init(&options, GIT_DIFF_OPTIONS_VERSION);
    options.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS |
                    GIT_DIFF_SHOW_UNTRACKED_CONTENT;
    char *text = NULL;
    if (git_revparse_single(&head, repo, "HEAD^{tree}") == 0 &&
        git_tree_lookup(&tree, repo, git_object_id(head)) == 0 &&
        git_diff_tree_to_workdir_with_index(&diff, repo, tree, &options) == 0 &&
        git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) == 0) {
        size_t len = buf.size < cap ? buf.size : cap;
        text = malloc(len + 1);
        if (text != NULL) {
            memcpy(text, buf.ptr, len);
            text[len] = '\0';
        }
    }
    git_buf_dispose(&buf);
    git_diff_free(diff);
    git_tree_free(tree);
    git_object_free(head);
    return text;
}

void test_tree_close(test_tree_t **self_p)
{
    test_tree_t *self = *self_p;
    if (self == NULL)
        return;
    worktree_destroy(&self->worktree);
    git_repository_free(self->repo);
    free(self);
    *self_p = NULL;
}
