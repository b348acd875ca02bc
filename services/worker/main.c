/* cloister-worker: the generic specialist. Runs one command per task on the specialist
 * skeleton (common/specialist/specialist.h).
 *
 *   cloister-worker --specialist NAME [--in EP] [--bind EP] [--advertise EP]
 *                   [--heartbeat-ms N] [--timeout S] [--grace-ms N] [--worker-id ID]
 *                   -- CMD [ARGS...]
 *
 * Per task, CMD runs once (argv, no shell) in its own process group:
 *  - stdin: the task as one JSON object (id, attempt, specialist, priority, source, title,
 *    issue, group, max_attempts, timeout_s, payload, context) and a newline, then EOF;
 *  - environment: CLOISTER_TASK_ID, CLOISTER_TASK_ATTEMPT, CLOISTER_SPECIALIST,
 *    CLOISTER_PRIORITY, CLOISTER_TITLE, CLOISTER_ISSUE, and from the payload when present
 *    CLOISTER_WORKSPACE, CLOISTER_BRANCH, CLOISTER_TARGET, CLOISTER_PR_URL (inherited
 *    values of these names are removed);
 *  - stdout: every line is forwarded as a progress event of kind "output" (a NUL byte in
 *    it becomes U+FFFD, a CRLF line end is a line end); lines `KEY: value` (UPPER_SNAKE
 *    keys, as in the agents' result markers, common/agent/markers.h) become fields of the result
 *    map (the last value wins; a key with `- item` lines becomes an array); a line
 *    `NEXT: {json}` adds a next task, a JSON object with the `submit` fields (id and
 *    specialist required), committed by the broker together with this task's result (an
 *    invalid one is reported as progress of kind "info" and skipped);
 *  - exit status 0 is `done`; anything else is `failed`, with the exit code (or signal)
 *    and the last non-empty line of stderr in `error`. The result map also has
 *    `exit_code` and `duration_ms`.
 * A cancel, the task's timeout (--timeout is the default when a task has none) or SIGTERM
 * stops the command: SIGTERM to its group, SIGKILL half the --grace-ms later (default 5000
 * ms, so 2500 ms; at least 200 ms), so the command is gone before the skeleton's grace for
 * the job runs out, even when it ignores SIGTERM.
 *
 * Settings: the flags, else $PANOPTICON_HOME/cloister.toml (common/base/config.h) like every
 * specialist: [broker] in (CLOISTER_IN overrides it), heartbeat_ms and heartbeat_misses,
 * and [specialists.NAME] timeout as the default --timeout.
 *
 * SIGHUP reads cloister.toml again between tasks (specialist_reload.h): [specialists.NAME]
 * timeout applies to the next task without timeout_s (unless --timeout fixes it); the
 * command itself comes from the command line and needs a restart to change.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start (bad
 * config, bind failed), 3 when a command could not be stopped (see specialist.h). */
#include "worker_job.h"

#include "config.h"
#include "failure.h"
#include "home.h"
#include "log.h"
#include "specialist.h"
#include "specialist_args.h"

#include <stdio.h>

/* The shortest --grace-ms: half of it goes to the command between SIGTERM and SIGKILL,
 * the rest covers noticing the stop and reaping. */
#define WORKER_MIN_GRACE_MS 200
/* The configuration in use and what a reload compares it with. */
typedef struct {
    config_t *config;
    specialist_reload_rules_t rules;
} worker_main_t;

/* specialist_reload_fn: only the lease default is read from the file after start. */
static int s_reload(void *arg, specialist_reload_t *report)
{
    worker_main_t *self = arg;
    config_t *fresh = NULL;
    int rc = specialist_reload_load(&self->rules, self->config, &fresh, report);
    if (rc != 0)
        return rc;
    config_destroy(&self->config);
    self->config = fresh;
    return 0;
}

static const char s_usage[] =
    "usage: cloister-worker --specialist NAME [--in EP] [--bind EP] [--advertise EP]\n"
    "                       [--heartbeat-ms N] [--timeout S] [--grace-ms N]\n"
    "                       [--worker-id ID] -- CMD [ARGS...]\n"
    "Runs CMD once per task of specialist NAME: the task as JSON on stdin, its fields\n"
    "in CLOISTER_* variables, stdout lines as progress, `KEY: value` lines into the\n"
    "result, `NEXT: {json submit}` lines as next tasks, exit 0 = done.\n"
    "Endpoint, heartbeat and timeout not given as flags come from CLOISTER_IN and\n"
    "$PANOPTICON_HOME/cloister.toml ([broker], [specialists.NAME] timeout).\n"
    "A stopped command (cancel, timeout, shutdown) gets SIGTERM, then SIGKILL after\n"
    "half of --grace-ms (default 5000, at least 200).\n";

int main(int argc, char **argv)
{
    log_init("cloister-worker", LOG_LEVEL_INFO);
    worker_t worker = {0};
    const specialist_args_t args = {
        .program = "cloister-worker",
        .usage = s_usage,
        .timeout_flag = true,
        .command = &worker.argv,
    };
    static worker_main_t self;
    specialist_config_t settings = {.reload = s_reload, .reload_arg = &self};
    int code;
    if (!specialist_args_parse(&args, argc, argv, &settings, &code))
        return code;
    if (settings.grace_ms != 0 && settings.grace_ms < WORKER_MIN_GRACE_MS) {
        fprintf(stderr, "cloister-worker: --grace-ms must be at least %d\n%s",
                WORKER_MIN_GRACE_MS, s_usage);
        return SPECIALIST_ARGS_EXIT_USAGE;
    }
    worker.kill_grace_ms =
        (settings.grace_ms ? settings.grace_ms : SPECIALIST_DEFAULT_GRACE_MS) / 2;

    /* Everything it writes under the state home is this user's alone (home.h). */
    if (home_secure() != 0) {
        fprintf(stderr, "cloister-worker: %s\n", failure_message());
        return 1;
    }
    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("cannot load the configuration: %s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    self.rules = (specialist_reload_rules_t){.specialist = settings.specialist,
                                             .timeout_fixed = settings.default_timeout_s != 0};
    int applied = specialist_args_apply_config(&settings, config);
    if (applied != 0) {
        if (applied < 0)
            log_error("%s", failure_message());
        config_destroy(&config);
        return applied == SPECIALIST_ARGS_DISABLED ? 0 : SPECIALIST_EXIT_SETUP;
    }
    self.config = config;
    code = specialist_run(&settings, worker_job, &worker, NULL);
    config_destroy(&self.config);
    return code;
}
