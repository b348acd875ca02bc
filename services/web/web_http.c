/* web_http: the HTTP server, its routes and checks (see web_http.h). */
#include "web_http.h"

#include "failure.h"
#include "web_api.h"
#include "web_figures.h"
#include "web_page.h"
#include "web_sse.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct web_http_t {
    struct MHD_Daemon *daemon;
    uint16_t port;
    web_t *web;
    struct in_addr bound; /* the address it listens on */
    /* The session cookie's name, with the port: browsers keep cookies per host, not per
     * port, so two dashboards on one host must not overwrite each other's. */
    char cookie[32];
};

/* How a request showed the token. */
typedef enum { AUTH_NONE, AUTH_HEADER, AUTH_COOKIE } auth_t;

/* A request's body, gathered over MHD's calls. */
typedef struct {
    char *data;
    size_t len;
    bool too_big;
} body_t;

static const char s_csp[] = "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                            "script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/* Sends a response; `cookie` (may be NULL) goes in a Set-Cookie header. */
static enum MHD_Result s_send_cookie(struct MHD_Connection *c, int status, const char *type,
                                     const void *data, size_t size,
                                     enum MHD_ResponseMemoryMode mode, const char *cookie)
{
    struct MHD_Response *response = MHD_create_response_from_buffer(size, (void *)data, mode);
    if (response == NULL)
        return MHD_NO;
    if (cookie != NULL)
        MHD_add_response_header(response, "Set-Cookie", cookie);
    MHD_add_response_header(response, "Content-Type", type);
    MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(response, "X-Frame-Options", "DENY");
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "Content-Security-Policy", s_csp);
    enum MHD_Result result = MHD_queue_response(c, (unsigned)status, response);
    MHD_destroy_response(response);
    return result;
}

static enum MHD_Result s_send(struct MHD_Connection *c, int status, const char *type,
                              const void *data, size_t size, enum MHD_ResponseMemoryMode mode)
{
    return s_send_cookie(c, status, type, data, size, mode, NULL);
}

static enum MHD_Result s_send_reply(struct MHD_Connection *c, web_reply_t reply)
{
    char *text = reply.body != NULL ? json_dumps(reply.body, JSON_COMPACT) : strdup("{}");
    json_decref(reply.body);
    if (text == NULL)
        return MHD_NO;
    return s_send(c, reply.status, "application/json", text, strlen(text),
                  MHD_RESPMEM_MUST_FREE);
}

/* The page's files, by path ("/" is index.html). */
static enum MHD_Result s_page(struct MHD_Connection *c, const char *url)
{
    const char *path = strcmp(url, "/") == 0 ? "/index.html" : url;
    for (const web_page_file_t *file = web_page_files; file->path != NULL; file++) {
        if (strcmp(file->path, path) != 0)
            continue;
        const char *type = strstr(path, ".css")  ? "text/css; charset=utf-8"
                           : strstr(path, ".js") ? "text/javascript; charset=utf-8"
                                                 : "text/html; charset=utf-8";
        return s_send(c, 200, type, file->data, file->size, MHD_RESPMEM_PERSISTENT);
    }
    return s_send_reply(c, web_error(404, "no such page: %.200s", url));
}

static const char *s_arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* Compares without stopping at the first difference, so timing says nothing of the token. */
static bool s_same(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* The token in the X-Cloister-Token header (scripts, and the page's one exchange), else
 * in the session cookie (the page from then on). A wrong header is not rescued by a
 * cookie. */
static auth_t s_auth(const web_http_t *self, struct MHD_Connection *c)
{
    const char *token = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Cloister-Token");
    if (token != NULL)
        return s_same(token, self->web->token) ? AUTH_HEADER : AUTH_NONE;
    token = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, self->cookie);
    return token != NULL && s_same(token, self->web->token) ? AUTH_COOKIE : AUTH_NONE;
}

/* True when the request's Host names this dashboard (see web_http.h): with DNS rebinding
 * a browser sends the attacker's name, which cannot be an address literal. */
static bool s_host_allowed(const web_http_t *self, struct MHD_Connection *c)
{
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (host == NULL)
        return false;
    char name[256];
    size_t len = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
    if (len >= sizeof name || (host[0] == '[' && host[len - 1] != ']'))
        return false;
    for (size_t i = 0; i < len; i++)
        name[i] = (char)tolower((unsigned char)host[i]);
    name[len] = '\0';
    const char *rest = host + len;
    if (rest[0] != '\0' && (rest[0] != ':' || rest[1] == '\0' ||
                            strspn(rest + 1, "0123456789") != strlen(rest + 1)))
        return false;
    if (strcmp(name, "localhost") == 0 || strcmp(name, "[::1]") == 0)
        return true;
    struct in_addr literal;
    if (inet_pton(AF_INET, name, &literal) == 1)
        return (ntohl(literal.s_addr) >> 24) == 127 || literal.s_addr == self->bound.s_addr ||
               self->bound.s_addr == htonl(INADDR_ANY);
    for (size_t i = 0; self->web->hosts != NULL && self->web->hosts[i] != NULL; i++)
        if (strcasecmp(name, self->web->hosts[i]) == 0)
            return true;
    return false;
}

/* A POST from another site's page carries that site as its Origin. A browser sends the
 * cookie by itself, so a POST the cookie authenticates must show its Origin (browsers
 * always send one with a POST); a script showing the token in a header may omit it. */
static bool s_same_origin(struct MHD_Connection *c, auth_t auth)
{
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    if (origin == NULL)
        return auth == AUTH_HEADER;
    char expected[512];
    snprintf(expected, sizeof expected, "http://%s", host ? host : "");
    return host != NULL && strcmp(origin, expected) == 0;
}

/* POST /api/session: the token, shown once in the header, exchanged for the cookie that
 * stands for it from then on -- HttpOnly (no script reads it), SameSite=Strict (no other
 * site's page sends it), Path=/api (only the API sees it). */
static enum MHD_Result s_session(const web_http_t *self, struct MHD_Connection *c, auth_t auth)
{
    if (auth != AUTH_HEADER)
        return s_send_reply(c, web_error(401, "the session is made from the token, shown in "
                                              "the X-Cloister-Token header"));
    char cookie[160];
    snprintf(cookie, sizeof cookie, "%s=%s; HttpOnly; SameSite=Strict; Path=/api", self->cookie,
             self->web->token);
    static const char body[] = "{\"session\":true}";
    return s_send_cookie(c, 200, "application/json", body, sizeof body - 1,
                         MHD_RESPMEM_PERSISTENT, cookie);
}

/* Splits "<prefix><name>[/<action>]" into name (into buf) and action ("" when none);
 * false when the url has another prefix, or the name is empty or too long. */
static bool s_resource(const char *url, const char *prefix, char *name, size_t size,
                       const char **action)
{
    size_t n = strlen(prefix);
    if (strncmp(url, prefix, n) != 0)
        return false;
    const char *rest = url + n;
    const char *slash = strchr(rest, '/');
    size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
    if (len == 0 || len >= size)
        return false;
    memcpy(name, rest, len);
    name[len] = '\0';
    *action = slash ? slash + 1 : "";
    return true;
}

static enum MHD_Result s_events(const web_t *web, struct MHD_Connection *c)
{
    const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
    const char *since = last ? last : s_arg(c, "since");
    char *end = NULL;
    long long seq = since ? strtoll(since, &end, 10) : -1;
    if (since != NULL && (end == since || *end != '\0'))
        return s_send_reply(c, web_error(400, "since must be an event seq, not '%.40s'", since));
    struct MHD_Response *response = web_sse_response(web, seq);
    if (response == NULL)
        return s_send_reply(c, web_error(500, "cannot start the event stream"));
    enum MHD_Result result = MHD_queue_response(c, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return result;
}

static web_reply_t s_get_reply(web_t *web, struct MHD_Connection *c, const char *url)
{
    char name[256];
    const char *action = NULL;
    if (strcmp(url, "/api/status") == 0)
        return web_api_status(web);
    if (strcmp(url, "/api/tasks") == 0) {
        web_history_t query = {.state = s_arg(c, "state"),
                               .specialist = s_arg(c, "specialist"),
                               .issue = s_arg(c, "issue"),
                               .text = s_arg(c, "q"),
                               .before = s_arg(c, "before"),
                               .limit = s_arg(c, "limit")};
        return web_api_history(web, &query);
    }
    if (strcmp(url, "/api/reviews") == 0)
        return web_api_reviews(web);
    if (strcmp(url, "/api/merge-queues") == 0)
        return web_api_merge_queues();
    if (strcmp(url, "/api/figures") == 0)
        return (web_reply_t){.status = 200, .body = web_figures_json(web->figures)};
    if (s_resource(url, "/api/queues/", name, sizeof name, &action) && action[0] == '\0')
        return web_api_queue(web, name, s_arg(c, "offset"), s_arg(c, "limit"));
    if (s_resource(url, "/api/issues/", name, sizeof name, &action) && action[0] == '\0')
        return web_api_issue(web, name);
    if (s_resource(url, "/api/tasks/", name, sizeof name, &action)) {
        if (action[0] == '\0')
            return web_api_task(web, name);
        if (strcmp(action, "events") == 0)
            return web_api_task_events(web, name);
    }
    return web_error(404, "no such resource: %.200s", url);
}

/* The body as a JSON object (an empty body is {}). */
static web_reply_t s_parse_body(const body_t *body, json_t **out)
{
    *out = NULL;
    if (body->too_big)
        return web_error(413, "the body is over %d bytes", WEB_HTTP_MAX_BODY);
    json_error_t error;
    *out = body->len == 0 ? json_object() : json_loadb(body->data, body->len, 0, &error);
    if (*out == NULL || !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return web_error(400, "the body must be a JSON object%s%s", body->len ? ": " : "",
                         body->len ? error.text : "");
    }
    return (web_reply_t){.status = 0};
}

static web_reply_t s_post_reply(web_t *web, const char *url, const json_t *body)
{
    char name[256];
    const char *action = NULL;
    if (strcmp(url, "/api/approve") == 0)
        return web_api_approve(web, body);
    if (s_resource(url, "/api/tasks/", name, sizeof name, &action)) {
        if (strcmp(action, "cancel") == 0)
            return web_api_cancel(web, name);
        if (strcmp(action, "retry") == 0)
            return web_api_retry(web, name);
        if (strcmp(action, "priority") == 0)
            return web_api_priority(web, name, body);
    }
    if (s_resource(url, "/api/specialists/", name, sizeof name, &action) &&
        strcmp(action, "wake") == 0)
        return web_api_wake(web, name, body);
    return web_error(404, "no such action: %.200s", url);
}

static bool s_ends_with(const char *text, const char *suffix)
{
    size_t len = strlen(text), n = strlen(suffix);
    return len >= n && strcmp(text + len - n, suffix) == 0;
}

/* Whether a POST route exists for url (so a GET on it is 405, not 404). */
static bool s_is_action(const char *url)
{
    bool task = strncmp(url, "/api/tasks/", 11) == 0;
    return strcmp(url, "/api/approve") == 0 || strcmp(url, "/api/session") == 0 ||
           (task && (s_ends_with(url, "/cancel") || s_ends_with(url, "/retry") ||
                     s_ends_with(url, "/priority"))) ||
           (strncmp(url, "/api/specialists/", 17) == 0 && s_ends_with(url, "/wake"));
}

/* A POST's body, gathered over MHD's calls; false when memory runs out. */
static bool s_gather(body_t *body, const char *upload, size_t *upload_size)
{
    if (body->len + *upload_size > WEB_HTTP_MAX_BODY) {
        body->too_big = true;
    } else {
        char *grown = realloc(body->data, body->len + *upload_size);
        if (grown == NULL)
            return false;
        memcpy(grown + body->len, upload, *upload_size);
        body->data = grown;
        body->len += *upload_size;
    }
    *upload_size = 0;
    return true;
}

static enum MHD_Result s_api(web_http_t *self, struct MHD_Connection *c, const char *url,
                             const char *method, const body_t *raw)
{
    web_t *web = self->web;
    auth_t auth = s_auth(self, c);
    if (auth == AUTH_NONE)
        return s_send_reply(c, web_error(401, "this needs the dashboard's token (pan web url)"));
    if (strcmp(method, "GET") == 0) {
        if (s_is_action(url))
            return s_send_reply(c, web_error(405, "%s needs POST", url));
        if (strcmp(url, "/api/events") == 0)
            return s_events(web, c);
        return s_send_reply(c, s_get_reply(web, c, url));
    }
    if (strcmp(method, "POST") != 0)
        return s_send_reply(c, web_error(405, "%s is not allowed", method));
    if (!s_same_origin(c, auth))
        return s_send_reply(c, web_error(403, "a request from another origin is refused"));
    if (strcmp(url, "/api/session") == 0)
        return s_session(self, c, auth);
    json_t *body = NULL;
    web_reply_t reply = s_parse_body(raw, &body);
    if (reply.status == 0)
        reply = s_post_reply(web, url, body);
    json_decref(body);
    return s_send_reply(c, reply);
}

static enum MHD_Result s_handle(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **state)
{
    (void)version;
    web_http_t *self = cls;
    bool post = strcmp(method, "POST") == 0;
    if (post && *state == NULL) { /* the first call: the body comes next */
        *state = calloc(1, sizeof(body_t));
        return *state ? MHD_YES : MHD_NO;
    }
    if (post && *upload_size > 0)
        return s_gather(*state, upload, upload_size) ? MHD_YES : MHD_NO;
    if (!s_host_allowed(self, c)) {
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
        return s_send_reply(c, web_error(421, "the Host header '%.200s' does not name this "
                                              "dashboard (localhost, its address, or one of "
                                              "[web] hosts): refused, as a DNS rebinding "
                                              "attack would be",
                                         host ? host : "(none)"));
    }
    if (strncmp(url, "/api/", 5) != 0) {
        if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
            return s_send_reply(c, web_error(405, "%s is not allowed here", method));
        return s_page(c, url);
    }
    return s_api(self, c, url, method, *state);
}

static void s_completed(void *cls, struct MHD_Connection *c, void **state,
                        enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)c;
    (void)code;
    body_t *body = *state;
    if (body != NULL) {
        free(body->data);
        free(body);
        *state = NULL;
    }
}

web_http_t *web_http_start(web_t *web, const char *bind_address, uint16_t port)
{
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (inet_pton(AF_INET, bind_address, &address.sin_addr) != 1) {
        failure_set(FAILURE_INVALID, "bind address '%s' is not an IPv4 address", bind_address);
        return NULL;
    }
    web_http_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->web = web;
    self->bound = address.sin_addr;
    self->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
        port, NULL, NULL, s_handle, self, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)256, MHD_OPTION_END);
    if (self->daemon == NULL) {
        failure_set(FAILURE_IO, "cannot listen on %s:%u", bind_address, (unsigned)port);
        free(self);
        return NULL;
    }
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(self->daemon, MHD_DAEMON_INFO_BIND_PORT);
    self->port = info ? info->port : port;
    snprintf(self->cookie, sizeof self->cookie, "cloister_%u", (unsigned)self->port);
    return self;
}

uint16_t web_http_port(const web_http_t *self)
{
    return self->port;
}

void web_http_stop(web_http_t **self_p)
{
    web_http_t *self = *self_p;
    if (self == NULL)
        return;
    MHD_stop_daemon(self->daemon);
    free(self);
    *self_p = NULL;
}
