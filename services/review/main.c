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
 * SIGHUP reads cloister.toml again between tasks (specialist_reload.h): [review], [tests]
 * (the sandbox), [agent], [context], [pipeline] and [specialists.review-agent] apply from the
 * next task on; a value it refuses (a mode it does not know) keeps the settings in use.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad config,
 * bind failed), 3 when a job could not be stopped (see specialist.h). */
#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "repo_files.h"
#include "repository.h"
#include "prompt.h"
#include "review_job.h"
#include "specialist.h"
#include "specialist_args.h"

#include <git2.h>
#include <string.h>

/* What the service reads at each task, swapped as a whole by a reload. */
typedef struct {
    review_service_t service;
    config_t *config;
    sandbox_t *sandbox;
    char prompts_dir[4096];
    specialist_reload_rules_t rules;
} review_main_t;

static const char *const s_tables[] = {"review", "tests", "agent", "context", "pipeline", NULL};

/* Fills the service's settings from `config` (borrowed; kept by the service on success).
 * Returns 0, or a failure with the reason; `self` is then unchanged. */
static int s_settings(review_main_t *self, config_t *config)
{
    review_mode_t mode;
    char prompts_dir[sizeof self->prompts_dir];
    sandbox_t *sandbox = NULL;
    int rc = review_mode_parse(&mode, config_string(config, "review", "mode", "normal"));
    if (rc == 0)
        rc = prompt_dir(prompts_dir, sizeof prompts_dir, config, CLOISTER_PROMPTS_DIR);
    if (rc == 0)
        rc = sandbox_new(&sandbox, config);
    if (rc != 0)
        return rc;
    sandbox_destroy(&self->sandbox);
    config_destroy(&self->config);
    self->config = config;
    self->sandbox = sandbox;
    memcpy(self->prompts_dir, prompts_dir, sizeof prompts_dir);
    self->service.config = config;
    self->service.mode = mode;
    self->service.prompts_dir = self->prompts_dir;
    self->service.sandbox = sandbox;
    return 0;
}

/* specialist_reload_fn. */
static int s_reload(void *arg, specialist_reload_t *report)
{
    review_main_t *self = arg;
    config_t *fresh = NULL;
    int rc = specialist_reload_load(&self->rules, self->config, &fresh, report);
    if (rc == 0 && (rc = s_settings(self, fresh)) != 0)
        config_destroy(&fresh);
    if (rc == 0)
        log_info("review mode %s, prompts in %s", review_mode_name(self->service.mode),
                 self->prompts_dir);
    return rc;
}

static const char s_usage[] =
    "usage: cloister-review [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
    "                       [--grace-ms N] [--worker-id ID] [--workdir DIR]\n"
    "                       [--config FILE]\n"
    "The review-agent: per task, reviews payload.branch of payload.workspace against\n"
    "payload.target (default main) and reports REVIEW_RESULT, FINDINGS and GATE.\n";

int main(int argc, char **argv)
{
    log_init("cloister-review", LOG_LEVEL_INFO);
    /* The repository's roles and instructions: its target branch's, through git. */
    repo_files_set_reader(repository_file_at);
    static review_main_t self;
    specialist_config_t settings = {
        .specialist = REVIEW_SPECIALIST, .reload = s_reload, .reload_arg = &self};
    const char *config_path = NULL;
    const specialist_args_option_t options[] = {
        {"--workdir", &self.service.workdir}, {"--config", &config_path}, {NULL, NULL}};
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
    if (s_settings(&self, config) != 0) {
        log_error("%s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    self.rules = (specialist_reload_rules_t){
        .specialist = REVIEW_SPECIALIST, .config_path = config_path, .tables = s_tables};
    int applied = specialist_args_apply_config(&settings, self.config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        sandbox_destroy(&self.sandbox);
        config_destroy(&self.config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }

    git_libgit2_init();
    log_info("review mode %s, prompts in %s", review_mode_name(self.service.mode),
             self.prompts_dir);
    code = specialist_run(&settings, review_job, &self.service, NULL);
    git_libgit2_shutdown();
    sandbox_destroy(&self.sandbox);
    config_destroy(&self.config);
    return code;
}
