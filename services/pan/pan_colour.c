/* pan_colour: colour for a person at a terminal, never for a pipe or a file (see pan.h).
 *
 * Whether a stream gets colour is decided once per stream: it must be a terminal, and
 * NO_COLOR (https://no-color.org: set to anything but "") and TERM=dumb turn it off. */
#include "pan.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const s_escapes[] = {
    [PAN_COLOUR_GOOD] = "\033[32m",
    [PAN_COLOUR_BAD] = "\033[31m",
    [PAN_COLOUR_WAIT] = "\033[33m",
    [PAN_COLOUR_DIM] = "\033[2m",
};

/* -1: not decided yet; 0 or 1 after. Index 0: stdout, 1: stderr. */
static int s_on[2] = {-1, -1};

bool pan_colour_on(FILE *out)
{
    int index = out == stderr ? 1 : 0;
    if (s_on[index] < 0) {
        const char *no_colour = getenv("NO_COLOR");
        const char *term = getenv("TERM");
        s_on[index] = isatty(fileno(out)) && (no_colour == NULL || no_colour[0] == '\0') &&
                      (term == NULL || strcmp(term, "dumb") != 0);
    }
    return s_on[index] == 1;
}

const char *pan_colour(FILE *out, pan_colour_t colour)
{
    return pan_colour_on(out) ? s_escapes[colour] : "";
}

const char *pan_colour_end(FILE *out)
{
    return pan_colour_on(out) ? "\033[0m" : "";
}

pan_colour_t pan_colour_of_state(const char *state)
{
    static const char *const good[] = {"done", "passed", "merged", "open", "ok", NULL};
    static const char *const bad[] = {"failed", "dead", "blocked", "error", NULL};
    for (size_t i = 0; good[i] != NULL; i++)
        if (strcmp(state, good[i]) == 0)
            return PAN_COLOUR_GOOD;
    for (size_t i = 0; bad[i] != NULL; i++)
        if (strcmp(state, bad[i]) == 0)
            return PAN_COLOUR_BAD;
    return strcmp(state, "cancelled") == 0 ? PAN_COLOUR_DIM : PAN_COLOUR_WAIT;
}

const char *pan_check_mark(void)
{
    return pan_colour_on(stdout) ? "\033[32m✓\033[0m" : "✓";
}
