/* check: failure counter and summary (see check.h). */
#include "check.h"

#include <stdlib.h>

int check_failures;

int check_exit_code(const char *test_name)
{
    if (check_failures == 0) {
        printf("%s: all checks passed\n", test_name);
        return 0;
    }
    printf("%s: %d check(s) failed\n", test_name, check_failures);
    return 1;
}

static void (*s_hook)(void *arg);
static void *s_hook_arg;

void check_on_fail(void (*fn)(void *arg), void *arg)
{
    s_hook = fn;
    s_hook_arg = arg;
}

void check_fail(void)
{
    check_failures++;
    if (s_hook != NULL) {
        void (*hook)(void *arg) = s_hook;
        s_hook = NULL; /* a failing check inside the hook must not loop */
        hook(s_hook_arg);
    }
    fprintf(stderr, "stopping at the first failed check\n");
    fflush(stdout);
    exit(1);
}
