/* messages: the table itself (see messages.h and PROTOCOL.md). */
#include "messages.h"

#include <string.h>

#define NAME_CAP 64
#define TEXT_CAP 4096
#define LONG_TEXT_CAP 65536

/* The fields of a task as a submitter gives it: the "submit" message, and each element of
 * a result's "next" array. */
static const wire_field_t s_submit[] = {
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_SPECIALIST, WIRE_STR, true, NAME_CAP},
    {FIELD_PRIORITY, WIRE_STR, false, 16},
    {FIELD_SOURCE, WIRE_STR, false, NAME_CAP * 2},
    {FIELD_TITLE, WIRE_STR, false, TEXT_CAP},
    {FIELD_ISSUE, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_GROUP, WIRE_STR, false, 1024},
    {FIELD_MAX_ATTEMPTS, WIRE_INT, false, 0},
    {FIELD_TIMEOUT_S, WIRE_INT, false, 0},
    {FIELD_NOT_BEFORE, WIRE_INT, false, 0},
    {FIELD_PAYLOAD, WIRE_MAP, false, 0},
};

static const wire_field_t s_hello[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_SPECIALIST, WIRE_STR, true, NAME_CAP},
    {FIELD_ENDPOINT, WIRE_STR, true, 1024},
    {FIELD_CURVE_KEY, WIRE_STR, false, 40},
    {FIELD_PID, WIRE_INT, false, 0},
    {FIELD_TASK, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, false, 0},
    {FIELD_UNACKED, WIRE_ARRAY, false, 0},
};

static const wire_field_t s_heartbeat[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, false, 0},
    {FIELD_PING_SEQ, WIRE_INT, false, 0},
    {FIELD_UNACKED, WIRE_ARRAY, false, 0},
};

static const wire_field_t s_progress[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
    {FIELD_TEXT, WIRE_STR, true, TEXT_CAP * 2},
    {FIELD_KIND, WIRE_STR, false, NAME_CAP},
};

static const wire_field_t s_result[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
    {FIELD_OUTCOME, WIRE_STR, true, 16},
    {FIELD_ERROR, WIRE_STR, false, LONG_TEXT_CAP},
    {FIELD_RESULT, WIRE_MAP, false, 0},
    {FIELD_NEXT, WIRE_ARRAY, false, 0},
};

static const wire_field_t s_release[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
    {FIELD_REASON, WIRE_STR, false, TEXT_CAP},
    {FIELD_DELAY_MS, WIRE_INT, false, 0},
    {FIELD_PAUSE, WIRE_BOOL, false, 0},
};

static const wire_field_t s_bye[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
};

/* broker -> worker */
static const wire_field_t s_task[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
    {FIELD_SPECIALIST, WIRE_STR, true, NAME_CAP},
    {FIELD_PRIORITY, WIRE_STR, true, 16},
    {FIELD_SOURCE, WIRE_STR, false, NAME_CAP * 2},
    {FIELD_TITLE, WIRE_STR, false, TEXT_CAP},
    {FIELD_ISSUE, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_GROUP, WIRE_STR, false, 1024},
    {FIELD_MAX_ATTEMPTS, WIRE_INT, false, 0},
    {FIELD_TIMEOUT_S, WIRE_INT, false, 0},
    {FIELD_PING_SEQ, WIRE_INT, false, 0},
    {FIELD_PAYLOAD, WIRE_MAP, false, 0},
    {FIELD_CONTEXT, WIRE_MAP, false, 0},
};

static const wire_field_t s_ack[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
};

static const wire_field_t s_cancel[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_TASK, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_ATTEMPT, WIRE_INT, true, 0},
    {FIELD_REASON, WIRE_STR, false, TEXT_CAP},
};

static const wire_field_t s_ping[] = {
    {FIELD_WORKER, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_EPOCH, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_HEARTBEAT_MS, WIRE_INT, false, 0},
    {FIELD_HEARTBEAT_MISSES, WIRE_INT, false, 0},
    {FIELD_PING_SEQ, WIRE_INT, false, 0},
};

/* pan / any client -> control (each answered by one "reply") */
static const wire_field_t s_task_ref[] = {
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
};

static const wire_field_t s_cancel_task[] = {
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_REASON, WIRE_STR, false, TEXT_CAP},
};

static const wire_field_t s_specialist_ref[] = {
    {FIELD_SPECIALIST, WIRE_STR, true, NAME_CAP},
};

static const wire_field_t s_list_queue[] = {
    {FIELD_SPECIALIST, WIRE_STR, true, NAME_CAP},
    {FIELD_OFFSET, WIRE_INT, false, 0},
    {FIELD_LIMIT, WIRE_INT, false, 0},
};

static const wire_field_t s_set_priority[] = {
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_PRIORITY, WIRE_STR, true, 16},
};

static const wire_field_t s_none[] = {
    {FIELD_CLIENT, WIRE_STR, false, MESSAGES_ID_CAP},
};

static const wire_field_t s_replay[] = {
    {FIELD_SINCE, WIRE_INT, false, 0},
    {FIELD_TOPIC, WIRE_STR, false, 256},
    {FIELD_LIMIT, WIRE_INT, false, 0},
};

static const wire_field_t s_list_tasks[] = {
    {FIELD_STATE, WIRE_STR, false, 16},
    {FIELD_SPECIALIST, WIRE_STR, false, NAME_CAP},
    {FIELD_ISSUE, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_CREATED_AFTER, WIRE_INT, false, 0},
    {FIELD_BEFORE, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_LIMIT, WIRE_INT, false, 0},
};

static const wire_field_t s_note_task[] = {
    {FIELD_ID, WIRE_STR, true, MESSAGES_ID_CAP},
    {FIELD_KIND, WIRE_STR, true, NAME_CAP},
    {FIELD_TEXT, WIRE_STR, true, TEXT_CAP * 2},
};

static const wire_field_t s_reply[] = {
    {FIELD_OK, WIRE_BOOL, true, 0},
    {FIELD_TRUNCATED, WIRE_BOOL, false, 0},
    {FIELD_ERROR, WIRE_STR, false, LONG_TEXT_CAP},
    {FIELD_CODE, WIRE_STR, false, NAME_CAP},
    {FIELD_DATA, WIRE_ANY, false, 0},
};

/* broker -> PUB (second frame; the first frame is the topic "<event>/<specialist>") */
static const wire_field_t s_event[] = {
    {FIELD_SEQ, WIRE_INT, true, 0},
    {FIELD_EVENT, WIRE_STR, true, NAME_CAP},
    {FIELD_TIME, WIRE_INT, true, 0},
    {FIELD_TASK, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_SPECIALIST, WIRE_STR, false, NAME_CAP},
    {FIELD_PRIORITY, WIRE_STR, false, 16},
    {FIELD_STATE, WIRE_STR, false, 16},
    {FIELD_ATTEMPT, WIRE_INT, false, 0},
    {FIELD_WORKER, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_TITLE, WIRE_STR, false, TEXT_CAP},
    {FIELD_ISSUE, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_GROUP, WIRE_STR, false, 1024},
    {FIELD_PARENT, WIRE_STR, false, MESSAGES_ID_CAP},
    {FIELD_KIND, WIRE_STR, false, NAME_CAP},
    {FIELD_TEXT, WIRE_STR, false, TEXT_CAP * 2},
    {FIELD_ERROR, WIRE_STR, false, LONG_TEXT_CAP},
    {FIELD_NOT_BEFORE, WIRE_INT, false, 0},
    {FIELD_RESULT, WIRE_MAP, false, 0},
    {FIELD_RESULT_OMITTED, WIRE_BOOL, false, 0},
};

#define SPEC(name, fields) {name, fields, sizeof fields / sizeof fields[0]}

const wire_spec_t messages_table[MSG_COUNT] = {
    [MSG_SUBMIT] = SPEC(MSG_SUBMIT, s_submit),
    [MSG_HELLO] = SPEC(MSG_HELLO, s_hello),
    [MSG_HEARTBEAT] = SPEC(MSG_HEARTBEAT, s_heartbeat),
    [MSG_PROGRESS] = SPEC(MSG_PROGRESS, s_progress),
    [MSG_RESULT] = SPEC(MSG_RESULT, s_result),
    [MSG_RELEASE] = SPEC(MSG_RELEASE, s_release),
    [MSG_BYE] = SPEC(MSG_BYE, s_bye),
    [MSG_TASK] = SPEC(MSG_TASK, s_task),
    [MSG_ACK] = SPEC(MSG_ACK, s_ack),
    [MSG_CANCEL] = SPEC(MSG_CANCEL, s_cancel),
    [MSG_PING] = SPEC(MSG_PING, s_ping),
    [MSG_SHOW_TASK] = SPEC(MSG_SHOW_TASK, s_task_ref),
    [MSG_CANCEL_TASK] = SPEC(MSG_CANCEL_TASK, s_cancel_task),
    [MSG_RETRY_TASK] = SPEC(MSG_RETRY_TASK, s_task_ref),
    [MSG_LIST_QUEUE] = SPEC(MSG_LIST_QUEUE, s_list_queue),
    [MSG_LIST_SPECIALISTS] = SPEC(MSG_LIST_SPECIALISTS, s_none),
    [MSG_STATS] = SPEC(MSG_STATS, s_none),
    [MSG_REPLAY] = SPEC(MSG_REPLAY, s_replay),
    [MSG_REPLY] = SPEC(MSG_REPLY, s_reply),
    [MSG_EVENT] = SPEC(MSG_EVENT, s_event),
    [MSG_LIST_TASKS] = SPEC(MSG_LIST_TASKS, s_list_tasks),
    [MSG_RELOAD] = SPEC(MSG_RELOAD, s_none),
    [MSG_NOTE_TASK] = SPEC(MSG_NOTE_TASK, s_note_task),
    [MSG_RESUME] = SPEC(MSG_RESUME, s_specialist_ref),
    [MSG_SET_PRIORITY] = SPEC(MSG_SET_PRIORITY, s_set_priority),
};

const size_t messages_count = sizeof messages_table / sizeof messages_table[0];

const wire_spec_t *messages_find(const char *type, size_t type_len)
{
    for (size_t i = 0; i < messages_count; i++) {
        const char *name = msg_type_name(messages_table[i].type);
        if (strlen(name) == type_len && memcmp(name, type, type_len) == 0)
            return &messages_table[i];
    }
    return NULL;
}
