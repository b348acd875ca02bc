/* protocol: the wire spelling of every enum in protocol.h. */
#include "protocol.h"

#include <string.h>

static const char *const s_msg_names[MSG_COUNT] = {
    [MSG_SUBMIT] = "submit",
    [MSG_HELLO] = "hello",
    [MSG_HEARTBEAT] = "heartbeat",
    [MSG_PROGRESS] = "progress",
    [MSG_RESULT] = "result",
    [MSG_RELEASE] = "release",
    [MSG_BYE] = "bye",
    [MSG_TASK] = "task",
    [MSG_ACK] = "ack",
    [MSG_CANCEL] = "cancel",
    [MSG_PING] = "ping",
    [MSG_SHOW_TASK] = "show_task",
    [MSG_CANCEL_TASK] = "cancel_task",
    [MSG_RETRY_TASK] = "retry_task",
    [MSG_LIST_QUEUE] = "list_queue",
    [MSG_LIST_SPECIALISTS] = "list_specialists",
    [MSG_STATS] = "stats",
    [MSG_REPLAY] = "replay",
    [MSG_REPLY] = "reply",
    [MSG_EVENT] = "event",
    [MSG_LIST_TASKS] = "list_tasks",
    [MSG_RELOAD] = "reload",
    [MSG_NOTE_TASK] = "note_task",
    [MSG_RESUME] = "resume",
    [MSG_SET_PRIORITY] = "set_priority",
};

static const char *const s_field_names[FIELD_COUNT] = {
    [FIELD_ACTIVE] = "active",
    [FIELD_ATTEMPT] = "attempt",
    [FIELD_BEFORE] = "before",
    [FIELD_BLOCKING] = "blocking",
    [FIELD_BRANCH] = "branch",
    [FIELD_CLIENT] = "client",
    [FIELD_COALESCED] = "coalesced",
    [FIELD_CODE] = "code",
    [FIELD_COMMIT] = "commit",
    [FIELD_COMMIT_LATENCY_MS] = "commit_latency_ms",
    [FIELD_COMPLETED] = "completed",
    [FIELD_CONTEXT] = "context",
    [FIELD_CREATED] = "created",
    [FIELD_CREATED_AFTER] = "created_after",
    [FIELD_CURVE_KEY] = "curve_key",
    [FIELD_DATA] = "data",
    [FIELD_DEAD] = "dead",
    [FIELD_DELAY_MS] = "delay_ms",
    [FIELD_DISK_FREE_MB] = "disk_free_mb",
    [FIELD_DISK_LOW] = "disk_low",
    [FIELD_DONE] = "done",
    [FIELD_ENDPOINT] = "endpoint",
    [FIELD_EPOCH] = "epoch",
    [FIELD_ERROR] = "error",
    [FIELD_EVENT] = "event",
    [FIELD_FAILED] = "failed",
    [FIELD_FAILURES] = "failures",
    [FIELD_FILE] = "file",
    [FIELD_FILES] = "files",
    [FIELD_FILES_CHANGED] = "filesChanged",
    [FIELD_FINDINGS] = "FINDINGS",
    [FIELD_FINDINGS_SEEN] = "findings",
    [FIELD_FINDINGS_TOTAL] = "findings_total",
    [FIELD_FINISHED] = "finished",
    [FIELD_FORCE] = "force",
    [FIELD_GATE] = "GATE",
    [FIELD_GROUP] = "group",
    [FIELD_HEARTBEAT_MISSES] = "heartbeat_misses",
    [FIELD_HEARTBEAT_MS] = "heartbeat_ms",
    [FIELD_ID] = "id",
    [FIELD_IDLE_WORKERS] = "idle_workers",
    [FIELD_ISSUE] = "issue",
    [FIELD_ISSUE_ID] = "issueId",
    [FIELD_KIND] = "kind",
    [FIELD_LAST_SEQ] = "last_seq",
    [FIELD_LIMIT] = "limit",
    [FIELD_LINE] = "line",
    [FIELD_MAX_ATTEMPTS] = "max_attempts",
    [FIELD_MESSAGE] = "message",
    [FIELD_NAME] = "name",
    [FIELD_NEXT] = "next",
    [FIELD_NOTES] = "notes",
    [FIELD_NOT_BEFORE] = "not_before",
    [FIELD_OFFSET] = "offset",
    [FIELD_OK] = "ok",
    [FIELD_OLDEST_QUEUED_AGE_MS] = "oldest_queued_age_ms",
    [FIELD_OUTCOME] = "outcome",
    [FIELD_OVERRIDE] = "override",
    [FIELD_P50] = "p50",
    [FIELD_P99] = "p99",
    [FIELD_PARENT] = "parent",
    [FIELD_PAUSE] = "pause",
    [FIELD_PAUSED] = "paused",
    [FIELD_PAYLOAD] = "payload",
    [FIELD_PHASE] = "phase",
    [FIELD_PHASES] = "phases",
    [FIELD_PID] = "pid",
    [FIELD_PING_SEQ] = "ping_seq",
    [FIELD_PRIOR] = "prior",
    [FIELD_PRIORITY] = "priority",
    [FIELD_QUEUED] = "queued",
    [FIELD_QUEUES] = "queues",
    [FIELD_REASON] = "reason",
    [FIELD_REJECTED] = "rejected",
    [FIELD_RESULT] = "result",
    [FIELD_RESULT_OMITTED] = "result_omitted",
    [FIELD_REVIEW_RESULT] = "REVIEW_RESULT",
    [FIELD_RUNNING] = "running",
    [FIELD_SAMPLES] = "samples",
    [FIELD_SEQ] = "seq",
    [FIELD_SEVERITY] = "severity",
    [FIELD_SINCE] = "since",
    [FIELD_SOURCE] = "source",
    [FIELD_SPECIALIST] = "specialist",
    [FIELD_STATE] = "state",
    [FIELD_SUBMITTED] = "submitted",
    [FIELD_TARGET] = "target",
    [FIELD_TASK] = "task",
    [FIELD_TEXT] = "text",
    [FIELD_THROUGHPUT_PER_S] = "throughput_per_s",
    [FIELD_TIME] = "time",
    [FIELD_TIMEOUT_S] = "timeout_s",
    [FIELD_TITLE] = "title",
    [FIELD_TOPIC] = "topic",
    [FIELD_TRUNCATED] = "truncated",
    [FIELD_TYPE] = "type",
    [FIELD_UNACKED] = "unacked",
    [FIELD_UNREAD_REPLIES_MB] = "unread_replies_mb",
    [FIELD_UNREAD_REPLIES_PEERS] = "unread_replies_peers",
    [FIELD_UPDATED] = "updated",
    [FIELD_V] = "v",
    [FIELD_WORKER] = "worker",
    [FIELD_WORKERS] = "workers",
    [FIELD_WORKER_IDS] = "worker_ids",
    [FIELD_WORKSPACE] = "workspace",
};

static const char *const s_priority_names[PRIORITY_COUNT] = {"urgent", "high", "normal", "low"};

static const char *const s_state_names[] = {"queued", "running", "done",
                                                            "failed", "dead",    "cancelled"};

static const char *const s_event_names[EVENT_COUNT] = {
    [EVENT_TASK_QUEUED] = "task.queued",
    [EVENT_TASK_REJECTED] = "task.rejected",
    [EVENT_TASK_DISPATCHED] = "task.dispatched",
    [EVENT_TASK_PROGRESS] = "task.progress",
    [EVENT_TASK_RETRY] = "task.retry",
    [EVENT_TASK_DONE] = "task.done",
    [EVENT_TASK_FAILED] = "task.failed",
    [EVENT_TASK_DEAD] = "task.dead",
    [EVENT_TASK_CANCELLED] = "task.cancelled",
    [EVENT_TASK_NOTE] = "task.note",
    [EVENT_WORKER_JOINED] = "worker.joined",
    [EVENT_WORKER_LEFT] = "worker.left",
    [EVENT_WORKER_LOST] = "worker.lost",
    [EVENT_MESSAGE_REJECTED] = "message.rejected",
    [EVENT_SPECIALIST_PAUSED] = "specialist.paused",
    [EVENT_SPECIALIST_RESUMED] = "specialist.resumed",
};

static const char *const s_review_mode_names[] = {"strict", "normal", "yolo",
                                                                   "disabled"};

/* The index of `text` in `names`, or -1. */
static int s_find(const char *const *names, int count, const char *text)
{
    for (int i = 0; text != NULL && i < count; i++)
        if (strcmp(names[i], text) == 0)
            return i;
    return -1;
}

const char *msg_type_name(msg_type_t type)
{
    return s_msg_names[type];
}

const char *field_name(field_t field)
{
    return s_field_names[field];
}

const char *priority_name(priority_t priority)
{
    return s_priority_names[priority];
}

const char *task_state_name(task_state_t state)
{
    return s_state_names[state];
}

const char *event_type_name(event_type_t event)
{
    return s_event_names[event];
}

const char *review_mode_name(review_mode_t mode)
{
    return s_review_mode_names[mode];
}

int priority_parse(const char *text)
{
    return s_find(s_priority_names, PRIORITY_COUNT, text);
}

int task_state_parse(const char *text)
{
    return s_find(s_state_names, (int)(sizeof s_state_names / sizeof s_state_names[0]), text);
}

int review_mode_parse_name(const char *text)
{
    return s_find(s_review_mode_names, (int)(sizeof s_review_mode_names / sizeof s_review_mode_names[0]),
                  text);
}
