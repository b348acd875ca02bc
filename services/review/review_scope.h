/* review_scope: the last commit the review read, per issue, repository and branch, so the
 * next review of the branch reads only what changed since (an incremental review).
 *
 * Kept as one small file per key under $PANOPTICON_HOME/specialists/review-agent/reviewed/
 * (<16 hex digits of the key's hash>.json: {issue, workspace, branch, commit}), written
 * atomically, so replicas of the review-agent share it. The commit is recorded only when a
 * review's gate opened. Beside it, <hash>.findings.json keeps the last review's findings,
 * whatever its gate, so the next round can say which were resolved. */
#ifndef CLOISTER_REVIEW_SCOPE_H
#define CLOISTER_REVIEW_SCOPE_H

#include <jansson.h>

#define REVIEW_SCOPE_COMMIT_SIZE 41

/* The commit last reviewed for (issue, workspace, branch) into commit (hex). `issue` may be
 * NULL or "". Returns 0, or FAILURE_NOT_FOUND when nothing was recorded. */
int review_scope_last(const char *issue, const char *workspace, const char *branch,
                      char commit[REVIEW_SCOPE_COMMIT_SIZE]);

/* Records `commit` as the last reviewed for the key. Returns 0 or FAILURE_IO. */
int review_scope_record(const char *issue, const char *workspace, const char *branch,
                        const char *commit);

/* The findings of the key's last review (a new array the caller owns; empty when none). */
json_t *review_scope_findings(const char *issue, const char *workspace, const char *branch);

/* Keeps `findings` as the key's last review's. Returns 0 or FAILURE_IO. */
int review_scope_keep_findings(const char *issue, const char *workspace, const char *branch,
                               const json_t *findings);

#endif
