/* web: what every part of cloister-web shares.
 *
 * cloister-web is a client of the broker like pan: it asks on control (a short-lived REQ
 * per request, so any HTTP thread may ask), follows events for its Server-Sent Events
 * stream, and acts on the broker the way pan does (pan approve runs pan itself, so the
 * gate is enforced in one place). */
#ifndef CLOISTER_WEB_H
#define CLOISTER_WEB_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

/* How many [web] hosts are taken. */
#define WEB_HOSTS_MAX 16

/* The token every /api request shows (X-Cloister-Token, or the session cookie made from it). */
#define WEB_TOKEN_SIZE 65

typedef struct web_figures_t web_figures_t;

typedef struct {
    const char *control_ep, *events_ep, *in_ep; /* the broker */
    char pan[PATH_MAX];                         /* the pan program beside this one */
    char token[WEB_TOKEN_SIZE];
    int timeout_ms; /* each control request's deadline */
    /* The names besides localhost and the listening address a request's Host may carry
     * ([web] hosts; NULL-terminated, borrowed; NULL for none). */
    const char *const *hosts;
    web_figures_t *figures;
} web_t;

/* An answer: an HTTP status and a JSON body (owned; NULL for none). */
typedef struct {
    int status;
    json_t *body;
} web_reply_t;

/* {"error": message} with `status`. */
web_reply_t web_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
