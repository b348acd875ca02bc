/* merge_verify: conflict-marker counting (see merge_verify.h). */
#include "merge_verify.h"

#include <string.h>

/* True if the line (without its '\n') is `marker` (7 characters) followed by nothing, a
 * space or a carriage return. */
static bool s_line_is(const char *line, size_t len, const char *marker, bool exact)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len < 7 || memcmp(line, marker, 7) != 0)
        return false;
    if (len == 7)
        return true;
    return !exact && line[7] == ' ';
}

merge_markers_count_t merge_verify_count(const char *text, size_t len)
{
    merge_markers_count_t count = {0, 0, 0, 0};
    size_t pos = 0;
    while (pos < len) {
        const char *line = text + pos;
        const char *newline = memchr(line, '\n', len - pos);
        size_t line_len = newline ? (size_t)(newline - line) : len - pos;
        if (s_line_is(line, line_len, "<<<<<<<", false))
            count.start++;
        else if (s_line_is(line, line_len, "|||||||", false))
            count.base++;
        else if (s_line_is(line, line_len, "=======", true))
            count.separator++;
        else if (s_line_is(line, line_len, ">>>>>>>", false))
            count.end++;
        pos += line_len + 1;
    }
    return count;
}

static size_t s_max(size_t a, size_t b)
{
    return a > b ? a : b;
}

bool merge_verify_markers_remain(merge_markers_count_t resolved, merge_markers_count_t ours,
                                 merge_markers_count_t theirs)
{
    return resolved.start > s_max(ours.start, theirs.start) ||
           resolved.base > s_max(ours.base, theirs.base) ||
           resolved.separator > s_max(ours.separator, theirs.separator) ||
           resolved.end > s_max(ours.end, theirs.end);
}
