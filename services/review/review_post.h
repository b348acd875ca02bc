/* review_post: posts a finished review on its pull request with the GitHub CLI, when
 * [review] post = true and the task's payload has a prUrl.
 *
 * What is posted follows the review's GATE, not the agent's verdict: a blocked gate requests
 * changes, an open gate with findings comments, a clean one (open, no findings) approves.
 * Findings with a file and a line go on the diff as inline comments, in one review:
 *   gh api --method POST repos/OWNER/REPO/pulls/N/reviews --input -
 * with {event, body, comments: [{path, line, side, body}]} on stdin; the other findings are
 * listed in the body. Without inline findings (or when the URL is not a GitHub pull request
 * URL, github.com/OWNER/REPO/pull/N) it is
 *   gh pr review URL --approve | --request-changes | --comment --body-file -
 * with every finding in the body.
 *
 * Posting again updates rather than repeats. Every posted review carries a hidden marker
 * (REVIEW_POST_MARKER). On a GitHub pull request URL the pull request's reviews are listed
 * first (gh api repos/OWNER/REPO/pulls/N/reviews); when one carries the marker:
 *   - it is in the state this review would leave (APPROVED, CHANGES_REQUESTED, COMMENTED):
 *     its text is replaced (gh api --method PUT .../reviews/ID, {body}) with this review's,
 *     every finding in the body -- post_action "updated", nothing new on the pull request;
 *   - another state (a review's state cannot be edited): the new review is posted and the
 *     earlier one's text becomes a one-line "replaced" note -- post_action "replaced".
 * Otherwise (none yet, a list that cannot be read, another forge) it is posted as new:
 * post_action "created".
 *
 * The command ([review] gh_command, default "gh", looked up in PATH) runs with argv only,
 * never a shell, in the workspace, with its input on stdin and a time limit; it stops when
 * the task is cancelled. Posting is a courtesy to the humans on the pull request: when it
 * fails the review still stands, and the result says what went wrong. */
#ifndef CLOISTER_REVIEW_POST_H
#define CLOISTER_REVIEW_POST_H

#include "specialist.h"

#include <jansson.h>
#include <stdbool.h>

/* The hidden marker that identifies Cloister's review on a pull request. */
#define REVIEW_POST_MARKER "<!-- cloister-review -->"

/* Seconds a post may take. */
#define REVIEW_POST_TIMEOUT_S 60

/* What to post: the verdict (APPROVED | CHANGES_REQUESTED | COMMENTED), whether the gate
 * is open, the agent's NOTES (may be NULL) and the findings (array of {severity, file,
 * line, message}). */
typedef struct {
    const char *gh_command;
    const char *pr_url;
    const char *workspace;
    const char *verdict;
    bool gate_open;
    const char *notes;
    const json_t *findings;
} review_post_t;

/* The review's text as posted (markdown; caller frees): the verdict, the gate, the notes
 * and the findings; with `skip_inline`, findings that have a file and a line (posted as
 * inline comments) are left out. NULL if memory runs out. */
char *review_post_body(const review_post_t *post, bool skip_inline);

/* Runs the command(s) and records the outcome in the task's result: `posted` (bool),
 * `post_event` (APPROVE | REQUEST_CHANGES | COMMENT), `post_action` (created | updated |
 * replaced), `post_review_id` (the review updated), `post_inline` (the number of inline
 * comments), and `post_error` (one line) when it failed. */
void review_post_run(specialist_ctx_t *ctx, const review_post_t *post);

#endif
