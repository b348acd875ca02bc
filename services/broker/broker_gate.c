/* broker_gate: the review gate, held at submit (see broker_internal.h).
 *
 * `pan approve` follows the review's gate, but a merge can also be submitted directly (pan
 * submit, any client on the bus, a worker's `next`): the broker is where every submit
 * passes, so the check lives here, and it holds for every merge alike. A merge must name
 * the commit it merges (payload.commit) and that commit must have passed a review:
 *  - a merge chained by a finished task (the pipeline's hand-off, review → [test →] merge)
 *    passes when the review it descends from read that commit and opened the gate;
 *  - any other merge (and a chained one with no review among its parents) needs its issue:
 *    the newest finished review of that issue whose diff_head (REVIEWED_COMMIT from a
 *    review-agent of one's own) is that commit decides.
 * It reads what the review-agent stored, not the review rules: each finished review carries
 * GATE ("open" | "blocked") and FINDINGS, each marked `blocking`; a review without GATE is
 * blocked when its REVIEW_RESULT is there and is not APPROVED. A review made in mode
 * "disabled" approves nothing: it did not look.
 *
 * Policy comes from configuration, never from the payload: the check is lifted by
 * [security] require_review = false, or when the review mode that holds for the target
 * branch (the target branch's .cloister/config.toml, else [review] mode) is "disabled".
 * payload.force lifts it for a submit from outside only (a worker's `next` cannot force),
 * and only from an admin key (checked in broker_submit, key_roles.h). */
#include "broker_internal.h"

#include "failure.h"
#include "log.h"
#include "repository.h"
#include "store.h"

#include <limits.h>
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
    bool disabled;       /* made in mode "disabled": it approves nothing */
    char reviewed[64];   /* diff_head: the commit it read, "" when none */
    char findings[1200]; /* "; severity file:line message" per blocking finding named */
} review_gate_t;

/* True when the payload says force = true (who may was checked at submit). */
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

#define GATE_OVERRIDE_HINT                                                                     \
    "submit with payload.force = true (pan submit --force, pan approve --force) to override"

/* The issue's reviews as the gate sees them: the newest, and the newest that read the
 * commit to merge. */
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
        if (gate.disabled)
            continue;
        if (out->newest_task[0] == '\0') {
            snprintf(out->newest_task, sizeof out->newest_task, "%s", done.tasks[i]);
            out->newest = gate;
        }
        if (strcmp(gate.reviewed, commit) == 0) {
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

/* The issue's gate for `commit`: 0 when the newest review that read it opened the gate. */
static int s_issue_gate(broker_t *self, const char *issue, const char *commit)
{
    if (issue == NULL || issue[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "a merge needs an issueId: the broker merges only a commit that "
                           "passed that issue's review; " GATE_OVERRIDE_HINT);
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

/* How many parents up a chained merge looks for the review it descends from (review →
 * test → merge is two). */
#define GATE_PARENTS_WALKED 8

/* The nearest review among the parents of a chained task, starting at `parent` (finished,
 * in the store: a result's next tasks are committed after the task that chains them).
 * Writes its id into `review_id` ("" when there is none) and its gate into *gate. Returns 0
 * or the store's failure. */
static int s_parent_review(broker_t *self, const char *parent, char *review_id, size_t size,
                           review_gate_t *gate)
{
    review_id[0] = '\0';
    char id[MESSAGES_ID_CAP + 1];
    snprintf(id, sizeof id, "%s", parent);
    for (int depth = 0; depth < GATE_PARENTS_WALKED && id[0] != '\0'; depth++) {
        task_t *task = NULL;
        int rc = store_task_load(self->store, id, &task);
        if (rc == FAILURE_NOT_FOUND)
            return 0;
        if (rc != 0)
            return rc;
        bool is_review = task->specialist != NULL &&
                         strcmp(task->specialist, GATE_REVIEW_SPECIALIST) == 0 &&
                         task->state == TASK_DONE;
        if (is_review) {
            s_read_gate(task, gate);
            snprintf(review_id, size, "%s", id);
        }
        snprintf(id, sizeof id, "%s", task->parent && !is_review ? task->parent : "");
        task_destroy(&task);
    }
    return 0;
}

/* The gate of a merge chained by `parent`: 0 when the review it descends from read
 * `commit` and opened the gate; FAILURE_NOT_FOUND when no review is among its parents (the
 * issue's reviews decide then); else the refusal. */
static int s_chained_gate(broker_t *self, const char *parent, const char *commit)
{
    char review[MESSAGES_ID_CAP + 1];
    review_gate_t gate;
    int rc = s_parent_review(self, parent, review, sizeof review, &gate);
    if (rc != 0)
        return rc;
    if (review[0] == '\0')
        return FAILURE_NOT_FOUND;
    if (gate.disabled)
        return failure_set(FAILURE_INVALID,
                           "the merge chained by %s descends from review %s, made in review "
                           "mode \"disabled\", which approves nothing now that the mode is not",
                           parent, review);
    if (strcmp(gate.reviewed, commit) != 0)
        return failure_set(FAILURE_INVALID,
                           "the merge chained by %s is of commit %.12s, but review %s read "
                           "%.12s",
                           parent, commit, review, gate.reviewed[0] ? gate.reviewed : "no commit");
    if (gate.blocked)
        return failure_set(FAILURE_INVALID, "review %s blocked the merge gate%s%s", review,
                           gate.findings[0] ? ": " : "", gate.findings[0] ? gate.findings + 2 : "");
    return 0;
}

/* Whether merges into the payload's target need a review: [security] require_review, and
 * the review mode that holds for the target branch (repository.h) is not "disabled". */
static bool s_review_required(const broker_t *self, const msgpack_object *payload)
{
    const config_t *config = self->config.config;
    if (!config_bool(config, "security", "require_review", true))
        return false;
    char workspace_buf[PATH_MAX], target_buf[256], mode[16];
    const char *workspace = wire_obj_str(wire_map_get(payload, FIELD_WORKSPACE), workspace_buf,
                                         sizeof workspace_buf, NULL);
    const char *target =
        wire_obj_str(wire_map_get_key(payload, "target"), target_buf, sizeof target_buf, "main");
    if (repository_review_mode(config, workspace, target, mode, sizeof mode) != 0)
        log_warn("merge gate: %s; the gate holds", failure_message());
    return strcmp(mode, "disabled") != 0;
}

int broker_gate_check(broker_t *self, const wire_msg_t *msg, const char *specialist,
                      const char *issue, const char *parent)
{
    const msgpack_object *payload = wire_msg_object(msg, FIELD_PAYLOAD);
    if (strcmp(specialist, GATE_MERGE_SPECIALIST) != 0 || !s_review_required(self, payload))
        return 0;
    if (parent == NULL && s_forced(msg))
        return 0;
    char commit_buf[64];
    const char *commit =
        wire_obj_str(wire_map_get(payload, FIELD_COMMIT), commit_buf, sizeof commit_buf, "");
    if (commit[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "a merge must name the commit it merges (payload.commit), so the "
                           "broker can match it with a passing review%s%s (pan submit "
                           "pins the branch's head, pan approve the reviewed commit); "
                           GATE_OVERRIDE_HINT,
                           issue ? " of issue " : "", issue ? issue : "");
    if (parent != NULL) {
        int rc = s_chained_gate(self, parent, commit);
        if (rc != FAILURE_NOT_FOUND)
            return rc;
    }
    return s_issue_gate(self, issue, commit);
}
