/* specialist_args: the command line of a specialist service.
 *
 * Every specialist (cloister-worker, -review, -test, -merge) takes the skeleton's flags
 *
 *   [--in EP] [--bind EP] [--advertise EP] [--heartbeat-ms N] [--grace-ms N]
 *   [--worker-id ID] [--timeout S] [--help | -h]
 *
 * and fills a specialist_config_t (common/specialist/specialist.h) from them, then from
 * cloister.toml. This module does both, so a service's main.c keeps only what is its own:
 * its usage text, its own options (e.g. --workdir DIR), and for cloister-worker the
 * `--specialist NAME` and `-- CMD [ARGS...]` it runs.
 *
 * Precedence for each setting: the flag, else the configuration (which already holds the
 * environment: CLOISTER_IN overrides [broker] in, common/base/config.h), else the skeleton's
 * default (the field is left 0/NULL and specialist_run() picks it).
 *
 * Usage errors print "<program>: <what>" and the usage on stderr; the service then exits
 * with SPECIALIST_ARGS_EXIT_USAGE. --help prints the usage on stdout and exits 0. */
#ifndef CLOISTER_SPECIALIST_ARGS_H
#define CLOISTER_SPECIALIST_ARGS_H

#include "config.h"
#include "specialist.h"

#include <stdbool.h>

/* Exit code after a usage error. */
#define SPECIALIST_ARGS_EXIT_USAGE 2

/* Limits of the numeric flags (and of the same settings read from the configuration). */
#define SPECIALIST_ARGS_MIN_MS 10
#define SPECIALIST_ARGS_MAX_MS 3600000
#define SPECIALIST_ARGS_MAX_TIMEOUT_S (7 * 24 * 3600)

/* One option of the service's own that takes a string value, e.g. {"--workdir", &workdir}.
 * `value` receives a pointer into argv (borrowed from the caller of main). */
typedef struct {
    const char *flag;
    const char **value;
} specialist_args_option_t;

/* What a service's command line looks like. Every pointer is borrowed. */
typedef struct {
    /* The program name that prefixes usage errors, e.g. "cloister-review". */
    const char *program;
    /* The whole usage text, printed by --help (stdout) and after a usage error (stderr). */
    const char *usage;
    /* True when the service takes --timeout S (the lease of a task without timeout_s). */
    bool timeout_flag;
    /* The service's own string options, ended by {NULL, NULL}; NULL when it has none. */
    const specialist_args_option_t *options;
    /* Where "-- CMD [ARGS...]" goes (a pointer into argv, NULL-terminated like argv), for a
     * service that runs a command (then required). NULL: the service takes no command and
     * "--" is an unknown option. */
    char ***command;
} specialist_args_t;

/* Parses argv[1..argc-1] into `settings`: --in, --bind, --advertise and --worker-id (strings
 * pointing into argv), --heartbeat-ms and --grace-ms (SPECIALIST_ARGS_MIN_MS..
 * SPECIALIST_ARGS_MAX_MS), --timeout when args->timeout_flag (1..SPECIALIST_ARGS_MAX_TIMEOUT_S),
 * args->options, and "--" followed by the command when args->command is set (there, "--"
 * is never taken as an option's value). Fields of a flag not given are left as they are.
 * When settings->specialist is NULL on entry the service has no fixed specialist name: the
 * flag --specialist NAME is accepted, required, and checked with specialist_check_name().
 *
 * Returns true when the service should run. Returns false when main() should return
 * *exit_code at once: 0 after --help (the usage is printed on stdout), or
 * SPECIALIST_ARGS_EXIT_USAGE after a usage error ("<program>: <what>" and the usage are
 * printed on stderr, and failure_message() is "<what>", e.g. "unknown option --x"). */
bool specialist_args_parse(const specialist_args_t *args, int argc, char **argv,
                           specialist_config_t *settings, int *exit_code);

/* Fills what the flags left unset in `settings` from `config` (borrowed; the strings put
 * into `settings` are owned by it, so it must outlive the settings' use):
 *   in_endpoint       [broker] in (CLOISTER_IN when set, common/base/config.h);
 *   heartbeat_ms      [broker] heartbeat_ms, if within the flag's limits;
 *   heartbeat_misses  [broker] heartbeat_misses;
 *   default_timeout_s [specialists.<settings->specialist>] timeout (default 600 s, 900 s
 *                     for merge-agent), if within 1..SPECIALIST_ARGS_MAX_TIMEOUT_S.
 * A value out of its limits is ignored: the skeleton's default applies.
 * settings->specialist must be set. Then the bus's security (common/bus/curve.h): when CURVE
 * is on for the `in` endpoint, the process's client keys are loaded. Returns 0,
 * SPECIALIST_ARGS_DISABLED when [specialists.<name>] enabled = false (the service should
 * exit 0: it has nothing to do; logged), or the failure of loading the keys (< 0, with the
 * reason). */
#define SPECIALIST_ARGS_DISABLED 1
int specialist_args_apply_config(specialist_config_t *settings, const config_t *config);

#endif
