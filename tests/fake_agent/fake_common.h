/* fake_common: the small pieces the three CLI doubles (fake-claude, fake-codex, fake-gemini)
 * share: reading stdin the way each CLI does, the FAKE_*_LOG invocation log, ids, time
 * stamps, files and directories, and the hang of the hang scenarios.
 *
 * Nothing here knows a CLI's contract; each fake decides what to print. */
#ifndef FAKE_COMMON_H
#define FAKE_COMMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* fake_read_stdin(): wait for the first byte as long as it takes. */
#define FAKE_STDIN_WAIT_FOREVER (-1)

/* Reads stdin to EOF. When `first_data_ms` >= 0 and nothing arrives in that time, gives up
 * and sets *timed_out (the real CLIs differ here: claude waits 3 s and warns, gemini waits
 * 500 ms silently, codex waits forever). Returns a malloc'd string (empty when stdin had
 * nothing), or NULL when stdin is a terminal (then it is not read at all). */
char *fake_read_stdin(int first_data_ms, bool *timed_out);

/* Appends {"argv":[...],"cwd":...,"stdin":...|null,"env":{NAME:value|null,...}} as one
 * line to `path` (one write(2), so concurrent runs do not interleave). `env_names` is a
 * NULL-terminated list of variables to record. Does nothing when `path` is NULL or "". */
void fake_log_invocation(const char *path, int argc, char **argv, const char *stdin_text,
                         const char *const *env_names);

/* A random (version 4) UUID, lower case. */
void fake_new_uuid(char out[40]);

/* A version 7 UUID (48-bit Unix milliseconds, then random bits): codex's thread ids. */
void fake_new_uuid_v7(char out[40]);

/* True when `text` is a UUID in the 8-4-4-4-12 form. */
bool fake_is_uuid(const char *text);

/* The non-negative integer in environment variable `name`, or `fallback`. */
int fake_env_int(const char *name, int fallback);

/* getenv(name) when set and not empty, else `fallback`. */
const char *fake_env_or(const char *name, const char *fallback);

/* "2026-11-25T16:20:18.695Z": now, UTC, with milliseconds (what both Node and codex print). */
void fake_timestamp(char out[40]);

void fake_sleep_ms(int ms);

/* Sleeps until killed: the hang scenarios. */
void fake_hang(void) __attribute__((noreturn));

/* mkdir -p (mode 0700, like the CLIs' state directories). */
void fake_mkdirs(const char *path);

/* Copies file `from` to `to`. Returns 0 or -1. */
int fake_copy_file(const char *from, const char *to);

/* Appends `line` (compact JSON) and "\n" to `path`. Returns 0 or -1. Does not take `line`. */
int fake_append_json(const char *path, const json_t *line);

/* Prints `event` as one compact JSON line on stdout and flushes. Takes `event`. */
void fake_print_json(json_t *event);

/* The strings of `said` (a JSON array) joined with "\n". Caller frees. */
char *fake_join_lines(const json_t *said);

/* The whole file at `path`, or NULL. Caller frees. */
char *fake_read_file(const char *path);

#endif
