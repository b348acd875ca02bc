/* The Codex and Gemini adapters against the real CLIs, logged out or with a session they
 * do not have: the run must end classified — "not logged in" with what to do, or a lost
 * session recovered with a fresh one (whose turn the scripted model answers). The argv of
 * new, resumed and forked runs, tool calls and MCP servers are checked by the test_real_*
 * pipeline tests, which run these CLIs whole turns.
 *
 * The CLIs are the pinned ones (tests/model/package.json) that the CTest fixture
 * integration.real_clis_install puts into <build>/real-clis; without them the test fails. */
#include "agent.h"
#include "check.h"
#include "clock.h"
#include "failure.h"
#include "session.h"
#include "testenv.h"
#include "testmodel.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static testenv_t *env;
static testmodel_t s_model;
static char workdir[PATH_MAX];

/* Usage errors of the CLIs' argument parsers (clap for Codex, yargs for Gemini). */
static bool s_usage_error(const char *stderr_tail)
{
    static const char *const marks[] = {"unexpected argument", "Usage: codex",
                                        "Unknown argument", "Not enough arguments",
                                        "Invalid values", NULL};
    for (size_t i = 0; marks[i] != NULL; i++) {
        if (strstr(stderr_tail, marks[i]) != NULL)
            return true;
    }
    return false;
}

static agent_settings_t s_settings(const char *specialist, const char *cli, const char *command)
{
    agent_settings_t set = {
        .specialist = specialist,
        .cli = cli,
        .command = command,
        .workdir = workdir,
        .model = NULL,
        .timeout_s = 20,
        .kill_grace_ms = 500,
        .result_grace_ms = 1000,
    };
    return set;
}

/* Stores a session for `specialist` that the CLI has never heard of. */
static void s_store_unknown_session(const char *specialist, const char *cli)
{
    session_state_t state = {0};
    snprintf(state.cli, sizeof state.cli, "%s", cli);
    session_new_id(state.session_id);
    snprintf(state.cwd, sizeof state.cwd, "%s", workdir);
    state.runs = 1;
    CHECK_INT(session_save(specialist, &state), 0);
}

static void s_print(const char *what, const agent_outcome_t *o)
{
    printf("%s: ok=%d not_logged_in=%d timed_out=%d attempts=%d fresh=%s exit=%d\n  error: %s\n"
           "  stderr: %.300s\n",
           what, o->ok, o->not_logged_in, o->timed_out, o->attempts,
           o->fresh ? o->fresh_reason : "no", o->exit_code, o->error, o->stderr_tail);
}

static void test_gemini(const char *gemini)
{
    const char *const add[] = {env->dir, NULL};
    agent_settings_t set = s_settings("gemini-probe", "gemini", gemini);
    set.model = "gemini-2.5-pro";
    set.add_dirs = add;
    agent_run_t *run = NULL;

    /* New session: accepted, then exit 41 for want of an auth method. */
    CHECK_INT(agent_run(&run, &set, "Say hello.", "t1", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    s_print("gemini new", o);
    CHECK(!s_usage_error(o->stderr_tail));
    CHECK(o->not_logged_in);
    CHECK_INT(o->exit_code, 41);
    CHECK(strstr(o->error, "GEMINI_API_KEY") != NULL);
    agent_run_destroy(&run);

    /* Resume of a session it does not have: accepted, the session is lost (a fresh one
     * follows), and that one is still not logged in. */
    s_store_unknown_session("gemini-probe", "gemini");
    CHECK_INT(agent_run(&run, &set, "Again.", "t2", NULL, NULL), 0);
    o = agent_run_outcome(run);
    s_print("gemini resume", o);
    CHECK(!s_usage_error(o->stderr_tail));
    CHECK_INT(o->attempts, 2);
    CHECK_STR(o->fresh_reason, "context lost");
    CHECK(o->not_logged_in);
    agent_run_destroy(&run);

}

static void test_codex(const char *codex)
{
    unsetenv("CODEX_API_KEY");
    unsetenv("CODEX_ACCESS_TOKEN");
    const char *const add[] = {env->dir, NULL};
    agent_settings_t set = s_settings("codex-probe", "codex", codex);
    set.add_dirs = add;
    agent_run_t *run = NULL;

    /* Logged out: the login check says so at once. */
    int64_t start = clock_now_ms();
    CHECK_INT(agent_run(&run, &set, "Say hello.", "t1", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    s_print("codex logged out", o);
    CHECK(o->not_logged_in);
    CHECK_INT(o->attempts, 0);
    CHECK(strstr(o->error, "codex login") != NULL);
    CHECK(clock_now_ms() - start < 15000);
    agent_run_destroy(&run);
    session_state_t state;
    CHECK_INT(session_load("codex-probe", &state), FAILURE_NOT_FOUND); /* untouched */

    /* With a key in the environment the check is skipped. A resume of a thread codex never
     * had: "no rollout found" → a fresh session, which the model answers. */
    setenv("CODEX_API_KEY", "sk-scripted-model", 1);
    set.extra_args = testmodel_codex_argv(&s_model);
    s_store_unknown_session("codex-probe", "codex");
    CHECK_INT(agent_run(&run, &set, "Again.", "t4", NULL, NULL), 0);
    o = agent_run_outcome(run);
    s_print("codex resume unknown", o);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "Hello.");
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "context lost");
    CHECK_INT(o->attempts, 2);
    agent_run_destroy(&run);
    unsetenv("CODEX_API_KEY");
}

int main(void)
{
    env = testenv_new("agent-real-clis");
    CHECK(env != NULL);
    char home[PATH_MAX];
    snprintf(home, sizeof home, "%s/user", env->dir);
    snprintf(workdir, sizeof workdir, "%s/work", env->dir);
    mkdir(home, 0700);
    mkdir(workdir, 0700);
    setenv("HOME", home, 1);
    testmodel_start(&s_model, env);
    testmodel_write(&s_model, "{\"rules\": [{\"name\": \"hello\", \"steps\": "
                              "[{\"text\": \"Hello.\"}]}]}");
    /* Logged out: none of what points Gemini at the model. */
    unsetenv("GEMINI_API_KEY");
    unsetenv("GOOGLE_API_KEY");
    unsetenv("GOOGLE_GEMINI_BASE_URL");
    unsetenv("GEMINI_CLI_HOME");

    test_gemini(testmodel_cli("gemini"));
    test_codex(testmodel_cli("codex"));

    testenv_destroy(&env);
    return check_exit_code("test_agent_real_clis");
}
