/* The real Claude Code CLI (@anthropic-ai/claude-code from the npm registry; no login is
 * needed for this) adds cloister-mcp and health-checks it: `claude mcp list` prints
 * "✔ Connected" for it, against a real broker. When the CLI is not installed in the build
 * tree (build/npm-claude) and npm cannot install it, the test is skipped (exit 77) saying
 * why. */
#include "check.h"
#include "testbroker.h"
#include "testenv.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NPM_DIR CLOISTER_BIN_DIR "/../npm-claude"
#define CLAUDE NPM_DIR "/node_modules/.bin/claude"

static char s_out[65536];

int main(void)
{
    testenv_t *env = testenv_new("mcp-claude");
    CHECK(env != NULL);
    if (access(CLAUDE, X_OK) != 0) {
        char *install[] = {"/bin/sh", "-c",
                           "mkdir -p \"$0\" && exec npm install --prefix \"$0\" --no-audit "
                           "--no-fund --loglevel=error @anthropic-ai/claude-code 2>&1",
                           NPM_DIR, NULL};
        int code = testenv_run(env, install, s_out, sizeof s_out, 300000);
        if (code != 0 || access(CLAUDE, X_OK) != 0) {
            printf("SKIPPED: the Claude Code CLI could not be installed from npm (exit %d): %s\n",
                   code, s_out);
            testenv_destroy(&env);
            return 77;
        }
    }
    CHECK(testbroker_start(env, 0, NULL) > 0);
    char script[4096];
    snprintf(script, sizeof script,
             "export HOME=\"$0/home\" && mkdir -p \"$HOME\" \"$0/project\" && cd \"$0/project\" && "
             "\"$1\" mcp add cloister -- \"$2\" && exec \"$1\" mcp list 2>&1");
    char *argv[] = {"/bin/sh", "-c", script, env->dir, CLAUDE,
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
