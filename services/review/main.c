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
 * else $PANOPTICON_HOME/specialists/review-agent/work. The commit under review changes
 * with every task: it is checked out in a worktree under that workdir (worktrees/), and
 * the agent gets it through `--add-dir <worktree>` (its tools may read there) and its
 * absolute path in the prompt. Running the agent in the workspace itself would start a
 * fresh session per repository and lose the specialist's memory.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad config,
 * bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "prompt.h"
#include "review_job.h"
#include "specialist.h"
#include "specialist_args.h"

#include <git2.h>

static const char s_usage[] =
    "usage: cloister-review [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
    "                       [--grace-ms N] [--worker-id ID] [--workdir DIR]\n"
    "                       [--config FILE]\n"
    "The review-agent: per task, reviews payload.branch of payload.workspace against\n"
    "payload.target (default main) and reports REVIEW_RESULT, FINDINGS and GATE.\n";

int main(int argc, char **argv)
{
    log_init("cloister-review", LOG_LEVEL_INFO);
    specialist_config_t settings = {.specialist = REVIEW_SPECIALIST};
    const char *config_path = NULL;
    review_service_t service = {0};
    const specialist_args_option_t options[] = {
        {"--workdir", &service.workdir}, {"--config", &config_path}, {NULL, NULL}};
    const specialist_args_t args = {
        .program = "cloister-review", .usage = s_usage, .options = options};
    int code;
    if (!specialist_args_parse(&args, argc, argv, &settings, &code))
        return code;

    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-review: %s\n", failure_message());
        return 1;
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
    sandbox_t *sandbox = NULL;
    if (sandbox_new(&sandbox, config) != 0) {
        log_error("%s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    service.config = config;
    service.prompts_dir = prompts_dir;
    service.sandbox = sandbox;
    int applied = specialist_args_apply_config(&settings, config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        sandbox_destroy(&sandbox);
        config_destroy(&config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }

    git_libgit2_init();
    log_info("review mode %s, prompts in %s", review_mode_name(service.mode), prompts_dir);
    code = specialist_run(&settings, review_job, &service, NULL);
    git_libgit2_shutdown();
    sandbox_destroy(&sandbox);
    config_destroy(&config);
    return code;
}
