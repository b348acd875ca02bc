/* wire: table-driven msgpack codec (see wire.h). */
#include "wire.h"

#include "failure.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const msgpack_object *obj; /* NULL when absent or nil */
    char *str;                 /* WIRE_STR: NUL-terminated copy (in the message's strings) */
    char *raw;                 /* WIRE_MAP/ARRAY/ANY: re-encoded bytes, made by the first
                                  wire_msg_raw() (values live outside the struct, so a const
                                  message can still fill them in) */
    size_t raw_len;
} wire_value_t;

/* One allocation holds the struct and the copy of the input (`buffer` points right after
 * the struct); the string fields share a second one (`strings`). */
struct wire_msg_t {
    const wire_spec_t *spec;
    char *buffer; /* our copy of the input: decoded objects point into it */
    msgpack_zone zone; /* holds the decoded objects */
    bool zone_ready;
    msgpack_object root;
    wire_value_t *values; /* one per spec field */
    char *strings;        /* every string field, NUL-terminated, back to back */
};

/* ---- decoding ---- */

/* First chunk of a message's zone: enough for the objects of a typical message, and
 * small enough for malloc's small bins. Bigger messages grow the zone as needed. */
#define WIRE_ZONE_CHUNK 768

static bool s_key_is(const msgpack_object *key, const char *name)
{
    if (key->type != MSGPACK_OBJECT_STR)
        return false;
    /* Compared byte by byte so a mismatch costs no strlen of the name. */
    const char *ptr = key->via.str.ptr;
    uint32_t size = key->via.str.size;
    for (uint32_t i = 0; i < size; i++)
        if (name[i] == '\0' || name[i] != ptr[i])
            return false;
    return name[size] == '\0';
}

const msgpack_object *wire_map_get_key(const msgpack_object *map, const char *key)
{
    if (map == NULL || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (s_key_is(&kv->key, key))
            return &kv->val;
    }
    return NULL;
}

const msgpack_object *wire_map_get(const msgpack_object *map, field_t field)
{
    return wire_map_get_key(map, field_name(field));
}

const char *wire_obj_str(const msgpack_object *obj, char *buf, size_t size, const char *fallback)
{
    if (obj == NULL || size == 0)
        return fallback;
    const char *ptr;
    size_t len;
    if (obj->type == MSGPACK_OBJECT_STR) {
        ptr = obj->via.str.ptr;
        len = obj->via.str.size;
    } else if (obj->type == MSGPACK_OBJECT_BIN) {
        ptr = obj->via.bin.ptr;
        len = obj->via.bin.size;
    } else {
        return fallback;
    }
    if (len >= size)
        len = size - 1;
    if (len > 0) /* an empty string may have no pointer at all */
        memcpy(buf, ptr, len);
    buf[len] = '\0';
    return buf;
}

static const char *s_type_name(wire_type_t type)
{
    switch (type) {
    case WIRE_STR: return "a string";
    case WIRE_INT: return "an integer";
    case WIRE_BOOL: return "a boolean";
    case WIRE_FLOAT: return "a number";
    case WIRE_MAP: return "a map";
    case WIRE_ARRAY: return "an array";
    default: return "a value";
    }
}

static bool s_has_type(const msgpack_object *obj, wire_type_t type)
{
    switch (type) {
    case WIRE_STR: return obj->type == MSGPACK_OBJECT_STR || obj->type == MSGPACK_OBJECT_BIN;
    case WIRE_INT:
        return obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
               obj->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
    case WIRE_BOOL: return obj->type == MSGPACK_OBJECT_BOOLEAN;
    case WIRE_FLOAT:
        return obj->type == MSGPACK_OBJECT_FLOAT32 || obj->type == MSGPACK_OBJECT_FLOAT64 ||
               obj->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
               obj->type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
    case WIRE_MAP: return obj->type == MSGPACK_OBJECT_MAP;
    case WIRE_ARRAY: return obj->type == MSGPACK_OBJECT_ARRAY;
    default: return true;
    }
}

/* Re-encodes obj into a malloc'd buffer. */
static int s_encode_object(const msgpack_object *obj, char **out, size_t *len)
{
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    if (msgpack_pack_object(&pk, *obj) != 0) {
        msgpack_sbuffer_destroy(&sbuf);
        return failure_set(FAILURE_MEMORY, "cannot re-encode a nested value");
    }
    *len = sbuf.size;
    *out = msgpack_sbuffer_release(&sbuf);
    return 0;
}

/* The length of a string field's object (str or bin). */
static size_t s_str_len(const msgpack_object *obj)
{
    return obj->type == MSGPACK_OBJECT_STR ? obj->via.str.size : obj->via.bin.size;
}

/* Checks one declared field and records its object in `value`; adds the bytes a string
 * field needs (with its NUL) to *string_bytes. */
static int s_take_field(const wire_spec_t *spec, const wire_field_t *field,
                        const msgpack_object *obj, wire_value_t *value, size_t *string_bytes)
{
    if (obj == NULL || obj->type == MSGPACK_OBJECT_NIL) {
        if (field->required)
            return failure_set(FAILURE_INVALID, "%s: missing required field '%s'",
                               msg_type_name(spec->type), field_name(field->field));
        return 0;
    }
    if (!s_has_type(obj, field->type))
        return failure_set(FAILURE_INVALID, "%s: field '%s' must be %s", msg_type_name(spec->type),
                               field_name(field->field),
                           s_type_name(field->type));
    value->obj = obj;
    if (field->type == WIRE_STR) {
        size_t len = s_str_len(obj);
        if (field->max_len > 0 && len > field->max_len)
            return failure_set(FAILURE_TOO_BIG, "%s: field '%s' is %zu bytes, over its cap of %zu",
                               msg_type_name(spec->type), field_name(field->field), len, field->max_len);
        /* A declared string is cut at its first NUL when read (wire_msg_str), so "a\0x"
         * and "a\0y" would be one id: refused. A bin taken as a string is text too. */
        const char *bytes = obj->type == MSGPACK_OBJECT_STR ? obj->via.str.ptr : obj->via.bin.ptr;
        if (len > 0 && memchr(bytes, '\0', len) != NULL)
            return failure_set(FAILURE_INVALID, "%s: field '%s' holds a NUL byte",
                               msg_type_name(spec->type), field_name(field->field));
        if (obj->type == MSGPACK_OBJECT_BIN && !utf8_valid(bytes, len))
            return failure_set(FAILURE_INVALID, "%s: field '%s' is not valid UTF-8",
                               msg_type_name(spec->type), field_name(field->field));
        *string_bytes += len + 1;
    }
    return 0;
}

/* Copies every string field into one block (after s_take_field checked them all). */
static int s_copy_strings(wire_msg_t *self, size_t string_bytes)
{
    if (string_bytes == 0)
        return 0;
    self->strings = malloc(string_bytes);
    if (self->strings == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    char *at = self->strings;
    for (size_t i = 0; i < self->spec->nfields; i++) {
        wire_value_t *value = &self->values[i];
        if (value->obj == NULL || self->spec->fields[i].type != WIRE_STR)
            continue;
        size_t len = s_str_len(value->obj);
        value->str = at;
        wire_obj_str(value->obj, at, len + 1, "");
        at += len + 1;
    }
    return 0;
}

/* Reads a big-endian unsigned integer of `width` bytes. */
static uint64_t s_read_be(const unsigned char *at, int width)
{
    uint64_t value = 0;
    for (int i = 0; i < width; i++)
        value = value << 8 | at[i];
    return value;
}

/* Walks the msgpack bytes without allocating, and refuses containers that claim more
 * elements than bytes remain: msgpack-c allocates a container's elements up front, so a
 * 7-byte message claiming four billion map entries must never reach it. */
static int s_check_structure(const unsigned char *data, size_t len)
{
    uint64_t pending = 1; /* objects still to read */
    size_t at = 0;
    while (pending > 0) {
        if (at >= len)
            return failure_set(FAILURE_INVALID, "truncated msgpack message");
        unsigned char byte = data[at++];
        pending--;
        uint64_t skip = 0, children = 0;
        int width = 0;
        bool is_str = (byte >= 0xa0 && byte <= 0xbf) || byte == 0xd9 || byte == 0xda ||
                      byte == 0xdb;
        if (byte <= 0x7f || byte >= 0xe0 || byte == 0xc0 || byte == 0xc2 || byte == 0xc3) {
            /* a one-byte value */
        } else if (byte >= 0x80 && byte <= 0x8f) {
            children = 2u * (byte & 0x0f);
        } else if (byte >= 0x90 && byte <= 0x9f) {
            children = byte & 0x0f;
        } else if (byte >= 0xa0 && byte <= 0xbf) {
            skip = byte & 0x1f;
        } else {
            switch (byte) {
            case 0xc4: case 0xd9: width = 1; break;                 /* bin8, str8 */
            case 0xc5: case 0xda: width = 2; break;                 /* bin16, str16 */
            case 0xc6: case 0xdb: width = 4; break;                 /* bin32, str32 */
            case 0xc7: width = 1; skip = 1; break;                  /* ext8 (+type) */
            case 0xc8: width = 2; skip = 1; break;                  /* ext16 */
            case 0xc9: width = 4; skip = 1; break;                  /* ext32 */
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: case 0xdd: case 0xde: case 0xdf: {           /* array/map 16/32 */
                int count_width = (byte == 0xdc || byte == 0xde) ? 2 : 4;
                if (len - at < (size_t)count_width)
                    return failure_set(FAILURE_INVALID, "truncated msgpack message");
                children = s_read_be(data + at, count_width) * (byte >= 0xde ? 2 : 1);
                at += (size_t)count_width;
                break;
            }
            default: return failure_set(FAILURE_INVALID, "malformed msgpack message");
            }
        }
        if (width > 0) {
            if (len - at < (size_t)width)
                return failure_set(FAILURE_INVALID, "truncated msgpack message");
            skip += s_read_be(data + at, width);
            at += (size_t)width;
        }
        if (skip > len - at)
            return failure_set(FAILURE_INVALID, "truncated msgpack message");
        /* A str is text: strict readers (Python's raw=False, JSON) fail on anything else,
         * and every event and replay page holding it with them. Bytes go as bin. */
        if (is_str && !utf8_valid((const char *)data + at, (size_t)skip))
            return failure_set(FAILURE_INVALID,
                               "the string at byte %zu is not valid UTF-8 (send bytes as bin)",
                               at);
        at += (size_t)skip;
        pending += children;
        if (pending > len - at)
            return failure_set(FAILURE_INVALID,
                               "malformed msgpack message: a container claims more elements "
                               "than the message holds");
    }
    if (at != len)
        return failure_set(FAILURE_INVALID, "%zu trailing bytes after the message", len - at);
    return 0;
}

static int s_decode(const void *data, size_t len, int as_type, wire_msg_t **out)
{
    *out = NULL;
    if (len > WIRE_MAX_MESSAGE)
        return failure_set(FAILURE_TOO_BIG, "message of %zu bytes is over the %d-byte cap", len,
                           WIRE_MAX_MESSAGE);
    if (len == 0)
        return failure_set(FAILURE_INVALID, "empty message");
    int rc = s_check_structure(data, len);
    if (rc != 0)
        return rc;
    wire_msg_t *self = malloc(sizeof *self + len);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    memset(self, 0, sizeof *self);
    self->buffer = (char *)(self + 1);
    memcpy(self->buffer, data, len);
    /* A zone of our own with a small first chunk: msgpack_unpack_next() would make an
     * 8 KiB one per message, a large allocation that makes malloc consolidate its bins. */
    if (!msgpack_zone_init(&self->zone, WIRE_ZONE_CHUNK)) {
        rc = failure_set(FAILURE_MEMORY, "out of memory");
        goto out;
    }
    self->zone_ready = true;
    size_t offset = 0;
    msgpack_unpack_return ret = msgpack_unpack(self->buffer, len, &offset, &self->zone, &self->root);
    if (ret == MSGPACK_UNPACK_EXTRA_BYTES) {
        rc = failure_set(FAILURE_INVALID, "%zu trailing bytes after the message", len - offset);
        goto out;
    }
    if (ret != MSGPACK_UNPACK_SUCCESS) {
        rc = failure_set(FAILURE_INVALID, ret == MSGPACK_UNPACK_CONTINUE
                                              ? "truncated msgpack message"
                                              : "malformed msgpack message");
        goto out;
    }
    const msgpack_object *root = &self->root;
    if (root->type != MSGPACK_OBJECT_MAP) {
        rc = failure_set(FAILURE_INVALID, "a message must be a msgpack map");
        goto out;
    }
    if (as_type >= 0) {
        self->spec = &messages_table[as_type];
    } else {
        const msgpack_object *version = wire_map_get(root, FIELD_V);
        if (version == NULL || version->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
            rc = failure_set(FAILURE_INVALID, "missing or non-integer protocol version 'v'");
            goto out;
        }
        if (version->via.u64 != WIRE_VERSION) {
            rc = failure_set(FAILURE_INVALID, "unsupported protocol version %llu (this side speaks %d)",
                             (unsigned long long)version->via.u64, WIRE_VERSION);
            goto out;
        }
        const msgpack_object *type = wire_map_get(root, FIELD_TYPE);
        if (type == NULL || !s_has_type(type, WIRE_STR)) {
            rc = failure_set(FAILURE_INVALID, "missing or non-string message 'type'");
            goto out;
        }
        const char *type_name =
            type->type == MSGPACK_OBJECT_STR ? type->via.str.ptr : type->via.bin.ptr;
        self->spec = messages_find(type_name, s_str_len(type));
        if (self->spec == NULL) {
            char name[64];
            wire_obj_str(type, name, sizeof name, "");
            rc = failure_set(FAILURE_INVALID, "unknown message type '%s'", name);
            goto out;
        }
    }
    self->values = calloc(self->spec->nfields ? self->spec->nfields : 1, sizeof *self->values);
    if (self->values == NULL) {
        rc = failure_set(FAILURE_MEMORY, "out of memory");
        goto out;
    }
    size_t string_bytes = 0;
    for (size_t i = 0; i < self->spec->nfields && rc == 0; i++) {
        const wire_field_t *field = &self->spec->fields[i];
        rc = s_take_field(self->spec, field, wire_map_get(root, field->field), &self->values[i],
                          &string_bytes);
    }
    if (rc == 0)
        rc = s_copy_strings(self, string_bytes);
out:
    if (rc != 0) {
        wire_msg_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

int wire_decode(const void *data, size_t len, wire_msg_t **out)
{
    return s_decode(data, len, -1, out);
}

int wire_decode_as(const void *data, size_t len, msg_type_t as_type, wire_msg_t **out)
{
    return s_decode(data, len, as_type, out);
}

void wire_msg_destroy(wire_msg_t **self_p)
{
    wire_msg_t *self = *self_p;
    if (self == NULL)
        return;
    if (self->values != NULL) {
        for (size_t i = 0; i < self->spec->nfields; i++)
            free(self->values[i].raw);
        free(self->values);
    }
    free(self->strings);
    if (self->zone_ready)
        msgpack_zone_destroy(&self->zone);
    free(self); /* and the buffer that follows it */
    *self_p = NULL;
}

msg_type_t wire_msg_type(const wire_msg_t *self)
{
    return self->spec->type;
}

/* The value of a present field, or NULL. */
static const wire_value_t *s_value(const wire_msg_t *self, field_t field)
{
    for (size_t i = 0; i < self->spec->nfields; i++)
        if (self->spec->fields[i].field == field)
            return self->values[i].obj ? &self->values[i] : NULL;
    return NULL;
}

bool wire_msg_has(const wire_msg_t *self, field_t field)
{
    return s_value(self, field) != NULL;
}

const char *wire_msg_str(const wire_msg_t *self, field_t field, const char *fallback)
{
    const wire_value_t *value = s_value(self, field);
    return value && value->str ? value->str : fallback;
}

int64_t wire_msg_int(const wire_msg_t *self, field_t field, int64_t fallback)
{
    const wire_value_t *value = s_value(self, field);
    if (value == NULL)
        return fallback;
    switch (value->obj->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return value->obj->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)value->obj->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return value->obj->via.i64;
    case MSGPACK_OBJECT_BOOLEAN: return value->obj->via.boolean;
    default: return fallback;
    }
}

bool wire_msg_bool(const wire_msg_t *self, field_t field, bool fallback)
{
    const wire_value_t *value = s_value(self, field);
    if (value == NULL || value->obj->type != MSGPACK_OBJECT_BOOLEAN)
        return fallback;
    return value->obj->via.boolean;
}

double wire_msg_float(const wire_msg_t *self, field_t field, double fallback)
{
    const wire_value_t *value = s_value(self, field);
    if (value == NULL)
        return fallback;
    switch (value->obj->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: return value->obj->via.f64;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return (double)value->obj->via.u64;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return (double)value->obj->via.i64;
    default: return fallback;
    }
}

const void *wire_msg_raw(const wire_msg_t *self, field_t field, size_t *len)
{
    *len = 0;
    for (size_t i = 0; i < self->spec->nfields; i++) {
        if (self->spec->fields[i].field != field)
            continue;
        wire_type_t type = self->spec->fields[i].type;
        wire_value_t *value = &self->values[i];
        if (value->obj == NULL || (type != WIRE_MAP && type != WIRE_ARRAY && type != WIRE_ANY))
            return NULL;
        /* Re-encoded on first use: most readers never ask for most raw fields. */
        if (value->raw == NULL && s_encode_object(value->obj, &value->raw, &value->raw_len) != 0)
            return NULL;
        *len = value->raw_len;
        return value->raw;
    }
    return NULL;
}

const msgpack_object *wire_msg_object(const wire_msg_t *self, field_t field)
{
    const wire_value_t *value = s_value(self, field);
    return value ? value->obj : NULL;
}

/* ---- encoding ---- */

typedef struct {
    size_t header_offset; /* where the 32-bit count lives */
    uint32_t count;
} wire_frame_t;

struct wire_writer_t {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    wire_frame_t stack[WIRE_MAX_DEPTH];
    int depth; /* number of open containers */
    /* Containers opened past WIRE_MAX_DEPTH: written as nil, and everything inside them
     * dropped, until they are closed (see wire_writer_too_deep). */
    int skipped;
    bool too_deep;
};

wire_writer_t *wire_writer_new(void)
{
    wire_writer_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    msgpack_sbuffer_init(&self->sbuf);
    msgpack_packer_init(&self->pk, &self->sbuf, msgpack_sbuffer_write);
    return self;
}

void wire_writer_destroy(wire_writer_t **self_p)
{
    wire_writer_t *self = *self_p;
    if (self == NULL)
        return;
    msgpack_sbuffer_destroy(&self->sbuf);
    free(self);
    *self_p = NULL;
}

/* Containers are written as map32/array32 with a placeholder count that wire_close()
 * patches: valid msgpack, and no need to know the count up front. */
static void s_open(wire_writer_t *self, unsigned char marker)
{
    if (self->depth > 0)
        self->stack[self->depth - 1].count++;
    if (self->depth == WIRE_MAX_DEPTH) {
        /* Too deep for any receiver (and for our stack): a nil keeps the message valid. */
        msgpack_pack_nil(&self->pk);
        self->skipped = 1;
        self->too_deep = true;
        return;
    }
    unsigned char header[5] = {marker, 0, 0, 0, 0};
    self->stack[self->depth].header_offset = self->sbuf.size + 1;
    self->stack[self->depth].count = 0;
    self->depth++;
    msgpack_sbuffer_write(&self->sbuf, (const char *)header, sizeof header);
}

/* Makes room for `more` bytes at the end of the buffer and returns where they go, or NULL
 * when out of memory (the bytes are then dropped, as msgpack_sbuffer_write does). Strings
 * are written through here in one step rather than a packer call per header and body. */
static char *s_reserve(wire_writer_t *self, size_t more)
{
    msgpack_sbuffer *sbuf = &self->sbuf;
    if (sbuf->alloc - sbuf->size < more) {
        size_t alloc = sbuf->alloc ? sbuf->alloc * 2 : MSGPACK_SBUFFER_INIT_SIZE;
        while (alloc - sbuf->size < more)
            alloc *= 2;
        char *grown = realloc(sbuf->data, alloc);
        if (grown == NULL)
            return NULL;
        sbuf->data = grown;
        sbuf->alloc = alloc;
    }
    return sbuf->data + sbuf->size;
}

/* The largest msgpack string header. */
#define STR_HEADER_MAX 5

/* Writes a msgpack string (the same encoding as msgpack_pack_str + _str_body) at `at`;
 * returns the bytes written. */
static size_t s_write_str(char *at, const char *value, size_t len)
{
    unsigned char *header = (unsigned char *)at;
    size_t header_len;
    if (len < 32) {
        header[0] = (unsigned char)(0xa0 | len);
        header_len = 1;
    } else if (len < 256) {
        header[0] = 0xd9;
        header[1] = (unsigned char)len;
        header_len = 2;
    } else if (len < 65536) {
        header[0] = 0xda;
        header[1] = (unsigned char)(len >> 8);
        header[2] = (unsigned char)len;
        header_len = 3;
    } else {
        header[0] = 0xdb;
        header[1] = (unsigned char)(len >> 24);
        header[2] = (unsigned char)(len >> 16);
        header[3] = (unsigned char)(len >> 8);
        header[4] = (unsigned char)len;
        header_len = 5;
    }
    if (len > 0)
        memcpy(at + header_len, value, len);
    return header_len + len;
}

/* Writes a map key (nothing when key is NULL, i.e. inside an array) followed by a string
 * value (nothing when value is NULL), both known to be UTF-8. */
static void s_key_str_utf8(wire_writer_t *self, const char *key, size_t key_len,
                           const char *value, size_t len)
{
    size_t need = (key ? STR_HEADER_MAX + key_len : 0) + (value ? STR_HEADER_MAX + len : 0);
    char *at = s_reserve(self, need);
    if (at == NULL)
        return;
    size_t written = 0;
    if (key != NULL)
        written += s_write_str(at, key, key_len);
    if (value != NULL)
        written += s_write_str(at + written, value, len);
    self->sbuf.size += written;
}

/* A copy of `*text` (`*len` bytes) with U+FFFD for what is not UTF-8, or NULL when it is
 * UTF-8 already; *text and *len then name the copy (or "" when memory ran out). */
static char *s_repaired(const char **text, size_t *len)
{
    if (*text == NULL || utf8_valid(*text, *len))
        return NULL;
    char *copy = utf8_repair(*text, *len, len);
    *text = copy ? copy : "";
    if (copy == NULL)
        *len = 0;
    return copy;
}

/* Writes a map key (nothing when key is NULL, i.e. inside an array) followed by a string
 * value (nothing when value is NULL). A msgpack str is text and readers refuse one that is
 * not UTF-8 (wire_decode does), so bytes that are not become U+FFFD: what this side sends
 * is always read. */
static void s_key_str(wire_writer_t *self, const char *key, const char *value, size_t len)
{
    size_t key_len = key ? strlen(key) : 0;
    char *key_copy = s_repaired(&key, &key_len);
    char *value_copy = s_repaired(&value, &len);
    s_key_str_utf8(self, key, key_len, value, len);
    free(key_copy);
    free(value_copy);
}

static void s_key(wire_writer_t *self, const char *key)
{
    s_key_str(self, key, NULL, 0);
}

static void s_restart(wire_writer_t *self)
{
    msgpack_sbuffer_clear(&self->sbuf);
    self->depth = 0;
    self->skipped = 0;
    self->too_deep = false;
}

void wire_writer_start_map(wire_writer_t *self)
{
    s_restart(self);
    s_open(self, 0xdf);
}

void wire_writer_start_array(wire_writer_t *self)
{
    s_restart(self);
    s_open(self, 0xdd);
}

bool wire_writer_too_deep(const wire_writer_t *self)
{
    return self->too_deep;
}

void wire_writer_start(wire_writer_t *self, msg_type_t type)
{
    wire_writer_start_map(self);
    wire_put_int(self, FIELD_V, WIRE_VERSION);
    wire_put_str(self, FIELD_TYPE, msg_type_name(type));
}

/* Counts one entry in the innermost container and writes its key (for maps). */
static void s_entry(wire_writer_t *self, const char *key)
{
    self->stack[self->depth - 1].count++;
    s_key(self, key);
}

void wire_put_key_strn(wire_writer_t *self, const char *key, const char *value, size_t len)
{
    if (value == NULL || self->skipped > 0)
        return;
    self->stack[self->depth - 1].count++;
    s_key_str(self, key, value, len);
}

void wire_put_key_str(wire_writer_t *self, const char *key, const char *value)
{
    if (value != NULL)
        wire_put_key_strn(self, key, value, strlen(value));
}

void wire_put_key_int(wire_writer_t *self, const char *key, int64_t value)
{
    if (self->skipped > 0)
        return;
    s_entry(self, key);
    msgpack_pack_int64(&self->pk, value);
}

void wire_put_key_bool(wire_writer_t *self, const char *key, bool value)
{
    if (self->skipped > 0)
        return;
    s_entry(self, key);
    if (value)
        msgpack_pack_true(&self->pk);
    else
        msgpack_pack_false(&self->pk);
}

void wire_put_key_float(wire_writer_t *self, const char *key, double value)
{
    if (self->skipped > 0)
        return;
    s_entry(self, key);
    msgpack_pack_double(&self->pk, value);
}

void wire_put_key_raw(wire_writer_t *self, const char *key, const void *raw, size_t len)
{
    if (raw == NULL || len == 0 || self->skipped > 0)
        return;
    s_entry(self, key);
    msgpack_sbuffer_write(&self->sbuf, raw, len);
}

void wire_open_map_key(wire_writer_t *self, const char *key)
{
    if (self->skipped > 0) {
        self->skipped++;
        return;
    }
    s_key(self, key);
    s_open(self, 0xdf);
}

void wire_open_array_key(wire_writer_t *self, const char *key)
{
    if (self->skipped > 0) {
        self->skipped++;
        return;
    }
    s_key(self, key);
    s_open(self, 0xdd);
}

/* The protocol's keys, by name. */
void wire_put_str(wire_writer_t *self, field_t field, const char *value)
{
    wire_put_key_str(self, field_name(field), value);
}

void wire_put_int(wire_writer_t *self, field_t field, int64_t value)
{
    wire_put_key_int(self, field_name(field), value);
}

void wire_put_bool(wire_writer_t *self, field_t field, bool value)
{
    wire_put_key_bool(self, field_name(field), value);
}

void wire_put_float(wire_writer_t *self, field_t field, double value)
{
    wire_put_key_float(self, field_name(field), value);
}

void wire_put_raw(wire_writer_t *self, field_t field, const void *raw, size_t len)
{
    wire_put_key_raw(self, field_name(field), raw, len);
}

void wire_open_map(wire_writer_t *self, field_t field)
{
    wire_open_map_key(self, field_name(field));
}

void wire_open_array(wire_writer_t *self, field_t field)
{
    wire_open_array_key(self, field_name(field));
}

void wire_close(wire_writer_t *self)
{
    if (self->skipped > 0) {
        self->skipped--;
        return;
    }
    if (self->depth == 0)
        return;
    wire_frame_t *frame = &self->stack[--self->depth];
    unsigned char *at = (unsigned char *)self->sbuf.data + frame->header_offset;
    at[0] = (unsigned char)(frame->count >> 24);
    at[1] = (unsigned char)(frame->count >> 16);
    at[2] = (unsigned char)(frame->count >> 8);
    at[3] = (unsigned char)frame->count;
}

void wire_elem_str(wire_writer_t *self, const char *value)
{
    wire_put_key_str(self, NULL, value ? value : "");
}

void wire_elem_raw(wire_writer_t *self, const void *raw, size_t len)
{
    wire_put_key_raw(self, NULL, raw, len);
}

size_t wire_writer_size(const wire_writer_t *self)
{
    return self->sbuf.size;
}

const void *wire_writer_data(wire_writer_t *self, size_t *len)
{
    self->skipped = 0;
    while (self->depth > 0)
        wire_close(self);
    *len = self->sbuf.size;
    return self->sbuf.data;
}
