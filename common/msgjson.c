/* msgjson: msgpack <-> JSON (see msgjson.h). */
#include "msgjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *msgjson_from_object(const msgpack_object *obj)
{
    switch (obj->type) {
    case MSGPACK_OBJECT_NIL: return json_null();
    case MSGPACK_OBJECT_BOOLEAN: return json_boolean(obj->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return json_integer(obj->via.u64 > INT64_MAX ? INT64_MAX : (json_int_t)obj->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer(obj->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return json_real(obj->via.f64);
    /* An empty string may come with no pointer at all. */
    case MSGPACK_OBJECT_STR:
        return obj->via.str.size ? json_stringn_nocheck(obj->via.str.ptr, obj->via.str.size)
                                 : json_string("");
    case MSGPACK_OBJECT_BIN:
        return obj->via.bin.size ? json_stringn_nocheck(obj->via.bin.ptr, obj->via.bin.size)
                                 : json_string("");
    case MSGPACK_OBJECT_ARRAY: {
        json_t *array = json_array();
        for (uint32_t i = 0; i < obj->via.array.size; i++)
            json_array_append_new(array, msgjson_from_object(&obj->via.array.ptr[i]));
        return array;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *map = json_object();
        for (uint32_t i = 0; i < obj->via.map.size; i++) {
            const msgpack_object_kv *kv = &obj->via.map.ptr[i];
            char key[256];
            if (kv->key.type == MSGPACK_OBJECT_STR || kv->key.type == MSGPACK_OBJECT_BIN) {
                wire_obj_str(&kv->key, key, sizeof key, "");
            } else if (kv->key.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
                snprintf(key, sizeof key, "%llu", (unsigned long long)kv->key.via.u64);
            } else {
                snprintf(key, sizeof key, "?");
            }
            json_object_set_new(map, key, msgjson_from_object(&kv->val));
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
        wire_open_map(writer, key);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)value, k, v) msgjson_put(writer, k, v);
        wire_close(writer);
        break;
    }
    case JSON_ARRAY: {
        wire_open_array(writer, key);
        size_t i;
        json_t *v;
        json_array_foreach(value, i, v) msgjson_put(writer, NULL, v);
        wire_close(writer);
        break;
    }
    case JSON_STRING:
        wire_put_strn(writer, key, json_string_value(value), json_string_length(value));
        break;
    case JSON_INTEGER: wire_put_int(writer, key, json_integer_value(value)); break;
    case JSON_REAL: wire_put_float(writer, key, json_real_value(value)); break;
    case JSON_TRUE: wire_put_bool(writer, key, true); break;
    case JSON_FALSE: wire_put_bool(writer, key, false); break;
    case JSON_NULL: {
        /* msgpack nil: written through the raw path so the entry is counted. */
        static const unsigned char nil = 0xc0;
        wire_put_raw(writer, key, &nil, 1);
        break;
    }
    }
}
