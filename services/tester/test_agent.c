/* test_agent: the test-agent's job (see test_agent.h). */
#include "test_agent.h"

#include "agent_job.h"
#include "clock.h"
#include "failure.h"
#include "log.h"
#include "markers.h"
#include "pipeline.h"
#include "prompt.h"
#include "repository.h"
#include "run_network.h"
#include "session.h"
#include "template.h"
#include "test_suite.h"
#include "test_tree.h"
#include "testdetect.h"
#include "testrun.h"

#include <git2.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The least time worth giving the agent for a fix, in ms. */
#define TEST_AGENT_MIN_FIX_MS 2000
/* Time kept for the rerun after a fix: the first run's duration times 3/2, plus this. */
#define TEST_AGENT_RERUN_SLACK_MS 1000

/* Everything one job gathers on its way to the result. */
typedef struct {
    specialist_ctx_t *ctx;
    const test_agent_t *agent;
    char workspace[PATH_MAX];
    test_tree_t *tree; /* what is tested, and where (test_tree.h) */
    config_t *repo_config; /* the target branch's .cloister/config.toml, or NULL */
    const char *target;    /* the target branch it was read from (the payload's, or "main") */
    testdetect_t detected;
    int64_t deadline_ms; /* when the test runs and the fix must be over (clock_now_ms) */
    int64_t tests_ms;    /* time spent in test runs */
    char notes[2048];    /* sentences for NOTES, "; "-separated */
    bool run_reported;   /* s_report_run() has set the result fields of a run */
    bool fix_attempted;
    bool network;        /* the tests may use the network (the target branch opted in) */
    const char *fix_result; /* "SUCCESS", "FAILED" or "NOT_ATTEMPTED" */
} test_job_t;

/* Appends a sentence to the job's NOTES (control characters become spaces). */
static void s_note(test_job_t *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void s_note(test_job_t *job, const char *fmt, ...)
{
    size_t len = strlen(job->notes);
    if (len > 0 && len + 2 < sizeof job->notes) {
        memcpy(job->notes + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(job->notes + len, sizeof job->notes - len, fmt, ap);
    va_end(ap);
    /* NOTES is one line: agent errors and output may bring line breaks. */
    for (char *p = job->notes + len; *p; p++) {
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    }
}

/* The payload's boolean `key`, or `fallback` when absent or not a boolean. */
static bool s_payload_bool(const specialist_task_t *task, const char *key, bool fallback)
{
    const json_t *value = json_object_get(task->payload_json, key);
    return json_is_boolean(value) ? json_is_true(value) : fallback;
}

/* Checks the payload's workspace and stores its real path in job->workspace. Returns 0, or
 * FAILURE_INVALID / FAILURE_NOT_FOUND with the reason. */
static int s_resolve_workspace(test_job_t *job)
{
    const char *workspace = specialist_payload_str(job->ctx, "workspace");
    if (workspace == NULL || workspace[0] == '\0')
        return failure_set(FAILURE_INVALID, "the task's payload has no workspace");
    if (workspace[0] != '/')
        return failure_set(FAILURE_INVALID, "workspace %s is not an absolute path", workspace);
    struct stat st;
    if (stat(workspace, &st) != 0 || !S_ISDIR(st.st_mode))
        return failure_set(FAILURE_NOT_FOUND, "workspace %s does not exist or is not a directory",
                           workspace);
    if (realpath(workspace, job->workspace) == NULL)
        return failure_set(FAILURE_NOT_FOUND, "workspace %s cannot be resolved", workspace);
    return 0;
}

/* Chooses the commit to test and the tree to run in (test_tree.h); reports it in
 * TESTED_COMMIT and NOTES. Returns 0 or a FAILURE_* code with the reason. */
static int s_open_tree(test_job_t *job)
{
    char workdir[AGENT_JOB_WORKDIR_SIZE], worktrees[AGENT_JOB_WORKDIR_SIZE + 16];
    int rc = agent_job_workdir(workdir, sizeof workdir, job->agent->config, TEST_AGENT_SPECIALIST);
    if (rc != 0)
        return rc;
    snprintf(worktrees, sizeof worktrees, "%s/worktrees", workdir);
    rc = test_tree_open(&job->tree, job->workspace, specialist_payload_str(job->ctx, "branch"),
                        specialist_payload_str(job->ctx, "commit"), worktrees);
    if (rc != 0)
        return rc;
    const char *commit = test_tree_commit(job->tree);
    if (commit[0] != '\0')
        specialist_result_str(job->ctx, "TESTED_COMMIT", commit);
    s_note(job, "tested %s", test_tree_source(job->tree));
    return 0;
}

/* The repository's settings (common/specialist/repository.h) as committed on the target
 * branch (payload.target, default main), never the tested commit's: a branch under test must
 * not choose its own test command (`command = "true"` would pass anything) or timeout.
 * [tests] command and timeout_s there win over the service's; with no such target branch
 * only the service's hold. Returns 0 or FAILURE_INVALID (a file that does not parse). */
static int s_read_repo_config(test_job_t *job)
{
    if (test_tree_commit(job->tree)[0] == '\0')
        return 0; /* a directory outside git: no repository settings */
    const char *target = specialist_payload_str(job->ctx, "target");
    target = target && target[0] ? target : "main";
    char target_commit[GIT_OID_HEXSZ + 1];
    if (repository_branch_resolve(job->workspace, target, NULL, 0, target_commit,
                                  sizeof target_commit) != 0) {
        s_note(job, "the repository's settings not read: %s", failure_message());
        return 0;
    }
    job->target = target;
    int rc = repository_config_at(job->workspace, target_commit, &job->repo_config);
    if (rc != 0)
        return failure_set(rc, "the repository's settings (target branch '%s'): %s", target,
                           failure_message());
    int64_t timeout_s = job->repo_config
                            ? config_int(job->repo_config, "tests", "timeout_s", 0)
                            : config_int(job->agent->config, "tests", "timeout_s", 0);
    if (timeout_s > 0 && clock_now_ms() + timeout_s * 1000 < job->deadline_ms)
        job->deadline_ms = clock_now_ms() + timeout_s * 1000;
    return 0;
}

/* The configured test command: the repository's [tests] command, else the service's
 * [specialists.test-agent] test_command, else [tests] command; NULL to detect. */
static const char *s_configured_command(test_job_t *job)
{
    const char *command =
        job->repo_config ? config_string(job->repo_config, "tests", "command", NULL) : NULL;
    if (command != NULL) {
        s_note(job, "test command from the repository's %s on the target branch '%s'",
               REPOSITORY_CONFIG_PATH, job->target);
        return command;
    }
    command = config_specialist_test_command(job->agent->config, TEST_AGENT_SPECIALIST);
    return command ? command : config_string(job->agent->config, "tests", "command", NULL);
}

/* The last `max` bytes of `text`, starting at a line (or at least a UTF-8 character). */
static const char *s_tail(const char *text, size_t max)
{
    size_t len = strlen(text);
    if (len <= max)
        return text;
    const char *start = text + len - max;
    const char *nl = memchr(start, '\n', max);
    if (nl != NULL && nl + 1 < text + len)
        return nl + 1;
    while (((unsigned char)*start & 0xC0) == 0x80)
        start++;
    return start;
}

/* The last non-empty line of the output, for error messages (into buf). */
static const char *s_last_line(char *buf, size_t size, const char *output)
{
    size_t end = strlen(output);
    while (end > 0 &&
           (output[end - 1] == '\n' || output[end - 1] == ' ' || output[end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start > 0 && output[start - 1] != '\n')
        start--;
    size_t len = end - start < size - 1 ? end - start : size - 1;
    memcpy(buf, output + start, len);
    buf[len] = '\0';
    return buf;
}

/* Whether the tests may use the network: the target branch's [tests] network (never the
 * branch under test's), else the service's; the result says what they got, and a run that
 * cannot be isolated says so loudly. */
static void s_decide_network(test_job_t *job)
{
    run_network_t network = {.config = job->agent->config, .sandbox = job->agent->sandbox,
                             .workspace = job->workspace,
                             .target = specialist_payload_str(job->ctx, "target"),
                             .section = "tests", .result_key = "network", .what = "tests"};
    job->network = run_network_decide(job->ctx, &network);
}

/* Runs the test command once, bounded by the job's deadline. Returns the result (the
 * caller owns it) or NULL when not even a result could be made (memory). */
static testrun_result_t *s_run_tests(test_job_t *job)
{
    int64_t left = job->deadline_ms - clock_now_ms();
    test_suite_options_t options = {
        .command = job->detected.command,
        .dir = test_tree_dir(job->tree),
        .timeout_ms = left > 1 ? left : 1,
        .sandbox = job->agent->sandbox,
        .network = job->network,
    };
    specialist_progressf(job->ctx, "info", "running %s in %s (%s)", job->detected.command,
                         options.dir, test_tree_source(job->tree));
    testrun_result_t *result = NULL;
    test_suite_run(&result, job->ctx, &options);
    if (result != NULL)
        job->tests_ms += result->duration_ms;
    return result;
}

/* The failures as a JSON array (a new reference). testrun keeps them valid UTF-8, and the
 * unchecked string makes sure no failure is ever dropped over its text (json_string()
 * would give NULL for bytes it does not accept). */
static json_t *s_failures_json(const testrun_result_t *result)
{
    json_t *array = json_array();
    for (size_t i = 0; i < result->nfailures; i++)
        json_array_append_new(array, json_string_nocheck(result->failures[i]));
    return array;
}

/* A field of s_report_run() that this run does not give: left out of the first report;
 * in a later one set to null, so nothing of the earlier run stays (the skeleton cannot
 * remove a field). */
static void s_report_absent(test_job_t *job, const char *key)
{
    if (!job->run_reported)
        return;
    json_t *null = json_null();
    specialist_result_json(job->ctx, key, null);
    json_decref(null);
}

/* Sets the result fields that describe a run. The rerun after a fix replaces the first
 * run's report entirely (see s_report_absent()). */
static void s_report_run(test_job_t *job, const testrun_result_t *result)
{
    specialist_ctx_t *ctx = job->ctx;
    specialist_result_str(ctx, "TEST_RESULT", testrun_verdict_name(testrun_verdict(result)));
    const struct {
        const char *key;
        long value;
    } counts[] = {{"TESTS_RUN", result->run},
                  {"TESTS_PASSED", result->passed},
                  {"TESTS_FAILED", result->failed},
                  {"TESTS_SKIPPED", result->skipped}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        if (counts[i].value >= 0)
            specialist_result_int(ctx, counts[i].key, counts[i].value);
        else
            s_report_absent(job, counts[i].key);
    }
    json_t *failures = s_failures_json(result);
    specialist_result_json(ctx, "FAILURES", failures);
    json_decref(failures);
    if (result->failures_truncated)
        specialist_result_bool(ctx, "FAILURES_TRUNCATED", true);
    else
        s_report_absent(job, "FAILURES_TRUNCATED");
    if (result->started)
        specialist_result_int(ctx, "exit_code", result->exit_code);
    else
        s_report_absent(job, "exit_code");
    specialist_result_str(ctx, "output_tail",
                          s_tail(result->output ? result->output : "", TEST_AGENT_OUTPUT_TAIL));
    job->run_reported = true;
}

/* True when the command (or a program it runs) was not there: the shell's exit 127, or a
 * last line saying "not found" / "No such file or directory". Rewrites `last` as what is
 * missing: "pytest: not found". */
static bool s_could_not_run(const test_job_t *job, const testrun_result_t *result, char *last,
                            size_t size)
{
    const char *missing = strstr(last, ": not found");
    bool gone = result->exit_code == 127 || missing != NULL ||
                strstr(last, "No such file or directory") != NULL ||
                strstr(last, "command not found") != NULL;
    if (!gone || result->exit_code == 0)
        return false;
    if (missing != NULL) {
        /* "sh: 1: pytest: not found" -> "pytest: not found" */
        const char *name = missing;
        while (name > last && name[-1] != ' ' && name[-1] != ':')
            name--;
        memmove(last, name, strlen(name) + 1);
    } else if (result->exit_code == 127 && last[0] == '\0') {
        snprintf(last, size, "%.*s: not found", (int)strcspn(job->detected.command, " \t"),
                 job->detected.command);
    }
    return true;
}

/* Why a run gave no verdict, as the task's error. Returns SPECIALIST_FAILED. */
static specialist_outcome_t s_run_error(test_job_t *job, const testrun_result_t *result,
                                        const char *when)
{
    specialist_ctx_t *ctx = job->ctx;
    char last[300];
    s_last_line(last, sizeof last, result->output ? result->output : "");
    if (!result->started) {
        specialist_result_error(ctx, "%scannot run the test command %s: %s", when,
                                job->detected.command, result->error);
    } else if (result->timed_out) {
        specialist_result_error(ctx, "%stest command timed out after %.1f s (killed): %s", when,
                                (double)result->duration_ms / 1000.0, job->detected.command);
    } else if (s_could_not_run(job, result, last, sizeof last)) {
        specialist_result_error(ctx, "%stests could not run: %s (exit %d)", when, last,
                                result->exit_code);
    } else if (result->exit_code < 0) {
        specialist_result_error(ctx, "%stest command killed by signal %d: %s%s%s", when,
                                result->term_signal, job->detected.command, last[0] ? ": " : "",
                                last);
    } else {
        specialist_result_error(ctx,
                                "%stest command exited with code %d without test results: "
                                "%s%s%s",
                                when, result->exit_code, job->detected.command, last[0] ? ": " : "",
                                last);
    }
    return SPECIALIST_FAILED;
}

/* A one-sentence summary of a run for NOTES. */
static void s_note_run(test_job_t *job, const testrun_result_t *result, const char *when)
{
    testrun_verdict_t verdict = testrun_verdict(result);
    if (verdict == TESTRUN_PASS && result->run >= 0)
        s_note(job, "%s%ld tests passed", when, result->passed >= 0 ? result->passed : result->run);
    else if (verdict == TESTRUN_PASS)
        s_note(job, "%sthe test command succeeded (no counts in its output)", when);
    else if (verdict == TESTRUN_FAIL && result->failed >= 0)
        s_note(job, "%s%ld of %ld tests failed", when, result->failed,
               result->run >= 0 ? result->run : result->failed);
    else if (verdict == TESTRUN_FAIL)
        s_note(job, "%sthe tests failed (exit code %d)", when, result->exit_code);
    if (verdict == TESTRUN_FAIL && result->exit_code == 0)
        s_note(job, "%sthe test command exited 0 although its output reports failures", when);
}

/* The agent's own NOTES marker, if its answer has one, into the job's notes. */
static void s_note_agent(test_job_t *job, const agent_outcome_t *outcome)
{
    markers_t *markers = NULL;
    if (markers_parse_all(&markers, outcome->result_text) == 0) {
        const char *notes = markers_get(markers, "NOTES");
        if (notes != NULL && notes[0] != '\0')
            s_note(job, "agent: %s", notes);
    }
    markers_destroy(&markers);
}

/* "TEST_RESULT FAIL: 2 of 3 tests failed", the failures and the output tail (fenced as
 * data), for the prompt's {{test_results}}. Returns a new string (caller frees) or NULL. */
static char *s_results_text(const testrun_result_t *result)
{
    char counts[200] = "";
    if (result->run >= 0)
        snprintf(counts, sizeof counts, " (%ld run, %ld passed, %ld failed)", result->run,
                 result->passed, result->failed);
    size_t size = 256;
    for (size_t i = 0; i < result->nfailures; i++)
        size += strlen(result->failures[i]) + 4;
    char *failures = malloc(size);
    if (failures == NULL)
        return NULL;
    size_t len = 0;
    for (size_t i = 0; i < result->nfailures; i++)
        len += (size_t)snprintf(failures + len, size - len, "- %s\n", result->failures[i]);
    if (result->nfailures == 0)
        len += (size_t)snprintf(failures + len, size - len, "(none named in the output)\n");
    if (result->failures_truncated)
        snprintf(failures + len, size - len, "- (more failures were reported)\n");
    char *fenced =
        template_fence_data("output of the test command (its last part)",
                            s_tail(result->output ? result->output : "", TEST_AGENT_PROMPT_OUTPUT));
    char *text = NULL;
    if (fenced == NULL ||
        asprintf(&text, "TEST_RESULT %s, exit code %d%s.\n\nFailing tests:\n%s\n%s",
                 testrun_verdict_name(testrun_verdict(result)), result->exit_code, counts, failures,
                 fenced) < 0)
        text = NULL;
    free(failures);
    free(fenced);
    return text;
}

/* Renders prompts/test-agent.md for a fix of the failing run into *prompt_p (caller
 * frees). Returns 0 or a FAILURE_* code with the reason. */
static int s_fix_prompt(char **prompt_p, test_job_t *job, const testrun_result_t *result)
{
    *prompt_p = NULL;
    char dir[PATH_MAX];
    int rc = prompt_dir(dir, sizeof dir, job->agent->config, CLOISTER_PROMPTS_DIR);
    if (rc != 0)
        return rc;
    char *results = s_results_text(result);
    char *policy = NULL;
    const char *tree = test_tree_dir(job->tree);
    if (asprintf(&policy,
                 "Fix simple failures (under 5 minutes of work) by editing files under %s "
                 "(use absolute paths: your working directory is elsewhere), then rerun "
                 "`%s` in %s to check. If the fix is not simple, change nothing and explain "
                 "why in NOTES.",
                 tree, job->detected.command, tree) < 0)
        policy = NULL;
    template_vars_t *vars = template_vars_new();
    if (results == NULL || policy == NULL || vars == NULL ||
        template_vars_set(vars, "test_command", job->detected.command) != 0 ||
        template_vars_set(vars, "test_detection", job->detected.reason) != 0 ||
        template_vars_set(vars, "test_results", results) != 0 ||
        template_vars_set(vars, "fix_policy", policy) != 0 ||
        template_vars_set(vars, "workspace", tree) != 0) {
        rc = failure_set(FAILURE_MEMORY, "out of memory building the prompt");
    } else {
        rc = prompt_build(prompt_p, job->agent->config, dir, TEST_AGENT_SPECIALIST,
                          specialist_task(job->ctx)->json, vars);
    }
    template_vars_destroy(&vars);
    free(policy);
    free(results);
    return rc;
}

/* True when an agent process ran during the run (it may have edited the workspace): it
 * gave a result, exited or was killed, or was started again after an earlier attempt.
 * False when none could start (no such command, the specialist stayed busy, ...). */
static bool s_agent_started(const agent_outcome_t *outcome)
{
    return outcome->got_result || outcome->exited || outcome->term_signal != 0 ||
           outcome->attempts > 1;
}

/* Lets the agent try to fix the failing tests in the workspace. Returns true when an
 * attempt was made (the agent ran, whatever it achieved), false when none could be (the
 * reason is in the notes). */
static bool s_attempt_fix(test_job_t *job, const testrun_result_t *result)
{
    int64_t reserve = result->duration_ms * 3 / 2 + TEST_AGENT_RERUN_SLACK_MS;
    int64_t budget = job->deadline_ms - clock_now_ms() - reserve;
    if (budget < TEST_AGENT_MIN_FIX_MS) {
        s_note(job, "no fix attempted: too little of the task's time left");
        return false;
    }
    char *prompt = NULL;
    if (s_fix_prompt(&prompt, job, result) != 0) {
        s_note(job, "no fix attempted: cannot render the prompt: %s", failure_message());
        return false;
    }
    agent_job_settings_t settings;
    if (agent_job_settings_from_config(&settings, job->agent->config, TEST_AGENT_SPECIALIST,
                                       NULL) != 0 ||
        agent_job_settings_add_dir(&settings, test_tree_dir(job->tree)) != 0) {
        s_note(job, "no fix attempted: %s", failure_message());
        free(prompt);
        return false;
    }
    int budget_s = (int)(budget / 1000);
    if (settings.agent.timeout_s == 0 || settings.agent.timeout_s > budget_s)
        settings.agent.timeout_s = budget_s;
    specialist_progressf(job->ctx, "info", "asking the agent to fix %zu failing test(s)",
                         result->nfailures);
    agent_run_t *run = NULL;
    int rc = agent_job_run(&run, job->ctx, &settings, prompt);
    free(prompt);
    if (rc != 0) {
        s_note(job, "no fix attempted: %s", failure_message());
        return false;
    }
    const agent_outcome_t *outcome = agent_run_outcome(run);
    bool started = s_agent_started(outcome);
    if (!started) {
        s_note(job, "no fix attempted: the agent did not start: %s", outcome->error);
    } else {
        if (!outcome->ok)
            s_note(job, "the agent's fix run failed: %s", outcome->error);
        s_note_agent(job, outcome);
    }
    agent_run_destroy(&run);
    return started;
}

/* A fix made in a worktree does not reach the user's checkout: its patch goes in the
 * result (FIX_PATCH), for the user or the next agent to apply. Returns true when there is
 * one. */
static bool s_report_fix_patch(test_job_t *job)
{
    char *patch = test_tree_changes(job->tree, TEST_AGENT_PATCH_CAP);
    if (patch == NULL)
        return false;
    bool made = patch[0] != '\0';
    if (made) {
        specialist_result_str(job->ctx, "FIX_PATCH", patch);
        s_note(job, "the fix was made in a worktree of the tested commit, not in your checkout: "
                    "its patch is in FIX_PATCH");
    }
    free(patch);
    return made;
}

/* The run after a fix of a tested commit. The fix is not a commit, so that commit's
 * verdict stays the first run's: a PASS would let the unfixed commit through (a pipeline
 * chains its merge). What the fix did goes beside it: FIX_TEST_RESULT, and fix_available
 * when the tests passed with the patch (FIX_PATCH). A fix counts once it is committed
 * and that commit is tested. */
static void s_report_uncommitted_fix(test_job_t *job, const testrun_result_t *after,
                                     bool patched)
{
    testrun_verdict_t verdict = testrun_verdict(after);
    specialist_result_str(job->ctx, "FIX_TEST_RESULT", testrun_verdict_name(verdict));
    specialist_result_bool(job->ctx, "fix_available", verdict == TESTRUN_PASS && patched);
    if (verdict == TESTRUN_ERROR)
        s_note(job, "after the fix the tests could not run: %s",
               after->error[0] ? after->error : "no verdict");
    else
        s_note_run(job, after, "with the fix (not committed: the verdict stays the commit's): ");
    if (verdict == TESTRUN_PASS)
        s_note(job, "commit the fix (FIX_PATCH) and test that commit for a PASS");
}

/* A passing run of a pipeline task (chained by a review, payload.pipeline) hands the
 * change on when [pipeline] after_test = "merge": the merge of the tested commit, chained
 * when the review mode that holds for the target branch is yolo; in normal and strict mode
 * it waits for `pan approve` (see pipeline.h). The mode is read from configuration (the
 * target branch's .cloister/config.toml, else [review] mode), never from the payload,
 * which its submitter wrote; the broker's gate checks the merge again. */
static void s_chain_merge(test_job_t *job)
{
    const specialist_task_t *task = specialist_task(job->ctx);
    const json_t *pipeline = json_object_get(task->payload_json, "pipeline");
    if (!json_is_object(pipeline) || pipeline_after_test(job->agent->config) != PIPELINE_MERGE)
        return;
    const char *review = json_string_value(json_object_get(pipeline, "review"));
    const char *target = specialist_payload_str(job->ctx, "target");
    target = target && target[0] ? target : "main";
    char mode[16];
    if (repository_review_mode(job->agent->config, job->workspace, target, mode, sizeof mode) != 0)
        s_note(job, "%s", failure_message());
    if (strcmp(mode, "yolo") != 0) {
        s_note(job, "tests passed: the merge waits for `pan approve %s` (review mode %s)",
               review ? review : task->issue, mode);
        return;
    }
    const char *branch = specialist_payload_str(job->ctx, "branch");
    pipeline_change_t change = {
        .workspace = job->workspace,
        .branch = branch ? branch : "",
        .target = target,
        .commit = test_tree_commit(job->tree),
        .merge_base = specialist_payload_str(job->ctx, "merge_base"),
        .issue = specialist_payload_str(job->ctx, "issueId"),
        .pr_url = specialist_payload_str(job->ctx, "prUrl"),
        .priority = task->priority,
        .source = TEST_AGENT_SPECIALIST,
        .review = review,
        .mode = mode,
        .queue = config_bool(job->agent->config, "merge", "queue", true),
    };
    if (change.branch[0] == '\0' || change.commit[0] == '\0') {
        s_note(job, "tests passed, but there is no branch and commit to merge");
        return;
    }
    json_t *submit = pipeline_merge_task(&change, task->id);
    if (submit == NULL || specialist_result_next(job->ctx, submit) != 0) {
        s_note(job, "could not chain the merge: %s", submit ? failure_message() : "out of memory");
    } else {
        const char *id = json_string_value(json_object_get(submit, "id"));
        specialist_result_str(job->ctx, "merge_task", id);
        s_note(job, "tests passed: merge queued as %s", id);
    }
    json_decref(submit);
}

/* One line in specialists/test-agent/history.jsonl for this job. */
static void s_history(test_job_t *job, const char *verdict, specialist_outcome_t outcome)
{
    const specialist_task_t *task = specialist_task(job->ctx);
    const char *commit = job->tree ? test_tree_commit(job->tree) : "";
    json_t *entry = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:I}", "kind",
                              "job", "task", task->id, "attempt", (json_int_t)task->attempt,
                              "workspace", job->workspace, "commit", commit, "command",
                              job->detected.command, "verdict", verdict,
                              "outcome", outcome == SPECIALIST_DONE ? "done" : "failed",
                              "fix_attempted", job->fix_attempted, "fix_result", job->fix_result,
                              "tests_ms", (json_int_t)job->tests_ms);
    if (entry != NULL && session_history_append(TEST_AGENT_SPECIALIST, entry) != 0)
        log_warn("history: %s", failure_message());
    json_decref(entry);
}

/* The margin kept back from a lease of lease_ms. */
static int64_t s_margin_ms(int64_t lease_ms)
{
    int64_t margin = lease_ms / 10;
    if (margin < TEST_AGENT_MARGIN_MIN_MS)
        margin = TEST_AGENT_MARGIN_MIN_MS;
    if (margin > TEST_AGENT_MARGIN_MAX_MS)
        margin = TEST_AGENT_MARGIN_MAX_MS;
    if (margin > lease_ms / 2)
        margin = lease_ms / 2;
    return margin;
}

specialist_outcome_t test_agent_job(specialist_ctx_t *ctx, void *arg)
{
    const test_agent_t *agent = arg;
    const specialist_task_t *task = specialist_task(ctx);
    test_job_t *job = calloc(1, sizeof *job);
    if (job == NULL) {
        specialist_result_error(ctx, "out of memory");
        return SPECIALIST_RETRY;
    }
    job->ctx = ctx;
    job->agent = agent;
    job->fix_result = "NOT_ATTEMPTED";
    int64_t lease_ms = task->timeout_s * 1000;
    job->deadline_ms = clock_now_ms() + lease_ms - s_margin_ms(lease_ms);

    specialist_outcome_t outcome = SPECIALIST_FAILED;
    const char *verdict = "ERROR";
    testrun_result_t *result = NULL;
    if (s_resolve_workspace(job) != 0) {
        specialist_result_error(ctx, "%s", failure_message());
        goto out;
    }
    if (s_open_tree(job) != 0) {
        specialist_result_error(ctx, "%s", failure_message());
        goto out;
    }
    if (s_read_repo_config(job) != 0) {
        specialist_result_error(ctx, "%s", failure_message());
        goto out;
    }
    if (testdetect_find(&job->detected, test_tree_dir(job->tree), s_configured_command(job)) !=
        0) {
        specialist_result_error(ctx, "%s", failure_message());
        goto out;
    }
    if (job->detected.warning[0] != '\0')
        s_note(job, "%s", job->detected.warning);
    specialist_result_str(ctx, "TEST_COMMAND", job->detected.command);
    specialist_result_str(ctx, "sandbox", sandbox_describe(agent->sandbox));
    s_decide_network(job);
    specialist_result_str(ctx, "runner", testdetect_runner_name(job->detected.runner));
    specialist_result_str(ctx, "detected_by", job->detected.reason);

    result = s_run_tests(job);
    if (result == NULL) {
        specialist_result_error(ctx, "out of memory running the tests");
        goto out;
    }
    if (specialist_cancelled(ctx)) {
        specialist_result_error(ctx, "cancelled while the tests ran");
        goto out;
    }
    s_report_run(job, result);
    testrun_verdict_t first = testrun_verdict(result);
    if (first == TESTRUN_ERROR) {
        outcome = s_run_error(job, result, "");
        goto out;
    }
    s_note_run(job, result, "");
    bool fix_wanted = s_payload_bool(
        task, "fix", config_bool(agent->config, "specialists.test-agent", "fix", false));
    if (first == TESTRUN_FAIL && !fix_wanted)
        s_note(job, "no fix requested");
    if (first == TESTRUN_FAIL && fix_wanted) {
        job->fix_attempted = s_attempt_fix(job, result);
        if (job->fix_attempted) {
            json_t *before = s_failures_json(result);
            specialist_result_json(ctx, "FAILURES_BEFORE_FIX", before);
            json_decref(before);
        }
        /* Checked whether or not the agent started: a cancel may stop it before it does. */
        if (specialist_cancelled(ctx)) {
            if (job->fix_attempted)
                job->fix_result = "FAILED";
            specialist_result_error(ctx, "cancelled during the fix attempt");
            goto out;
        }
    }
    if (job->fix_attempted && test_tree_commit(job->tree)[0] != '\0') {
        testrun_result_t *after = s_run_tests(job);
        if (after == NULL) {
            job->fix_result = "FAILED";
            specialist_result_error(ctx, "out of memory running the tests");
            goto out;
        }
        if (specialist_cancelled(ctx)) {
            job->fix_result = "FAILED";
            testrun_result_destroy(&after);
            specialist_result_error(ctx, "cancelled while the tests ran after the fix");
            goto out;
        }
        job->fix_result = testrun_verdict(after) == TESTRUN_PASS ? "SUCCESS" : "FAILED";
        s_report_uncommitted_fix(job, after, s_report_fix_patch(job));
        testrun_result_destroy(&after);
    } else if (job->fix_attempted) {
        /* Outside git there is no commit: what is tested is the directory as it is. */
        testrun_result_destroy(&result);
        result = s_run_tests(job);
        if (result == NULL) {
            job->fix_result = "FAILED";
            specialist_result_error(ctx, "out of memory running the tests");
            goto out;
        }
        if (specialist_cancelled(ctx)) {
            job->fix_result = "FAILED";
            specialist_result_error(ctx, "cancelled while the tests ran after the fix");
            goto out;
        }
        s_report_run(job, result);
        testrun_verdict_t second = testrun_verdict(result);
        job->fix_result = second == TESTRUN_PASS ? "SUCCESS" : "FAILED";
        s_report_fix_patch(job);
        if (second == TESTRUN_ERROR) {
            outcome = s_run_error(job, result, "after the fix attempt: ");
            goto out;
        }
        s_note_run(job, result, "after the fix: ");
    }
    verdict = testrun_verdict_name(testrun_verdict(result));
    outcome = SPECIALIST_DONE;
    if (testrun_verdict(result) == TESTRUN_PASS)
        s_chain_merge(job);
out:
    if (outcome != SPECIALIST_DONE) {
        verdict = "ERROR";
        specialist_result_str(ctx, "TEST_RESULT", verdict);
    }
    specialist_result_bool(ctx, "FIX_ATTEMPTED", job->fix_attempted);
    specialist_result_str(ctx, "FIX_RESULT", job->fix_result);
    specialist_result_int(ctx, "duration_ms", job->tests_ms);
    if (job->notes[0] != '\0')
        specialist_result_str(ctx, "NOTES", job->notes);
    s_history(job, verdict, outcome);
    testrun_result_destroy(&result);
    test_tree_close(&job->tree);
    config_destroy(&job->repo_config);
    free(job);
    return outcome;
}
