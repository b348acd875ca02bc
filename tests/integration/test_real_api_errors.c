/* Model API failures as a real agent CLI reports them, against the scripted model, through
 * the agent runner (agent.h); run for Claude Code, Codex and Gemini (CLOISTER_REAL_CLI),
 * whose equivalents are noted (Gemini retries an overloaded or unreachable API for minutes,
 * on stderr only: those cases are Claude Code's and Codex's). Each kind of failure ends the
 * run classified, with the CLI's retries shown as progress:
 *  - a refused key (401): the CLI is stopped at its first retry; 403 and a billing error
 *    (Codex: 429 insufficient_quota) too; all three are AGENT_API_KEY_REFUSED, "the model
 *    API refused the key";
 *  - overloaded (529) then answering: the run succeeds, each retry a progress line;
 *  - rate limited (429) until the CLI gives up: AGENT_API_OVERLOADED with its retry delay;
 *  - overloaded with a fallback model configured: the CLI switches to it and succeeds
 *    (Claude Code only: Codex has no fallback model);
 *  - a prompt too long for a resumed session, which the CLI could not compact either
 *    (Codex: the context window full): a fresh session ("prompt too long") and one more
 *    try, which succeeds;
 *  - the stream cut mid-answer: AGENT_API_UNREACHABLE after the CLI's retries;
 *  - a model slower than the run's timeout: AGENT_API_TOO_SLOW;
 *  - the session rotates at the token limit on the usage the CLI reported (Claude Code).
 * The CLIs retry twice (testmodel.h): their retries take seconds, not minutes. */
#include "agent.h"
#include "check.h"
#include "clock.h"
#include "session.h"
#include "testenv.h"
#include "testmodel.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static testenv_t *s_env;
static testmodel_t s_model;
static char s_workdir[PATH_MAX];
static char s_progress[8192]; /* the runs' API progress lines, one a line */
static const char *s_fallback_model; /* the next run's --fallback-model, or NULL */
static bool s_claude;                /* Claude Code */
static bool s_gemini;                /* Gemini; neither: Codex */
static const char *s_cli;            /* its name */

static void s_on_progress(void *arg, const agent_progress_t *progress)
{
    (void)arg;
    if (progress->kind != AGENT_PROGRESS_API)
        return;
    size_t used = strlen(s_progress);
    snprintf(s_progress + used, sizeof s_progress - used, "%s\n", progress->text);
}

/* Runs the real CLI once as specialist `name` with the scenario `scenario` (JSON), its
 * timeout `timeout_s`; the finished run (the caller destroys it). */
static agent_run_t *s_run(const char *name, const char *scenario, int timeout_s,
                          int64_t token_limit)
{
    testmodel_write(&s_model, scenario);
    s_progress[0] = '\0';
    static agent_settings_t set;
    set = (agent_settings_t){
        .specialist = name,
        .cli = s_cli,
        .command = testmodel_cli(s_cli),
        .extra_args = s_claude || s_gemini ? NULL : testmodel_codex_argv(&s_model),
        .workdir = s_workdir,
        .model = s_claude ? "sonnet" : s_gemini ? "gemini-2.5-pro" : NULL,
        .timeout_s = timeout_s,
        .kill_grace_ms = 1000,
        .result_grace_ms = 1000,
        .session_token_limit = token_limit,
        .fallback_model = s_fallback_model,
    };
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "Say hello.", name, s_on_progress, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    printf("%s: ok=%d api_error=%d status=%d retries=%d retry_after=%lld attempts=%d fresh=%s\n"
           "  error: %s\n  progress: %s\n",
           name, o->ok, o->api_error, o->api_status, o->api_retries,
           (long long)o->retry_after_ms, o->attempts, o->fresh ? o->fresh_reason : "no",
           o->error, s_progress);
    return run;
}

/* Requests the model served under `rule`. */
static size_t s_served(const char *rule)
{
    json_t *requests = testmodel_requests_of(&s_model, rule);
    size_t n = json_array_size(requests);
    json_decref(requests);
    return n;
}

static void test_key_refused(void)
{
    int64_t start = clock_now_ms();
    agent_run_t *run = s_run("key-401",
                             "{\"rules\": [{\"name\": \"401\", \"steps\": [{\"error\": "
                             "{\"status\": 401, \"message\": \"invalid x-api-key\"}}]}]}",
                             60, 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_INT(o->api_error, AGENT_API_KEY_REFUSED);
    CHECK_INT(o->api_status, 401);
    CHECK(strncmp(o->error, "the model API refused the key (HTTP 401", 39) == 0);
    CHECK(!o->not_logged_in);
    CHECK_INT(o->attempts, 1);
    /* Stopped at the first retry: two requests at most, not the CLI's minutes of them
     * (Gemini does not retry a 401). */
    CHECK(s_served("401") <= 2);
    CHECK(clock_now_ms() - start < 15000);
    CHECK(strstr(s_progress, "model API refused the key (HTTP 401") != NULL);
    CHECK(strstr(s_progress, "): stopping the agent") != NULL);
    agent_run_destroy(&run);
    if (s_gemini)
        return; /* no 403 or billing of its own to tell apart */

    run = s_run("key-403",
                "{\"rules\": [{\"name\": \"403\", \"steps\": [{\"error\": {\"status\": 403, "
                "\"message\": \"Your API key does not have permission\"}}]}]}",
                60, 0);
    o = agent_run_outcome(run);
    CHECK_INT(o->api_error, AGENT_API_KEY_REFUSED);
    CHECK_INT(o->api_status, 403);
    CHECK(strstr(o->error, "the model API refused the key") != NULL);
    agent_run_destroy(&run);

    run = s_run("key-billing",
                s_claude ? "{\"rules\": [{\"name\": \"billing\", \"steps\": [{\"error\": "
                           "{\"status\": 400, \"message\": \"Your credit balance is too low to "
                           "access the Anthropic API.\"}}]}]}"
                         : "{\"rules\": [{\"name\": \"billing\", \"steps\": [{\"error\": "
                           "{\"status\": 429, \"type\": \"insufficient_quota\", \"code\": "
                           "\"insufficient_quota\", \"message\": \"You exceeded your current "
                           "quota.\"}}]}]}",
                60, 0);
    o = agent_run_outcome(run);
    CHECK_INT(o->api_error, AGENT_API_KEY_REFUSED);
    CHECK(strstr(o->error, "the model API refused the key") != NULL);
    CHECK(strstr(o->error, s_claude ? "Credit balance is too low" : "Quota exceeded") != NULL);
    agent_run_destroy(&run);
}

static void test_overloaded(void)
{
    /* Overloaded is 529 at Anthropic's API, 503 at OpenAI's. */
    agent_run_t *run = s_run("busy",
                             s_claude ? "{\"rules\": [{\"name\": \"busy\", \"steps\": ["
                                        "{\"error\": {\"status\": 529, \"message\": "
                                        "\"Overloaded\"}, \"retry_after\": 1, \"times\": 2}, "
                                        "{\"text\": \"Hello.\"}]}]}"
                                      : "{\"rules\": [{\"name\": \"busy\", \"steps\": ["
                                        "{\"error\": {\"status\": 503, \"message\": "
                                        "\"Overloaded\"}, \"retry_after\": 1, \"times\": 2}, "
                                        "{\"text\": \"Hello.\"}]}]}",
                             60, 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "Hello.");
    if (s_claude)
        CHECK(strstr(s_progress,
                     "model API overloaded (HTTP 529 overloaded): retry 1 of 2 in 1 s\n"
                     "model API overloaded (HTTP 529 overloaded): retry 2 of 2 in 1 s\n") != NULL);
    else /* Codex waits out a retry-after silently: no retry of its to show */
        CHECK_INT(s_served("busy"), 3);
    agent_run_destroy(&run);

    run = s_run("limited",
                "{\"rules\": [{\"name\": \"429\", \"steps\": [{\"error\": {\"status\": 429, "
                "\"message\": \"rate limited\"}, \"retry_after\": 1}]}]}",
                60, 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_INT(o->api_error, AGENT_API_OVERLOADED);
    CHECK_INT(o->api_status, 429);
    CHECK_INT(o->api_retries, 2);
    CHECK(!s_claude || (o->retry_after_ms >= 1000 && o->retry_after_ms < 5000));
    CHECK(strncmp(o->error, "the model API stayed rate limited (HTTP 429) through 2 retries",
                  62) == 0);
    CHECK(strstr(s_progress, "model API rate limited (HTTP 429") != NULL);
    CHECK(strstr(s_progress, "retry 2 of 2") != NULL);
    agent_run_destroy(&run);
    if (!s_claude)
        return;

    /* With a fallback model, the CLI switches to it when the main one stays overloaded. */
    s_fallback_model = "haiku";
    run = s_run("fallback",
                "{\"rules\": [{\"name\": \"main\", \"model\": \"sonnet\", \"steps\": "
                "[{\"error\": {\"status\": 529, \"message\": \"Overloaded\"}, "
                "\"retry_after\": 1}]},"
                "{\"name\": \"fallback\", \"model\": \"haiku\", \"steps\": "
                "[{\"text\": \"Hello from the fallback.\"}]}]}",
                60, 0);
    s_fallback_model = NULL;
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "Hello from the fallback.");
    CHECK(strstr(s_progress, "model API overloaded: switched from claude-sonnet") != NULL);
    CHECK_INT(s_served("fallback"), 1);
    agent_run_destroy(&run);
}

/* The API's answer to a conversation too long for the model: Anthropic's words, Gemini's,
 * OpenAI's code (Codex words it its own way). */
static const char *s_too_long(void)
{
    return s_gemini ? "{\"status\": 400, \"message\": \"The input token count (250000) exceeds "
                      "the maximum number of tokens allowed (200000).\"}"
                    : "{\"status\": 400, \"code\": \"context_length_exceeded\", \"message\": "
                      "\"prompt is too long: 250000 tokens > 200000 maximum\"}";
}

static void test_prompt_too_long(void)
{
    /* Claude Code first tries to compact the conversation itself (a request of its own):
     * that is too long as well here, so the run rotates. */
    char scenario[2048];
    snprintf(scenario, sizeof scenario,
             "{\"rules\": ["
             "{\"name\": \"compact\", \"prompt\": \"^CRITICAL: Respond with TEXT ONLY\", "
             "\"steps\": [{\"error\": %s}]},"
             "{\"name\": \"long\", \"history\": true, \"steps\": [{\"error\": %s}]},"
             "{\"name\": \"fresh\", \"history\": false, "
             "\"steps\": [{\"text\": \"Hello again.\"}]}]}",
             s_too_long(), s_too_long());
    agent_run_t *run = s_run("long", scenario, 60, 0); /* makes the session */
    CHECK(agent_run_outcome(run)->ok);
    char first[SESSION_ID_SIZE];
    snprintf(first, sizeof first, "%s", agent_run_outcome(run)->session_id);
    agent_run_destroy(&run);

    run = s_run("long", scenario, 60, 0); /* resumes it: too long, rotated, answered */
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "Hello again.");
    CHECK_INT(o->attempts, 2);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "prompt too long");
    CHECK(strcmp(o->session_id, first) != 0);
    CHECK_INT(s_served("long"), 1);
    CHECK(!s_claude || s_served("compact") >= 1);
    agent_run_destroy(&run);

    /* Too long even in a fresh session: one more try, then a clear failure. */
    snprintf(scenario, sizeof scenario,
             "{\"rules\": [{\"name\": \"always\", \"steps\": [{\"error\": %s}]}]}",
             s_too_long());
    run = s_run("longer", scenario, 60, 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_INT(o->api_error, AGENT_API_PROMPT_TOO_LONG);
    CHECK_INT(o->attempts, 2);
    CHECK(strncmp(o->error, "the prompt is too long for the model", 36) == 0);
    agent_run_destroy(&run);
}

static void test_cut(void)
{
    agent_run_t *run = s_run("cut",
                             "{\"rules\": [{\"name\": \"cut\", \"steps\": "
                             "[{\"cut\": \"Hello, I was about to\"}]}]}",
                             60, 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_INT(o->api_error, AGENT_API_UNREACHABLE);
    CHECK_INT(o->api_retries, 2);
    CHECK(strstr(o->error, "broke off mid-answer") != NULL);
    CHECK(strstr(o->error, s_claude ? "Connection dropped" : "stream disconnected") != NULL);
    CHECK(strstr(s_progress, s_claude ? "model API unreachable (no answer): retry 1 of 2"
                                      : "model API unreachable (stream disconnected): retry 1 "
                                        "of 2") != NULL);
    agent_run_destroy(&run);
}

static void test_slow(void)
{
    int64_t start = clock_now_ms();
    /* 10 s, not less: on a loaded machine a CLI (Node) can take seconds to start and send
     * its first request, and the verdict checked is about a model that never answers. */
    agent_run_t *run = s_run(
        "slow", "{\"rules\": [{\"name\": \"slow\", \"steps\": [{\"stall\": true}]}]}",
        10, 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->timed_out);
    CHECK_INT(o->api_error, AGENT_API_TOO_SLOW);
    CHECK_STR(o->error, "the model did not answer within the run's 10 s: the agent was waiting "
                        "for it when it was stopped");
    CHECK(clock_now_ms() - start < 15000);
    agent_run_destroy(&run);
}

/* The context the CLI reported (the input side of its last call) decides the rotation. */
static void test_rotation(void)
{
    static const char *const scenario =
        "{\"rules\": [{\"name\": \"big\", \"steps\": [{\"read\": \"/etc/hostname\", "
        "\"usage\": {\"input_tokens\": 1000, \"cache_read_input_tokens\": 20000}}, "
        "{\"text\": \"Read it.\", \"usage\": {\"input_tokens\": 2000, "
        "\"cache_read_input_tokens\": 22000, \"cache_creation_input_tokens\": 500}}]}]}";
    agent_run_t *run = s_run("rotate", scenario, 60, 20000);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_INT(o->context_tokens, 24500);
    CHECK_INT(o->input_tokens, 3000);
    CHECK_INT(o->cache_read_input_tokens, 42000);
    agent_run_destroy(&run);
    session_state_t state;
    CHECK_INT(session_load("rotate", &state), 0);
    CHECK_INT(state.context_tokens, 24500);

    run = s_run("rotate", scenario, 60, 20000);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "rotated at a context of 24500 tokens");
    agent_run_destroy(&run);
}

int main(void)
{
    s_env = testenv_new("real-api-errors");
    CHECK(s_env != NULL);
    char home[PATH_MAX];
    snprintf(home, sizeof home, "%s/user", s_env->dir);
    snprintf(s_workdir, sizeof s_workdir, "%s/work", s_env->dir);
    CHECK(mkdir(home, 0700) == 0 && mkdir(s_workdir, 0700) == 0);
    setenv("HOME", home, 1);
    const char *cli = getenv("CLOISTER_REAL_CLI");
    s_cli = cli != NULL && cli[0] != '\0' ? cli : "claude";
    s_claude = strcmp(s_cli, "claude") == 0;
    s_gemini = strcmp(s_cli, "gemini") == 0;
    testmodel_start(&s_model, s_env);

    test_key_refused();
    /* Gemini retries an overloaded or unreachable API for minutes, on stderr only, with no
     * setting to shorten it: those cases are not run for it. */
    if (!s_gemini) {
        test_overloaded();
        test_cut();
    }
    test_prompt_too_long();
    test_slow();
    if (s_claude)
        test_rotation();

    testenv_destroy(&s_env);
    return check_exit_code("test_real_api_errors");
}
