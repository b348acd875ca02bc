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

char *review_post_body(const review_post_t *post)
{
    char *text = NULL;
    size_t len = 0;
    bool ok = s_append(&text, &len, "**Cloister review-agent: %s**\n", post->verdict);
    if (ok && post->notes != NULL && post->notes[0] != '\0')
        ok = s_append(&text, &len, "\n%s\n", post->notes);
    size_t count = json_array_size(post->findings);
    if (ok)
        ok = count == 0 ? s_append(&text, &len, "\nNo findings.\n")
                        : s_append(&text, &len, "\nFindings:\n");
    for (size_t i = 0; ok && i < count; i++) {
        const json_t *finding = json_array_get(post->findings, i);
        const char *severity = json_string_value(json_object_get(finding, "severity"));
        const char *file = json_string_value(json_object_get(finding, "file"));
        const char *message = json_string_value(json_object_get(finding, "message"));
        json_int_t line = json_integer_value(json_object_get(finding, "line"));
        ok = s_append(&text, &len, "- **%s**", severity ? severity : "info");
        if (ok && file != NULL && file[0] != '\0')
            ok = line > 0 ? s_append(&text, &len, " `%s:%lld`", file, (long long)line)
                          : s_append(&text, &len, " `%s`", file);
        if (ok)
            ok = s_append(&text, &len, " %s\n", message ? message : "");
    }
    if (!ok) {
        free(text);
        return NULL;
    }
    return text;
}

/* gh's flag for a verdict. */
static const char *s_flag(const char *verdict)
{
    if (strcmp(verdict, "APPROVED") == 0)
        return "--approve";
    if (strcmp(verdict, "CHANGES_REQUESTED") == 0)
        return "--request-changes";
    return "--comment";
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

void review_post_run(specialist_ctx_t *ctx, const review_post_t *post)
{
    if (post->pr_url[0] == '-') { /* gh would take it for an option */
        s_failed(ctx, "prUrl is not a pull request URL");
        return;
    }
    char *body = review_post_body(post);
    if (body == NULL) {
        s_failed(ctx, "out of memory");
        return;
    }
    char *argv[] = {(char *)post->gh_command, "pr", "review", (char *)post->pr_url,
                    (char *)s_flag(post->verdict), "--body-file", "-", NULL};
    proc_options_t options = {.argv = argv,
                              .cwd = post->workspace,
                              .stdin_data = body,
                              .stdin_len = strlen(body),
                              .timeout_ms = REVIEW_POST_TIMEOUT_S * 1000};
    proc_t *proc = NULL;
    if (proc_start(&proc, &options) != 0) {
        s_failed(ctx, failure_message());
        free(body);
        return;
    }
    specialist_watch_child(ctx, proc_pid(proc));
    while (proc_step(proc, S_STEP_MS) == 0) {
        if (specialist_cancelled(ctx))
            proc_stop(proc, PROC_STOP_REQUESTED);
    }
    specialist_watch_child(ctx, 0);
    const proc_status_t *status = proc_status(proc);
    char error[1200], detail[1000];
    if (status->stopped_by == PROC_STOP_TIMEOUT) {
        snprintf(error, sizeof error, "%s pr review did not finish within %d s",
                 post->gh_command, REVIEW_POST_TIMEOUT_S);
        s_failed(ctx, error);
    } else if (status->stopped_by != PROC_STOP_NONE) {
        s_failed(ctx, "cancelled");
    } else if (!status->exited || status->exit_code != 0) {
        s_last_line(status->stderr_tail ? status->stderr_tail : "", detail, sizeof detail);
        snprintf(error, sizeof error, "%s pr review %s %d%s%s", post->gh_command,
                 status->exited ? "exited" : "was killed by signal",
                 status->exited ? status->exit_code : status->term_signal, detail[0] ? ": " : "",
                 detail);
        s_failed(ctx, error);
    } else {
        specialist_result_bool(ctx, "posted", true);
        specialist_progressf(ctx, "info", "review posted on %s", post->pr_url);
    }
    proc_destroy(&proc);
    free(body);
}
