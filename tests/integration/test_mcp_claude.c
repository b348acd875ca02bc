/* The real Claude Code CLI (no login is needed for this) adds cloister-mcp and
 * health-checks it: `claude mcp list` prints "✔ Connected" for it, against a real broker.
 * The CLI is the pinned one the CTest fixture integration.real_clis_install puts into
 * <build>/real-clis; without it the test fails. */
#include "check.h"
#include "testbroker.h"
#include "testenv.h"
#include "testmodel.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char s_out[65536];

int main(void)
{
    testenv_t *env = testenv_new("mcp-claude");
    CHECK(env != NULL);
    CHECK(testbroker_start(env, 0, NULL) > 0);
    char script[4096];
    snprintf(script, sizeof script,
             "export HOME=\"$0/home\" && mkdir -p \"$HOME\" \"$0/project\" && cd \"$0/project\" && "
             "\"$1\" mcp add cloister -- \"$2\" && exec \"$1\" mcp list 2>&1");
    char *argv[] = {"/bin/sh", "-c", script, env->dir, (char *)testmodel_cli("claude"),
                    (char *)testenv_bin("cloister-mcp"), NULL};
    int code = testenv_run(env, argv, s_out, sizeof s_out, 120000);
    if (code != 0 || strstr(s_out, "cloister: ") == NULL)
        fprintf(stderr, "claude mcp (exit %d):\n%s\n", code, s_out);
    CHECK_INT(code, 0);
    const char *line = strstr(s_out, "cloister: ");
    CHECK(line != NULL);
    CHECK(strstr(line, "✔ Connected") != NULL);
    testenv_destroy(&env);
    return check_exit_code("test_mcp_claude");
}
