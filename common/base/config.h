/* config: Cloister's settings, read from $PANOPTICON_HOME/cloister.toml by a strict,
 * hand-written parser for a subset of TOML, then overridden by the environment.
 *
 * The accepted subset: `# comments`, blank lines, `[table]` and dotted `[a.b]` headers
 * (bare keys of A-Za-z0-9_- or quoted keys "..." / '...'), and `key = value` lines whose
 * value is a basic string "..." (escapes \" \\ \b \t \n \f \r \uXXXX \UXXXXXXXX), a literal
 * string '...', an integer (optional sign, `_` between digits), a float (1.5, -2e3), a
 * boolean, or an array of strings or of integers (may span lines, comments and a trailing
 * comma allowed). Everything else -- inline tables, arrays of tables, dates, multi-line
 * strings, dotted keys on the left of `=` -- is refused with
 * `file:line:col: expected <what>, found <what>` (columns count characters from 1).
 * Duplicate keys and duplicate table headers are errors.
 *
 * Table names are the dotted path as written ("broker", "specialists.merge-agent"); in a
 * `[specialists.<name>]` header `_` in the name becomes `-`, so the original system's
 * `[specialists.merge_agent]` is the same specialist as `[specialists.merge-agent]`.
 * Keys before the first header live in the table "".
 *
 * Known keys are type-checked (a wrong type is an error at the value's line:col) and have
 * defaults, so the generic getters below always find them:
 *   [broker]   in="tcp://127.0.0.1:5560" events="tcp://127.0.0.1:5561"
 *              control="tcp://127.0.0.1:5562" sync="full" (full|normal|off)
 *              heartbeat_ms=1000 heartbeat_misses=3 remote_heartbeat_misses=10
 *              event_retention=100000
 *              max_attempts=3 retry_backoff_ms=1000
 *   [agent]    cli="claude" (claude|codex|gemini) command="claude" args=[] permission_mode="acceptEdits" allowed_tools=[]
 *              fallback_model (none)
 *              disallowed_tools=[] max_turns=50 session_token_limit=150000
 *              no_output_timeout=300 (s) result_grace_ms=2000;
 *              optional, no default: max_budget_usd (float), append_system_prompt (string),
 *              prompts_dir (string), mcp (bool, default true), mcp_command (string),
 *              mcp_key (string: the agent key's secret file, default keys/agent_secret)
 *   [review]   mode="normal" (strict|normal|yolo|disabled); optional, no default: checks
 *              (array of strings), check_timeout_s (int), diff_budget_chars (int), post
 *              (bool), gh_command (string)
 *   [context]  custom_instructions="" relevant_files_limit=10 tree_budget_chars=4000
 *              files_budget_chars=12000 session_context_limit=10
 *   [merge]    remote="origin" push_retries=3
 *   [specialists.<name>] enabled (bool) auto_wake (bool) model (string) test_command
 *              (string) timeout (int, s) workdir (string) max_attempts (int) fix (bool)
 *              agent (claude|codex|gemini) command (string);
 *              their defaults depend on the specialist and come from the
 *              config_specialist_*() getters.
 * Unknown tables and keys are kept and readable through the generic getters; an unknown key
 * in one of the tables above is logged as a warning (most likely a misspelling).
 * A float key also accepts an integer (`max_budget_usd = 5`).
 *
 * Environment overrides, applied by config_load() after the file: CLOISTER_IN,
 * CLOISTER_EVENTS, CLOISTER_CONTROL (broker endpoints), CLOISTER_SYNC (validated like the
 * file) and CLOISTER_AGENT_COMMAND (agent.command). An empty variable counts as unset.
 *
 * A config_t is immutable after loading; reading it from several threads is safe. */
#ifndef CLOISTER_CONFIG_H
#define CLOISTER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct config_t config_t;

/* The largest configuration file config_load() reads. */
#define CONFIG_MAX_FILE_BYTES (1024 * 1024)
/* Limits that keep a hostile file from making parsing slow; more is an error. */
#define CONFIG_MAX_TABLES 1000
#define CONFIG_MAX_KEYS 1000 /* per table */

/* Loads `path` (NULL means "$PANOPTICON_HOME/cloister.toml") over the defaults, then
 * applies the environment overrides. A missing file is not an error: the result is the
 * defaults plus the environment. The file is only read, never created or written.
 * Returns 0 and a new config in *out (the caller owns it; free with config_destroy()), or
 * FAILURE_INVALID (syntax, type or value error; failure_message() is
 * "file:line:col: expected ..., found ..."), FAILURE_IO or FAILURE_TOO_BIG; *out is then
 * NULL. */
int config_load(const char *path, config_t **out);

/* Parses `len` bytes of `text` (need not be NUL-terminated) over the defaults, without
 * looking at the environment. `name` is the file name used in error messages (borrowed).
 * Returns 0 and a new config in *out (caller owns), or FAILURE_INVALID with the reason in
 * failure_message() and *out NULL. */
int config_parse_buffer(const char *name, const char *text, size_t len, config_t **out);

/* Like config_parse_buffer(), but without the defaults: the config holds only what the
 * text sets (config_has() tells), for a file laid over another (a repository's
 * .cloister/config.toml over cloister.toml). */
int config_parse_overlay(const char *name, const char *text, size_t len, config_t **out);

/* A config holding only the defaults (no file, no environment). The caller owns it. Returns
 * NULL only if memory runs out. */
config_t *config_defaults(void);

/* Frees the config and sets *self_p to NULL. Accepts NULL and *self_p == NULL. */
void config_destroy(config_t **self_p);

/* Generic getters. `table` is the dotted table name ("" for keys before any header; a
 * specialists.<name> table may be named with `_` or `-`). Each returns the stored value when
 * the key exists with that type, otherwise `fallback`. Returned strings are owned by the
 * config and live as long as it does. config_double() also returns integer values. */
const char *config_string(const config_t *self, const char *table, const char *key,
                          const char *fallback);
int64_t config_int(const config_t *self, const char *table, const char *key, int64_t fallback);
double config_double(const config_t *self, const char *table, const char *key, double fallback);
bool config_bool(const config_t *self, const char *table, const char *key, bool fallback);

/* True if the key exists in the table (from the file, the defaults or the environment). */
bool config_has(const config_t *self, const char *table, const char *key);

/* Arrays: the number of elements (0 if the key is missing or not an array), element i as a
 * string (NULL if out of range or not a string; owned by the config), element i as an
 * integer (`fallback` if out of range or not an integer). */
size_t config_array_len(const config_t *self, const char *table, const char *key);
const char *config_array_string(const config_t *self, const char *table, const char *key,
                                size_t i);
int64_t config_array_int(const config_t *self, const char *table, const char *key, size_t i,
                         int64_t fallback);

/* Number of tables, and the name of table i (owned by the config; NULL if out of range).
 * Lets a caller list every configured specialist ("specialists.*"). */
size_t config_table_count(const config_t *self);
const char *config_table_name(const config_t *self, size_t i);

/* Calls `fn` once for every key whose value differs between `a` and `b` (set in one only,
 * or set to another value: a different type, string, number or array), with its table and
 * key (owned by a or b, valid for the call). Used to say what a reload changed. Both
 * configs are borrowed. */
typedef void(config_change_fn)(const char *table, const char *key, void *arg);
void config_each_change(const config_t *a, const config_t *b, config_change_fn *fn, void *arg);

/* Specialist settings, `specialist` being e.g. "merge-agent" (or "merge_agent"). Each
 * returns the [specialists.<name>] value if set, else the default:
 *   cli (the key is `agent`): [agent] cli, itself "claude" by default;
 *   command: [agent] command when the specialist's cli is [agent] cli, else NULL (the
 *   adapter's own command name, agent_cli.h);
 *   model: for Claude, merge-agent "sonnet", review-agent "sonnet", test-agent "haiku",
 *   others "sonnet"; for another CLI NULL (its own default);
 *   timeout: merge-agent 900 s, others 600 s;  enabled: true;  auto_wake: false;
 *   max_attempts: broker.max_attempts.
 * test_command and workdir return NULL when not set. Strings are owned by the config. */
const char *config_specialist_cli(const config_t *self, const char *specialist);
const char *config_specialist_command(const config_t *self, const char *specialist);
const char *config_specialist_model(const config_t *self, const char *specialist);
/* [specialists.<name>] fallback_model, else [agent] fallback_model, else NULL: the model
 * Claude Code switches to when the main one stays overloaded (--fallback-model). */
const char *config_specialist_fallback_model(const config_t *self, const char *specialist);
int64_t config_specialist_timeout_s(const config_t *self, const char *specialist);
const char *config_specialist_test_command(const config_t *self, const char *specialist);
const char *config_specialist_workdir(const config_t *self, const char *specialist);
bool config_specialist_enabled(const config_t *self, const char *specialist);
bool config_specialist_auto_wake(const config_t *self, const char *specialist);
int64_t config_specialist_max_attempts(const config_t *self, const char *specialist);

#endif
