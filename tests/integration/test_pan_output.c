/* What pan prints and says, against a real broker: exit codes of `pan tests detect`, and
 * which specialist names a submit may use (proto/PROTOCOL.md). */
#include "pan_harness.h"

#include "fakeworker.h"

#include <sys/stat.h>

static char s_out[PAN_OUT_SIZE];

/* A directory without any test runner is a failed detection (1), not a usage error (2). */
static void test_tests_detect_exit_codes(testenv_t *env)
{
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty-project", env->dir);
    CHECK(mkdir(empty, 0755) == 0);
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, NULL), 1);
    CHECK(strncmp(s_out, "pan: ", 5) == 0);
    CHECK(strstr(s_out, "usage:") == NULL);
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, "--json", NULL), 1);
    /* A usage error stays one. */
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, "--frob", NULL), 2);
}

/* The names the broker accepts, as proto/PROTOCOL.md says: the built-in three, those
 * declared in cloister.toml and those a worker announced; any other is refused. */
typedef struct {
    testenv_t *env;
} submit_try_t;

static bool s_late_agent_accepted(void *arg)
{
    submit_try_t *try = arg;
    return harness_pan(try->env, s_out, "submit", "late-agent", "--id", "late-1", NULL) == 0;
}

static void test_specialist_names(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "submit", "test-agent", "--id", "n-builtin", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "submit", "docs-agent", "--id", "n-declared", NULL), 0);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "nobody-agent", "--id", "n-unknown", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'nobody-agent'") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "late-agent", "--id", "late-1", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'late-agent'") != NULL);
    fakeworker_t *worker = fakeworker_new(env->dir, env->in_ep, "late-agent", "w-late");
    CHECK(worker != NULL);
    if (worker == NULL)
        return;
    fakeworker_hello(worker, NULL, 0);
    submit_try_t try = {env};
    CHECK(testenv_wait_until(s_late_agent_accepted, &try, 5000));
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-output");
    if (env == NULL)
        return 1;
    test_tests_detect_exit_codes(env);
    char config[400];
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(config, "[specialists.docs-agent]\nenabled = true\n") == 0);
    if (harness_start_broker(env) > 0) {
        test_specialist_names(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_output");
}
