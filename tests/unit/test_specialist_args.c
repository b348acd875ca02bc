/* test_specialist_args: the specialists' shared command line -- every skeleton flag, a
 * service's own options, --timeout only where offered, --specialist and "-- CMD" for the
 * generic worker, each usage error with its message and exit code 2, --help, and the
 * fallbacks of specialist_args_apply_config(): flag > environment > cloister.toml >
 * default, with out-of-range configuration values ignored. */
#include "check.h"
#include "config.h"
#include "failure.h"
#include "specialist_args.h"
#include "testenv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "usage: cloister-x [--in EP]\n"

/* A fixed-name service like cloister-test: no --timeout, no own options, no command. */
static const specialist_args_t s_plain = {.program = "cloister-x", .usage = USAGE};

/* Runs specialist_args_parse() on a NULL-terminated argv (argv[0] included). */
static bool parse(const specialist_args_t *args, char **argv, specialist_config_t *settings,
                  int *code)
{
    int argc = 0;
    while (argv[argc] != NULL)
        argc++;
    *code = -1;
    return specialist_args_parse(args, argc, argv, settings, code);
}

/* Checks that argv is refused with exit code 2 and failure_message() `message`. */
static void expect_usage_error(const specialist_args_t *args, const char *specialist,
                               char **argv, const char *message)
{
    specialist_config_t settings = {.specialist = specialist};
    int code = 0;
    CHECK(!parse(args, argv, &settings, &code));
    CHECK_INT(code, SPECIALIST_ARGS_EXIT_USAGE);
    CHECK_INT(code, 2);
    CHECK_STR(failure_message(), message);
}

static void test_common_flags(void)
{
    char *argv[] = {"cloister-x", "--in", "ipc://in", "--bind", "tcp://0.0.0.0:7000",
                    "--advertise", "tcp://host:*", "--heartbeat-ms", "250", "--grace-ms",
                    "10", "--worker-id", "w-1", NULL};
    specialist_config_t settings = {.specialist = "test-agent"};
    int code;
    CHECK(parse(&s_plain, argv, &settings, &code));
    CHECK_INT(code, 0);
    CHECK_STR(settings.specialist, "test-agent");
    CHECK_STR(settings.in_endpoint, "ipc://in");
    CHECK_STR(settings.bind_endpoint, "tcp://0.0.0.0:7000");
    CHECK_STR(settings.advertise, "tcp://host:*");
    CHECK_INT(settings.heartbeat_ms, 250);
    CHECK_INT(settings.grace_ms, 10);
    CHECK_STR(settings.worker_id, "w-1");
    CHECK_INT(settings.default_timeout_s, 0);
    CHECK_INT(settings.heartbeat_misses, 0);

    /* No flags: nothing is set. */
    char *none[] = {"cloister-x", NULL};
    specialist_config_t empty = {.specialist = "test-agent"};
    CHECK(parse(&s_plain, none, &empty, &code));
    CHECK(empty.in_endpoint == NULL && empty.bind_endpoint == NULL && empty.worker_id == NULL);
    CHECK_INT(empty.heartbeat_ms, 0);
    CHECK_INT(empty.grace_ms, 0);
}

static void test_timeout_flag(void)
{
    const specialist_args_t args = {.program = "cloister-x", .usage = USAGE,
                                    .timeout_flag = true};
    char *argv[] = {"cloister-x", "--timeout", "604800", NULL};
    specialist_config_t settings = {.specialist = "merge-agent"};
    int code;
    CHECK(parse(&args, argv, &settings, &code));
    CHECK_INT(settings.default_timeout_s, 604800);

    expect_usage_error(&args, "merge-agent", (char *[]){"x", "--timeout", "0", NULL},
                       "--timeout expects seconds (1..604800), not 0");
    expect_usage_error(&args, "merge-agent", (char *[]){"x", "--timeout", "604801", NULL},
                       "--timeout expects seconds (1..604800), not 604801");
    /* A service that does not offer --timeout refuses it. */
    expect_usage_error(&s_plain, "test-agent", (char *[]){"x", "--timeout", "5", NULL},
                       "unknown option --timeout");
}

static void test_own_options(void)
{
    const char *workdir = NULL;
    const char *config_path = NULL;
    const specialist_args_option_t options[] = {
        {"--workdir", &workdir}, {"--config", &config_path}, {NULL, NULL}};
    const specialist_args_t args = {.program = "cloister-x", .usage = USAGE,
                                    .options = options};
    char *argv[] = {"cloister-x", "--config", "/etc/c.toml", "--in", "ipc://a",
                    "--workdir", "/w", NULL};
    specialist_config_t settings = {.specialist = "review-agent"};
    int code;
    CHECK(parse(&args, argv, &settings, &code));
    CHECK_STR(workdir, "/w");
    CHECK_STR(config_path, "/etc/c.toml");
    CHECK_STR(settings.in_endpoint, "ipc://a");

    /* Without a command, "--" is an ordinary value. */
    char *dashes[] = {"cloister-x", "--workdir", "--", NULL};
    CHECK(parse(&args, dashes, &settings, &code));
    CHECK_STR(workdir, "--");

    expect_usage_error(&args, "review-agent", (char *[]){"x", "--workdir", NULL},
                       "missing a value for --workdir");
    /* Another service does not know them. */
    expect_usage_error(&s_plain, "test-agent", (char *[]){"x", "--workdir", "/w", NULL},
                       "unknown option --workdir");
}

static void test_worker_command(void)
{
    char **command = NULL;
    const specialist_args_t args = {.program = "cloister-worker", .usage = USAGE,
                                    .timeout_flag = true, .command = &command};
    char *argv[] = {"cloister-worker", "--specialist", "build", "--timeout", "7", "--",
                    "sh", "-c", "echo hi", NULL};
    specialist_config_t settings = {0};
    int code;
    CHECK(parse(&args, argv, &settings, &code));
    CHECK_INT(code, 0);
    CHECK_STR(settings.specialist, "build");
    CHECK_INT(settings.default_timeout_s, 7);
    CHECK(command == &argv[6]);
    CHECK_STR(command[0], "sh");
    CHECK_STR(command[2], "echo hi");
    CHECK(command[3] == NULL);

    expect_usage_error(&args, NULL, (char *[]){"x", "--", "true", NULL},
                       "--specialist NAME is required");
    expect_usage_error(&args, NULL, (char *[]){"x", "--specialist", "Bad", "--", "t", NULL},
                       "invalid specialist name 'Bad' (expected [a-z0-9][a-z0-9._-]*)");
    expect_usage_error(&args, NULL, (char *[]){"x", "--specialist", "b", NULL},
                       "missing '--' before the command");
    expect_usage_error(&args, NULL, (char *[]){"x", "--specialist", "b", "--", NULL},
                       "missing the command after '--'");
    /* "--" ends the options: it is never an option's value. */
    expect_usage_error(&args, NULL, (char *[]){"x", "--specialist", "--", "true", NULL},
                       "missing a value for --specialist");
    /* A fixed-name service takes neither --specialist nor "--". */
    expect_usage_error(&s_plain, "test-agent", (char *[]){"x", "--specialist", "b", NULL},
                       "unknown option --specialist");
    expect_usage_error(&s_plain, "test-agent", (char *[]){"x", "--", "true", NULL},
                       "unknown option --");
}

static void test_usage_errors(void)
{
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--bogus", NULL},
                       "unknown option --bogus");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "in", NULL}, "unknown option in");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--in", NULL}, "missing a value for --in");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--heartbeat-ms", "fast", NULL},
                       "--heartbeat-ms expects 10..3600000, not fast");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--heartbeat-ms", "9", NULL},
                       "--heartbeat-ms expects 10..3600000, not 9");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--heartbeat-ms", "12x", NULL},
                       "--heartbeat-ms expects 10..3600000, not 12x");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--grace-ms", "3600001", NULL},
                       "--grace-ms expects 10..3600000, not 3600001");
    expect_usage_error(&s_plain, "t", (char *[]){"x", "--grace-ms", "", NULL},
                       "--grace-ms expects 10..3600000, not ");
}

static void test_help(void)
{
    char *argv[] = {"cloister-x", "--in", "ipc://a", "--help", "--bogus", NULL};
    specialist_config_t settings = {.specialist = "t"};
    int code;
    CHECK(!parse(&s_plain, argv, &settings, &code));
    CHECK_INT(code, 0);
    char *short_argv[] = {"cloister-x", "-h", NULL};
    CHECK(!parse(&s_plain, short_argv, &settings, &code));
    CHECK_INT(code, 0);
}

static config_t *parse_config(const char *text)
{
    config_t *config = NULL;
    int rc = config_parse_buffer("cloister.toml", text, strlen(text), &config);
    CHECK_INT(rc, 0);
    return config;
}

static void test_config_defaults(void)
{
    config_t *config = config_defaults();
    specialist_config_t test = {.specialist = "test-agent"};
    specialist_args_apply_config(&test, config);
    CHECK_STR(test.in_endpoint, "tcp://127.0.0.1:5560");
    CHECK_INT(test.heartbeat_ms, 1000);
    CHECK_INT(test.heartbeat_misses, 3);
    CHECK_INT(test.default_timeout_s, 600);
    CHECK(test.bind_endpoint == NULL && test.worker_id == NULL && test.grace_ms == 0);
    specialist_config_t merge = {.specialist = "merge-agent"};
    specialist_args_apply_config(&merge, config);
    CHECK_INT(merge.default_timeout_s, 900);
    config_destroy(&config);
}

static void test_config_over_defaults_and_flags_over_config(void)
{
    config_t *config = parse_config("[broker]\nin = \"ipc://file\"\nheartbeat_ms = 200\n"
                                    "heartbeat_misses = 5\n"
                                    "[specialists.review_agent]\ntimeout = 42\n");
    specialist_config_t settings = {.specialist = "review-agent"};
    specialist_args_apply_config(&settings, config);
    CHECK_STR(settings.in_endpoint, "ipc://file");
    CHECK_INT(settings.heartbeat_ms, 200);
    CHECK_INT(settings.heartbeat_misses, 5);
    CHECK_INT(settings.default_timeout_s, 42);

    char *argv[] = {"x", "--in", "ipc://flag", "--heartbeat-ms", "30", "--timeout", "9", NULL};
    const specialist_args_t args = {.program = "x", .usage = USAGE, .timeout_flag = true};
    specialist_config_t flagged = {.specialist = "review-agent"};
    int code;
    CHECK(parse(&args, argv, &flagged, &code));
    specialist_args_apply_config(&flagged, config);
    CHECK_STR(flagged.in_endpoint, "ipc://flag");
    CHECK_INT(flagged.heartbeat_ms, 30);
    CHECK_INT(flagged.heartbeat_misses, 5);
    CHECK_INT(flagged.default_timeout_s, 9);
    config_destroy(&config);
}

static void test_config_out_of_range_ignored(void)
{
    config_t *config = parse_config("[broker]\nheartbeat_ms = 5\nheartbeat_misses = 9999999999\n"
                                    "[specialists.test-agent]\ntimeout = 604801\n");
    specialist_config_t settings = {.specialist = "test-agent"};
    specialist_args_apply_config(&settings, config);
    CHECK_INT(settings.heartbeat_ms, 0);
    CHECK_INT(settings.heartbeat_misses, 0);
    CHECK_INT(settings.default_timeout_s, 0);
    config_destroy(&config);
}

static void test_environment_over_config(void)
{
    testenv_t *env = testenv_new("test_specialist_args");
    CHECK(env != NULL);
    char path[512];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK_INT(testenv_write_file(path, "[broker]\nin = \"ipc://file\"\n"), 0);

    setenv("CLOISTER_IN", "ipc://env", 1);
    config_t *config = NULL;
    CHECK_INT(config_load(NULL, &config), 0);
    specialist_config_t settings = {.specialist = "merge-agent"};
    specialist_args_apply_config(&settings, config);
    CHECK_STR(settings.in_endpoint, "ipc://env");
    specialist_config_t flagged = {.specialist = "merge-agent", .in_endpoint = "ipc://flag"};
    specialist_args_apply_config(&flagged, config);
    CHECK_STR(flagged.in_endpoint, "ipc://flag");
    config_destroy(&config);

    /* An empty variable counts as unset: the file's value. */
    setenv("CLOISTER_IN", "", 1);
    CHECK_INT(config_load(NULL, &config), 0);
    specialist_config_t empty_env = {.specialist = "merge-agent"};
    specialist_args_apply_config(&empty_env, config);
    CHECK_STR(empty_env.in_endpoint, "ipc://file");
    config_destroy(&config);
    testenv_destroy(&env);
}

int main(void)
{
    test_common_flags();
    test_timeout_flag();
    test_own_options();
    test_worker_command();
    test_usage_errors();
    test_help();
    test_config_defaults();
    test_config_over_defaults_and_flags_over_config();
    test_config_out_of_range_ignored();
    test_environment_over_config();
    return check_exit_code("test_specialist_args");
}
