/* check: failure counter and summary (see check.h). */
#include "check.h"

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
