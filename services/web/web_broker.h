/* web_broker: the dashboard's requests to the broker over control, and the replies made
 * from its answers. Below web_api (the endpoints), web_timeline and web_figures, which all
 * ask the broker through it; it includes none of them. (web_error(), declared in web.h,
 * is defined here.) */
#ifndef CLOISTER_WEB_BROKER_H
#define CLOISTER_WEB_BROKER_H

#include "web.h"

#include "client.h"
#include "wire.h"

/* Sends `request` on `client` (borrowed). 0 with *data the reply's data as JSON (caller
 * owns) and *truncated its `truncated`; else the failure code (client_call()) with the
 * reason in failure_message(). */
int web_broker_ask(client_t *client, wire_writer_t *request, json_t **data, bool *truncated);

/* The reply for a failed request: the broker's refusal (404 not found, 400 invalid, 409 a
 * state that does not allow it) or its absence (502), with failure_message(). */
web_reply_t web_broker_failure(int rc);

#endif
