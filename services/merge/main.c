/* cloister-merge: the merge-agent specialist. Takes `merge-agent` tasks from the broker,
 * merges the payload's `branch` into its `target` (default main) of the repository the
 * `workspace` belongs to with the merge engine, has the agent resolve conflicts, runs the
 * tests and pushes. The job is services/merge/merge_service.{h,c}; this file is arguments,
 * configuration and the specialist skeleton (common/specialist/specialist.h).
 *
 *   cloister-merge [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]
 *                  [--grace-ms N] [--timeout S] [--worker-id ID]
 *
 * Configuration: $PANOPTICON_HOME/cloister.toml. [broker] in (unless --in or CLOISTER_IN)
 * and heartbeat_ms / heartbeat_misses (unless --heartbeat-ms), [merge] remote (default
 * origin), push_retries, queue (default true) and queue_window (default 8), [specialists.merge-agent] timeout (default 900 s: the lease of
 * a task that carries no timeout_s; --timeout overrides), model, workdir and test_command
 * (else [specialists.test-agent] test_command, else detection), and the [agent] settings
 * (command, args, permission mode, ...; the command may also come from
 * CLOISTER_AGENT_COMMAND).
 *
 * The agent's working directory. The agent CLI keys a session's transcript by its cwd
 * (docs/agent-cli.md: always spawn a specialist in the same absolute cwd), and
 * the merge-agent's session is meant to persist across merges (PAN-29 "persistent session
 * with --resume"). A conflict worktree is new for every merge, so the agent does NOT run in
 * it: it always runs in the fixed specialist workdir ([specialists.merge-agent] workdir,
 * else $PANOPTICON_HOME/specialists/merge-agent/work), the engine creates its conflict
 * worktrees under <workdir>/merges/ (so they lie inside the agent's cwd), the worktree is
 * also granted with `--add-dir <worktree>`, and the prompt names its absolute path
 * ({{worktree}}). Resume keeps working; the agent is told exactly where to work. Agent runs
 * of one specialist never overlap (the session lock), so instances on one host take turns
 * for the agent while their git work runs in parallel.
 *
 * Serialisation. Two merges into one target must never race. With [merge] queue = true
 * (the default) the merge-agents order them themselves: every merge joins the speculative
 * queue of its target (merge_queue.h, state under $PANOPTICON_HOME/specialists/merge-agent/
 * queue), candidates are tested in parallel by every replica, and only a tested candidate
 * lands, as a fast-forward; submitters set no group. With queue = false the broker
 * serialises them through the task's `group` "merge:<repository root>:<target>" (at most one
 * task of a group runs at a time), which `pan submit merge-agent` and the pipelines then
 * set; a task without a group still runs, with a warning in its progress.
 *
 * SIGHUP reads cloister.toml again between tasks (specialist_reload.h): [merge], the test
 * command, [tests] (the sandbox), [agent], [context], [pipeline] and the rest of
 * [specialists.merge-agent] apply from the next merge on; its workdir (the agent's session
 * lives there) and [broker] control need a restart.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start, 3 when a job
 * could not be stopped (see specialist.h). */
#include "merge_service.h"

#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "repo_files.h"
#include "repository.h"
#include "specialist.h"
#include "specialist_args.h"

/* The configuration in use, and the service reading it. */
typedef struct {
    merge_service_t *service;
    config_t *config;
    specialist_reload_rules_t rules;
} merge_main_t;

static const char *const s_tables[] = {
    "merge", "tests", "agent", "context", "pipeline", "specialists.test-agent", NULL};
static const specialist_reload_key_t s_restart_keys[] = {
    {"specialists." MERGE_SERVICE_SPECIALIST, "workdir"}, {"broker", "control"}, {NULL, NULL}};

/* specialist_reload_fn. */
static int s_reload(void *arg, specialist_reload_t *report)
{
    merge_main_t *self = arg;
    config_t *fresh = NULL;
    int rc = specialist_reload_load(&self->rules, self->config, &fresh, report);
    if (rc == 0 && (rc = merge_service_reload(self->service, fresh)) != 0)
        config_destroy(&fresh);
    if (rc != 0)
        return rc;
    config_destroy(&self->config);
    self->config = fresh;
    return 0;
}

static const char s_usage[] =
    "usage: cloister-merge [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
    "                      [--grace-ms N] [--timeout S] [--worker-id ID]\n"
    "Runs merge-agent tasks: merges payload.branch into payload.target (default main)\n"
    "of the repository of payload.workspace, resolving conflicts with the agent,\n"
    "running the tests and pushing. Settings: $PANOPTICON_HOME/cloister.toml.\n";

int main(int argc, char **argv)
{
    log_init("cloister-merge", LOG_LEVEL_INFO);
    /* The repository's roles and instructions: its target branch's, through git. */
    repo_files_set_reader(repository_file_at);
    static merge_main_t self = {.rules = {.specialist = MERGE_SERVICE_SPECIALIST,
                                          .tables = s_tables,
                                          .restart_keys = s_restart_keys}};
    specialist_config_t skeleton = {
        .specialist = MERGE_SERVICE_SPECIALIST, .reload = s_reload, .reload_arg = &self};
    const specialist_args_t args = {
        .program = "cloister-merge", .usage = s_usage, .timeout_flag = true};
    int code;
    if (!specialist_args_parse(&args, argc, argv, &skeleton, &code))
        return code;

    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-merge: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    self.rules.timeout_fixed = skeleton.default_timeout_s != 0;
    int applied = specialist_args_apply_config(&skeleton, config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        config_destroy(&config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }
    if (merge_service_new(&self.service, config) != 0) {
        log_error("cannot set up the merge service: %s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    self.config = config;
    log_info("agent workdir %s", merge_service_workdir(self.service));
    code = specialist_run(&skeleton, merge_service_job, self.service, NULL);
    merge_service_destroy(&self.service);
    config_destroy(&self.config);
    return code;
}
