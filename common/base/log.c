/* log: stderr diagnostics (see log.h). */
#include "log.h"

#include "clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *s_program = "cloister";
static log_level_t s_level = LOG_LEVEL_INFO;

void log_init(const char *program, log_level_t level)
{
    const char *slash = strrchr(program, '/');
    s_program = slash ? slash + 1 : program;
    s_level = level;
    const char *env = getenv("CLOISTER_LOG");
    if (env == NULL)
        return;
    if (strcmp(env, "debug") == 0)
        s_level = LOG_LEVEL_DEBUG;
    else if (strcmp(env, "info") == 0)
        s_level = LOG_LEVEL_INFO;
    else if (strcmp(env, "warn") == 0)
        s_level = LOG_LEVEL_WARN;
    else if (strcmp(env, "error") == 0)
        s_level = LOG_LEVEL_ERROR;
}

__attribute__((format(printf, 3, 0))) static void s_log(log_level_t level, const char *tag,
                                                       const char *fmt, va_list args)
{
    if (level < s_level)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct tm tm;
    gmtime_r(&now.tv_sec, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "%s.%03ld %s %s: ", stamp, now.tv_nsec / 1000000, s_program, tag);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, args);
    /* One fputs per line so concurrent processes sharing stderr do not interleave words. */
    size_t len = strlen(line);
    if (len + 1 < sizeof line) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, stderr);
}

void log_debug(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    s_log(LOG_LEVEL_DEBUG, "debug", fmt, args);
    va_end(args);
}

void log_info(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    s_log(LOG_LEVEL_INFO, "info", fmt, args);
    va_end(args);
}

void log_warn(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    s_log(LOG_LEVEL_WARN, "warn", fmt, args);
    va_end(args);
}

void log_error(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    s_log(LOG_LEVEL_ERROR, "error", fmt, args);
    va_end(args);
}

void log_warn_limited(log_limit_t *limit, const char *fmt, ...)
{
    int64_t now = clock_now_ms();
    if (limit->last_ms != 0 && now - limit->last_ms < limit->every_ms) {
        limit->skipped++;
        return;
    }
    char line[1600];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    if (limit->skipped > 0)
        log_warn("%s (and %lld more like it in the last %lld s)", line, (long long)limit->skipped,
                 (long long)((now - limit->last_ms) / 1000));
    else
        log_warn("%s", line);
    limit->last_ms = now;
    limit->skipped = 0;
}
