/* No false green: one table, one row per scenario of issue 26, each with the verdict, the
 * gate and the exit code it must give. Every row runs real processes -- the broker,
 * cloister-review / cloister-test / cloister-merge started for the row with its
 * cloister.toml, fake-claude scripted by the row -- through `pan ... --wait --json` (or
 * cloister-mcp), and reads the verdict back from pan's last JSON line, the gate from its
 * first (the review) and the exit code from pan itself. A row may add a check of its own
 * (the commit a check ran on, unique finding ids, counts).
 *
 * `test_verdicts ROW` runs one row. Rows marked "guard" hold a line that the fixes must
 * not move (a docs-only diff's plan skips stay skips, tests that could not run stay an
 * error, the codes that were already right); every other row fails without the fix of
 * its item. */
#include "pan_harness.h"
#include "review_harness.h"

#include <sys/stat.h>

/* What a row runs. */
typedef enum {
    ROW_REVIEW,        /* pan submit review-agent (branch feature, or the row's) --wait */
    ROW_TEST,          /* pan submit test-agent on the row's project --wait */
    ROW_MERGE,         /* pan submit merge-agent --force --wait */
    ROW_TASK_WAIT,     /* pan task wait on a task nobody takes */
    ROW_USAGE,         /* pan submit with --chain and no --wait */
    ROW_UNREACHABLE,   /* pan task wait against a broker that is not there */
    ROW_MCP_RUN_TESTS, /* cloister-mcp's run_tests on the row's project */
} row_kind_t;

typedef struct row row_t;

/* A row's own check of pan's first and last task (NULL when pan printed none). */
typedef void (*row_check_fn)(review_env_t *r, const row_t *row, const json_t *first,
                             const json_t *last);

struct row {
    const char *name; /* the task id, issue and worker suffix */
    const char *item; /* the item of issue 26 it stands for */
    row_kind_t kind;
    const char *services;  /* "review", "test", "merge", "review test" */
    const char *config;    /* more cloister.toml for the row's services, or NULL */
    const char *agent;     /* FAKE_CLAUDE_RESULT (the review's main session), or NULL */
    const char *branch;    /* the reviewed branch (default feature) */
    const char *reviewers; /* "<name>:<file>=<text>;..." scripts for FAKE_CLAUDE_REVIEWER_DIR */
    const char *tests;     /* ROW_TEST / ROW_MCP_RUN_TESTS: what the project's tests print */
    int tests_exit;        /* ... and their exit code */
    bool chain;
    const char *verdict; /* expected "verdict" of pan's last task line */
    const char *gate;    /* expected GATE of the first (a review), or NULL */
    int exit_code;
    row_check_fn check;
};

/* ---- the rows' own checks ---- */

static const json_t *s_result(const json_t *task)
{
    return json_object_get(task, "result");
}

/* The finding titled `title` of a review task, or NULL. */
static const json_t *s_finding(const json_t *task, const char *title)
{
    size_t i;
    const json_t *finding;
    json_array_foreach(json_object_get(s_result(task), "FINDINGS"), i, finding)
    {
        if (strcmp(harness_field(finding, "title"), title) == 0)
            return finding;
    }
    return NULL;
}

/* Item 1: the check ran on the reviewed commit (the feature's head), in the review's own
 * worktree; the agent was given that worktree; the user's checkout stayed on main. */
static void s_check_reviewed_commit(review_env_t *r, const row_t *row, const json_t *first,
                                    const json_t *last)
{
    (void)row;
    (void)last;
    char feature[41];
    testgit_rev(r->repo, "feature", feature);
    const json_t *check = json_array_get(json_object_get(s_result(first), "checks"), 0);
    CHECK_STR(harness_field(check, "verdict"), "PASS");
    CHECK_STR(harness_field(check, "commit"), feature);
    json_t *lines[64];
    int n = review_log(r, lines, 64);
    CHECK(n > 0);
    char tree[700];
    snprintf(tree, sizeof tree, "%s/worktrees/cloister-wt-", r->workdir);
    CHECK(strncmp(review_log_arg(lines[n - 1], "--add-dir"), tree, strlen(tree)) == 0);
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    CHECK_INT(testgit_run(r->repo, "rev-parse", "--abbrev-ref", "HEAD", NULL), 0);
    CHECK_STR(testgit_out(), "main");
}

/* Item 2: the agent's words became a finding, and the result says why. */
static void s_check_changes_requested(review_env_t *r, const row_t *row, const json_t *first,
                                      const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    const json_t *finding = s_finding(first, "the agent requested changes without listing them");
    CHECK(finding != NULL);
    CHECK_STR(harness_field(finding, "severity"), "error");
    CHECK(strstr(harness_field(s_result(first), "verdict_note"), "disagreed") != NULL);
}

static void s_check_security_issue(review_env_t *r, const row_t *row, const json_t *first,
                                   const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    const json_t *finding = s_finding(first, "SQL injection in query()");
    CHECK(finding != NULL);
    CHECK_STR(harness_field(finding, "severity"), "error");
    /* yolo chains the merge of an open gate: none here. */
    CHECK(json_object_get(s_result(first), "merge_task") == NULL);
}

/* Item 3: the stop says why. */
static void s_check_no_reviewer(review_env_t *r, const row_t *row, const json_t *first,
                                const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    CHECK_STR(harness_field(s_result(first), "stop_reason"), "no_reviewer_completed");
    CHECK(s_finding(first, "no domain reviewer completed the review") != NULL);
}

static void s_check_docs_only(review_env_t *r, const row_t *row, const json_t *first,
                              const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    CHECK_INT((int)json_array_size(json_object_get(s_result(first), "skips")), 2);
    CHECK_STR(harness_field(s_result(first), "stop_reason"), "complete");
}

static void s_check_not_converging(review_env_t *r, const row_t *row, const json_t *first,
                                   const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    CHECK_STR(harness_field(s_result(first), "stop_reason"), "not_converging");
    CHECK_INT(harness_int(s_result(first), "rounds"), 3);
    CHECK(s_finding(first, "the review is not converging") != NULL);
}

static bool s_lists(const json_t *ids, const char *id)
{
    size_t i;
    const json_t *x;
    json_array_foreach(ids, i, x)
    {
        if (strcmp(json_string_value(x), id) == 0)
            return true;
    }
    return false;
}

/* Item 4: two findings, two ids; each id in exactly one of must_fix and should_fix. */
static void s_check_unique_ids(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)last;
    const json_t *findings = json_object_get(s_result(first), "FINDINGS");
    const json_t *gate = json_object_get(s_result(first), "merge_gate");
    CHECK_INT((int)json_array_size(findings), 2);
    const char *a = harness_field(json_array_get(findings, 0), "id");
    const char *b = harness_field(json_array_get(findings, 1), "id");
    CHECK(strcmp(a, b) != 0);
    const json_t *must = json_object_get(gate, "must_fix");
    const json_t *should = json_object_get(gate, "should_fix");
    CHECK(s_lists(must, a) != s_lists(should, a));
    CHECK(s_lists(must, b) != s_lists(should, b));
}

/* Item 5 with --chain: the review handed on to the test-agent, whose verdict is pan's. */
static void s_check_chain(review_env_t *r, const row_t *row, const json_t *first,
                          const json_t *last)
{
    (void)r;
    (void)row;
    CHECK_STR(harness_field(first, "specialist"), "review-agent");
    CHECK_STR(harness_field(first, "verdict"), "gate_open");
    CHECK_STR(harness_field(last, "specialist"), "test-agent");
    CHECK_STR(harness_field(s_result(first), "test_task"), harness_field(last, "id"));
}

/* Item 6: the counts a runner-neutral summary gives. */
static void s_check_counts(const json_t *task, long passed, long failed)
{
    CHECK_INT(harness_int(s_result(task), "TESTS_PASSED"), passed);
    CHECK_INT(harness_int(s_result(task), "TESTS_FAILED"), failed);
}

static void s_check_counts_0_1(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)first;
    s_check_counts(last, 0, 1);
}

static void s_check_counts_3_0(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)first;
    s_check_counts(last, 3, 0);
}

static void s_check_counts_1_1(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)first;
    s_check_counts(last, 1, 1);
}

static void s_check_counts_8_2(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)first;
    s_check_counts(last, 8, 2);
}

static void s_check_counts_2_1(review_env_t *r, const row_t *row, const json_t *first,
                               const json_t *last)
{
    (void)r;
    (void)row;
    (void)first;
    s_check_counts(last, 2, 1);
}

/* ---- the table ---- */

#define S_APPROVED                                                                                 \
    "REVIEW_RESULT: APPROVED\nSECURITY_ISSUES: none\nPERFORMANCE_ISSUES: none\n"                   \
    "FINDINGS: none\n"
#define S_SYNTHESIS_DONE "REVIEW_RESULT: APPROVED\nFINDINGS: none\nFOLLOW_UP: none\n"
#define S_PYTEST_FAIL                                                                              \
    "FAILED tests/test_a.py::test_b - assert 1 == 2\n"                                             \
    "==== 1 failed, 2 passed in 0.01s ====\n"

static const row_t s_rows[] = {
    /* 1. Review checks run on the reviewed commit, never the user's checkout (on main). */
    {"check-on-reviewed-commit", "1", ROW_REVIEW, "review",
     "[review]\nchecks = [\"test -f feature.txt\"]\n", S_APPROVED, NULL, NULL, NULL, 0, false,
     "gate_open", "open", 0, s_check_reviewed_commit},
    /* 2. The agent's verdict disagrees with its (absent) findings. */
    {"changes-requested-no-findings", "2", ROW_REVIEW, "review", NULL,
     "REVIEW_RESULT: CHANGES_REQUESTED\nSECURITY_ISSUES: none\nPERFORMANCE_ISSUES: none\n"
     "NOTES: fix it\nFINDINGS: none\n",
     NULL, NULL, NULL, 0, false, "gate_blocked", "blocked", 6, s_check_changes_requested},
    {"security-issue-no-findings", "2", ROW_REVIEW, "review", "[review]\nmode = \"yolo\"\n",
     "REVIEW_RESULT: APPROVED\nSECURITY_ISSUES: SQL injection in query()\n"
     "PERFORMANCE_ISSUES: none\nFINDINGS: none\n",
     NULL, NULL, NULL, 0, false, "gate_blocked", "blocked", 6, s_check_security_issue},
    /* 3. Domain reviewers: nobody completed; a docs-only plan (guard); not converging. */
    {"reviewers-all-failed", "3", ROW_REVIEW, "review",
     "[review]\nreviewers = [\"security\", \"correctness\"]\nreviewer_timeout_s = 1\n",
     S_SYNTHESIS_DONE, NULL, "security:scenario=crash;correctness:scenario=hang", NULL, 0, false,
     "gate_blocked", "blocked", 6, s_check_no_reviewer},
    {"reviewers-docs-only-guard", "3 (guard)", ROW_REVIEW, "review",
     "[review]\nreviewers = [\"correctness\", \"performance\"]\n", S_SYNTHESIS_DONE, "docs-only",
     NULL, NULL, 0, false, "gate_open", "open", 0, s_check_docs_only},
    {"reviewers-not-converging", "3", ROW_REVIEW, "review",
     "[review]\nreviewers = [\"security\"]\nmax_iterations = 5\n",
     "REVIEW_RESULT: COMMENTED\nFINDINGS: none\nFOLLOW_UP:\n- security: anything else?\n", NULL,
     "security:result=FINDINGS:\n- warning: src/db.c:1 concern number {call}\n", NULL, 0, false,
     "gate_blocked", "blocked", 6, s_check_not_converging},
    /* 4. The same title on two lines: two ids, one list each. */
    {"finding-ids-unique", "4", ROW_REVIEW, "review", NULL,
     "REVIEW_RESULT: CHANGES_REQUESTED\nFINDINGS:\n- error: src/db.c:1 unsafe query\n"
     "- warning: src/db.c:7 unsafe query\n",
     NULL, NULL, NULL, 0, false, "gate_blocked", "blocked", 6, s_check_unique_ids},
    /* 5. Exit codes that tell the truth. */
    {"review-blocked-exit", "5", ROW_REVIEW, "review", NULL,
     "REVIEW_RESULT: CHANGES_REQUESTED\nFINDINGS:\n- error: src/db.c:1 SQL injection\n", NULL, NULL,
     NULL, 0, false, "gate_blocked", "blocked", 6, NULL},
    {"tests-failed-exit", "5", ROW_TEST, "test", NULL, NULL, NULL, NULL, S_PYTEST_FAIL, 1, false,
     "tests_failed", NULL, 5, NULL},
    {"merge-failed-exit", "5", ROW_MERGE, "merge", NULL, NULL, NULL, NULL, NULL, 0, false,
     "merge_failed", NULL, 7, NULL},
    {"chain-review-test", "5", ROW_REVIEW, "review test", "[pipeline]\nafter_review = \"test\"\n",
     S_APPROVED, NULL, NULL, NULL, 0, true, "tests_failed", "open", 5, s_check_chain},
    {"mcp-run-tests-verdict", "5", ROW_MCP_RUN_TESTS, "test", NULL, NULL, NULL, NULL, S_PYTEST_FAIL,
     1, false, "tests_failed", NULL, 0, NULL},
    {"task-failed-guard", "5 (guard)", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "make: *** No rule to make target 'test'.  Stop.\n", 2, false, "task_failed", NULL, 1, NULL},
    {"timeout-guard", "5 (guard)", ROW_TASK_WAIT, "", NULL, NULL, NULL, NULL, NULL, 0, false,
     "timeout", NULL, 4, NULL},
    {"usage-guard", "5 (guard)", ROW_USAGE, "", NULL, NULL, NULL, NULL, NULL, 0, false, "usage",
     NULL, 2, NULL},
    {"unreachable-guard", "5 (guard)", ROW_UNREACHABLE, "", NULL, NULL, NULL, NULL, NULL, 0, false,
     "unreachable", NULL, 3, NULL},
    /* 6. What common runners print. */
    {"tests-0-passed-1-failed", "6", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "running the suite\n0 passed, 1 failed\n", 1, false, "tests_failed", NULL, 5,
     s_check_counts_0_1},
    {"tests-3-passed-0-failed", "6", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "3 passed, 0 failed\n", 0, false, "passed", NULL, 0, s_check_counts_3_0},
    {"tests-tap-plan", "6", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "1..2\nok 1 - adds\nnot ok 2 - totals\n", 1, false, "tests_failed", NULL, 5,
     s_check_counts_1_1},
    {"tests-n-tests-m-failures", "6", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "10 tests, 2 failures\n", 1, false, "tests_failed", NULL, 5, s_check_counts_8_2},
    {"tests-mocha-passing-failing", "6", ROW_TEST, "test", NULL, NULL, NULL, NULL,
     "  2 passing (5ms)\n  1 failing\n", 1, false, "tests_failed", NULL, 5, s_check_counts_2_1},
};

/* ---- running a row ---- */

/* Writes the row's reviewer scripts ("<name>:<file>=<text>;...") into a fresh directory
 * and points FAKE_CLAUDE_REVIEWER_DIR at it. */
static void s_reviewer_scripts(review_env_t *r, const row_t *row)
{
    char dir[700];
    snprintf(dir, sizeof dir, "%s/reviewers-%s", r->h->env->dir, row->name);
    CHECK(mkdir(dir, 0755) == 0);
    setenv("FAKE_CLAUDE_REVIEWER_DIR", dir, 1);
    char *spec = strdup(row->reviewers);
    CHECK(spec != NULL);
    for (char *save = NULL, *item = strtok_r(spec, ";", &save); item != NULL;
         item = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(item, ':');
        char *equals = colon ? strchr(colon, '=') : NULL;
        CHECK(colon != NULL && equals != NULL);
        *colon = *equals = '\0';
        char path[800];
        snprintf(path, sizeof path, "%s/%s.%s", dir, item, colon + 1);
        CHECK(testenv_write_file(path, equals + 1) == 0);
    }
    free(spec);
}

/* The row's test project: a Makefile whose test target prints row->tests and exits
 * row->tests_exit. Returns its path (static). */
static const char *s_project(review_env_t *r, const row_t *row)
{
    static char dir[700];
    char path[800], script[4096];
    snprintf(dir, sizeof dir, "%s/project-%s", r->h->env->dir, row->name);
    snprintf(path, sizeof path, "%s/tests.sh", dir);
    snprintf(script, sizeof script, "cat <<'EOF'\n%sEOF\nexit %d\n", row->tests, row->tests_exit);
    CHECK(testenv_write_file(path, script) == 0);
    snprintf(path, sizeof path, "%s/Makefile", dir);
    CHECK(testenv_write_file(path, "test:\n\t@sh tests.sh\n") == 0);
    return dir;
}

/* Starts the row's services (worker ids "<service>-<row>"); their pids into pids. */
static int s_start_services(review_env_t *r, const row_t *row, pid_t *pids)
{
    static const char *const names[][2] = {
        {"review", "cloister-review"}, {"test", "cloister-test"}, {"merge", "cloister-merge"}};
    int n = 0;
    for (size_t i = 0; i < 3; i++) {
        if (strstr(row->services, names[i][0]) == NULL)
            continue;
        char id[200];
        snprintf(id, sizeof id, "%s-%s", names[i][0], row->name);
        pids[n++] = review_start_program(r, names[i][1], id);
    }
    return n;
}

/* Runs cloister-mcp's run_tests on `project`; its structuredContent (caller frees). */
static json_t *s_mcp_run_tests(review_env_t *r, const row_t *row, const char *project)
{
    char input[700], text[2048];
    snprintf(input, sizeof input, "%s/mcp-%s.in", r->h->env->dir, row->name);
    snprintf(text, sizeof text,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
             "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
             "\"name\":\"test_verdicts\",\"version\":\"1\"}}}\n"
             "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
             "\"name\":\"run_tests\",\"arguments\":{\"workspace\":\"%s\",\"timeout_s\":60}}}\n",
             project);
    CHECK(testenv_write_file(input, text) == 0);
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" < \"$1\"", (char *)testenv_bin("cloister-mcp"),
                    input,     NULL};
    static char out[PAN_OUT_SIZE];
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 90000), 0);
    const char *line = strchr(out, '\n');
    CHECK(line != NULL);
    json_t *response = json_loadb(line + 1, strcspn(line + 1, "\n"), 0, NULL);
    CHECK(response != NULL);
    json_t *structured =
        json_incref(json_object_get(json_object_get(response, "result"), "structuredContent"));
    json_decref(response);
    CHECK(structured != NULL);
    return structured;
}

/* Runs pan for the row; its exit code, and stdout in out. */
static int s_run_pan(review_env_t *r, const row_t *row, char *out)
{
    const char *branch = row->branch ? row->branch : "feature";
    switch (row->kind) {
    case ROW_REVIEW:
        return harness_pan(r->h->env, out, "submit", "review-agent", "--workspace", r->repo,
                           "--branch", branch, "--target", "main", "--issue", row->name, "--id",
                           row->name, "--wait", "--wait-timeout", "60", "--json",
                           row->chain ? "--chain" : NULL, NULL);
    case ROW_TEST:
        return harness_pan(r->h->env, out, "submit", "test-agent", "--workspace", s_project(r, row),
                           "--id", row->name, "--max-attempts", "1", "--wait", "--wait-timeout",
                           "60", "--json", NULL);
    case ROW_MERGE:
        /* A target that does not exist: the merge-agent runs and fails. */
        return harness_pan(r->h->env, out, "submit", "merge-agent", "--workspace", r->repo,
                           "--branch", "feature", "--target", "no-such-target", "--issue",
                           row->name, "--id", row->name, "--max-attempts", "1", "--force", "--wait",
                           "--wait-timeout", "60", "--json", NULL);
    case ROW_TASK_WAIT: {
        char cancelled[4096];
        CHECK_INT(harness_pan(r->h->env, out, "submit", "review-agent", "--workspace", r->h->env->dir, "--id", row->name, NULL),
                  0); /* no review-agent runs now: nobody takes it */
        int code = harness_pan(r->h->env, out, "task", "wait", row->name, "--timeout", "1",
                               "--json", NULL);
        /* Out of the way of the rows after it. */
        CHECK_INT(harness_pan(r->h->env, cancelled, "cancel", row->name, NULL), 0);
        return code;
    }
    case ROW_USAGE:
        return harness_pan(r->h->env, out, "submit", "test-agent", "--chain", NULL);
    case ROW_UNREACHABLE: {
        char control[700];
        snprintf(control, sizeof control, "ipc://%s/nobody-here.sock", r->h->env->dir);
        return harness_pan(r->h->env, out, "--control", control, "--timeout-ms", "300", "task",
                           "wait", row->name, NULL);
    }
    case ROW_MCP_RUN_TESTS:
        break;
    }
    CHECK(!"a row kind pan does not run");
    return -1;
}

/* The JSON task lines of pan's stdout: the first and the last (caller frees each). */
static void s_task_lines(const char *out, json_t **first, json_t **last)
{
    *first = *last = NULL;
    for (const char *line = out; *line != '\0';) {
        size_t len = strcspn(line, "\n");
        json_t *task = json_loadb(line, len, 0, NULL);
        if (json_is_object(task)) {
            if (*first == NULL)
                *first = json_incref(task);
            json_decref(*last);
            *last = json_incref(task);
        }
        json_decref(task);
        line += len + (line[len] == '\n');
    }
}

static void s_run_row(review_env_t *r, const row_t *row)
{
    fprintf(stderr, "== row %s (item %s): expect %s, gate %s, exit %d\n", row->name, row->item,
            row->verdict, row->gate ? row->gate : "-", row->exit_code);
    review_clear_fake_env();
    unsetenv("FAKE_CLAUDE_REVIEWER_DIR");
    review_config(r, row->config);
    if (row->agent != NULL)
        setenv("FAKE_CLAUDE_RESULT", row->agent, 1);
    if (row->reviewers != NULL)
        s_reviewer_scripts(r, row);
    pid_t pids[3];
    int npids = s_start_services(r, row, pids);

    json_t *first = NULL, *last = NULL;
    const char *verdict = NULL;
    int code;
    static char out[PAN_OUT_SIZE];
    out[0] = '\0';
    if (row->kind == ROW_MCP_RUN_TESTS) {
        /* The tool's result: the task, and the verdict beside it at the top level. */
        json_t *structured = s_mcp_run_tests(r, row, s_project(r, row));
        last = json_deep_copy(json_object_get(structured, "task"));
        CHECK(last != NULL);
        json_object_set(last, "verdict", json_object_get(structured, "verdict"));
        json_decref(structured);
        verdict = harness_field(last, "verdict");
        code = 0; /* no pan of the test's own: the tool answered */
    } else {
        code = s_run_pan(r, row, out);
        s_task_lines(out, &first, &last);
        if (row->kind == ROW_USAGE || row->kind == ROW_UNREACHABLE)
            verdict = row->exit_code == 2 ? "usage" : "unreachable"; /* no task to print */
        else if (row->kind == ROW_TASK_WAIT)
            verdict = last == NULL ? "timeout" : harness_field(last, "verdict");
        else
            verdict = harness_field(last, "verdict");
    }
    for (int i = 0; i < npids; i++)
        CHECK_INT(review_stop(r, pids[i]), 0);
    if (strcmp(verdict, row->verdict) != 0 || code != row->exit_code)
        fprintf(stderr, "row %s: pan exited %d, printed:\n%s\n", row->name, code, out);
    CHECK_STR(verdict, row->verdict);
    CHECK_INT(code, row->exit_code);
    if (row->gate != NULL)
        CHECK_STR(harness_field(s_result(first), "GATE"), row->gate);
    if (row->check != NULL)
        row->check(r, row, first, last);
    json_decref(first);
    json_decref(last);
    review_clear_fake_env();
    unsetenv("FAKE_CLAUDE_REVIEWER_DIR");
}

/* `test_verdicts [ROW]`: every row, or only the row named. */
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    review_env_t *r = review_env_new("verdicts");
    CHECK(r != NULL);
    /* The feature branch also carries a file the check looks for, and tests that fail
     * (what a chained test run finds); a docs-only branch changes the README alone. The
     * user's checkout is on main throughout. */
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(r->repo, "feature.txt", "only on feature\n", "feature marker");
    testgit_commit(r->repo, "Makefile",
                   "test:\n\t@printf 'FAILED tests/test_a.py::test_b - boom\\n"
                   "==== 1 failed, 2 passed in 0.01s ====\\n'; exit 1\n",
                   "tests");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "-b", "docs-only", "main", NULL), 0);
    testgit_commit(r->repo, "README.md", "# db\n\nQuery rows by name.\n", "docs");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);

    int ran = 0;
    for (size_t i = 0; i < sizeof s_rows / sizeof s_rows[0]; i++) {
        if (only != NULL && strcmp(only, s_rows[i].name) != 0)
            continue;
        s_run_row(r, &s_rows[i]);
        ran++;
    }
    CHECK(ran > 0); /* a misspelt row name runs nothing, which is no pass */
    review_env_destroy(&r);
    return check_exit_code("test_verdicts");
}
