/* cloister-test: the test-agent specialist. Runs a workspace's tests per task and reports
 * TEST_RESULT, counts and failures; on request lets the agent try a simple fix
 * (services/tester/test_agent.h has the whole contract).
 *
 *   cloister-test [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]
 *                 [--grace-ms N] [--worker-id ID]
 *
 * Settings come from $PANOPTICON_HOME/cloister.toml (common/base/config.h):
 * [specialists.test-agent] test_command (overrides detection), fix (bool, default false),
 * timeout (the lease of a task without timeout_s, default 600 s), model, workdir (the
 * agent's fixed cwd), and [agent] for the agent CLI. Endpoint and heartbeat: the flags,
 * else CLOISTER_IN and the config's [broker] in / heartbeat_ms.
 *
 * SIGHUP reads cloister.toml again between tasks (specialist_reload.h): [specialists.test-agent],
 * [tests] (command, timeout, the sandbox), [agent], [context] and [pipeline] apply from the
 * next task on; a value it refuses keeps the settings in use.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad
 * config, bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "repo_files.h"
#include "repository.h"
#include "specialist.h"
#include "specialist_args.h"
#include "test_agent.h"

#include <git2.h>

/* The test agent's settings, swapped as a whole by a reload. */
typedef struct {
    test_agent_t agent;
    config_t *config;
    sandbox_t *sandbox;
    specialist_reload_rules_t rules;
} test_main_t;

static const char *const s_tables[] = {"tests", "agent", "context", "pipeline", NULL};

/* specialist_reload_fn. */
static int s_reload(void *arg, specialist_reload_t *report)
{
    test_main_t *self = arg;
    config_t *fresh = NULL;
    sandbox_t *sandbox = NULL;
    int rc = specialist_reload_load(&self->rules, self->config, &fresh, report);
    if (rc == 0 && (rc = sandbox_new(&sandbox, fresh)) != 0)
        config_destroy(&fresh);
    if (rc != 0)
        return rc;
    sandbox_destroy(&self->sandbox);
    config_destroy(&self->config);
    self->config = fresh;
    self->sandbox = sandbox;
    self->agent = (test_agent_t){.config = fresh, .sandbox = sandbox};
    return 0;
}

static const char s_usage[] =
    "usage: cloister-test [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
    "                     [--grace-ms N] [--worker-id ID]\n"
    "The test-agent: per task, detects and runs the tests of payload.workspace and\n"
    "reports TEST_RESULT, counts and failures; with payload.fix (or\n"
    "[specialists.test-agent] fix = true) the agent tries to fix failing tests.\n";

int main(int argc, char **argv)
{
    log_init("cloister-test", LOG_LEVEL_INFO);
    /* The repository's roles and instructions: its target branch's, through git. */
    repo_files_set_reader(repository_file_at);
    static test_main_t self = {.rules = {.specialist = TEST_AGENT_SPECIALIST, .tables = s_tables}};
    specialist_config_t settings = {
        .specialist = TEST_AGENT_SPECIALIST, .reload = s_reload, .reload_arg = &self};
    const specialist_args_t args = {.program = "cloister-test", .usage = s_usage};
    int code;
    if (!specialist_args_parse(&args, argc, argv, &settings, &code))
        return code;

    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-test: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    int applied = specialist_args_apply_config(&settings, config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        config_destroy(&config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }

    if (sandbox_new(&self.sandbox, config) != 0) {
        log_error("%s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    self.config = config;
    self.agent = (test_agent_t){.config = config, .sandbox = self.sandbox};
    git_libgit2_init();
    code = specialist_run(&settings, test_agent_job, &self.agent, NULL);
    git_libgit2_shutdown();
    sandbox_destroy(&self.sandbox);
    config_destroy(&self.config);
    return code;
}
