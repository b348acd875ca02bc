/* The Codex and Gemini adapters through the runner, against their stand-ins (fake-codex,
 * fake-gemini: tests/fake_agent/README.md): a fresh session then a resumed one (the argv,
 * the session file naming its CLI, the transcript growing), a lost session recovered with
 * a fresh one, a fork (Codex) or a fresh session in its place (Gemini), the wall-clock
 * timeout killing the whole process group, token accounting (no cost reported), progress,
 * the role text put before the prompt, directories and MCP servers passed the CLI's way,
 * and "not logged in" failing clearly (Codex's login check, a 401; Gemini's exit 41). Codex
 * reports its thread's running totals: each run's own share is checked. */
#include "agent.h"
#include "check.h"
#include "failure.h"
#include "session.h"
#include "testenv.h"

#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static testenv_t *env;
static char workdir[PATH_MAX];
static char log_path[PATH_MAX];
static char codex_home[PATH_MAX];

typedef struct {
    int tools, texts;
    char first_tool[64];
} progress_t;

static void s_on_progress(void *arg, const agent_progress_t *p)
{
    progress_t *seen = arg;
    if (p->kind == AGENT_PROGRESS_TOOL && seen->tools++ == 0)
        snprintf(seen->first_tool, sizeof seen->first_tool, "%s", p->text);
    seen->texts += p->kind == AGENT_PROGRESS_TEXT;
}

static agent_settings_t s_settings(const char *specialist, const char *cli)
{
    agent_settings_t set = {
        .specialist = specialist,
        .cli = cli,
        .command = testenv_bin(strcmp(cli, "codex") == 0 ? "fake-codex" : "fake-gemini"),
        .workdir = workdir,
        .timeout_s = 30,
        .kill_grace_ms = 300,
        .result_grace_ms = 1000,
    };
    return set;
}

/* The argv of the n-th logged invocation, as one space-joined string. */
static char *s_logged_argv(size_t n)
{
    char *text = testenv_read_file(log_path);
    char *line = text;
    for (size_t i = 0; line != NULL && i < n; i++) {
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    json_t *entry = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    char *joined = calloc(1, 8192);
    size_t i;
    json_t *arg;
    json_array_foreach(json_object_get(entry, "argv"), i, arg)
    {
        strncat(joined, json_string_value(arg), 8192 - strlen(joined) - 2);
        strcat(joined, " ");
    }
    json_decref(entry);
    free(text);
    return joined;
}

static bool s_logged_has(size_t n, const char *needle)
{
    char *argv = s_logged_argv(n);
    bool has = strstr(argv, needle) != NULL;
    if (!has)
        fprintf(stderr, "argv %zu: %s (no '%s')\n", n, argv, needle);
    free(argv);
    return has;
}

static void test_fresh_then_resumed(const char *cli)
{
    unlink(log_path);
    char name[64], actions[PATH_MAX];
    snprintf(name, sizeof name, "%s-agent", cli);
    snprintf(actions, sizeof actions, "%s/actions", env->dir);
    CHECK_INT(testenv_write_file(actions, "write notes.txt hello\nsay all done\n"), 0);
    setenv(strcmp(cli, "codex") == 0 ? "FAKE_CODEX_ACTIONS" : "FAKE_GEMINI_ACTIONS", actions, 1);
    agent_settings_t set = s_settings(name, cli);
    set.model = "model-x";
    const char *const dirs[] = {env->dir, NULL};
    set.add_dirs = dirs;
    progress_t seen = {0};
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "first task", "t1", s_on_progress, &seen), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->error, "");
    CHECK(o->fresh);
    CHECK_STR(o->result_text, "all done");
    CHECK_INT(strlen(o->session_id), 36);
    /* Two model calls (the write, the answer) of 1000 in / 200 out each; Codex caches 200
     * of each call's input, Gemini nothing. */
    bool codex = strcmp(cli, "codex") == 0;
    CHECK_INT(o->input_tokens + o->cache_read_input_tokens, 2000);
    CHECK_INT(o->cache_read_input_tokens, codex ? 400 : 0);
    CHECK_INT(o->output_tokens, 400);
    CHECK_INT(o->context_tokens, 2000);
    CHECK(o->cost_usd == 0.0); /* neither CLI reports a cost */
    CHECK_INT(seen.tools, 1);
    CHECK(seen.texts >= 1);
    char first[SESSION_ID_SIZE];
    snprintf(first, sizeof first, "%s", o->session_id);
    agent_run_destroy(&run);
    char notes[PATH_MAX + 16];
    snprintf(notes, sizeof notes, "%s/notes.txt", workdir);
    CHECK(access(notes, F_OK) == 0);

    session_state_t state;
    CHECK_INT(session_load(name, &state), 0);
    CHECK_STR(state.cli, cli);
    CHECK_STR(state.session_id, first);
    CHECK_INT(state.runs, 1);

    CHECK_INT(agent_run(&run, &set, "second task", "t2", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(!o->fresh);
    CHECK_STR(o->session_id, first);
    /* This run's own share, though Codex reports the thread's running total (4000). */
    CHECK_INT(o->input_tokens + o->cache_read_input_tokens, 2000);
    CHECK_INT(o->output_tokens, 400);
    agent_run_destroy(&run);
    CHECK_INT(session_load(name, &state), 0);
    CHECK_INT(state.input_tokens, 4000);
    CHECK_INT(state.output_tokens, 800);
    if (strcmp(cli, "codex") == 0) {
        CHECK(s_logged_has(0, "exec --json --skip-git-repo-check -m model-x"));
        CHECK(s_logged_has(0, "sandbox_mode=\"workspace-write\""));
        CHECK(s_logged_has(0, "approval_policy=\"never\""));
        CHECK(s_logged_has(0, "sandbox_workspace_write.writable_roots=[\""));
        CHECK(s_logged_has(1, "exec resume --json"));
        char resume[128];
        snprintf(resume, sizeof resume, " %s - ", first);
        CHECK(s_logged_has(1, resume));
    } else {
        char flag[128];
        snprintf(flag, sizeof flag, "--session-id %s", first);
        CHECK(s_logged_has(0, flag));
        CHECK(s_logged_has(0, "-o stream-json -m model-x --approval-mode yolo --skip-trust"));
        CHECK(s_logged_has(0, "--include-directories"));
        snprintf(flag, sizeof flag, "--resume %s -p", first);
        CHECK(s_logged_has(1, flag));
    }
    unsetenv("FAKE_CODEX_ACTIONS");
    unsetenv("FAKE_GEMINI_ACTIONS");
}

/* The CLI forgot the session (its file is gone): a fresh one, said as "context lost".
 * The glob `before` + the session id (or its first id_chars characters) + ".jsonl" finds
 * the file. */
static void test_lost(const char *cli, const char *before, int id_chars)
{
    char name[64], path[PATH_MAX * 2];
    snprintf(name, sizeof name, "%s-agent", cli);
    session_state_t state;
    CHECK_INT(session_load(name, &state), 0);
    char id[SESSION_ID_SIZE];
    snprintf(id, sizeof id, "%.*s", id_chars, state.session_id);
    snprintf(path, sizeof path, "%s%s.jsonl", before, id);
    glob_t found;
    CHECK_INT(glob(path, 0, NULL, &found), 0);
    CHECK_INT(found.gl_pathc, 1);
    for (size_t i = 0; i < found.gl_pathc; i++)
        CHECK_INT(unlink(found.gl_pathv[i]), 0);
    globfree(&found);
    agent_settings_t set = s_settings(name, cli);
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "third task", "t3", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "context lost");
    CHECK_INT(o->attempts, 2);
    CHECK(strcmp(o->session_id, state.session_id) != 0);
    agent_run_destroy(&run);
}

static void test_fork(const char *cli)
{
    unlink(log_path);
    char name[64];
    snprintf(name, sizeof name, "%s-agent", cli);
    session_state_t before;
    CHECK_INT(session_load(name, &before), 0);
    agent_settings_t set = s_settings(name, cli);
    set.fork_session = true;
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "side look", "t4", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(strcmp(o->session_id, before.session_id) != 0);
    if (strcmp(cli, "codex") == 0) {
        CHECK_STR(o->fork_of, before.session_id);
        CHECK(s_logged_has(0, "exec fork --json"));
    } else {
        CHECK(o->fresh);
        CHECK_STR(o->fresh_reason, "the CLI cannot fork a session");
    }
    agent_run_destroy(&run);
    session_state_t after;
    CHECK_INT(session_load(name, &after), 0);
    CHECK_STR(after.session_id, before.session_id);
    CHECK_INT(after.runs, before.runs);
}

static void test_timeout_kills_group(const char *cli)
{
    const char *knob = strcmp(cli, "codex") == 0 ? "FAKE_CODEX_SCENARIO" : "FAKE_GEMINI_SCENARIO";
    setenv(knob, "hang", 1);
    agent_settings_t set = s_settings("hang-agent", cli);
    set.timeout_s = 2;
    agent_run_t *run = NULL;
    CHECK_INT(agent_run_start(&run, &set, "wait", "t5", NULL, NULL), 0);
    int pgid = -1;
    while (agent_run_step(run, 50) == 0) {
        if (agent_run_pid(run) > 0)
            pgid = agent_run_pid(run);
    }
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->timed_out);
    CHECK(strstr(o->error, "timed out") != NULL);
    CHECK(pgid > 0);
    CHECK(kill(-pgid, 0) != 0 && errno == ESRCH);
    agent_run_destroy(&run);
    unsetenv(knob);
}

static void test_codex_specifics(void)
{
    /* The role text goes before the prompt; MCP servers become -c mcp_servers.*. */
    unlink(log_path);
    char mcp[PATH_MAX];
    snprintf(mcp, sizeof mcp, "%s/mcp.json", env->dir);
    CHECK_INT(testenv_write_file(mcp, "{\"mcpServers\":{\"cloister\":{\"type\":\"stdio\","
                                      "\"command\":\"/usr/bin/cloister-mcp\",\"args\":[\"--task\","
                                      "\"t \\\"1\\\"\"],\"env\":{\"PANOPTICON_HOME\":\"/h\"}}}}"),
              0);
    agent_settings_t set = s_settings("codex-role", "codex");
    set.append_system_prompt = "You are the merge agent.";
    set.mcp_config = mcp;
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "merge it", "t6", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    CHECK(s_logged_has(0, "mcp_servers.cloister.command=\"/usr/bin/cloister-mcp\""));
    CHECK(s_logged_has(0, "mcp_servers.cloister.args=[\"--task\", \"t \\\"1\\\"\"]"));
    CHECK(s_logged_has(0, "mcp_servers.cloister.env={\"PANOPTICON_HOME\" = \"/h\"}"));
    char *text = testenv_read_file(log_path);
    CHECK(text != NULL && strstr(text, "\"stdin\":\"You are the merge agent.\\n\\nmerge it\"") != NULL);
    free(text);

    /* Logged out: the login check refuses before any session is made. */
    char auth[PATH_MAX + 16];
    snprintf(auth, sizeof auth, "%s/auth.json", codex_home);
    unlink(auth);
    set = s_settings("codex-out", "codex");
    CHECK_INT(agent_run(&run, &set, "hello", "t7", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->not_logged_in);
    CHECK_INT(o->attempts, 0);
    CHECK(strstr(o->error, "codex is not logged in") != NULL);
    CHECK(strstr(o->error, "codex login") != NULL);
    agent_run_destroy(&run);
    session_state_t state;
    CHECK_INT(session_load("codex-out", &state), FAILURE_NOT_FOUND);

    /* A key in the environment skips the check; the service then refuses it (401): the
     * key is refused (not a missing login), and codex is stopped at its first retry. */
    setenv("CODEX_API_KEY", "sk-wrong", 1);
    setenv("FAKE_CODEX_SCENARIO", "auth", 1);
    CHECK_INT(agent_run(&run, &set, "hello", "t8", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(!o->not_logged_in);
    CHECK_INT(o->api_error, AGENT_API_KEY_REFUSED);
    CHECK_INT(o->api_status, 401);
    CHECK_INT(o->attempts, 1);
    CHECK(strstr(o->error, "the model API refused the key (HTTP 401") != NULL);
    agent_run_destroy(&run);
    unsetenv("FAKE_CODEX_SCENARIO");
    unsetenv("CODEX_API_KEY");
    CHECK_INT(testenv_write_file(auth, "{}"), 0);
}

/* Gemini reads MCP servers only from settings files: the workdir's project settings carry
 * the run's servers (marked Cloister's), a run without any removes them, and a settings
 * file that is not Cloister's is left alone. */
static void test_gemini_mcp(void)
{
    char mcp[PATH_MAX], settings_path[PATH_MAX + 32], mark[PATH_MAX + 32], dir[PATH_MAX + 16];
    snprintf(mcp, sizeof mcp, "%s/gemini-mcp.json", env->dir);
    snprintf(dir, sizeof dir, "%s/.gemini", workdir);
    snprintf(settings_path, sizeof settings_path, "%s/settings.json", dir);
    snprintf(mark, sizeof mark, "%s/.cloister-owned", dir);
    CHECK_INT(testenv_write_file(mcp, "{\"mcpServers\":{\"cloister\":{\"type\":\"stdio\","
                                      "\"command\":\"/usr/bin/cloister-mcp\",\"args\":[\"--task\","
                                      "\"t13\"]}}}"),
              0);
    agent_settings_t set = s_settings("gemini-mcp", "gemini");
    set.mcp_config = mcp;
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "with tools", "t13", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    json_t *written = json_load_file(settings_path, 0, NULL);
    CHECK_STR(json_string_value(json_object_get(
                  json_object_get(json_object_get(written, "mcpServers"), "cloister"), "command")),
              "/usr/bin/cloister-mcp");
    json_decref(written);
    CHECK(access(mark, F_OK) == 0);

    set.mcp_config = NULL;
    CHECK_INT(agent_run(&run, &set, "without", "t14", NULL, NULL), 0);
    agent_run_destroy(&run);
    CHECK(access(settings_path, F_OK) != 0);

    /* Someone else's project settings: kept as they are. */
    unlink(mark);
    CHECK_INT(testenv_write_file(settings_path, "{\"ui\":{\"theme\":\"mine\"}}"), 0);
    set.mcp_config = mcp;
    CHECK_INT(agent_run(&run, &set, "with tools again", "t15", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    char *kept = testenv_read_file(settings_path);
    CHECK(kept != NULL && strcmp(kept, "{\"ui\":{\"theme\":\"mine\"}}") == 0);
    free(kept);
    unlink(settings_path);
}

/* Gemini runs input that starts with '/' as a slash command: such a task gets a line in
 * front, any other goes as it is. */
static void test_gemini_slash(void)
{
    unlink(log_path);
    agent_settings_t set = s_settings("gemini-slash", "gemini");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "/etc/passwd is the file to review", "t11", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    CHECK_INT(agent_run(&run, &set, "Review src/a.c", "t12", NULL, NULL), 0);
    agent_run_destroy(&run);
    char *text = testenv_read_file(log_path);
    CHECK(text != NULL &&
          strstr(text, "\"stdin\":\"The task:\\n\\n/etc/passwd is the file to review\"") != NULL);
    CHECK(text != NULL && strstr(text, "\"stdin\":\"Review src/a.c\"") != NULL);
    free(text);
}

static void test_gemini_not_logged_in(void)
{
    setenv("FAKE_GEMINI_SCENARIO", "auth", 1); /* the fake's stand-in for no credentials */
    agent_settings_t set = s_settings("gemini-out", "gemini");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "hello", "t9", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->not_logged_in);
    CHECK_INT(o->exit_code, 41);
    CHECK(strstr(o->error, "gemini is not logged in") != NULL);
    CHECK(strstr(o->error, "GEMINI_API_KEY") != NULL);
    agent_run_destroy(&run);

    /* The CLI's own failure event is a failed run with its message. */
    setenv("FAKE_GEMINI_SCENARIO", "error", 1);
    CHECK_INT(agent_run(&run, &set, "hello", "t10", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(!o->not_logged_in);
    CHECK(strstr(o->error, "API Error") != NULL);
    agent_run_destroy(&run);
    unsetenv("FAKE_GEMINI_SCENARIO");
}

int main(void)
{
    env = testenv_new("agent-adapters");
    if (env == NULL)
        return 1;
    char home[PATH_MAX], auth[PATH_MAX + 16];
    snprintf(home, sizeof home, "%s/user", env->dir);
    snprintf(workdir, sizeof workdir, "%s/work", env->dir);
    snprintf(log_path, sizeof log_path, "%s/cli.log", env->dir);
    snprintf(codex_home, sizeof codex_home, "%s/codex-home", env->dir);
    snprintf(auth, sizeof auth, "%s/auth.json", codex_home);
    mkdir(home, 0700);
    mkdir(workdir, 0700);
    mkdir(codex_home, 0700);
    if (testenv_write_file(auth, "{}") != 0) {
        testenv_destroy(&env);
        return 1;
    }
    setenv("HOME", home, 1);
    setenv("CODEX_HOME", codex_home, 1);
    setenv("GEMINI_API_KEY", "test-key", 1);
    unsetenv("OPENAI_API_KEY");
    unsetenv("CODEX_API_KEY");
    setenv("FAKE_CODEX_LOG", log_path, 1);
    setenv("FAKE_GEMINI_LOG", log_path, 1);

    /* Where each CLI keeps its sessions (docs/agent-codex.md §3, docs/agent-gemini.md §3). */
    char codex_files[PATH_MAX + 64], gemini_files[PATH_MAX + 64];
    snprintf(codex_files, sizeof codex_files, "%s/sessions/*/*/*/rollout-*-", codex_home);
    snprintf(gemini_files, sizeof gemini_files, "%s/.gemini/tmp/*/chats/session-*-", home);

    test_fresh_then_resumed("codex");
    test_lost("codex", codex_files, 36);
    test_fork("codex");
    test_timeout_kills_group("codex");
    test_codex_specifics();
    test_fresh_then_resumed("gemini");
    test_lost("gemini", gemini_files, 8);
    test_fork("gemini");
    test_timeout_kills_group("gemini");
    test_gemini_slash();
    test_gemini_mcp();
    test_gemini_not_logged_in();

    testenv_destroy(&env);
    return check_exit_code("test_agent_adapters");
}
