/* pan tests detect [DIR]: which command runs a project's tests (common/specialist/testdetect.h),
 * honouring the test-agent's configured test_command.
 * pan tests sandbox [--dir DIR] [--network] -- COMMAND: runs COMMAND the way a branch's
 * test command runs (common/agent/sandbox.h, common/specialist/testrun.h), to see what code
 * under test sees on this machine. */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"
#include "sandbox.h"
#include "testdetect.h"
#include "testrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_usage =
    "pan tests detect [DIR] [--json]\n"
    "       pan tests sandbox [--dir DIR] [--network] [--timeout S] -- COMMAND...";

/* testrun's line callback: the command's output, as it comes. */
static void s_print_line(void *arg, const char *line, size_t len)
{
    (void)arg;
    fwrite(line, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* pan tests sandbox: exits with the command's exit code (1 when it could not run). */
static int s_sandbox(const pan_t *pan, int argc, char **argv)
{
    const char *dir = ".";
    bool network = false;
    int64_t timeout_s = 600;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--dir", &value);
        if (found > 0)
            dir = value;
        else if (found == 0 && (found = pan_option(argc, argv, &i, "--timeout", &value)) > 0) {
            if (!pan_parse_int(value, 1, 86400, &timeout_s))
                return pan_usage(s_usage, "--timeout takes seconds, not '%s'", value);
        } else if (found < 0)
            return pan_usage(s_usage, "%s needs a value", argv[i]);
        else if (strcmp(argv[i], "--network") == 0)
            network = true;
        else
            return pan_usage_unknown(s_usage, argv[i]);
    }
    if (i + 1 >= argc)
        return pan_usage(s_usage, "tests sandbox: no COMMAND after --");
    size_t len = 1;
    for (int j = i + 1; j < argc; j++)
        len += strlen(argv[j]) + 1;
    char *command = calloc(1, len);
    if (command == NULL)
        return pan_fail(PAN_EXIT_ERROR, "out of memory");
    for (int j = i + 1; j < argc; j++) {
        strcat(command, argv[j]);
        if (j + 1 < argc)
            strcat(command, " ");
    }
    sandbox_t *sandbox = NULL;
    if (sandbox_new(&sandbox, pan->config) != 0) {
        free(command);
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    }
    char said[1200];
    sandbox_network(sandbox, network ? "pan tests sandbox --network" : NULL, said, sizeof said);
    fprintf(stderr, "pan: sandbox %s; network %s\n", sandbox_describe(sandbox), said);
    testrun_options_t options = {.command = command,
                                 .dir = dir,
                                 .timeout_ms = timeout_s * 1000,
                                 .on_line = s_print_line,
                                 .sandbox = sandbox,
                                 .network = network};
    testrun_result_t *result = NULL;
    testrun_run(&result, &options);
    int code = PAN_EXIT_ERROR;
    if (result == NULL)
        pan_fail(PAN_EXIT_ERROR, "out of memory");
    else if (!result->started)
        pan_fail(PAN_EXIT_ERROR, "the command did not run: %s", result->error);
    else
        code = result->exit_code >= 0 ? result->exit_code : PAN_EXIT_ERROR;
    testrun_result_destroy(&result);
    sandbox_destroy(&sandbox);
    free(command);
    return code;
}

int cmd_tests(const pan_t *pan, int argc, char **argv)
{
    const char *const usage = s_usage;
    if (argc < 1)
        return pan_usage(usage, "tests what?");
    if (strcmp(argv[0], "sandbox") == 0)
        return s_sandbox(pan, argc, argv);
    if (strcmp(argv[0], "detect") != 0)
        return pan_usage(usage, "unknown tests command '%s'", argv[0]);
    const char *dir = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (argv[i][0] == '-' || dir != NULL)
            return pan_usage_unknown(usage, argv[i]);
        else
            dir = argv[i];
    }
    testdetect_t found;
    int rc = testdetect_find(&found, dir ? dir : ".",
                             config_specialist_test_command(pan->config, "test-agent"));
    if (found.warning[0] != '\0')
        fprintf(stderr, "pan: warning: %s\n", found.warning);
    /* No runner found is an answer about the project, not a usage error. */
    if (rc != 0)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    if (!json) {
        puts(found.command);
        return PAN_EXIT_OK;
    }
    /* The command and reason come from the project's files or the configuration: bytes
     * that are not UTF-8 become U+FFFD rather than lose the JSON. */
    json_t *out = json_pack("{s:o, s:s, s:o}", "command",
                            msgjson_string(found.command, strlen(found.command)), "runner",
                            testdetect_runner_name(found.runner), "reason",
                            msgjson_string(found.reason, strlen(found.reason)));
    if (out != NULL && found.warning[0] != '\0' &&
        json_object_set_new(out, "warning",
                            msgjson_string(found.warning, strlen(found.warning))) != 0) {
        json_decref(out);
        out = NULL;
    }
    int code = pan_print_json(out);
    json_decref(out);
    return code;
}
