/* broker_prior: the prior attempts of a task's session context (see broker_prior.h).
 *
 * The attempts come from the store's `attempts` rows (by issue and specialist); what an
 * attempt left behind comes from its task's stored result, which is the result of that
 * task's last attempt only -- so it is attached to the row of that attempt and to no
 * other. The rows are read first and the tasks loaded after, so no two store statements
 * are stepped at once. */
#include "broker_prior.h"

#include "failure.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One attempts row, copied out of the store. */
typedef struct {
    int attempt;
    char task[MESSAGES_ID_CAP + 1];
    char outcome[32];
    char *error;
    int64_t finished;
} s_row_t;

typedef struct {
    s_row_t rows[BROKER_PRIOR_LIMIT];
    int count;
} s_rows_t;

static void s_on_attempt(int attempt, const char *task, const char *outcome, const char *error,
                         int64_t finished, void *arg)
{
    s_rows_t *rows = arg;
    if (rows->count >= BROKER_PRIOR_LIMIT)
        return;
    s_row_t *row = &rows->rows[rows->count++];
    row->attempt = attempt;
    snprintf(row->task, sizeof row->task, "%s", task ? task : "");
    snprintf(row->outcome, sizeof row->outcome, "%s", outcome ? outcome : "");
    row->error = error ? strdup(error) : NULL;
    row->finished = finished;
}

/* The length of at most `max` bytes of the UTF-8 text `text` (`len` bytes), not cutting a
 * character in two. */
static size_t s_cut(const char *text, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* A msgpack string object's bytes (NULL when `obj` is no string). */
static const char *s_text(const msgpack_object *obj, size_t *len)
{
    if (obj == NULL || obj->type != MSGPACK_OBJECT_STR) {
        *len = 0;
        return NULL;
    }
    *len = obj->via.str.size;
    return obj->via.str.ptr;
}

static void s_put_text(wire_writer_t *w, field_t field, const msgpack_object *obj, size_t max)
{
    size_t len;
    const char *text = s_text(obj, &len);
    if (text == NULL || len == 0)
        return;
    char *copy = strndup(text, s_cut(text, len, max));
    wire_put_str(w, field, copy);
    free(copy);
}

/* Appends the strings of the result's arrays `keys` (up to BROKER_PRIOR_FILES in all) to
 * the open array. */
static void s_put_files(wire_writer_t *w, const msgpack_object *result)
{
    static const char *const keys[] = {"files_changed", "RESOLVED_FILES", "FAILED_FILES"};
    int put = 0;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const msgpack_object *files = wire_map_get_key(result, keys[k]);
        if (files == NULL || files->type != MSGPACK_OBJECT_ARRAY)
            continue;
        for (uint32_t i = 0; i < files->via.array.size && put < BROKER_PRIOR_FILES; i++) {
            size_t len;
            const char *text = s_text(&files->via.array.ptr[i], &len);
            if (text == NULL || len == 0)
                continue;
            char *copy = strndup(text, s_cut(text, len, BROKER_PRIOR_FILE_MAX));
            wire_elem_str(w, copy);
            free(copy);
            put++;
        }
    }
}

/* Drops a character left unfinished at the end of `buf` by a cut. */
static void s_trim_utf8(char *buf)
{
    size_t n = strlen(buf), start = n;
    while (start > 0 && ((unsigned char)buf[start - 1] & 0xC0) == 0x80)
        start--;
    if (start == 0 || (unsigned char)buf[start - 1] < 0xC0)
        return;
    unsigned char lead = (unsigned char)buf[start - 1];
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    if (n - (start - 1) < want)
        buf[start - 1] = '\0';
}

/* One finding as a line (at most size - 1 bytes): "severity file:line title" for a
 * review's finding map, the text itself for a string (a failing test's name); "" when it
 * is neither. */
static void s_finding_line(const msgpack_object *finding, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t len;
    const char *text = s_text(finding, &len);
    if (text != NULL) {
        snprintf(buf, size, "%.*s", (int)len, text);
    } else if (finding->type == MSGPACK_OBJECT_MAP) {
        size_t severity_len, file_len, title_len;
        const char *severity = s_text(wire_map_get(finding, FIELD_SEVERITY), &severity_len);
        const char *file = s_text(wire_map_get(finding, FIELD_FILE), &file_len);
        const char *title = s_text(wire_map_get_key(finding, "title"), &title_len);
        if (title == NULL)
            title = s_text(wire_map_get(finding, FIELD_MESSAGE), &title_len);
        const msgpack_object *line = wire_map_get(finding, FIELD_LINE);
        unsigned long long number =
            line != NULL && line->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? line->via.u64 : 0;
        char at[32] = "";
        if (number > 0)
            snprintf(at, sizeof at, ":%llu", number);
        snprintf(buf, size, "%.*s %.*s%s%s%.*s", severity ? (int)severity_len : 1,
                 severity ? severity : "?", (int)file_len, file ? file : "", at,
                 file_len > 0 ? " " : "", (int)title_len, title ? title : "");
    }
    s_trim_utf8(buf);
}

/* The findings of a result: a review's FINDINGS, else a test run's FAILURES. */
static void s_put_findings(wire_writer_t *w, const msgpack_object *result)
{
    const msgpack_object *findings = wire_map_get(result, FIELD_FINDINGS);
    if (findings == NULL || findings->type != MSGPACK_OBJECT_ARRAY)
        findings = wire_map_get_key(result, "FAILURES");
    if (findings == NULL || findings->type != MSGPACK_OBJECT_ARRAY || findings->via.array.size == 0)
        return;
    wire_open_array(w, FIELD_FINDINGS_SEEN);
    for (uint32_t i = 0; i < findings->via.array.size && i < BROKER_PRIOR_FINDINGS; i++) {
        char line[BROKER_PRIOR_FINDING_MAX + 1];
        s_finding_line(&findings->via.array.ptr[i], line, sizeof line);
        if (line[0] != '\0')
            wire_elem_str(w, line);
    }
    wire_close(w);
    wire_put_int(w, FIELD_FINDINGS_TOTAL, findings->via.array.size);
}

/* What the stored result of `task` says, when `attempt` was its last. */
static void s_put_left_behind(wire_writer_t *w, const task_t *task, int attempt)
{
    if (task->attempt != attempt || task->result_len == 0)
        return;
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    if (msgpack_unpack_next(&unpacked, task->result, task->result_len, NULL) ==
            MSGPACK_UNPACK_SUCCESS &&
        unpacked.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object *result = &unpacked.data;
        s_put_text(w, FIELD_NOTES, wire_map_get_key(result, "NOTES"), BROKER_PRIOR_NOTES_MAX);
        wire_open_array(w, FIELD_FILES);
        s_put_files(w, result);
        wire_close(w);
        s_put_findings(w, result);
    }
    msgpack_unpacked_destroy(&unpacked);
}

void broker_prior_write(broker_t *self, wire_writer_t *w, const task_t *task)
{
    wire_open_array(w, FIELD_PRIOR);
    s_rows_t rows = {.count = 0};
    if (task->issue != NULL &&
        store_attempts_for_issue(self->store, task->issue, task->queue->name, BROKER_PRIOR_LIMIT,
                                 s_on_attempt, &rows) != 0)
        log_warn("task %s: prior attempts: %s", task->id, failure_message());
    for (int i = 0; i < rows.count; i++) {
        const s_row_t *row = &rows.rows[i];
        wire_open_map_key(w, NULL);
        wire_put_str(w, FIELD_TASK, row->task);
        wire_put_int(w, FIELD_ATTEMPT, row->attempt);
        wire_put_str(w, FIELD_OUTCOME, row->outcome);
        wire_put_str(w, FIELD_ERROR, row->error);
        wire_put_int(w, FIELD_FINISHED, row->finished);
        /* A retry of this very task is not loaded: its result is not the row's. */
        task_t *ended = NULL;
        if (strcmp(row->task, task->id) != 0) {
            int rc = store_task_load(self->store, row->task, &ended);
            if (rc != 0 && rc != FAILURE_NOT_FOUND)
                log_warn("task %s: prior attempt of %s: %s", task->id, row->task,
                         failure_message());
        }
        if (ended != NULL)
            s_put_left_behind(w, ended, row->attempt);
        task_destroy(&ended);
        wire_close(w);
        free(rows.rows[i].error);
    }
    wire_close(w);
}
