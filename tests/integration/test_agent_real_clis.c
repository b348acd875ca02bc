/* The Codex and Gemini adapters against the real CLIs, from the npm registry, offline and
 * logged out: every argv the adapters build must be accepted (the CLI gets as far as
 * needing its service or its credentials), and the run must end classified — "not logged
 * in" with what to do, or a lost session recovered with a fresh one.
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

    /* Cloister's MCP server reaches Gemini through the workdir's project settings: with a
     * key (a wrong one: the service is not reachable anyway) it starts the server. */
    char server[PATH_MAX], started[PATH_MAX], mcp[PATH_MAX], text[3 * PATH_MAX];
    snprintf(server, sizeof server, "%s/mcp-server.sh", env->dir);
    snprintf(started, sizeof started, "%s/mcp-started", env->dir);
    snprintf(mcp, sizeof mcp, "%s/mcp.json", env->dir);
    snprintf(text, sizeof text, "#!/bin/sh\necho \"$@\" > '%s'\ncat > /dev/null\n", started);
    CHECK_INT(testenv_write_file(server, text), 0);
    chmod(server, 0755);
    snprintf(text, sizeof text,
             "{\"mcpServers\":{\"cloister\":{\"type\":\"stdio\",\"command\":\"%s\","
             "\"args\":[\"--task\",\"t3\"]}}}",
             server);
    CHECK_INT(testenv_write_file(mcp, text), 0);
    setenv("GEMINI_API_KEY", "not-a-real-key", 1);
    set.mcp_config = mcp;
    set.timeout_s = 15;
    CHECK_INT(agent_run(&run, &set, "Use your tools.", "t3", NULL, NULL), 0);
    s_print("gemini mcp", agent_run_outcome(run));
    agent_run_destroy(&run);
    char *args = testenv_read_file(started);
    CHECK(args != NULL && strstr(args, "--task t3") != NULL);
    free(args);
    unsetenv("GEMINI_API_KEY");
}

static void test_codex(const char *codex)
{
    char codex_home[PATH_MAX];
    snprintf(codex_home, sizeof codex_home, "%s/codex-home", env->dir);
    mkdir(codex_home, 0700);
    setenv("CODEX_HOME", codex_home, 1);
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

    /* With a key in the environment the check is skipped and exec runs: the argv is
     * accepted when codex names its thread (saved as the session at once) and then waits
     * for its service, which is not there (a timeout), or is refused the key. */
    setenv("CODEX_API_KEY", "sk-not-a-real-key", 1);
    set.timeout_s = 12;
    CHECK_INT(agent_run(&run, &set, "Say hello.", "t2", NULL, NULL), 0);
    o = agent_run_outcome(run);
    s_print("codex new", o);
    CHECK(!s_usage_error(o->stderr_tail));
    CHECK(o->timed_out || o->not_logged_in);
    CHECK_INT(session_load("codex-probe", &state), 0);
    CHECK_INT(strlen(state.session_id), 36);
    CHECK_STR(state.cli, "codex");
    char thread[SESSION_ID_SIZE];
    snprintf(thread, sizeof thread, "%s", state.session_id);
    agent_run_destroy(&run);

    /* A fork of that thread: `exec fork` takes the same flags. */
    set.fork_session = true;
    state.runs = 1; /* as if the run had completed, so that there is something to fork */
    CHECK_INT(session_save("codex-probe", &state), 0);
    CHECK_INT(agent_run(&run, &set, "Look again.", "t3", NULL, NULL), 0);
    o = agent_run_outcome(run);
    s_print("codex fork", o);
    CHECK(!s_usage_error(o->stderr_tail));
    CHECK_STR(o->fork_of, thread);
    agent_run_destroy(&run);
    set.fork_session = false;

    /* Resume of a thread codex never had: "no rollout found" → a fresh session. */
    s_store_unknown_session("codex-probe", "codex");
    CHECK_INT(agent_run(&run, &set, "Again.", "t4", NULL, NULL), 0);
    o = agent_run_outcome(run);
    s_print("codex resume unknown", o);
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
    unsetenv("GEMINI_API_KEY");
    unsetenv("GOOGLE_API_KEY");

    test_gemini(testmodel_cli("gemini"));
    test_codex(testmodel_cli("codex"));

    testenv_destroy(&env);
    return check_exit_code("test_agent_real_clis");
}
