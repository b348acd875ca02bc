/* log: one-line diagnostics on stderr, prefixed with the time and the program's name.
 * Services log what they refuse and why; nothing here exits or aborts. */
#ifndef CLOISTER_LOG_H
#define CLOISTER_LOG_H

#include <stdint.h>

typedef enum { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR } log_level_t;

/* Sets the name printed on every line (not copied: pass a string that lives forever, such
 * as argv[0] or a literal) and the lowest level printed. CLOISTER_LOG=debug|info|warn|error
 * in the environment overrides `level`. */
void log_init(const char *program, log_level_t level);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A warning that may repeat many times a second (a full disk, a failing checkpoint) is
 * printed at most once per `every_ms`; the ones in between are only counted, and the next
 * line printed says how many were left out. Zero-initialise with `every_ms` set; one limit
 * per kind of warning, used by one thread. */
typedef struct {
    int64_t every_ms;
    int64_t last_ms;   /* monotonic ms of the last line printed (0: none yet) */
    int64_t skipped;   /* lines left out since then */
} log_limit_t;

void log_warn_limited(log_limit_t *limit, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
