/* cloister-merge: the merge-agent specialist. Takes `merge-agent` tasks from the broker,
 * merges the payload's `branch` into its `target` (default main) of the repository the
 * `workspace` belongs to with the merge engine, has the agent resolve conflicts, runs the
 * tests and pushes. The job is services/merge/merge_service.{h,c}; this file is arguments,
 * configuration and the specialist skeleton (common/specialist.h).
 *
 *   cloister-merge [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]
 *                  [--grace-ms N] [--timeout S] [--worker-id ID]
 *
 * Configuration: $PANOPTICON_HOME/cloister.toml. [broker] in (unless --in or CLOISTER_IN),
 * [merge] remote (default origin) and push_retries, [specialists.merge-agent] timeout
 * (default 900 s: the lease of a task that carries no timeout_s; --timeout overrides),
 * model, workdir and test_command (else [specialists.test-agent] test_command, else
 * detection), and the [agent] settings (command, args, permission mode, ...; the
 * command may also come from CLOISTER_AGENT_COMMAND).
 *
 * The agent's working directory. The agent CLI keys a session's transcript by its cwd
 * (shared/reference/agent-cli.md: always spawn a specialist in the same absolute cwd), and
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
 * Serialisation. Two merges into one target must never race. The broker guarantees it
 * through the task's `group` (at most one task of a group runs at a time); the group is
 * chosen by whoever submits -- a worker cannot change it after the fact. Submitters MUST set
 * `group` to "merge:<repository root>:<target>"; `pan submit merge-agent` and
 * `pan approve` do. A task without a group still runs, with a warning in its progress.
 *
 * Exit codes: 0 after SIGTERM/SIGINT, 2 on bad usage, 1 when it cannot start, 3 when a job
 * could not be stopped (see specialist.h). */
#include "merge_service.h"

#include "config.h"
#include "failure.h"
#include "log.h"
#include "specialist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_usage(FILE *out)
{
    fprintf(out,
            "usage: cloister-merge [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N]\n"
            "                      [--grace-ms N] [--timeout S] [--worker-id ID]\n"
            "Runs merge-agent tasks: merges payload.branch into payload.target (default main)\n"
            "of the repository of payload.workspace, resolving conflicts with the agent,\n"
            "running the tests and pushing. Settings: $PANOPTICON_HOME/cloister.toml.\n");
}

static int s_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "cloister-merge: %s%s%s\n", what, arg ? " " : "", arg ? arg : "");
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

/* Fills `skeleton` from the arguments. Returns -1 when parsing may go on to run, or an
 * exit code (0 after --help, 2 on a usage error). */
static int s_parse_args(int argc, char **argv, specialist_config_t *skeleton)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            s_usage(stdout);
            return 0;
        }
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        bool known = strcmp(arg, "--in") == 0 || strcmp(arg, "--bind") == 0 ||
                     strcmp(arg, "--advertise") == 0 || strcmp(arg, "--heartbeat-ms") == 0 ||
                     strcmp(arg, "--grace-ms") == 0 || strcmp(arg, "--timeout") == 0 ||
                     strcmp(arg, "--worker-id") == 0;
        if (!known)
            return s_usage_error("unknown option", arg);
        if (value == NULL)
            return s_usage_error("missing a value for", arg);
        i++;
        if (strcmp(arg, "--in") == 0) {
            skeleton->in_endpoint = value;
        } else if (strcmp(arg, "--bind") == 0) {
            skeleton->bind_endpoint = value;
        } else if (strcmp(arg, "--advertise") == 0) {
            skeleton->advertise = value;
        } else if (strcmp(arg, "--worker-id") == 0) {
            skeleton->worker_id = value;
        } else if (strcmp(arg, "--heartbeat-ms") == 0) {
            if (s_parse_int(value, 10, 3600000, &skeleton->heartbeat_ms) != 0)
                return s_usage_error("--heartbeat-ms expects 10..3600000, not", value);
        } else if (strcmp(arg, "--timeout") == 0) {
            if (s_parse_int(value, 1, 7 * 24 * 3600, &skeleton->default_timeout_s) != 0)
                return s_usage_error("--timeout expects seconds (1..604800), not", value);
        } else if (s_parse_int(value, 10, 3600000, &skeleton->grace_ms) != 0) {
            return s_usage_error("--grace-ms expects 10..3600000, not", value);
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    log_init("cloister-merge", LOG_LEVEL_INFO);
    specialist_config_t skeleton = {.specialist = MERGE_SERVICE_SPECIALIST};
    int code = s_parse_args(argc, argv, &skeleton);
    if (code >= 0)
        return code;

    config_t *config = NULL;
    if (config_load(NULL, &config) != 0) {
        log_error("%s", failure_message());
        return SPECIALIST_EXIT_SETUP;
    }
    if (skeleton.in_endpoint == NULL)
        skeleton.in_endpoint = config_string(config, "broker", "in", SPECIALIST_DEFAULT_IN);
    if (skeleton.default_timeout_s == 0)
        skeleton.default_timeout_s =
            (int)config_specialist_timeout_s(config, MERGE_SERVICE_SPECIALIST);
    merge_service_t *service = NULL;
    if (merge_service_new(&service, config) != 0) {
        log_error("cannot set up the merge service: %s", failure_message());
        config_destroy(&config);
        return SPECIALIST_EXIT_SETUP;
    }
    log_info("agent workdir %s", merge_service_workdir(service));
    code = specialist_run(&skeleton, merge_service_job, service, NULL);
    merge_service_destroy(&service);
    config_destroy(&config);
    return code;
}
