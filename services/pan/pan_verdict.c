/* pan_verdict: the line `pan task show` and the waits lead with -- a task's verdict
 * (common/bus/verdict.h) in words, and what to do next (see pan_print_verdict in pan.h). */
#include "pan.h"

#include "verdict.h"

#include <stdio.h>
#include <string.h>

/* Locations named before "and N more". */
#define SHOWN_MAX 3

/* Writes `text` (untrusted) escaped, cut to `max` bytes (a commit: its short form). */
static void s_text(const char *text, size_t max)
{
    char cut[256];
    snprintf(cut, sizeof cut, "%.*s", (int)max, text);
    pan_print_escaped(cut);
}

/* " --option VALUE" when the value is there. */
static void s_flag(const char *option, const char *value)
{
    if (value == NULL || value[0] == '\0')
        return;
    printf(" %s ", option);
    pan_print_escaped(value);
}

/* The command that runs `specialist` again on what the task had: `pan submit S --issue I
 * --workspace W --branch B`. */
static void s_resubmit(const json_t *task, const char *specialist)
{
    const json_t *payload = json_object_get(task, "payload");
    printf("`pan submit %s", specialist);
    s_flag("--issue", pan_json_str(task, "issue", NULL));
    s_flag("--workspace", pan_json_str(payload, "workspace", NULL));
    s_flag("--branch", pan_json_str(payload, "branch", NULL));
    putchar('`');
}

/* True when the finding blocks the gate: as the review marked it, or (a review from before
 * findings were marked) when it is an error. */
static bool s_blocks(const json_t *finding)
{
    const json_t *blocking = json_object_get(finding, "blocking");
    if (json_is_boolean(blocking))
        return json_is_true(blocking);
    return strcmp(pan_json_str(finding, "severity", ""), "error") == 0;
}

/* "gate blocked by 1 error and 2 warnings — fix a.c:12, b.c, then `pan submit ...`". */
static void s_gate_blocked(const json_t *task, const json_t *result)
{
    static const char *const severities[] = {"error", "warning", "info"};
    int64_t counts[3] = {0, 0, 0}, other = 0;
    const json_t *findings = json_object_get(result, "FINDINGS");
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        if (!s_blocks(finding))
            continue;
        const char *severity = pan_json_str(finding, "severity", "");
        size_t k = 0;
        while (k < 3 && strcmp(severity, severities[k]) != 0)
            k++;
        *(k < 3 ? &counts[k] : &other) += 1;
    }
    fputs("gate blocked", stdout);
    bool any = false;
    for (size_t k = 0; k < 3; k++) {
        if (counts[k] == 0)
            continue;
        printf("%s%lld %s%s", any ? " and " : " by ", (long long)counts[k], severities[k],
               pan_plural(counts[k], "", "s"));
        any = true;
    }
    if (other > 0)
        printf("%s%lld other finding%s", any ? " and " : " by ", (long long)other,
               pan_plural(other, "", "s"));
    if (!any && other == 0) {
        /* No finding blocks: the agent's own verdict did. */
        fputs(" (the review's verdict: ", stdout);
        pan_print_escaped(pan_json_str(result, "REVIEW_RESULT", "?"));
        fputs(") — see the notes below, then ", stdout);
        s_resubmit(task, "review-agent");
        return;
    }
    fputs(" — fix ", stdout);
    int64_t shown = 0, blocking = 0;
    json_array_foreach(findings, i, finding)
    {
        if (!s_blocks(finding))
            continue;
        if (blocking++ >= SHOWN_MAX)
            continue;
        const char *file = pan_json_str(finding, "file", "");
        int64_t line = pan_json_int(finding, "line", 0);
        fputs(shown++ ? ", " : "", stdout);
        pan_print_escaped(file[0] ? file : pan_json_str(finding, "message", "?"));
        if (file[0] && line > 0)
            printf(":%lld", (long long)line);
    }
    if (blocking > shown)
        printf(" and %lld more", (long long)(blocking - shown));
    fputs(", then ", stdout);
    s_resubmit(task, "review-agent");
}

/* "tests failed: 2 failing tests (a, b) — fix them, then `pan submit test-agent ...`". */
static void s_tests_failed(const json_t *task, const json_t *result)
{
    const json_t *failures = json_object_get(result, "FAILURES");
    size_t n = json_array_size(failures);
    fputs("tests failed", stdout);
    if (n > 0) {
        printf(": %zu failing test%s%s (", n, pan_plural((int64_t)n, "", "s"),
               json_is_true(json_object_get(result, "FAILURES_TRUNCATED")) ? " or more" : "");
        for (size_t i = 0; i < n && i < SHOWN_MAX; i++) {
            fputs(i ? ", " : "", stdout);
            const char *name = json_string_value(json_array_get(failures, i));
            pan_print_escaped(name != NULL ? name : "?");
        }
        if (n > SHOWN_MAX)
            printf(" and %zu more", n - SHOWN_MAX);
        putchar(')');
    }
    fputs(" — fix them, then ", stdout);
    s_resubmit(task, "test-agent");
}

/* "merged feat into main as 1a2b3c4d5e6f (pushed)", or "(landed locally: nothing pushed)"
 * when there was no remote or push was off. */
static void s_merged(const json_t *result)
{
    fputs("merged", stdout);
    const char *source = pan_json_str(result, "source", "");
    if (source[0]) {
        putchar(' ');
        pan_print_escaped(source);
    }
    const char *target = pan_json_str(result, "target", "");
    if (target[0]) {
        fputs(" into ", stdout);
        pan_print_escaped(target);
    }
    const char *commit = pan_json_str(result, "merge_commit", "");
    if (commit[0]) {
        fputs(" as ", stdout);
        s_text(commit, 12);
    }
    if (json_is_true(json_object_get(result, "pushed")))
        fputs(" (pushed)", stdout);
    else if (strcmp(pan_json_str(result, "landed", ""), "local") == 0)
        fputs(" (landed locally: nothing pushed)", stdout);
}

/* What a task that ended without success says, and how to run it again. */
static void s_failed(const json_t *task, const char *what)
{
    const char *id = pan_json_str(task, "id", "?");
    fputs(what, stdout);
    const char *error = pan_json_str(task, "error", "");
    if (error[0]) {
        fputs(": ", stdout);
        pan_print_escaped(error);
    }
    fputs(" — `pan retry ", stdout);
    pan_print_escaped(id);
    fputs("` runs it again", stdout);
}

/* A task that has not ended: where it is. */
static void s_pending(const json_t *task)
{
    const char *state = pan_json_str(task, "state", "?");
    pan_print_escaped(state);
    if (strcmp(state, "queued") == 0) {
        fputs(" — waiting for a ", stdout);
        pan_print_escaped(pan_json_str(task, "specialist", "?"));
        fputs(" worker", stdout);
    } else if (strcmp(state, "running") == 0) {
        printf(" (attempt %lld", (long long)pan_json_int(task, "attempt", 0));
        const char *worker = pan_json_str(task, "worker", "");
        if (worker[0]) {
            fputs(" on ", stdout);
            pan_print_escaped(worker);
        }
        fputs(") — `pan task wait ", stdout);
        pan_print_escaped(pan_json_str(task, "id", "?"));
        fputs("` waits for its end", stdout);
    }
}

/* " — `pan task wait ID` follows it" for the task a done task handed on to. */
static void s_handed_on(const json_t *result)
{
    const char *next = pan_json_str(result, "merge_task", pan_json_str(result, "test_task", NULL));
    if (next == NULL)
        return;
    fputs(" — handed on to ", stdout);
    pan_print_escaped(next);
    fputs(": `pan task wait ", stdout);
    pan_print_escaped(next);
    putchar('`');
}

/* The colour of a verdict's line: green for what went through, red for what needs a fix,
 * yellow for what has not ended. */
static pan_colour_t s_colour(verdict_t verdict)
{
    switch (verdict) {
    case VERDICT_GATE_BLOCKED:
    case VERDICT_TESTS_FAILED:
    case VERDICT_MERGE_FAILED:
    case VERDICT_TASK_FAILED:
    case VERDICT_TASK_DEAD:
        return PAN_COLOUR_BAD;
    case VERDICT_TASK_CANCELLED:
        return PAN_COLOUR_DIM;
    case VERDICT_TIMEOUT:
        return PAN_COLOUR_WAIT;
    default:
        return PAN_COLOUR_GOOD;
    }
}

void pan_print_verdict(const json_t *task)
{
    const json_t *result = json_object_get(task, "result");
    verdict_t verdict = verdict_of_task(task);
    fputs(pan_colour(stdout, s_colour(verdict)), stdout);
    switch (verdict) {
    case VERDICT_GATE_BLOCKED:
        s_gate_blocked(task, result);
        break;
    case VERDICT_GATE_OPEN:
        fputs("gate open", stdout);
        if (json_object_get(result, "merge_task") != NULL) {
            s_handed_on(result);
        } else {
            const char *issue = pan_json_str(task, "issue", "");
            fputs(" — run `pan approve ", stdout);
            pan_print_escaped(issue[0] ? issue : pan_json_str(task, "id", "?"));
            putchar('`');
        }
        break;
    case VERDICT_PASSED:
        fputs("tests passed", stdout);
        if (pan_json_str(result, "TESTED_COMMIT", NULL) != NULL) {
            fputs(" at ", stdout);
            s_text(pan_json_str(result, "TESTED_COMMIT", ""), 12);
        }
        s_handed_on(result);
        break;
    case VERDICT_TESTS_FAILED:
        s_tests_failed(task, result);
        break;
    case VERDICT_MERGED:
        s_merged(result);
        break;
    case VERDICT_MERGE_FAILED:
        fputs("merge failed (", stdout);
        pan_print_escaped(pan_json_str(result, "MERGE_RESULT", "?"));
        putchar(')');
        s_failed(task, "");
        break;
    case VERDICT_TASK_FAILED:
        s_failed(task, "failed");
        break;
    case VERDICT_TASK_DEAD:
        s_failed(task, "dead: every attempt failed");
        break;
    case VERDICT_TASK_CANCELLED:
        s_failed(task, "cancelled");
        break;
    case VERDICT_TIMEOUT:
        s_pending(task);
        break;
    default:
        fputs("done", stdout);
        s_handed_on(result);
        break;
    }
    fputs(pan_colour_end(stdout), stdout);
    putchar('\n');
}
