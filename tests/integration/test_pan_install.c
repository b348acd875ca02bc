/* cmake --install: the programs land on <prefix>/bin, the prompts where the installed
 * programs look for them (an installed pan renders a prompt from <prefix>/share/cloister/
 * prompts, not the source tree), the example configuration, and pan's bash completion,
 * which completes commands, each command's options and their values. */
#include "worker_harness.h"

#include <limits.h>

static char s_out[1 << 16];

/* Runs a shell script with the prefix in $0; returns its exit code, output in s_out. */
static int s_sh(harness_t *h, const char *prefix, const char *script)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, (char *)prefix, NULL};
    int code = testenv_run(h->env, argv, s_out, sizeof s_out, 120000);
    if (code != 0)
        fprintf(stderr, "script (exit %d): %s\n%s\n", code, script, s_out);
    return code;
}

/* What bash completion offers for the words (a bash array's contents) at the last one. */
static const char *s_complete(harness_t *h, const char *prefix, const char *words)
{
    char script[2048];
    snprintf(script, sizeof script,
             "exec bash -c 'PATH=\"$0/bin:$PATH\"; . \"$0/share/bash-completion/completions/pan\"; "
             "COMP_WORDS=(%s); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _pan; "
             "echo \"${COMPREPLY[*]}\"' \"$0\"",
             words);
    CHECK_INT(s_sh(h, prefix, script), 0);
    return s_out;
}

int main(void)
{
    harness_t *h = harness_new("pan-install");
    CHECK(h != NULL);
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s/prefix", h->env->dir);
    char install[1024];
    snprintf(install, sizeof install, "exec cmake --install '%s/..' --prefix \"$0\" 2>&1",
             CLOISTER_BIN_DIR);
    CHECK_INT(s_sh(h, prefix, install), 0);
    static const char *const files[] = {
        "bin/pan", "bin/cloister-broker", "bin/cloister-review", "bin/cloister-test",
        "bin/cloister-merge", "bin/cloister-worker", "bin/cloister-mcp",
        "share/cloister/prompts/review-agent.md", "share/cloister/prompts/test-agent.md",
        "share/cloister/prompts/merge-agent.md", "share/cloister/cloister.toml.example",
        "share/bash-completion/completions/pan"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[PATH_MAX + 100];
        snprintf(path, sizeof path, "%s/%s", prefix, files[i]);
        if (access(path, R_OK) != 0)
            fprintf(stderr, "not installed: %s\n", files[i]);
        CHECK(access(path, R_OK) == 0);
    }
    CHECK_INT(s_sh(h, prefix, "exec \"$0/bin/pan\" --version"), 0);
    CHECK(strncmp(s_out, "pan ", 4) == 0);

    /* The installed pan renders from the installed prompts. */
    CHECK_INT(s_sh(h, prefix, "echo 'INSTALLED-PROMPT {{task_id}}' >> "
                              "\"$0/share/cloister/prompts/merge-agent.md\""),
              0);
    harness_submit(h, "m1", "merge-agent", "normal", 60, 1, "{\"branch\":\"feature\"}");
    CHECK(harness_wait(h, "task.queued", "m1", 5000) != NULL);
    CHECK_INT(s_sh(h, prefix, "exec \"$0/bin/pan\" prompt merge-agent m1"), 0);
    CHECK(strstr(s_out, "INSTALLED-PROMPT m1") != NULL);

    /* Completion: commands, a command's options, option values, subcommands. */
    CHECK(strstr(s_complete(h, prefix, "pan su"), "submit") != NULL);
    CHECK(strstr(s_complete(h, prefix, "pan ta"), "task") != NULL);
    CHECK(strstr(s_complete(h, prefix, "pan task list --st"), "--state") != NULL);
    CHECK(strstr(s_complete(h, prefix, "pan submit x --wait-"), "--wait-timeout") != NULL);
    CHECK_STR(s_complete(h, prefix, "pan submit x --priority h"), "high\n");
    CHECK_STR(s_complete(h, prefix, "pan task list --state de"), "dead\n");
    CHECK_STR(s_complete(h, prefix, "pan task \"\""), "list show wait\n");
    CHECK(strstr(s_complete(h, prefix, "pan submit \"\""), "review-agent") != NULL);

    harness_destroy(&h);
    return check_exit_code("test_pan_install");
}
