/* pan: the Cloister command line. This header is shared by main.c and the command
 * modules (cmd_*.c): the settings every command uses, how a control call is made and how
 * its outcome becomes an exit code, and small formatting helpers.
 *
 * Exit codes: 0 success, 1 the broker (or the system) said no, 2 a usage error, 3 the
 * broker did not answer. A command that waits for tasks (pan_wait.h) exits with their
 * verdict's code from the one table in common/bus/verdict.h, which agrees with these. */
#ifndef PAN_H
#define PAN_H

#include "client.h"
#include "config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define PAN_EXIT_OK 0
#define PAN_EXIT_ERROR 1
#define PAN_EXIT_USAGE 2
#define PAN_EXIT_UNREACHABLE 3

typedef struct {
    const char *control_ep; /* flag > env CLOISTER_* > config [broker] > default */
    const char *events_ep;
    const char *in_ep;
    int timeout_ms;   /* deadline of each control request */
    config_t *config; /* loaded once by main; owned by main */
} pan_t;

/* Sends `request` to the broker's control socket. On success returns PAN_EXIT_OK and
 * *data is the reply's `data` as JSON (caller owns; json_null() when absent). Otherwise
 * prints `pan: <reason>` on stderr and returns PAN_EXIT_UNREACHABLE (no answer) or
 * PAN_EXIT_ERROR (the broker refused, or a bad answer), with *data NULL. */
int pan_call(const pan_t *pan, wire_writer_t *request, json_t **data);

/* pan_call() for a listing: also sets *truncated to the reply's `truncated` (the broker
 * cut the listing short to stay under its reply cap). */
int pan_call_listing(const pan_t *pan, wire_writer_t *request, json_t **data, bool *truncated);

/* Asks the broker to resume the specialist `name` (control `resume`): its tasks are
 * dispatched again. *data is the reply's data, {specialist, paused, reason} (caller owns).
 * Returns as pan_call(). */
int pan_resume_specialist(const pan_t *pan, const char *name, json_t **data);

/* Prints `pan: <printf message>` on stderr and returns `code`. */
int pan_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints `pan: <message>` and `usage: <usage>` on stderr; returns PAN_EXIT_USAGE. */
int pan_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The candidate (NULL-terminated list) `word` most likely misspells -- a start of it, or
 * one or two edits away (swapped neighbours count one) -- or NULL when none is near. */
const char *pan_suggest(const char *word, const char *const *candidates);

/* A usage error for an argument no option matched: "unknown option '--stat'; did you mean
 * --state?" (the candidates are the options `usage` names), or for a word that is no
 * option "unexpected argument 'x'". Returns PAN_EXIT_USAGE. */
int pan_usage_unknown(const char *usage, const char *arg);

/* After the broker refused `name` as an unknown specialist: prints "pan: did you mean
 * 'test-agent'?" on stderr when a known specialist (a default, configured or the broker's)
 * is near it; nothing otherwise. */
void pan_suggest_specialist(const pan_t *pan, const char *name);

/* A usage error for a word that is none of `commands` (NULL-terminated): "unknown
 * <what>command 'stauts'; did you mean 'status'?" (`what`: "" or e.g. "task "). Returns
 * PAN_EXIT_USAGE. */
int pan_usage_unknown_command(const char *usage, const char *what, const char *word,
                              const char *const *commands);

/* Matches argv[*i] against the option `name` taking a value, written `name VALUE` or
 * `name=VALUE`. Returns 1 and sets *value (borrowed from argv; *i moves past the value),
 * 0 when argv[*i] is another argument, or -1 when the value is missing. */
int pan_option(int argc, char **argv, int *i, const char *name, const char **value);

/* Prints `value` (may be NULL: a JSON value that could not be built) as indented JSON on
 * stdout followed by a newline. Returns PAN_EXIT_OK, or PAN_EXIT_ERROR after saying on
 * stderr that the JSON could not be written -- never a silent empty output. */
int pan_print_json(const json_t *value);

/* Writes untrusted text (titles, errors, agents' output) to stdout so that it stays on one
 * line and sends nothing to the terminal: \n \r \t \" \\ as such, other control
 * characters (C0, DEL, and C1 such as the CSI U+009B) and bytes that are not UTF-8 as \xNN
 * or \u00NN; other characters as they are. */
void pan_print_escaped(const char *text);

/* pan_print_escaped() to `out`. */
void pan_fprint_escaped(FILE *out, const char *text);

/* Prints a task's result or payload for a person, each line starting with `indent`:
 * FINDINGS as a table (severity, file:line, message, whether it blocks the gate), arrays of
 * strings (FAILURES, filesChanged, RESOLVED_FILES) one item a line, multi-line strings
 * (output_tail, NOTES) as an indented block, objects and other arrays as their fields
 * (items [1], [2], ...) indented one level more, other values as `KEY: value` (costs in
 * dollars to the cent, other reals to two places, yes/no, none). Every text is escaped as
 * pan_print_escaped() does. */
void pan_print_fields(const json_t *object, const char *indent);

/* `one` when n is 1, else `many` ("task" / "tasks", or "" / "s" after a word). */
const char *pan_plural(int64_t n, const char *one, const char *many);

/* Prints the line a task's view leads with: its verdict in words and what to do next --
 * "gate blocked by 1 error — fix src/a.c:12, then `pan submit review-agent ...`", "gate
 * open — run `pan approve PAN-42`", "tests failed: 2 failing tests (...)", "merged feat
 * into main as 1a2b3c4d5e6f", "failed: <error> — `pan retry ID` runs it again", or for a
 * task that has not ended, where it is. Untrusted text escaped as pan_print_escaped(). */
void pan_print_verdict(const json_t *task);

/* Parses a whole decimal integer in [min, max] from `text`; returns false otherwise. */
bool pan_parse_int(const char *text, int64_t min, int64_t max, int64_t *out);

/* Writes an age like the original's: "just now", "5m", "3h", "2d" (no " ago"). */
void pan_format_age(char *buf, size_t size, int64_t age_ms);

/* Writes a wall-clock time in ms since the epoch as local "YYYY-MM-DD HH:MM:SS". */
void pan_format_time(char *buf, size_t size, int64_t wall_ms);

/* A string member of a JSON object, or `fallback` (borrowed from the object). */
const char *pan_json_str(const json_t *object, const char *key, const char *fallback);

/* An integer member of a JSON object (a real is truncated), or `fallback`. */
int64_t pan_json_int(const json_t *object, const char *key, int64_t fallback);

/* The absolute form of `path` into out: its realpath when it exists, else joined to the
 * current directory. Returns 0, FAILURE_IO or FAILURE_TOO_BIG (with the reason). */
int pan_absolute_path(const char *path, char *out, size_t size);

/* A record of a person overriding a gate, for a task's payload.override: {by (the user
 * name), at (UTC ISO 8601), reason, review (when given)}. New object (caller owns), or NULL
 * when memory runs out. */
json_t *pan_override_new(const char *reason, const char *review);

/* Resolves `text`, a whole task id or a unique prefix of one (as git, docker and gh
 * accept), into out (`size` bytes). A whole id that exists is itself, even when it starts
 * another id too. Returns PAN_EXIT_OK; PAN_EXIT_USAGE when the prefix is ambiguous (the
 * candidates listed on stderr); PAN_EXIT_ERROR when no task matches; PAN_EXIT_UNREACHABLE
 * when the broker does not answer -- each after printing why. */
int pan_task_id_resolve(const pan_t *pan, const char *text, char *out, size_t size);

/* pan_task_id_resolve() for a word that may name something else (an issue, a task still
 * to come): when no task id is or starts with `text`, returns PAN_EXIT_ERROR with nothing
 * printed and `out` empty. Every other outcome as pan_task_id_resolve(). */
int pan_task_id_resolve_quiet(const pan_t *pan, const char *text, char *out, size_t size);

/* ---- the launcher (deploy/run-local.sh), through its files in $PANOPTICON_HOME/run ---- */

/* A process the launcher started that still runs: run/<name>.pid names it and it runs
 * exactly the program run/<name>.program names (so a stale pid file, its number reused by
 * another process, names nobody). */
typedef struct {
    char name[64];
    pid_t pid;
    char program[4096];
} pan_launched_t;

/* Fills `out` with at most `cap` of them; returns how many. */
size_t pan_launched_list(pan_launched_t *out, size_t cap);

/* Asks every launched specialist (the broker aside) to read cloister.toml again: SIGHUP,
 * then up to `wait_ms` for the reports they write (common/specialist/specialist_reload.h).
 * Returns a new array (caller owns), one object per launched service: name, pid and state
 * -- "reloaded" (applied, restart), "refused" (error), "pending" (task: it reloads when
 * that task ends), "unsupported", "signalled" (no report in time), "gone", or "start-only"
 * for a program that reads its settings only at start (not signalled: SIGHUP would end
 * it). */
json_t *pan_launched_reload(int wait_ms);

/* The launcher's script (deploy/run-local.sh, an absolute path) when its supervisor runs:
 * run/supervisor.pid names a live process that runs that script. False when it does not
 * run (or cannot be told). */
bool pan_launcher_script(char *script, size_t size);

/* Has the running launcher start specialist `name` at once (`bash script start NAME`:
 * one waiting to be restarted starts now, one disabled at start and enabled now is added).
 * True when it did (or it runs already); its answer, on one line, in `answer` either way
 * ("test-agent runs (pid 123)", or why it refused). */
bool pan_launcher_start(const char *script, const char *name, char *answer, size_t size);

/* ---- colour (pan_colour.c) ---- */

typedef enum {
    PAN_COLOUR_GOOD, /* green: done, passed, merged, a gate open */
    PAN_COLOUR_BAD,  /* red: failed, dead, a gate blocked */
    PAN_COLOUR_WAIT, /* yellow: queued, running, waiting */
    PAN_COLOUR_DIM   /* cancelled, secondary text */
} pan_colour_t;

/* True when `out` (stdout or stderr) gets colour: it is a terminal, NO_COLOR is unset or
 * empty, and TERM is not "dumb". Decided once per stream. */
bool pan_colour_on(FILE *out);

/* The escape that starts `colour` on `out`, and the one that ends it; "" for a stream
 * without colour, so that they can always be printed. Static strings. */
const char *pan_colour(FILE *out, pan_colour_t colour);
const char *pan_colour_end(FILE *out);

/* "✓" for stdout, green when it gets colour. A static string. */
const char *pan_check_mark(void);

/* The colour of a task's state (done green, failed/dead red, cancelled dim, the rest
 * yellow). */
pan_colour_t pan_colour_of_state(const char *state);

/* Prints `command`'s help (usage and every option) on stdout; false when there is none. */
bool pan_help(const char *command);

/* Commands: each takes the arguments after its name and returns the exit code. */
int cmd_submit(const pan_t *pan, int argc, char **argv);
int cmd_specialists(const pan_t *pan, int argc, char **argv);
int cmd_events(const pan_t *pan, int argc, char **argv);
int cmd_task(const pan_t *pan, int argc, char **argv);
int cmd_task_list(const pan_t *pan, int argc, char **argv);
/* pan task fence [<id> <attempt>] [--exec CMD [ARG...]] (cmd_fence.c); `usage` is pan
 * task's. */
int cmd_task_fence(const pan_t *pan, int argc, char **argv, const char *usage);
int cmd_dead(const pan_t *pan, int argc, char **argv);
int cmd_retry_all_dead(const pan_t *pan, int argc, char **argv);
int cmd_cancel(const pan_t *pan, int argc, char **argv);
int cmd_retry(const pan_t *pan, int argc, char **argv);
int cmd_priority(const pan_t *pan, int argc, char **argv);
int cmd_status(const pan_t *pan, int argc, char **argv);
int cmd_reload(const pan_t *pan, int argc, char **argv);
int cmd_top(const pan_t *pan, int argc, char **argv);
int cmd_tests(const pan_t *pan, int argc, char **argv);
int cmd_merge_queue(const pan_t *pan, int argc, char **argv);
int cmd_approve(const pan_t *pan, int argc, char **argv);
int cmd_keys(const pan_t *pan, int argc, char **argv);
int cmd_web(const pan_t *pan, int argc, char **argv);
int cmd_backup(const pan_t *pan, int argc, char **argv);
int cmd_restore(const pan_t *pan, int argc, char **argv);
/* `config_error`: why cloister.toml did not load (pan then runs on the defaults), or NULL;
 * `keys_error`: why the bus's CURVE keys could not be loaded, or NULL. */
int cmd_doctor(const pan_t *pan, int argc, char **argv, const char *config_error,
               const char *keys_error);

#endif
