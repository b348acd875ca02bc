/* Unit tests for failure: the last reason, and wrapping it in a new one. */
#include "check.h"
#include "failure.h"

#include <string.h>

int main(void)
{
    CHECK_INT(failure_set(FAILURE_INVALID, "line %d: bad", 3), FAILURE_INVALID);
    CHECK_STR(failure_message(), "line 3: bad");
    /* The last reason as an argument of the next (a reason wrapped by its caller). */
    CHECK_INT(failure_set(FAILURE_IO, "reading x: %s", failure_message()), FAILURE_IO);
    CHECK_STR(failure_message(), "reading x: line 3: bad");
    CHECK_STR(failure_name(FAILURE_DENIED), "denied");
    return check_exit_code("test_failure");
}
