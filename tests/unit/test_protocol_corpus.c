/* The protocol's bytes do not change by accident: tests/fixtures/protocol holds one
 * message of every type (every field the table declares, with values derived from the
 * field's place) and the submit the client library builds, recorded with the encoder of
 * the day. This test encodes the same messages again and compares the bytes, then
 * decodes each recorded message and reads every field back.
 *
 * To record the corpus anew (only when the protocol changes on purpose, with a version
 * note in PROTOCOL.md): CLOISTER_RECORD_PROTOCOL=1 tests/test_protocol_corpus */
#include "check.h"
#include "client.h"
#include "failure.h"
#include "messages.h"
#include "protocol.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORPUS_DIR CLOISTER_SOURCE_DIR "/tests/fixtures/protocol"

/* The value every field of message `m` gets: strings "<field>-<m>", integers 100*m+i,
 * booleans true, maps {"k": "<field>"}, arrays ["<field>"], any: the integer 7. */
static void s_write_field(wire_writer_t *w, const wire_field_t *field, size_t m, size_t i)
{
    char text[128];
    snprintf(text, sizeof text, "%s-%zu", field_name(field->field), m);
    switch (field->type) {
    case WIRE_STR: wire_put_str(w, field->field, text); break;
    case WIRE_INT: wire_put_int(w, field->field, (int64_t)(100 * m + i)); break;
    case WIRE_BOOL: wire_put_bool(w, field->field, true); break;
    case WIRE_FLOAT: wire_put_float(w, field->field, 0.5 + (double)m); break;
    case WIRE_MAP:
        wire_open_map(w, field->field);
        wire_put_key_str(w, "k", field_name(field->field));
        wire_close(w);
        break;
    case WIRE_ARRAY:
        wire_open_array(w, field->field);
        wire_elem_str(w, field_name(field->field));
        wire_close(w);
        break;
    case WIRE_ANY: wire_put_int(w, field->field, 7); break;
    }
}

static void s_encode_message(wire_writer_t *w, size_t m)
{
    const wire_spec_t *spec = &messages_table[m];
    wire_writer_start(w, spec->type);
    for (size_t i = 0; i < spec->nfields; i++)
        s_write_field(w, &spec->fields[i], m, i);
}

static void s_encode_client_submit(wire_writer_t *w)
{
    wire_writer_t *payload = wire_writer_new();
    wire_writer_start_map(payload);
    wire_put_str(payload, FIELD_WORKSPACE, "/srv/repo");
    wire_put_str(payload, FIELD_BRANCH, "feature/x");
    size_t payload_len;
    const void *payload_data = wire_writer_data(payload, &payload_len);
    submit_t task = {.id = "task-1",
                     .specialist = "merge-agent",
                     .priority = "high",
                     .source = "corpus",
                     .title = "Merge feature/x",
                     .issue = "PAN-1",
                     .group = "repo:main",
                     .max_attempts = 3,
                     .timeout_s = 600,
                     .not_before = 1700000000000,
                     .payload = payload_data,
                     .payload_len = payload_len};
    submit_encode(w, &task);
    wire_writer_destroy(&payload);
}

static char *s_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *data = malloc(WIRE_MAX_MESSAGE);
    *len = data ? fread(data, 1, WIRE_MAX_MESSAGE, f) : 0;
    fclose(f);
    return data;
}

/* Compares (or, when recording, writes) the writer's bytes against corpus file `name`. */
static void s_check_bytes(wire_writer_t *w, const char *name, bool record)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.msgpack", CORPUS_DIR, name);
    size_t len;
    const void *data = wire_writer_data(w, &len);
    if (record) {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL && fwrite(data, 1, len, f) == len && fclose(f) == 0);
        return;
    }
    size_t recorded_len = 0;
    char *recorded = s_read_file(path, &recorded_len);
    if (recorded == NULL)
        fprintf(stderr, "cannot read %s\n", path);
    CHECK(recorded != NULL);
    if (recorded != NULL && (recorded_len != len || memcmp(recorded, data, len) != 0))
        fprintf(stderr, "%s: the encoder's %zu bytes differ from the recorded %zu\n", name, len,
                recorded_len);
    CHECK(recorded != NULL && recorded_len == len && memcmp(recorded, data, len) == 0);
    free(recorded);
}

/* Decodes recorded message `m` and reads every field back. */
static void s_check_decoded(size_t m)
{
    const wire_spec_t *spec = &messages_table[m];
    char path[512];
    snprintf(path, sizeof path, "%s/%s.msgpack", CORPUS_DIR, msg_type_name(spec->type));
    size_t len = 0;
    char *data = s_read_file(path, &len);
    CHECK(data != NULL);
    wire_msg_t *msg = NULL;
    if (data != NULL && wire_decode(data, len, &msg) != 0)
        fprintf(stderr, "%s: %s\n", path, failure_message());
    CHECK(msg != NULL);
    for (size_t i = 0; msg != NULL && i < spec->nfields; i++) {
        const wire_field_t *field = &spec->fields[i];
        char text[128];
        snprintf(text, sizeof text, "%s-%zu", field_name(field->field), m);
        CHECK(wire_msg_type(msg) == spec->type);
        switch (field->type) {
        case WIRE_STR: CHECK_STR(wire_msg_str(msg, field->field, NULL), text); break;
        case WIRE_INT: CHECK_INT(wire_msg_int(msg, field->field, -1), 100 * m + i); break;
        case WIRE_BOOL: CHECK(wire_msg_bool(msg, field->field, false)); break;
        case WIRE_FLOAT: CHECK(wire_msg_float(msg, field->field, 0) == 0.5 + (double)m); break;
        case WIRE_MAP:
        case WIRE_ARRAY:
        case WIRE_ANY: CHECK(wire_msg_object(msg, field->field) != NULL); break;
        }
    }
    wire_msg_destroy(&msg);
    free(data);
}

int main(void)
{
    bool record = getenv("CLOISTER_RECORD_PROTOCOL") != NULL;
    wire_writer_t *w = wire_writer_new();
    for (size_t m = 0; m < messages_count; m++) {
        s_encode_message(w, m);
        s_check_bytes(w, msg_type_name(messages_table[m].type), record);
        if (!record)
            s_check_decoded(m);
    }
    s_encode_client_submit(w);
    s_check_bytes(w, "submit-client", record);
    wire_writer_destroy(&w);
    return check_exit_code("test_protocol_corpus");
}
