/* worktree: service-owned linked worktrees (see worktree.h). */
#include "worktree.h"

#include "failure.h"
#include "home.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One local branch of the shared repository, as it was before an agent worked. */
typedef struct {
    char *name; /* full ref name, "refs/heads/..." */
    git_oid oid;
} s_branch_t;

struct worktree_t {
    git_repository *repo;    /* the main repository (borrowed) */
    git_worktree *worktree;
    git_repository *wt_repo; /* the worktree opened as a repository */
    char name[64];
    char *path;
    s_branch_t *branches;    /* worktree_watch_branches() snapshot */
    size_t branch_count;
    git_oid watched_head;    /* the worktree's HEAD then */
};

static void s_forget_branches(worktree_t *self)
{
    for (size_t i = 0; i < self->branch_count; i++)
        free(self->branches[i].name);
    free(self->branches);
    self->branches = NULL;
    self->branch_count = 0;
}

static int s_git_fail(const char *what)
{
    const git_error *e = git_error_last();
    return failure_set(FAILURE_GIT, "%s: %s", what, e && e->message ? e->message : "unknown");
}

static int s_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* rm -rf without a shell. */
static void s_remove_tree(const char *path)
{
    nftw(path, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* When process `pid` started, in clock ticks since boot (/proc/<pid>/stat field 22), or -1
 * if there is no such process. With the pid it names one process for good: a later
 * process given the same pid (pid 1 of a restarted container) has another start time. */
static long long s_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, file);
    fclose(file);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields resume after the last ')'. */
    const char *rest = strrchr(buf, ')');
    long long start = -1;
    if (rest == NULL ||
        sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d"
                         " %*d %*d %lld",
               &start) != 1)
        return -1;
    return start;
}

void worktree_unique_name(char *buf, size_t size)
{
    static unsigned s_sequence;
    static long long s_own_start = -2;
    if (s_own_start == -2)
        s_own_start = s_start_time(getpid());
    snprintf(buf, size, "%s%ld-%lld-%u", WORKTREE_PREFIX, (long)getpid(), s_own_start,
             ++s_sequence);
}

int worktree_add(worktree_t **out, git_repository *repo, const char *dir,
                       const git_oid *commit)
{
    *out = NULL;
    worktree_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    self->repo = repo;
    worktree_unique_name(self->name, sizeof self->name);
    if (home_mkdirs(dir) != 0 ||
        asprintf(&self->path, "%s/%s", dir, self->name) < 0) {
        free(self);
        return failure_set(FAILURE_IO, "cannot create worktree directory %s", dir);
    }
    s_remove_tree(self->path);

    /* git_worktree_add wants a branch; make a temporary one at `commit`, check it out,
     * detach HEAD and delete the branch so the user's repository gains no branch. */
    git_commit *target = NULL;
    git_reference *branch = NULL;
    int rc = 0;
    if (git_commit_lookup(&target, repo, commit) < 0 ||
        git_branch_create(&branch, repo, self->name, target, 0) < 0) {
        rc = s_git_fail("cannot create the worktree's branch");
        goto out;
    }
    /* libgit2 makes <commondir>/worktrees when it is missing with mkdir(O_EXCL) after
     * checking it is missing: two replicas adding their first worktrees at once race, and
     * the loser fails ("directory exists"). Made here first, an existing one is fine. */
    char worktrees[PATH_MAX];
    const char *common = git_repository_commondir(repo); /* ends with '/' */
    snprintf(worktrees, sizeof worktrees, "%s%sworktrees", common,
             common[0] && common[strlen(common) - 1] == '/' ? "" : "/");
    if (mkdir(worktrees, 0755) != 0 && errno != EEXIST) {
        rc = failure_set(FAILURE_IO, "cannot create %s: %s", worktrees, strerror(errno));
        goto out;
    }
    git_worktree_add_options opts;
    git_worktree_add_options_init(&opts, GIT_WORKTREE_ADD_OPTIONS_VERSION);
    opts.ref = branch;
    opts.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
    if (git_worktree_add(&self->worktree, repo, self->name, self->path, &opts) < 0) {
        rc = s_git_fail("cannot add a worktree");
        goto out;
    }
    if (git_repository_open_from_worktree(&self->wt_repo, self->worktree) < 0 ||
        git_repository_set_head_detached(self->wt_repo, commit) < 0 ||
        git_branch_delete(branch) < 0) {
        rc = s_git_fail("cannot detach the worktree");
        goto out;
    }
out:
    git_reference_free(branch);
    git_commit_free(target);
    if (rc != 0) {
        /* The branch may still exist if a later step failed. */
        git_reference *left = NULL;
        if (git_branch_lookup(&left, repo, self->name, GIT_BRANCH_LOCAL) == 0) {
            if (self->wt_repo != NULL)
                git_repository_set_head_detached(self->wt_repo, commit);
            git_branch_delete(left);
            git_reference_free(left);
        }
        worktree_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

const char *worktree_path(const worktree_t *self)
{
    return self->path;
}

git_repository *worktree_repo(worktree_t *self)
{
    return self->wt_repo;
}

int worktree_checkout(worktree_t *self, const git_oid *commit)
{
    git_object *object = NULL;
    git_checkout_options opts;
    git_checkout_options_init(&opts, GIT_CHECKOUT_OPTIONS_VERSION);
    opts.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_REMOVE_UNTRACKED;
    int rc = 0;
    if (git_repository_state_cleanup(self->wt_repo) < 0 ||
        git_object_lookup(&object, self->wt_repo, commit, GIT_OBJECT_COMMIT) < 0 ||
        git_repository_set_head_detached(self->wt_repo, commit) < 0 ||
        git_reset(self->wt_repo, object, GIT_RESET_HARD, &opts) < 0)
        rc = s_git_fail("cannot check out the merge in the worktree");
    git_object_free(object);
    return rc;
}

/* Unregisters worktree `name` of `repo` (if registered) and removes `path`. */
static void s_prune(git_repository *repo, const char *name, const char *path)
{
    git_worktree *wt = NULL;
    if (git_worktree_lookup(&wt, repo, name) == 0) {
        git_worktree_prune_options opts;
        git_worktree_prune_options_init(&opts, GIT_WORKTREE_PRUNE_OPTIONS_VERSION);
        opts.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_LOCKED |
                     GIT_WORKTREE_PRUNE_WORKING_TREE;
        if (git_worktree_prune(wt, &opts) < 0) {
            /* A missing working tree makes pruning it fail; unregister only. */
            opts.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_LOCKED;
            git_worktree_prune(wt, &opts);
        }
        git_worktree_free(wt);
    }
    if (path != NULL)
        s_remove_tree(path);
}

void worktree_destroy(worktree_t **self_p)
{
    worktree_t *self = *self_p;
    if (self == NULL)
        return;
    git_repository_free(self->wt_repo);
    git_worktree_free(self->worktree);
    s_prune(self->repo, self->name, self->path);
    s_forget_branches(self);
    free(self->path);
    free(self);
    *self_p = NULL;
}

int worktree_watch_branches(worktree_t *self)
{
    s_forget_branches(self);
    if (git_reference_name_to_id(&self->watched_head, self->wt_repo, "HEAD") < 0)
        return s_git_fail("cannot read the worktree's HEAD");
    git_branch_iterator *it = NULL;
    if (git_branch_iterator_new(&it, self->repo, GIT_BRANCH_LOCAL) < 0)
        return s_git_fail("cannot list the branches");
    git_reference *ref = NULL;
    git_branch_t type;
    int rc = 0;
    while (rc == 0 && git_branch_next(&ref, &type, it) == 0) {
        const git_oid *oid = git_reference_target(ref);
        if (oid != NULL) {
            s_branch_t *grown =
                realloc(self->branches, (self->branch_count + 1) * sizeof *grown);
            char *name = strdup(git_reference_name(ref));
            if (grown == NULL || name == NULL) {
                free(name);
                if (grown != NULL)
                    self->branches = grown;
                rc = failure_set(FAILURE_MEMORY, "out of memory");
            } else {
                self->branches = grown;
                self->branches[self->branch_count].name = name;
                git_oid_cpy(&self->branches[self->branch_count].oid, oid);
                self->branch_count++;
            }
        }
        git_reference_free(ref);
    }
    git_branch_iterator_free(it);
    return rc;
}

static const s_branch_t *s_branch_before(const worktree_t *self, const char *name)
{
    for (size_t i = 0; i < self->branch_count; i++)
        if (strcmp(self->branches[i].name, name) == 0)
            return &self->branches[i];
    return NULL;
}

/* Reports "<undo> <branch>, which the resolver had <change>". */
static void s_undo_note(worktree_note_fn note, void *arg, const char *undo,
                        const char *name, const char *change)
{
    if (note == NULL)
        return;
    char text[600];
    snprintf(text, sizeof text, "%s %s, which the resolver had %s", undo, name, change);
    note(text, arg);
}

/* Puts branch `name` back as it was in the snapshot: moved back, or deleted if it is new. */
static int s_restore_branch(worktree_t *self, const char *name, worktree_note_fn note,
                            void *arg)
{
    const s_branch_t *before = s_branch_before(self, name);
    git_reference *ref = NULL;
    int rc = 0;
    if (before != NULL) {
        if (git_reference_create(&ref, self->repo, name, &before->oid, 1,
                                 "cloister-merge: undo the resolver's change") < 0)
            rc = s_git_fail("cannot restore a branch the resolver moved");
        else
            s_undo_note(note, arg, "put back", name, "moved");
    } else if (git_reference_lookup(&ref, self->repo, name) == 0) {
        if (git_reference_delete(ref) < 0)
            rc = s_git_fail("cannot delete a branch the resolver created");
        else
            s_undo_note(note, arg, "deleted", name, "created");
    }
    git_reference_free(ref);
    return rc;
}

int worktree_undo_branches(worktree_t *self, worktree_note_fn note, void *arg)
{
    git_reference *head = NULL;
    if (git_reference_lookup(&head, self->wt_repo, "HEAD") < 0)
        return s_git_fail("cannot read the worktree's HEAD");
    char *attached = NULL;
    if (git_reference_type(head) == GIT_REFERENCE_SYMBOLIC)
        attached = strdup(git_reference_symbolic_target(head));
    git_reference_free(head);

    git_oid head_oid;
    bool has_head = git_reference_name_to_id(&head_oid, self->wt_repo, "HEAD") == 0;
    int rc = 0;
    if (attached != NULL) {
        /* Detach first: a branch checked out here could not be moved back. */
        if (has_head && git_repository_set_head_detached(self->wt_repo, &head_oid) < 0)
            rc = s_git_fail("cannot detach the worktree's HEAD");
        else if (!has_head)
            rc = failure_set(FAILURE_GIT, "the resolver left the worktree on %s, with no commit",
                             attached);
        if (rc == 0)
            rc = s_restore_branch(self, attached, note, arg);
    }
    free(attached);

    /* A branch that did not exist before and points at a commit the resolver made was made
     * from this worktree (git branch / checkout -b): not the user's. */
    git_branch_iterator *it = NULL;
    if (rc == 0 && has_head && !git_oid_equal(&head_oid, &self->watched_head) &&
        git_branch_iterator_new(&it, self->repo, GIT_BRANCH_LOCAL) == 0) {
        git_reference *ref = NULL;
        git_branch_t type;
        while (rc == 0 && git_branch_next(&ref, &type, it) == 0) {
            const git_oid *oid = git_reference_target(ref);
            const s_branch_t *before = s_branch_before(self, git_reference_name(ref));
            if (oid != NULL && git_oid_equal(oid, &head_oid) && before == NULL) {
                if (git_reference_delete(ref) < 0)
                    rc = s_git_fail("cannot delete a branch the resolver created");
                else
                    s_undo_note(note, arg, "deleted", git_reference_name(ref), "created");
            } else if (oid != NULL && git_oid_equal(oid, &head_oid) &&
                       !git_oid_equal(oid, &before->oid)) {
                /* Moved onto the resolver's commit (git branch -f, update-ref, push .). */
                rc = s_restore_branch(self, git_reference_name(ref), note, arg);
            }
            git_reference_free(ref);
        }
        git_branch_iterator_free(it);
    }
    return rc;
}

/* True if `name` (a worktree, directory or ref basename) was made by a process that no
 * longer runs. Names of live processes, including ours, are left alone.
 * A name is "cloister-wt-<pid>-<start time>-<n>"; names from before the start time was
 * added, "cloister-wt-<pid>-<n>", count as gone when the pid is ours (we make no such
 * names) or runs no more. */
static bool s_owner_gone(const char *name)
{
    size_t plen = strlen(WORKTREE_PREFIX);
    if (strncmp(name, WORKTREE_PREFIX, plen) != 0)
        return false;
    long long numbers[3];
    int count = 0;
    const char *at = name + plen;
    while (count < 3) {
        char *end = NULL;
        errno = 0;
        numbers[count] = strtoll(at, &end, 10);
        if (end == at || errno != 0 || numbers[count] < 0)
            return false;
        count++;
        if (*end == '\0')
            break;
        if (*end != '-')
            return false;
        at = end + 1;
    }
    if (count < 2 || *at == '\0' || numbers[0] <= 0)
        return false;
    pid_t pid = (pid_t)numbers[0];
    if (count == 2)
        return pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH);
    long long start = s_start_time(pid);
    return start < 0 || start != numbers[1];
}

static void s_note(worktree_note_fn note, void *arg, const char *what, const char *name)
{
    if (note == NULL)
        return;
    char text[600];
    snprintf(text, sizeof text, "removed %s left by a crashed run: %s", what, name);
    note(text, arg);
}

/* Deletes refs matching `glob` whose basename belongs to a process that is gone. */
static int s_clean_refs(git_repository *repo, const char *glob, worktree_note_fn note,
                        void *arg)
{
    git_reference_iterator *it = NULL;
    if (git_reference_iterator_glob_new(&it, repo, glob) < 0)
        return s_git_fail("cannot list temporary refs");
    git_reference *ref = NULL;
    while (git_reference_next(&ref, it) == 0) {
        const char *name = git_reference_name(ref);
        const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        if (s_owner_gone(base)) {
            s_note(note, arg, "temporary ref", name);
            git_reference_delete(ref);
        }
        git_reference_free(ref);
    }
    git_reference_iterator_free(it);
    return 0;
}

int worktree_clean_stale(git_repository *repo, const char *dir,
                               worktree_note_fn note, void *arg)
{
    git_strarray names = {NULL, 0};
    if (git_worktree_list(&names, repo) < 0)
        return s_git_fail("cannot list worktrees");
    for (size_t i = 0; i < names.count; i++) {
        if (!s_owner_gone(names.strings[i]))
            continue;
        char *path = NULL;
        git_worktree *wt = NULL;
        if (git_worktree_lookup(&wt, repo, names.strings[i]) == 0) {
            path = strdup(git_worktree_path(wt));
            git_worktree_free(wt);
        }
        s_prune(repo, names.strings[i], path);
        free(path);
        s_note(note, arg, "worktree", names.strings[i]);
    }
    git_strarray_dispose(&names);

    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *entry;
        while ((entry = readdir(d)) != NULL) {
            if (!s_owner_gone(entry->d_name))
                continue;
            char *path = NULL;
            if (asprintf(&path, "%s/%s", dir, entry->d_name) >= 0) {
                s_remove_tree(path);
                s_note(note, arg, "directory", path);
                free(path);
            }
        }
        closedir(d);
    }

    /* Branches of worktrees that crashed before detaching, then temporary push refs. */
    if (s_clean_refs(repo, "refs/heads/" WORKTREE_PREFIX "*", note, arg) != 0)
        return FAILURE_GIT;
    return s_clean_refs(repo, WORKTREE_REF_DIR "*", note, arg);
}
