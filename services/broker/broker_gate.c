/* broker_gate: the review gate, held at submit (see broker_internal.h).
 *
 * `pan approve` follows the review's gate, but a merge can also be submitted directly (pan
 * submit, or any client on the bus): the broker is where every submit passes, so the check
 * lives here. A merge submitted from outside (not chained by a finished task) must name the
 * commit it merges (payload.commit) and that commit must have passed a review of the same
 * issue: the newest finished review whose diff_head (REVIEWED_COMMIT from a review-agent of
 * one's own) is that commit decides. It reads what
 * the review-agent stored, not the review rules: each finished review carries GATE ("open" |
 * "blocked") and FINDINGS, each marked `blocking`; a review without GATE is blocked when its
 * REVIEW_RESULT is there and is not APPROVED. payload.force, [security] require_review =
 * false or [review] mode = "disabled" lift the check. */
#include "broker_internal.h"

#include "failure.h"
#include "store.h"

#include <msgpack.h>
#include <stdio.h>
#include <string.h>

/* The built-in specialists the gate is between. */
#define GATE_MERGE_SPECIALIST "merge-agent"
#define GATE_REVIEW_SPECIALIST "review-agent"
/* How many of an issue's latest review attempts are looked through for a finished one. */
#define GATE_ATTEMPTS_LOOKED_AT 20
/* How many blocking findings the refusal names. */
#define GATE_FINDINGS_NAMED 3

/* The issue's finished reviews, newest first. */
typedef struct {
    char tasks[GATE_ATTEMPTS_LOOKED_AT][MESSAGES_ID_CAP + 1];
    int count;
} done_reviews_t;

static void s_on_attempt(int attempt, const char *task, const char *outcome, const char *error,
                         int64_t finished, void *arg)
{
    (void)attempt;
    (void)error;
    (void)finished;
    done_reviews_t *done = arg;
    if (task == NULL || outcome == NULL || strcmp(outcome, "done") != 0 ||
        done->count == GATE_ATTEMPTS_LOOKED_AT)
        return;
    for (int i = 0; i < done->count; i++) {
        if (strcmp(done->tasks[i], task) == 0)
            return;
    }
    snprintf(done->tasks[done->count++], sizeof done->tasks[0], "%s", task);
}

/* What one stored review says about the gate. */
typedef struct {
    bool blocked;
    bool disabled;       /* reviewed in mode "disabled": it stands for any commit */
    char reviewed[64];   /* diff_head: the commit it read, "" when none */
    char findings[1200]; /* "; severity file:line message" per blocking finding named */
} review_gate_t;

/* True when the payload says force = true. */
static bool s_forced(const wire_msg_t *msg)
{
    const msgpack_object *force = wire_map_get(wire_msg_object(msg, FIELD_PAYLOAD), FIELD_FORCE);
    return force != NULL && force->type == MSGPACK_OBJECT_BOOLEAN && force->via.boolean;
}

/* Appends "; file:line message" for a blocking finding to reason. */
static void s_name_finding(const msgpack_object *finding, char *reason, size_t size)
{
    char file_buf[256], message_buf[200], severity_buf[16];
    const char *file = wire_obj_str(wire_map_get(finding, FIELD_FILE), file_buf, sizeof file_buf, "");
    const char *message =
        wire_obj_str(wire_map_get(finding, FIELD_MESSAGE), message_buf, sizeof message_buf, "");
    const char *severity =
        wire_obj_str(wire_map_get(finding, FIELD_SEVERITY), severity_buf, sizeof severity_buf, "?");
    const msgpack_object *line = wire_map_get(finding, FIELD_LINE);
    long long number = line != NULL && line->type == MSGPACK_OBJECT_POSITIVE_INTEGER
                           ? (long long)line->via.u64
                           : 0;
    size_t len = strlen(reason);
    if (number > 0)
        snprintf(reason + len, size - len, "; %s %s:%lld %s", severity, file, number, message);
    else
        snprintf(reason + len, size - len, "; %s %s%s%s", severity, file, file[0] ? " " : "",
                 message);
}

/* A finding blocks when it says so; a result from before `blocking` existed: errors do. */
static bool s_blocking(const msgpack_object *finding)
{
    const msgpack_object *blocking = wire_map_get(finding, FIELD_BLOCKING);
    if (blocking != NULL && blocking->type == MSGPACK_OBJECT_BOOLEAN)
        return blocking->via.boolean;
    char buf[16];
    return strcmp(wire_obj_str(wire_map_get(finding, FIELD_SEVERITY), buf, sizeof buf, ""), "error") ==
           0;
}

/* Reads the stored result of `review` into *gate. */
static void s_read_gate(const task_t *review, review_gate_t *gate_out)
{
    bool *blocked = &gate_out->blocked;
    char *reason = gate_out->findings;
    size_t size = sizeof gate_out->findings;
    memset(gate_out, 0, sizeof *gate_out);
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    if (review->result_len > 0 &&
        msgpack_unpack_next(&unpacked, review->result, review->result_len, NULL) ==
            MSGPACK_UNPACK_SUCCESS) {
        char gate_buf[16], verdict_buf[32];
        const char *gate =
            wire_obj_str(wire_map_get(&unpacked.data, FIELD_GATE), gate_buf, sizeof gate_buf, "");
        const char *verdict = wire_obj_str(wire_map_get(&unpacked.data, FIELD_REVIEW_RESULT),
                                           verdict_buf, sizeof verdict_buf, "");
        /* A review-agent that writes no GATE (not the built-in one): its verdict decides,
         * as in pan approve. */
        *blocked = gate[0] != '\0' ? strcmp(gate, "blocked") == 0
                                   : verdict[0] != '\0' && strcmp(verdict, "APPROVED") != 0;
        char mode_buf[16];
        gate_out->disabled = strcmp(wire_obj_str(wire_map_get_key(&unpacked.data, "review_mode"),
                                                 mode_buf, sizeof mode_buf, ""),
                                    "disabled") == 0;
        wire_obj_str(wire_map_get_key(&unpacked.data, "diff_head"), gate_out->reviewed,
                     sizeof gate_out->reviewed, "");
        if (gate_out->reviewed[0] == '\0') /* a review-agent of one's own (cloister-worker) */
            wire_obj_str(wire_map_get_key(&unpacked.data, "REVIEWED_COMMIT"), gate_out->reviewed,
                         sizeof gate_out->reviewed, "");
        const msgpack_object *findings = wire_map_get(&unpacked.data, FIELD_FINDINGS);
        int named = 0;
        for (uint32_t i = 0; *blocked && findings != NULL &&
                             findings->type == MSGPACK_OBJECT_ARRAY && i < findings->via.array.size;
             i++) {
            const msgpack_object *finding = &findings->via.array.ptr[i];
            if (!s_blocking(finding))
                continue;
            if (named++ < GATE_FINDINGS_NAMED)
                s_name_finding(finding, reason, size);
        }
        if (named > GATE_FINDINGS_NAMED) {
            size_t len = strlen(reason);
            snprintf(reason + len, size - len, "; and %d more", named - GATE_FINDINGS_NAMED);
        }
    }
    msgpack_unpacked_destroy(&unpacked);
}

/* Merges need a passing review unless [security] require_review = false or the
 * configured [review] mode is "disabled". */
static bool s_review_required(const broker_t *self)
{
    const config_t *config = self->config.config;
    return config_bool(config, "security", "require_review", true) &&
           strcmp(config_string(config, "review", "mode", "normal"), "disabled") != 0;
}

#define GATE_OVERRIDE_HINT                                                                     \
    "submit with payload.force = true (pan submit --force, pan approve --force) to override"

/* The issue's reviews as the gate sees them: the newest, and the newest that read the
 * commit to merge (or was made in mode "disabled"). */
typedef struct {
    char newest_task[MESSAGES_ID_CAP + 1]; /* "" when the issue has no finished review */
    review_gate_t newest;
    char match_task[MESSAGES_ID_CAP + 1]; /* "" when none read the commit */
    review_gate_t match;
} issue_reviews_t;

/* Reads the issue's finished reviews, newest first, until one read `commit`. Returns 0 or
 * the store's failure. */
static int s_issue_reviews(broker_t *self, const char *issue, const char *commit,
                           issue_reviews_t *out)
{
    memset(out, 0, sizeof *out);
    done_reviews_t done = {.count = 0};
    int rc = store_attempts_for_issue(self->store, issue, GATE_REVIEW_SPECIALIST,
                                      GATE_ATTEMPTS_LOOKED_AT, s_on_attempt, &done);
    for (int i = 0; rc == 0 && i < done.count && out->match_task[0] == '\0'; i++) {
        task_t *review = NULL;
        rc = store_task_load(self->store, done.tasks[i], &review);
        if (rc == FAILURE_NOT_FOUND) {
            rc = 0; /* pruned by retention */
            continue;
        }
        if (rc != 0)
            break;
        review_gate_t gate;
        s_read_gate(review, &gate);
        task_destroy(&review);
        if (out->newest_task[0] == '\0') {
            snprintf(out->newest_task, sizeof out->newest_task, "%s", done.tasks[i]);
            out->newest = gate;
        }
        if (gate.disabled || strcmp(gate.reviewed, commit) == 0) {
            snprintf(out->match_task, sizeof out->match_task, "%s", done.tasks[i]);
            out->match = gate;
        }
    }
    return rc;
}

/* The refusal when no review read `commit`. */
static int s_refuse_unreviewed(const char *issue, const char *commit, const issue_reviews_t *r)
{
    if (r->newest_task[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "issue %s has no finished review, so commit %.12s cannot be merged; "
                           "review it first or " GATE_OVERRIDE_HINT,
                           issue, commit);
    if (r->newest.blocked)
        return failure_set(FAILURE_INVALID,
                           "the newest review of issue %s (task %s) blocked the merge gate%s%s, "
                           "and no review passed commit %.12s; " GATE_OVERRIDE_HINT,
                           issue, r->newest_task, r->newest.findings[0] ? ": " : "",
                           r->newest.findings[0] ? r->newest.findings + 2 : "", commit);
    return failure_set(FAILURE_INVALID,
                       "no review of issue %s read commit %.12s (the newest, task %s, read "
                       "%.12s); review the commit to merge, or " GATE_OVERRIDE_HINT,
                       issue, commit, r->newest_task,
                       r->newest.reviewed[0] ? r->newest.reviewed : "no named commit");
}

int broker_gate_check(broker_t *self, const wire_msg_t *msg, const char *specialist,
                      const char *issue, const char *parent)
{
    if (strcmp(specialist, GATE_MERGE_SPECIALIST) != 0 || parent != NULL || s_forced(msg) ||
        !s_review_required(self))
        return 0;
    if (issue == NULL || issue[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "a merge needs an issueId: the broker merges only a commit that "
                           "passed that issue's review; " GATE_OVERRIDE_HINT);
    char commit_buf[64];
    const msgpack_object *payload = wire_msg_object(msg, FIELD_PAYLOAD);
    const char *commit =
        wire_obj_str(wire_map_get(payload, FIELD_COMMIT), commit_buf, sizeof commit_buf, "");
    if (commit[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "a merge must name the commit it merges (payload.commit), so the "
                           "broker can match it with a passing review of issue %s (pan submit "
                           "pins the branch's head, pan approve the reviewed commit); "
                           GATE_OVERRIDE_HINT,
                           issue);
    issue_reviews_t reviews;
    int rc = s_issue_reviews(self, issue, commit, &reviews);
    if (rc != 0)
        return rc;
    if (reviews.match_task[0] == '\0')
        return s_refuse_unreviewed(issue, commit, &reviews);
    if (!reviews.match.blocked)
        return 0;
    return failure_set(FAILURE_INVALID,
                       "the review of commit %.12s of issue %s (task %s) blocked the merge "
                       "gate%s%s; " GATE_OVERRIDE_HINT,
                       commit, issue, reviews.match_task, reviews.match.findings[0] ? ": " : "",
                       reviews.match.findings[0] ? reviews.match.findings + 2 : "");
}
