/* web_broker: asking the broker, and the replies made from its answers (see
 * web_broker.h). */
#include "web_broker.h"

#include "failure.h"
#include "msgjson.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

web_reply_t web_error(int status, const char *fmt, ...)
{
    char message[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    json_t *body = json_object();
    json_object_set_new(body, "error", msgjson_string(message, strlen(message)));
    return (web_reply_t){.status = status, .body = body};
}

/* The HTTP status for a failed control request: the broker's refusal, or its absence. */
static int s_status_of(int rc)
{
    switch (rc) {
    case FAILURE_NOT_FOUND: return 404;
    case FAILURE_INVALID: return 400;
    case FAILURE_TOO_BIG: return 413;
    case FAILURE_TIMEOUT:
    case FAILURE_IO: return 502;
    default: return 409; /* the broker said no: a state that does not allow it */
    }
}

web_reply_t web_broker_failure(int rc)
{
    return web_error(s_status_of(rc), "%s", failure_message());
}

int web_broker_ask(client_t *client, wire_writer_t *request, json_t **data, bool *truncated)
{
    *data = NULL;
    *truncated = false;
    wire_msg_t *reply = NULL;
    int rc = client_call(client, request, &reply);
    if (rc != 0)
        return rc;
    const msgpack_object *object = wire_msg_object(reply, FIELD_DATA);
    *data = object != NULL ? msgjson_from_object(object) : json_null();
    *truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
    wire_msg_destroy(&reply);
    return *data != NULL ? 0 : failure_set(FAILURE_MEMORY, "out of memory");
}
