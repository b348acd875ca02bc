/* Integration tests for the agent runner against the real fake-claude binary (and, where
 * the fake cannot misbehave the way we need, a small sh script as the agent command).
 * HOME, CLAUDE_CONFIG_DIR and PANOPTICON_HOME all point into the test's temp directory.
 *
 * Covered: fresh → resumed (argv, transcript turns, accumulated tokens, history), context
 * lost, id in use (both ways), streaming progress before exit, wall-clock and no-output
 * timeouts without orphans, hang after result, crash, auth / exit0_on_error / max_turns,
 * bogus init id, new id on resume (adopted only when on disk), env scrubbing, rotation,
 * cwd change, corrupt session file, spawn failure, cancellation, two runs of one
 * specialist serialising on the lock, \u0000 inside the stream's strings, and history
 * entries for runs whose stderr or task id is not UTF-8. */
#include "agent.h"
#include "check.h"
#include "clock.h"
#include "failure.h"
#include "session.h"
#include "testenv.h"

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static testenv_t *env;
static char fake[PATH_MAX];
static char workdir[PATH_MAX];
static char workdir2[PATH_MAX];
static char log_path[PATH_MAX];

/* ---------------------------------------------------------------------------------------
 * Helpers. */

#define MAX_EVENTS 64

typedef struct {
    int count;
    agent_progress_kind_t kind[MAX_EVENTS];
    char text[MAX_EVENTS][256];
    char detail[MAX_EVENTS][256];
    int64_t at_ms[MAX_EVENTS];
} events_t;

/* Records a progress event; one more than MAX_EVENTS fails the test (dropped, it would make
 * a check that some kind of event never came pass). */
static void s_on_progress(void *arg, const agent_progress_t *progress)
{
    events_t *ev = arg;
    if (ev->count == MAX_EVENTS)
        fprintf(stderr, "test_agent_runner: more than %d progress events\n", MAX_EVENTS);
    CHECK(ev->count < MAX_EVENTS);
    ev->kind[ev->count] = progress->kind;
    snprintf(ev->text[ev->count], sizeof ev->text[0], "%s", progress->text);
    snprintf(ev->detail[ev->count], sizeof ev->detail[0], "%s", progress->detail);
    ev->at_ms[ev->count] = clock_now_ms();
    ev->count++;
}

static int s_count_kind(const events_t *ev, agent_progress_kind_t kind)
{
    int n = 0;
    for (int i = 0; i < ev->count; i++)
        n += ev->kind[i] == kind;
    return n;
}

static agent_settings_t s_settings(const char *specialist)
{
    agent_settings_t set = {
        .specialist = specialist,
        .workdir = workdir,
        .command = fake,
        .timeout_s = 30,
        .result_grace_ms = 2000,
        .kill_grace_ms = 500,
    };
    return set;
}

/* Clears every fake knob and the invocation log. */
static void s_reset_knobs(void)
{
    unsetenv("FAKE_CLAUDE_SCENARIO");
    unsetenv("FAKE_CLAUDE_RESULT");
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    unsetenv("FAKE_CLAUDE_INPUT_TOKENS");
    unsetenv("FAKE_CLAUDE_OUTPUT_TOKENS");
    unsetenv("FAKE_CLAUDE_ACTIONS");
    unlink(log_path);
}

/* The invocation log as a JSON array of entries (caller decrefs). */
static json_t *s_log(void)
{
    json_t *all = json_array();
    char *text = testenv_read_file(log_path);
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        json_t *entry = json_loads(line, 0, NULL);
        if (entry)
            json_array_append_new(all, entry);
        if (!next)
            break;
    }
    free(text);
    return all;
}

/* The value after `flag` in log entry i's argv, or NULL. */
static const char *s_flag(json_t *log, size_t i, const char *flag)
{
    json_t *argv = json_object_get(json_array_get(log, i), "argv");
    for (size_t k = 0; k + 1 < json_array_size(argv); k++) {
        if (strcmp(json_string_value(json_array_get(argv, k)), flag) == 0)
            return json_string_value(json_array_get(argv, k + 1));
    }
    return NULL;
}

static bool s_has_arg(json_t *log, size_t i, const char *arg)
{
    json_t *argv = json_object_get(json_array_get(log, i), "argv");
    for (size_t k = 0; k < json_array_size(argv); k++) {
        if (strcmp(json_string_value(json_array_get(argv, k)), arg) == 0)
            return true;
    }
    return false;
}

static int s_count_lines(const char *path)
{
    char *text = testenv_read_file(path);
    if (text == NULL)
        return -1;
    int n = 0;
    for (char *p = text; *p; p++)
        n += *p == '\n';
    free(text);
    return n;
}

static int s_transcript_lines(const char *cwd, const char *id)
{
    char path[PATH_MAX + 512];
    if (agent_transcript_path(path, sizeof path, cwd, id) != 0)
        return -1;
    return s_count_lines(path);
}

static int s_history_lines(const char *specialist)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/specialists/%s/history.jsonl", env->home, specialist);
    return s_count_lines(path);
}

/* Live (non-zombie) processes in group pgid. */
static int s_group_alive(pid_t pgid)
{
    DIR *dir = opendir("/proc");
    int alive = 0;
    struct dirent *entry;
    while (dir && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *paren = strrchr(buf, ')');
        char state;
        int ppid, pgrp;
        if (paren && sscanf(paren + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid &&
            state != 'Z')
            alive++;
    }
    if (dir)
        closedir(dir);
    return alive;
}

static bool s_group_gone_pred(void *arg)
{
    return s_group_alive(*(pid_t *)arg) == 0;
}

/* True once no live process is left in group pgid. A process that got SIGKILL may still
 * be finishing its exit for a moment after its pipes closed, so allow it a little time. */
static bool s_group_gone(pid_t pgid)
{
    return testenv_wait_until(s_group_gone_pred, &pgid, 2000);
}

/* Writes an executable sh script into the temp dir; returns its path (static buffer). */
static const char *s_script(const char *name, const char *body)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", env->dir, name);
    char text[4096];
    snprintf(text, sizeof text, "#!/bin/sh\n%s\n", body);
    CHECK(testenv_write_file(path, text) == 0);
    chmod(path, 0755);
    return path;
}

/* ---------------------------------------------------------------------------------------
 * Tests. */

static void test_fresh_then_resumed(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_RESULT", "review complete", 1);
    const char *extra[] = {"--effort", "low", NULL};
    const char *allowed[] = {"Read", "Bash(git *)", NULL};
    const char *denied[] = {"WebFetch", NULL};
    agent_settings_t set = s_settings("fresh-agent");
    set.extra_args = extra;
    set.model = "haiku";
    set.permission_mode = "acceptEdits";
    set.allowed_tools = allowed;
    set.disallowed_tools = denied;
    set.max_turns = 5;
    set.max_budget_usd = 1.5;
    set.append_system_prompt = "You are the review agent.";
    events_t ev = {0};

    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "-first prompt\nline two", "task-1", s_on_progress, &ev), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->error, "");
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "no previous session");
    CHECK_STR(o->result_text, "review complete");
    CHECK_STR(o->subtype, "success");
    CHECK_INT(o->attempts, 1);
    CHECK_INT(o->input_tokens, 1000);
    CHECK_INT(o->cache_creation_input_tokens, 500);
    CHECK_INT(o->cache_read_input_tokens, 2000);
    CHECK_INT(o->output_tokens, 200);
    CHECK(o->cost_usd > 0);
    CHECK_INT(o->num_turns, 1);
    CHECK(o->exited);
    CHECK_INT(o->exit_code, 0);
    CHECK_INT(s_count_kind(&ev, AGENT_PROGRESS_SESSION), 1);
    CHECK_INT(s_count_kind(&ev, AGENT_PROGRESS_TEXT), 1);
    char first_id[SESSION_ID_SIZE];
    snprintf(first_id, sizeof first_id, "%s", o->session_id);
    CHECK_INT(strlen(first_id), 36);
    CHECK_STR(ev.detail[0], first_id); /* the SESSION event names the new id */
    agent_run_destroy(&run);
    CHECK(run == NULL);

    json_t *log = s_log();
    CHECK_INT(json_array_size(log), 1);
    CHECK_STR(s_flag(log, 0, "--session-id"), first_id);
    CHECK(s_flag(log, 0, "--resume") == NULL);
    CHECK(s_has_arg(log, 0, "-p"));
    CHECK_STR(s_flag(log, 0, "--output-format"), "stream-json");
    CHECK(s_has_arg(log, 0, "--verbose"));
    CHECK_STR(s_flag(log, 0, "--model"), "haiku");
    CHECK_STR(s_flag(log, 0, "--effort"), "low");
    CHECK_STR(s_flag(log, 0, "--max-turns"), "5");
    CHECK_STR(s_flag(log, 0, "--max-budget-usd"), "1.5");
    CHECK_STR(s_flag(log, 0, "--permission-mode"), "acceptEdits");
    CHECK_STR(s_flag(log, 0, "--allowedTools"), "Read,Bash(git *)");
    CHECK_STR(s_flag(log, 0, "--disallowedTools"), "WebFetch");
    CHECK_STR(s_flag(log, 0, "--append-system-prompt"), "You are the review agent.");
    CHECK(!s_has_arg(log, 0, "-first prompt\nline two")); /* no positional prompt */
    json_t *first = json_array_get(log, 0);
    CHECK_STR(json_string_value(json_object_get(first, "stdin")), "-first prompt\nline two");
    char real[PATH_MAX];
    CHECK(realpath(workdir, real) != NULL);
    CHECK_STR(json_string_value(json_object_get(first, "cwd")), real);
    json_decref(log);

    /* Second run: --resume with the same id; the transcript gets its second turn. */
    unlink(log_path);
    memset(&ev, 0, sizeof ev);
    CHECK_INT(agent_run(&run, &set, "second prompt", "task-2", s_on_progress, &ev), 0);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(!o->fresh);
    CHECK_STR(o->fresh_reason, "");
    CHECK_STR(o->session_id, first_id);
    CHECK_INT(s_count_kind(&ev, AGENT_PROGRESS_SESSION), 0);
    agent_run_destroy(&run);
    log = s_log();
    CHECK_INT(json_array_size(log), 1);
    CHECK_STR(s_flag(log, 0, "--resume"), first_id);
    CHECK(s_flag(log, 0, "--session-id") == NULL);
    json_decref(log);
    CHECK_INT(s_transcript_lines(workdir, first_id), 2);

    session_state_t st;
    CHECK_INT(session_load("fresh-agent", &st), 0);
    CHECK_STR(st.session_id, first_id);
    CHECK_STR(st.cwd, workdir);
    CHECK_INT(st.runs, 2);
    CHECK_INT(st.input_tokens, 2 * 3500);
    CHECK_INT(st.context_tokens, 3500); /* the last call's input side, not a sum */
    CHECK_INT(st.output_tokens, 400);
    CHECK(st.cost_usd > 0);
    CHECK_STR(st.cli_version, "2.1.330");
    CHECK_STR(st.fresh_reason, "no previous session");
    CHECK(st.last_run_at_ms > 0);

    /* history.jsonl: one line per run, fresh then resumed. */
    CHECK_INT(s_history_lines("fresh-agent"), 2);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/specialists/fresh-agent/history.jsonl", env->home);
    char *text = testenv_read_file(path);
    char *second_line = text ? strchr(text, '\n') : NULL;
    json_t *h1 = text ? json_loadb(text, (size_t)(second_line - text), 0, NULL) : NULL;
    json_t *h2 = second_line ? json_loads(second_line + 1, 0, NULL) : NULL;
    CHECK_STR(json_string_value(json_object_get(h1, "mode")), "fresh");
    CHECK_STR(json_string_value(json_object_get(h1, "task_id")), "task-1");
    CHECK_STR(json_string_value(json_object_get(h2, "mode")), "resumed");
    CHECK_STR(json_string_value(json_object_get(h2, "session_id")), first_id);
    CHECK_STR(json_string_value(json_object_get(h2, "result")), "review complete");
    CHECK(json_is_false(json_object_get(h2, "is_error")));
    CHECK_INT(json_integer_value(
                  json_object_get(json_object_get(h2, "usage"), "cache_read_input_tokens")),
              2000);
    json_decref(h1);
    json_decref(h2);
    free(text);
}

static void test_transcript_deleted(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("lost-agent");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "one", "t1", NULL, NULL), 0);
    char old_id[SESSION_ID_SIZE];
    snprintf(old_id, sizeof old_id, "%s", agent_run_outcome(run)->session_id);
    agent_run_destroy(&run);
    char path[PATH_MAX + 512];
    CHECK_INT(agent_transcript_path(path, sizeof path, workdir, old_id), 0);
    CHECK_INT(unlink(path), 0);
    unlink(log_path);

    events_t ev = {0};
    CHECK_INT(agent_run(&run, &set, "two", "t2", s_on_progress, &ev), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "context lost");
    CHECK_INT(o->attempts, 2);
    CHECK(strcmp(o->session_id, old_id) != 0);
    CHECK_INT(s_count_kind(&ev, AGENT_PROGRESS_SESSION), 1);
    CHECK_STR(ev.text[0], "context lost");
    json_t *log = s_log();
    CHECK_INT(json_array_size(log), 2);
    CHECK_STR(s_flag(log, 0, "--resume"), old_id);
    CHECK_STR(s_flag(log, 1, "--session-id"), o->session_id);
    json_decref(log);
    session_state_t st;
    CHECK_INT(session_load("lost-agent", &st), 0);
    CHECK_STR(st.session_id, o->session_id);
    CHECK_STR(st.fresh_reason, "context lost");
    CHECK_INT(st.runs, 1);
    agent_run_destroy(&run);
}

static void test_in_use(void)
{
    /* --resume of a session the CLI says is in use → a fresh session. */
    s_reset_knobs();
    agent_settings_t set = s_settings("busy-agent");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "one", "t1", NULL, NULL), 0);
    char old_id[SESSION_ID_SIZE];
    snprintf(old_id, sizeof old_id, "%s", agent_run_outcome(run)->session_id);
    agent_run_destroy(&run);
    unlink(log_path);
    setenv("FAKE_CLAUDE_SCENARIO", "in_use", 1);
    CHECK_INT(agent_run(&run, &set, "two", "t2", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "session in use");
    CHECK_INT(o->attempts, 2);
    CHECK(strcmp(o->session_id, old_id) != 0);
    json_t *log = s_log();
    CHECK_INT(json_array_size(log), 2);
    CHECK_STR(s_flag(log, 0, "--resume"), old_id);
    CHECK_STR(s_flag(log, 1, "--session-id"), o->session_id);
    json_decref(log);
    agent_run_destroy(&run);

    /* A minted id that never completed a run, but whose transcript exists (we crashed
     * after the CLI created it): --session-id says "in use" → rerun with --resume. */
    s_reset_knobs();
    session_state_t st = {0};
    session_new_id(st.session_id);
    snprintf(st.cwd, sizeof st.cwd, "%s", workdir);
    snprintf(st.fresh_reason, sizeof st.fresh_reason, "no previous session");
    CHECK_INT(session_save("minted-agent", &st), 0);
    char path[PATH_MAX + 512];
    CHECK_INT(agent_transcript_path(path, sizeof path, workdir, st.session_id), 0);
    CHECK_INT(testenv_write_file(path, "{\"type\":\"user\"}\n"), 0);
    set = s_settings("minted-agent");
    CHECK_INT(agent_run(&run, &set, "again", "t3", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(!o->fresh);
    CHECK_INT(o->attempts, 2);
    CHECK_STR(o->session_id, st.session_id);
    log = s_log();
    CHECK_INT(json_array_size(log), 2);
    CHECK_STR(s_flag(log, 0, "--session-id"), st.session_id);
    CHECK_STR(s_flag(log, 1, "--resume"), st.session_id);
    json_decref(log);
    agent_run_destroy(&run);
}

static void test_streaming_progress(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_DELAY_MS", "300", 1);
    char actions[PATH_MAX];
    snprintf(actions, sizeof actions, "%s/actions.txt", env->dir);
    CHECK(testenv_write_file(actions, "write notes.txt hello\nsay all done\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    agent_settings_t set = s_settings("stream-agent");
    events_t ev = {0};
    agent_run_t *run = NULL;
    CHECK_INT(agent_run_start(&run, &set, "stream please", "t1", s_on_progress, &ev), 0);
    int steps = 0;
    while (agent_run_step(run, 50) == 0)
        steps++;
    int64_t done_ms = clock_now_ms();
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "all done");
    CHECK(steps > 5); /* the step API kept returning while the agent ran */
    int tool = -1, text = -1;
    for (int i = 0; i < ev.count; i++) {
        if (ev.kind[i] == AGENT_PROGRESS_TOOL && tool < 0)
            tool = i;
        if (ev.kind[i] == AGENT_PROGRESS_TEXT && text < 0)
            text = i;
    }
    CHECK(tool >= 0 && text > tool);
    if (tool >= 0) {
        CHECK_STR(ev.text[tool], "Write");
        CHECK_STR(ev.detail[tool], "notes.txt");
        /* Events after it are 300 ms apart: the tool call was seen long before the exit. */
        CHECK(done_ms - ev.at_ms[tool] >= 500);
    }
    char notes[PATH_MAX + 32];
    snprintf(notes, sizeof notes, "%s/notes.txt", workdir);
    char *content = testenv_read_file(notes);
    CHECK(content != NULL && strcmp(content, "hello") == 0);
    free(content);
    unlink(notes);
    agent_run_destroy(&run);
}

static void test_hang_timeouts(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_SCENARIO", "hang", 1);
    agent_settings_t set = s_settings("hang-agent");
    set.timeout_s = 1;
    agent_run_t *run = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(agent_run_start(&run, &set, "hang", "t1", NULL, NULL), 0);
    int pid = -1;
    while (agent_run_step(run, 50) == 0) {
        if (pid < 0)
            pid = agent_run_pid(run);
    }
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->timed_out);
    CHECK(!o->got_result);
    CHECK(strstr(o->error, "timed out") != NULL);
    CHECK(clock_now_ms() - t0 < 5000);
    CHECK(pid > 0);
    CHECK(s_group_gone(pid));
    CHECK_INT(agent_run_pid(run), -1);
    agent_run_destroy(&run);

    /* The no-output watchdog. */
    set.timeout_s = 30;
    set.no_output_timeout_s = 1;
    t0 = clock_now_ms();
    CHECK_INT(agent_run(&run, &set, "hang", "t2", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->timed_out);
    CHECK(strstr(o->error, "no output") != NULL);
    CHECK(clock_now_ms() - t0 < 5000);
    agent_run_destroy(&run);
}

static void test_hang_after_result(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_SCENARIO", "hang_after_result", 1);
    setenv("FAKE_CLAUDE_RESULT", "merged cleanly", 1);
    agent_settings_t set = s_settings("linger-agent");
    set.result_grace_ms = 300;
    agent_run_t *run = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "merged cleanly");
    CHECK(!o->exited); /* we stopped it */
    CHECK(clock_now_ms() - t0 < 5000);
    agent_run_destroy(&run);
}

static void test_failures(void)
{
    agent_settings_t set = s_settings("failing-agent");
    agent_run_t *run = NULL;
    const agent_outcome_t *o;

    s_reset_knobs();
    setenv("FAKE_CLAUDE_SCENARIO", "crash", 1);
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(!o->got_result);
    CHECK_INT(o->exit_code, 2);
    CHECK(strstr(o->error, "crashed (exit code 2)") != NULL);
    CHECK(strstr(o->error, "simulated crash") != NULL);
    CHECK(strstr(o->stderr_tail, "simulated crash") != NULL);
    agent_run_destroy(&run);

    setenv("FAKE_CLAUDE_SCENARIO", "auth", 1);
    CHECK_INT(agent_run(&run, &set, "go", "t2", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->got_result);
    CHECK(o->is_error);
    CHECK_STR(o->subtype, "success");
    CHECK(strstr(o->error, "Not logged in") != NULL);
    agent_run_destroy(&run);

    setenv("FAKE_CLAUDE_SCENARIO", "exit0_on_error", 1);
    CHECK_INT(agent_run(&run, &set, "go", "t3", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->exited);
    CHECK_INT(o->exit_code, 0);
    CHECK(o->is_error);
    agent_run_destroy(&run);

    setenv("FAKE_CLAUDE_SCENARIO", "max_turns", 1);
    set.max_turns = 3;
    CHECK_INT(agent_run(&run, &set, "go", "t4", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_STR(o->subtype, "error_max_turns");
    CHECK_STR(o->result_text, "Reached maximum number of turns (3)");
    agent_run_destroy(&run);

    /* Exit 0 without a result; non-JSON lines and unknown events are skipped. */
    s_reset_knobs();
    set = s_settings("failing-agent");
    set.command = s_script(
        "quiet.sh", "cat >/dev/null; echo 'not json'; echo '{\"type\":\"mystery\"}'; exit 0");
    CHECK_INT(agent_run(&run, &set, "go", "t5", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK_STR(o->error, "agent exited without a result");
    agent_run_destroy(&run);

    set.command = "/nonexistent/claude";
    CHECK_INT(agent_run(&run, &set, "go", "t6", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(strstr(o->error, "cannot start the agent") != NULL);
    agent_run_destroy(&run);

    /* Unusable settings are refused up front. */
    set = s_settings("../evil");
    CHECK_INT(agent_run_start(&run, &set, "go", NULL, NULL, NULL), FAILURE_INVALID);
    set = s_settings("ok-name");
    set.workdir = "relative/dir";
    CHECK_INT(agent_run_start(&run, &set, "go", NULL, NULL, NULL), FAILURE_INVALID);
    CHECK(run == NULL);
}

static void test_session_ids_from_result(void)
{
    /* bogus_init_id: init carries a random id; the stored id stays the one we minted. */
    s_reset_knobs();
    setenv("FAKE_CLAUDE_SCENARIO", "bogus_init_id", 1);
    agent_settings_t set = s_settings("bogus-agent");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    char minted[SESSION_ID_SIZE];
    snprintf(minted, sizeof minted, "%s", agent_run_outcome(run)->session_id);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    CHECK_INT(agent_run(&run, &set, "go", "t2", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    CHECK(!agent_run_outcome(run)->fresh);
    CHECK_STR(agent_run_outcome(run)->session_id, minted);
    agent_run_destroy(&run);
    session_state_t st;
    CHECK_INT(session_load("bogus-agent", &st), 0);
    CHECK_STR(st.session_id, minted);

    /* new_id_on_resume: the CLI continues under a new id with a real transcript: adopted. */
    s_reset_knobs();
    set = s_settings("newid-agent");
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    snprintf(minted, sizeof minted, "%s", agent_run_outcome(run)->session_id);
    agent_run_destroy(&run);
    setenv("FAKE_CLAUDE_SCENARIO", "new_id_on_resume", 1);
    CHECK_INT(agent_run(&run, &set, "go", "t2", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(strcmp(o->session_id, minted) != 0);
    CHECK(s_transcript_lines(workdir, o->session_id) >= 1);
    CHECK_INT(session_load("newid-agent", &st), 0);
    CHECK_STR(st.session_id, o->session_id);
    agent_run_destroy(&run);

    /* A different result id without a transcript on disk is not adopted. */
    s_reset_knobs();
    set = s_settings("ghost-agent");
    set.command = s_script(
        "ghost.sh",
        "cat >/dev/null\n"
        "echo '{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"x\"}'\n"
        "echo '{\"session_id\":\"11111111-2222-4333-8444-555555555555\",\"is_error\":false,"
        "\"type\":\"result\",\"subtype\":\"success\",\"result\":\"fine\","
        "\"usage\":{\"input_tokens\":7}}'");
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_STR(o->result_text, "fine");
    CHECK_INT(o->input_tokens, 7);
    CHECK_INT(o->context_tokens, 7); /* no assistant usage: the result's stands in */
    CHECK(strcmp(o->session_id, "11111111-2222-4333-8444-555555555555") != 0);
    CHECK_INT(session_load("ghost-agent", &st), 0);
    CHECK_STR(st.session_id, o->session_id);
    agent_run_destroy(&run);
}

/* A JSON string may hold \u0000: the line still counts, and the NUL becomes U+FFFD
 * instead of cutting the text short. */
static void test_nul_in_stream(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("nul-agent");
    set.command = s_script(
        "nul.sh",
        "cat >/dev/null\n"
        "printf '%s\\n' '{\"type\":\"assistant\",\"message\":{\"content\":["
        "{\"type\":\"text\",\"text\":\"before \\u0000 after\"},"
        "{\"type\":\"tool_use\",\"name\":\"Ba\\u0000sh\","
        "\"input\":{\"command\":\"ls \\u0000x\"}}]}}'\n"
        "printf '%s\\n' '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,"
        "\"result\":\"binary \\u0000 in text\",\"usage\":{\"input_tokens\":3}}'");
    events_t ev = {0};
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "go", "t1", s_on_progress, &ev), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->got_result);
    CHECK_STR(o->result_text, "binary \xEF\xBF\xBD in text");
    CHECK_INT(o->input_tokens, 3);
    bool text = false, tool = false;
    for (int i = 0; i < ev.count; i++) {
        if (ev.kind[i] == AGENT_PROGRESS_TEXT)
            text = text || strcmp(ev.text[i], "before \xEF\xBF\xBD after") == 0;
        if (ev.kind[i] == AGENT_PROGRESS_TOOL)
            tool = tool || (strcmp(ev.text[i], "Ba\xEF\xBF\xBDsh") == 0 &&
                            strcmp(ev.detail[i], "ls \xEF\xBF\xBDx") == 0);
    }
    CHECK(text);
    CHECK(tool);
    agent_run_destroy(&run);
}

/* Absurd numbers in the CLI's result (found by fuzzing: converting 1e300 to an integer is
 * undefined, and sums of huge counts overflowed) count as unknown (0). */
static void test_absurd_usage_numbers(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("numbers-agent");
    set.command = s_script(
        "numbers.sh",
        "cat >/dev/null\n"
        "printf '%s\\n' '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,"
        "\"result\":\"ok\",\"usage\":{\"input_tokens\":1e300,"
        "\"cache_read_input_tokens\":9000000000000000000,\"output_tokens\":-5},"
        "\"num_turns\":1e300,\"duration_ms\":-1e300}'");
    events_t ev = {0};
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "go", "t1", s_on_progress, &ev), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK_INT(o->input_tokens, 0);
    CHECK_INT(o->cache_read_input_tokens, 0);
    CHECK_INT(o->output_tokens, 0);
    CHECK_INT(o->num_turns, 0);
    CHECK_INT(o->duration_ms, 0);
    agent_run_destroy(&run);
}

/* Bytes that are not UTF-8 (in the agent's stderr, hence in the error, or in the task id)
 * still give a history entry: each becomes U+FFFD there. */
static void test_history_not_utf8(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("bytes-agent");
    set.command = s_script("bytes.sh", "cat >/dev/null\n"
                                       "printf 'fatal: \\377\\376 bad bytes\\n' >&2\n"
                                       "exit 2");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "go", "task-\xff", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(strstr(o->error, "crashed (exit code 2)") != NULL);
    agent_run_destroy(&run);

    CHECK_INT(s_history_lines("bytes-agent"), 1);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/specialists/bytes-agent/history.jsonl", env->home);
    json_t *entry = json_load_file(path, 0, NULL);
    CHECK(entry != NULL);
    const char *error = json_string_value(json_object_get(entry, "error"));
    CHECK(error != NULL && strstr(error, "fatal: \xEF\xBF\xBD\xEF\xBF\xBD bad bytes") != NULL);
    CHECK_STR(json_string_value(json_object_get(entry, "task_id")), "task-\xEF\xBF\xBD");
    CHECK(json_is_false(json_object_get(entry, "ok")));
    json_decref(entry);
}

/* The context is the LAST main-conversation call's input side: not the first or largest
 * call, not a subagent's call (parent_tool_use_id set), not the result's total. */
static void test_context_is_last_call(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("last-call-agent");
    set.session_token_limit = 5000;
    set.command = s_script(
        "calls.sh",
        "cat >/dev/null\n"
        "echo '{\"type\":\"assistant\",\"parent_tool_use_id\":null,\"message\":{\"content\":[],"
        "\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":0,"
        "\"cache_read_input_tokens\":8000,\"output_tokens\":5}}}'\n"
        "echo '{\"type\":\"assistant\",\"parent_tool_use_id\":\"toolu_1\",\"message\":{"
        "\"content\":[],\"usage\":{\"input_tokens\":60000,\"output_tokens\":5}}}'\n"
        "echo '{\"type\":\"assistant\",\"message\":{\"content\":[],\"usage\":{"
        "\"input_tokens\":5,\"cache_creation_input_tokens\":200,"
        "\"cache_read_input_tokens\":1000,\"output_tokens\":5}}}'\n"
        "echo '{\"is_error\":false,\"type\":\"result\",\"subtype\":\"success\","
        "\"result\":\"fine\",\"usage\":{\"input_tokens\":60015,"
        "\"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":9000}}'");
    agent_run_t *run = NULL;
    for (int i = 0; i < 2; i++) {
        CHECK_INT(agent_run(&run, &set, "go", "t", NULL, NULL), 0);
        const agent_outcome_t *o = agent_run_outcome(run);
        CHECK(o->ok);
        CHECK(o->fresh == (i == 0)); /* the second run resumes: 1205 is under the limit */
        CHECK_INT(o->context_tokens, 1205);
        CHECK_INT(o->input_tokens, 60015);
        agent_run_destroy(&run);
    }
    session_state_t st;
    CHECK_INT(session_load("last-call-agent", &st), 0);
    CHECK_INT(st.context_tokens, 1205);
    CHECK_INT(st.input_tokens, 2 * 69215);
    CHECK_INT(st.runs, 2);
}

static void test_env_scrubbed(void)
{
    s_reset_knobs();
    setenv("CLAUDECODE", "1", 1);
    setenv("CLAUDE_CODE_ENTRYPOINT", "x", 1);
    setenv("CLAUDE_CODE_SESSION_ID", "y", 1);
    setenv("CLAUDE_CODE_CHILD_SESSION", "z", 1);
    /* How the CLI is logged in or pointed at a provider: these must reach it. */
    setenv("CLAUDE_CODE_OAUTH_TOKEN", "token", 1);
    setenv("CLAUDE_CODE_USE_BEDROCK", "1", 1);
    agent_settings_t set = s_settings("env-agent");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    json_t *log = s_log();
    json_t *logged_env = json_object_get(json_array_get(log, 0), "env");
    CHECK(json_is_null(json_object_get(logged_env, "CLAUDECODE")));
    CHECK_STR(json_string_value(json_object_get(logged_env, "PANOPTICON_AGENT_ID")), "env-agent");
    json_decref(log);

    /* The fake logs only some names; a script shows the whole environment. */
    char env_out[PATH_MAX], body[PATH_MAX + 200];
    snprintf(env_out, sizeof env_out, "%s/env.txt", env->dir);
    snprintf(body, sizeof body,
             "cat >/dev/null; env > '%s'; echo "
             "'{\"type\":\"result\",\"is_error\":false,\"result\":\"ok\"}'",
             env_out);
    set.command = s_script("env.sh", body);
    set.specialist = "env-agent2";
    CHECK_INT(agent_run(&run, &set, "go", "t1", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    agent_run_destroy(&run);
    char *text = testenv_read_file(env_out);
    CHECK(text != NULL);
    CHECK(text && strstr(text, "CLAUDECODE=") == NULL);
    CHECK(text && strstr(text, "CLAUDE_CODE_ENTRYPOINT=") == NULL);
    CHECK(text && strstr(text, "CLAUDE_CODE_SESSION_ID=") == NULL);
    CHECK(text && strstr(text, "CLAUDE_CODE_CHILD_SESSION=") == NULL);
    CHECK(text && strstr(text, "CLAUDE_CODE_OAUTH_TOKEN=token\n") != NULL);
    CHECK(text && strstr(text, "CLAUDE_CODE_USE_BEDROCK=1\n") != NULL);
    CHECK(text && strstr(text, "PANOPTICON_AGENT_ID=env-agent2\n") != NULL);
    CHECK(text && strstr(text, "CLAUDE_CONFIG_DIR=") != NULL); /* not a CLAUDE_CODE_ name */
    free(text);
    unsetenv("CLAUDECODE");
    unsetenv("CLAUDE_CODE_ENTRYPOINT");
    unsetenv("CLAUDE_CODE_SESSION_ID");
    unsetenv("CLAUDE_CODE_CHILD_SESSION");
    unsetenv("CLAUDE_CODE_OAUTH_TOKEN");
    unsetenv("CLAUDE_CODE_USE_BEDROCK");
}

/* Rotation measures the conversation's size, the input side of the LAST API call, not the
 * sum of the runs' result.usage (which totals every call and re-counts the cached context
 * each time). The fake reports 1000 + 500 + 2000 = 3500 per call; its result sums them. */
static void test_rotation_and_cwd(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("rotating-agent");
    set.session_token_limit = 5000;
    /* Two tool actions and the answer: three calls, so each run's result reports 10500
     * input-side tokens while the context stays at 3500. */
    char actions[PATH_MAX];
    snprintf(actions, sizeof actions, "%s/rotation-actions.txt", env->dir);
    CHECK(testenv_write_file(actions, "write rot.txt a\nappend rot.txt b\nsay ok\n") == 0);
    setenv("FAKE_CLAUDE_ACTIONS", actions, 1);
    agent_run_t *run = NULL;
    CHECK_INT(agent_run(&run, &set, "1", "t1", NULL, NULL), 0);
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_INT(o->input_tokens + o->cache_creation_input_tokens + o->cache_read_input_tokens,
              3 * 3500);
    CHECK_INT(o->context_tokens, 3500);
    char first[SESSION_ID_SIZE];
    snprintf(first, sizeof first, "%s", o->session_id);
    agent_run_destroy(&run);
    /* Several runs whose totals (and their sum, 31500) are far past the limit: the context
     * never is, so the session is resumed every time. */
    for (int i = 2; i <= 3; i++) {
        CHECK_INT(agent_run(&run, &set, "again", "t", NULL, NULL), 0);
        CHECK(agent_run_outcome(run)->ok);
        CHECK(!agent_run_outcome(run)->fresh);
        CHECK_STR(agent_run_outcome(run)->session_id, first);
        agent_run_destroy(&run);
    }
    session_state_t st;
    CHECK_INT(session_load("rotating-agent", &st), 0);
    CHECK_STR(st.session_id, first);
    CHECK_INT(st.runs, 3);
    CHECK_INT(st.input_tokens, 3 * 3 * 3500); /* totals still accumulate */
    CHECK_INT(st.context_tokens, 3500);

    /* The context grows past the limit (4000 + 500 + 2000 per call): this run still
     * resumes (the stored context was 3500), the next one starts fresh. */
    unsetenv("FAKE_CLAUDE_ACTIONS");
    setenv("FAKE_CLAUDE_INPUT_TOKENS", "4000", 1);
    CHECK_INT(agent_run(&run, &set, "big", "t4", NULL, NULL), 0);
    CHECK(!agent_run_outcome(run)->fresh);
    CHECK_INT(agent_run_outcome(run)->context_tokens, 6500);
    agent_run_destroy(&run);
    unsetenv("FAKE_CLAUDE_INPUT_TOKENS");
    events_t ev = {0};
    CHECK_INT(agent_run(&run, &set, "5", "t5", s_on_progress, &ev), 0);
    o = agent_run_outcome(run);
    CHECK(o->ok);
    CHECK(o->fresh);
    CHECK_STR(o->fresh_reason, "rotated at a context of 6500 tokens");
    CHECK(strcmp(o->session_id, first) != 0);
    CHECK_INT(s_count_kind(&ev, AGENT_PROGRESS_SESSION), 1);
    agent_run_destroy(&run);
    CHECK_INT(session_load("rotating-agent", &st), 0);
    CHECK_INT(st.input_tokens, 3500);
    CHECK_INT(st.context_tokens, 3500);
    CHECK_INT(st.runs, 1);

    /* Same specialist, another directory: fresh, "cwd changed". */
    set.workdir = workdir2;
    CHECK_INT(agent_run(&run, &set, "4", "t4", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->fresh);
    CHECK_STR(agent_run_outcome(run)->fresh_reason, "cwd changed");
    agent_run_destroy(&run);

    /* A corrupt session file: fresh, never a crash. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/specialists/rotating-agent.session", env->home);
    CHECK(testenv_write_file(path, "{\"session_id\": tru") == 0);
    CHECK_INT(agent_run(&run, &set, "5", "t5", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    CHECK_STR(agent_run_outcome(run)->fresh_reason, "session file unreadable");
    agent_run_destroy(&run);
}

static void *s_cancel_later(void *arg)
{
    testenv_sleep_ms(300);
    agent_run_cancel(arg);
    return NULL;
}

static void test_cancel(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_SCENARIO", "hang", 1);
    agent_settings_t set = s_settings("cancel-agent");
    agent_run_t *run = NULL;
    CHECK_INT(agent_run_start(&run, &set, "go", "t1", NULL, NULL), 0);
    int pid = -1;
    int64_t deadline = clock_now_ms() + 5000;
    while (pid < 0 && clock_now_ms() < deadline) {
        CHECK_INT(agent_run_step(run, 50), 0);
        pid = agent_run_pid(run);
    }
    CHECK(pid > 0);
    agent_run_cancel(run);
    while (agent_run_step(run, 50) == 0) {
    }
    const agent_outcome_t *o = agent_run_outcome(run);
    CHECK(!o->ok);
    CHECK(o->cancelled);
    CHECK_STR(o->error, "agent run cancelled");
    CHECK_INT(o->attempts, 1);
    CHECK(s_group_gone(pid));
    agent_run_destroy(&run);
    /* The lock was released: another run can start right away. */
    session_lock_t *lock = NULL;
    CHECK_INT(session_lock_try(&lock, "cancel-agent"), 0);

    /* Cancelled while waiting for the lock: no agent is started. */
    CHECK_INT(agent_run_start(&run, &set, "go", "t2", NULL, NULL), 0);
    CHECK_INT(agent_run_step(run, 10), 0);
    agent_run_cancel(run);
    while (agent_run_step(run, 50) == 0) {
    }
    CHECK(agent_run_outcome(run)->cancelled);
    CHECK_INT(agent_run_outcome(run)->attempts, 0);
    agent_run_destroy(&run);
    session_unlock(&lock);

    /* Cancelled from another thread while this one drives the run. */
    CHECK_INT(agent_run_start(&run, &set, "go", "t3", NULL, NULL), 0);
    pthread_t thread;
    CHECK_INT(pthread_create(&thread, NULL, s_cancel_later, run), 0);
    int64_t t0 = clock_now_ms();
    while (agent_run_step(run, 100) == 0) {
    }
    pthread_join(thread, NULL);
    CHECK(agent_run_outcome(run)->cancelled);
    CHECK(clock_now_ms() - t0 < 5000);
    agent_run_destroy(&run);
}

static void test_runs_serialise(void)
{
    s_reset_knobs();
    setenv("FAKE_CLAUDE_DELAY_MS", "150", 1);
    agent_settings_t set = s_settings("serial-agent");
    agent_run_t *a = NULL, *b = NULL;
    CHECK_INT(agent_run_start(&a, &set, "first", "ta", NULL, NULL), 0);
    while (agent_run_pid(a) < 0 && agent_run_step(a, 50) == 0) {
    }
    CHECK(agent_run_pid(a) > 0);
    CHECK_INT(agent_run_start(&b, &set, "second", "tb", NULL, NULL), 0);
    bool overlap = false, b_waited = false;
    int a_done = 0, b_done = 0;
    int64_t a_end = 0, b_spawn = 0;
    while (!(a_done && b_done)) {
        if (!a_done && (a_done = agent_run_step(a, 20)) == 1)
            a_end = clock_now_ms();
        if (!b_done)
            b_done = agent_run_step(b, 20);
        if (agent_run_pid(b) > 0 && b_spawn == 0)
            b_spawn = clock_now_ms();
        if (!a_done && agent_run_pid(b) > 0)
            overlap = true;
        if (!a_done && agent_run_pid(b) < 0)
            b_waited = true;
    }
    CHECK(!overlap);
    CHECK(b_waited);
    CHECK(b_spawn >= a_end);
    CHECK(agent_run_outcome(a)->ok);
    CHECK(agent_run_outcome(b)->ok);
    CHECK(agent_run_outcome(a)->fresh);
    CHECK(!agent_run_outcome(b)->fresh); /* b resumed what a created */
    CHECK_STR(agent_run_outcome(b)->session_id, agent_run_outcome(a)->session_id);
    agent_run_destroy(&a);
    agent_run_destroy(&b);

    /* A run that cannot get the lock before its deadline fails clearly. */
    session_lock_t *lock = NULL;
    CHECK_INT(session_lock_try(&lock, "serial-agent"), 0);
    set.timeout_s = 1;
    CHECK_INT(agent_run(&b, &set, "third", "tc", NULL, NULL), 0);
    CHECK(!agent_run_outcome(b)->ok);
    CHECK(strstr(agent_run_outcome(b)->error, "busy") != NULL);
    CHECK_INT(agent_run_outcome(b)->attempts, 0);
    agent_run_destroy(&b);
    session_unlock(&lock);
}

/* Forks start from the stored session's transcript, run in parallel (no lock), get their
 * own ids, carry the settings' env, and leave the stored session as it was. */
static void test_forks(void)
{
    s_reset_knobs();
    agent_settings_t set = s_settings("fork-agent");
    agent_run_t *run = NULL;

    /* With nothing stored, a fork is a throwaway session and stores nothing. */
    set.fork_session = true;
    CHECK_INT(agent_run(&run, &set, "early fork", "t0", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    CHECK(agent_run_outcome(run)->fresh);
    CHECK_STR(agent_run_outcome(run)->fresh_reason, "no session to fork");
    CHECK_STR(agent_run_outcome(run)->fork_of, "");
    agent_run_destroy(&run);
    session_state_t state;
    CHECK_INT(session_load("fork-agent", &state), FAILURE_NOT_FOUND);

    set.fork_session = false;
    CHECK_INT(agent_run(&run, &set, "main prompt", "t1", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    char main_id[SESSION_ID_SIZE];
    snprintf(main_id, sizeof main_id, "%s", agent_run_outcome(run)->session_id);
    agent_run_destroy(&run);
    CHECK_INT(s_transcript_lines(workdir, main_id), 1);
    unlink(log_path);

    /* Two forks at once, while the main session's lock is held by someone else. */
    session_lock_t *lock = NULL;
    CHECK_INT(session_lock_try(&lock, "fork-agent"), 0);
    setenv("FAKE_CLAUDE_DELAY_MS", "300", 1);
    const char *env_a[] = {"CLOISTER_REVIEWER=security", NULL};
    const char *env_b[] = {"CLOISTER_REVIEWER=tests", NULL};
    agent_settings_t fa = s_settings("fork-agent"), fb = s_settings("fork-agent");
    fa.fork_session = fb.fork_session = true;
    fa.env = env_a;
    fb.env = env_b;
    agent_run_t *a = NULL, *b = NULL;
    CHECK_INT(agent_run_start(&a, &fa, "fork a", "ta", NULL, NULL), 0);
    CHECK_INT(agent_run_start(&b, &fb, "fork b", "tb", NULL, NULL), 0);
    bool overlap = false;
    int a_done = 0, b_done = 0;
    while (!(a_done && b_done)) {
        if (!a_done)
            a_done = agent_run_step(a, 20);
        if (!b_done)
            b_done = agent_run_step(b, 20);
        if (agent_run_pid(a) > 0 && agent_run_pid(b) > 0)
            overlap = true;
    }
    session_unlock(&lock);
    CHECK(overlap);
    const agent_outcome_t *oa = agent_run_outcome(a), *ob = agent_run_outcome(b);
    CHECK(oa->ok);
    CHECK(ob->ok);
    CHECK(!oa->fresh);
    CHECK_STR(oa->fork_of, main_id);
    CHECK_STR(ob->fork_of, main_id);
    CHECK(strcmp(oa->session_id, main_id) != 0);
    CHECK(strcmp(oa->session_id, ob->session_id) != 0);
    /* Each fork's transcript is the main one plus its own turn; the main one is unchanged. */
    CHECK_INT(s_transcript_lines(workdir, oa->session_id), 2);
    CHECK_INT(s_transcript_lines(workdir, ob->session_id), 2);
    CHECK_INT(s_transcript_lines(workdir, main_id), 1);
    CHECK_INT(session_load("fork-agent", &state), 0);
    CHECK_STR(state.session_id, main_id);
    CHECK_INT(state.runs, 1);

    json_t *log = s_log();
    CHECK_INT(json_array_size(log), 2);
    for (size_t i = 0; i < json_array_size(log); i++) {
        CHECK_STR(s_flag(log, i, "--resume"), main_id);
        CHECK(s_has_arg(log, i, "--fork-session"));
        CHECK(s_flag(log, i, "--session-id") != NULL);
    }
    json_decref(log);
    char *history = NULL;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/specialists/fork-agent/history.jsonl", env->home);
    history = testenv_read_file(path);
    CHECK(history != NULL && strstr(history, "\"fork_of\":\"") != NULL);
    free(history);
    agent_run_destroy(&a);
    agent_run_destroy(&b);

    /* A fork whose stored session the CLI lost becomes a throwaway fresh one. */
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    char transcript[PATH_MAX + 512];
    CHECK_INT(agent_transcript_path(transcript, sizeof transcript, workdir, main_id), 0);
    unlink(transcript);
    CHECK_INT(agent_run(&run, &fa, "lost fork", "t3", NULL, NULL), 0);
    CHECK(agent_run_outcome(run)->ok);
    CHECK(agent_run_outcome(run)->fresh);
    CHECK_STR(agent_run_outcome(run)->fresh_reason, "context lost");
    CHECK_INT(agent_run_outcome(run)->attempts, 2);
    agent_run_destroy(&run);
    CHECK_INT(session_load("fork-agent", &state), 0);
    CHECK_STR(state.session_id, main_id); /* still the stored one: forks never replace it */
}

int main(void)
{
    env = testenv_new("agent-runner");
    if (env == NULL)
        return 1;
    snprintf(fake, sizeof fake, "%s", testenv_bin("fake-claude"));
    if (access(fake, X_OK) != 0) {
        fprintf(stderr, "test_agent_runner: %s is not built\n", fake);
        testenv_destroy(&env);
        return 1;
    }
    char user_home[PATH_MAX], config[PATH_MAX];
    snprintf(user_home, sizeof user_home, "%s/user", env->dir);
    snprintf(config, sizeof config, "%s/claude-config", env->dir);
    snprintf(workdir, sizeof workdir, "%s/work dir", env->dir); /* a space: argv, not a shell */
    snprintf(workdir2, sizeof workdir2, "%s/other", env->dir);
    snprintf(log_path, sizeof log_path, "%s/fake.log", env->dir);
    mkdir(user_home, 0700);
    mkdir(config, 0700);
    mkdir(workdir, 0700);
    mkdir(workdir2, 0700);
    setenv("HOME", user_home, 1);
    setenv("CLAUDE_CONFIG_DIR", config, 1);
    setenv("FAKE_CLAUDE_LOG", log_path, 1);

    test_fresh_then_resumed();
    test_transcript_deleted();
    test_in_use();
    test_streaming_progress();
    test_hang_timeouts();
    test_hang_after_result();
    test_failures();
    test_session_ids_from_result();
    test_env_scrubbed();
    test_rotation_and_cwd();
    test_context_is_last_call();
    test_nul_in_stream();
    test_absurd_usage_numbers();
    test_history_not_utf8();
    test_cancel();
    test_runs_serialise();
    test_forks();

    testenv_destroy(&env);
    return check_exit_code("test_agent_runner");
}
