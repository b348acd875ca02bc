/* pan tests detect [DIR]: which command runs a project's tests (common/specialist/testdetect.h),
 * honouring the test-agent's configured test_command. */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"
#include "testdetect.h"

#include <stdio.h>
#include <string.h>

int cmd_tests(const pan_t *pan, int argc, char **argv)
{
    static const char *const usage = "pan tests detect [DIR] [--json]";
    if (argc < 1)
        return pan_usage(usage, "tests what?");
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
