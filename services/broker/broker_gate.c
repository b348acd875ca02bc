/* broker_gate: the review gate, held at submit (see broker_internal.h).
 *
 * `pan approve` follows the review's gate, but a merge can also be submitted directly (pan
 * submit, or any client on the bus): the broker is where every submit passes, so the check
 * lives here. It reads what the review-agent stored, not the review rules: each finished
 * review carries GATE ("open" | "blocked") and FINDINGS, each marked `blocking`; a review
 * without GATE is blocked when its REVIEW_RESULT is there and is not APPROVED. */
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

typedef struct {
    char task[MESSAGES_ID_CAP + 1]; /* the newest done review, "" when none */
} newest_review_t;

static void s_on_attempt(int attempt, const char *task, const char *outcome, const char *error,
                         int64_t finished, void *arg)
{
    (void)attempt;
    (void)error;
    (void)finished;
    newest_review_t *newest = arg;
    if (newest->task[0] == '\0' && task != NULL && outcome != NULL && strcmp(outcome, "done") == 0)
        snprintf(newest->task, sizeof newest->task, "%s", task);
}

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

/* Reads the stored result of `review`: *blocked when its GATE is "blocked", and the
 * blocking findings into reason. */
static void s_read_gate(const task_t *review, bool *blocked, char *reason, size_t size)
{
    *blocked = false;
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

int broker_gate_check(broker_t *self, const wire_msg_t *msg, const char *specialist,
                      const char *issue, const char *parent)
{
    if (strcmp(specialist, GATE_MERGE_SPECIALIST) != 0 || issue == NULL || issue[0] == '\0' ||
        parent != NULL || s_forced(msg))
        return 0;
    newest_review_t newest = {.task = ""};
    int rc = store_attempts_for_issue(self->store, issue, GATE_REVIEW_SPECIALIST,
                                      GATE_ATTEMPTS_LOOKED_AT, s_on_attempt, &newest);
    if (rc != 0 || newest.task[0] == '\0')
        return rc;
    task_t *review = NULL;
    rc = store_task_load(self->store, newest.task, &review);
    if (rc == FAILURE_NOT_FOUND)
        return 0;
    if (rc != 0)
        return rc;
    bool blocked = false;
    char findings[1200] = "";
    s_read_gate(review, &blocked, findings, sizeof findings);
    task_destroy(&review);
    if (!blocked)
        return 0;
    return failure_set(FAILURE_INVALID,
                       "the newest review of issue %s (task %s) blocked the merge gate%s%s; "
                       "submit with payload.force = true (pan submit --force, pan approve "
                       "--force) to override",
                       issue, newest.task, findings[0] ? ": " : "",
                       findings[0] ? findings + 2 : "");
}
