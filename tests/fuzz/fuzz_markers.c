/* fuzz_markers: feeds arbitrary text to the agents' result-marker parser (markers.h), as
 * an anchored block and as free-form markers. Besides "no crash, no leak, no undefined
 * behaviour" it checks that every key found answers markers_get() and that lists stay
 * within MARKERS_MAX_ITEMS. */
#include "failure.h"
#include "markers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_walk(markers_t *markers)
{
    if (markers_count(markers) > MARKERS_MAX_KEYS)
        abort();
    for (size_t i = 0; i < markers_count(markers); i++) {
        const char *key = markers_key_at(markers, i);
        if (key == NULL || markers_get(markers, key) == NULL)
            abort();
        size_t n = 0;
        const char *const *items = markers_list(markers, key, &n);
        if (n > MARKERS_MAX_ITEMS || (n > 0 && items == NULL))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static const char *const required[] = {"FILES", NULL};
    markers_t *markers = NULL;
    if (markers_parse(&markers, text, "MERGE_RESULT", required) != FAILURE_MEMORY) {
        s_walk(markers);
        static const char *const allowed[] = {"SUCCESS", "FAILURE", NULL};
        (void)markers_expect(markers, "MERGE_RESULT", allowed);
        if (markers_missing(markers) == NULL)
            abort();
    }
    markers_destroy(&markers);
    if (markers_parse_all(&markers, text) == 0)
        s_walk(markers);
    markers_destroy(&markers);
    free(text);
    return 0;
}
