/* broker_gate: the review gate, held at submit (see broker_internal.h).
 *
 * `pan approve` follows the review's gate, but a merge can also be submitted directly (pan
 * submit, any client on the bus, a worker's `next`): the broker is where every submit
 * passes, so the check lives here, and it holds for every merge alike. A merge must name
 * the commit it merges (payload.commit) and its target (payload.target, default "main"),
 * and a review must have opened the gate for exactly that:
 *  - a merge chained by a finished task (the pipeline's hand-off, review → [test →] merge)
 *    passes when the review it descends from read that commit against that target and
 *    opened the gate;
 *  - any other merge (and a chained one with no review among its parents) needs its issue:
 *    the newest finished review OF that issue (exactly as stored) whose diff_head
 *    (REVIEWED_COMMIT from a review-agent of one's own) is that commit and whose target is
 *    the merge's decides.
 * A review opens the gate only for the target and the merge base it read: the merge must
 * carry the review's merge base (payload.merge_base = its merge_base, or MERGE_BASE), and
 * the merge-agent holds the merge when the target it merges into no longer contains that
 * base (the target moved back, or was swapped: the merge would bring in commits the review
 * never saw). It reads what the review-agent stored, not the review rules: each finished
 * review carries GATE ("open" | "blocked") and FINDINGS, each marked `blocking`; a review
 * without GATE is blocked when its REVIEW_RESULT is there and is not APPROVED. A review
 * made in mode "disabled" approves nothing: it did not look.
 *
 * The broker opens no repository. The review mode that holds for a target comes from the
 * target branch's commit, which the review-agent and the merge-agent read (they open the
 * repository anyway): policy is [security] require_review = false (lifts the check), and
 * a merge with no passing review is let through -- as "unreviewed", without
 * payload.merge_base -- only on a report that the mode is "disabled": the broker's own
 * [review] mode is "disabled", or the newest review of the issue against that target
 * reported mode "disabled" read from the target's own settings. The merge-agent then reads
 * the mode at the very target commit it merges into and holds the merge unless it is still
 * "disabled" (merge_service.c). Those reports come from results, which only worker-role
 * keys can send (key_roles.h). payload.force lifts the check for a submit from outside
 * only, from an admin key (checked in broker_submit); a chained merge cannot carry it. */
#include "broker_internal.h"

#include "failure.h"
#include "log.h"
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
    bool disabled;        /* made in mode "disabled": it approves nothing */
    bool mode_from_repo;  /* its mode was read from the target's own settings */
    char reviewed[64];    /* diff_head: the commit it read, "" when none */
    char merge_base[64];  /* the merge base of that commit and the target, "" when none */
    char target[256];     /* the target it was reviewed against (its payload's, "main") */
    char findings[1200];  /* "; severity file:line message" per blocking finding named */
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
        char source_buf[16];
        gate_out->mode_from_repo =
            strcmp(wire_obj_str(wire_map_get_key(&unpacked.data, "review_mode_source"),
                                source_buf, sizeof source_buf, ""),
                   "repository") == 0;
        wire_obj_str(wire_map_get_key(&unpacked.data, "diff_head"), gate_out->reviewed,
                     sizeof gate_out->reviewed, "");
        if (gate_out->reviewed[0] == '\0') /* a review-agent of one's own (cloister-worker) */
            wire_obj_str(wire_map_get_key(&unpacked.data, "REVIEWED_COMMIT"), gate_out->reviewed,
                         sizeof gate_out->reviewed, "");
        wire_obj_str(wire_map_get_key(&unpacked.data, "merge_base"), gate_out->merge_base,
                     sizeof gate_out->merge_base, "");
        if (gate_out->merge_base[0] == '\0')
            wire_obj_str(wire_map_get_key(&unpacked.data, "MERGE_BASE"), gate_out->merge_base,
                         sizeof gate_out->merge_base, "");
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
    /* The target is the one the review was asked to read against: its payload's. */
    snprintf(gate_out->target, sizeof gate_out->target, "main");
    msgpack_unpacked_init(&unpacked);
    if (review->payload_len > 0 &&
        msgpack_unpack_next(&unpacked, review->payload, review->payload_len, NULL) ==
            MSGPACK_UNPACK_SUCCESS)
        wire_obj_str(wire_map_get_key(&unpacked.data, "target"), gate_out->target,
                     sizeof gate_out->target, "main");
    msgpack_unpacked_destroy(&unpacked);
    if (gate_out->target[0] == '\0') /* "" is the default, as the review-agent reads it */
        snprintf(gate_out->target, sizeof gate_out->target, "main");
}

#define GATE_OVERRIDE_HINT                                                                     \
    "submit with payload.force = true (pan submit --force, pan approve --force) to override"

/* What the merge asks for: the commit, its target and the merge base it carries. */
typedef struct {
    const char *issue;
    char commit[64];
    char target[256];
    char merge_base[64]; /* "" when the payload carries none */
} merge_ask_t;

/* The issue's reviews as the gate sees them: the newest, the newest that read the commit
 * against the merge's target, and whether the newest against that target reported the
 * mode "disabled" from the target's own settings. */
typedef struct {
    char newest_task[MESSAGES_ID_CAP + 1]; /* "" when the issue has no finished review */
    review_gate_t newest;
    char match_task[MESSAGES_ID_CAP + 1]; /* "" when none read the commit for the target */
    review_gate_t match;
    char other_target_task[MESSAGES_ID_CAP + 1]; /* one that read the commit for another */
    review_gate_t other_target;
    bool target_seen;       /* a review against the merge's target was looked at */
    bool disabled_reported; /* the newest against it: mode "disabled", from the target */
} issue_reviews_t;

/* Reads the issue's finished reviews, newest first, until one read the commit against
 * the target. Returns 0 or the store's failure. */
static int s_issue_reviews(broker_t *self, const merge_ask_t *ask, issue_reviews_t *out)
{
    memset(out, 0, sizeof *out);
    done_reviews_t done = {.count = 0};
    int rc = store_attempts_for_issue(self->store, ask->issue, GATE_REVIEW_SPECIALIST,
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
        bool same_target = strcmp(gate.target, ask->target) == 0;
        if (same_target && !out->target_seen) {
            out->target_seen = true;
            out->disabled_reported = gate.disabled && gate.mode_from_repo;
        }
        if (gate.disabled)
            continue;
        if (out->newest_task[0] == '\0') {
            snprintf(out->newest_task, sizeof out->newest_task, "%s", done.tasks[i]);
            out->newest = gate;
        }
        if (strcmp(gate.reviewed, ask->commit) != 0)
            continue;
        if (same_target) {
            snprintf(out->match_task, sizeof out->match_task, "%s", done.tasks[i]);
            out->match = gate;
        } else if (out->other_target_task[0] == '\0') {
            snprintf(out->other_target_task, sizeof out->other_target_task, "%s", done.tasks[i]);
            out->other_target = gate;
        }
    }
    return rc;
}

/* The refusal when no review read the commit against the target. */
static int s_refuse_unreviewed(const merge_ask_t *ask, const issue_reviews_t *r)
{
    if (r->other_target_task[0] != '\0')
        return failure_set(FAILURE_INVALID,
                           "review %s of issue %s read commit %.12s against target '%s', not "
                           "'%s': a review opens the gate only for the target it read; review "
                           "it against '%s', or " GATE_OVERRIDE_HINT,
                           r->other_target_task, ask->issue, ask->commit, r->other_target.target,
                           ask->target, ask->target);
    if (r->newest_task[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "issue %s has no finished review, so commit %.12s cannot be merged; "
                           "review it first (where the target's own settings say review mode "
                           "\"disabled\", the review-agent reports that and ends at once) "
                           "or " GATE_OVERRIDE_HINT,
                           ask->issue, ask->commit);
    if (r->newest.blocked)
        return failure_set(FAILURE_INVALID,
                           "the newest review of issue %s (task %s) blocked the merge gate%s%s, "
                           "and no review passed commit %.12s; " GATE_OVERRIDE_HINT,
                           ask->issue, r->newest_task, r->newest.findings[0] ? ": " : "",
                           r->newest.findings[0] ? r->newest.findings + 2 : "", ask->commit);
    return failure_set(FAILURE_INVALID,
                       "no review of issue %s read commit %.12s (the newest, task %s, read "
                       "%.12s); review the commit to merge, or " GATE_OVERRIDE_HINT,
                       ask->issue, ask->commit, r->newest_task,
                       r->newest.reviewed[0] ? r->newest.reviewed : "no named commit");
}

/* The gate of a merge that review `review_id` (its `gate`) read the commit of, against the
 * same target: 0 when it opened the gate and the merge carries the merge base it read. */
static int s_review_opens(const char *review_id, const review_gate_t *gate,
                          const merge_ask_t *ask)
{
    if (gate->blocked)
        return failure_set(FAILURE_INVALID,
                           "the review of commit %.12s (task %s) blocked the merge gate%s%s; "
                           GATE_OVERRIDE_HINT,
                           ask->commit, review_id, gate->findings[0] ? ": " : "",
                           gate->findings[0] ? gate->findings + 2 : "");
    if (gate->merge_base[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "review %s names no merge base (merge_base, or MERGE_BASE from a "
                           "review-agent of one's own), so what it read of '%s' is unknown; "
                           "review again, or " GATE_OVERRIDE_HINT,
                           review_id, ask->target);
    if (strcmp(ask->merge_base, gate->merge_base) != 0)
        return failure_set(FAILURE_INVALID,
                           "the merge must carry payload.merge_base %.40s, the merge base of "
                           "commit %.12s and '%s' that review %s read (it carries '%.40s'; pan "
                           "approve sets it), so the merge-agent can hold a merge into a target "
                           "that no longer contains it",
                           gate->merge_base, ask->commit, ask->target, review_id,
                           ask->merge_base);
    return 0;
}

/* True when the review mode "disabled" was reported for the merge's target (see the top):
 * the broker's own [review] mode, or `reviews` (may be NULL), so a merge without a review
 * may go on to the merge-agent, which checks it again. */
static bool s_disabled_reported(const broker_t *self, const issue_reviews_t *reviews)
{
    if (strcmp(config_string(self->config.config, "review", "mode", "normal"), "disabled") == 0)
        return true;
    return reviews != NULL && reviews->disabled_reported;
}

/* The issue's gate for the merge: 0 when the newest review that read the commit against
 * the target opened the gate (or the mode "disabled" was reported for the target). */
static int s_issue_gate(broker_t *self, const merge_ask_t *ask)
{
    if (ask->issue == NULL || ask->issue[0] == '\0')
        return failure_set(FAILURE_INVALID,
                           "a merge needs an issueId: the broker merges only a commit that "
                           "passed that issue's review; " GATE_OVERRIDE_HINT);
    issue_reviews_t reviews;
    int rc = s_issue_reviews(self, ask, &reviews);
    if (rc != 0)
        return rc;
    if (reviews.match_task[0] != '\0')
        return s_review_opens(reviews.match_task, &reviews.match, ask);
    if (!s_disabled_reported(self, &reviews))
        return s_refuse_unreviewed(ask, &reviews);
    if (ask->merge_base[0] != '\0')
        return failure_set(FAILURE_INVALID,
                           "payload.merge_base %.40s: no review of issue %s read commit %.12s "
                           "against '%s' (the review mode is reported \"disabled\" there: merge "
                           "without payload.merge_base)",
                           ask->merge_base, ask->issue, ask->commit, ask->target);
    log_info("merge gate: issue %s, commit %.12s into '%s' goes to the merge-agent unreviewed: "
             "the review mode was reported \"disabled\" (it checks again at the target commit)",
             ask->issue, ask->commit, ask->target);
    return 0;
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

/* The gate of a merge chained by `parent`: 0 when the review it descends from read the
 * commit against the target and opened the gate; FAILURE_NOT_FOUND when no review is among
 * its parents (the issue's reviews decide then); else the refusal. */
static int s_chained_gate(broker_t *self, const char *parent, const merge_ask_t *ask)
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
                           "mode \"disabled\", which approves nothing",
                           parent, review);
    if (strcmp(gate.reviewed, ask->commit) != 0)
        return failure_set(FAILURE_INVALID,
                           "the merge chained by %s is of commit %.12s, but review %s read "
                           "%.12s",
                           parent, ask->commit, review,
                           gate.reviewed[0] ? gate.reviewed : "no commit");
    if (strcmp(gate.target, ask->target) != 0)
        return failure_set(FAILURE_INVALID,
                           "the merge chained by %s is into '%s', but review %s read the "
                           "commit against '%s'",
                           parent, ask->target, review, gate.target);
    return s_review_opens(review, &gate, ask);
}

int broker_gate_check(broker_t *self, const wire_msg_t *msg, const char *specialist,
                      const char *issue, const char *parent)
{
    if (strcmp(specialist, GATE_MERGE_SPECIALIST) != 0 ||
        !config_bool(self->config.config, "security", "require_review", true))
        return 0;
    if (parent == NULL && s_forced(msg))
        return 0;
    const msgpack_object *payload = wire_msg_object(msg, FIELD_PAYLOAD);
    merge_ask_t ask = {.issue = issue};
    wire_obj_str(wire_map_get(payload, FIELD_COMMIT), ask.commit, sizeof ask.commit, "");
    snprintf(ask.target, sizeof ask.target, "main");
    wire_obj_str(wire_map_get_key(payload, "target"), ask.target, sizeof ask.target, "");
    if (ask.target[0] == '\0')
        snprintf(ask.target, sizeof ask.target, "main");
    wire_obj_str(wire_map_get_key(payload, "merge_base"), ask.merge_base,
                 sizeof ask.merge_base, "");
    int rc;
    if (ask.merge_base[0] == '\0' && s_disabled_reported(self, NULL))
        /* The broker's own mode is "disabled": a merge without a review's merge base goes
         * to the merge-agent, which reads the mode at the target commit (the repository may
         * say otherwise there). One that carries a merge base is checked as any other. */
        rc = 0;
    else if (ask.commit[0] == '\0')
        rc = failure_set(FAILURE_INVALID,
                         "a merge must name the commit it merges (payload.commit), so the "
                         "broker can match it with a passing review%s%s (pan submit "
                         "pins the branch's head, pan approve the reviewed commit); "
                         GATE_OVERRIDE_HINT,
                         issue ? " of issue " : "", issue ? issue : "");
    else if ((rc = parent ? s_chained_gate(self, parent, &ask) : FAILURE_NOT_FOUND) ==
             FAILURE_NOT_FOUND)
        rc = s_issue_gate(self, &ask);
    /* The merge-agent takes payload.force as the admin's override: only a submit from
     * outside, whose key was checked, may carry it. */
    if (rc == 0 && parent != NULL && s_forced(msg))
        return failure_set(FAILURE_INVALID,
                           "the merge chained by %s carries payload.force: a chained merge "
                           "cannot force (only an admin's submit can)",
                           parent);
    return rc;
}
