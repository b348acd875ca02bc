/* review_tree: the review's worktree of the reviewed commit (see review_tree.h). */
#include "review_tree.h"

#include "repository.h"

#include "failure.h"
#include "worktree.h"

#include <git2.h>
#include <stdio.h>
#include <stdlib.h>

struct review_tree_t {
    git_repository *repo;
    worktree_t *worktree;
};

int review_tree_open(review_tree_t **out, const char *workspace, const char *commit,
                     const char *worktrees_dir)
{
    *out = NULL;
    review_tree_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    git_oid oid;
    int rc = 0;
    if (repository_open(&self->repo, workspace) != 0)
        rc = FAILURE_GIT; /* repository_open() said why */
    else if (git_oid_fromstr(&oid, commit) < 0)
        rc = failure_set(FAILURE_GIT, "'%s' is not a commit id", commit);
    else if (worktree_clean_stale(self->repo, worktrees_dir, NULL, NULL) != 0) {
        char reason[512]; /* copied: failure_set() must not read the buffer it writes */
        snprintf(reason, sizeof reason, "%s", failure_message());
        rc =
            failure_set(FAILURE_GIT, "cannot clean old worktrees in %s: %s", worktrees_dir, reason);
    }
    if (rc == 0)
        rc = worktree_add(&self->worktree, self->repo, worktrees_dir, &oid);
    if (rc != 0) {
        review_tree_close(&self);
        return rc;
    }
    *out = self;
    return 0;
}

const char *review_tree_dir(const review_tree_t *self)
{
    return worktree_path(self->worktree);
}

void review_tree_close(review_tree_t **self_p)
{
    review_tree_t *self = *self_p;
    if (self == NULL)
        return;
    worktree_destroy(&self->worktree);
    git_repository_free(self->repo);
    free(self);
    *self_p = NULL;
}
