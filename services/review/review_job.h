/* review_job: one review-agent task, run on the specialist skeleton.
 *
 * Payload: workspace (required: the repository to review), branch (default: its HEAD),
 * target (default "main"), prUrl, issueId, description, acceptance, type, role, task,
 * filesChanged (see common/agent/prompt.h for how they reach the prompt).
 *
 * Steps:
 *   1. mode = [review] mode. disabled: REVIEW_RESULT APPROVED, GATE open, no agent.
 *   2. the diff of branch against its merge base with target (review_diff.h), cut to
 *      [review] diff_budget_chars (default 30000);
 *   3. the reviewed commit (the diff's head) is checked out in the review's own worktree
 *      (review_tree.h), under the agent's workdir: [review] checks (shell commands, the
 *      user's own config, or the target branch's) run one by one there with
 *      common/testrun, each limited to [review] check_timeout_s (default 300, and never
 *      past the task's lease); a failing check is a finding of its severity, and each
 *      check's entry names the commit it ran on;
 *   4. the agent phases (review_loop.h): without [review] reviewers, prompts/review-agent.md
 *      rendered (prompt.h) with diff, checks, review_mode, scope and the worktree as
 *      {{workspace}}, run by the agent (agent_job.h) in the specialist's fixed workdir with
 *      `--add-dir <worktree>` so its tools read the reviewed commit, never the user's
 *      checkout; with them, plan, act (the reviewers as parallel forks) and synthesize
 *      rounds, the synthesis in that same session;
 *   5. the (last) answer's REVIEW_RESULT block (required; APPROVED | CHANGES_REQUESTED |
 *      COMMENTED, reported but not obeyed) and FINDINGS (missing or unreadable findings are
 *      an error finding), less what the synthesis DISMISSED; a verdict that disagrees with
 *      the findings has its issues made findings (review_verdict.h, `verdict_note`);
 *   6. the merge gate from the findings and the mode (review_gate.h); in yolo mode an open
 *      gate chains the merge: next task id
 *      "merge-<task id>", specialist merge-agent, group "merge:<repository root>:<target>"
 *      (common/specialist/repository.h), payload {workspace, branch (HEAD's branch when none was
 *      given; a detached HEAD chains nothing and leaves approval manual), target, commit
 *      (diff_head: the merge refuses a branch that moved since), issueId, prUrl};
 *   7. with [review] post = true and a prUrl, the review is posted on the pull request
 *      (review_post.h).
 *
 * Result fields: see proto/PROTOCOL.md, "The review-agent's result" -- REVIEW_RESULT, GATE
 * (open|blocked), approval (auto|manual|blocked), review_mode, scope, FINDINGS, merge_gate,
 * skips, rounds and stop_reason, reviewer_runs, dismissed, verdict_note, resolved_findings,
 * errors, warnings, infos, FILES_REVIEWED, SECURITY_ISSUES, PERFORMANCE_ISSUES, NOTES,
 * files_changed, diff_base, diff_head, checks, merge_task | test_task (when chained),
 * posted and post_* (when posting), plus agent_job's agent fields (of the last main-session
 * run).
 *
 * Outcome: done when the review ran, whatever the verdict (it is in the result). failed
 * when it could not: no workspace, no diff, an agent failure (crash, is_error, timeout:
 * the error says which), or an answer without a valid REVIEW_RESULT. retry only when the
 * agent never started because another run of review-agent held the session lock until
 * the run's deadline (a transient, local condition); a crashed agent is not retried,
 * since rerunning the same prompt tends to crash the same way and costs money. A line per
 * job goes to specialists/review-agent/history.jsonl. */
#ifndef CLOISTER_REVIEW_JOB_H
#define CLOISTER_REVIEW_JOB_H

#include "config.h"
#include "review_gate.h"
#include "sandbox.h"
#include "specialist.h"

#define REVIEW_SPECIALIST "review-agent"
#define REVIEW_DEFAULT_DIFF_BUDGET 30000
#define REVIEW_DEFAULT_CHECK_TIMEOUT_S 300
/* Bytes of a check's output quoted in the prompt. */
#define REVIEW_CHECK_OUTPUT_QUOTE 3000

typedef struct {
    const config_t *config; /* borrowed */
    review_mode_t mode;
    const char *workdir;     /* the agent's workdir, or NULL for agent_job's default */
    const char *prompts_dir; /* borrowed */
    const sandbox_t *sandbox; /* how [review] checks run (borrowed) */
} review_service_t;

/* The job function (specialist_job_fn) for specialist_run(); job_arg is a
 * review_service_t. */
specialist_outcome_t review_job(specialist_ctx_t *ctx, void *job_arg);

#endif
