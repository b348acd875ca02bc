/* utf8: checking, cutting and repairing UTF-8 text (see utf8.h). */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* The replacement character U+FFFD in UTF-8. */
static const char s_replacement[] = "\xEF\xBF\xBD";

size_t utf8_char(const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t need;
    unsigned char low = 0x80, high = 0xBF; /* the allowed range of the second byte */
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) {
        need = 2;
    } else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        need = 3;
        if (p[0] == 0xE0)
            low = 0xA0; /* overlong below U+0800 */
        else if (p[0] == 0xED)
            high = 0x9F; /* surrogates U+D800..U+DFFF */
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        need = 4;
        if (p[0] == 0xF0)
            low = 0x90; /* overlong below U+10000 */
        else if (p[0] == 0xF4)
            high = 0x8F; /* above U+10FFFF */
    } else {
        return 0; /* a continuation byte, C0/C1 (overlong) or F5..FF */
    }
    if (len < need || p[1] < low || p[1] > high)
        return 0;
    for (size_t i = 2; i < need; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return need;
}

size_t utf8_cut(const char *text, size_t max)
{
    size_t len = strlen(text), used = 0;
    while (used < len) {
        size_t step = utf8_char(text + used, len - used);
        if (step == 0)
            step = 1;
        if (used + step > max)
            break;
        used += step;
    }
    return used;
}

bool utf8_valid(const char *text, size_t len)
{
    for (size_t at = 0; at < len;) {
        if ((unsigned char)text[at] < 0x80) { /* ASCII, the common case, byte by byte */
            at++;
            continue;
        }
        size_t step = utf8_char(text + at, len - at);
        if (step == 0)
            return false;
        at += step;
    }
    return true;
}

char *utf8_repair(const char *text, size_t len, size_t *out_len)
{
    char *out = malloc(len * 3 + 1); /* at worst every byte becomes 3 */
    if (out == NULL)
        return NULL;
    size_t used = 0;
    for (size_t at = 0; at < len;) {
        size_t step = utf8_char(text + at, len - at);
        if (step == 0) {
            memcpy(out + used, s_replacement, 3);
            used += 3;
            at += 1;
        } else {
            memcpy(out + used, text + at, step);
            used += step;
            at += step;
        }
    }
    out[used] = '\0';
    *out_len = used;
    return out;
}

void utf8_copy(char *dst, size_t size, const char *src)
{
    size_t len = utf8_cut(src, size - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}
