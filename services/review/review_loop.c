/* review_loop: the review's agent phases (see review_loop.h). */
#include "review_loop.h"

#include "failure.h"
#include "review_plan.h"
#include "review_reviewers.h"
#include "reviewer_prompt.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_verdicts[] = {"APPROVED", "CHANGES_REQUESTED", "COMMENTED", NULL};

void review_loop_outcome_free(review_loop_outcome_t *out)
{
    markers_destroy(&out->answer);
    json_decref(out->skips);
    json_decref(out->runs);
    out->skips = out->runs = NULL;
}

specialist_outcome_t review_loop_main_run(specialist_ctx_t *ctx,
                                          const agent_job_settings_t *settings,
                                          const char *prompt, markers_t **answer, char *error,
                                          size_t size)
{
    *answer = NULL;
    error[0] = '\0';
    agent_run_t *run = NULL;
    if (agent_job_run(&run, ctx, settings, prompt) != 0) {
        snprintf(error, size, "cannot run the agent: %s", failure_message());
        return SPECIALIST_FAILED;
    }
    const agent_outcome_t *o = agent_run_outcome(run);
    specialist_outcome_t outcome = SPECIALIST_FAILED;
    if (o->cancelled) {
        agent_run_destroy(&run);
        return SPECIALIST_FAILED;
    }
    if (!o->ok) {
        snprintf(error, size, "agent failed: %s", o->error[0] ? o->error : "unknown error");
        bool lock_busy = o->attempts == 0 && o->timed_out;
        agent_run_destroy(&run);
        return lock_busy ? SPECIALIST_RETRY : SPECIALIST_FAILED;
    }
    int rc = markers_parse(answer, o->result_text, "REVIEW_RESULT", NULL);
    if (rc == 0)
        rc = markers_expect(*answer, "REVIEW_RESULT", s_verdicts);
    if (rc != 0)
        snprintf(error, size, "the agent's answer has no valid REVIEW_RESULT: %s",
                 rc == FAILURE_NOT_FOUND ? "REVIEW_RESULT is missing" : failure_message());
    else
        outcome = SPECIALIST_DONE;
    agent_run_destroy(&run);
    return outcome;
}

/* A reviewer's answer: its FINDINGS join `findings` with its name. Returns how many were
 * new, or -1 (with the reason in `reason`) when the answer has no readable FINDINGS. */
static int s_take_answer(const char *name, const char *answer, json_t *findings,
                         review_counts_t *counts, char *reason, size_t size)
{
    markers_t *m = NULL;
    markers_parse(&m, answer, "FINDINGS", NULL);
    size_t n = 0;
    const char *const *items = m ? markers_list(m, "FINDINGS", &n) : NULL;
    const char *value = m ? markers_get(m, "FINDINGS") : NULL;
    if (value == NULL || (value[0] == '\0' && n == 0)) {
        snprintf(reason, size, "its answer has no readable FINDINGS list");
        markers_destroy(&m);
        return -1;
    }
    int added = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *finding = review_finding_parse(items[i], "agent", counts);
        if (finding == NULL)
            continue;
        json_object_set_new(finding, "reviewer", json_string(name));
        added += review_findings_add(findings, finding, counts);
    }
    markers_destroy(&m);
    return added;
}

/* Sets a template variable from printf-style text. */
static int s_setf(template_vars_t *vars, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_setf(template_vars_t *vars, const char *name, const char *fmt, ...)
{
    char *text = NULL;
    va_list args;
    va_start(args, fmt);
    int n = vasprintf(&text, fmt, args);
    va_end(args);
    if (n < 0)
        return failure_set(FAILURE_MEMORY, "out of memory");
    int rc = template_vars_set(vars, name, text);
    free(text);
    return rc;
}

/* One act round: the reviewers `names` (with their `questions`, NULL in the first round)
 * run and their findings join. Returns the number of new findings, or -1 (error set). */
static int s_act(const review_loop_t *loop, int round, const char *const *names,
                 const char *const *questions, size_t n, json_t *findings,
                 review_counts_t *counts, review_loop_outcome_t *out)
{
    char **prompts = calloc(n ? n : 1, sizeof *prompts);
    char **answers = calloc(n ? n : 1, sizeof *answers);
    const char **ran = calloc(n ? n : 1, sizeof *ran);
    int added = 0;
    size_t nran = 0;
    if (prompts == NULL || answers == NULL || ran == NULL)
        added = failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; added == 0 && i < n; i++) {
        char origin[4200];
        int rc = template_vars_set(loop->vars, "reviewer", names[i]);
        if (rc == 0)
            rc = template_vars_set(loop->vars, "question",
                                   questions && questions[i] ? questions[i]
                                                             : "(none: this is your first look)");
        if (rc == 0)
            rc = reviewer_prompt_build(&prompts[nran], origin, sizeof origin, loop->config,
                                       loop->prompts_dir, loop->workspace, loop->target,
                                       names[i], specialist_task(loop->ctx)->json, loop->vars);
        if (rc == FAILURE_MEMORY)
            added = rc;
        else if (rc != 0)
            review_plan_skip(out->skips, names[i], failure_message());
        else
            ran[nran++] = names[i];
    }
    review_act_t act = {
        .ctx = loop->ctx,
        .settings = loop->settings,
        .concurrency = loop->concurrency,
        .timeout_s = loop->reviewer_timeout_s,
        .round = round,
    };
    if (added == 0)
        added = review_reviewers_run(&act, ran, prompts, nran, answers, out->skips, out->runs);
    for (size_t i = 0; added >= 0 && i < nran; i++) {
        char reason[200];
        int more = answers[i] ? s_take_answer(ran[i], answers[i], findings, counts, reason,
                                              sizeof reason)
                              : -1;
        if (more < 0 && answers[i] != NULL)
            review_plan_skip(out->skips, ran[i], reason);
        out->completed += more >= 0;
        if (more > 0)
            added += more;
    }
    for (size_t i = 0; prompts && answers && i < n; i++) {
        free(prompts[i]);
        free(answers[i]);
    }
    free(prompts);
    free(answers);
    free(ran);
    review_findings_identify(findings);
    return added < 0 ? -1 : added;
}

/* The findings so far, one line each with its id and reviewer, for the synthesis. */
static char *s_findings_text(const json_t *findings)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    size_t i;
    const json_t *x;
    json_array_foreach(findings, i, x)
    {
        const char *file = json_string_value(json_object_get(x, "file"));
        json_int_t line = json_integer_value(json_object_get(x, "line"));
        const char *detail = json_string_value(json_object_get(x, "detail"));
        const char *suggestion = json_string_value(json_object_get(x, "suggestion"));
        fprintf(f, "- [%s] (%s) %s: ", json_string_value(json_object_get(x, "id")),
                json_string_value(json_object_get(x, "reviewer")),
                json_string_value(json_object_get(x, "severity")));
        if (file != NULL && file[0] != '\0')
            fprintf(f, line > 0 ? "%s:%lld " : "%s ", file, (long long)line);
        const char *title = json_string_value(json_object_get(x, "title"));
        fputs(title != NULL ? title : "", f);
        if (detail != NULL)
            fprintf(f, " | detail: %.600s", detail);
        if (suggestion != NULL)
            fprintf(f, " | suggestion: %s", suggestion);
        fputc('\n', f);
    }
    if (i == 0)
        fputs("(no findings)\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The "- reviewer: reason" lines of the skips, or "(none)". */
static char *s_skips_text(const json_t *skips)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    size_t i;
    const json_t *skip;
    json_array_foreach(skips, i, skip)
    fprintf(f, "- %s: %s\n", json_string_value(json_object_get(skip, "reviewer")),
            json_string_value(json_object_get(skip, "reason")));
    if (i == 0)
        fputs("(none)\n", f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Renders the synthesis prompt for round `round`. */
static int s_synthesis_prompt(const review_loop_t *loop, int round, const char *const *planned,
                              size_t nplanned, const json_t *findings, const json_t *skips,
                              char **prompt)
{
    char *listed = s_findings_text(findings);
    char *fenced = listed ? template_fence_data("findings of the reviewers", listed) : NULL;
    char *skipped = s_skips_text(skips);
    char names[512] = "";
    for (size_t i = 0; i < nplanned; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 planned[i]);
    int rc = fenced && skipped ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
    if (rc == 0 && ((rc = template_vars_set(loop->vars, "reviewer_findings", fenced)) != 0 ||
                    (rc = template_vars_set(loop->vars, "skips", skipped)) != 0 ||
                    (rc = template_vars_set(loop->vars, "reviewers",
                                            nplanned ? names : "(none)")) != 0 ||
                    (rc = s_setf(loop->vars, "round", "%d", round)) != 0 ||
                    (rc = s_setf(loop->vars, "max_iterations", "%d", loop->max_iterations)) != 0))
        rc = failure_set(rc, "cannot set the synthesis placeholders");
    if (rc == 0)
        rc = reviewer_synthesis_prompt(prompt, loop->config, loop->prompts_dir,
                                       specialist_task(loop->ctx)->json, loop->vars);
    free(listed);
    free(fenced);
    free(skipped);
    return rc;
}

/* Appends Cloister's own error finding "<title>" with `detail` (a fact, never dismissed). */
static void s_block(json_t *findings, review_counts_t *counts, const char *title,
                    const char *detail)
{
    char line[600];
    snprintf(line, sizeof line, "error: %s", title);
    json_t *finding = review_finding_parse(line, "cloister", counts);
    if (finding == NULL)
        return;
    json_object_set_new(finding, "detail", json_string(detail));
    json_array_append_new(findings, finding);
}

/* No reviewer the plan kept answered (each failed, timed out or gave no FINDINGS): the
 * synthesis alone is no review, so the gate is blocked, with the skips as the reason. */
static void s_block_unreviewed(json_t *findings, review_counts_t *counts, const json_t *skips)
{
    char *why = s_skips_text(skips);
    s_block(findings, counts, "no domain reviewer completed the review",
            why ? why : "every planned reviewer failed or timed out");
    free(why);
}

/* The answer's FOLLOW_UP items for planned reviewers: names[i] (pointers into planned) and
 * questions[i] (into the answer); returns how many. */
static size_t s_follow_ups(const review_loop_t *loop, markers_t *answer,
                           const char *const *planned, size_t nplanned, const char **names,
                           char **questions)
{
    size_t n = 0, count = 0;
    const char *const *items = markers_list(answer, "FOLLOW_UP", &n);
    for (size_t i = 0; i < n && count < nplanned; i++) {
        const char *colon = strchr(items[i], ':');
        size_t len = colon ? (size_t)(colon - items[i]) : 0;
        const char *name = NULL;
        for (size_t k = 0; k < nplanned && name == NULL; k++)
            if (len == strlen(planned[k]) && strncmp(items[i], planned[k], len) == 0)
                name = planned[k];
        for (size_t k = 0; k < count && name != NULL; k++)
            if (names[k] == name)
                name = NULL; /* one question a reviewer a round */
        if (name == NULL) {
            specialist_progressf(loop->ctx, "info", "follow-up ignored (no such reviewer "
                                 "planned, or asked twice): %.200s", items[i]);
            continue;
        }
        const char *question = colon + 1;
        while (*question == ' ')
            question++;
        names[count] = name;
        questions[count++] = (char *)question;
    }
    return count;
}

specialist_outcome_t review_loop_run(const review_loop_t *loop, json_t *findings,
                                     review_counts_t *counts, review_loop_outcome_t *out,
                                     char *error, size_t size)
{
    memset(out, 0, sizeof *out);
    out->skips = json_array();
    out->runs = json_array();
    size_t n = loop->nreviewers;
    const char **planned = calloc(n ? n : 1, sizeof *planned);
    const char **names = calloc(n ? n : 1, sizeof *names);
    char **questions = calloc(n ? n : 1, sizeof *questions);
    specialist_outcome_t outcome = SPECIALIST_FAILED;
    error[0] = '\0';
    if (out->skips == NULL || out->runs == NULL || !planned || !names || !questions) {
        snprintf(error, size, "out of memory");
        goto out;
    }
    size_t nplanned = review_plan(loop->reviewers, n, loop->paths, loop->npaths, planned,
                                  out->skips);
    memcpy(names, planned, nplanned * sizeof *names);
    size_t nasked = nplanned;
    int stagnant = 0, adding = 0;
    for (int round = 1;; round++) {
        out->rounds = round;
        int added = s_act(loop, round, names, round == 1 ? NULL : (const char *const *)questions,
                          nasked, findings, counts, out);
        char *prompt = NULL;
        if (added < 0 || s_synthesis_prompt(loop, round, planned, nplanned, findings,
                                            out->skips, &prompt) != 0) {
            snprintf(error, size, "%s", failure_message());
            goto out;
        }
        markers_destroy(&out->answer);
        outcome = specialist_cancelled(loop->ctx)
                      ? SPECIALIST_FAILED
                      : review_loop_main_run(loop->ctx, loop->settings, prompt, &out->answer,
                                             error, size);
        free(prompt);
        if (outcome != SPECIALIST_DONE)
            goto out;
        stagnant = added == 0 ? stagnant + 1 : 0;
        adding = added > 0 ? adding + 1 : 0;
        specialist_progressf(loop->ctx, "info", "review round %d: %d new finding%s", round,
                             added, added == 1 ? "" : "s");
        nasked = s_follow_ups(loop, out->answer, planned, nplanned, names, questions);
        out->stop = nasked == 0                                ? "complete"
                    : adding >= REVIEW_NOT_CONVERGING_ROUNDS   ? "not_converging"
                    : stagnant >= loop->stagnation             ? "stagnation"
                    : round >= loop->max_iterations            ? "max_iterations"
                                                               : NULL;
        if (out->stop != NULL)
            break;
    }
    if (strcmp(out->stop, "not_converging") == 0) {
        char detail[200];
        snprintf(detail, sizeof detail,
                 "%d rounds in a row each added findings and the synthesis still asked for "
                 "more: the review stopped without settling",
                 adding);
        s_block(findings, counts, "the review is not converging", detail);
    }
    if (nplanned > 0 && out->completed == 0) {
        out->stop = "no_reviewer_completed";
        s_block_unreviewed(findings, counts, out->skips);
    }
    specialist_progressf(loop->ctx, "info", "review loop: %s after %d round%s", out->stop,
                         out->rounds, out->rounds == 1 ? "" : "s");
out:
    free(planned);
    free(names);
    free(questions);
    return outcome;
}

void review_loop_dismiss(markers_t *answer, json_t *findings, json_t *dismissed)
{
    size_t n = 0;
    const char *const *items = markers_list(answer, "DISMISSED", &n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(items[i], " \t:");
        const char *reason = items[i] + len;
        while (*reason == ' ' || *reason == ':' || *reason == '-' || *reason == '\t')
            reason++;
        for (size_t k = 0; k < json_array_size(findings); k++) {
            json_t *x = json_array_get(findings, k);
            const char *id = json_string_value(json_object_get(x, "id"));
            const char *source = json_string_value(json_object_get(x, "source"));
            if (id == NULL || strlen(id) != len || strncmp(id, items[i], len) != 0 ||
                (source != NULL && strcmp(source, "agent") != 0))
                continue;
            json_array_append_new(dismissed,
                                  json_pack("{s:s, s:O, s:O, s:s}", "id", id, "reviewer",
                                            json_object_get(x, "reviewer"), "title",
                                            json_object_get(x, "title"), "reason", reason));
            json_array_remove(findings, k);
            break;
        }
    }
}
