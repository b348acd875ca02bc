/* cloister-review: the review-agent specialist. Per task it diffs a branch against its
 * target, runs the configured checks, asks the agent for a review and turns the verdict
 * and findings into a merge gate (services/review/review_job.h has the whole contract).
 *
 *   cloister-review [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]
 *                   [--grace-ms N] [--worker-id ID] [--workdir DIR] [--config FILE]
 *
 * Settings come from cloister.toml (--config, else $PANOPTICON_HOME/cloister.toml):
 * [review] mode (strict|normal|yolo|disabled), checks, check_timeout_s, diff_budget_chars;
 * [specialists.review-agent] model, timeout (the lease of a task without timeout_s),
 * workdir; [agent] for the agent CLI and prompts_dir; [context] for the prompt's budgets.
 *
 * The agent's working directory. The agent CLI finds a session by its cwd, so the agent
 * always runs in one fixed directory: --workdir, else [specialists.review-agent] workdir,
 * else $PANOPTICON_HOME/specialists/review-agent/work. The workspace under review changes
 * with every task; the agent gets it through `--add-dir <workspace>` (its tools may read
 * there) and its absolute path in the prompt. Running the agent in the workspace itself
 * would start a fresh session per repository and lose the specialist's memory.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad config,
 * bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "log.h"
#include "prompt.h"
#include "review_job.h"
#include "specialist.h"

#include <errno.h>
#include <git2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: cloister-review [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
            "                       [--grace-ms N] [--worker-id ID] [--workdir DIR]\n"
            "                       [--config FILE]\n"
            "The review-agent: per task, reviews payload.branch of payload.workspace against\n"
            "payload.target (default main) and reports REVIEW_RESULT, FINDINGS and GATE.\n");
}

static int s_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "cloister-review: %s%s%s\n", what, arg ? " " : "", arg ? arg : "");
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
    log_init("cloister-review", LOG_LEVEL_INFO);
    specialist_config_t settings = {.specialist = REVIEW_SPECIALIST};
    const char *config_path = NULL;
    review_service_t service = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            s_usage(stdout);
            return 0;
        }
        bool known = strcmp(arg, "--in") == 0 || strcmp(arg, "--bind") == 0 ||
                     strcmp(arg, "--advertise") == 0 || strcmp(arg, "--heartbeat-ms") == 0 ||
                     strcmp(arg, "--grace-ms") == 0 || strcmp(arg, "--worker-id") == 0 ||
                     strcmp(arg, "--workdir") == 0 || strcmp(arg, "--config") == 0;
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
        } else if (strcmp(arg, "--workdir") == 0) {
            service.workdir = value;
        } else if (strcmp(arg, "--config") == 0) {
            config_path = value;
        } else if (strcmp(arg, "--heartbeat-ms") == 0) {
            if (s_parse_int(value, 10, 3600000, &settings.heartbeat_ms) != 0)
                return s_usage_error("--heartbeat-ms expects 10..3600000, not", value);
        } else if (s_parse_int(value, 10, 3600000, &settings.grace_ms) != 0) {
            return s_usage_error("--grace-ms expects 10..3600000, not", value);
        }
    }

    config_t *config = NULL;
    if (config_load(config_path, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    char prompts_dir[4096];
    if (review_mode_parse(&service.mode, config_string(config, "review", "mode", "normal")) != 0 ||
        prompt_dir(prompts_dir, sizeof prompts_dir, config, CLOISTER_PROMPTS_DIR) != 0) {
        log_error("%s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    service.config = config;
    service.prompts_dir = prompts_dir;
    if (settings.in_endpoint == NULL && getenv("CLOISTER_IN") == NULL)
        settings.in_endpoint = config_string(config, "broker", "in", NULL);
    if (settings.heartbeat_ms == 0)
        settings.heartbeat_ms = (int)config_int(config, "broker", "heartbeat_ms", 0);
    settings.heartbeat_misses = (int)config_int(config, "broker", "heartbeat_misses", 0);
    settings.default_timeout_s = (int)config_specialist_timeout_s(config, REVIEW_SPECIALIST);

    git_libgit2_init();
    log_info("review mode %s, prompts in %s", review_mode_name(service.mode), prompts_dir);
    int code = specialist_run(&settings, review_job, &service, NULL);
    git_libgit2_shutdown();
    config_destroy(&config);
    return code;
}
