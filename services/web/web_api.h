/* web_api: the JSON endpoints (see web_http.c for the routes, the token and the origin
 * check, which come before any of these). Each returns the status and body to send. */
#ifndef CLOISTER_WEB_API_H
#define CLOISTER_WEB_API_H

#include "web.h"

/* GET /api/status: {stats, specialists} -- the broker's stats and its specialists, each with
 * the session its agent keeps (read from $PANOPTICON_HOME). */
web_reply_t web_api_status(const web_t *web);

/* GET /api/tasks?state=&specialist=&issue=&limit=&before=: list_tasks. */
web_reply_t web_api_tasks(const web_t *web, const char *state, const char *specialist,
                          const char *issue, const char *limit, const char *before);

/* GET /api/tasks/ID: the task, with its result. */
web_reply_t web_api_task(const web_t *web, const char *id);

/* GET /api/queues/NAME: the specialist's queue in dispatch order. */
web_reply_t web_api_queue(const web_t *web, const char *specialist);

/* POST /api/tasks/ID/cancel and /retry. */
web_reply_t web_api_cancel(const web_t *web, const char *id);
web_reply_t web_api_retry(const web_t *web, const char *id);

/* POST /api/approve {"issue": ID, "force": bool}: `pan approve` -- a blocked gate is
 * refused (409) with pan's reason; --force overrides and is recorded. */
web_reply_t web_api_approve(const web_t *web, const json_t *body);

/* POST /api/specialists/NAME/wake {"task", "workspace", "branch", "target",
 * "priority"}: `pan specialists wake`. */
web_reply_t web_api_wake(const web_t *web, const char *specialist, const json_t *body);

#endif
