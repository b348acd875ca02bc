/* submit: the typed submit message (see submit.h). */
#include "submit.h"

#include "failure.h"
#include "msgjson.h"
#include "utf8.h"

#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool submit_specialist_name_valid(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > SUBMIT_SPECIALIST_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  (i > 0 && (c == '-' || c == '_' || c == '.'));
        if (!ok)
            return false;
    }
    return true;
}

char *submit_specialist_canonical(const char *name, char *buf)
{
    size_t i = 0;
    for (; name[i] != '\0' && i < SUBMIT_SPECIALIST_NAME_MAX; i++)
        buf[i] = name[i] == '_' ? '-' : name[i];
    buf[i] = '\0';
    return buf;
}

/* The payload members the services read as a path, a ref or an id: declared strings like
 * the message's own, so none may hold a NUL byte (a service reads up to it, the store
 * keeps all of it: "/home/u/repo\0/../other" would be two different workspaces). */
static const char *const s_payload_strings[] = {"workspace", "branch", "target", "commit",
                                                "issueId", "prUrl"};

/* FAILURE_INVALID naming the first declared payload string with a NUL byte; else 0. */
static int s_check_payload_strings(const void *payload, size_t len)
{
    if (payload == NULL || len == 0)
        return 0;
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    int rc = 0;
    if (msgpack_unpack_next(&unpacked, payload, len, &offset) == MSGPACK_UNPACK_SUCCESS &&
        unpacked.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object_map *map = &unpacked.data.via.map;
        for (uint32_t i = 0; rc == 0 && i < map->size; i++) {
            const msgpack_object *key = &map->ptr[i].key, *value = &map->ptr[i].val;
            const char *bytes = NULL;
            size_t n = 0;
            if (value->type == MSGPACK_OBJECT_STR) {
                bytes = value->via.str.ptr;
                n = value->via.str.size;
            } else if (value->type == MSGPACK_OBJECT_BIN) {
                bytes = value->via.bin.ptr;
                n = value->via.bin.size;
            }
            if (key->type != MSGPACK_OBJECT_STR || n == 0 || memchr(bytes, '\0', n) == NULL)
                continue;
            for (size_t k = 0; k < sizeof s_payload_strings / sizeof s_payload_strings[0]; k++) {
                if (key->via.str.size == strlen(s_payload_strings[k]) &&
                    memcmp(key->via.str.ptr, s_payload_strings[k], key->via.str.size) == 0)
                    rc = failure_set(FAILURE_INVALID, "submit: field 'payload.%s' holds a NUL byte",
                                     s_payload_strings[k]);
            }
        }
    }
    msgpack_unpacked_destroy(&unpacked);
    return rc;
}

int submit_check(const submit_t *task)
{
    if (task->id == NULL || task->id[0] == '\0')
        return failure_set(FAILURE_INVALID, "task id must not be empty");
    if (strlen(task->id) > MESSAGES_ID_CAP)
        return failure_set(FAILURE_TOO_BIG, "task id is over the %d-byte cap", MESSAGES_ID_CAP);
    if (!submit_specialist_name_valid(task->specialist))
        return failure_set(FAILURE_INVALID,
                           "invalid specialist name '%s' (lowercase letters, digits, '-', '_', '.')",
                           task->specialist ? task->specialist : "");
    if (task->priority != NULL && priority_parse(task->priority) < 0)
        return failure_set(FAILURE_INVALID, "invalid priority '%s' (urgent, high, normal, low)",
                           task->priority);
    if (task->max_attempts != 0 &&
        (task->max_attempts < 1 || task->max_attempts > SUBMIT_MAX_ATTEMPTS))
        return failure_set(FAILURE_INVALID, "max_attempts %lld is outside 1..%d",
                           (long long)task->max_attempts, SUBMIT_MAX_ATTEMPTS);
    if (task->timeout_s != 0 && (task->timeout_s < 1 || task->timeout_s > SUBMIT_MAX_TIMEOUT_S))
        return failure_set(FAILURE_INVALID, "timeout_s %lld is outside 1..%d",
                           (long long)task->timeout_s, SUBMIT_MAX_TIMEOUT_S);
    if (task->issue != NULL && strlen(task->issue) > MESSAGES_ID_CAP)
        return failure_set(FAILURE_TOO_BIG, "issue is over the %d-byte cap", MESSAGES_ID_CAP);
    if (task->payload_len > SUBMIT_PAYLOAD_CAP)
        return failure_set(FAILURE_TOO_BIG,
                           "payload of %zu bytes is over the %d-byte cap (the task must fit in "
                           "the message sent to its worker)",
                           task->payload_len, SUBMIT_PAYLOAD_CAP);
    return s_check_payload_strings(task->payload, task->payload_len);
}

void submit_read(const wire_msg_t *msg, submit_t *out)
{
    memset(out, 0, sizeof *out);
    out->id = wire_msg_str(msg, FIELD_ID, NULL);
    out->specialist = wire_msg_str(msg, FIELD_SPECIALIST, NULL);
    out->priority = wire_msg_str(msg, FIELD_PRIORITY, NULL);
    out->source = wire_msg_str(msg, FIELD_SOURCE, NULL);
    out->title = wire_msg_str(msg, FIELD_TITLE, NULL);
    out->issue = wire_msg_str(msg, FIELD_ISSUE, NULL);
    out->group = wire_msg_str(msg, FIELD_GROUP, NULL);
    out->max_attempts = wire_msg_int(msg, FIELD_MAX_ATTEMPTS, 0);
    out->timeout_s = wire_msg_int(msg, FIELD_TIMEOUT_S, 0);
    out->not_before = wire_msg_int(msg, FIELD_NOT_BEFORE, 0);
    out->payload = wire_msg_raw(msg, FIELD_PAYLOAD, &out->payload_len);
}

void submit_encode(wire_writer_t *writer, const submit_t *task)
{
    wire_writer_start(writer, MSG_SUBMIT);
    wire_put_str(writer, FIELD_ID, task->id);
    wire_put_str(writer, FIELD_SPECIALIST, task->specialist);
    wire_put_str(writer, FIELD_PRIORITY, task->priority);
    wire_put_str(writer, FIELD_SOURCE, task->source);
    wire_put_str(writer, FIELD_TITLE, task->title);
    wire_put_str(writer, FIELD_ISSUE, task->issue);
    wire_put_str(writer, FIELD_GROUP, task->group);
    if (task->max_attempts > 0)
        wire_put_int(writer, FIELD_MAX_ATTEMPTS, task->max_attempts);
    if (task->timeout_s > 0)
        wire_put_int(writer, FIELD_TIMEOUT_S, task->timeout_s);
    if (task->not_before > 0)
        wire_put_int(writer, FIELD_NOT_BEFORE, task->not_before);
    wire_put_raw(writer, FIELD_PAYLOAD, task->payload, task->payload_len);
}

void submit_wake(const char *specialist, const char *text, const char *workspace,
                 const char *branch, const char *target, char *title, size_t title_size,
                 wire_writer_t *payload_writer)
{
    snprintf(title, title_size, "Wake %s%s%.*s", specialist, text ? ": " : "",
             text ? (int)utf8_cut(text, 200) : 0, text ? text : "");
    wire_writer_start_map(payload_writer);
    wire_put_str(payload_writer, FIELD_TASK, text ? text : "Manual wake");
    wire_put_str(payload_writer, FIELD_WORKSPACE, workspace);
    wire_put_str(payload_writer, FIELD_BRANCH, branch);
    wire_put_str(payload_writer, FIELD_TARGET, target);
}
