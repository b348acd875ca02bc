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
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad
 * config, bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "specialist.h"
#include "specialist_args.h"
#include "test_agent.h"

#include <git2.h>

static const char s_usage[] =
    "usage: cloister-test [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
    "                     [--grace-ms N] [--worker-id ID]\n"
    "The test-agent: per task, detects and runs the tests of payload.workspace and\n"
    "reports TEST_RESULT, counts and failures; with payload.fix (or\n"
    "[specialists.test-agent] fix = true) the agent tries to fix failing tests.\n";

int main(int argc, char **argv)
{
    log_init("cloister-test", LOG_LEVEL_INFO);
    specialist_config_t settings = {.specialist = TEST_AGENT_SPECIALIST};
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

    sandbox_t *sandbox = NULL;
    if (sandbox_new(&sandbox, config) != 0) {
        log_error("%s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    git_libgit2_init();
    test_agent_t agent = {.config = config, .sandbox = sandbox};
    code = specialist_run(&settings, test_agent_job, &agent, NULL);
    git_libgit2_shutdown();
    sandbox_destroy(&sandbox);
    config_destroy(&config);
    return code;
}
