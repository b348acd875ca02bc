/* protocol: the names of Cloister's wire protocol as C types (protocol version 1).
 *
 * Every message type, every map key the protocol defines (message fields, the payload's
 * and results' known keys, the control replies' keys), the priorities, task states, event
 * types and review modes are enums here, each with its one spelling on the wire. Code
 * reads and writes fields through these (wire.h takes a field_t), so a misspelt name is
 * a compile error rather than a silent fallback. proto/messages.c declares which fields
 * each message carries; proto/PROTOCOL.md describes them for people. */
#ifndef CLOISTER_PROTOCOL_H
#define CLOISTER_PROTOCOL_H

/* Message types, in the order of messages_table (messages.h). */
typedef enum {
    MSG_SUBMIT,
    MSG_HELLO,
    MSG_HEARTBEAT,
    MSG_PROGRESS,
    MSG_RESULT,
    MSG_RELEASE,
    MSG_BYE,
    MSG_TASK,
    MSG_ACK,
    MSG_CANCEL,
    MSG_PING,
    MSG_SHOW_TASK,
    MSG_CANCEL_TASK,
    MSG_RETRY_TASK,
    MSG_LIST_QUEUE,
    MSG_LIST_SPECIALISTS,
    MSG_STATS,
    MSG_REPLAY,
    MSG_REPLY,
    MSG_EVENT,
    MSG_LIST_TASKS,
    MSG_RELOAD,
    MSG_NOTE_TASK,
    MSG_RESUME,
    MSG_SET_PRIORITY,
    MSG_COUNT
} msg_type_t;

/* Map keys the protocol names. */
typedef enum {
    FIELD_ACTIVE,
    FIELD_ATTEMPT,
    FIELD_BEFORE,
    FIELD_BLOCKING,
    FIELD_BRANCH,
    FIELD_CLIENT,
    FIELD_COALESCED,
    FIELD_CODE,
    FIELD_COMMIT,
    FIELD_COMMIT_LATENCY_MS,
    FIELD_COMPLETED,
    FIELD_CONTEXT,
    FIELD_CREATED,
    FIELD_CREATED_AFTER,
    FIELD_CURVE_KEY,
    FIELD_DATA,
    FIELD_DEAD,
    FIELD_DELAY_MS,
    FIELD_DISK_FREE_MB,
    FIELD_DISK_LOW,
    FIELD_DONE,
    FIELD_ENDPOINT,
    FIELD_EPOCH,
    FIELD_ERROR,
    FIELD_EVENT,
    FIELD_FAILED,
    FIELD_FAILURES,
    FIELD_FILE,
    FIELD_FILES,
    FIELD_FILES_CHANGED,
    FIELD_FINDINGS,
    FIELD_FINDINGS_SEEN,
    FIELD_FINDINGS_TOTAL,
    FIELD_FINISHED,
    FIELD_FORCE,
    FIELD_GATE,
    FIELD_GROUP,
    FIELD_HEARTBEAT_MISSES,
    FIELD_HEARTBEAT_MS,
    FIELD_ID,
    FIELD_IDLE_WORKERS,
    FIELD_ISSUE,
    FIELD_ISSUE_ID,
    FIELD_KIND,
    FIELD_LAST_SEQ,
    FIELD_LIMIT,
    FIELD_LINE,
    FIELD_MAX_ATTEMPTS,
    FIELD_MESSAGE,
    FIELD_NAME,
    FIELD_NEXT,
    FIELD_NOTES,
    FIELD_NOT_BEFORE,
    FIELD_OFFSET,
    FIELD_OK,
    FIELD_OLDEST_QUEUED_AGE_MS,
    FIELD_OUTCOME,
    FIELD_OVERRIDE,
    FIELD_P50,
    FIELD_P99,
    FIELD_PARENT,
    FIELD_PAUSE,
    FIELD_PAUSED,
    FIELD_PAYLOAD,
    FIELD_PHASE,
    FIELD_PHASES,
    FIELD_PID,
    FIELD_PING_SEQ,
    FIELD_PRIOR,
    FIELD_PRIORITY,
    FIELD_QUEUED,
    FIELD_QUEUES,
    FIELD_REASON,
    FIELD_REJECTED,
    FIELD_RESULT,
    FIELD_RESULT_OMITTED,
    FIELD_REVIEW_RESULT,
    FIELD_RUNNING,
    FIELD_SAMPLES,
    FIELD_SEQ,
    FIELD_SEVERITY,
    FIELD_SINCE,
    FIELD_SOURCE,
    FIELD_SPECIALIST,
    FIELD_STATE,
    FIELD_SUBMITTED,
    FIELD_TARGET,
    FIELD_TASK,
    FIELD_TEXT,
    FIELD_THROUGHPUT_PER_S,
    FIELD_TIME,
    FIELD_TIMEOUT_S,
    FIELD_TITLE,
    FIELD_TOPIC,
    FIELD_TRUNCATED,
    FIELD_TYPE,
    FIELD_UNACKED,
    FIELD_UNREAD_REPLIES_MB,
    FIELD_UNREAD_REPLIES_PEERS,
    FIELD_UPDATED,
    FIELD_V,
    FIELD_WORKER,
    FIELD_WORKERS,
    FIELD_WORKER_IDS,
    FIELD_WORKSPACE,
    FIELD_COUNT
} field_t;

typedef enum { PRIORITY_URGENT, PRIORITY_HIGH, PRIORITY_NORMAL, PRIORITY_LOW, PRIORITY_COUNT } priority_t;

typedef enum {
    TASK_QUEUED,
    TASK_RUNNING,
    TASK_DONE,
    TASK_FAILED,
    TASK_DEAD,
    TASK_CANCELLED
} task_state_t;

/* Events the broker publishes (the topic is "<event>/<specialist>"). */
typedef enum {
    EVENT_TASK_QUEUED,
    EVENT_TASK_REJECTED,
    EVENT_TASK_DISPATCHED,
    EVENT_TASK_PROGRESS,
    EVENT_TASK_RETRY,
    EVENT_TASK_DONE,
    EVENT_TASK_FAILED,
    EVENT_TASK_DEAD,
    EVENT_TASK_CANCELLED,
    EVENT_TASK_NOTE,
    EVENT_WORKER_JOINED,
    EVENT_WORKER_LEFT,
    EVENT_WORKER_LOST,
    EVENT_MESSAGE_REJECTED,
    EVENT_SPECIALIST_PAUSED,
    EVENT_SPECIALIST_RESUMED,
    EVENT_COUNT
} event_type_t;

/* How the review gate treats findings (see services/review/review_gate.h). */
typedef enum {
    REVIEW_MODE_STRICT,
    REVIEW_MODE_NORMAL,
    REVIEW_MODE_YOLO,
    REVIEW_MODE_DISABLED
} review_mode_t;

/* Each name as it is on the wire (static strings). */
const char *msg_type_name(msg_type_t type);
const char *field_name(field_t field);
const char *priority_name(priority_t priority);
const char *task_state_name(task_state_t state);
const char *event_type_name(event_type_t event);
const char *review_mode_name(review_mode_t mode);

/* Name -> enum; each returns -1 for a name it does not know (or NULL). */
int priority_parse(const char *text);
int task_state_parse(const char *text);
int review_mode_parse_name(const char *text);

#endif
