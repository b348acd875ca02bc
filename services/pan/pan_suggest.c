/* pan_suggest: "did you mean" for a misspelt command, subcommand or option (see
 * pan_suggest and pan_usage_unknown in pan.h).
 *
 * A candidate is near when the word is a start of it ("--spec" for "--specialist"), or
 * when few edits turn one into the other: the optimal string alignment distance, where
 * swapping two neighbours ("stauts") is one edit, at most 1 for a word of up to four
 * letters and 2 beyond. */
#include "pan.h"

#include <stdio.h>
#include <string.h>

/* Longest word compared; longer ones are never near anything. */
#define WORD_MAX 64
/* The longest option name harvested from a usage text. */
#define OPTION_MAX 32
/* Options harvested from one usage text. */
#define OPTIONS_MAX 48

static size_t s_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* The optimal string alignment distance of a and b (both at most WORD_MAX long). */
static size_t s_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    size_t d[WORD_MAX + 1][WORD_MAX + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = s_min(s_min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = s_min(d[i][j], d[i - 2][j - 2] + 1);
        }
    }
    return d[n][m];
}

const char *pan_suggest(const char *word, const char *const *candidates)
{
    size_t len = strlen(word);
    if (len == 0 || len > WORD_MAX || strcmp(word, "--") == 0)
        return NULL;
    size_t allowed = len <= 4 ? 1 : 2;
    const char *best = NULL;
    size_t best_distance = allowed + 1;
    for (const char *const *candidate = candidates; *candidate != NULL; candidate++) {
        if (strlen(*candidate) > WORD_MAX)
            continue;
        size_t distance = strncmp(*candidate, word, len) == 0 ? 0 : s_distance(word, *candidate);
        if (distance < best_distance) {
            best = *candidate;
            best_distance = distance;
        }
    }
    return best;
}

int pan_usage_unknown(const char *usage, const char *arg)
{
    if (arg[0] != '-')
        return pan_usage(usage, "unexpected argument '%s'", arg);
    /* The options are the usage's own words that start with "--". */
    char names[OPTIONS_MAX][OPTION_MAX + 1];
    const char *candidates[OPTIONS_MAX + 1];
    size_t n = 0;
    for (const char *at = strstr(usage, "--"); at != NULL && n < OPTIONS_MAX;
         at = strstr(at + 2, "--")) {
        size_t len = 2 + strspn(at + 2, "abcdefghijklmnopqrstuvwxyz-");
        if (len > 2 && len <= OPTION_MAX && (at == usage || at[-1] != '-')) {
            snprintf(names[n], sizeof names[n], "%.*s", (int)len, at);
            candidates[n] = names[n];
            n++;
        }
    }
    candidates[n] = NULL;
    /* "--state=x" is compared by its name. */
    char name[WORD_MAX + 1];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
    const char *near = pan_suggest(name, candidates);
    if (near != NULL)
        return pan_usage(usage, "unknown option '%s'; did you mean %s?", arg, near);
    return pan_usage(usage, "unknown option '%s'", arg);
}

int pan_usage_unknown_command(const char *usage, const char *what, const char *word,
                              const char *const *commands)
{
    const char *near = pan_suggest(word, commands);
    if (near != NULL)
        return pan_usage(usage, "unknown %scommand '%s'; did you mean '%s'?", what, word, near);
    return pan_usage(usage, "unknown %scommand '%s'", what, word);
}
