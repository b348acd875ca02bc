/* Compiled by CTest three ways (tests/CMakeLists.txt): as it stands it must compile, and
 * with -DMISSPELT (an unknown FIELD_ name) or -DSTRING_KEY (a string where the protocol
 * wants a field_t) it must not: a misspelt protocol field is a compile error. */
#include "wire.h"

const char *read_specialist(const wire_msg_t *msg);

const char *read_specialist(const wire_msg_t *msg)
{
#if defined(MISSPELT)
    return wire_msg_str(msg, FIELD_SPECIALST, NULL);
#elif defined(STRING_KEY)
    return wire_msg_str(msg, "specialist", NULL);
#else
    return wire_msg_str(msg, FIELD_SPECIALIST, NULL);
#endif
}
