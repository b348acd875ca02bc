/* pan_task_id: a task id as people type it -- whole, or a unique prefix of one, as git,
 * docker and gh accept (see pan_task_id_resolve in pan.h).
 *
 * An exact id is asked of the broker first (show_task), so a whole id costs one request
 * and an id that is also the prefix of another still means itself. Otherwise the broker's
 * list_tasks is read page by page, newest first, for ids that start with the prefix; the
 * scan stops once more than PAN_TASK_ID_CANDIDATES match, since the answer is then "too
 * many" whatever the rest holds. */
#include "pan.h"

#include "failure.h"
#include "msgjson.h"

#include <stdio.h>
#include <string.h>

/* Tasks per list_tasks page while looking for a prefix (the broker's most). */
#define PAGE_TASKS 1000
/* Candidates named when a prefix is ambiguous. */
#define PAN_TASK_ID_CANDIDATES 10

typedef struct {
    char ids[PAN_TASK_ID_CANDIDATES + 1][256];
    int n; /* matches seen, at most PAN_TASK_ID_CANDIDATES + 1 */
} matches_t;

/* The exit code of a failed control request (its reason printed). */
static int s_failed(int rc)
{
    if (rc == FAILURE_TIMEOUT || rc == FAILURE_IO)
        return pan_fail(PAN_EXIT_UNREACHABLE, "%s", failure_message());
    return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
}

/* show_task for `id`: 0 when it exists, FAILURE_NOT_FOUND when it does not, another
 * FAILURE_* code when the broker could not say. */
static int s_exists(client_t *client, const char *id)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_SHOW_TASK);
    wire_put_str(writer, FIELD_ID, id);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, writer, &reply);
    wire_writer_destroy(&writer);
    wire_msg_destroy(&reply);
    return rc;
}

/* Reads one page of list_tasks after `before` ("" for the first) into matches; writes the
 * page's last id into before ("" when it was the last page). Returns 0 or a FAILURE_*. */
static int s_scan_page(client_t *client, const char *prefix, char *before, size_t size,
                       matches_t *matches)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_TASKS);
    wire_put_str(writer, FIELD_BEFORE, before[0] ? before : NULL);
    wire_put_int(writer, FIELD_LIMIT, PAGE_TASKS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, writer, &reply);
    wire_writer_destroy(&writer);
    if (rc != 0)
        return rc;
    const msgpack_object *data = wire_msg_object(reply, FIELD_DATA);
    json_t *tasks = data ? msgjson_from_object(data) : NULL;
    bool truncated = wire_msg_bool(reply, FIELD_TRUNCATED, false);
    wire_msg_destroy(&reply);
    if (!json_is_array(tasks)) {
        json_decref(tasks);
        return failure_set(FAILURE_INVALID, "the broker's task list is not an array");
    }
    size_t len = strlen(prefix), n = json_array_size(tasks), i;
    const json_t *task;
    json_array_foreach(tasks, i, task)
    {
        const char *id = pan_json_str(task, "id", "");
        if (strncmp(id, prefix, len) == 0 && matches->n <= PAN_TASK_ID_CANDIDATES)
            snprintf(matches->ids[matches->n++], sizeof matches->ids[0], "%s", id);
    }
    bool last = n == 0 || (!truncated && n < PAGE_TASKS);
    snprintf(before, size, "%s", last ? "" : pan_json_str(json_array_get(tasks, n - 1), "id", ""));
    json_decref(tasks);
    return 0;
}

/* pan_task_id_resolve(), pan_task_id_resolve_quiet() with `quiet`. */
static int s_resolve(const pan_t *pan, const char *text, char *out, size_t size, bool quiet)
{
    char given[1024];
    snprintf(given, sizeof given, "%s", text); /* `out` may be where `text` lies */
    text = given;
    out[0] = '\0';
    if (text[0] == '\0')
        return pan_fail(PAN_EXIT_USAGE, "an empty task id");
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    if (client == NULL)
        return pan_fail(PAN_EXIT_ERROR, "%s", failure_message());
    int code = PAN_EXIT_OK;
    int rc = s_exists(client, text);
    matches_t matches = {.n = 0};
    if (rc == FAILURE_NOT_FOUND) {
        char before[256] = "";
        do {
            rc = s_scan_page(client, text, before, sizeof before, &matches);
        } while (rc == 0 && before[0] != '\0' && matches.n <= PAN_TASK_ID_CANDIDATES);
        if (rc == 0 && matches.n == 0)
            rc = failure_set(FAILURE_NOT_FOUND, "no task '%s', nor one whose id starts so", text);
    }
    if (rc == FAILURE_NOT_FOUND && quiet) {
        snprintf(out, size, "%s", "");
        code = PAN_EXIT_ERROR;
    } else if (rc != 0) {
        code = s_failed(rc);
    } else if (matches.n <= 1) {
        snprintf(out, size, "%s", matches.n == 1 ? matches.ids[0] : text);
    } else {
        fprintf(stderr, "pan: '%s' is the start of %s%d task ids:\n", text,
                matches.n > PAN_TASK_ID_CANDIDATES ? "more than " : "",
                matches.n > PAN_TASK_ID_CANDIDATES ? PAN_TASK_ID_CANDIDATES : matches.n);
        for (int i = 0; i < matches.n && i < PAN_TASK_ID_CANDIDATES; i++)
            fprintf(stderr, "  %s\n", matches.ids[i]);
        code = pan_fail(PAN_EXIT_USAGE, "ambiguous task id '%s': give more of it", text);
    }
    client_destroy(&client);
    return code;
}

int pan_task_id_resolve(const pan_t *pan, const char *text, char *out, size_t size)
{
    return s_resolve(pan, text, out, size, false);
}

int pan_task_id_resolve_quiet(const pan_t *pan, const char *text, char *out, size_t size)
{
    return s_resolve(pan, text, out, size, true);
}
