/* failure: thread-local last-failure message (see failure.h). */
#include "failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char s_message[512];

int failure_set(int code, const char *fmt, ...)
{
    /* Formatted aside first: a caller may wrap the last reason, passing failure_message()
     * as an argument, and vsnprintf() must not read the buffer it writes. */
    char message[sizeof s_message];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    memcpy(s_message, message, sizeof s_message);
    return code;
}

const char *failure_message(void)
{
    return s_message;
}

const char *failure_name(int code)
{
    switch (code) {
    case FAILURE_OK: return "ok";
    case FAILURE_INVALID: return "invalid";
    case FAILURE_IO: return "io";
    case FAILURE_NOT_FOUND: return "not_found";
    case FAILURE_TOO_BIG: return "too_big";
    case FAILURE_STORE: return "store";
    case FAILURE_TIMEOUT: return "timeout";
    case FAILURE_STATE: return "state";
    case FAILURE_GIT: return "git";
    case FAILURE_AGENT: return "agent";
    case FAILURE_MEMORY: return "memory";
    case FAILURE_DISK_FULL: return "disk_full";
    case FAILURE_DENIED: return "denied";
    case FAILURE_OVERLOADED: return "overloaded";
    default: return "unknown";
    }
}
