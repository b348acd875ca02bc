/* review_job: the review-agent's job (see review_job.h). */
#include "review_job.h"

#include "agent_job.h"
#include "failure.h"
#include "fence.h"
#include "log.h"
#include "markers.h"
#include "pipeline.h"
#include "prompt.h"
#include "repository.h"
#include "run_network.h"
#include "sandbox.h"
#include "review_checks.h"
#include "review_coverage.h"
#include "review_diff.h"
#include "review_loop.h"
#include "review_post.h"
#include "review_scope.h"
#include "review_tree.h"
#include "review_verdict.h"
#include "session.h"
#include "template.h"
#include "testrun.h"

#include <errno.h>
#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What one job gathers on its way; freed by s_job_free(). */
typedef struct {
    specialist_ctx_t *ctx;
    const review_service_t *service;
    const char *workspace;
    review_tree_t *tree; /* the reviewed commit, checked out (review_tree.h) */
    const char *tree_dir; /* where checks and the agent's tools run: the tree's path */
    const char *branch;
    const char *target;
    review_mode_t mode;          /* the service's, or the target branch's own (see below) */
    const char *mode_source;     /* "repository" (the target's own) or "configuration" */
    config_t *repo_config;       /* the target branch's .cloister/config.toml, or NULL */
    review_diff_t *diff;
    char *checks_text;
    json_t *findings; /* array */
    json_t *checks;   /* array */
    review_counts_t counts;
    template_vars_t *vars; /* the review's placeholders */
    agent_job_settings_t settings;
    markers_t *markers;    /* the main session's (last) answer */
    review_loop_outcome_t loop;
    json_t *skips;     /* [{reviewer, reason}] */
    json_t *dismissed; /* [{id, reviewer, title, reason}] */
    json_t *gate;      /* the merge gate (review_gate.h) */
} review_run_t;

static void s_job_free(review_run_t *r)
{
    review_tree_close(&r->tree);
    config_destroy(&r->repo_config);
    review_diff_destroy(&r->diff);
    free(r->checks_text);
    json_decref(r->findings);
    json_decref(r->checks);
    template_vars_destroy(&r->vars);
    markers_destroy(&r->markers);
    review_loop_outcome_free(&r->loop);
    json_decref(r->skips);
    json_decref(r->dismissed);
    json_decref(r->gate);
}

static const char *s_or(const char *value, const char *fallback)
{
    return value != NULL && value[0] != '\0' ? value : fallback;
}

/* The last `max` bytes of text, starting at a line. */
static const char *s_tail(const char *text, size_t max)
{
    size_t len = strlen(text);
    if (len <= max)
        return text;
    const char *start = text + len - max;
    const char *newline = strchr(start, '\n');
    return newline ? newline + 1 : start;
}

/* Whether a check that ran passed; *state says how it went ("PASS", "FAIL (exit code 2)",
 * "FAIL (coverage 71.0% is below the threshold 80.0%)", ...) and *coverage the figure a
 * coverage check printed, else the total of its report (`report_total`, -1 when none), or
 * -1. `report_error` says why its report could not be read ("" when it could, or it has
 * none). */
static bool s_check_passed(const review_check_t *check, const testrun_result_t *result,
                           double report_total, const char *report_error, char *state,
                           size_t size, double *coverage)
{
    *coverage = -1;
    if (!result->started || result->timed_out || result->cancelled) {
        snprintf(state, size, "%s", !result->started  ? "ERROR (could not start)"
                                    : result->timed_out ? "ERROR (timed out)"
                                                        : "ERROR (cancelled)");
        return false;
    }
    if (result->exit_code != 0) {
        snprintf(state, size, "FAIL (exit code %d)", result->exit_code);
        return false;
    }
    if (strcmp(check->kind, "coverage") == 0) {
        if (report_error[0] != '\0') {
            snprintf(state, size, "FAIL (coverage report: %s)", report_error);
            return false;
        }
        *coverage = review_coverage_percent(result->output);
        if (*coverage < 0)
            *coverage = report_total;
        if (*coverage < 0) {
            snprintf(state, size, "FAIL (no coverage figure in its output)");
            return false;
        }
        if (check->threshold >= 0 && *coverage < check->threshold) {
            snprintf(state, size, "FAIL (coverage %.1f%% is below the threshold %.1f%%)",
                     *coverage, check->threshold);
            return false;
        }
    }
    snprintf(state, size, "PASS");
    return true;
}

/* A failed check as a finding of its severity, with the tail of its output. */
static void s_check_finding(review_run_t *r, const review_check_t *check, const char *state,
                            const char *output)
{
    char text[1200];
    snprintf(text, sizeof text, "%s: check `%.400s` failed: %s", check->severity, check->name,
             state);
    json_t *finding = review_finding_parse(text, "check", &r->counts);
    if (finding == NULL)
        return;
    json_object_set_new(finding, "check", json_string(check->name));
    json_t *detail = json_string(s_tail(output, REVIEW_CHECK_OUTPUT_QUOTE));
    if (detail != NULL)
        json_object_set_new(finding, "detail", detail);
    json_array_append_new(r->findings, finding);
}

/* A coverage check's report: read from the reviewed tree (a relative path that stays in
 * it) and held against the diff's added lines. Returns 0 with *coverage filled, or a
 * failure saying why not (missing, outside the tree, not a coverage report). */
static int s_read_report(review_run_t *r, const review_check_t *check,
                         review_diff_coverage_t *coverage)
{
    const char *report = check->report;
    if (report[0] == '/' || strcmp(report, "..") == 0 || strncmp(report, "../", 3) == 0 ||
        strstr(report, "/../") != NULL ||
        (strlen(report) >= 3 && strcmp(report + strlen(report) - 3, "/..") == 0))
        return failure_set(FAILURE_INVALID, "'%s' is not a path inside the repository", report);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", r->tree_dir, report);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return failure_set(FAILURE_NOT_FOUND, "no %s after the check ran", report);
    char *text = NULL;
    size_t len = 0;
    FILE *copy = open_memstream(&text, &len);
    char buf[65536];
    size_t got;
    while (copy != NULL && (got = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, got, copy);
    fclose(f);
    if (copy == NULL || fclose(copy) != 0) {
        free(text);
        return failure_set(FAILURE_MEMORY, "out of memory reading %s", report);
    }
    int rc = review_coverage_of_diff(coverage, text, r->tree_dir, r->diff);
    free(text);
    return rc;
}

/* The diff's added lines no test ran, one finding per file at the check's severity. */
static void s_uncovered_findings(review_run_t *r, const review_check_t *check,
                                 const review_diff_coverage_t *coverage)
{
    for (size_t i = 0; i < coverage->nuncovered; i++) {
        const review_uncovered_t *u = &coverage->uncovered[i];
        char text[1200];
        snprintf(text, sizeof text, "%s: %s:%u %zu added line%s no test runs: %.800s",
                 check->severity, u->path, u->first, u->count, u->count == 1 ? "" : "s",
                 u->ranges);
        json_t *finding = review_finding_parse(text, "check", &r->counts);
        if (finding == NULL)
            continue;
        json_object_set_new(finding, "check", json_string(check->name));
        json_object_set_new(finding, "lines", json_string(u->ranges));
        json_array_append_new(r->findings, finding);
    }
}

/* Runs one check; writes its line (and a failure's output) to f. Returns 0 or
 * FAILURE_MEMORY. */
static int s_run_check(review_run_t *r, const review_check_t *check, int64_t timeout_s, FILE *f)
{
    specialist_progressf(r->ctx, "info", "check %s: %s (on %.12s)", check->name, check->command,
                         r->diff->head);
    char what[200];
    snprintf(what, sizeof what, "check %.150s", check->name);
    run_network_t network = {.config = r->service->config, .sandbox = r->service->sandbox,
                             .workspace = r->workspace, .target = r->target,
                             .section = "review", .result_key = "checks_network",
                             .what = what};
    bool allowed = run_network_decide(r->ctx, &network);
    testrun_options_t options = {
        .command = check->command,
        .dir = r->tree_dir,
        .timeout_ms = timeout_s * 1000,
        .output_cap = 64 * 1024,
        .owner = specialist_testrun_owner(r->ctx), /* a cancel stops the check */
        .sandbox = r->service->sandbox,
        .network = allowed,
    };
    testrun_result_t *result = NULL;
    testrun_run(&result, &options);
    if (result == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory running a check");
    /* A coverage check that ran to its end and names its report: the diff's coverage. */
    review_diff_coverage_t diff_coverage = {.total = -1, .diff = -1};
    char report_error[300] = "";
    bool with_report = strcmp(check->kind, "coverage") == 0 && check->report != NULL &&
                       check->report[0] != '\0' && result->started && !result->timed_out &&
                       !result->cancelled && result->exit_code == 0;
    if (with_report && s_read_report(r, check, &diff_coverage) != 0)
        snprintf(report_error, sizeof report_error, "%s", failure_message());
    char state[400];
    double coverage;
    bool passed = s_check_passed(check, result, diff_coverage.total, report_error, state,
                                 sizeof state, &coverage);
    const char *output = result->started ? result->output : result->error;
    fprintf(f, "- `%s`: %s (%s check, %lld ms, on commit %.12s)\n", check->command, state,
            check->kind, (long long)result->duration_ms, r->diff->head);
    if (with_report && report_error[0] == '\0') {
        if (diff_coverage.diff >= 0)
            fprintf(f, "  coverage %.1f%% in all; %.1f%% of the %zu added lines the report "
                       "instruments (%zu not run by any test)\n",
                    diff_coverage.total, diff_coverage.diff, diff_coverage.diff_lines,
                    diff_coverage.diff_lines - diff_coverage.diff_covered);
        else
            fprintf(f, "  coverage %.1f%% in all; the report instruments none of the added "
                       "lines\n",
                    diff_coverage.total);
        s_uncovered_findings(r, check, &diff_coverage);
    }
    specialist_progressf(r->ctx, "info", "check %s: %s", check->name, state);
    if (!passed) {
        char label[512];
        snprintf(label, sizeof label, "output of the check `%.400s`", check->command);
        char *fenced = template_fence_data(label, s_tail(output, REVIEW_CHECK_OUTPUT_QUOTE));
        if (fenced != NULL)
            fputs(fenced, f);
        free(fenced);
        s_check_finding(r, check, state, output);
    }
    json_t *entry = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:s}", "name", check->name,
                              "command", check->command, "kind", check->kind, "severity",
                              check->severity, "verdict", passed ? "PASS" : "FAIL", "exit_code",
                              result->exit_code, "duration_ms", (json_int_t)result->duration_ms,
                              "commit", r->diff->head);
    if (entry != NULL && coverage >= 0)
        json_object_set_new(entry, "coverage", json_real(coverage));
    if (entry != NULL && with_report && report_error[0] == '\0') {
        json_object_set_new(entry, "diff_coverage",
                            diff_coverage.diff >= 0 ? json_real(diff_coverage.diff) : json_null());
        json_object_set_new(entry, "diff_lines",
                            json_integer((json_int_t)diff_coverage.diff_lines));
        json_object_set_new(entry, "diff_covered",
                            json_integer((json_int_t)diff_coverage.diff_covered));
    }
    review_diff_coverage_clear(&diff_coverage);
    if (entry != NULL)
        json_array_append_new(r->checks, entry);
    testrun_result_destroy(&result);
    return 0;
}

/* Checks the reviewed commit (the diff's head) out in the review's own worktree, under the
 * agent's workdir (review_tree.h): the checks and the agent's tools see that commit, not the
 * user's checkout. Returns 0 or a FAILURE_* code with the reason. */
static int s_open_tree(review_run_t *r)
{
    char worktrees[AGENT_JOB_WORKDIR_SIZE + 16];
    snprintf(worktrees, sizeof worktrees, "%s/worktrees", r->settings.workdir);
    int rc = review_tree_open(&r->tree, r->workspace, r->diff->head, worktrees);
    if (rc != 0) {
        char reason[512]; /* copied: failure_set() must not read the buffer it writes */
        snprintf(reason, sizeof reason, "%s", failure_message());
        return failure_set(rc, "cannot check out the reviewed commit %.12s: %s", r->diff->head,
                           reason);
    }
    r->tree_dir = review_tree_dir(r->tree);
    specialist_progressf(r->ctx, "info", "reviewing commit %.12s, checked out in %s",
                         r->diff->head, r->tree_dir);
    return 0;
}

/* The E2E rule (review_checks.h): with the target branch's globs if it sets them, else the
 * service's; a broken rule is a finding and the result's `e2e` says how it went. */
static void s_e2e_rule(review_run_t *r, FILE *f)
{
    const config_t *config =
        r->repo_config && config_array_len(r->repo_config, "review", "user_facing_paths") > 0
            ? r->repo_config
            : r->service->config;
    review_e2e_t e2e;
    bool broken = review_checks_e2e(config, r->diff->paths, r->diff->nfiles, &e2e);
    if (config_array_len(config, "review", "user_facing_paths") == 0 ||
        config_array_len(config, "review", "e2e_test_paths") == 0)
        return;
    json_t *entry =
        json_pack("{s:I, s:I, s:s}", "user_facing", (json_int_t)e2e.user_facing, "e2e_tests",
                  (json_int_t)e2e.e2e, "verdict", broken ? "FAIL" : "PASS");
    specialist_result_json(r->ctx, "e2e", entry);
    json_decref(entry);
    if (!broken) {
        fprintf(f, "- E2E: %zu user-facing file(s) changed, %zu E2E test file(s) changed\n",
                e2e.user_facing, e2e.e2e);
        return;
    }
    fprintf(f, "- E2E: %zu user-facing file(s) changed (%s ...) and no E2E test: a %s\n",
            e2e.user_facing, e2e.first, e2e.severity);
    char text[1200];
    snprintf(text, sizeof text,
             "%s: %.600s changes user-facing code (%zu file%s under [review] "
             "user_facing_paths) without an E2E test (no file under [review] e2e_test_paths)",
             e2e.severity, e2e.first, e2e.user_facing, e2e.user_facing == 1 ? "" : "s");
    json_t *finding = review_finding_parse(text, "check", &r->counts);
    if (finding != NULL) {
        json_object_set_new(finding, "check", json_string("e2e"));
        json_array_append_new(r->findings, finding);
    }
}

/* Runs the review's checks (review_checks.h); fills r->checks, r->checks_text and the
 * findings of those that failed. */
static int s_run_checks(review_run_t *r)
{
    /* The target branch's own checks replace the service's: a branch cannot drop them. */
    review_check_t checks[REVIEW_CHECKS_MAX];
    const config_t *config = r->repo_config && review_checks_list(r->repo_config, checks) > 0
                                 ? r->repo_config
                                 : r->service->config;
    size_t n = review_checks_list(config, checks);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int64_t default_s =
        config_int(config, "review", "check_timeout_s", REVIEW_DEFAULT_CHECK_TIMEOUT_S);
    int64_t lease_s = specialist_task(r->ctx)->timeout_s;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0 && !specialist_cancelled(r->ctx); i++) {
        int64_t timeout_s = checks[i].timeout_s > 0 ? checks[i].timeout_s : default_s;
        if (lease_s > 0 && lease_s < timeout_s)
            timeout_s = lease_s;
        rc = s_run_check(r, &checks[i], timeout_s, f);
    }
    if (n == 0)
        fputs("(no checks configured)\n", f);
    s_e2e_rule(r, f);
    if (fclose(f) != 0 && rc == 0)
        rc = failure_set(FAILURE_MEMORY, "out of memory");
    if (rc != 0) {
        free(text);
        return rc;
    }
    r->checks_text = text;
    return 0;
}

/* The branch HEAD of `workspace` is on, into buf; FAILURE_NOT_FOUND when HEAD is detached
 * (or unreadable). */
static int s_head_branch(const char *workspace, char *buf, size_t size)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    git_reference *head = NULL;
    int rc = FAILURE_NOT_FOUND;
    if (git_repository_open_ext(&repo, workspace, 0, NULL) == 0 &&
        git_repository_head(&head, repo) == 0 && git_reference_is_branch(head)) {
        snprintf(buf, size, "%s", git_reference_shorthand(head));
        rc = 0;
    }
    git_reference_free(head);
    git_repository_free(repo);
    git_libgit2_shutdown();
    return rc;
}

/* Hands the change on (gate open, see common/specialist/pipeline.h): the merge in yolo mode, or the
 * test-agent, pinned to the reviewed commit, of the branch reviewed (or the one HEAD is
 * on), in the repository's merge group. */
static void s_chain(review_run_t *r)
{
    review_mode_t mode = r->mode;
    pipeline_step_t step = pipeline_after_review(r->service->config);
    if (step == PIPELINE_NONE || (step == PIPELINE_MERGE && mode != REVIEW_MODE_YOLO))
        return;
    const specialist_task_t *task = specialist_task(r->ctx);
    char branch[256];
    const char *source = r->branch;
    if (source[0] == '\0') {
        if (s_head_branch(r->workspace, branch, sizeof branch) != 0) {
            if (step == PIPELINE_MERGE)
                specialist_result_str(r->ctx, "approval", "manual");
            specialist_progressf(r->ctx, "info",
                                 "gate open, but not handing on: %s is on a detached HEAD, "
                                 "so there is no branch to %s (submit it by hand)",
                                 r->workspace, step == PIPELINE_MERGE ? "merge" : "test");
            return;
        }
        source = branch;
    }
    pipeline_change_t change = {
        .workspace = r->workspace,
        .branch = source,
        .target = r->target,
        .commit = r->diff->head,
        .merge_base = r->diff->merge_base,
        .issue = s_or(specialist_payload_str(r->ctx, "issueId"), task->issue),
        .pr_url = specialist_payload_str(r->ctx, "prUrl"),
        .priority = s_or(task->priority, "normal"),
        .source = REVIEW_SPECIALIST,
        .review = task->id,
        .mode = review_mode_name(mode),
        .queue = config_bool(r->service->config, "merge", "queue", true),
    };
    json_t *submit = step == PIPELINE_MERGE ? pipeline_merge_task(&change, task->id)
                                            : pipeline_test_task(&change, task->id);
    const char *what = step == PIPELINE_MERGE ? "merge" : "test run";
    if (submit == NULL || specialist_result_next(r->ctx, submit) != 0) {
        specialist_progressf(r->ctx, "info", "could not chain the %s: %s", what,
                             submit ? failure_message() : "out of memory");
    } else {
        const char *id = json_string_value(json_object_get(submit, "id"));
        specialist_result_str(r->ctx, step == PIPELINE_MERGE ? "merge_task" : "test_task", id);
        specialist_progressf(r->ctx, "info", "gate open (%s mode): %s queued as %s",
                             review_mode_name(mode), what, id);
    }
    json_decref(submit);
}

/* Severity words an agent may have written as a marker key ("- ERROR: src/a.c:1 ...")
 * where a FINDINGS item was meant. */
static const char *const s_severity_keys[] = {"ERROR", "CRITICAL", "HIGH", "WARNING", "INFO", NULL};

/* Turns the agent's FINDINGS (and stray severity keys) into findings. A FINDINGS that is
 * missing, or a list the parser could not read, is itself an error finding: the gate must
 * not open on a review nobody could read. */
static void s_read_findings(review_run_t *r, const char *reviewer)
{
    size_t n = 0;
    const char *const *items = markers_list(r->markers, "FINDINGS", &n);
    for (size_t i = 0; i < n; i++) {
        json_t *finding = review_finding_parse(items[i], "agent", &r->counts);
        if (finding != NULL) {
            json_object_set_new(finding, "reviewer", json_string(reviewer));
            review_findings_add(r->findings, finding, &r->counts);
        }
    }
    for (size_t i = 0; i < markers_count(r->markers); i++) {
        const char *key = markers_key_at(r->markers, i);
        for (size_t k = 0; s_severity_keys[k]; k++) {
            if (strcmp(key, s_severity_keys[k]) != 0)
                continue;
            char text[4096];
            snprintf(text, sizeof text, "%s: %s", key, markers_value_at(r->markers, i));
            json_t *finding = review_finding_parse(text, "agent", &r->counts);
            if (finding != NULL) {
                json_object_set_new(finding, "reviewer", json_string(reviewer));
                review_findings_add(r->findings, finding, &r->counts);
            }
        }
    }
    const char *value = markers_get(r->markers, "FINDINGS");
    if (value == NULL || (value[0] == '\0' && n == 0)) {
        json_t *finding = review_finding_parse(
            value == NULL ? "error: the review has no FINDINGS (it must list them, or say "
                            "`FINDINGS: none`)"
                          : "error: the review's FINDINGS could not be read (one `- severity: "
                            "path:line text` line per finding, or `FINDINGS: none`)",
            "cloister", &r->counts);
        if (finding != NULL)
            json_array_append_new(r->findings, finding);
    }
}

/* The issue the review is for (payload.issueId, else the task's), or NULL. */
static const char *s_issue(const review_run_t *r)
{
    const char *issue = specialist_payload_str(r->ctx, "issueId");
    const specialist_task_t *task = specialist_task(r->ctx);
    return issue != NULL ? issue : task->issue[0] ? task->issue : NULL;
}

/* The commit the last passing review of this issue and branch read, unless the payload
 * asks for a full review ("full": true). */
static bool s_scope_since(const review_run_t *r, char since[REVIEW_SCOPE_COMMIT_SIZE])
{
    const json_t *full = json_object_get(specialist_task(r->ctx)->payload_json, "full");
    return !json_is_true(full) &&
           review_scope_last(s_issue(r), r->workspace, r->branch, since) == 0;
}

/* The result's scope: incremental or full, the commit range, why, how many files. */
static void s_report_scope(review_run_t *r)
{
    const review_diff_t *diff = r->diff;
    json_t *scope = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "mode",
                              diff->incremental ? "incremental" : "full", "base", diff->base,
                              "head", diff->head, "merge_base", diff->merge_base, "note",
                              diff->scope_note, "files", (json_int_t)diff->nfiles);
    if (scope != NULL)
        specialist_result_json(r->ctx, "scope", scope);
    json_decref(scope);
    specialist_progressf(r->ctx, "info", "%s", diff->scope_note);
}

/* A review whose gate opened: the next review of the branch reads only what comes after
 * this commit. (After a blocked one it reads everything since the last that passed, so a
 * finding nobody fixed is seen again.) */
static void s_record_scope(review_run_t *r)
{
    if (review_scope_record(s_issue(r), r->workspace, r->branch, r->diff->head) != 0)
        specialist_progressf(r->ctx, "info", "the next review will be a full one: %s",
                             failure_message());
}

/* Whether `findings` has one with this id. */
static bool s_has_id(const json_t *findings, const char *id)
{
    size_t i;
    json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        const char *other = json_string_value(json_object_get(finding, "id"));
        if (other != NULL && strcmp(other, id) == 0)
            return true;
    }
    return false;
}

/* Findings across rounds: each gets its id (review_findings_identify); one the last review
 * of this issue and branch also had is "unresolved" (with the same id), the others "new";
 * the last review's findings missing now are the result's resolved_findings. The findings
 * are kept for the next round, whatever the gate. */
static void s_track_findings(review_run_t *r)
{
    review_findings_identify(r->findings);
    json_t *before = review_scope_findings(s_issue(r), r->workspace, r->branch);
    size_t i;
    json_t *finding;
    json_array_foreach(r->findings, i, finding)
    {
        const char *id = json_string_value(json_object_get(finding, "id"));
        json_object_set_new(finding, "status",
                            json_string(id && s_has_id(before, id) ? "unresolved" : "new"));
    }
    json_t *resolved = json_array();
    json_array_foreach(before, i, finding)
    {
        const char *id = json_string_value(json_object_get(finding, "id"));
        if (id != NULL && !s_has_id(r->findings, id))
            json_array_append(resolved, finding);
    }
    specialist_result_json(r->ctx, "resolved_findings", resolved);
    if (review_scope_keep_findings(s_issue(r), r->workspace, r->branch, r->findings) != 0)
        specialist_progressf(r->ctx, "info", "the next review cannot tell what was resolved: %s",
                             failure_message());
    json_decref(resolved);
    json_decref(before);
}

/* Posts the review on its pull request when [review] post is on and there is one. */
static void s_post(review_run_t *r, const char *verdict, bool open)
{
    const char *pr_url = specialist_payload_str(r->ctx, "prUrl");
    if (!config_bool(r->service->config, "review", "post", false) || pr_url == NULL ||
        pr_url[0] == '\0')
        return;
    review_post_t post = {
        .gh_command = config_string(r->service->config, "review", "gh_command", "gh"),
        .pr_url = pr_url,
        .workspace = r->workspace,
        .verdict = verdict,
        .gate_open = open,
        .notes = markers_get(r->markers, "NOTES"),
        .findings = r->findings,
    };
    /* A stale attempt (stopped past its lease, the task requeued) must not post what another
     * attempt will post too (fence.h). */
    if (fence_check(r->ctx, r->settings.control_ep, FENCE_DEFAULT_WAIT_MS) != 0) {
        char why[600];
        snprintf(why, sizeof why, "not posted: stale attempt: %s", failure_message());
        specialist_progress(r->ctx, "info", why);
        specialist_result_bool(r->ctx, "posted", false);
        specialist_result_str(r->ctx, "post_error", why);
        log_warn("review: %s", why);
        return;
    }
    review_post_run(r->ctx, &post);
}

/* A list marker as a JSON array of its items. */
static void s_result_list(review_run_t *r, const char *key, const char *result_key)
{
    size_t n = 0;
    const char *const *items = markers_list(r->markers, key, &n);
    json_t *array = json_array();
    for (size_t i = 0; i < n && array != NULL; i++) {
        json_t *item = json_string(items[i]);
        if (item != NULL)
            json_array_append_new(array, item);
    }
    if (array != NULL)
        specialist_result_json(r->ctx, result_key, array);
    json_decref(array);
}

static void s_history(review_run_t *r, const char *verdict, bool open, const char *error)
{
    json_t *entry = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:b, s:i, s:i, s:i, s:s}", "task", specialist_task(r->ctx)->id,
        "workspace", s_or(r->workspace, ""), "mode", review_mode_name(r->mode), "verdict",
        verdict, "gate", open ? "open" : "blocked", "ok", error == NULL, "errors", r->counts.errors,
        "warnings", r->counts.warnings, "infos", r->counts.infos, "error", error ? error : "");
    if (entry != NULL)
        session_history_append(REVIEW_SPECIALIST, entry);
    json_decref(entry);
}

/* Marks each finding `blocking` (true when it alone would block the gate in this mode), so
 * `pan approve` and the broker can name what blocks without knowing the rules. */
static void s_mark_blocking(review_run_t *r)
{
    size_t i;
    json_t *finding;
    json_array_foreach(r->findings, i, finding)
    {
        const char *severity = json_string_value(json_object_get(finding, "severity"));
        json_object_set_new(finding, "blocking",
                            json_boolean(review_finding_blocks(r->mode, severity)));
    }
}

/* The approval an open or blocked gate needs (see review_gate.h). */
static const char *s_approval(review_mode_t mode, bool open)
{
    if (!open)
        return "blocked";
    return mode == REVIEW_MODE_STRICT || mode == REVIEW_MODE_NORMAL ? "manual" : "auto";
}

/* The merge gate from the findings and the mode (review_gate.h), and the fields that say
 * it; returns whether the gate is open. */
static bool s_gate(review_run_t *r, const char *verdict)
{
    review_mode_t mode = r->mode;
    review_findings_identify(r->findings);
    s_mark_blocking(r);
    r->gate = review_merge_gate(mode, r->findings,
                                r->markers ? markers_get(r->markers, "NOTES") : NULL);
    bool open = r->gate != NULL && review_merge_gate_open(r->gate);
    specialist_result_str(r->ctx, "REVIEW_RESULT", verdict);
    specialist_result_str(r->ctx, "GATE", open ? "open" : "blocked");
    specialist_result_str(r->ctx, "approval", s_approval(mode, open));
    specialist_result_str(r->ctx, "review_mode", review_mode_name(mode));
    specialist_result_str(r->ctx, "review_mode_source", r->mode_source);
    specialist_result_json(r->ctx, "FINDINGS", r->findings);
    specialist_result_json(r->ctx, "merge_gate", r->gate);
    specialist_result_json(r->ctx, "skips", r->skips);
    specialist_result_int(r->ctx, "errors", r->counts.errors);
    specialist_result_int(r->ctx, "warnings", r->counts.warnings);
    specialist_result_int(r->ctx, "infos", r->counts.infos);
    specialist_progressf(r->ctx, "info", "review %s: gate %s, %s (%d errors, %d warnings)",
                         verdict, open ? "open" : "blocked",
                         json_string_value(json_object_get(r->gate, "decision")),
                         r->counts.errors, r->counts.warnings);
    return open;
}

/* Fails the job: error text, history line. */
static specialist_outcome_t s_fail(review_run_t *r, specialist_outcome_t outcome, const char *error)
{
    specialist_result_error(r->ctx, "%s", error);
    s_history(r, "", false, error);
    return outcome;
}

/* The review's placeholders (r->vars): diff, checks, review_mode, scope, files_changed. */
static int s_build_vars(review_run_t *r)
{
    template_vars_t *vars = r->vars = template_vars_new();
    char *diff_text = review_diff_render(r->diff);
    json_t *files = json_array();
    int rc = vars && diff_text && files ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; rc == 0 && i < r->diff->nfiles; i++)
        json_array_append_new(files, json_string(r->diff->paths[i]));
    char *joined = NULL;
    if (rc == 0) {
        size_t len = 0;
        FILE *f = open_memstream(&joined, &len);
        for (size_t i = 0; f != NULL && i < r->diff->nfiles; i++)
            fprintf(f, "%s%s", i ? ", " : "", r->diff->paths[i]);
        if (f == NULL || fclose(f) != 0)
            rc = failure_set(FAILURE_MEMORY, "out of memory");
    }
    if (rc == 0 &&
        ((rc = template_vars_set(vars, "diff", diff_text)) != 0 ||
         (rc = template_vars_set(vars, "checks", r->checks_text)) != 0 ||
         (rc = template_vars_set(vars, "review_mode", review_mode_name(r->mode))) != 0 ||
         (rc = template_vars_set(vars, "workspace", r->tree_dir)) != 0 ||
         (rc = template_vars_set(vars, "scope", r->diff->scope_note)) != 0 ||
         (r->diff->nfiles > 0 && (rc = template_vars_set(vars, "files_changed", joined)) != 0)))
        rc = failure_set(rc, "cannot set the prompt variables");
    if (rc == 0)
        specialist_result_json(r->ctx, "files_changed", files);
    free(joined);
    json_decref(files);
    free(diff_text);
    return rc;
}

/* The configured reviewers ([review] reviewers; the target branch's list over the
 * service's) into names (at most max); returns how many. */
static size_t s_reviewers(const review_run_t *r, const char **names, size_t max)
{
    const config_t *config = r->repo_config &&
                                     config_array_len(r->repo_config, "review", "reviewers") > 0
                                 ? r->repo_config
                                 : r->service->config;
    size_t n = 0, len = config_array_len(config, "review", "reviewers");
    for (size_t i = 0; i < len && n < max; i++) {
        const char *name = config_array_string(config, "review", "reviewers", i);
        if (name != NULL)
            names[n++] = name;
    }
    return n;
}

/* The agent phases with domain reviewers (review_loop.h): r->markers is the last
 * synthesis's answer; the loop's fields go in the result. */
static specialist_outcome_t s_review_with_reviewers(review_run_t *r, const char **names,
                                                    size_t n, char *error, size_t size)
{
    const config_t *config = r->service->config;
    review_loop_t loop = {
        .ctx = r->ctx,
        .config = config,
        .prompts_dir = r->service->prompts_dir,
        .workspace = r->workspace,
        .target = r->target,
        .settings = &r->settings,
        .vars = r->vars,
        .reviewers = names,
        .nreviewers = n,
        .paths = (const char *const *)r->diff->paths,
        .npaths = r->diff->nfiles,
        .concurrency = (int)config_int(config, "review", "concurrency", REVIEW_DEFAULT_CONCURRENCY),
        .reviewer_timeout_s = (int)config_int(config, "review", "reviewer_timeout_s",
                                              REVIEW_DEFAULT_REVIEWER_TIMEOUT_S),
        .max_iterations =
            (int)config_int(config, "review", "max_iterations", REVIEW_DEFAULT_MAX_ITERATIONS),
        .stagnation = (int)config_int(config, "review", "stagnation", REVIEW_DEFAULT_STAGNATION),
    };
    specialist_outcome_t outcome =
        review_loop_run(&loop, r->findings, &r->counts, &r->loop, error, size);
    if (r->loop.skips != NULL)
        json_array_extend(r->skips, r->loop.skips);
    if (r->loop.runs != NULL)
        specialist_result_json(r->ctx, "reviewer_runs", r->loop.runs);
    if (outcome != SPECIALIST_DONE)
        return outcome;
    specialist_result_int(r->ctx, "rounds", r->loop.rounds);
    specialist_result_str(r->ctx, "stop_reason", r->loop.stop);
    r->markers = r->loop.answer;
    r->loop.answer = NULL;
    return SPECIALIST_DONE;
}

/* The single-pass review: prompts/review-agent.md in the main session. */
static specialist_outcome_t s_review_single(review_run_t *r, char *error, size_t size)
{
    char *prompt = NULL;
    if (prompt_build(&prompt, r->service->config, r->service->prompts_dir, REVIEW_SPECIALIST,
                     specialist_task(r->ctx)->json, r->vars) != 0) {
        snprintf(error, size, "%s", failure_message());
        return SPECIALIST_FAILED;
    }
    specialist_outcome_t outcome =
        review_loop_main_run(r->ctx, &r->settings, prompt, &r->markers, error, size);
    free(prompt);
    return outcome;
}

/* The target branch's own settings (common/specialist/repository.h): [review] mode and checks there
 * win over the service's. Read from the target's commit (the target resolved as a branch,
 * never a tag), not the branch under review, so a branch cannot soften its own review; the
 * result names that commit and where the mode came from (the broker's gate reads them). No
 * repository, target or file: the service's settings. Returns 0, or -1 with the reason in
 * error (a settings file that does not parse, an ambiguous target). */
static int s_read_repo_config(review_run_t *r, char *error, size_t size)
{
    r->mode_source = "configuration";
    specialist_result_str(r->ctx, "target", r->target);
    if (r->workspace == NULL || r->workspace[0] == '\0')
        return 0;
    char commit[64];
    int rc = repository_branch_resolve(r->workspace, r->target, NULL, 0, commit, sizeof commit);
    if (rc == 0) {
        specialist_result_str(r->ctx, "target_commit", commit);
        rc = repository_config_at(r->workspace, commit, &r->repo_config);
    }
    if (rc == FAILURE_NOT_FOUND)
        return 0;
    if (rc != 0) {
        snprintf(error, size, "the target '%s': %s", r->target, failure_message());
        return -1;
    }
    const char *mode = r->repo_config ? config_string(r->repo_config, "review", "mode", NULL) : NULL;
    if (mode != NULL && review_mode_parse(&r->mode, mode) == 0) {
        r->mode_source = "repository";
        specialist_progressf(r->ctx, "info", "review mode %s, from %s of %s's target branch %s",
                             mode, REPOSITORY_CONFIG_PATH, r->workspace, r->target);
    }
    return 0;
}

specialist_outcome_t review_job(specialist_ctx_t *ctx, void *job_arg)
{
    const review_service_t *service = job_arg;
    review_run_t r = {
        .ctx = ctx,
        .service = service,
        .workspace = specialist_payload_str(ctx, "workspace"),
        .branch = s_or(specialist_payload_str(ctx, "branch"), ""),
        .target = s_or(specialist_payload_str(ctx, "target"), "main"),
        .mode = service->mode,
        .findings = json_array(),
        .checks = json_array(),
        .skips = json_array(),
        .dismissed = json_array(),
    };
    specialist_outcome_t outcome = SPECIALIST_FAILED;
    char error[2048];
    if (r.findings == NULL || r.checks == NULL || r.skips == NULL || r.dismissed == NULL) {
        outcome = s_fail(&r, SPECIALIST_FAILED, "out of memory");
        goto out;
    }
    if (s_read_repo_config(&r, error, sizeof error) != 0) {
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    if (r.mode == REVIEW_MODE_DISABLED) {
        specialist_progress(ctx, "info", "review mode disabled: approved without a review");
        s_gate(&r, "APPROVED");
        s_history(&r, "APPROVED", true, NULL);
        outcome = SPECIALIST_DONE;
        goto out;
    }
    if (r.workspace == NULL || r.workspace[0] == '\0') {
        outcome = s_fail(&r, SPECIALIST_FAILED, "payload.workspace is required");
        goto out;
    }
    /* Absolute, for the agent's --add-dir and the checks' directory. */
    char workspace[PATH_MAX];
    if (realpath(r.workspace, workspace) == NULL) {
        snprintf(error, sizeof error, "workspace %s: %s", r.workspace, strerror(errno));
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    r.workspace = workspace;
    size_t budget = (size_t)config_int(service->config, "review", "diff_budget_chars",
                                       REVIEW_DEFAULT_DIFF_BUDGET);
    char since[REVIEW_SCOPE_COMMIT_SIZE];
    if (!s_scope_since(&r, since))
        since[0] = '\0';
    if (review_diff_compute(&r.diff, r.workspace, r.branch, r.target, since, budget) != 0) {
        snprintf(error, sizeof error, "cannot diff %s against %s: %s", s_or(r.branch, "HEAD"),
                 r.target, failure_message());
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    specialist_progressf(ctx, "info", "diff %.12s..%.12s: %zu files changed", r.diff->base,
                         r.diff->head, r.diff->nfiles);
    specialist_result_str(ctx, "diff_base", r.diff->base);
    specialist_result_str(ctx, "diff_head", r.diff->head);
    specialist_result_str(ctx, "merge_base", r.diff->merge_base);
    s_report_scope(&r);
    if (agent_job_settings_from_config(&r.settings, service->config, REVIEW_SPECIALIST,
                                       service->workdir) != 0) {
        snprintf(error, sizeof error, "cannot run the agent: %s", failure_message());
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    if (s_open_tree(&r) != 0 || s_run_checks(&r) != 0 || s_build_vars(&r) != 0) {
        snprintf(error, sizeof error, "%s", failure_message());
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    specialist_result_json(ctx, "checks", r.checks);
    if (specialist_cancelled(ctx))
        goto out;

    if (agent_job_settings_add_dir(&r.settings, r.tree_dir) != 0) {
        snprintf(error, sizeof error, "cannot run the agent: %s", failure_message());
        outcome = s_fail(&r, SPECIALIST_FAILED, error);
        goto out;
    }
    const char *names[64];
    size_t nreviewers = s_reviewers(&r, names, sizeof names / sizeof names[0]);
    outcome = nreviewers > 0
                  ? s_review_with_reviewers(&r, names, nreviewers, error, sizeof error)
                  : s_review_single(&r, error, sizeof error);
    if (outcome != SPECIALIST_DONE) {
        if (error[0] != '\0') /* else cancelled */
            outcome = s_fail(&r, outcome, error);
        goto out;
    }
    const char *answered_by = nreviewers > 0 ? "synthesis" : REVIEW_SPECIALIST;
    s_read_findings(&r, answered_by);
    review_findings_identify(r.findings);
    review_loop_dismiss(r.markers, r.findings, r.dismissed);
    char note[600];
    if (review_verdict_reconcile(r.markers, answered_by, r.findings, &r.counts, note,
                                 sizeof note)) {
        specialist_result_str(ctx, "verdict_note", note);
        specialist_progressf(ctx, "info", "%s", note);
    }
    review_counts_compute(r.findings, &r.counts);
    specialist_result_json(ctx, "dismissed", r.dismissed);
    const char *verdict = markers_get(r.markers, "REVIEW_RESULT");
    s_track_findings(&r);
    bool open = s_gate(&r, verdict);
    s_result_list(&r, "FILES_REVIEWED", "FILES_REVIEWED");
    const char *const keys[] = {"SECURITY_ISSUES", "PERFORMANCE_ISSUES", "NOTES"};
    for (size_t i = 0; i < 3; i++)
        specialist_result_str(ctx, keys[i], markers_get(r.markers, keys[i]));
    if (open) {
        s_chain(&r);
        s_record_scope(&r);
    }
    s_post(&r, verdict, open);
    s_history(&r, verdict, open, NULL);
    outcome = SPECIALIST_DONE;
out:
    s_job_free(&r);
    return outcome;
}
