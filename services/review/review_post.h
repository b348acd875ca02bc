/* review_post: posts a finished review on its pull request with the GitHub CLI,
 * `gh pr review <url> --approve | --request-changes | --comment --body-file -`, when
 * [review] post = true and the task's payload has a prUrl.
 *
 * The command ([review] gh_command, default "gh", looked up in PATH) runs with argv only,
 * never a shell, in the workspace, with the body on stdin and a time limit; it stops when
 * the task is cancelled. Posting is a courtesy to the humans on the pull request: when it
 * fails the review still stands, and the result says what went wrong. */
#ifndef CLOISTER_REVIEW_POST_H
#define CLOISTER_REVIEW_POST_H

#include "specialist.h"

#include <jansson.h>

/* Seconds a `gh pr review` may take. */
#define REVIEW_POST_TIMEOUT_S 60

/* What to post: the verdict (APPROVED | CHANGES_REQUESTED | COMMENTED), the agent's NOTES
 * (may be NULL) and the findings (array of {severity, file, line, message}). */
typedef struct {
    const char *gh_command;
    const char *pr_url;
    const char *workspace;
    const char *verdict;
    const char *notes;
    const json_t *findings;
} review_post_t;

/* The review's text as posted (markdown; caller frees). NULL if memory runs out. */
char *review_post_body(const review_post_t *post);

/* Runs the command and records the outcome in the task's result: `posted` (bool), and
 * `post_error` (one line) when it failed. */
void review_post_run(specialist_ctx_t *ctx, const review_post_t *post);

#endif
