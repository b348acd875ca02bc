/* review_checks: the review's checks and coverage figures (see review_checks.h). */
#include "review_checks.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAMED_PREFIX "review.checks."

static const char *s_default_severity(const char *kind)
{
    return strcmp(kind, "lint") == 0 || strcmp(kind, "coverage") == 0 ? "warning" : "error";
}

size_t review_checks_list(const config_t *config, review_check_t *out)
{
    size_t n = 0;
    size_t listed = config_array_len(config, "review", "checks");
    for (size_t i = 0; i < listed && n < REVIEW_CHECKS_MAX; i++) {
        const char *command = config_array_string(config, "review", "checks", i);
        if (command == NULL || command[0] == '\0')
            continue;
        review_check_t *check = &out[n++];
        *check = (review_check_t){.command = command, .kind = "custom", .severity = "error",
                                  .threshold = -1};
        snprintf(check->name, sizeof check->name, "%s", command);
    }
    for (size_t t = 0; t < config_table_count(config) && n < REVIEW_CHECKS_MAX; t++) {
        const char *table = config_table_name(config, t);
        if (strncmp(table, NAMED_PREFIX, strlen(NAMED_PREFIX)) != 0)
            continue;
        const char *command = config_string(config, table, "command", NULL);
        if (command == NULL || command[0] == '\0')
            continue;
        review_check_t *check = &out[n++];
        const char *kind = config_string(config, table, "kind", "custom");
        *check = (review_check_t){
            .command = command,
            .kind = kind,
            .severity = config_string(config, table, "severity", s_default_severity(kind)),
            .timeout_s = config_int(config, table, "timeout_s", 0),
            .threshold = config_has(config, table, "threshold")
                             ? config_double(config, table, "threshold", -1)
                             : -1,
            .report = config_string(config, table, "report", NULL),
        };
        snprintf(check->name, sizeof check->name, "%s", table + strlen(NAMED_PREFIX));
    }
    return n;
}

/* True when `path` matches one of the globs of [review] `key` (`*` crosses '/'). */
static bool s_matches(const config_t *config, const char *key, const char *path)
{
    size_t n = config_array_len(config, "review", key);
    for (size_t i = 0; i < n; i++) {
        const char *glob = config_array_string(config, "review", key, i);
        if (glob != NULL && glob[0] != '\0' && fnmatch(glob, path, 0) == 0)
            return true;
    }
    return false;
}

bool review_checks_e2e(const config_t *config, char *const *paths, size_t n, review_e2e_t *out)
{
    *out = (review_e2e_t){.severity = config_string(config, "review", "e2e_severity", "warning")};
    if (config_array_len(config, "review", "user_facing_paths") == 0 ||
        config_array_len(config, "review", "e2e_test_paths") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s_matches(config, "e2e_test_paths", paths[i])) {
            out->e2e++;
        } else if (s_matches(config, "user_facing_paths", paths[i])) {
            if (out->user_facing++ == 0)
                out->first = paths[i];
        }
    }
    return out->user_facing > 0 && out->e2e == 0;
}

/* The number right before a '%' at or after `from` on the same line, or -1. */
static double s_percent_after(const char *from, const char *line_end)
{
    const char *percent = memchr(from, '%', (size_t)(line_end - from));
    if (percent == NULL)
        return -1;
    const char *start = percent;
    while (start > from && (start[-1] == '.' || (start[-1] >= '0' && start[-1] <= '9')))
        start--;
    return start < percent ? strtod(start, NULL) : -1;
}

/* The coverage one line states, or -1: go's "coverage: 85.2% of statements", lcov's
 * "lines......: 85.2% (123 of 144 lines)", pytest-cov's "TOTAL  144  21  85%", or
 * cobertura's line-rate="0.852". */
static double s_line_coverage(const char *line, const char *end)
{
    size_t len = (size_t)(end - line);
    const char *at;
    char copy[512];
    snprintf(copy, sizeof copy, "%.*s", (int)(len < sizeof copy ? len : sizeof copy - 1), line);
    if ((at = strstr(copy, "coverage: ")) != NULL)
        return s_percent_after(at, copy + strlen(copy));
    if (strncmp(copy, "lines", 5) == 0 && (at = strstr(copy, ": ")) != NULL)
        return s_percent_after(at, copy + strlen(copy));
    if (strncmp(copy, "TOTAL", 5) == 0) {
        const char *last = strrchr(copy, ' ');
        return last != NULL ? s_percent_after(last, copy + strlen(copy)) : -1;
    }
    if ((at = strstr(copy, "line-rate=\"")) != NULL)
        return strtod(at + strlen("line-rate=\""), NULL) * 100.0;
    return -1;
}

double review_coverage_percent(const char *output)
{
    double found = -1;
    for (const char *line = output; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        if (end == NULL)
            end = line + strlen(line);
        while (line < end && (*line == ' ' || *line == '\t'))
            line++;
        double figure = s_line_coverage(line, end);
        if (figure >= 0)
            found = figure;
        line = *end ? end + 1 : NULL;
    }
    return found;
}
