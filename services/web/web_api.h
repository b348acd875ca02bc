/* web_api: the JSON endpoints (see web_http.c for the routes, the token and the origin
 * check, which come before any of these). Each returns the status and body to send. */
#ifndef CLOISTER_WEB_API_H
#define CLOISTER_WEB_API_H

#include "web.h"

/* Tasks in a page when the request does not say, and at most. */
#define WEB_API_PAGE 50
#define WEB_API_MAX_PAGE 500
/* A text search reads at most this many of the newest tasks matching the other filters. */
#define WEB_API_SEARCH_SCAN 10000
/* The tasks of an issue its page shows (the newest). */
#define WEB_API_ISSUE_TASKS 100
/* The reviews awaiting approval listed at most, and the issues looked at for them (the
 * newest reviewed): each costs two control requests. */
#define WEB_API_REVIEWS 50
#define WEB_API_REVIEWS_SCAN 100

/* GET /api/status: {stats, specialists} -- the broker's stats and its specialists, each with
 * the session its agent keeps (read from $PANOPTICON_HOME). */
web_reply_t web_api_status(const web_t *web);

/* What GET /api/tasks asks (each may be NULL; an empty filter is none). */
typedef struct {
    const char *state, *specialist, *issue; /* exact matches (list_tasks) */
    const char *text;                       /* in the id, title, issue, error or source */
    const char *before;                     /* the `next` of the previous page */
    const char *limit;                      /* 1..WEB_API_MAX_PAGE, default WEB_API_PAGE */
} web_history_t;

/* GET /api/tasks: tasks of any state, newest first, {items, next, scanned}: `next` (a
 * task id, or null at the end) is `before` for the next page. With `text`, the broker's
 * pages are read until `limit` tasks match or WEB_API_SEARCH_SCAN were read (`scanned`). */
web_reply_t web_api_history(const web_t *web, const web_history_t *query);

/* GET /api/tasks/ID: the task, with its result. */
web_reply_t web_api_task(const web_t *web, const char *id);

/* GET /api/tasks/ID/events: {events, truncated, progress_omitted}, the task's stored events
 * (web_timeline). */
web_reply_t web_api_task_events(const web_t *web, const char *id);

/* GET /api/issues/ID: {issue, tasks (oldest first, each with its result), cost_usd (the
 * sum of their results' cost_usd), events, events_truncated, progress_omitted}: the
 * issue's chain and the stored events of its tasks. 404 when no task has that issue. */
web_reply_t web_api_issue(const web_t *web, const char *issue);

/* GET /api/queues/NAME?offset=&limit=: {specialist, items (in dispatch order), offset,
 * limit, total (the queue's depth), truncated}. */
web_reply_t web_api_queue(const web_t *web, const char *specialist, const char *offset,
                          const char *limit);

/* GET /api/reviews: the finished reviews a merge waits on a person for, newest first: the
 * newest review of each issue (of the WEB_API_REVIEWS_SCAN issues reviewed last) whose gate
 * did not chain the next task itself and after which no merge of the issue was queued (for
 * a review without an issue: no merge-<review id>, the merge `pan approve` names). Each
 * {id, title, issue, updated, gate, review_result, review_mode, commit, branch, workspace,
 * target, must_fix (the blocking findings)}. */
web_reply_t web_api_reviews(const web_t *web);

/* GET /api/merge-queues: the merge queues of this host's merge-agents, as their state files
 * say (merge_queue_store_list(); the same as `pan merge-queue --json`). */
web_reply_t web_api_merge_queues(void);

/* POST /api/tasks/ID/cancel and /retry. */
web_reply_t web_api_cancel(const web_t *web, const char *id);
web_reply_t web_api_retry(const web_t *web, const char *id);

/* POST /api/tasks/ID/priority {"priority"}: set_priority (a queued task only). */
web_reply_t web_api_priority(const web_t *web, const char *id, const json_t *body);

/* POST /api/approve {"issue", "force", "reason"}: `pan approve` -- a blocked gate is
 * refused (409) with the blocking findings, in the page's words; "force" (which needs a
 * "reason") overrides it and the override is recorded with that reason. */
web_reply_t web_api_approve(const web_t *web, const json_t *body);

/* POST /api/specialists/NAME/wake {"task", "workspace", "branch", "target",
 * "priority"}: `pan specialists wake`. */
web_reply_t web_api_wake(const web_t *web, const char *specialist, const json_t *body);

#endif
