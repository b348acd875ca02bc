/* test_merge_verify: conflict-marker counting, including marker-like lines that are
 * legitimately part of a file (an underlined heading on one side). */
#include "check.h"
#include "merge_verify.h"

#include <string.h>

static merge_markers_count_t s_count(const char *text)
{
    return merge_verify_count(text, strlen(text));
}

int main(void)
{
    const merge_markers_count_t none = {0, 0, 0, 0};
    const char *conflicted = "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> feature\nz\n";
    merge_markers_count_t c = s_count(conflicted);
    CHECK_INT(c.start, 1);
    CHECK_INT(c.separator, 1);
    CHECK_INT(c.end, 1);
    CHECK(merge_verify_markers_remain(c, none, none));

    /* diff3 style, CRLF line ends, marker at end of file without newline. */
    c = s_count("<<<<<<< ours\r\nx\r\n||||||| base\r\ny\r\n=======\r\nz\r\n>>>>>>>");
    CHECK_INT(c.start, 1);
    CHECK_INT(c.base, 1);
    CHECK_INT(c.separator, 1);
    CHECK_INT(c.end, 1);

    /* Only the separator left behind still counts. */
    CHECK(merge_verify_markers_remain(s_count("ours\n=======\ntheirs\n"), none, none));

    /* A heading underlined with exactly seven '=' that one side already had is fine; one
     * more than either side had is not. */
    merge_markers_count_t side = s_count("Title\n=======\ntext\n");
    CHECK(!merge_verify_markers_remain(s_count("Title\n=======\nmerged text\n"), side, none));
    CHECK(merge_verify_markers_remain(s_count("Title\n=======\na\n=======\nb\n"), side, none));

    /* Look-alikes are not markers. */
    c = s_count("<<<<<<<<<< long\n========\n>>>>>>>x\n <<<<<<< indented\n");
    CHECK_INT(c.start + c.base + c.separator + c.end, 0);
    CHECK(!merge_verify_markers_remain(s_count("clean\nfile\n"), none, none));
    return check_exit_code("test_merge_verify");
}
