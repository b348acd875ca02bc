/* specialist_args: the command line of a specialist service (see specialist_args.h). */
#include "specialist_args.h"

#include "curve.h"

#include "failure.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records and prints "<program>: <what>[ <arg>]" and the usage; returns the usage exit
 * code. */
static int s_usage_error(const specialist_args_t *args, const char *what, const char *arg)
{
    failure_set(FAILURE_INVALID, "%s%s%s", what, arg ? " " : "", arg ? arg : "");
    fprintf(stderr, "%s: %s\n", args->program, failure_message());
    fputs(args->usage, stderr);
    return SPECIALIST_ARGS_EXIT_USAGE;
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

/* Where the value of the service's own option `flag` goes, or NULL if it has none. */
static const char **s_own_option(const specialist_args_t *args, const char *flag)
{
    for (const specialist_args_option_t *o = args->options; o != NULL && o->flag != NULL; o++)
        if (strcmp(o->flag, flag) == 0)
            return o->value;
    return NULL;
}

/* Where the string value of the skeleton flag `flag` goes, or NULL if it is not one. */
static const char **s_string_flag(const specialist_args_t *args, specialist_config_t *settings,
                                  bool specialist_flag, const char *flag)
{
    if (strcmp(flag, "--in") == 0)
        return &settings->in_endpoint;
    if (strcmp(flag, "--bind") == 0)
        return &settings->bind_endpoint;
    if (strcmp(flag, "--advertise") == 0)
        return &settings->advertise;
    if (strcmp(flag, "--worker-id") == 0)
        return &settings->worker_id;
    if (specialist_flag && strcmp(flag, "--specialist") == 0)
        return &settings->specialist;
    return s_own_option(args, flag);
}

/* True if `flag` is a numeric flag of this service. */
static bool s_is_number_flag(const specialist_args_t *args, const char *flag)
{
    return strcmp(flag, "--heartbeat-ms") == 0 || strcmp(flag, "--grace-ms") == 0 ||
           (args->timeout_flag && strcmp(flag, "--timeout") == 0);
}

/* Parses the numeric flag `flag` (s_is_number_flag()) = `value` into `settings`. Returns 0,
 * or the usage exit code after a bad value. */
static int s_number_flag(const specialist_args_t *args, specialist_config_t *settings,
                         const char *flag, const char *value)
{
    if (strcmp(flag, "--heartbeat-ms") == 0) {
        if (s_parse_int(value, SPECIALIST_ARGS_MIN_MS, SPECIALIST_ARGS_MAX_MS,
                        &settings->heartbeat_ms) != 0)
            return s_usage_error(args, "--heartbeat-ms expects 10..3600000, not", value);
        return 0;
    }
    if (strcmp(flag, "--grace-ms") == 0) {
        if (s_parse_int(value, SPECIALIST_ARGS_MIN_MS, SPECIALIST_ARGS_MAX_MS,
                        &settings->grace_ms) != 0)
            return s_usage_error(args, "--grace-ms expects 10..3600000, not", value);
        return 0;
    }
    if (s_parse_int(value, 1, SPECIALIST_ARGS_MAX_TIMEOUT_S, &settings->default_timeout_s) != 0)
        return s_usage_error(args, "--timeout expects seconds (1..604800), not", value);
    return 0;
}

/* Checks what must follow the options: the specialist name when it comes from the command
 * line, and the command after "--" (argv[i] is where the options stopped). */
static int s_check_rest(const specialist_args_t *args, int argc, char **argv, int i,
                        specialist_config_t *settings, bool specialist_flag)
{
    if (specialist_flag && settings->specialist == NULL)
        return s_usage_error(args, "--specialist NAME is required", NULL);
    if (specialist_flag && specialist_check_name(settings->specialist) != 0) {
        char reason[256];
        snprintf(reason, sizeof reason, "%s", failure_message());
        return s_usage_error(args, reason, NULL);
    }
    if (args->command == NULL)
        return 0;
    if (i >= argc)
        return s_usage_error(args, "missing '--' before the command", NULL);
    if (i + 1 >= argc)
        return s_usage_error(args, "missing the command after '--'", NULL);
    *args->command = &argv[i + 1];
    return 0;
}

bool specialist_args_parse(const specialist_args_t *args, int argc, char **argv,
                           specialist_config_t *settings, int *exit_code)
{
    bool specialist_flag = settings->specialist == NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *flag = argv[i];
        if (args->command != NULL && strcmp(flag, "--") == 0)
            break;
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            fputs(args->usage, stdout);
            *exit_code = 0;
            return false;
        }
        if (strcmp(flag, "--version") == 0) {
            printf("%s %s\n", args->program, CLOISTER_VERSION);
            *exit_code = 0;
            return false;
        }
        const char **string = s_string_flag(args, settings, specialist_flag, flag);
        if (string == NULL && !s_is_number_flag(args, flag)) {
            *exit_code = s_usage_error(args, "unknown option", flag);
            return false;
        }
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (value == NULL || (args->command != NULL && strcmp(value, "--") == 0)) {
            *exit_code = s_usage_error(args, "missing a value for", flag);
            return false;
        }
        i++;
        if (string != NULL) {
            *string = value;
        } else if ((*exit_code = s_number_flag(args, settings, flag, value)) != 0) {
            return false;
        }
    }
    *exit_code = s_check_rest(args, argc, argv, i, settings, specialist_flag);
    return *exit_code == 0;
}

int specialist_args_apply_config(specialist_config_t *settings, const config_t *config)
{
    if (settings->in_endpoint == NULL)
        settings->in_endpoint = config_string(config, "broker", "in", NULL);
    int64_t heartbeat_ms = config_int(config, "broker", "heartbeat_ms", 0);
    if (settings->heartbeat_ms == 0 && heartbeat_ms >= SPECIALIST_ARGS_MIN_MS &&
        heartbeat_ms <= SPECIALIST_ARGS_MAX_MS)
        settings->heartbeat_ms = (int)heartbeat_ms;
    int64_t misses = config_int(config, "broker", "heartbeat_misses", 0);
    if (settings->heartbeat_misses == 0 && misses >= 1 && misses <= INT_MAX)
        settings->heartbeat_misses = (int)misses;
    int64_t timeout_s = config_specialist_timeout_s(config, settings->specialist);
    if (settings->default_timeout_s == 0 && timeout_s >= 1 &&
        timeout_s <= SPECIALIST_ARGS_MAX_TIMEOUT_S)
        settings->default_timeout_s = (int)timeout_s;
    /* A container started for a specialist that cloister.toml disables has nothing to do
     * (docker compose starts every service of the file). */
    if (!config_specialist_enabled(config, settings->specialist)) {
        log_info("%s is disabled in cloister.toml ([specialists.%s] enabled = false): exiting",
                 settings->specialist, settings->specialist);
        return SPECIALIST_ARGS_DISABLED;
    }
    /* The endpoint the worker sends to decides whether the bus is authenticated. */
    const char *in = settings->in_endpoint ? settings->in_endpoint : getenv("CLOISTER_IN");
    const char *endpoints[] = {in ? in : SPECIALIST_DEFAULT_IN, NULL};
    return curve_client_init(config, endpoints);
}
