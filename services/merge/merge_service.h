/* merge_service: the merge-agent's job -- one broker task of specialist `merge-agent`
 * turned into one merge_engine_run() (merge_engine.h), with the agent resolving conflicts.
 *
 * The task's payload (the seed's names):
 *   workspace  required: a directory inside the repository (a clone or a linked worktree)
 *   branch     required: SOURCE, the branch to merge
 *   target     TARGET, default "main"
 *   issueId    the issue, for the prompt and history (else the task's `issue`)
 *   remote     the remote to fetch from and push to, default [merge] remote ("origin");
 *              with [merge] push = false none is used: the merge lands on the local target
 *
 * With [merge] queue (the default) the task's merge goes through the speculative queue of
 * its target (merge_queue.h): the engine builds candidates onto a temporary branch (no
 * push), the tests run on each candidate in a worktree of its own, and the landing is the
 * engine again with fast_forward_only (the tested commit or nothing). The result fields are
 * the same, plus queue_seq, queue_test_runs and queue_ms; an ejected merge fails with the
 * reason (the failing tests named); a landing that failed for a transient reason, or a
 * merge still queued at the deadline, is retried.
 *
 * What the job does, per task (without the queue; with it, the same steps in the queue's
 * order):
 *  - the repository: the handle the last task of the same workspace used, kept open
 *    unless the repository changed in between (merge_repos.h);
 *  - deadline: the task's timeout_s (the lease the skeleton enforces) minus a margin
 *    (MERGE_SERVICE_MARGIN_*), so the engine stops, cleans up and reports on its own
 *    before the skeleton has to cancel it;
 *  - progress: every engine line ("fetching origin", "2 conflicting file(s): a.c, b.c",
 *    "running tests in ...", "pushing to origin/main") is a progress event of kind "info";
 *  - conflicts: the prompt prompts/merge-agent.md (prompt_build) is rendered with the
 *    merge's values and the agent runs through agent_job_run() in the specialist's FIXED
 *    workdir, so its session resumes from merge to merge; the engine's conflict worktree
 *    is created under <workdir>/merges/ (inside that cwd) and is also granted with
 *    `--add-dir <worktree>` and named in the prompt. The agent's final MERGE_RESULT
 *    FAILURE, an agent error or timeout count as "gave up"; whatever the agent claims, the
 *    engine verifies the files itself;
 *  - tests: testdetect_find() in the merged worktree with [specialists.merge-agent]
 *    test_command, else [specialists.test-agent] test_command, else detection; nothing
 *    found is SKIP; testrun_run() bounded by the time left; a failing, erroring or timed
 *    out run is FAIL (nothing is pushed);
 *  - a failure after which the merge may nevertheless have reached the remote (a timeout,
 *    a cancel or a transport error with a merge commit known) is checked against the
 *    remote's real target ref before it is reported: a merge that happened is reported as
 *    done, never as failed;
 *  - one JSON line per merge ("kind": "merge") in specialists/merge-agent/history.jsonl.
 *
 * Result fields: MERGE_RESULT (SUCCESS|FAILURE), RESOLVED_FILES, FAILED_FILES (arrays),
 * TESTS (PASS|FAIL|SKIP), NOTES, merge_commit, strategy, pushed, local_target (none |
 * updated | checkout_updated | behind | diverged: merge_engine.h) and local_note (what it
 * means, e.g. "your checkout of main is behind: git pull"), attempts (engine rounds),
 * source, target, repository, preflight_ms, analysis_ms, resolve_ms, tests_ms, push_ms,
 * total_ms, and agent_job's fields (cost_usd, session_id, ...) when the agent ran.
 *
 * Outcome: done for SUCCESS. retry (the broker tries again later, counting a failure) for
 * transient infrastructure trouble only: the remote unreachable (connect, list, fetch or
 * push transport errors), a repository busy with a fresh lock, an I/O or memory failure.
 * failed for everything else -- invalid payload or branch names, missing branches,
 * unresolved conflicts, verification, tests, a target that kept moving, the deadline --
 * with `error` = the engine's reason, naming the files. */
#ifndef CLOISTER_MERGE_SERVICE_H
#define CLOISTER_MERGE_SERVICE_H

#include "config.h"
#include "specialist.h"

#define MERGE_SERVICE_SPECIALIST "merge-agent"
/* The engine's deadline is the task's lease minus timeout/10, kept within these bounds. */
#define MERGE_SERVICE_MARGIN_MIN_MS 500
#define MERGE_SERVICE_MARGIN_MAX_MS 30000

typedef struct merge_service_t merge_service_t;

/* A service reading its settings from `config` (borrowed: it must outlive the service).
 * Creates the specialist's workdir. Returns 0 and *out (caller owns; free with
 * merge_service_destroy()), or a FAILURE_* code with the reason (workdir unusable). */
int merge_service_new(merge_service_t **out, const config_t *config);

/* Takes the settings read at each merge ([merge], the test command, the sandbox, the
 * agent's) from `config` (borrowed from now on, in place of the one before) -- not those
 * fixed at start: the workdir and the broker's control endpoint. Between tasks only. Returns 0,
 * or a failure (the sandbox setting refused) with `self` unchanged. */
int merge_service_reload(merge_service_t *self, const config_t *config);

/* Frees the service and nulls *self_p. Safe with NULL. */
void merge_service_destroy(merge_service_t **self_p);

/* The agent's fixed working directory (owned by the service). */
const char *merge_service_workdir(const merge_service_t *self);

/* The specialist job (specialist_job_fn): runs the merge of the task of `ctx`.
 * `service` is a merge_service_t (borrowed). */
specialist_outcome_t merge_service_job(specialist_ctx_t *ctx, void *service);

#endif
