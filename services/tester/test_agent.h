/* test_agent: the job of the test-agent specialist (cloister-test): run a workspace's
 * tests, report the verdict, and on request let the agent try a simple fix.
 *
 * A task's payload:
 *   workspace  (string, required) an absolute path to the project directory;
 *   commit     (string, optional) the commit to test (a SHA, or any revision naming one);
 *   branch     (string, optional) the local branch to test, when no commit is given;
 *              without either, the workspace's HEAD commit is tested (NOTES says so).
 *              The commit is checked out in a worktree the service owns (test_tree.h):
 *              the user's checkout, index and uncommitted changes are never touched nor
 *              tested. A workspace outside git is tested in place, as it is;
 *   fix        (bool, optional) ask for a fix when tests fail; overrides the config.
 *
 * One job:
 *  1. the test command: [specialists.test-agent] test_command when set, else detection
 *     in the workspace (common/specialist/testdetect.h). A task cannot supply a command: the command
 *     runs through a shell, so it only ever comes from the user's config or their files;
 *  2. the run (test_suite.h), bounded by the task's lease minus a margin
 *     (TEST_AGENT_MARGIN_*), so the service reports a timeout itself before the skeleton's
 *     lease cancels the job; output streams as progress;
 *  3. the verdict and counts (common/specialist/testrun.h);
 *  4. when the verdict is FAIL and a fix was asked for (payload `fix`, else
 *     [specialists.test-agent] fix, default false), the prompt prompts/test-agent.md is rendered with the command,
 *     its output (fenced as data) and the failures, and the agent runs (common/specialist/agent_job.h)
 *     in the specialist's fixed workdir with `--add-dir <workspace>`: one agent session
 *     for every workspace, resumable across tasks, because the CLI finds a session by its
 *     cwd (see common/agent/agent.h); the prompt names the tested tree's
 *     absolute path (the worktree). Then the tests run again and FIX_RESULT says whether
 *     they pass now; a fix made in a worktree is reported as a patch (FIX_PATCH), since
 *     the worktree is removed after the job. In a git repository the fix is not a commit,
 *     so the tested commit's verdict stays the first run's (FAIL): the rerun's verdict is
 *     FIX_TEST_RESULT, and fix_available is true when it passed with a patch. A fix counts
 *     once it is committed and that commit is tested (a pipeline chains no merge of the
 *     unfixed commit). Outside git the directory itself is what is tested, fix included.
 *
 * Result fields: TEST_RESULT (PASS|FAIL|ERROR, of the last run), TESTS_RUN, TESTS_PASSED,
 * TESTS_FAILED, TESTS_SKIPPED (each only when the output reveals it), FAILURES (array of
 * "name - reason"), FAILURES_TRUNCATED (when more were reported than kept), TEST_COMMAND,
 * runner, detected_by (what chose the command), exit_code, duration_ms (the test runs,
 * summed), output_tail (the last TEST_AGENT_OUTPUT_TAIL bytes), FIX_ATTEMPTED (true once
 * the agent ran; false when it could not even start), FIX_RESULT
 * (SUCCESS|FAILED|NOT_ATTEMPTED), FAILURES_BEFORE_FIX (when a fix was attempted),
 * TESTED_COMMIT (the full SHA tested, in a git repository), FIX_PATCH (the fix's diff,
 * at most TEST_AGENT_PATCH_CAP bytes), NOTES (which commit was tested and why, the run,
 * the fix); the agent_job fields after a fix attempt.
 * The run fields (TEST_RESULT to output_tail) describe one run: the tested commit's first
 * run; outside git, after a fix, the rerun's replace the first run's entirely, and those
 * the rerun does not give are null. FIX_TEST_RESULT and fix_available: after a fix of a
 * tested commit.
 *
 * Outcome: `done` when the tests ran and gave a verdict (PASS or FAIL: the verdict is in
 * the result); `failed` with a one-line `error` when they could not: no workspace, a
 * branch or commit not found, no test command ("no test command found in <dir>: ..."), a
 * command that is not installed ("tests could not run: pytest: not found (exit 127)"), a
 * timeout, a crash without test output (TEST_RESULT ERROR). Also `failed` after a cancel. Each job appends one line to
 * specialists/test-agent/history.jsonl. */
#ifndef CLOISTER_TEST_AGENT_H
#define CLOISTER_TEST_AGENT_H

#include "config.h"
#include "sandbox.h"
#include "specialist.h"

#define TEST_AGENT_SPECIALIST "test-agent"
/* Time kept back from the task's lease: a tenth of it, within these bounds (ms). */
#define TEST_AGENT_MARGIN_MIN_MS 500
#define TEST_AGENT_MARGIN_MAX_MS 30000
/* Bytes of output quoted in `output_tail` and in the prompt. */
#define TEST_AGENT_OUTPUT_TAIL 4000
#define TEST_AGENT_PROMPT_OUTPUT 12000
/* Bytes of a fix's patch kept in FIX_PATCH. */
#define TEST_AGENT_PATCH_CAP (64 * 1024)

typedef struct {
    const config_t *config; /* borrowed for the service's life */
    const sandbox_t *sandbox; /* how the tests run (borrowed) */
} test_agent_t;

/* The job (specialist_job_fn): `arg` is a test_agent_t (borrowed). See above. */
specialist_outcome_t test_agent_job(specialist_ctx_t *ctx, void *arg);

#endif
