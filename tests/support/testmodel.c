/* testmodel: the scripted model and the real agent CLIs for integration tests. */
#include "testmodel.h"

#include "check.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TESTMODEL_START_MS 10000

/* `name` searched in PATH into buf; false when it is not there. */
static bool s_which(char *buf, size_t size, const char *name)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir != NULL;
         dir = strtok_r(NULL, ":", &save)) {
        snprintf(buf, size, "%s/%s", dir, name);
        if (access(buf, X_OK) == 0)
            return true;
    }
    return false;
}

static bool s_port_written(void *arg)
{
    return access(arg, R_OK) == 0;
}

/* What the CLIs need to talk to the model and nothing else. */
static void s_cli_env(const testmodel_t *model, const testenv_t *env)
{
    char path[PATH_MAX];
    /* Codex: its own home, a key in the environment (no `codex login` needed), and a
     * temporary directory that does not hold its home: under the system's temporary
     * directory it refuses to set up the helper its sandbox runs commands with
     * (docs/agent-codex.md §1.2). */
    snprintf(path, sizeof path, "%s/codex-home", env->dir);
    CHECK(mkdir(path, 0700) == 0 || errno == EEXIST);
    setenv("CODEX_HOME", path, 1);
    setenv("CODEX_API_KEY", "sk-scripted-model", 1);
    snprintf(path, sizeof path, "%s/tmp", env->dir);
    CHECK(mkdir(path, 0700) == 0 || errno == EEXIST);
    setenv("TMPDIR", path, 1);
    unsetenv("RUST_BACKTRACE");
    /* Gemini: a key, the model as its API's base URL, and a home of its own whose settings
     * choose the key (with only a base URL in the environment the CLI wants a gateway). */
    setenv("GEMINI_API_KEY", "scripted-model-key", 1);
    setenv("GOOGLE_GEMINI_BASE_URL", model->url, 1);
    snprintf(path, sizeof path, "%s/gemini-home/.gemini/settings.json", env->dir);
    CHECK(testenv_write_file(path, "{\"security\": {\"auth\": {\"selectedType\": "
                                   "\"gemini-api-key\"}}}\n") == 0);
    snprintf(path, sizeof path, "%s/gemini-home", env->dir);
    setenv("GEMINI_CLI_HOME", path, 1);
    setenv("ANTHROPIC_BASE_URL", model->url, 1);
    setenv("ANTHROPIC_API_KEY", "sk-ant-scripted-model", 1);
    unsetenv("ANTHROPIC_AUTH_TOKEN");
    snprintf(path, sizeof path, "%s/claude-config", env->dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    /* Two retries of a failed API call (the CLI's default is ten, minutes apart). */
    setenv("CLAUDE_CODE_MAX_RETRIES", "2", 1);
    setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1", 1);
    setenv("DISABLE_AUTOUPDATER", "1", 1);
    /* Root may run a bypass permission mode only in a sandbox (docs/agent-cli.md §1). */
    setenv("IS_SANDBOX", "1", 1);
}

void testmodel_start(testmodel_t *model, testenv_t *env)
{
    memset(model, 0, sizeof *model);
    char node[PATH_MAX], script[PATH_MAX], port_file[PATH_MAX];
    if (!s_which(node, sizeof node, "node")) {
        fprintf(stderr, "testmodel: node is not in PATH (deploy/setup.sh installs it)\n");
        CHECK(false);
    }
    snprintf(script, sizeof script, "%s/tests/model/model.mjs", CLOISTER_SOURCE_DIR);
    snprintf(port_file, sizeof port_file, "%s/model.port", env->dir);
    snprintf(model->scenario, sizeof model->scenario, "%s/model-scenario.json", env->dir);
    snprintf(model->log, sizeof model->log, "%s/model-requests.jsonl", env->dir);
    testmodel_write(model, "{\"rules\": []}");
    char *argv[] = {node,       script,     "--scenario",     model->scenario, "--log",
                    model->log, "--port-file", port_file, NULL};
    model->pid = testenv_spawn(env, "model", argv);
    CHECK(model->pid > 0);
    if (!testenv_wait_until(s_port_written, port_file, TESTMODEL_START_MS)) {
        char log[PATH_MAX];
        snprintf(log, sizeof log, "%s/model.log", env->dir);
        char *text = testenv_read_file(log);
        fprintf(stderr, "testmodel: the scripted model did not start: %s\n", text ? text : "");
        free(text);
        CHECK(false);
    }
    char *port = testenv_read_file(port_file);
    model->port = port ? atoi(port) : 0;
    free(port);
    CHECK(model->port > 0);
    snprintf(model->url, sizeof model->url, "http://127.0.0.1:%d", model->port);
    s_cli_env(model, env);
}

void testmodel_write(testmodel_t *model, const char *json)
{
    json_error_t error;
    json_t *parsed = json_loads(json, 0, &error);
    if (parsed == NULL)
        fprintf(stderr, "testmodel: scenario is not JSON: %s\n", error.text);
    CHECK(parsed != NULL);
    json_decref(parsed);
    /* Written whole and renamed: the model never reads half a scenario. */
    char temp[600];
    snprintf(temp, sizeof temp, "%s.tmp", model->scenario);
    CHECK(testenv_write_file(temp, json) == 0);
    CHECK(rename(temp, model->scenario) == 0);
}

void testmodel_use(testmodel_t *model, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tests/model/scenarios/%s", CLOISTER_SOURCE_DIR, name);
    char *text = testenv_read_file(path);
    if (text == NULL)
        fprintf(stderr, "testmodel: cannot read the scenario %s\n", path);
    CHECK(text != NULL);
    testmodel_write(model, text);
    free(text);
}

const char *const *testmodel_codex_argv(const testmodel_t *model)
{
    static char provider[256];
    /* /tmp stays out of the sandbox's writable roots: to keep a writable root's .git
     * read-only, the sandbox mounts over it, and bubblewrap creates /tmp/.git on the
     * machine when there is none (observed), which makes every directory of /tmp look
     * inside a repository. TMPDIR, the test's own, stays writable. */
    static const char *argv[] = {"-c", "model_provider=scripted", "-c", provider, "-c",
                                 "sandbox_workspace_write.exclude_slash_tmp=true", NULL};
    snprintf(provider, sizeof provider,
             "model_providers.scripted={name=\"scripted\", base_url=\"%s/v1\", "
             "wire_api=\"responses\", request_max_retries=2, stream_max_retries=2}",
             model->url);
    return argv;
}

void testmodel_codex_args(const testmodel_t *model, char *buf, size_t size)
{
    const char *const *argv = testmodel_codex_argv(model);
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; argv[i] != NULL && used < size; i++) /* TOML literal strings */
        used += (size_t)snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", argv[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
}

json_t *testmodel_requests_of(const testmodel_t *model, const char *rule)
{
    json_t *all = json_array();
    char *text = testenv_read_file(model->log);
    for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *entry = json_loads(line, 0, NULL);
        const char *its = json_string_value(json_object_get(entry, "rule"));
        if (entry != NULL && (rule == NULL || (its != NULL && strcmp(its, rule) == 0)))
            json_array_append(all, entry);
        json_decref(entry);
    }
    free(text);
    return all;
}

json_t *testmodel_requests(const testmodel_t *model)
{
    return testmodel_requests_of(model, NULL);
}

const char *testmodel_cli(const char *name)
{
    static char slots[3][PATH_MAX];
    static int next;
    char *path = slots[next++ % 3];
    snprintf(path, PATH_MAX, "%s/node_modules/.bin/%s", CLOISTER_REAL_CLIS_DIR, name);
    if (access(path, X_OK) != 0) {
        fprintf(stderr,
                "testmodel: %s is not installed (%s): the CTest fixture "
                "integration.real_clis_install installs the pinned CLIs from npm "
                "(tests/model/install_clis.sh %s)\n",
                name, path, CLOISTER_REAL_CLIS_DIR);
        CHECK(false);
    }
    return path;
}
