/* real_harness: what the test_real_* integration tests share (included by each, so every
 * function is static): the pipeline's services driving a REAL agent CLI (the pinned
 * ones from <build>/real-clis) against the scripted model (tests/model), offline. The CLI
 * is Claude Code, or the one CLOISTER_REAL_CLI names ("codex", "gemini"): CTest runs a
 * test once per CLI it applies to.
 * On top of worker_harness.h (a real broker, events recorded from its PUB socket): the
 * model server with its scenario and request log (testmodel.h), a cloister.toml whose
 * [agent] command is the real CLI, git's environment pinned, and the usual fixture
 * repositories (a bare remote, the user's clone, a dev clone: testgit.h). */
#ifndef CLOISTER_REAL_HARNESS_H
#define CLOISTER_REAL_HARNESS_H

#include "testgit.h"
#include "testmodel.h"
#include "worker_harness.h"

#include <dirent.h>
#include <sys/wait.h>

typedef struct {
    harness_t *h;
    testmodel_t model;
    testgit_fixture_t repos;
} real_env_t;

/* Prints the events, the services' logs and the model's requests of a failing test. */
static inline void real_dump(void *arg)
{
    real_env_t *r = arg;
    for (int i = 0; i < r->h->nevents; i++) {
        char *text = json_dumps(r->h->events[i], JSON_COMPACT);
        fprintf(stderr, "event: %.2000s\n", text ? text : "?");
        free(text);
    }
    char script[1200];
    snprintf(script, sizeof script,
             "cd '%s' && for f in *.log; do echo \"== $f\"; tail -n 60 \"$f\"; done >&2; "
             "echo '== model requests' >&2; cut -c1-600 model-requests.jsonl >&2",
             r->h->env->dir);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    testenv_run(r->h->env, argv, NULL, 0, 10000);
}

/* The CLI under test: CLOISTER_REAL_CLI, else "claude". */
static inline const char *real_cli(void)
{
    const char *cli = getenv("CLOISTER_REAL_CLI");
    return cli != NULL && cli[0] != '\0' ? cli : "claude";
}

static inline bool real_cli_is(const char *name)
{
    return strcmp(real_cli(), name) == 0;
}

/* cloister.toml: the CLI under test as every specialist's agent, pointed at the model,
 * plus `extra` (more TOML, may be NULL; its first lines are still in [agent]). Services
 * read it when they start. */
static inline void real_config_text(char *buf, size_t size, const testmodel_t *model,
                                    const char *extra)
{
    char args[1024] = "[]";
    if (real_cli_is("codex"))
        testmodel_codex_args(model, args, sizeof args);
    else if (real_cli_is("gemini")) /* a model of its own: "auto" would route each call */
        snprintf(args, sizeof args, "[\"-m\", \"gemini-2.5-pro\"]");
    snprintf(buf, size,
             "[broker]\nretry_backoff_ms = 50\n\n[security]\nrequire_review = false\n\n"
             "[agent]\ncli = \"%s\"\ncommand = \"%s\"\nargs = %s\n"
             "permission_mode = \"acceptEdits\"\nno_output_timeout = 60\nresult_grace_ms = 2000\n\n"
             "%s",
             real_cli(), testmodel_cli(real_cli()), args, extra ? extra : "");
}

/* Rewrites cloister.toml (real_config_text()) for the services started from now on. */
static inline void real_config(real_env_t *r, const char *extra)
{
    char path[600], text[8192];
    snprintf(path, sizeof path, "%s/cloister.toml", r->h->env->home);
    real_config_text(text, sizeof text, &r->model, extra);
    CHECK(testenv_write_file(path, text) == 0);
}

/* A broker; the scripted model with the scenario file `scenario`; real_config_text(extra)
 * as cloister.toml for the services; the fixture repositories. */
static inline real_env_t *real_env_new(const char *name, const char *scenario, const char *extra)
{
    real_env_t *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    /* The broker starts on the defaults; the model (whose port the configuration names)
     * needs the test's directory first. */
    r->h = harness_new(name);
    CHECK(r->h != NULL);
    check_on_fail(real_dump, r);
    char path[700];
    snprintf(path, sizeof path, "%s/home", r->h->env->dir);
    testgit_env(path);
    unsetenv("CLOISTER_AGENT_COMMAND");
    testmodel_start(&r->model, r->h->env);
    testmodel_use(&r->model, scenario);
    real_config(r, extra);
    testgit_fixture(&r->repos, r->h->env->dir);
    return r;
}

/* The session a specialist's agent keeps ($PANOPTICON_HOME/specialists/<name>.session), as
 * JSON (the caller owns it). */
static inline json_t *real_session(real_env_t *r, const char *specialist)
{
    char path[700];
    snprintf(path, sizeof path, "%s/specialists/%s.session", r->h->env->home, specialist);
    char *text = testenv_read_file(path);
    json_t *session = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    CHECK(session != NULL);
    return session;
}

/* The lines of a specialist's history.jsonl as a JSON array (the caller owns it). */
static inline json_t *real_history(real_env_t *r, const char *specialist)
{
    char path[700];
    snprintf(path, sizeof path, "%s/specialists/%s/history.jsonl", r->h->env->home, specialist);
    char *text = testenv_read_file(path);
    json_t *lines = json_array();
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line != NULL;
         line = strtok_r(NULL, "\n", &save))
        json_array_append_new(lines, json_loads(line, 0, NULL));
    free(text);
    return lines;
}

static inline void real_env_destroy(real_env_t **r_p)
{
    real_env_t *r = *r_p;
    if (r == NULL)
        return;
    check_on_fail(NULL, NULL);
    harness_destroy(&r->h);
    free(r);
    *r_p = NULL;
}

/* Waits for the end of task `id` (done, failed or dead); returns the event or NULL. */
static inline json_t *real_wait_end(real_env_t *r, const char *id, int timeout_ms)
{
    static const char *const ends[] = {"task.done", "task.failed", "task.dead", NULL};
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        for (int k = 0; ends[k] != NULL; k++) {
            int i = harness_find(r->h, 0, ends[k], id);
            if (i >= 0)
                return r->h->events[i];
        }
        harness_pump(r->h, 20);
    }
    fprintf(stderr, "task %s did not end within %d ms\n", id, timeout_ms);
    return NULL;
}

static inline const char *real_result_str(const json_t *event, const char *key)
{
    const json_t *value = json_object_get(json_object_get(event, "result"), key);
    return json_is_string(value) ? json_string_value(value) : "";
}

/* True when some progress event of task `id` contains `text`. */
static inline bool real_progress_has(real_env_t *r, const char *id, const char *text)
{
    for (int i = 0; (i = harness_find(r->h, i, "task.progress", id)) >= 0; i++)
        if (strstr(harness_field(r->h->events[i], "text"), text) != NULL)
            return true;
    return false;
}

/* The `served` object of request `i` of `requests` (a testmodel_requests() array). */
static inline const json_t *real_served(const json_t *requests, size_t i)
{
    return json_object_get(json_array_get(requests, i), "served");
}

/* The action (read, write, edit, run, mcp, tool) request `i` was answered with ("" for a
 * text answer): the same whatever the CLI. */
static inline const char *real_served_action(const json_t *requests, size_t i)
{
    const char *action = json_string_value(json_object_get(real_served(requests, i), "action"));
    return action ? action : "";
}

/* The tool name a progress line shows for an action of the CLI under test: Claude Code's
 * own, a Codex file change as "Edit", Gemini's own. */
static inline const char *real_progress_tool(const char *action)
{
    bool write = strcmp(action, "write") == 0;
    if (real_cli_is("codex"))
        return "Edit";
    if (real_cli_is("gemini"))
        return write ? "write_file" : "replace";
    return write ? "Write" : "Edit";
}

/* What the CLI under test tells the model after a successful edit of a file. */
static inline const char *real_edit_said(void)
{
    if (real_cli_is("codex"))
        return "Success. Updated the following files";
    if (real_cli_is("gemini"))
        return "Successfully modified file";
    return "updated successfully";
}

/* The tool request `i` of `requests` was answered with ("" for a text answer). */
static inline const char *real_served_tool(const json_t *requests, size_t i)
{
    const char *tool = json_string_value(json_object_get(real_served(requests, i), "tool"));
    return tool ? tool : "";
}

/* The result the CLI sent back for the tool call of request `i` (in request i + 1): its
 * text, or NULL when there is none. Sets *is_error. */
static inline const char *real_tool_result(const json_t *requests, size_t i, bool *is_error)
{
    const json_t *results = json_object_get(json_array_get(requests, i + 1), "results");
    const json_t *first = json_array_get(results, 0);
    *is_error = json_is_true(json_object_get(first, "is_error"));
    return json_string_value(json_object_get(first, "content"));
}

/* Live processes (not zombies) whose environment has this test's PANOPTICON_HOME, other
 * than the `keep` ones (n of them) and the model: what the services under test left
 * behind. Each is printed. */
static inline int real_leftovers(real_env_t *r, const pid_t *keep, int n)
{
    char needle[700];
    int needle_len = snprintf(needle, sizeof needle, "PANOPTICON_HOME=%s", r->h->env->home);
    int found = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc != NULL && (entry = readdir(proc)) != NULL) {
        pid_t pid = (pid_t)atoi(entry->d_name);
        bool kept = pid <= 0 || pid == getpid() || pid == r->model.pid || pid == r->h->broker;
        for (int i = 0; i < n && !kept; i++)
            kept = pid == keep[i];
        if (kept || harness_pid_gone(pid))
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue;
        static char env[1 << 16];
        size_t len = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        env[len] = '\0';
        for (size_t i = 0; i + (size_t)needle_len <= len; i += strlen(env + i) + 1) {
            if (strncmp(env + i, needle, (size_t)needle_len) == 0 && env[i + needle_len] == '\0') {
                snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
                char *cmdline = testenv_read_file(path);
                fprintf(stderr, "leftover process %d: %s\n", (int)pid, cmdline ? cmdline : "?");
                free(cmdline);
                found++;
                break;
            }
        }
    }
    if (proc != NULL)
        closedir(proc);
    return found;
}

#endif
