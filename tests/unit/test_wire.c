/* Unit tests for the wire codec: round trips, and every kind of refusal. */
#include "check.h"
#include "failure.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

static wire_msg_t *s_roundtrip(wire_writer_t *w)
{
    size_t len;
    const void *data = wire_writer_data(w, &len);
    wire_msg_t *msg = NULL;
    int rc = wire_decode(data, len, &msg);
    if (rc != 0)
        fprintf(stderr, "decode: %s\n", failure_message());
    return msg;
}

static void test_submit_roundtrip(void)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "t-1");
    wire_put_str(w, FIELD_SPECIALIST, "merge-agent");
    wire_put_str(w, FIELD_PRIORITY, "urgent");
    wire_put_int(w, FIELD_MAX_ATTEMPTS, 5);
    wire_open_map(w, FIELD_PAYLOAD);
    wire_put_str(w, FIELD_BRANCH, "feat/x");
    wire_open_array(w, FIELD_FILES_CHANGED);
    wire_elem_str(w, "a.c");
    wire_elem_str(w, "b.c");
    wire_close(w);
    wire_close(w);
    wire_put_key_str(w, "unknown_key", "ignored");
    wire_msg_t *msg = s_roundtrip(w);
    CHECK(msg != NULL);
    if (msg != NULL) {
        CHECK(wire_msg_type(msg) == MSG_SUBMIT);
        CHECK_STR(wire_msg_str(msg, FIELD_ID, NULL), "t-1");
        CHECK_STR(wire_msg_str(msg, FIELD_PRIORITY, NULL), "urgent");
        CHECK_INT(wire_msg_int(msg, FIELD_MAX_ATTEMPTS, 0), 5);
        CHECK(!wire_msg_has(msg, FIELD_GROUP));
        CHECK_STR(wire_msg_str(msg, FIELD_GROUP, "none"), "none");
        const msgpack_object *payload = wire_msg_object(msg, FIELD_PAYLOAD);
        char buf[32];
        CHECK_STR(wire_obj_str(wire_map_get(payload, FIELD_BRANCH), buf, sizeof buf, ""), "feat/x");
        const msgpack_object *files = wire_map_get(payload, FIELD_FILES_CHANGED);
        CHECK(files != NULL && files->type == MSGPACK_OBJECT_ARRAY && files->via.array.size == 2);
        size_t raw_len;
        const void *raw = wire_msg_raw(msg, FIELD_PAYLOAD, &raw_len);
        CHECK(raw != NULL && raw_len > 0);
    }
    wire_msg_destroy(&msg);
    CHECK(msg == NULL);
    wire_writer_destroy(&w);
}

static int s_decode_error(const void *data, size_t len, const char *expect_substring)
{
    wire_msg_t *msg = NULL;
    int rc = wire_decode(data, len, &msg);
    CHECK(rc != 0);
    CHECK(msg == NULL);
    if (strstr(failure_message(), expect_substring) == NULL) {
        fprintf(stderr, "reason \"%s\" lacks \"%s\"\n", failure_message(), expect_substring);
        check_fail();
    }
    return rc;
}

static void test_refusals(void)
{
    wire_writer_t *w = wire_writer_new();

    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "t-1");
    size_t len;
    const void *data = wire_writer_data(w, &len);
    s_decode_error(data, len, "missing required field 'specialist'");

    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "t-1");
    wire_put_int(w, FIELD_SPECIALIST, 7);
    data = wire_writer_data(w, &len);
    s_decode_error(data, len, "field 'specialist' must be a string");

    wire_writer_start_map(w);
    wire_put_int(w, FIELD_V, 1);
    wire_put_str(w, FIELD_TYPE, "no_such_message");
    data = wire_writer_data(w, &len);
    s_decode_error(data, len, "unknown message type 'no_such_message'");

    wire_writer_start_map(w);
    wire_put_int(w, FIELD_V, 99);
    wire_put_str(w, FIELD_TYPE, "submit");
    data = wire_writer_data(w, &len);
    s_decode_error(data, len, "unsupported protocol version 99");

    wire_writer_start_map(w);
    wire_put_str(w, FIELD_TYPE, "submit");
    data = wire_writer_data(w, &len);
    s_decode_error(data, len, "protocol version");

    char *big = malloc(200);
    memset(big, 'x', 199);
    big[199] = '\0';
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, big);
    wire_put_str(w, FIELD_SPECIALIST, "x");
    data = wire_writer_data(w, &len);
    CHECK_INT(s_decode_error(data, len, "over its cap"), FAILURE_TOO_BIG);
    free(big);

    /* truncated: a valid message cut short */
    wire_writer_start(w, MSG_HEARTBEAT);
    wire_put_str(w, FIELD_WORKER, "w-1");
    data = wire_writer_data(w, &len);
    s_decode_error(data, len - 3, "truncated");

    const unsigned char not_a_map[] = {0x93, 0x01, 0x02, 0x03};
    s_decode_error(not_a_map, sizeof not_a_map, "must be a msgpack map");
    const unsigned char garbage[] = {0xc1, 0xc1, 0xc1};
    s_decode_error(garbage, sizeof garbage, "malformed");
    s_decode_error("", 0, "empty");
    /* A 7-byte map header claiming four billion entries is refused before any allocation. */
    const unsigned char lying_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x76};
    s_decode_error(lying_map, sizeof lying_map, "claims more elements");
    const unsigned char lying_string[] = {0x81, 0xa1, 0x76, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'};
    s_decode_error(lying_string, sizeof lying_string, "truncated");

    unsigned char *huge = calloc(1, WIRE_MAX_MESSAGE + 1);
    CHECK_INT(s_decode_error(huge, WIRE_MAX_MESSAGE + 1, "cap"), FAILURE_TOO_BIG);
    free(huge);

    wire_writer_destroy(&w);
}

static void test_decode_as(void)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start_map(w);
    wire_put_str(w, FIELD_ID, "next-1");
    wire_put_str(w, FIELD_SPECIALIST, "merge-agent");
    size_t len;
    const void *data = wire_writer_data(w, &len);
    wire_msg_t *msg = NULL;
    CHECK_INT(wire_decode_as(data, len, MSG_SUBMIT, &msg), 0);
    CHECK(msg != NULL && strcmp(wire_msg_str(msg, FIELD_ID, ""), "next-1") == 0);
    wire_msg_destroy(&msg);
    wire_writer_destroy(&w);
}

/* PROTOCOL.md: bin is accepted where a string is expected, `type` included. */
static void test_bin_as_string(void)
{
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_bin_with_body(&pk, "heartbeat", 9);
    msgpack_pack_str_with_body(&pk, "worker", 6);
    msgpack_pack_bin_with_body(&pk, "w-1", 3);
    wire_msg_t *msg = NULL;
    CHECK_INT(wire_decode(buf.data, buf.size, &msg), 0);
    if (msg != NULL) {
        CHECK(wire_msg_type(msg) == MSG_HEARTBEAT);
        CHECK_STR(wire_msg_str(msg, FIELD_WORKER, NULL), "w-1");
    }
    wire_msg_destroy(&msg);
    msgpack_sbuffer_destroy(&buf);
}

/* A heartbeat whose worker field is `len` bytes at `worker`, as str or bin; returns what
 * wire_decode() says, the reason in failure_message(). */
static int s_decode_worker(const char *worker, size_t len, bool bin)
{
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_str_with_body(&pk, "heartbeat", 9);
    msgpack_pack_str_with_body(&pk, "worker", 6);
    if (bin)
        msgpack_pack_bin_with_body(&pk, worker, len);
    else
        msgpack_pack_str_with_body(&pk, worker, len);
    wire_msg_t *msg = NULL;
    int rc = wire_decode(buf.data, buf.size, &msg);
    wire_msg_destroy(&msg);
    msgpack_sbuffer_destroy(&buf);
    return rc;
}

/* Strings are text: a str that is not UTF-8 anywhere in a message, a declared string sent
 * as bin that is not UTF-8, and a NUL in a declared string (cut when read) are refused. */
static void test_text_only(void)
{
    CHECK_INT(s_decode_worker("w\xe9", 2, false), FAILURE_INVALID);
    CHECK(strstr(failure_message(), "not valid UTF-8") != NULL);
    CHECK_INT(s_decode_worker("w\xe9", 2, true), FAILURE_INVALID);
    CHECK(strstr(failure_message(), "field 'worker' is not valid UTF-8") != NULL);
    CHECK_INT(s_decode_worker("w\0x", 3, false), FAILURE_INVALID);
    CHECK(strstr(failure_message(), "field 'worker' holds a NUL byte") != NULL);
    CHECK_INT(s_decode_worker("w\xc3\xa9", 3, false), 0);
    CHECK_INT(s_decode_worker("w\xc3\xa9", 3, true), 0);
    /* Nested: a payload string that is not UTF-8. */
    msgpack_sbuffer buf;
    msgpack_sbuffer_init(&buf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    msgpack_pack_str_with_body(&pk, "v", 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str_with_body(&pk, "type", 4);
    msgpack_pack_str_with_body(&pk, "submit", 6);
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_str_with_body(&pk, "t", 1);
    msgpack_pack_str_with_body(&pk, "specialist", 10);
    msgpack_pack_str_with_body(&pk, "x", 1);
    msgpack_pack_str_with_body(&pk, "payload", 7);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_str_with_body(&pk, "branch", 6);
    msgpack_pack_str_with_body(&pk, "\xff", 1);
    wire_msg_t *msg = NULL;
    CHECK_INT(wire_decode(buf.data, buf.size, &msg), FAILURE_INVALID);
    msgpack_sbuffer_destroy(&buf);

    /* The writer never sends such a string: bytes that are not UTF-8 become U+FFFD. */
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_PROGRESS);
    wire_put_str(w, FIELD_WORKER, "w");
    wire_put_str(w, FIELD_TASK, "t");
    wire_put_int(w, FIELD_ATTEMPT, 1);
    wire_put_str(w, FIELD_TEXT, "caf\xe9 ok");
    msg = s_roundtrip(w);
    CHECK(msg != NULL);
    if (msg != NULL)
        CHECK_STR(wire_msg_str(msg, FIELD_TEXT, ""), "caf\xef\xbf\xbd ok");
    wire_msg_destroy(&msg);
    wire_writer_destroy(&w);
}

/* Nesting past WIRE_MAX_DEPTH (a user's JSON payload, an agent's result) must not run off
 * the writer's stack: the too-deep container becomes nil, the message stays valid, and the
 * writer says so. */
static void test_writer_too_deep(void)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, "deep");
    wire_open_map(w, FIELD_PAYLOAD);
    wire_open_array_key(w, "deep");
    for (int i = 0; i < WIRE_MAX_DEPTH + 10; i++)
        wire_open_array_key(w, NULL);
    wire_put_key_int(w, NULL, 7);
    for (int i = 0; i < WIRE_MAX_DEPTH + 11; i++)
        wire_close(w);
    wire_put_str(w, FIELD_TITLE, "after");
    wire_close(w);
    wire_put_str(w, FIELD_SPECIALIST, "x");
    CHECK(wire_writer_too_deep(w));
    size_t len;
    const void *data = wire_writer_data(w, &len);
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    CHECK(msgpack_unpack_next(&unpacked, data, len, &offset) == MSGPACK_UNPACK_SUCCESS);
    CHECK(offset == len);
    msgpack_unpacked_destroy(&unpacked);
    wire_msg_t *msg = NULL;
    CHECK_INT(wire_decode(data, len, &msg), 0);
    if (msg != NULL)
        CHECK_STR(wire_msg_str(msg, FIELD_SPECIALIST, ""), "x");
    wire_msg_destroy(&msg);
    wire_writer_start(w, MSG_SUBMIT);
    CHECK(!wire_writer_too_deep(w));
    wire_writer_destroy(&w);
}

int main(void)
{
    test_writer_too_deep();
    test_bin_as_string();
    test_text_only();
    test_submit_roundtrip();
    test_refusals();
    test_decode_as();
    return check_exit_code("test_wire");
}
