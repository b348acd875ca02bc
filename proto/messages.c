/* messages: the table itself (see messages.h and PROTOCOL.md). */
#include "messages.h"

#include <string.h>

#define NAME_CAP 64
#define TEXT_CAP 4096
#define LONG_TEXT_CAP 65536

/* The fields of a task as a submitter gives it: the "submit" message, and each element of
 * a result's "next" array. */
static const wire_field_t s_submit[] = {
    {"id", WIRE_STR, true, MESSAGES_ID_CAP},
    {"specialist", WIRE_STR, true, NAME_CAP},
    {"priority", WIRE_STR, false, 16},
    {"source", WIRE_STR, false, NAME_CAP * 2},
    {"title", WIRE_STR, false, TEXT_CAP},
    {"issue", WIRE_STR, false, MESSAGES_ID_CAP},
    {"group", WIRE_STR, false, 1024},
    {"max_attempts", WIRE_INT, false, 0},
    {"timeout_s", WIRE_INT, false, 0},
    {"not_before", WIRE_INT, false, 0},
    {"payload", WIRE_MAP, false, 0},
};

static const wire_field_t s_hello[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"specialist", WIRE_STR, true, NAME_CAP},
    {"endpoint", WIRE_STR, true, 1024},
    {"curve_key", WIRE_STR, false, 40},
    {"pid", WIRE_INT, false, 0},
    {"task", WIRE_STR, false, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, false, 0},
};

static const wire_field_t s_heartbeat[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, false, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, false, 0},
};

static const wire_field_t s_progress[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
    {"text", WIRE_STR, true, TEXT_CAP * 2},
    {"kind", WIRE_STR, false, NAME_CAP},
};

static const wire_field_t s_result[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
    {"outcome", WIRE_STR, true, 16},
    {"error", WIRE_STR, false, LONG_TEXT_CAP},
    {"result", WIRE_MAP, false, 0},
    {"next", WIRE_ARRAY, false, 0},
};

static const wire_field_t s_release[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
    {"reason", WIRE_STR, false, TEXT_CAP},
};

static const wire_field_t s_bye[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
};

/* broker -> worker */
static const wire_field_t s_task[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"id", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
    {"specialist", WIRE_STR, true, NAME_CAP},
    {"priority", WIRE_STR, true, 16},
    {"source", WIRE_STR, false, NAME_CAP * 2},
    {"title", WIRE_STR, false, TEXT_CAP},
    {"issue", WIRE_STR, false, MESSAGES_ID_CAP},
    {"group", WIRE_STR, false, 1024},
    {"max_attempts", WIRE_INT, false, 0},
    {"timeout_s", WIRE_INT, false, 0},
    {"payload", WIRE_MAP, false, 0},
    {"context", WIRE_MAP, false, 0},
};

static const wire_field_t s_ack[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
};

static const wire_field_t s_cancel[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"task", WIRE_STR, true, MESSAGES_ID_CAP},
    {"attempt", WIRE_INT, true, 0},
    {"reason", WIRE_STR, false, TEXT_CAP},
};

static const wire_field_t s_ping[] = {
    {"worker", WIRE_STR, true, MESSAGES_ID_CAP},
    {"epoch", WIRE_STR, true, MESSAGES_ID_CAP},
};

/* pan / any client -> control (each answered by one "reply") */
static const wire_field_t s_task_ref[] = {
    {"id", WIRE_STR, true, MESSAGES_ID_CAP},
};

static const wire_field_t s_specialist_ref[] = {
    {"specialist", WIRE_STR, true, NAME_CAP},
};

static const wire_field_t s_none[] = {
    {"client", WIRE_STR, false, MESSAGES_ID_CAP},
};

static const wire_field_t s_replay[] = {
    {"since", WIRE_INT, false, 0},
    {"topic", WIRE_STR, false, 256},
    {"limit", WIRE_INT, false, 0},
};

static const wire_field_t s_reply[] = {
    {"ok", WIRE_BOOL, true, 0},
    {"truncated", WIRE_BOOL, false, 0},
    {"error", WIRE_STR, false, LONG_TEXT_CAP},
    {"code", WIRE_STR, false, NAME_CAP},
    {"data", WIRE_ANY, false, 0},
};

/* broker -> PUB (second frame; the first frame is the topic "<event>/<specialist>") */
static const wire_field_t s_event[] = {
    {"seq", WIRE_INT, true, 0},
    {"event", WIRE_STR, true, NAME_CAP},
    {"time", WIRE_INT, true, 0},
    {"task", WIRE_STR, false, MESSAGES_ID_CAP},
    {"specialist", WIRE_STR, false, NAME_CAP},
    {"priority", WIRE_STR, false, 16},
    {"state", WIRE_STR, false, 16},
    {"attempt", WIRE_INT, false, 0},
    {"worker", WIRE_STR, false, MESSAGES_ID_CAP},
    {"title", WIRE_STR, false, TEXT_CAP},
    {"issue", WIRE_STR, false, MESSAGES_ID_CAP},
    {"group", WIRE_STR, false, 1024},
    {"parent", WIRE_STR, false, MESSAGES_ID_CAP},
    {"kind", WIRE_STR, false, NAME_CAP},
    {"text", WIRE_STR, false, TEXT_CAP * 2},
    {"error", WIRE_STR, false, LONG_TEXT_CAP},
    {"not_before", WIRE_INT, false, 0},
    {"result", WIRE_MAP, false, 0},
    {"result_omitted", WIRE_BOOL, false, 0},
};

#define SPEC(name, fields) {name, fields, sizeof fields / sizeof fields[0]}

const wire_spec_t messages_table[] = {
    SPEC("submit", s_submit),
    SPEC("hello", s_hello),
    SPEC("heartbeat", s_heartbeat),
    SPEC("progress", s_progress),
    SPEC("result", s_result),
    SPEC("release", s_release),
    SPEC("bye", s_bye),
    SPEC("task", s_task),
    SPEC("ack", s_ack),
    SPEC("cancel", s_cancel),
    SPEC("ping", s_ping),
    SPEC("show_task", s_task_ref),
    SPEC("cancel_task", s_task_ref),
    SPEC("retry_task", s_task_ref),
    SPEC("list_queue", s_specialist_ref),
    SPEC("list_specialists", s_none),
    SPEC("stats", s_none),
    SPEC("replay", s_replay),
    SPEC("reply", s_reply),
    SPEC("event", s_event),
};

const size_t messages_count = sizeof messages_table / sizeof messages_table[0];

const wire_spec_t *messages_find(const char *type, size_t type_len)
{
    for (size_t i = 0; i < messages_count; i++) {
        const char *name = messages_table[i].type;
        if (strlen(name) == type_len && memcmp(name, type, type_len) == 0)
            return &messages_table[i];
    }
    return NULL;
}
