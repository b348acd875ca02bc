/* review_post: see review_post.h. */
#include "review_post.h"

#include "failure.h"
#include "proc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one wait for the command lasts before cancellation is looked at again. */
#define S_STEP_MS 200

/* Appends printf-style text to a growing string; returns false when memory runs out. */
static bool s_append(char **text, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool s_append(char **text, size_t *len, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int more = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (more < 0)
        return false;
    char *grown = realloc(*text, *len + (size_t)more + 1);
    if (grown == NULL)
        return false;
    va_start(args, fmt);
    vsnprintf(grown + *len, (size_t)more + 1, fmt, args);
    va_end(args);
    *text = grown;
    *len += (size_t)more;
    return true;
}

/* True when the finding has a file and a line: it can sit on the diff. */
static bool s_inline(const json_t *finding)
{
    const char *file = json_string_value(json_object_get(finding, "file"));
    return file != NULL && file[0] != '\0' &&
           json_integer_value(json_object_get(finding, "line")) > 0;
}

char *review_post_body(const review_post_t *post, bool skip_inline)
{
    char *text = NULL;
    size_t len = 0;
    bool ok = s_append(&text, &len, "%s\n**Cloister review-agent: %s** (merge gate %s)\n",
                       REVIEW_POST_MARKER, post->verdict, post->gate_open ? "open" : "blocked");
    if (ok && post->notes != NULL && post->notes[0] != '\0')
        ok = s_append(&text, &len, "\n%s\n", post->notes);
    size_t count = json_array_size(post->findings), listed = 0, inline_count = 0;
    for (size_t i = 0; ok && i < count; i++) {
        const json_t *finding = json_array_get(post->findings, i);
        if (skip_inline && s_inline(finding)) {
            inline_count++;
            continue;
        }
        const char *severity = json_string_value(json_object_get(finding, "severity"));
        const char *file = json_string_value(json_object_get(finding, "file"));
        const char *message = json_string_value(json_object_get(finding, "message"));
        json_int_t line = json_integer_value(json_object_get(finding, "line"));
        if (listed++ == 0)
            ok = s_append(&text, &len, "\nFindings:\n");
        if (ok)
            ok = s_append(&text, &len, "- **%s**", severity ? severity : "info");
        if (ok && file != NULL && file[0] != '\0')
            ok = line > 0 ? s_append(&text, &len, " `%s:%lld`", file, (long long)line)
                          : s_append(&text, &len, " `%s`", file);
        if (ok)
            ok = s_append(&text, &len, " %s\n", message ? message : "");
    }
    if (ok && count == 0)
        ok = s_append(&text, &len, "\nNo findings.\n");
    if (ok && inline_count > 0)
        ok = s_append(&text, &len, "\n%zu finding%s on the diff.\n", inline_count,
                      inline_count == 1 ? "" : "s");
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

/* The review event the gate calls for (GitHub's names). */
static const char *s_event(const review_post_t *post)
{
    if (!post->gate_open)
        return "REQUEST_CHANGES";
    return json_array_size(post->findings) > 0 ? "COMMENT" : "APPROVE";
}

/* gh pr review's flag for an event. */
static const char *s_flag(const char *event)
{
    if (strcmp(event, "APPROVE") == 0)
        return "--approve";
    if (strcmp(event, "REQUEST_CHANGES") == 0)
        return "--request-changes";
    return "--comment";
}

/* The API path of the pull request's reviews from a URL
 * https://github.com/OWNER/REPO/pull/N[/...], into buf. False when the URL is not one. */
static bool s_reviews_path(const char *url, char *buf, size_t size)
{
    const char *prefix = "https://github.com/";
    if (strncmp(url, prefix, strlen(prefix)) != 0)
        return false;
    char owner[128], repo[128];
    unsigned long number = 0;
    int used = 0;
    if (sscanf(url + strlen(prefix), "%127[A-Za-z0-9_.-]/%127[A-Za-z0-9_.-]/pull/%lu%n", owner,
               repo, &number, &used) != 3 ||
        number == 0)
        return false;
    char next = url[strlen(prefix) + (size_t)used];
    if (next != '\0' && next != '/' && next != '#' && next != '?')
        return false;
    return (size_t)snprintf(buf, size, "repos/%s/%s/pulls/%lu/reviews", owner, repo, number) < size;
}

/* The request body of one review with inline comments (caller frees), or NULL. */
static char *s_api_request(const review_post_t *post, const char *event, size_t *inline_count)
{
    char *body = review_post_body(post, true);
    json_t *comments = json_array();
    json_t *request = body && comments ? json_pack("{s:s, s:s, s:O}", "event", event, "body",
                                                   body, "comments", comments)
                                       : NULL;
    size_t i;
    const json_t *finding;
    json_array_foreach(post->findings, i, finding)
    {
        if (!s_inline(finding))
            continue;
        char text[4600];
        snprintf(text, sizeof text, "**%s** %s",
                 json_string_value(json_object_get(finding, "severity")),
                 json_string_value(json_object_get(finding, "message")));
        json_array_append_new(json_object_get(request, "comments"),
                              json_pack("{s:O, s:O, s:s, s:s}", "path",
                                        json_object_get(finding, "file"), "line",
                                        json_object_get(finding, "line"), "side", "RIGHT",
                                        "body", text));
        (*inline_count)++;
    }
    char *text = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    json_decref(comments);
    free(body);
    return text;
}

/* The last non-empty line of text, trimmed, into buf. */
static void s_last_line(const char *text, char *buf, size_t size)
{
    size_t end = strlen(text);
    while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r' || text[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    snprintf(buf, size, "%.*s", (int)(end - start), text + start);
}

static void s_failed(specialist_ctx_t *ctx, const char *error)
{
    specialist_result_bool(ctx, "posted", false);
    specialist_result_str(ctx, "post_error", error);
    specialist_progressf(ctx, "info", "review not posted: %s", error);
}

/* Appends a line of the command's stdout to the growing text (arg). */
static int s_collect(void *arg, const char *line, size_t len)
{
    char **text = arg;
    size_t had = *text ? strlen(*text) : 0;
    char *grown = realloc(*text, had + len + 2);
    if (grown == NULL)
        return 1;
    memcpy(grown + had, line, len);
    grown[had + len] = '\n';
    grown[had + len + 1] = '\0';
    *text = grown;
    return 0;
}

/* Runs argv with `input` on stdin; its stdout into *out when out is not NULL (the caller
 * frees it). Returns true when it exited 0; otherwise the reason is in error. `what`
 * names the command in errors. */
static bool s_exec(specialist_ctx_t *ctx, const review_post_t *post, char **argv,
                   const char *input, const char *what, char **out, char *error, size_t size)
{
    proc_options_t options = {.argv = argv,
                              .cwd = post->workspace,
                              .stdin_data = input,
                              .stdin_len = strlen(input),
                              .on_line = out ? s_collect : NULL,
                              .on_line_arg = out,
                              .timeout_ms = REVIEW_POST_TIMEOUT_S * 1000};
    proc_t *proc = NULL;
    if (proc_start(&proc, &options) != 0) {
        snprintf(error, size, "%s", failure_message());
        return false;
    }
    specialist_watch_child(ctx, proc_pid(proc));
    while (proc_step(proc, S_STEP_MS) == 0) {
        if (specialist_cancelled(ctx))
            proc_stop(proc, PROC_STOP_REQUESTED);
    }
    specialist_watch_child(ctx, 0);
    const proc_status_t *status = proc_status(proc);
    char detail[1000];
    bool ok = false;
    if (status->stopped_by == PROC_STOP_TIMEOUT) {
        snprintf(error, size, "%s %s did not finish within %d s", post->gh_command, what,
                 REVIEW_POST_TIMEOUT_S);
    } else if (status->stopped_by != PROC_STOP_NONE) {
        snprintf(error, size, "cancelled");
    } else if (!status->exited || status->exit_code != 0) {
        s_last_line(status->stderr_tail ? status->stderr_tail : "", detail, sizeof detail);
        snprintf(error, size, "%s %s %s %d%s%s", post->gh_command, what,
                 status->exited ? "exited" : "was killed by signal",
                 status->exited ? status->exit_code : status->term_signal, detail[0] ? ": " : "",
                 detail);
    } else {
        ok = true;
    }
    proc_destroy(&proc);
    return ok;
}

/* s_exec() that records the outcome in the result (posted, post_error). */
static bool s_run(specialist_ctx_t *ctx, const review_post_t *post, char **argv,
                  const char *input, const char *what)
{
    char error[1200];
    if (!s_exec(ctx, post, argv, input, what, NULL, error, sizeof error)) {
        s_failed(ctx, error);
        return false;
    }
    specialist_result_bool(ctx, "posted", true);
    specialist_progressf(ctx, "info", "review posted on %s", post->pr_url);
    return true;
}

/* True when some finding can sit on the diff. */
static bool s_any_inline(const json_t *findings)
{
    size_t i;
    const json_t *finding;
    json_array_foreach(findings, i, finding)
    {
        if (s_inline(finding))
            return true;
    }
    return false;
}

/* The GitHub review state an event leaves. */
static const char *s_state(const char *event)
{
    return strcmp(event, "APPROVE") == 0           ? "APPROVED"
           : strcmp(event, "REQUEST_CHANGES") == 0 ? "CHANGES_REQUESTED"
                                                   : "COMMENTED";
}

/* The newest review of the pull request (API path `path`) whose body carries
 * REVIEW_POST_MARKER: its id into *id and its state into state. False when there is none
 * or the list cannot be read (then a new review is posted, as the first time). */
static bool s_earlier(specialist_ctx_t *ctx, const review_post_t *post, const char *path,
                      json_int_t *id, char *state, size_t size)
{
    char *argv[] = {(char *)post->gh_command, "api", (char *)path, NULL};
    char *out = NULL, error[1200];
    bool listed = s_exec(ctx, post, argv, "", "api (list reviews)", &out, error, sizeof error);
    json_t *reviews = listed && out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    bool found = false;
    size_t i;
    const json_t *review;
    json_array_foreach(reviews, i, review)
    {
        const char *body = json_string_value(json_object_get(review, "body"));
        const char *was = json_string_value(json_object_get(review, "state"));
        if (body == NULL || strstr(body, REVIEW_POST_MARKER) == NULL ||
            !json_is_integer(json_object_get(review, "id")))
            continue;
        *id = json_integer_value(json_object_get(review, "id"));
        snprintf(state, size, "%s", was ? was : "");
        found = true;
    }
    json_decref(reviews);
    return found;
}

/* PUTs `body` as the text of review `id`. */
static bool s_edit(specialist_ctx_t *ctx, const review_post_t *post, const char *path,
                   json_int_t id, const char *body, bool record)
{
    char url[480];
    snprintf(url, sizeof url, "%s/%lld", path, (long long)id);
    json_t *request = json_pack("{s:s}", "body", body);
    char *input = request ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    char *argv[] = {(char *)post->gh_command, "api", "--method", "PUT", url, "--input", "-",
                    NULL};
    char error[1200];
    bool ok = input != NULL &&
              (record ? s_run(ctx, post, argv, input, "api (edit review)")
                      : s_exec(ctx, post, argv, input, "api (edit review)", NULL, error,
                               sizeof error));
    free(input);
    return ok;
}

void review_post_run(specialist_ctx_t *ctx, const review_post_t *post)
{
    if (post->pr_url[0] == '-') { /* gh would take it for an option */
        s_failed(ctx, "prUrl is not a pull request URL");
        return;
    }
    const char *event = s_event(post);
    specialist_result_str(ctx, "post_event", event);
    char path[400], state[64] = "";
    bool github = s_reviews_path(post->pr_url, path, sizeof path);
    json_int_t earlier = 0;
    bool found = github && s_earlier(ctx, post, path, &earlier, state, sizeof state);
    if (found && strcmp(state, s_state(event)) == 0) {
        /* Same state: the earlier review's text becomes this one's, findings in the body
         * (inline comments cannot be replaced). */
        char *body = review_post_body(post, false);
        if (body != NULL && s_edit(ctx, post, path, earlier, body, true))
            specialist_result_str(ctx, "post_action", "updated");
        else if (body == NULL)
            s_failed(ctx, "out of memory");
        specialist_result_int(ctx, "post_review_id", (int64_t)earlier);
        specialist_result_int(ctx, "post_inline", 0);
        free(body);
        return;
    }
    size_t inline_count = 0;
    bool api = github && s_any_inline(post->findings);
    char *input = api ? s_api_request(post, event, &inline_count) : review_post_body(post, false);
    if (input == NULL) {
        s_failed(ctx, "out of memory");
        return;
    }
    specialist_result_int(ctx, "post_inline", (int64_t)inline_count);
    bool posted;
    if (api) {
        char *argv[] = {(char *)post->gh_command, "api", "--method", "POST", path, "--input",
                        "-", NULL};
        posted = s_run(ctx, post, argv, input, "api");
    } else {
        char *argv[] = {(char *)post->gh_command, "pr", "review", (char *)post->pr_url,
                        (char *)s_flag(event), "--body-file", "-", NULL};
        posted = s_run(ctx, post, argv, input, "pr review");
    }
    free(input);
    /* A review's state cannot be edited: the new one stands and the earlier one says it
     * was replaced, so the pull request shows one current Cloister review. */
    bool replaced = posted && found &&
                    s_edit(ctx, post, path, earlier,
                           REVIEW_POST_MARKER "\n*Replaced by a newer Cloister review below.*",
                           false);
    if (posted)
        specialist_result_str(ctx, "post_action", replaced ? "replaced" : "created");
}
