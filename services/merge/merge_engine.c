/* merge_engine: the merge flow (see merge_engine.h for the contract).
 *
 * One run is a sequence of attempts; each attempt is
 *     pre-flight → analysis → merge (clean or resolved) → tests → push
 * and a rejected push starts the next attempt from a fresh fetch when the remote target
 * moved since the attempt read it; a rejection for any other reason (a hook, branch
 * protection, permissions) ends the run with the remote's answer as the reason.
 * Everything the engine creates in the repository (worktrees, their temporary
 * branches, the temporary ref a push is made from) is removed before the run returns, so a
 * failure leaves the user's refs, index, HEAD and working tree as they were. Only the
 * remote-tracking refs move (fetch), and, after a successful push, the remote target and
 * (under the rule in merge_engine.h) the local target and a clean checkout of it. */
#include "merge_engine.h"

#include "merge_checkout.h"
#include "merge_conflicts.h"
#include "merge_credentials.h"
#include "merge_locks.h"
#include "merge_repos.h"
#include "merge_verify.h"
#include "worktree.h"

#include "clock.h"
#include "failure.h"

#include <git2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Returned by an attempt whose push was rejected because the target moved. */
#define S_RETRY 1

/* Everything one run needs; lives on merge_engine_run()'s stack. */
typedef struct {
    const merge_request_t *req;
    merge_result_t *result;
    const char *target;
    const char *remote_name;
    merge_repos_t *repos;   /* where the repository comes from (the request's or own_repos) */
    merge_repos_t *own_repos; /* made for this run when the request brings none */
    merge_repo_t *lent;     /* the repository, lent by `repos` for the run */
    git_repository *repo;   /* lent->repo (the common one when opened via a worktree) */
    git_remote *remote;     /* NULL: no remote configured, merge locally */
    const char *opened_gitdir;  /* gitdir of the path we were given (differs for a worktree) */
    const char *opened_workdir; /* its working tree, or NULL when bare */
    char *source_ref;       /* the ref SOURCE was read from */
    git_oid source_oid, target_oid, merge_oid;
    bool source_on_remote;
    merge_conflicts_t merge; /* in-memory three-way merge of this attempt, its conflicts */
    worktree_t *worktree;
    char *push_message;     /* rejection message of the last push */
    merge_credentials_t credentials; /* this connection's offers (merge_credentials.h) */
} s_job_t;

/* ---- small helpers --------------------------------------------------------------------- */

static char *s_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *s_strdupf(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    char *out = NULL;
    if (vasprintf(&out, fmt, args) < 0)
        out = NULL;
    va_end(args);
    return out;
}

static void s_progress(s_job_t *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_progress(s_job_t *job, const char *fmt, ...)
{
    if (job->req->progress == NULL)
        return;
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    job->req->progress(text, job->req->callback_arg);
}

static void s_note_progress(const char *text, void *arg)
{
    s_progress(arg, "%s", text);
}

/* Records the reason of the failure in the result and the thread's failure message. */
static int s_fail(s_job_t *job, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int s_fail(s_job_t *job, int code, const char *fmt, ...)
{
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    free(job->result->reason);
    job->result->reason = strdup(text);
    return failure_set(code, "%s", text);
}

/* A libgit2 failure: `what` plus libgit2's own message. */
static int s_git_fail(s_job_t *job, const char *what)
{
    const git_error *e = git_error_last();
    return s_fail(job, FAILURE_GIT, "%s: %s", what, e && e->message ? e->message : "unknown");
}

/* Re-records a failure already described by failure_message() (from a helper module). */
static int s_fail_from_module(s_job_t *job, int code)
{
    return s_fail(job, code, "%s", failure_message());
}

static int s_list_add(char ***list, size_t *count, const char *item)
{
    char **grown = realloc(*list, (*count + 1) * sizeof **list);
    if (grown == NULL)
        return FAILURE_MEMORY;
    *list = grown;
    grown[*count] = strdup(item);
    if (grown[*count] == NULL)
        return FAILURE_MEMORY;
    (*count)++;
    return 0;
}

static void s_list_free(char ***list, size_t *count)
{
    for (size_t i = 0; i < *count; i++)
        free((*list)[i]);
    free(*list);
    *list = NULL;
    *count = 0;
}

/* "a, b, c" (malloc'd; "" for an empty list), or NULL when out of memory. */
static char *s_list_join(char *const *list, size_t count)
{
    size_t size = 1;
    for (size_t i = 0; i < count; i++)
        size += strlen(list[i]) + 2;
    char *out = malloc(size);
    if (out == NULL)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            strcat(out, ", ");
        strcat(out, list[i]);
    }
    return out;
}

/* Appends a line to result->notes. */
static void s_add_note(s_job_t *job, const char *text)
{
    char *old = job->result->notes;
    char *joined = old ? s_strdupf("%s; %s", old, text) : strdup(text);
    if (joined != NULL) {
        free(old);
        job->result->notes = joined;
    }
}

/* An undo of the resolver's branch changes: worth a progress line and a note. */
static void s_note_undo(const char *text, void *arg)
{
    s_progress(arg, "%s", text);
    s_add_note(arg, text);
}

static int64_t s_since(int64_t start_ms)
{
    return clock_now_ms() - start_ms;
}

/* Between steps: a cancelled run or a passed deadline stops here. */
static int s_step_check(s_job_t *job, const char *step)
{
    const merge_request_t *req = job->req;
    if (req->cancelled != NULL && req->cancelled(req->callback_arg))
        return s_fail(job, FAILURE_STATE, "cancelled during %s", step);
    if (req->deadline_ms > 0 && clock_now_ms() >= req->deadline_ms)
        return s_fail(job, FAILURE_TIMEOUT, "deadline passed during %s", step);
    return 0;
}

/* libgit2 transfer callbacks: a non-zero return aborts the fetch or push. */
static int s_transfer_check(s_job_t *job)
{
    const merge_request_t *req = job->req;
    if (req->cancelled != NULL && req->cancelled(req->callback_arg))
        return -1;
    if (req->deadline_ms > 0 && clock_now_ms() >= req->deadline_ms)
        return -1;
    return 0;
}

static int s_fetch_progress(const git_indexer_progress *stats, void *payload)
{
    (void)stats;
    return s_transfer_check(payload);
}

static int s_push_progress(unsigned int current, unsigned int total, size_t bytes, void *payload)
{
    (void)current;
    (void)total;
    (void)bytes;
    return s_transfer_check(payload);
}

static void s_clear_attempt(s_job_t *job)
{
    worktree_destroy(&job->worktree);
    merge_conflicts_clear(&job->merge);
    free(job->source_ref);
    job->source_ref = NULL;
    s_list_free(&job->result->resolved_files, &job->result->resolved_count);
    s_list_free(&job->result->failed_files, &job->result->failed_count);
}

/* ---- names and repository -------------------------------------------------------------- */

static int s_validate_branch(s_job_t *job, const char *what, const char *name)
{
    int valid = 0;
    if (name == NULL || name[0] == '\0')
        return s_fail(job, FAILURE_INVALID, "invalid branch name: %s branch is empty", what);
    if (git_branch_name_is_valid(&valid, name) < 0 || !valid)
        return s_fail(job, FAILURE_INVALID, "invalid branch name: '%s' (%s)", name, what);
    char *ref = s_strdupf("refs/heads/%s", name);
    int rc = ref && git_reference_name_is_valid(&valid, ref) == 0 && valid ? 0 : -1;
    free(ref);
    if (rc != 0)
        return s_fail(job, FAILURE_INVALID, "invalid branch name: '%s' (%s)", name, what);
    return 0;
}

static int s_validate_request(s_job_t *job)
{
    const merge_request_t *req = job->req;
    if (req->repo_path == NULL || req->repo_path[0] == '\0')
        return s_fail(job, FAILURE_INVALID, "no repository path given");
    if (req->worktree_dir == NULL || req->worktree_dir[0] == '\0')
        return s_fail(job, FAILURE_INVALID, "no worktree directory given");
    int rc = s_validate_branch(job, "source", req->source_branch);
    if (rc == 0)
        rc = s_validate_branch(job, "target", job->target);
    if (rc != 0)
        return rc;
    if (strcmp(req->source_branch, job->target) == 0)
        return s_fail(job, FAILURE_INVALID, "source and target are the same branch '%s'",
                      job->target);
    int valid = 0;
    if (git_remote_name_is_valid(&valid, job->remote_name) < 0 || !valid)
        return s_fail(job, FAILURE_INVALID, "invalid remote name: '%s'", job->remote_name);
    return 0;
}

/* Takes the repository the path belongs to from the request's merge_repos (the handle the
 * last task of this workspace used, unless the repository changed since), or opens it. */
static int s_open_repository(s_job_t *job)
{
    job->repos = job->req->repos;
    if (job->repos == NULL) {
        int rc = merge_repos_new(&job->own_repos);
        if (rc != 0)
            return s_fail_from_module(job, rc);
        job->repos = job->own_repos;
    }
    int rc = merge_repos_get(job->repos, job->req->repo_path, &job->lent);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    job->repo = job->lent->repo;
    job->opened_gitdir = job->lent->gitdir;
    job->opened_workdir = job->lent->workdir;
    if (!job->req->push) {
        s_progress(job, "push = false: merging into the local '%s'", job->target);
        return 0;
    }
    rc = git_remote_lookup(&job->remote, job->repo, job->remote_name);
    if (rc == GIT_ENOTFOUND) {
        job->remote = NULL;
        s_progress(job, "no remote '%s': merging into the local '%s'", job->remote_name,
                   job->target);
        return 0;
    }
    if (rc < 0)
        return s_git_fail(job, "cannot read the remote");
    return 0;
}

/* ---- 1. pre-flight --------------------------------------------------------------------- */

static int s_check_locks(s_job_t *job)
{
    const char *common = git_repository_commondir(job->repo);
    const char *src = job->req->source_branch;
    const char *rem = job->remote_name;
    char *paths[10];
    size_t n = 0;
    paths[n++] = s_strdupf("%sindex.lock", common);
    paths[n++] = s_strdupf("%sHEAD.lock", common);
    paths[n++] = s_strdupf("%spacked-refs.lock", common);
    paths[n++] = s_strdupf("%sconfig.lock", common);
    paths[n++] = s_strdupf("%srefs/heads/%s.lock", common, job->target);
    paths[n++] = s_strdupf("%srefs/heads/%s.lock", common, src);
    paths[n++] = s_strdupf("%srefs/remotes/%s/%s.lock", common, rem, job->target);
    paths[n++] = s_strdupf("%srefs/remotes/%s/%s.lock", common, rem, src);
    if (job->opened_gitdir != NULL && strcmp(job->opened_gitdir, common) != 0) {
        paths[n++] = s_strdupf("%sindex.lock", job->opened_gitdir);
        paths[n++] = s_strdupf("%sHEAD.lock", job->opened_gitdir);
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (paths[i] == NULL)
            rc = s_fail(job, FAILURE_MEMORY, "out of memory");
    /* Where a git process holding one of these locks would be working. */
    const char *workdirs[3] = {git_repository_workdir(job->repo), NULL, NULL};
    if (job->opened_workdir != NULL)
        workdirs[workdirs[0] != NULL ? 1 : 0] = job->opened_workdir;
    if (rc == 0) {
        rc = merge_locks_check((const char *const *)paths, n, job->req->lock_stale_ms, workdirs,
                               s_note_progress, job);
        if (rc != 0)
            rc = s_fail_from_module(job, rc);
    }
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    return rc;
}

/* The remote's credentials, from the environment (merge_credentials.h). */
static int s_credentials(git_credential **out, const char *url, const char *username_from_url,
                         unsigned int allowed_types, void *payload)
{
    s_job_t *job = payload;
    return merge_credentials_acquire(out, url, username_from_url, allowed_types,
                                     &job->credentials);
}

/* Lists the remote's branches and fetches TARGET and (if the remote has it) SOURCE into
 * their remote-tracking refs, so every decision uses current refs. */
static int s_fetch(s_job_t *job)
{
    const char *src = job->req->source_branch;
    git_remote_callbacks callbacks;
    git_remote_init_callbacks(&callbacks, GIT_REMOTE_CALLBACKS_VERSION);
    callbacks.transfer_progress = s_fetch_progress;
    callbacks.credentials = s_credentials;
    callbacks.payload = job;
    s_progress(job, "fetching %s", job->remote_name);
    job->credentials = (merge_credentials_t){0};
    if (git_remote_connect(job->remote, GIT_DIRECTION_FETCH, &callbacks, NULL, NULL) < 0)
        return s_git_fail(job, "cannot reach the remote");
    const git_remote_head **heads = NULL;
    size_t nheads = 0;
    char *target_head = s_strdupf("refs/heads/%s", job->target);
    char *source_head = s_strdupf("refs/heads/%s", src);
    bool target_found = false;
    job->source_on_remote = false;
    int rc = 0;
    if (target_head == NULL || source_head == NULL) {
        rc = s_fail(job, FAILURE_MEMORY, "out of memory");
        goto out;
    }
    if (git_remote_ls(&heads, &nheads, job->remote) < 0) {
        rc = s_git_fail(job, "cannot list the remote's branches");
        goto out;
    }
    for (size_t i = 0; i < nheads; i++) {
        if (strcmp(heads[i]->name, target_head) == 0)
            target_found = true;
        if (strcmp(heads[i]->name, source_head) == 0)
            job->source_on_remote = true;
    }
    git_remote_disconnect(job->remote);
    if (!target_found) {
        rc = s_fail(job, FAILURE_NOT_FOUND, "target branch '%s' not found on %s", job->target,
                    job->remote_name);
        goto out;
    }
    char *specs[2];
    size_t nspecs = 0;
    specs[nspecs++] = s_strdupf("+refs/heads/%s:refs/remotes/%s/%s", job->target,
                                job->remote_name, job->target);
    if (job->source_on_remote)
        specs[nspecs++] = s_strdupf("+refs/heads/%s:refs/remotes/%s/%s", src, job->remote_name,
                                    src);
    git_strarray refspecs = {specs, nspecs};
    git_fetch_options opts;
    git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
    opts.callbacks = callbacks;
    opts.update_fetchhead = 0;
    opts.prune = GIT_FETCH_NO_PRUNE;
    opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
    job->credentials = (merge_credentials_t){0}; /* a new connection */
    if (specs[0] == NULL || (nspecs == 2 && specs[1] == NULL))
        rc = s_fail(job, FAILURE_MEMORY, "out of memory");
    else if (git_remote_fetch(job->remote, &refspecs, &opts, "cloister merge-agent: fetch") < 0)
    {
        rc = s_step_check(job, "fetch");
        if (rc == 0)
            rc = s_git_fail(job, "fetch failed");
    }
    for (size_t i = 0; i < nspecs; i++)
        free(specs[i]);
out:
    git_remote_disconnect(job->remote);
    free(target_head);
    free(source_head);
    return rc;
}

/* Reads the oid of `ref` into `out` (and checks it names a commit). Returns 0, 1 when the
 * ref does not exist, or a failure. */
static int s_read_commit_ref(s_job_t *job, const char *ref, git_oid *out)
{
    git_object *object = NULL;
    git_reference *reference = NULL;
    int rc = git_reference_lookup(&reference, job->repo, ref);
    if (rc == GIT_ENOTFOUND)
        return 1;
    if (rc < 0)
        return s_git_fail(job, "cannot read a ref");
    rc = git_reference_peel(&object, reference, GIT_OBJECT_COMMIT);
    git_reference_free(reference);
    if (rc < 0)
        return s_git_fail(job, "ref does not name a commit");
    git_oid_cpy(out, git_object_id(object));
    git_object_free(object);
    return 0;
}

/* The source must be the commit the request pins (the reviewed one), if it pins one:
 * a branch that moved since would merge commits nobody reviewed. */
static int s_check_source_commit(s_job_t *job)
{
    const char *pinned = job->req->source_commit;
    if (pinned == NULL || pinned[0] == '\0')
        return 0;
    git_oid oid;
    if (strlen(pinned) != GIT_OID_HEXSZ || git_oid_fromstr(&oid, pinned) < 0)
        return s_fail(job, FAILURE_INVALID, "the source commit '%.64s' is not a 40-digit commit id",
                      pinned);
    if (git_oid_equal(&oid, &job->source_oid))
        return 0;
    char now[GIT_OID_HEXSZ + 1];
    git_oid_tostr(now, sizeof now, &job->source_oid);
    return s_fail(job, FAILURE_STATE,
                  "source branch '%s' is at %.12s, not at the reviewed %.12s: it moved since the "
                  "review, so the merge stops",
                  job->req->source_branch, now, pinned);
}

/* SOURCE: what was pushed (remote-tracking) first, else the local branch. TARGET: the
 * remote's (just fetched), or the local branch when there is no remote. */
static int s_resolve_tips(s_job_t *job)
{
    const char *src = job->req->source_branch;
    int rc = 1;
    if (job->remote != NULL && job->source_on_remote) {
        job->source_ref = s_strdupf("refs/remotes/%s/%s", job->remote_name, src);
        rc = job->source_ref ? s_read_commit_ref(job, job->source_ref, &job->source_oid) : 1;
    }
    if (rc == 1) {
        free(job->source_ref);
        job->source_ref = s_strdupf("refs/heads/%s", src);
        rc = job->source_ref ? s_read_commit_ref(job, job->source_ref, &job->source_oid) : 1;
    }
    if (rc == 1) {
        if (job->remote != NULL)
            return s_fail(job, FAILURE_NOT_FOUND, "source branch '%s' not found locally or on %s",
                          src, job->remote_name);
        return s_fail(job, FAILURE_NOT_FOUND, "source branch '%s' not found", src);
    }
    if (rc < 0)
        return rc;
    rc = s_check_source_commit(job);
    if (rc != 0)
        return rc;

    char *target_ref = job->remote ? s_strdupf("refs/remotes/%s/%s", job->remote_name, job->target)
                                   : s_strdupf("refs/heads/%s", job->target);
    rc = target_ref ? s_read_commit_ref(job, target_ref, &job->target_oid) : 1;
    free(target_ref);
    if (rc == 1)
        return s_fail(job, FAILURE_NOT_FOUND, "target branch '%s' not found", job->target);
    return rc;
}

/* The user's checkout of the target, when it has uncommitted changes: a failure saying
 * so (without a remote the merge lands on the target itself, and so under that checkout).
 * 0 when the target is checked out nowhere or clean. */
static int s_refuse_dirty_checkout(s_job_t *job, merge_checkout_t *checkout)
{
    if (checkout == NULL)
        return 0;
    char first[512];
    int dirty = merge_checkout_dirty(checkout, first, sizeof first);
    if (dirty < 0)
        return s_fail_from_module(job, dirty);
    if (dirty == 0)
        return 0;
    return s_fail(job, FAILURE_STATE,
                  "your checkout of %s at %s has uncommitted changes (%s): commit or stash "
                  "them, then merge again (with no remote the merge lands on %s itself, under "
                  "that checkout)",
                  job->target, merge_checkout_path(checkout), first, job->target);
}

/* No remote: a checkout of the target with uncommitted changes stops the merge before
 * any work is done. */
static int s_check_local_checkout(s_job_t *job)
{
    merge_checkout_t *checkout = NULL;
    int rc = merge_checkout_find(&checkout, job->repo, job->target);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    rc = s_refuse_dirty_checkout(job, checkout);
    merge_checkout_destroy(&checkout);
    return rc;
}

/* What vouches for merging into the target as resolved: the reviewed merge base is in it
 * (every commit the merge brings in is one the review read), and the caller's check. */
static int s_check_target(s_job_t *job)
{
    const char *base = job->req->reviewed_base;
    char target[GIT_OID_HEXSZ + 1];
    git_oid_tostr(target, sizeof target, &job->target_oid);
    if (base != NULL && base[0] != '\0') {
        git_oid oid;
        if (strlen(base) != GIT_OID_HEXSZ || git_oid_fromstr(&oid, base) < 0)
            return s_fail(job, FAILURE_INVALID,
                          "the reviewed merge base '%.64s' is not a 40-digit commit id", base);
        if (!git_oid_equal(&oid, &job->target_oid) &&
            git_graph_descendant_of(job->repo, &job->target_oid, &oid) != 1)
            return s_fail(job, FAILURE_DENIED,
                          "target '%s' is at %.12s, which does not contain %.12s, the merge "
                          "base the review read: merging would bring in commits the review "
                          "never saw (the target moved back, or the review was against "
                          "another target), so the merge is held; review it against '%s' "
                          "again",
                          job->target, target, base, job->target);
    }
    merge_check_target_fn check = job->req->check_target;
    if (check != NULL && check(target, job->req->callback_arg) != 0)
        return s_fail(job, FAILURE_DENIED, "%s", failure_message());
    return 0;
}

static int s_preflight(s_job_t *job)
{
    int rc = worktree_clean_stale(job->repo, job->req->worktree_dir, s_note_progress, job);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    rc = s_check_locks(job);
    if (rc == 0 && job->remote != NULL)
        rc = s_fetch(job);
    if (rc == 0 && job->remote == NULL)
        rc = s_check_local_checkout(job);
    if (rc == 0)
        rc = s_resolve_tips(job);
    if (rc == 0)
        rc = s_check_target(job);
    return rc;
}

/* ---- 2. analysis ----------------------------------------------------------------------- */

/* Decides the strategy. Up-to-date and fast-forward need no merge; otherwise the three-way
 * merge is done in memory and its conflicts listed, as git names them (merge_conflicts.h),
 * before any working tree exists. */
static int s_analyse(s_job_t *job)
{
    merge_result_t *result = job->result;
    if (git_oid_equal(&job->target_oid, &job->source_oid) ||
        git_graph_descendant_of(job->repo, &job->target_oid, &job->source_oid) == 1) {
        result->strategy = MERGE_STRATEGY_UP_TO_DATE;
        git_oid_cpy(&job->merge_oid, &job->target_oid);
        return 0;
    }
    if (git_graph_descendant_of(job->repo, &job->source_oid, &job->target_oid) == 1) {
        result->strategy = MERGE_STRATEGY_FAST_FORWARD;
        git_oid_cpy(&job->merge_oid, &job->source_oid);
        return 0;
    }
    if (job->req->fast_forward_only)
        return s_fail(job, FAILURE_STATE,
                      "not a fast-forward: %s is not an ancestor of the commit to land",
                      job->target);
    int rc = merge_conflicts_find(&job->merge, job->lent, &job->target_oid, &job->source_oid);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    result->strategy = job->merge.count > 0 ? MERGE_STRATEGY_RESOLVED : MERGE_STRATEGY_CLEAN;
    return 0;
}

/* ---- 3. merge -------------------------------------------------------------------------- */

/* Creates the merge commit (parents target, source) of `tree_oid`, on no ref. */
static int s_create_merge_commit(s_job_t *job, const git_oid *tree_oid)
{
    const merge_request_t *req = job->req;
    git_signature *sig = NULL;
    git_tree *tree = NULL;
    git_commit *parents[2] = {NULL, NULL};
    char *message = s_strdupf("Merge branch '%s' into %s\n", req->source_branch,
                              req->message_target ? req->message_target : job->target);
    int rc = 0;
    if (message == NULL)
        rc = s_fail(job, FAILURE_MEMORY, "out of memory");
    else if (git_signature_now(&sig, req->author_name, req->author_email) < 0 ||
             git_tree_lookup(&tree, job->repo, tree_oid) < 0 ||
             git_commit_lookup(&parents[0], job->repo, &job->target_oid) < 0 ||
             git_commit_lookup(&parents[1], job->repo, &job->source_oid) < 0 ||
             git_commit_create(&job->merge_oid, job->repo, NULL, sig, sig, NULL, message, tree,
                               2, (const git_commit **)parents) < 0)
        rc = s_git_fail(job, "cannot create the merge commit");
    git_commit_free(parents[0]);
    git_commit_free(parents[1]);
    git_tree_free(tree);
    git_signature_free(sig);
    free(message);
    return rc;
}

/* A fast-forward by more than one commit, as a merge commit of the source's tree (see
 * merge_request_t.first_parent_tested). */
static int s_commit_source_tree(s_job_t *job)
{
    size_t ahead = 0, behind = 0;
    if (git_graph_ahead_behind(&ahead, &behind, job->repo, &job->source_oid, &job->target_oid) <
        0)
        return s_git_fail(job, "cannot count the source's commits");
    if (ahead <= 1)
        return 0;
    git_commit *source = NULL;
    if (git_commit_lookup(&source, job->repo, &job->source_oid) < 0)
        return s_git_fail(job, "cannot read the source commit");
    git_oid tree_oid;
    git_oid_cpy(&tree_oid, git_commit_tree_id(source));
    git_commit_free(source);
    job->result->strategy = MERGE_STRATEGY_CLEAN;
    return s_create_merge_commit(job, &tree_oid);
}

static int s_commit_clean_merge(s_job_t *job)
{
    git_oid tree_oid;
    int rc = merge_conflicts_write_tree(&tree_oid, &job->merge, job->repo);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    return s_create_merge_commit(job, &tree_oid);
}

static merge_markers_count_t s_blob_markers(s_job_t *job, bool exists, const git_oid *id)
{
    merge_markers_count_t zero = {0, 0, 0, 0};
    git_blob *blob = NULL;
    if (!exists || git_blob_lookup(&blob, job->repo, id) < 0)
        return zero;
    merge_markers_count_t count =
        merge_verify_count(git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
    git_blob_free(blob);
    return count;
}

/* Stages the resolver's version of each conflicting path into job->merge.index (a deleted
 * file resolves by deletion) and names the files that still hold conflict markers. */
static int s_stage_resolutions(s_job_t *job)
{
    git_repository *wt_repo = worktree_repo(job->worktree);
    const char *wt_path = worktree_path(job->worktree);
    merge_result_t *result = job->result;
    for (size_t i = 0; i < job->merge.count; i++) {
        const merge_conflict_t *c = &job->merge.conflicts[i];
        if (git_index_conflict_remove(job->merge.index, c->path) < 0)
            git_error_clear();
        char *full = s_strdupf("%s/%s", wt_path, c->path);
        struct stat st;
        bool exists = full != NULL && lstat(full, &st) == 0;
        free(full);
        if (!exists) {
            git_index_remove_bypath(job->merge.index, c->path);
            continue;
        }
        git_index_entry entry;
        memset(&entry, 0, sizeof entry);
        entry.path = c->path;
        entry.mode = S_ISLNK(st.st_mode)     ? GIT_FILEMODE_LINK
                     : (st.st_mode & S_IXUSR) ? GIT_FILEMODE_BLOB_EXECUTABLE
                                              : GIT_FILEMODE_BLOB;
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return s_fail(job, FAILURE_STATE, "conflict file %s is not a file", c->path);
        if (git_blob_create_from_workdir(&entry.id, wt_repo, c->path) < 0)
            return s_git_fail(job, "cannot read a resolved file");
        merge_markers_count_t resolved = s_blob_markers(job, true, &entry.id);
        merge_markers_count_t ours = s_blob_markers(job, c->has_ours, &c->ours);
        merge_markers_count_t theirs = s_blob_markers(job, c->has_theirs, &c->theirs);
        if (merge_verify_markers_remain(resolved, ours, theirs) &&
            s_list_add(&result->failed_files, &result->failed_count, c->path) != 0)
            return s_fail(job, FAILURE_MEMORY, "out of memory");
        if (git_index_add(job->merge.index, &entry) < 0)
            return s_git_fail(job, "cannot stage a resolved file");
    }
    if (result->failed_count > 0) {
        char *files = s_list_join(result->failed_files, result->failed_count);
        int rc = s_fail(job, FAILURE_STATE, "conflict markers remain in %s", files ? files : "?");
        free(files);
        return rc;
    }
    git_index_conflict_cleanup(job->merge.index);
    if (git_index_has_conflicts(job->merge.index))
        return s_fail(job, FAILURE_STATE, "the merge index still has conflicts");
    return 0;
}

/* Every path of the worktree must equal the resolved tree: the resolver may only change
 * the conflicting files (whose content the resolved tree already took from the worktree). */
static int s_check_outside_changes(s_job_t *job, const git_oid *tree_oid)
{
    git_tree *tree = NULL;
    git_diff *diff = NULL;
    git_diff_options opts;
    git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
    opts.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_RECURSE_UNTRACKED_DIRS |
                 GIT_DIFF_INCLUDE_TYPECHANGE;
    merge_result_t *result = job->result;
    int rc = 0;
    if (git_tree_lookup(&tree, job->repo, tree_oid) < 0 ||
        git_diff_tree_to_workdir(&diff, worktree_repo(job->worktree), tree, &opts) < 0) {
        rc = s_git_fail(job, "cannot compare the worktree with the merge");
        goto out;
    }
    for (size_t i = 0; i < git_diff_num_deltas(diff); i++) {
        const git_diff_delta *delta = git_diff_get_delta(diff, i);
        const char *path = delta->new_file.path ? delta->new_file.path : delta->old_file.path;
        if (s_list_add(&result->failed_files, &result->failed_count, path) != 0) {
            rc = s_fail(job, FAILURE_MEMORY, "out of memory");
            goto out;
        }
    }
    if (result->failed_count > 0) {
        char *files = s_list_join(result->failed_files, result->failed_count);
        rc = s_fail(job, FAILURE_STATE, "agent modified files outside the conflict: %s",
                    files ? files : "?");
        free(files);
    }
out:
    git_diff_free(diff);
    git_tree_free(tree);
    return rc;
}

/* The resolver may have committed the merge itself: accept its commit only if its parents
 * are (target, source) and its tree is the verified one; otherwise refuse. Sets *accepted. */
static int s_check_resolver_commit(s_job_t *job, const git_oid *tree_oid, bool *accepted)
{
    *accepted = false;
    git_oid head;
    if (git_reference_name_to_id(&head, worktree_repo(job->worktree), "HEAD") < 0)
        return s_git_fail(job, "cannot read the worktree's HEAD");
    if (git_oid_equal(&head, &job->target_oid))
        return 0;
    git_commit *commit = NULL;
    if (git_commit_lookup(&commit, job->repo, &head) < 0)
        return s_git_fail(job, "cannot read the resolver's commit");
    bool ok = git_commit_parentcount(commit) == 2 &&
              git_oid_equal(git_commit_parent_id(commit, 0), &job->target_oid) &&
              git_oid_equal(git_commit_parent_id(commit, 1), &job->source_oid) &&
              git_oid_equal(git_commit_tree_id(commit), tree_oid);
    git_commit_free(commit);
    char hex[GIT_OID_HEXSZ + 1];
    git_oid_tostr(hex, sizeof hex, &head);
    if (!ok)
        return s_fail(job, FAILURE_STATE,
                      "the resolver committed %s, which is not the verified merge of '%s' "
                      "into %s", hex, job->req->source_branch, job->target);
    git_oid_cpy(&job->merge_oid, &head);
    *accepted = true;
    s_add_note(job, "accepted the resolver's own merge commit");
    return 0;
}

/* Writes the conflicted merge into a service worktree, lets the resolver work, verifies
 * and commits. */
static int s_resolve_conflicts(s_job_t *job)
{
    const merge_request_t *req = job->req;
    merge_result_t *result = job->result;
    char **paths = calloc(job->merge.count, sizeof *paths);
    if (paths == NULL)
        return s_fail(job, FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < job->merge.count; i++)
        paths[i] = job->merge.conflicts[i].path;
    char *names = s_list_join(paths, job->merge.count);
    s_progress(job, "%zu conflicting file(s): %s", job->merge.count, names ? names : "?");
    free(names);
    int rc = 0;
    if (req->resolve == NULL) {
        for (size_t i = 0; i < job->merge.count && rc == 0; i++)
            rc = s_list_add(&result->failed_files, &result->failed_count, paths[i]);
        free(paths);
        return s_fail(job, FAILURE_STATE, "conflicts and no resolver");
    }

    rc = worktree_add(&job->worktree, job->repo, req->worktree_dir, &job->target_oid);
    if (rc != 0) {
        free(paths);
        return s_fail_from_module(job, rc);
    }
    git_repository *wt_repo = worktree_repo(job->worktree);
    git_annotated_commit *source = NULL;
    /* The analysis's options (rename limit, similarity), so the worktree holds the same
     * conflicts. */
    git_merge_options merge_opts = job->merge.options;
    git_checkout_options checkout_opts;
    git_checkout_options_init(&checkout_opts, GIT_CHECKOUT_OPTIONS_VERSION);
    checkout_opts.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_ALLOW_CONFLICTS;
    if (git_annotated_commit_lookup(&source, wt_repo, &job->source_oid) < 0 ||
        git_merge(wt_repo, (const git_annotated_commit **)&source, 1, &merge_opts,
                  &checkout_opts) < 0) {
        git_annotated_commit_free(source);
        free(paths);
        return s_git_fail(job, "cannot write the conflicted merge into the worktree");
    }
    git_annotated_commit_free(source);

    s_progress(job, "resolving in %s", worktree_path(job->worktree));
    /* The worktree shares the repository's branches: whatever the resolver does to them
     * from there (checkout -b, committing on a branch) is undone before anything else. */
    rc = worktree_watch_branches(job->worktree);
    if (rc != 0) {
        free(paths);
        return s_fail_from_module(job, rc);
    }
    int64_t start = clock_now_ms();
    char *notes = NULL;
    int resolver_rc = req->resolve(worktree_path(job->worktree),
                                   (const char *const *)paths, job->merge.count, &notes,
                                   req->callback_arg);
    result->resolve_ms += s_since(start);
    if (notes != NULL)
        s_add_note(job, notes);
    rc = worktree_undo_branches(job->worktree, s_note_undo, job);
    if (rc != 0) {
        free(notes);
        free(paths);
        return s_fail_from_module(job, rc);
    }
    rc = s_step_check(job, "conflict resolution");
    if (rc == 0 && resolver_rc != 0) {
        for (size_t i = 0; i < job->merge.count && rc == 0; i++)
            rc = s_list_add(&result->failed_files, &result->failed_count, paths[i]);
        /* The resolver's own account is the root cause; the unresolved files follow. */
        rc = s_fail(job, FAILURE_AGENT, "%s%sthe conflicts in %zu file(s) were not resolved",
                    notes && notes[0] ? notes : "", notes && notes[0] ? " — so " : "",
                    job->merge.count);
    }
    free(notes);
    free(paths);
    if (rc != 0)
        return rc;

    rc = s_stage_resolutions(job);
    git_oid tree_oid;
    if (rc == 0 && (rc = merge_conflicts_write_tree(&tree_oid, &job->merge, job->repo)) != 0)
        rc = s_fail_from_module(job, rc);
    if (rc == 0)
        rc = s_check_outside_changes(job, &tree_oid);
    bool accepted = false;
    if (rc == 0)
        rc = s_check_resolver_commit(job, &tree_oid, &accepted);
    if (rc == 0 && !accepted)
        rc = s_create_merge_commit(job, &tree_oid);
    for (size_t i = 0; i < job->merge.count && rc == 0; i++)
        rc = s_list_add(&result->resolved_files, &result->resolved_count,
                        job->merge.conflicts[i].path);
    return rc;
}

/* ---- 4. tests -------------------------------------------------------------------------- */

static int s_run_tests(s_job_t *job)
{
    const merge_request_t *req = job->req;
    merge_result_t *result = job->result;
    if (req->run_tests == NULL) {
        result->tests = MERGE_TESTS_SKIP;
        return 0;
    }
    int rc = job->worktree != NULL
                 ? worktree_checkout(job->worktree, &job->merge_oid)
                 : worktree_add(&job->worktree, job->repo, req->worktree_dir,
                                      &job->merge_oid);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    s_progress(job, "running tests in %s", worktree_path(job->worktree));
    int64_t start = clock_now_ms();
    char *summary = NULL;
    result->tests = req->run_tests(worktree_path(job->worktree), &summary,
                                   req->callback_arg);
    result->tests_ms += s_since(start);
    if (summary != NULL) {
        s_add_note(job, summary);
        free(summary);
    }
    rc = s_step_check(job, "tests");
    if (rc == 0 && result->tests == MERGE_TESTS_FAIL)
        rc = s_fail(job, FAILURE_STATE, "tests failed on the merge; nothing pushed");
    if (rc == 0)
        s_progress(job, "TESTS: %s", merge_tests_name(result->tests));
    return rc;
}

/* ---- 5. push --------------------------------------------------------------------------- */

static int s_push_update_reference(const char *refname, const char *status, void *payload)
{
    s_job_t *job = payload;
    if (status != NULL) {
        free(job->push_message);
        job->push_message = s_strdupf("%s: %s", refname, status);
    }
    return 0;
}

/* Records what became of the local target: result->local, its note, a progress line. */
static void s_local(s_job_t *job, merge_local_t local, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void s_local(s_job_t *job, merge_local_t local, const char *fmt, ...)
{
    char note[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(note, sizeof note, fmt, args);
    va_end(args);
    job->result->local = local;
    free(job->result->local_note);
    job->result->local_note = strdup(note);
    s_add_note(job, note);
    s_progress(job, "%s", note);
}

/* After a successful push: moves refs/heads/<target> when that is a fast-forward, and the
 * user's checkout of it with it when that checkout is clean; otherwise says why not. */
static void s_update_local_target(s_job_t *job)
{
    git_reference *ref = NULL;
    if (git_branch_lookup(&ref, job->repo, job->target, GIT_BRANCH_LOCAL) < 0) {
        git_error_clear();
        return;
    }
    git_oid local;
    git_oid_cpy(&local, git_reference_target(ref) ? git_reference_target(ref) : &job->merge_oid);
    git_reference_free(ref);
    if (git_oid_equal(&local, &job->merge_oid))
        return;
    if (git_graph_descendant_of(job->repo, &job->merge_oid, &local) != 1) {
        s_local(job, MERGE_LOCAL_DIVERGED, "local '%s' has diverged from %s/%s: left unchanged",
                job->target, job->remote_name, job->target);
        return;
    }
    merge_checkout_t *checkout = NULL;
    if (merge_checkout_find(&checkout, job->repo, job->target) != 0) {
        s_local(job, MERGE_LOCAL_BEHIND, "your checkout of %s is behind: git pull (%s)",
                job->target, failure_message());
        return;
    }
    const char *message = "cloister merge-agent: fast-forward";
    if (checkout == NULL) {
        char ref_name[1024];
        git_reference *moved = NULL;
        snprintf(ref_name, sizeof ref_name, "refs/heads/%s", job->target);
        int rc = git_reference_create_matching(&moved, job->repo, ref_name, &job->merge_oid, 1,
                                               &local, message);
        git_reference_free(moved);
        git_error_clear();
        if (rc == 0)
            s_local(job, MERGE_LOCAL_UPDATED, "local '%s' fast-forwarded", job->target);
        else
            s_local(job, MERGE_LOCAL_DIVERGED, "local '%s' moved meanwhile: left unchanged",
                    job->target);
        return;
    }
    char first[512];
    int dirty = merge_checkout_dirty(checkout, first, sizeof first);
    int rc = dirty == 0 ? merge_checkout_advance(checkout, &local, &job->merge_oid, message) : 0;
    if (dirty == 1)
        s_local(job, MERGE_LOCAL_BEHIND,
                "your checkout of %s is behind: git pull (%s has uncommitted changes: %s; left "
                "alone)",
                job->target, merge_checkout_path(checkout), first);
    else if (dirty < 0 || rc < 0)
        s_local(job, MERGE_LOCAL_BEHIND, "your checkout of %s is behind: git pull (%s)",
                job->target, failure_message());
    else if (rc == 1)
        s_local(job, MERGE_LOCAL_DIVERGED, "local '%s' moved meanwhile: left unchanged",
                job->target);
    else
        s_local(job, MERGE_LOCAL_CHECKOUT_UPDATED,
                "local '%s' and your checkout at %s fast-forwarded", job->target,
                merge_checkout_path(checkout));
    merge_checkout_destroy(&checkout);
}

/* No remote: compare-and-swap the local target from the tip we merged onto, and the
 * user's clean checkout of it with it. */
static int s_push_local(s_job_t *job)
{
    merge_checkout_t *checkout = NULL;
    int rc = merge_checkout_find(&checkout, job->repo, job->target);
    if (rc != 0)
        return s_fail_from_module(job, rc);
    rc = s_refuse_dirty_checkout(job, checkout);
    if (rc != 0) {
        merge_checkout_destroy(&checkout);
        return rc;
    }
    const char *message = "cloister merge-agent: merge";
    char *name = s_strdupf("refs/heads/%s", job->target);
    if (name == NULL) {
        merge_checkout_destroy(&checkout);
        return s_fail(job, FAILURE_MEMORY, "out of memory");
    }
    if (checkout != NULL) {
        rc = merge_checkout_advance(checkout, &job->target_oid, &job->merge_oid, message);
        if (rc < 0)
            rc = s_fail(job, rc, "cannot update your checkout of %s at %s: %s", job->target,
                        merge_checkout_path(checkout), failure_message());
        else if (rc == 1)
            rc = GIT_EMODIFIED;
    } else {
        git_reference *moved = NULL;
        rc = git_reference_create_matching(&moved, job->repo, name, &job->merge_oid, 1,
                                           &job->target_oid, message);
        git_reference_free(moved);
        if (rc < 0 && rc != GIT_EMODIFIED)
            rc = s_git_fail(job, "cannot update the target branch");
    }
    free(name);
    if (rc == GIT_EMODIFIED) {
        free(job->push_message);
        job->push_message = s_strdupf("local '%s' moved during the merge", job->target);
        rc = S_RETRY;
    } else if (rc == 0) {
        job->result->landed = MERGE_LANDED_LOCAL;
        if (checkout != NULL)
            s_local(job, MERGE_LOCAL_CHECKOUT_UPDATED,
                    "local '%s' and your checkout at %s moved to the merge", job->target,
                    merge_checkout_path(checkout));
        else
            s_local(job, MERGE_LOCAL_UPDATED, "local '%s' moved to the merge", job->target);
    }
    merge_checkout_destroy(&checkout);
    return rc;
}

/* A push the remote rejected: a fresh fetch tells whether the target moved since the
 * attempt merged onto it (a race: S_RETRY, the next attempt starts from that fetch) or not
 * (the remote refused for another reason — a hook, branch protection, permissions, a locked
 * ref — which another attempt would not change: a failure naming the remote's answer). */
static int s_push_rejected(s_job_t *job)
{
    const char *message = job->push_message ? job->push_message : "no reason given";
    s_progress(job, "push rejected (%s): checking whether %s/%s moved", message,
               job->remote_name, job->target);
    int rc = s_fetch(job);
    if (rc != 0)
        return rc;
    char *target_ref = s_strdupf("refs/remotes/%s/%s", job->remote_name, job->target);
    if (target_ref == NULL)
        return s_fail(job, FAILURE_MEMORY, "out of memory");
    git_oid now;
    rc = s_read_commit_ref(job, target_ref, &now);
    free(target_ref);
    if (rc == 1)
        return s_fail(job, FAILURE_NOT_FOUND, "target branch '%s' not found", job->target);
    if (rc < 0)
        return rc;
    if (!git_oid_equal(&now, &job->target_oid))
        return S_RETRY;
    return s_fail(job, FAILURE_STATE, "push to %s rejected: %s", job->remote_name, message);
}

/* Pushes the merge to refs/heads/<target> without force. The push is made from a
 * temporary ref (a push source must be a ref), removed straight after. */
static int s_push_remote(s_job_t *job)
{
    char temp_name[64];
    worktree_unique_name(temp_name, sizeof temp_name);
    char *temp_ref = s_strdupf("%s%s", WORKTREE_REF_DIR, temp_name);
    char *spec = temp_ref ? s_strdupf("%s:refs/heads/%s", temp_ref, job->target) : NULL;
    if (spec == NULL) {
        free(temp_ref);
        return s_fail(job, FAILURE_MEMORY, "out of memory");
    }
    git_reference *temp = NULL;
    int rc = git_reference_create(&temp, job->repo, temp_ref, &job->merge_oid, 1,
                                  "cloister merge-agent: push source");
    if (rc < 0) {
        free(spec);
        free(temp_ref);
        return s_git_fail(job, "cannot create the push ref");
    }
    s_progress(job, "pushing to %s/%s", job->remote_name, job->target);
    git_push_options opts;
    git_push_options_init(&opts, GIT_PUSH_OPTIONS_VERSION);
    opts.callbacks.push_update_reference = s_push_update_reference;
    opts.callbacks.push_transfer_progress = s_push_progress;
    opts.callbacks.credentials = s_credentials;
    opts.callbacks.payload = job;
    job->credentials = (merge_credentials_t){0};
    git_strarray specs = {&spec, 1};
    free(job->push_message);
    job->push_message = NULL;
    rc = git_remote_push(job->remote, &specs, &opts);
    if (rc == GIT_ENONFASTFORWARD) {
        const git_error *e = git_error_last();
        job->push_message = strdup(e && e->message ? e->message : "non-fast-forward");
    }
    git_reference_delete(temp);
    git_reference_free(temp);
    free(spec);
    free(temp_ref);
    if (rc == GIT_ENONFASTFORWARD || (rc == 0 && job->push_message != NULL))
        return s_push_rejected(job);
    if (rc < 0) {
        rc = s_step_check(job, "push");
        return rc != 0 ? rc : s_git_fail(job, "push failed");
    }
    job->result->pushed = true;
    job->result->landed = MERGE_LANDED_REMOTE;
    s_update_local_target(job);
    return 0;
}

static int s_push(s_job_t *job)
{
    int rc = s_step_check(job, "push");
    if (rc != 0)
        return rc;
    const merge_request_t *req = job->req;
    if (req->before_push != NULL &&
        (rc = req->before_push(job->remote != NULL, req->callback_arg)) != 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", failure_message());
        return s_fail(job, rc, "not pushed: %s", why);
    }
    int64_t start = clock_now_ms();
    rc = job->remote ? s_push_remote(job) : s_push_local(job);
    job->result->push_ms += s_since(start);
    return rc;
}

/* ---- the flow -------------------------------------------------------------------------- */

/* One pass from pre-flight to push. Returns 0, S_RETRY, or a failure. */
static int s_attempt(s_job_t *job)
{
    merge_result_t *result = job->result;
    int64_t start = clock_now_ms();
    int rc = s_preflight(job);
    result->preflight_ms += s_since(start);
    if (rc == 0)
        rc = s_step_check(job, "pre-flight");
    if (rc != 0)
        return rc;

    start = clock_now_ms();
    rc = s_analyse(job);
    result->analysis_ms += s_since(start);
    if (rc != 0)
        return rc;
    if (result->strategy == MERGE_STRATEGY_UP_TO_DATE) {
        s_progress(job, "'%s' is already merged into %s: nothing to do",
                   job->req->source_branch, job->target);
        s_add_note(job, "already merged");
        return 0;
    }
    rc = s_step_check(job, "analysis");
    if (rc == 0 && result->strategy == MERGE_STRATEGY_FAST_FORWARD &&
        job->req->first_parent_tested)
        rc = s_commit_source_tree(job);
    else if (rc == 0 && result->strategy == MERGE_STRATEGY_CLEAN)
        rc = s_commit_clean_merge(job);
    else if (rc == 0 && result->strategy == MERGE_STRATEGY_RESOLVED)
        rc = s_resolve_conflicts(job);
    if (rc != 0)
        return rc;
    s_progress(job, "%s merge ready", merge_strategy_name(result->strategy));

    rc = s_step_check(job, "merge");
    if (rc == 0)
        rc = s_run_tests(job);
    if (rc == 0)
        rc = s_push(job);
    return rc;
}

void merge_request_init(merge_request_t *request)
{
    memset(request, 0, sizeof *request);
    request->target_branch = MERGE_ENGINE_DEFAULT_TARGET;
    request->remote_name = MERGE_ENGINE_DEFAULT_REMOTE;
    request->push = true;
    request->push_retries = MERGE_ENGINE_DEFAULT_PUSH_RETRIES;
    request->lock_stale_ms = MERGE_ENGINE_DEFAULT_LOCK_STALE_MS;
    request->author_name = MERGE_ENGINE_DEFAULT_NAME;
    request->author_email = MERGE_ENGINE_DEFAULT_EMAIL;
}

int merge_engine_run(const merge_request_t *request, merge_result_t *result)
{
    memset(result, 0, sizeof *result);
    int64_t start = clock_now_ms();
    s_job_t job;
    memset(&job, 0, sizeof job);
    job.req = request;
    job.result = result;
    job.target = request->target_branch ? request->target_branch : MERGE_ENGINE_DEFAULT_TARGET;
    job.remote_name = request->remote_name ? request->remote_name : MERGE_ENGINE_DEFAULT_REMOTE;
    git_libgit2_init();

    int rc = s_validate_request(&job);
    if (rc == 0)
        rc = s_open_repository(&job);
    int retries = request->push_retries < 0 ? 0 : request->push_retries;
    for (int attempt = 1; rc == 0 && attempt <= retries + 1; attempt++) {
        result->attempts = attempt;
        s_clear_attempt(&job);
        /* Nothing of a rejected attempt may leak into this one's result. */
        result->strategy = MERGE_STRATEGY_NONE;
        result->tests = MERGE_TESTS_SKIP;
        result->merge_commit[0] = '\0';
        result->local = MERGE_LOCAL_NONE;
        free(result->local_note);
        result->local_note = NULL;
        memset(&job.merge_oid, 0, sizeof job.merge_oid);
        rc = s_attempt(&job);
        if (rc != S_RETRY)
            break;
        s_progress(&job, "push rejected (%s): the target moved, starting again",
                   job.push_message ? job.push_message : "target moved");
        if (attempt == retries + 1)
            rc = s_fail(&job, FAILURE_STATE, "push rejected %d time(s), the target kept moving: %s",
                        attempt, job.push_message ? job.push_message : "target moved");
        else
            rc = 0;
    }
    if (rc == 0) {
        result->success = true;
        char hex[GIT_OID_HEXSZ + 1];
        git_oid_tostr(hex, sizeof hex, &job.merge_oid);
        memcpy(result->merge_commit, hex, sizeof result->merge_commit);
        s_progress(&job, "MERGE_RESULT: SUCCESS (%s, %s)", merge_strategy_name(result->strategy),
                   hex);
    } else {
        s_progress(&job, "MERGE_RESULT: FAILURE: %s", result->reason ? result->reason : "?");
        if (!git_oid_is_zero(&job.merge_oid)) {
            char hex[GIT_OID_HEXSZ + 1];
            git_oid_tostr(hex, sizeof hex, &job.merge_oid);
            memcpy(result->merge_commit, hex, sizeof result->merge_commit);
        }
    }
    /* Keep the files for the result; drop everything else the attempt held. */
    char **failed = result->failed_files, **resolved = result->resolved_files;
    size_t nfailed = result->failed_count, nresolved = result->resolved_count;
    result->failed_files = result->resolved_files = NULL;
    result->failed_count = result->resolved_count = 0;
    s_clear_attempt(&job);
    result->failed_files = failed;
    result->failed_count = nfailed;
    result->resolved_files = resolved;
    result->resolved_count = nresolved;

    git_remote_free(job.remote);
    if (job.lent != NULL)
        merge_repos_put(job.repos, &job.lent);
    merge_repos_destroy(&job.own_repos);
    free(job.push_message);
    git_libgit2_shutdown();
    result->total_ms = s_since(start);
    if (rc != 0)
        failure_set(rc, "%s", result->reason ? result->reason : "merge failed");
    return rc;
}

void merge_result_clear(merge_result_t *result)
{
    s_list_free(&result->resolved_files, &result->resolved_count);
    s_list_free(&result->failed_files, &result->failed_count);
    free(result->notes);
    free(result->local_note);
    free(result->reason);
    memset(result, 0, sizeof *result);
}

/* ---- result markers -------------------------------------------------------------------- */

int merge_result_markers(const merge_result_t *result, merge_marker_t markers[MERGE_MARKER_COUNT])
{
    markers[0].key = "MERGE_RESULT";
    markers[0].value = strdup(result->success ? "SUCCESS" : "FAILURE");
    markers[1].key = "RESOLVED_FILES";
    markers[1].value = s_list_join(result->resolved_files, result->resolved_count);
    markers[2].key = "FAILED_FILES";
    markers[2].value = s_list_join(result->failed_files, result->failed_count);
    markers[3].key = "TESTS";
    markers[3].value = strdup(merge_tests_name(result->tests));
    markers[4].key = "NOTES";
    if (result->success)
        markers[4].value = s_strdupf("%s merge %s%s%s", merge_strategy_name(result->strategy),
                                     result->merge_commit, result->notes ? "; " : "",
                                     result->notes ? result->notes : "");
    else
        markers[4].value = s_strdupf("%s%s%s", result->reason ? result->reason : "failed",
                                     result->notes ? "; " : "",
                                     result->notes ? result->notes : "");
    for (int i = 0; i < MERGE_MARKER_COUNT; i++) {
        if (markers[i].value == NULL) {
            merge_markers_clear(markers);
            return failure_set(FAILURE_MEMORY, "out of memory");
        }
        /* One marker is one line: notes from an agent may hold line breaks. */
        for (char *c = markers[i].value; *c != '\0'; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
    }
    return 0;
}

void merge_markers_clear(merge_marker_t markers[MERGE_MARKER_COUNT])
{
    for (int i = 0; i < MERGE_MARKER_COUNT; i++) {
        free(markers[i].value);
        markers[i].value = NULL;
    }
}

char *merge_result_render(const merge_result_t *result)
{
    merge_marker_t markers[MERGE_MARKER_COUNT];
    if (merge_result_markers(result, markers) != 0)
        return NULL;
    char *text = s_strdupf("%s: %s\n%s: %s\n%s: %s\n%s: %s\n%s: %s\n", markers[0].key,
                           markers[0].value, markers[1].key, markers[1].value, markers[2].key,
                           markers[2].value, markers[3].key, markers[3].value, markers[4].key,
                           markers[4].value);
    merge_markers_clear(markers);
    return text;
}

const char *merge_strategy_name(merge_strategy_t strategy)
{
    switch (strategy) {
    case MERGE_STRATEGY_UP_TO_DATE: return "up-to-date";
    case MERGE_STRATEGY_FAST_FORWARD: return "fast-forward";
    case MERGE_STRATEGY_CLEAN: return "clean";
    case MERGE_STRATEGY_RESOLVED: return "resolved";
    default: return "none";
    }
}

const char *merge_landed_name(merge_landed_t landed)
{
    switch (landed) {
    case MERGE_LANDED_REMOTE: return "remote";
    case MERGE_LANDED_LOCAL: return "local";
    default: return "none";
    }
}

const char *merge_local_name(merge_local_t local)
{
    switch (local) {
    case MERGE_LOCAL_UPDATED: return "updated";
    case MERGE_LOCAL_CHECKOUT_UPDATED: return "checkout_updated";
    case MERGE_LOCAL_BEHIND: return "behind";
    case MERGE_LOCAL_DIVERGED: return "diverged";
    default: return "none";
    }
}

const char *merge_tests_name(merge_tests_t tests)
{
    switch (tests) {
    case MERGE_TESTS_PASS: return "PASS";
    case MERGE_TESTS_FAIL: return "FAIL";
    default: return "SKIP";
    }
}
