/* msgjson: msgpack <-> JSON (see msgjson.h). */
#include "msgjson.h"

#include "failure.h"
#include "utf8.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *msgjson_string(const char *text, size_t len)
{
    /* An empty string may come with no pointer at all. */
    if (len == 0)
        return json_string("");
    if (utf8_valid(text, len))
        return json_stringn_nocheck(text, len);
    size_t repaired_len = 0;
    char *repaired = utf8_repair(text, len, &repaired_len);
    json_t *value = repaired ? json_stringn_nocheck(repaired, repaired_len) : NULL;
    free(repaired);
    return value;
}

/* Sets map[key] = value (stolen) for a msgpack key: a string's bytes (repaired as in
 * msgjson_string), a non-negative integer's digits, "?" for anything else. */
static void s_set_member(json_t *map, const msgpack_object *key, json_t *value)
{
    const char *text = "?";
    size_t len = 1;
    char digits[32];
    if (key->type == MSGPACK_OBJECT_STR) {
        text = key->via.str.ptr;
        len = key->via.str.size;
    } else if (key->type == MSGPACK_OBJECT_BIN) {
        text = key->via.bin.ptr;
        len = key->via.bin.size;
    } else if (key->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        snprintf(digits, sizeof digits, "%llu", (unsigned long long)key->via.u64);
        text = digits;
        len = strlen(digits);
    }
    if (len == 0) {
        json_object_set_new_nocheck(map, "", value);
    } else if (utf8_valid(text, len)) {
        json_object_setn_new_nocheck(map, text, len, value);
    } else {
        size_t repaired_len = 0;
        char *repaired = utf8_repair(text, len, &repaired_len);
        if (repaired != NULL)
            json_object_setn_new_nocheck(map, repaired, repaired_len, value);
        else
            json_decref(value);
        free(repaired);
    }
}

json_t *msgjson_from_object(const msgpack_object *obj)
{
    switch (obj->type) {
    case MSGPACK_OBJECT_NIL: return json_null();
    case MSGPACK_OBJECT_BOOLEAN: return json_boolean(obj->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return json_integer(obj->via.u64 > INT64_MAX ? INT64_MAX : (json_int_t)obj->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer(obj->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return isfinite(obj->via.f64) ? json_real(obj->via.f64) : json_null();
    case MSGPACK_OBJECT_STR: return msgjson_string(obj->via.str.ptr, obj->via.str.size);
    case MSGPACK_OBJECT_BIN: return msgjson_string(obj->via.bin.ptr, obj->via.bin.size);
    case MSGPACK_OBJECT_ARRAY: {
        json_t *array = json_array();
        for (uint32_t i = 0; array != NULL && i < obj->via.array.size; i++)
            json_array_append_new(array, msgjson_from_object(&obj->via.array.ptr[i]));
        return array;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *map = json_object();
        for (uint32_t i = 0; map != NULL && i < obj->via.map.size; i++) {
            const msgpack_object_kv *kv = &obj->via.map.ptr[i];
            s_set_member(map, &kv->key, msgjson_from_object(&kv->val));
        }
        return map;
    }
    default: return json_null();
    }
}

json_t *msgjson_from_raw(const void *raw, size_t len)
{
    if (raw == NULL || len == 0)
        return NULL;
    msgpack_unpacked unpacked;
    msgpack_unpacked_init(&unpacked);
    size_t offset = 0;
    json_t *result = NULL;
    if (msgpack_unpack_next(&unpacked, raw, len, &offset) == MSGPACK_UNPACK_SUCCESS)
        result = msgjson_from_object(&unpacked.data);
    msgpack_unpacked_destroy(&unpacked);
    return result;
}

void msgjson_put(wire_writer_t *writer, const char *key, const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT: {
        wire_open_map_key(writer, key);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)value, k, v) msgjson_put(writer, k, v);
        wire_close(writer);
        break;
    }
    case JSON_ARRAY: {
        wire_open_array_key(writer, key);
        size_t i;
        json_t *v;
        json_array_foreach(value, i, v) msgjson_put(writer, NULL, v);
        wire_close(writer);
        break;
    }
    case JSON_STRING:
        wire_put_key_strn(writer, key, json_string_value(value), json_string_length(value));
        break;
    case JSON_INTEGER: wire_put_key_int(writer, key, json_integer_value(value)); break;
    case JSON_REAL: wire_put_key_float(writer, key, json_real_value(value)); break;
    case JSON_TRUE: wire_put_key_bool(writer, key, true); break;
    case JSON_FALSE: wire_put_key_bool(writer, key, false); break;
    case JSON_NULL: {
        /* msgpack nil: written through the raw path so the entry is counted. */
        static const unsigned char nil = 0xc0;
        wire_put_key_raw(writer, key, &nil, 1);
        break;
    }
    }
}

int msgjson_to_map(wire_writer_t *writer, const json_t *object)
{
    if (!json_is_object(object))
        return failure_set(FAILURE_INVALID, "not a JSON object");
    wire_writer_start_map(writer);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)object, key, value)
        msgjson_put(writer, key, value);
    if (wire_writer_too_deep(writer))
        return failure_set(FAILURE_INVALID, "nested deeper than %d levels", WIRE_MAX_DEPTH - 2);
    return 0;
}
