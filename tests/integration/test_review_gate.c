/* The review mode gate of cloister-review, through the real broker and fake-claude:
 * yolo + APPROVED opens the gate and chains exactly one merge-agent task; normal with an
 * error finding blocks it and chains nothing; strict blocks on a warning; disabled
 * approves without running the agent. */
#include "review_harness.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Restarts the service with `mode` and the agent answering `answer`; runs task `id` with
 * `extra` payload members; returns its task.done event (or NULL). */
static json_t *s_review_with(review_env_t *r, const char *mode, const char *answer,
                             const char *id, const char *extra)
{
    char config[200];
    snprintf(config, sizeof config, "[review]\nmode = \"%s\"\n", mode);
    review_config(r, config);
    setenv("FAKE_CLAUDE_RESULT", answer, 1);
    char worker[64];
    snprintf(worker, sizeof worker, "review-%s", id);
    pid_t svc = review_start(r, worker);
    review_submit(r, id, 30, extra);
    json_t *done = harness_wait(r->h, "task.done", id, 15000);
    CHECK(done != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    return done;
}

/* s_review_with() for a review of a pull request. */
static json_t *s_review(review_env_t *r, const char *mode, const char *answer, const char *id)
{
    return s_review_with(r, mode, answer, id, ",\"prUrl\":\"https://example.com/pr/7\"");
}

static void test_yolo_chains_merge_once(review_env_t *r)
{
    json_t *done = s_review(r, "yolo",
                            "Fine.\nREVIEW_RESULT: APPROVED\nFILES_REVIEWED: src/db.c\n"
                            "FINDINGS:\n- warning: src/db.c:1 name the parameter better\n",
                            "g1");
    CHECK(done != NULL);
    const json_t *result = review_result(done);
    CHECK_STR(harness_field(result, "GATE"), "open");
    CHECK_STR(harness_field(result, "approval"), "auto");
    CHECK_STR(harness_field(result, "merge_task"), "merge-g1");
    CHECK_INT(json_array_size(json_object_get(result, "FINDINGS")), 1);
    CHECK_INT(harness_int(result, "warnings"), 1);
    CHECK_STR(json_string_value(json_array_get(json_object_get(result, "FILES_REVIEWED"), 0)),
              "src/db.c");
    json_t *queued = harness_wait(r->h, "task.queued", "merge-g1", 5000);
    CHECK(queued != NULL);
    if (queued != NULL) {
        CHECK_STR(harness_field(queued, "specialist"), "merge-agent");
        CHECK_STR(harness_field(queued, "parent"), "g1");
        CHECK_STR(harness_field(queued, "issue"), "PAN-7");
        /* No serialisation group: the merge-agents' queue orders merges ([merge] queue). */
        CHECK_STR(harness_field(queued, "group"), "");
    }
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g1"), 1);
}

static void test_normal_error_blocks(review_env_t *r)
{
    json_t *done = s_review(r, "normal",
                            "REVIEW_RESULT: CHANGES_REQUESTED\nFILES_REVIEWED: src/db.c\n"
                            "SECURITY_ISSUES: SQL injection in query\n"
                            "FINDINGS:\n- error: src/db.c:1 SQL injection through name\n"
                            "- info: src/db.c consider a prepared statement\n",
                            "g2");
    CHECK(done != NULL);
    const json_t *result = review_result(done);
    CHECK_STR(harness_field(result, "GATE"), "blocked");
    CHECK_STR(harness_field(result, "REVIEW_RESULT"), "CHANGES_REQUESTED");
    CHECK_STR(harness_field(result, "SECURITY_ISSUES"), "SQL injection in query");
    const json_t *first = json_array_get(json_object_get(result, "FINDINGS"), 0);
    CHECK_STR(harness_field(first, "severity"), "error");
    CHECK_STR(harness_field(first, "file"), "src/db.c");
    CHECK_INT(harness_int(first, "line"), 1);
    CHECK_STR(harness_field(first, "message"), "SQL injection through name");
    CHECK_INT(harness_int(result, "errors"), 1);
    CHECK_INT(harness_int(result, "infos"), 1);
    CHECK_STR(harness_field(result, "merge_task"), "");
    /* The single pass has a merge gate too: the error must be fixed, the info is neither. */
    const json_t *gate = json_object_get(result, "merge_gate");
    CHECK_STR(harness_field(gate, "decision"), "block");
    CHECK_STR(json_string_value(json_array_get(json_object_get(gate, "must_fix"), 0)),
              harness_field(first, "id"));
    CHECK_INT((int)json_array_size(json_object_get(gate, "should_fix")), 0);
    CHECK_STR(harness_field(first, "reviewer"), "review-agent");
    CHECK_INT((int)json_array_size(json_object_get(result, "skips")), 0);
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g2"), 0);

    /* `pan task show` renders the findings as a table, one a line, the blocking one said. */
    char out[65536];
    char *show[] = {(char *)testenv_bin("pan"), "task", "show", "g2", NULL};
    CHECK_INT(testenv_run(r->h->env, show, out, sizeof out, 10000), 0);
    if (strstr(out, "FINDINGS (2):") == NULL)
        fprintf(stderr, "pan task show g2:\n%s\n", out);
    CHECK(strstr(out, "    FINDINGS (2):\n") != NULL);
    CHECK(strstr(out, "        error    src/db.c:1  SQL injection through name  [blocks the "
                      "gate]\n") != NULL);
    CHECK(strstr(out, "        info     src/db.c  consider a prepared statement\n") != NULL);
    CHECK(strstr(out, "    GATE: blocked\n") != NULL);
    CHECK(strstr(out, "Attempt:     1 (failed attempts: 0 of 1 allowed)") != NULL);
    CHECK(strstr(out, "{\"severity\"") == NULL); /* not one line of JSON */
}

/* Findings the agent repeats (same file and line, the same words in another case or
 * punctuation) are kept once, at the more severe of their severities, and counted once. */
static void test_duplicate_findings(review_env_t *r)
{
    json_t *done = s_review(r, "normal",
                            "REVIEW_RESULT: CHANGES_REQUESTED\n"
                            "FINDINGS:\n- error: src/db.c:1 SQL injection through name\n"
                            "- info: src/db.c:1 sql injection through `name`!\n"
                            "- warning: src/db.c:2 SQL injection through name\n"
                            "- warning: src/a.c:3 Missing bound check\n"
                            "- error: src/a.c:3 missing bound check.\n",
                            "dup");
    CHECK(done != NULL);
    const json_t *result = review_result(done);
    const json_t *findings = json_object_get(result, "FINDINGS");
    CHECK_INT((int)json_array_size(findings), 3);
    CHECK_INT(harness_int(result, "errors"), 2);
    CHECK_INT(harness_int(result, "warnings"), 1);
    CHECK_INT(harness_int(result, "infos"), 0);
    CHECK_STR(harness_field(json_array_get(findings, 0), "severity"), "error");
    CHECK_INT(harness_int(json_array_get(findings, 1), "line"), 2);
    CHECK_STR(harness_field(json_array_get(findings, 2), "file"), "src/a.c");
    CHECK_STR(harness_field(json_array_get(findings, 2), "severity"), "error");
}

/* Named checks: a lint that fails and a coverage under its threshold are warnings with
 * their output's tail -- in normal mode they do not block the gate. */
static void test_named_checks(review_env_t *r)
{
    review_config(r, "[review]\nmode = \"normal\"\n\n"
                     "[review.checks.lint]\ncommand = \"echo 'style: trailing space'; exit 1\"\n"
                     "kind = \"lint\"\n\n"
                     "[review.checks.cover]\ncommand = \"echo 'TOTAL  100  30  70%'\"\n"
                     "kind = \"coverage\"\nthreshold = 80\n");
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t svc = review_start(r, "review-checks");
    review_submit(r, "nc", 30, NULL);
    json_t *done = harness_wait(r->h, "task.done", "nc", 15000);
    CHECK(done != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    const json_t *result = review_result(done);
    CHECK_STR(harness_field(result, "GATE"), "open");
    CHECK_INT(harness_int(result, "warnings"), 2);
    CHECK_INT(harness_int(result, "errors"), 0);
    const json_t *findings = json_object_get(result, "FINDINGS");
    CHECK_INT((int)json_array_size(findings), 2);
    const json_t *lint = json_array_get(findings, 0);
    CHECK_STR(harness_field(lint, "severity"), "warning");
    CHECK_STR(harness_field(lint, "check"), "lint");
    CHECK(strstr(harness_field(lint, "detail"), "style: trailing space") != NULL);
    const json_t *cover = json_array_get(findings, 1);
    CHECK(strstr(harness_field(cover, "message"),
                 "failed: FAIL (coverage 70.0% is below the threshold 80.0%)") != NULL);
    CHECK(json_is_false(json_object_get(cover, "blocking")));
    const json_t *checks = json_object_get(result, "checks");
    CHECK_INT((int)json_array_size(checks), 2);
    CHECK(json_real_value(json_object_get(json_array_get(checks, 1), "coverage")) == 70.0);
}

/* Runs review `id` of the feature branch (normal mode) with the agent answering `verdict`;
 * its result. */
static const json_t *s_scope_review(review_env_t *r, const char *id, const char *verdict,
                                    const char *extra)
{
    char answer[200];
    snprintf(answer, sizeof answer, "REVIEW_RESULT: %s\nFINDINGS:%s\n", verdict,
             strcmp(verdict, "APPROVED") == 0 ? " none" : "\n- error: src/db.c:1 still wrong");
    json_t *done = s_review_with(r, "normal", answer, id, extra);
    return review_result(done);
}

/* A commit on the feature branch. */
static void s_feature_commit(review_env_t *r, const char *file)
{
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "feature", NULL), 0);
    testgit_commit(r->repo, file, "int more;\n", "more");
    CHECK_INT(testgit_run(r->repo, "checkout", "-q", "main", NULL), 0);
}

/* Incremental review: after a review whose gate opened, the next review of the branch
 * reads only the commits since; "full": true reads it all; a force-push falls back to a
 * full review; a blocked review does not move the mark, so what it saw is read again. */
static void test_incremental_scope(review_env_t *r)
{
    const json_t *first = s_scope_review(r, "inc-1", "APPROVED", NULL);
    CHECK_STR(harness_field(json_object_get(first, "scope"), "mode"), "full");
    char reviewed[41];
    snprintf(reviewed, sizeof reviewed, "%s", harness_field(first, "diff_head"));

    s_feature_commit(r, "src/new.c");
    const json_t *second = s_scope_review(r, "inc-2", "APPROVED", NULL);
    const json_t *scope = json_object_get(second, "scope");
    CHECK_STR(harness_field(scope, "mode"), "incremental");
    CHECK_STR(harness_field(scope, "base"), reviewed);
    CHECK_INT(harness_int(scope, "files"), 1);
    CHECK_STR(json_string_value(json_array_get(json_object_get(second, "files_changed"), 0)),
              "src/new.c");

    const json_t *full = s_scope_review(r, "inc-3", "APPROVED", ",\"full\":true");
    CHECK_STR(harness_field(json_object_get(full, "scope"), "mode"), "full");
    CHECK_INT(harness_int(json_object_get(full, "scope"), "files"), 2);

    /* Force-pushed: the branch starts again from main, without what was reviewed. */
    CHECK_INT(testgit_run(r->repo, "branch", "-f", "feature", "main", NULL), 0);
    s_feature_commit(r, "src/other.c");
    const json_t *forced = s_scope_review(r, "inc-4", "APPROVED", NULL);
    CHECK_STR(harness_field(json_object_get(forced, "scope"), "mode"), "full");
    CHECK(strstr(harness_field(json_object_get(forced, "scope"), "note"), "force-pushed") != NULL);

    /* A blocked review leaves the mark where the last open one put it. */
    s_feature_commit(r, "src/third.c");
    const json_t *blocked = s_scope_review(r, "inc-5", "CHANGES_REQUESTED", NULL);
    CHECK_STR(harness_field(blocked, "GATE"), "blocked");
    CHECK_STR(harness_field(json_object_get(blocked, "scope"), "mode"), "incremental");
    const json_t *again = s_scope_review(r, "inc-6", "APPROVED", NULL);
    CHECK_STR(harness_field(json_object_get(again, "scope"), "mode"), "incremental");
    CHECK_STR(harness_field(json_object_get(again, "scope"), "base"),
              harness_field(json_object_get(blocked, "scope"), "base"));
}

/* Findings across rounds: the same finding (same file and words, another line) keeps its
 * id and is "unresolved", a new one is "new", one fixed since is in resolved_findings. */
static void test_findings_across_rounds(review_env_t *r)
{
    json_t *first = s_review(r, "normal",
                             "REVIEW_RESULT: CHANGES_REQUESTED\nFINDINGS:\n"
                             "- error: src/db.c:1 SQL injection through name\n"
                             "- warning: src/db.c:2 unused variable\n",
                             "round-1");
    CHECK(first != NULL);
    const json_t *before = json_object_get(review_result(first), "FINDINGS");
    CHECK_STR(harness_field(json_array_get(before, 0), "status"), "new");
    char injection[32], unused[32];
    snprintf(injection, sizeof injection, "%s", harness_field(json_array_get(before, 0), "id"));
    snprintf(unused, sizeof unused, "%s", harness_field(json_array_get(before, 1), "id"));
    CHECK(strncmp(injection, "f-", 2) == 0 && strcmp(injection, unused) != 0);

    json_t *second = s_review(r, "normal",
                              "REVIEW_RESULT: CHANGES_REQUESTED\nFINDINGS:\n"
                              "- error: src/db.c:3 sql injection through name!\n"
                              "- info: src/db.c a new note\n",
                              "round-2");
    CHECK(second != NULL);
    const json_t *result = review_result(second);
    const json_t *now = json_object_get(result, "FINDINGS");
    CHECK_STR(harness_field(json_array_get(now, 0), "id"), injection);
    CHECK_STR(harness_field(json_array_get(now, 0), "status"), "unresolved");
    CHECK_STR(harness_field(json_array_get(now, 1), "status"), "new");
    const json_t *resolved = json_object_get(result, "resolved_findings");
    CHECK_INT((int)json_array_size(resolved), 1);
    CHECK_STR(harness_field(json_array_get(resolved, 0), "id"), unused);
}

static void test_strict_warning_blocks(review_env_t *r)
{
    json_t *done = s_review(r, "strict",
                            "REVIEW_RESULT: APPROVED\n"
                            "FINDINGS:\n- warning: src/db.c:1 long line\n",
                            "g3");
    CHECK(done != NULL);
    CHECK_STR(harness_field(review_result(done), "GATE"), "blocked");
    CHECK_STR(harness_field(review_result(done), "approval"), "blocked");
    /* Strict: every finding blocks, an info too. */
    done = s_review(r, "strict", "REVIEW_RESULT: APPROVED\nFINDINGS:\n- info: src/db.c:1 a nit\n",
                    "g3b");
    CHECK(done != NULL);
    CHECK_STR(harness_field(review_result(done), "GATE"), "blocked");
    const json_t *finding = json_array_get(json_object_get(review_result(done), "FINDINGS"), 0);
    CHECK(json_is_true(json_object_get(finding, "blocking")));
}

static void test_disabled_skips_agent(review_env_t *r)
{
    json_t *lines[16];
    int before = review_log(r, lines, 16);
    for (int i = 0; i < before; i++)
        json_decref(lines[i]);
    json_t *done = s_review(r, "disabled", "unused", "g4");
    int after = review_log(r, lines, 16);
    for (int i = 0; i < after; i++)
        json_decref(lines[i]);
    CHECK_INT(after, before);
    CHECK(done != NULL);
    CHECK_STR(harness_field(review_result(done), "REVIEW_RESULT"), "APPROVED");
    CHECK_STR(harness_field(review_result(done), "GATE"), "open");
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g4"), 0);
}

/* The review's merge hand-off from a linked worktree with no branch named: the branch is
 * the one HEAD is on, the group is the repository's (as `pan submit` makes it), and the
 * merge is pinned to the reviewed commit. */
static void test_yolo_from_worktree(review_env_t *r)
{
    char worktree[700], script[1600], feature[41];
    snprintf(worktree, sizeof worktree, "%s/wt-review", r->h->env->dir);
    snprintf(script, sizeof script, "git -C '%s' worktree add -q '%s' feature", r->repo, worktree);
    CHECK(review_sh(r, script));
    testgit_rev(r->repo, "feature", feature);
    review_config(r, "[review]\nmode = \"yolo\"\n");
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t svc = review_start(r, "review-g5");
    char payload[2048];
    snprintf(payload, sizeof payload, "{\"workspace\":\"%s\",\"target\":\"main\"}", worktree);
    harness_submit(r->h, "g5", "review-agent", "normal", 30, 1, payload);
    json_t *done = harness_wait(r->h, "task.done", "g5", 15000);
    CHECK(done != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    CHECK(done != NULL);
    const json_t *result = review_result(done);
    CHECK_STR(harness_field(result, "merge_task"), "merge-g5");
    CHECK_STR(harness_field(result, "diff_head"), feature);
    json_t *queued = harness_wait(r->h, "task.queued", "merge-g5", 5000);
    CHECK(queued != NULL);
    if (queued != NULL) {
        CHECK_STR(harness_field(queued, "group"), ""); /* the merge queue orders it */
        CHECK_STR(harness_field(queued, "title"), "Merge feature into main");
    }
    /* The queued merge's payload, as the broker holds it. */
    char out[16384];
    char *argv[] = {(char *)testenv_bin("pan"), "task", "show", "merge-g5", "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 10000), 0);
    json_t *task = json_loads(out, 0, NULL);
    const json_t *merge_payload = json_object_get(task, "payload");
    CHECK(merge_payload != NULL);
    if (merge_payload != NULL) {
        CHECK_STR(harness_field(merge_payload, "branch"), "feature");
        CHECK_STR(harness_field(merge_payload, "commit"), feature);
    }
    json_decref(task);

    /* Detached HEAD: approved, but there is no branch to merge, so nothing is queued. */
    snprintf(script, sizeof script, "git -C '%s' checkout -q --detach", worktree);
    CHECK(review_sh(r, script));
    review_config(r, "[review]\nmode = \"yolo\"\n");
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    svc = review_start(r, "review-g6");
    snprintf(payload, sizeof payload, "{\"workspace\":\"%s\",\"target\":\"main\"}", worktree);
    harness_submit(r->h, "g6", "review-agent", "normal", 30, 1, payload);
    done = harness_wait(r->h, "task.done", "g6", 15000);
    CHECK(done != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    if (done != NULL) {
        CHECK_STR(harness_field(review_result(done), "GATE"), "open");
        CHECK_STR(harness_field(review_result(done), "approval"), "manual");
        CHECK_STR(harness_field(review_result(done), "merge_task"), "");
    }
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g6"), 0);
}

/* Answers the gate must not open on: findings it can only half read, findings written
 * as marker keys, no findings at all, and the prompt's answer line echoed back. */
static void test_yolo_unreadable_findings_block(review_env_t *r)
{
    static const struct {
        const char *id, *answer;
    } cases[] = {
        {"g7", "REVIEW_RESULT: COMMENTED\nFINDINGS:\n- warning: src/a.c:3 long function\n"
               "  see the style guide\n- error: src/db.c:1 SQL injection\n"},
        {"g8", "- **REVIEW_RESULT:** COMMENTED\n- **FINDINGS:**\n- ERROR: src/db.c:1 SQL injection\n"},
        {"g9", "REVIEW_RESULT: APPROVED\nNOTES: looks fine\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *done = s_review(r, "yolo", cases[i].answer, cases[i].id);
        if (done == NULL)
            continue;
        const json_t *result = review_result(done);
        CHECK_STR(harness_field(result, "GATE"), "blocked");
        CHECK(harness_int(result, "errors") >= 1);
        CHECK_STR(harness_field(result, "merge_task"), "");
    }
    /* The template line echoed back is no verdict: the review fails, nothing is merged. */
    review_config(r, "[review]\nmode = \"yolo\"\n");
    setenv("FAKE_CLAUDE_RESULT",
           "I could not finish.\nREVIEW_RESULT: APPROVED, CHANGES_REQUESTED or COMMENTED\n", 1);
    pid_t svc = review_start(r, "review-g10");
    review_submit(r, "g10", 30, NULL);
    json_t *failed = harness_wait(r->h, "task.failed", "g10", 15000);
    CHECK(failed != NULL);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g7"), 0);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g8"), 0);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g9"), 0);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-g10"), 0);
}

/* `pan approve` of a review queues the merge pinned to the commit the review read. */
static void test_approve_pins_reviewed_commit(review_env_t *r)
{
    char reviewed[41];
    testgit_rev(r->repo, "feature", reviewed);
    json_t *done = s_review(r, "normal", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", "g11");
    CHECK(done != NULL);
    CHECK_STR(harness_field(review_result(done), "diff_head"), reviewed);
    char out[16384];
    char *approve[] = {(char *)testenv_bin("pan"), "approve", "--task", "g11", NULL};
    CHECK_INT(testenv_run(r->h->env, approve, out, sizeof out, 10000), 0);
    char *show[] = {(char *)testenv_bin("pan"), "task", "show", "merge-g11", "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, show, out, sizeof out, 10000), 0);
    json_t *task = json_loads(out, 0, NULL);
    CHECK_STR(harness_field(json_object_get(task, "payload"), "commit"), reviewed);
    CHECK_STR(harness_field(json_object_get(task, "payload"), "branch"), "feature");
    json_decref(task);
}

/* [review] post: the review goes on the pull request through `gh pr review` (argv, body on
 * stdin); a gh that fails leaves the review done, with the reason in the result. */
static void test_post_review(review_env_t *r)
{
    char gh[600], record[600], script[4096], extra[1600];
    snprintf(gh, sizeof gh, "%s/fake-gh", r->h->env->dir);
    snprintf(record, sizeof record, "%s/gh-record", r->h->env->dir);
    snprintf(script, sizeof script,
             "#!/bin/sh\n"
             "if [ -e '%s.fail' ]; then echo 'HTTP 401: Bad credentials' >&2; exit 1; fi\n"
             "printf '%%s\\n' \"$@\" > '%s.args'\ncat > '%s.body'\n",
             record, record, record);
    CHECK(testenv_write_file(gh, script) == 0);
    CHECK(chmod(gh, 0755) == 0);
    snprintf(extra, sizeof extra, "[review]\nmode = \"normal\"\npost = true\ngh_command = \"%s\"\n",
             gh);
    review_config(r, extra);
    setenv("FAKE_CLAUDE_RESULT",
           "REVIEW_RESULT: CHANGES_REQUESTED\nNOTES: one real problem\n"
           "FINDINGS:\n- error: src/db.c:1 SQL injection through name\n",
           1);
    pid_t svc = review_start(r, "review-g12");
    review_submit(r, "g12", 30, ",\"prUrl\":\"https://example.com/pr/7\"");
    json_t *done = harness_wait(r->h, "task.done", "g12", 15000);
    CHECK(done != NULL);
    if (done != NULL)
        CHECK(json_is_true(json_object_get(review_result(done), "posted")));
    char path[700];
    snprintf(path, sizeof path, "%s.args", record);
    char *args = testenv_read_file(path);
    CHECK(args != NULL && strcmp(args, "pr\nreview\nhttps://example.com/pr/7\n--request-changes\n"
                                       "--body-file\n-\n") == 0);
    free(args);
    snprintf(path, sizeof path, "%s.body", record);
    char *body = testenv_read_file(path);
    CHECK(body != NULL && strstr(body, "CHANGES_REQUESTED") && strstr(body, "one real problem") &&
          strstr(body, "`src/db.c:1` SQL injection through name"));
    free(body);

    /* gh fails: the review stands, the result says why it was not posted. */
    snprintf(path, sizeof path, "%s.fail", record);
    CHECK(testenv_write_file(path, "") == 0);
    review_submit(r, "g13", 30, ",\"prUrl\":\"https://example.com/pr/8\"");
    done = harness_wait(r->h, "task.done", "g13", 15000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK(json_is_false(json_object_get(review_result(done), "posted")));
        CHECK(strstr(harness_field(review_result(done), "post_error"),
                     "exited 1: HTTP 401: Bad credentials") != NULL);
        CHECK_STR(harness_field(review_result(done), "REVIEW_RESULT"), "CHANGES_REQUESTED");
    }
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
}

/* Runs review `id` in normal mode with [review] post through the stand-in gh (which
 * records its argv in <record>.args and its stdin in <record>.body); what gh received is
 * left in *args and *body (caller frees both). */
static void s_post_case(review_env_t *r, const char *gh, const char *record, const char *id,
                        const char *answer, const char *pr_url, char **args, char **body)
{
    char extra[1600], payload[600], path[700];
    snprintf(extra, sizeof extra, "[review]\nmode = \"normal\"\npost = true\ngh_command = \"%s\"\n",
             gh);
    review_config(r, extra);
    setenv("FAKE_CLAUDE_RESULT", answer, 1);
    char worker[64];
    snprintf(worker, sizeof worker, "review-%s", id);
    pid_t svc = review_start(r, worker);
    snprintf(payload, sizeof payload, ",\"prUrl\":\"%s\"", pr_url);
    review_submit(r, id, 30, payload);
    json_t *done = harness_wait(r->h, "task.done", id, 15000);
    CHECK(done != NULL);
    if (done != NULL)
        CHECK(json_is_true(json_object_get(review_result(done), "posted")));
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    snprintf(path, sizeof path, "%s.args", record);
    *args = testenv_read_file(path);
    snprintf(path, sizeof path, "%s.body", record);
    *body = testenv_read_file(path);
    CHECK(*args != NULL && *body != NULL);
}

/* What is posted follows the gate, not the agent's verdict; findings with a line go on the
 * diff as inline comments of one review (gh api). */
static void test_post_follows_gate(review_env_t *r)
{
    char gh[600], record[600], script[4096];
    snprintf(gh, sizeof gh, "%s/fake-gh-gate", r->h->env->dir);
    snprintf(record, sizeof record, "%s/gh-gate", r->h->env->dir);
    snprintf(script, sizeof script,
             "#!/bin/sh\nprintf '%%s\\n' \"$@\" > '%s.args'\ncat > '%s.body'\n", record, record);
    CHECK(testenv_write_file(gh, script) == 0);
    CHECK(chmod(gh, 0755) == 0);
    char *args = NULL, *body = NULL;

    /* APPROVED, but an error finding blocks the gate in normal mode: changes requested, the
     * located finding inline, the other one in the body. */
    s_post_case(r, gh, record, "p1",
                "REVIEW_RESULT: APPROVED\nFINDINGS:\n- error: src/db.c:1 SQL injection\n"
                "- warning: the module has no tests\n",
                "https://github.com/acme/shop/pull/42", &args, &body);
    CHECK(args != NULL &&
          strcmp(args, "api\n--method\nPOST\nrepos/acme/shop/pulls/42/reviews\n--input\n-\n") == 0);
    json_t *request = body ? json_loads(body, 0, NULL) : NULL;
    CHECK(request != NULL);
    CHECK_STR(harness_field(request, "event"), "REQUEST_CHANGES");
    const json_t *comments = json_object_get(request, "comments");
    CHECK_INT(json_array_size(comments), 1);
    const json_t *comment = json_array_get(comments, 0);
    CHECK_STR(harness_field(comment, "path"), "src/db.c");
    CHECK_INT(harness_int(comment, "line"), 1);
    CHECK(strstr(harness_field(comment, "body"), "SQL injection") != NULL);
    CHECK(strstr(harness_field(request, "body"), "the module has no tests") != NULL);
    CHECK(strstr(harness_field(request, "body"), "SQL injection") == NULL);
    json_decref(request);
    free(args);
    free(body);

    /* COMMENTED with no findings: the gate is open and clean, so the review approves. */
    s_post_case(r, gh, record, "p2", "REVIEW_RESULT: COMMENTED\nFINDINGS: none\n",
                "https://github.com/acme/shop/pull/43", &args, &body);
    CHECK(args != NULL && strcmp(args, "pr\nreview\nhttps://github.com/acme/shop/pull/43\n"
                                       "--approve\n--body-file\n-\n") == 0);
    free(args);
    free(body);

    /* Open with a finding: a comment, inline. */
    s_post_case(r, gh, record, "p3",
                "REVIEW_RESULT: APPROVED\nFINDINGS:\n- warning: src/db.c:1 name it better\n",
                "https://github.com/acme/shop/pull/44", &args, &body);
    request = body ? json_loads(body, 0, NULL) : NULL;
    CHECK_STR(harness_field(request, "event"), "COMMENT");
    CHECK_INT(json_array_size(json_object_get(request, "comments")), 1);
    json_decref(request);
    free(args);
    free(body);
}

/* Review → test → merge: with [pipeline] after_review = "test", a review whose gate opens
 * chains the test-agent on the reviewed commit; with after_test = "merge", a passing run
 * chains the merge of that commit in yolo mode, and leaves it to `pan approve` in normal. */
static void test_pipeline_chains(review_env_t *r)
{
    char reviewed[41];
    testgit_rev(r->repo, "feature", reviewed);
    static const char *const pipeline =
        "[pipeline]\nafter_review = \"test\"\nafter_test = \"merge\"\n\n"
        "[specialists.test-agent]\ntest_command = \"echo '=== 3 passed in 0.01s ==='\"\n";
    char extra[1024];
    snprintf(extra, sizeof extra, "[review]\nmode = \"yolo\"\n\n%s", pipeline);
    review_config(r, extra);
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFINDINGS: none\n", 1);
    pid_t reviewer = review_start(r, "review-pipe");
    pid_t tester = review_start_program(r, "cloister-test", "tester-pipe");
    review_submit(r, "pipe1", 30, NULL);
    json_t *done = harness_wait(r->h, "task.done", "pipe1", 15000);
    CHECK(done != NULL);
    if (done != NULL) {
        CHECK_STR(harness_field(review_result(done), "test_task"), "test-pipe1");
        CHECK_STR(harness_field(review_result(done), "merge_task"), "");
    }
    json_t *tested = harness_wait(r->h, "task.done", "test-pipe1", 20000);
    CHECK(tested != NULL);
    if (tested != NULL) {
        CHECK_STR(harness_field(tested, "parent"), "pipe1");
        CHECK_STR(harness_field(review_result(tested), "TEST_RESULT"), "PASS");
        CHECK_STR(harness_field(review_result(tested), "TESTED_COMMIT"), reviewed);
        CHECK_STR(harness_field(review_result(tested), "merge_task"), "merge-test-pipe1");
    }
    json_t *queued = harness_wait(r->h, "task.queued", "merge-test-pipe1", 5000);
    CHECK(queued != NULL);
    if (queued != NULL) {
        CHECK_STR(harness_field(queued, "specialist"), "merge-agent");
        CHECK_STR(harness_field(queued, "parent"), "test-pipe1");
        CHECK_STR(harness_field(queued, "group"), ""); /* the merge queue orders it */
    }
    char out[16384];
    char *show[] = {(char *)testenv_bin("pan"), "task", "show", "merge-test-pipe1", "--json", NULL};
    CHECK_INT(testenv_run(r->h->env, show, out, sizeof out, 10000), 0);
    json_t *task = json_loads(out, 0, NULL);
    const json_t *payload = json_object_get(task, "payload");
    CHECK_STR(harness_field(payload, "commit"), reviewed);
    CHECK_STR(harness_field(payload, "branch"), "feature");
    CHECK_STR(harness_field(json_object_get(payload, "pipeline"), "review"), "pipe1");
    json_decref(task);
    CHECK(review_stop(r, reviewer) == 0);
    CHECK(review_stop(r, tester) == 0);

    /* Normal mode: the tests run, the merge waits for a person. */
    snprintf(extra, sizeof extra, "[review]\nmode = \"normal\"\n\n%s", pipeline);
    review_config(r, extra);
    reviewer = review_start(r, "review-pipe2");
    tester = review_start_program(r, "cloister-test", "tester-pipe2");
    review_submit(r, "pipe2", 30, NULL);
    tested = harness_wait(r->h, "task.done", "test-pipe2", 20000);
    CHECK(tested != NULL);
    if (tested != NULL) {
        CHECK_STR(harness_field(review_result(tested), "merge_task"), "");
        CHECK(strstr(harness_field(review_result(tested), "NOTES"), "pan approve pipe2") != NULL);
    }
    harness_pump(r->h, 300);
    CHECK_INT(harness_count(r->h, "task.queued", "merge-test-pipe2"), 0);
    CHECK(review_stop(r, reviewer) == 0);
    CHECK(review_stop(r, tester) == 0);
    review_clear_fake_env();
}

/* pan doctor: a line per check against the running broker, the fake agent and the test's
 * repository; a broken configuration, a missing agent or a missing gh is a ✗ and exit 1. */
static void test_doctor(review_env_t *r)
{
    char out[16384];
    char *argv[] = {"/bin/sh", "-c", "exec \"$0\" doctor --workspace \"$1\" 2>&1",
                    (char *)testenv_bin("pan"), r->repo, NULL};
    review_config(r, NULL);
    setenv("ANTHROPIC_API_KEY", "test-key", 1);
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 20000), 0);
    CHECK(strstr(out, "✓ broker") != NULL);
    CHECK(strstr(out, "✓ agent          claude: `") != NULL && strstr(out, "2.1.330") != NULL);
    CHECK(strstr(out, "✓ agent login    claude: ANTHROPIC_API_KEY is set") != NULL);
    CHECK(strstr(out, "✓ git identity") != NULL);
    CHECK(strstr(out, "✓ workspace") != NULL);
    CHECK(strstr(out, "✓ disk") != NULL);
    CHECK(strstr(out, "✗") == NULL);
    if (strstr(out, "✗") != NULL)
        fprintf(stderr, "%s", out);

    /* Posting on without gh, and the agent gone: each is a ✗ with its remedy. */
    unsetenv("ANTHROPIC_API_KEY");
    char extra[600], path[700];
    snprintf(extra, sizeof extra,
             "[review]\npost = true\ngh_command = \"%s/no-such-gh\"\n", r->h->env->dir);
    review_config(r, extra);
    setenv("CLOISTER_AGENT_COMMAND", "/nonexistent/claude", 1);
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 20000), 1);
    unsetenv("CLOISTER_AGENT_COMMAND");
    CHECK(strstr(out, "✗ agent          claude: `/nonexistent/claude --version` failed: "
                      "cannot execute /nonexistent/claude: No such file or directory — set "
                      "[agent] command (or [specialists.<name>] command), or "
                      "CLOISTER_AGENT_COMMAND") != NULL);
    CHECK(strstr(out, "✗ gh") != NULL);
    CHECK(strstr(out, "✗ agent login") != NULL);

    /* A specialist on another CLI is checked with that CLI's command and login. */
    snprintf(extra, sizeof extra,
             "[specialists.merge-agent]\nagent = \"codex\"\ncommand = \"%s/no-codex\"\n",
             r->h->env->dir);
    review_config(r, extra);
    setenv("ANTHROPIC_API_KEY", "test-key", 1);
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 20000), 1);
    unsetenv("ANTHROPIC_API_KEY");
    CHECK(strstr(out, "✓ agent          claude: `") != NULL &&
          strstr(out, "(for review-agent, test-agent)") != NULL);
    CHECK(strstr(out, "✗ agent          codex: `") != NULL && strstr(out, "/no-codex") != NULL);
    CHECK(strstr(out, "✗ agent login    codex: `") != NULL);

    /* A configuration that does not parse: said, with where, and the rest still checked. */
    snprintf(path, sizeof path, "%s/cloister.toml", r->h->env->home);
    CHECK(testenv_write_file(path, "[review\nmode = 1\n") == 0);
    CHECK_INT(testenv_run(r->h->env, argv, out, sizeof out, 20000), 1);
    CHECK(strstr(out, "✗ configuration  ") != NULL && strstr(out, "cloister.toml:1:") != NULL);
    CHECK(strstr(out, "✓ git identity") != NULL);
    review_config(r, NULL);
}

/* The review mode comes from the target branch's .cloister/config.toml, over the service's:
 * main says strict, so a warning blocks a yolo service's gate; the branch under review
 * saying "disabled" in its own file changes nothing. */
static void test_repo_review_mode(review_env_t *r)
{
    char script[1600];
    snprintf(script, sizeof script,
             "cd '%s' && mkdir -p .cloister && printf '[review]\\nmode = \"strict\"\\n' > "
             ".cloister/config.toml && git add .cloister && git commit -q -m strict && "
             "git checkout -q feature && mkdir -p .cloister && "
             "printf '[review]\\nmode = \"disabled\"\\n' > .cloister/config.toml && "
             "git add .cloister && git commit -q -m 'disable my review' && git checkout -q main",
             r->repo);
    CHECK(review_sh(r, script));
    json_t *done = s_review(r, "yolo",
                            "REVIEW_RESULT: APPROVED\nFINDINGS:\n- warning: src/db.c:1 long line\n",
                            "repo1");
    if (done != NULL) {
        CHECK_STR(harness_field(review_result(done), "review_mode"), "strict");
        CHECK_STR(harness_field(review_result(done), "GATE"), "blocked");
        CHECK_STR(harness_field(review_result(done), "merge_task"), "");
    }
    snprintf(script, sizeof script,
             "cd '%s' && git rm -q -r .cloister && git commit -q -m 'back to the service mode'",
             r->repo);
    CHECK(review_sh(r, script));
}

/* The review-agent on another CLI: [specialists.review-agent] agent picks the adapter, and
 * the review runs through it end to end (its argv, the workspace its way, the verdict). */
static void test_other_clis(review_env_t *r)
{
    const char *const clis[] = {"codex", "gemini"};
    char codex_home[600], auth[700], log[600];
    snprintf(codex_home, sizeof codex_home, "%s/codex-home", r->h->env->dir);
    snprintf(auth, sizeof auth, "%s/auth.json", codex_home);
    mkdir(codex_home, 0700);
    CHECK(testenv_write_file(auth, "{}") == 0);
    setenv("CODEX_HOME", codex_home, 1);
    setenv("GEMINI_API_KEY", "test-key", 1);
    snprintf(log, sizeof log, "%s/other-cli.log", r->h->env->dir);
    const char *answer = "REVIEW_RESULT: APPROVED\nFILES_REVIEWED: src/db.c\nFINDINGS:\n"
                         "- warning: src/db.c:1 name the parameter better\n";
    for (size_t i = 0; i < 2; i++) {
        char extra[900], id[32], program[64], knob[64];
        snprintf(program, sizeof program, "fake-%s", clis[i]);
        snprintf(extra, sizeof extra,
                 "[review]\nmode = \"normal\"\n\n[specialists.review-agent]\nagent = \"%s\"\n"
                 "command = \"%s\"\n",
                 clis[i], testenv_bin(program));
        review_config(r, extra);
        snprintf(knob, sizeof knob, "FAKE_%s_RESULT", i == 0 ? "CODEX" : "GEMINI");
        setenv(knob, answer, 1);
        snprintf(knob, sizeof knob, "FAKE_%s_LOG", i == 0 ? "CODEX" : "GEMINI");
        setenv(knob, log, 1);
        unlink(log);
        snprintf(id, sizeof id, "cli-%s", clis[i]);
        pid_t svc = review_start(r, id);
        review_submit(r, id, 30, NULL);
        json_t *done = harness_wait(r->h, "task.done", id, 15000);
        CHECK(done != NULL);
        CHECK(review_stop(r, svc) == 0);
        const json_t *result = review_result(done);
        CHECK_STR(harness_field(result, "agent_cli"), clis[i]);
        CHECK_STR(harness_field(result, "GATE"), "open");
        CHECK_INT(harness_int(result, "warnings"), 1);
        char *logged = testenv_read_file(log);
        /* The directory passed is the review's worktree of the reviewed commit. */
        char tree[700];
        snprintf(tree, sizeof tree, "%s/worktrees/cloister-wt-", r->workdir);
        CHECK(logged != NULL && strstr(logged, tree) != NULL);
        CHECK(logged != NULL && strstr(logged, i == 0 ? "\"exec\",\"--json\""
                                                      : "\"-o\",\"stream-json\"") != NULL);
        free(logged);
        unsetenv(knob);
        snprintf(knob, sizeof knob, "FAKE_%s_RESULT", i == 0 ? "CODEX" : "GEMINI");
        unsetenv(knob);
    }
    unsetenv("CODEX_HOME");
    unsetenv("GEMINI_API_KEY");
    review_config(r, NULL);
}

static bool s_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* A review-agent stopped past its lease lost its task to a second attempt: when it runs
 * again it must not post its review on the pull request (the second attempt does, once). */
static void test_stale_review_not_posted(review_env_t *r)
{
    char gh[600], calls[600], started[600], go[600], extra[2400], script[1200];
    snprintf(gh, sizeof gh, "%s/fake-gh-stale", r->h->env->dir);
    snprintf(calls, sizeof calls, "%s/gh-calls", r->h->env->dir);
    snprintf(started, sizeof started, "%s/check-started", r->h->env->dir);
    snprintf(go, sizeof go, "%s/check-go", r->h->env->dir);
    snprintf(script, sizeof script, "#!/bin/sh\necho \"$1 $2\" >> '%s'\ncat > /dev/null\n", calls);
    CHECK(testenv_write_file(gh, script) == 0);
    CHECK(chmod(gh, 0755) == 0);
    snprintf(extra, sizeof extra,
             "[tests]\nsandbox = \"none\"\n\n" /* the check sees the test's files */
             "[review]\nmode = \"normal\"\npost = true\ngh_command = \"%s\"\n"
             "checks = [\"touch '%s'; while [ ! -e '%s' ]; do sleep 0.05; done\"]\n",
             gh, started, go);
    review_config(r, extra);
    setenv("FAKE_CLAUDE_RESULT", "REVIEW_RESULT: APPROVED\nFILES_REVIEWED: src/db.c\n", 1);
    pid_t svc = review_start(r, "review-stale");
    char payload[2048];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"feature\",\"target\":\"main\","
             "\"issueId\":\"PAN-7\",\"prUrl\":\"https://example.com/pr/9\"}",
             r->repo);
    harness_submit(r->h, "stale-1", "review-agent", "normal", 120, 3, payload);
    CHECK(testenv_wait_until(s_exists, started, 20000));
    CHECK(kill(svc, SIGSTOP) == 0);
    CHECK(harness_wait(r->h, "worker.lost", NULL, 10000) != NULL);
    CHECK(kill(r->h->broker, SIGTERM) == 0);
    CHECK(testenv_wait(r->h->env, r->h->broker, 10000) == 0);

    /* Its check ends while it is stopped; it runs on with no broker to tell it. */
    unlink(started);
    CHECK(testenv_write_file(go, "") == 0);
    CHECK(kill(svc, SIGCONT) == 0);
    testenv_sleep_ms(1500);
    CHECK(access(calls, F_OK) != 0); /* nothing posted by the stale attempt */

    r->h->broker = testbroker_start(r->h->env, atoi(HARNESS_HB), NULL);
    CHECK(r->h->broker > 0);
    /* Asked of the broker: events published just after its restart may come before this
     * test's subscription is back. */
    char out[65536];
    char *wait[] = {(char *)testenv_bin("pan"), "task", "wait", "stale-1", "--timeout", "40",
                    "--json", NULL};
    /* Exit 6, gate_blocked: the answer lists no FINDINGS, which blocks (and is posted). */
    CHECK_INT(testenv_run(r->h->env, wait, out, sizeof out, 45000), 6);
    json_t *task = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    CHECK(task != NULL);
    CHECK(json_integer_value(json_object_get(task, "attempt")) >= 2);
    CHECK(json_is_true(json_object_get(json_object_get(task, "result"), "posted")));
    json_decref(task);
    char *posted = testenv_read_file(calls);
    CHECK(posted != NULL && strcmp(posted, "pr review\n") == 0); /* once */
    free(posted);
    char path[700];
    snprintf(path, sizeof path, "%s/review-stale.log", r->h->env->dir);
    char *log = testenv_read_file(path);
    /* Stopped by the first fence that saw it: the service's own (its loop did not run for
     * the broker's grace, so it stops the job on waking) or the one before posting. */
    CHECK(log != NULL && (strstr(log, "past the broker's grace") != NULL ||
                          strstr(log, "not posted: stale attempt") != NULL));
    free(log);
    CHECK(review_stop(r, svc) == 0);
    review_clear_fake_env();
    review_config(r, NULL);
}

int main(void)
{
    review_env_t *r = review_env_new("review-gate");
    CHECK(r != NULL);
    if (r != NULL) {
        test_yolo_chains_merge_once(r);
        test_normal_error_blocks(r);
        test_duplicate_findings(r);
        test_named_checks(r);
        test_incremental_scope(r);
        test_findings_across_rounds(r);
        test_strict_warning_blocks(r);
        test_disabled_skips_agent(r);
        test_yolo_from_worktree(r);
        test_yolo_unreadable_findings_block(r);
        test_approve_pins_reviewed_commit(r);
        test_post_review(r);
        test_post_follows_gate(r);
        test_pipeline_chains(r);
        test_doctor(r);
        test_repo_review_mode(r);
        test_other_clis(r);
        test_stale_review_not_posted(r); /* last: it restarts the broker */
    }
    review_env_destroy(&r);
    return check_exit_code("test_review_gate");
}
