/* fuzz_wire: the wire decoder against arbitrary bytes. Whatever the input, decoding must
 * either fail with a reason or give a message whose every declared field can be read and
 * whose nested values convert to JSON; the same bytes are also tried as a bare next-task
 * map. */
#include "failure.h"
#include "msgjson.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void s_read_every_field(const wire_msg_t *msg, msg_type_t type)
{
    const wire_spec_t *spec = &messages_table[type];
    for (size_t i = 0; i < spec->nfields; i++) {
        const wire_field_t *field = &spec->fields[i];
        if (field->required && !wire_msg_has(msg, field->field))
            abort(); /* required fields were checked */
        if (field->type == WIRE_STR) {
            const char *text = wire_msg_str(msg, field->field, NULL);
            if (text != NULL && field->max_len > 0 && strlen(text) > field->max_len)
                abort();
        } else if (field->type == WIRE_INT || field->type == WIRE_BOOL) {
            (void)wire_msg_int(msg, field->field, 0);
        } else if (field->type == WIRE_FLOAT) {
            (void)wire_msg_float(msg, field->field, 0.0);
        } else {
            size_t len = 0;
            const void *raw = wire_msg_raw(msg, field->field, &len);
            json_t *json = msgjson_from_raw(raw, len);
            if (raw != NULL && json == NULL)
                abort(); /* re-encoded bytes must decode again */
            json_decref(json);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_msg_t *msg = NULL;
    if (wire_decode(data, size, &msg) == 0) {
        s_read_every_field(msg, wire_msg_type(msg));
        wire_msg_destroy(&msg);
    } else if (failure_message()[0] == '\0') {
        abort(); /* every refusal says why */
    }
    if (wire_decode_as(data, size, MSG_SUBMIT, &msg) == 0) {
        s_read_every_field(msg, MSG_SUBMIT);
        wire_msg_destroy(&msg);
    }
    return 0;
}
