/* What pan prints, against a real broker: exit codes of `pan tests detect`. */
#include "pan_harness.h"

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

int main(void)
{
    testenv_t *env = testenv_new("pan-output");
    if (env == NULL)
        return 1;
    test_tests_detect_exit_codes(env);
    testenv_destroy(&env);
    return check_exit_code("test_pan_output");
}
