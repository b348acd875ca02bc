/* merge_engine: merges a source branch into a target branch with libgit2 and pushes the
 * result, never touching the user's working tree, index or HEAD.
 *
 * One call, merge_engine_run(), does the whole job:
 *   1. pre-flight  open the repository (a clone or a linked worktree; or take the handle the
 *                  last run on it left in `repos`, merge_repos.h), remove stale lock
 *                  files (refuse fresh ones: "repository busy"), clean worktrees left by a
 *                  crashed run of this engine, fetch the remote, resolve SOURCE and TARGET;
 *   2. analysis    up-to-date (already merged: SUCCESS, nothing pushed), fast-forward, or an
 *                  in-memory three-way merge that lists the conflicting paths as git names
 *                  them (merge_conflicts.h: a rename conflict once, under git's path);
 *   3. merge       clean: a merge commit on no ref; conflicts: a worktree owned by the
 *                  service under `worktree_dir`, the conflicted merge written into it, the
 *                  caller's resolve() callback (the agent), then verification (no conflict
 *                  markers, no file changed outside the conflict, no conflict left);
 *   4. tests       run_tests() in a worktree checked out at the merge commit (FAIL aborts);
 *   5. push        `<merge>:refs/heads/<target>` without force; after a rejected push a
 *                  fetch shows whether the remote target moved since step 1: if it did, the
 *                  run starts again from 1, up to push_retries times; if not (a hook, branch
 *                  protection, permissions), it fails at once with the reason
 *                  "push to <remote> rejected: <ref>: <the remote's status>".
 * On failure, cancellation or the deadline every service worktree and temporary ref is
 * removed and the repository is left exactly as it was; the result names the files.
 *
 * The local target branch (refs/heads/<target>) and the user's checkout of it
 * (merge_checkout.h): with a remote, after a successful push the local target is moved
 * with a compare-and-swap when the move is a fast-forward -- and when it is checked out
 * in a working tree that is clean, that tree is fast-forwarded with it; a dirty tree is
 * left alone ("your checkout of <target> is behind: git pull"). Without a remote, or with
 * `push` false, nothing is fetched or pushed: the local target is the target, the merge
 * lands on it by the same compare-and-swap, and a clean checkout of it moves with it; a
 * checkout with uncommitted changes stops the merge in pre-flight (and again at the end,
 * if it became dirty meanwhile), since landing would change the files under them.
 *
 * Branch names only ever reach libgit2 as reference names; no shell and no git program is
 * run. Time comes from clock_now_ms(). */
#ifndef CLOISTER_MERGE_ENGINE_H
#define CLOISTER_MERGE_ENGINE_H

#include "merge_repos.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MERGE_ENGINE_DEFAULT_TARGET "main"
#define MERGE_ENGINE_DEFAULT_REMOTE "origin"
#define MERGE_ENGINE_DEFAULT_PUSH_RETRIES 3
#define MERGE_ENGINE_DEFAULT_LOCK_STALE_MS 60000
#define MERGE_ENGINE_DEFAULT_NAME "Cloister merge-agent"
#define MERGE_ENGINE_DEFAULT_EMAIL "merge-agent@cloister.local"

typedef enum { MERGE_TESTS_SKIP = 0, MERGE_TESTS_PASS, MERGE_TESTS_FAIL } merge_tests_t;

/* What became of the local target branch. */
typedef enum {
    MERGE_LOCAL_NONE = 0,         /* no local target branch, or it was already there */
    MERGE_LOCAL_UPDATED,          /* moved; checked out nowhere */
    MERGE_LOCAL_CHECKOUT_UPDATED, /* moved, and the clean checkout of it with it */
    MERGE_LOCAL_BEHIND,           /* checked out in a dirty tree (or a file was in the way):
                                     left alone, behind the remote's */
    MERGE_LOCAL_DIVERGED          /* has commits the merge does not: left alone */
} merge_local_t;

typedef enum {
    MERGE_STRATEGY_NONE = 0, /* failed before a strategy was chosen */
    MERGE_STRATEGY_UP_TO_DATE,
    MERGE_STRATEGY_FAST_FORWARD,
    MERGE_STRATEGY_CLEAN,
    MERGE_STRATEGY_RESOLVED
} merge_strategy_t;

/* Streams one line of progress ("fetching origin", "3 conflicting files: ..."). `text` is
 * borrowed for the duration of the call. */
typedef void (*merge_progress_fn)(const char *text, void *arg);

/* Resolves the conflicts in `worktree_path` (a worktree owned by the engine, holding the
 * conflicted merge with conflict markers). `conflict_files` (n paths relative to the
 * worktree) are borrowed. May set *notes_out to a malloc'd string the engine takes over.
 * Returns 0 when the resolver finished (the engine then verifies the files), or nonzero
 * when it gave up or failed. The resolver may edit files, stage them and even commit the
 * merge; the engine checks whatever it finds. */
typedef int (*merge_resolve_fn)(const char *worktree_path, const char *const *conflict_files,
                                size_t n, char **notes_out, void *arg);

/* Runs the project's tests in `worktree_path` (checked out at the merge commit). May set
 * *summary_out to a malloc'd string the engine takes over. */
typedef merge_tests_t (*merge_run_tests_fn)(const char *worktree_path, char **summary_out,
                                            void *arg);

/* Polled between steps; true stops the merge (clean abort, FAILURE "cancelled"). */
typedef bool (*merge_cancelled_fn)(void *arg);

/* Asked right before each push (`remote` true) or landing on the local target (`remote`
 * false: no remote, or push off): 0 lets it go; a FAILURE_* code (with failure_message()
 * saying why, e.g. "stale attempt: ...") stops the merge unpushed with that code. */
typedef int (*merge_before_push_fn)(bool remote, void *arg);

/* Decides whether the merge may go on into the target at `target_commit` (hex), when no
 * review vouches for it (merge_request_t.check_target). Returns 0, or a FAILURE_* code with
 * failure_message() saying why the merge is held. */
typedef int (*merge_check_target_fn)(const char *target_commit, void *arg);

/* What to merge. Strings are borrowed for the duration of merge_engine_run(). Fill it with
 * merge_request_init() and then set the fields you need. */
typedef struct {
    const char *repo_path;     /* a clone or a linked worktree (required) */
    const char *source_branch; /* branch name, e.g. "feature/x" (required) */
    const char *source_commit; /* optional: the 40-hex commit the source must be at (what
                                  was reviewed); a source elsewhere fails the merge */
    const char *target_branch; /* default "main" */
    const char *reviewed_base; /* optional: the 40-hex merge base the review read; a target
                                  that does not contain it holds the merge (FAILURE_DENIED):
                                  merging would bring in commits the review never saw */
    const char *remote_name;   /* default "origin"; a repository without it merges locally */
    bool push;                 /* default true; false: never fetch or push, merge onto the
                                  local target as when there is no remote */
    int push_retries;          /* extra attempts after a push rejected because the
                                  target moved; default 3 */
    bool first_parent_tested;  /* default false; true: a fast-forward by more than one
                                  commit becomes a merge commit (parents target, source;
                                  the source's tree), so that every first-parent commit
                                  the target gains is the one tested */
    const char *message_target; /* optional: the target's name in the merge commit's
                                  message (default target_branch) */
    bool fast_forward_only;    /* default false; true: land the source only as a
                                  fast-forward of the target (or find it already there),
                                  else fail with "not a fast-forward" (the merge queue lands
                                  exactly the commit it tested) */
    int64_t deadline_ms;       /* absolute, on clock_now_ms(); 0 = none */
    int64_t lock_stale_ms;     /* a lock file older than this is stale; default 60 s */
    const char *author_name;   /* identity of the merge commit */
    const char *author_email;
    const char *worktree_dir;  /* the service's own directory for worktrees (required) */
    merge_repos_t *repos;      /* optional (borrowed): repositories kept open from run to run;
                                  NULL opens the repository for this run only */
    merge_progress_fn progress;   /* optional */
    merge_resolve_fn resolve;     /* optional: without it, conflicts are a FAILURE */
    merge_run_tests_fn run_tests; /* optional: without it, TESTS is SKIP */
    merge_cancelled_fn cancelled; /* optional */
    merge_before_push_fn before_push; /* optional */
    merge_check_target_fn check_target; /* optional: asked with each target commit the
                                           merge would go into (again after the target
                                           moved), before anything is merged */
    void *callback_arg;           /* passed to every callback */
} merge_request_t;

/* Where a successful merge landed: pushed to the remote's target, or (no remote, or
 * `push` false) moved onto the local target alone. */
typedef enum { MERGE_LANDED_NONE, MERGE_LANDED_REMOTE, MERGE_LANDED_LOCAL } merge_landed_t;

/* The outcome. Every pointer is owned by the result; release with merge_result_clear(). */
typedef struct {
    bool success;
    merge_strategy_t strategy;
    char merge_commit[41];  /* hex id of what target now points to (or would have), or "" */
    char **resolved_files;  /* conflicting files the resolver fixed */
    size_t resolved_count;
    char **failed_files;    /* files named by the failure (markers, outside changes, ...) */
    size_t failed_count;
    merge_tests_t tests;
    char *notes;            /* resolver notes, test summary, local-ref note; may be NULL */
    char *reason;           /* why it failed, NULL on success */
    bool pushed;            /* the merge was pushed: the remote's target moved to it */
    merge_landed_t landed;  /* where the target that moved is: remote, local, or none (not
                               merged, or already merged: nothing moved) */
    merge_local_t local;    /* what became of the local target (and its checkout) */
    char *local_note;       /* that, in words ("local 'main' and your checkout at /x
                               fast-forwarded"); NULL when nothing was said */
    int attempts;           /* pre-flight-to-push rounds run */
    int64_t preflight_ms, analysis_ms, resolve_ms, tests_ms, push_ms, total_ms;
} merge_result_t;

/* One marker of the seed's result block, e.g. {"MERGE_RESULT", "SUCCESS"}. `key` is a
 * literal; `value` is malloc'd and owned by the marker array (merge_markers_clear). */
typedef struct {
    const char *key;
    char *value;
} merge_marker_t;

#define MERGE_MARKER_COUNT 5

/* Sets every field of `request` to its default (NULL callbacks, no deadline). */
void merge_request_init(merge_request_t *request);

/* Runs the whole merge described by `request` and fills `result` (which the caller owns and
 * must release with merge_result_clear(), whatever the return value). Returns 0 when
 * result->success, otherwise a negative FAILURE_* code with failure_message() equal to
 * result->reason. Not thread-safe against another run on the same worktree_dir. */
int merge_engine_run(const merge_request_t *request, merge_result_t *result);

/* Frees what `result` owns and zeroes it. */
void merge_result_clear(merge_result_t *result);

/* Fills `markers` with MERGE_RESULT, RESOLVED_FILES, FAILED_FILES, TESTS and NOTES (in that
 * order). Free the values with merge_markers_clear(). Returns 0 or FAILURE_MEMORY. */
int merge_result_markers(const merge_result_t *result, merge_marker_t markers[MERGE_MARKER_COUNT]);

/* Frees the values filled by merge_result_markers(). */
void merge_markers_clear(merge_marker_t markers[MERGE_MARKER_COUNT]);

/* The markers as text, one "KEY: value" line each. Returns a malloc'd string (caller frees)
 * or NULL when out of memory. */
char *merge_result_render(const merge_result_t *result);

/* "up-to-date", "fast-forward", "clean", "resolved" or "none". */
const char *merge_strategy_name(merge_strategy_t strategy);

/* "remote", "local" or "none". */
const char *merge_landed_name(merge_landed_t landed);

/* "none", "updated", "checkout_updated", "behind" or "diverged". */
const char *merge_local_name(merge_local_t local);

/* "PASS", "FAIL" or "SKIP". */
const char *merge_tests_name(merge_tests_t tests);

#endif
