/* review_reviewers: reviewers as parallel forks (see review_reviewers.h). */
#include "review_reviewers.h"

#include "failure.h"
#include "review_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one round of stepping every running reviewer may wait, in ms. */
#define S_STEP_MS 50

/* One reviewer's run: its settings (a copy of the review-agent's, forked) and environment. */
typedef struct {
    const char *name;
    agent_settings_t settings;
    char env_reviewer[64];
    const char *env[2];
    agent_run_t *run;
    specialist_ctx_t *ctx;
    bool done;
} s_slot_t;

static void s_on_progress(void *arg, const agent_progress_t *progress)
{
    s_slot_t *slot = arg;
    if (progress->kind == AGENT_PROGRESS_TOOL)
        specialist_progressf(slot->ctx, "tool", "%s: %s%s%s", slot->name, progress->text,
                             progress->detail[0] ? " " : "", progress->detail);
}

static int s_start(const review_act_t *act, s_slot_t *slot, const char *prompt)
{
    slot->settings = act->settings->agent;
    slot->settings.fork_session = true;
    slot->settings.timeout_s = act->timeout_s;
    slot->settings.kill_grace_ms = specialist_child_kill_grace_ms(act->ctx);
    snprintf(slot->env_reviewer, sizeof slot->env_reviewer, "CLOISTER_REVIEWER=%s", slot->name);
    slot->env[0] = slot->env_reviewer;
    slot->env[1] = NULL;
    slot->settings.env = slot->env;
    slot->ctx = act->ctx;
    specialist_progressf(act->ctx, "info", "reviewer %s: started (round %d)", slot->name,
                         act->round);
    return agent_run_start(&slot->run, &slot->settings, prompt, specialist_task(act->ctx)->id,
                           s_on_progress, slot);
}

/* Records a finished run: its answer, or a skip with the reason. */
static void s_finish(const review_act_t *act, s_slot_t *slot, char **answer, json_t *skips,
                     json_t *runs)
{
    const agent_outcome_t *o = agent_run_outcome(slot->run);
    agent_job_add_usage(act->ctx, o);
    agent_job_api_outcome(act->ctx, o);
    char reason[600] = "";
    if (o->timed_out)
        snprintf(reason, sizeof reason, "timed out after %d s", act->timeout_s);
    else if (!o->ok)
        snprintf(reason, sizeof reason, "failed: %.500s", o->error);
    else if ((*answer = strdup(o->result_text)) == NULL)
        snprintf(reason, sizeof reason, "out of memory");
    if (reason[0] != '\0')
        review_plan_skip(skips, slot->name, reason);
    specialist_progressf(act->ctx, "info", "reviewer %s: %s", slot->name,
                         reason[0] ? reason : "done");
    json_array_append_new(
        runs, json_pack("{s:s, s:i, s:b, s:s, s:f, s:I, s:s, s:s}", "reviewer", slot->name,
                        "round", act->round, "ok", o->ok, "error", o->error, "cost_usd",
                        o->cost_usd, "duration_ms", (json_int_t)o->wall_ms, "session_id",
                        o->session_id, "fork_of", o->fork_of));
    agent_run_destroy(&slot->run);
    slot->done = true;
}

int review_reviewers_run(const review_act_t *act, const char *const *names,
                         char *const *prompts, size_t n, char **answers, json_t *skips,
                         json_t *runs)
{
    s_slot_t *slots = calloc(n ? n : 1, sizeof *slots);
    if (slots == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++)
        answers[i] = NULL;
    size_t started = 0, finished = 0;
    int running = 0;
    bool cancel_sent = false;
    while (finished < n) {
        for (; started < n && running < act->concurrency && !cancel_sent; started++) {
            slots[started].name = names[started];
            if (s_start(act, &slots[started], prompts[started]) != 0) {
                review_plan_skip(skips, names[started], failure_message());
                slots[started].done = true;
                finished++;
                continue;
            }
            running++;
        }
        if (cancel_sent && started < n) { /* never started: nothing to wait for */
            finished += n - started;
            started = n;
        }
        if (!cancel_sent && specialist_cancelled(act->ctx)) {
            cancel_sent = true;
            for (size_t i = 0; i < started; i++)
                if (slots[i].run != NULL)
                    agent_run_cancel(slots[i].run);
        }
        for (size_t i = 0; i < started; i++) {
            if (slots[i].done || slots[i].run == NULL)
                continue;
            if (agent_run_step(slots[i].run, S_STEP_MS / (running > 0 ? running : 1))) {
                s_finish(act, &slots[i], &answers[i], skips, runs);
                running--;
                finished++;
            }
        }
    }
    free(slots);
    return 0;
}
