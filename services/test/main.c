/* cloister-test: the test-agent specialist. Runs a workspace's tests per task and reports
 * TEST_RESULT, counts and failures; on request lets the agent try a simple fix
 * (services/test/test_agent.h has the whole contract).
 *
 *   cloister-test [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]
 *                 [--grace-ms N] [--worker-id ID]
 *
 * Settings come from $PANOPTICON_HOME/cloister.toml (common/config.h):
 * [specialists.test-agent] test_command (overrides detection), fix (bool, default false),
 * timeout (the lease of a task without timeout_s, default 600 s), model, workdir (the
 * agent's fixed cwd), and [agent] for the agent CLI. Endpoint and heartbeat: the flags,
 * else CLOISTER_IN and the config's [broker] in / heartbeat_ms.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad
 * config, bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "log.h"
#include "specialist.h"
#include "test_agent.h"

#include <errno.h>
#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(FILE *out)
{
    fprintf(out, "usage: cloister-test [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
                 "                     [--grace-ms N] [--worker-id ID]\n"
                 "The test-agent: per task, detects and runs the tests of payload.workspace and\n"
                 "reports TEST_RESULT, counts and failures; with payload.fix (or\n"
                 "[specialists.test-agent] fix = true) the agent tries to fix failing tests.\n");
}

static int s_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "cloister-test: %s%s%s\n", what, arg ? " " : "", arg ? arg : "");
    s_usage(stderr);
    return 2;
}

static int s_parse_int(const char *text, int min, int max, int *out)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < min || value > max)
        return -1;
    *out = (int)value;
    return 0;
}

int main(int argc, char **argv)
{
    log_init("cloister-test", LOG_LEVEL_INFO);
    specialist_config_t settings = {.specialist = TEST_AGENT_SPECIALIST};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            s_usage(stdout);
            return 0;
        }
        bool known = strcmp(arg, "--in") == 0 || strcmp(arg, "--bind") == 0 ||
                     strcmp(arg, "--advertise") == 0 || strcmp(arg, "--heartbeat-ms") == 0 ||
                     strcmp(arg, "--grace-ms") == 0 || strcmp(arg, "--worker-id") == 0;
        if (!known)
            return s_usage_error("unknown option", arg);
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value == NULL)
            return s_usage_error("missing a value for", arg);
        i++;
        if (strcmp(arg, "--in") == 0) {
            settings.in_endpoint = value;
        } else if (strcmp(arg, "--bind") == 0) {
            settings.bind_endpoint = value;
        } else if (strcmp(arg, "--advertise") == 0) {
            settings.advertise = value;
        } else if (strcmp(arg, "--worker-id") == 0) {
            settings.worker_id = value;
        } else if (strcmp(arg, "--heartbeat-ms") == 0) {
            if (s_parse_int(value, 10, 3600000, &settings.heartbeat_ms) != 0)
                return s_usage_error("--heartbeat-ms expects 10..3600000, not", value);
        } else if (s_parse_int(value, 10, 3600000, &settings.grace_ms) != 0) {
            return s_usage_error("--grace-ms expects 10..3600000, not", value);
        }
    }

    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    /* The config already holds CLOISTER_IN when it is set. */
    if (settings.in_endpoint == NULL)
        settings.in_endpoint = config_string(config, "broker", "in", NULL);
    int64_t timeout_s = config_specialist_timeout_s(config, TEST_AGENT_SPECIALIST);
    settings.default_timeout_s = timeout_s > 0 && timeout_s <= 7 * 24 * 3600 ? (int)timeout_s : 0;
    if (config_has(config, "broker", "heartbeat_ms") && settings.heartbeat_ms == 0) {
        int64_t heartbeat = config_int(config, "broker", "heartbeat_ms", 0);
        if (heartbeat >= 10 && heartbeat <= 3600000)
            settings.heartbeat_ms = (int)heartbeat;
    }

    git_libgit2_init();
    test_agent_t agent = {.config = config};
    int code = specialist_run(&settings, test_agent_job, &agent, NULL);
    git_libgit2_shutdown();
    config_destroy(&config);
    return code;
}
