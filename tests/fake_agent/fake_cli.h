/* fake_cli: what the stand-ins for the Codex and Gemini CLIs (fake_codex.c, fake_gemini.c)
 * share: reading the prompt from stdin, logging the invocation, knobs from the environment,
 * printing JSON lines, and a session store of one file per session. */
#ifndef FAKE_CLI_H
#define FAKE_CLI_H

#include <jansson.h>
#include <stdbool.h>

/* All of stdin (not a terminal) as a malloc'd string; "" when there is none. */
char *fake_cli_read_stdin(void);

/* Appends {argv, cwd, stdin, env:{PANOPTICON_AGENT_ID, CLOISTER_REVIEWER}} as one JSON line
 * to the file named by the environment variable `log_env`, if set. */
void fake_cli_log(const char *log_env, int argc, char **argv, const char *stdin_text);

/* An integer knob (>= 0) or `fallback`. */
int fake_cli_env_int(const char *name, int fallback);
/* A text knob or `fallback`. */
const char *fake_cli_env(const char *name, const char *fallback);

/* Prints `event` (stolen) as one compact line on stdout and flushes it. */
void fake_cli_emit(json_t *event);

void fake_cli_sleep_ms(int ms);
void fake_cli_new_uuid(char out[40]);
bool fake_cli_is_uuid(const char *text);

/* The session file <dir>/<prefix><id>.jsonl into buf; creates dir. False if too long. */
bool fake_cli_session_path(char *buf, size_t size, const char *dir, const char *prefix,
                           const char *id);
/* Appends one JSON line {"prompt": prompt} to the session file. */
void fake_cli_session_append(const char *path, const char *prompt);
/* Copies the session file `from` to `to`. Returns false if it cannot. */
bool fake_cli_session_copy(const char *from, const char *to);
/* Lines in a file; -1 when it does not exist. */
int fake_cli_count_lines(const char *path);

#endif
