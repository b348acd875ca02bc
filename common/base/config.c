/* config: cloister.toml's known-key schema with its defaults, the environment overrides
 * and the getters (see config.h); the file is read by toml.c.
 *
 * Notes for readers:
 * - toml_parse() hands each [header] and `key = value` to s_on_table() / s_on_key_value(),
 *   which keep the tables and check each value against the schema; their errors read
 *   "file:line:col: expected X, found Y" like the reader's own.
 * - Defaults are real entries (from_file == false) placed in the tables before parsing, so
 *   the generic getters find them; a file entry replaces a default, and a second file
 *   entry for the same key is a duplicate. Likewise a table's `declared` flag tells a
 *   default table from one whose [header] has already appeared.
 * - Specialist tables have per-specialist defaults, so they are not pre-filled; the
 *   config_specialist_*() getters supply those defaults. */
#include "config.h"

#include "failure.h"
#include "home.h"
#include "log.h"
#include "toml.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    char *key;
    toml_value_t value;
    bool from_file; /* false for a default or an environment override */
    int line;       /* where the file set it (0 if not from the file) */
} entry_t;

typedef struct {
    char *name; /* dotted path, specialist names normalised */
    entry_t *entries;
    size_t count;
    size_t capacity;
    bool declared; /* its [header] appeared in the file */
    int line;      /* where that header was */
} table_t;

struct config_t {
    table_t *tables;
    size_t count;
    size_t capacity;
};

/* ---------------------------------------------------------------- schema -------------- */

typedef enum {
    SCHEMA_STRING,
    SCHEMA_INT,
    SCHEMA_FLOAT,
    SCHEMA_BOOL,
    SCHEMA_STRING_ARRAY
} schema_type_t;

/* One known key. `table` "specialists.*" stands for every [specialists.<name>] table. */
typedef struct {
    const char *table;
    const char *key;
    schema_type_t type;
    bool has_default;
    const char *default_string;
    int64_t default_int;
    int64_t min;         /* smallest accepted integer / float */
    const char *choices; /* "a|b|c": the only accepted strings, or NULL */
} schema_t;

#define SPECIALIST_TABLE "specialists.*"
#define SPECIALIST_PREFIX "specialists."

static const schema_t s_schema[] = {
    {"broker", "in", SCHEMA_STRING, true, "tcp://127.0.0.1:5560", 0, 0, NULL},
    {"broker", "events", SCHEMA_STRING, true, "tcp://127.0.0.1:5561", 0, 0, NULL},
    {"broker", "control", SCHEMA_STRING, true, "tcp://127.0.0.1:5562", 0, 0, NULL},
    {"broker", "sync", SCHEMA_STRING, true, "full", 0, 0, "full|normal|off"},
    {"broker", "heartbeat_ms", SCHEMA_INT, true, NULL, 1000, 1, NULL},
    {"broker", "heartbeat_misses", SCHEMA_INT, true, NULL, 3, 1, NULL},
    {"broker", "remote_heartbeat_misses", SCHEMA_INT, true, NULL, 10, 1, NULL},
    {"broker", "event_retention", SCHEMA_INT, true, NULL, 100000, 1, NULL},
    {"broker", "max_attempts", SCHEMA_INT, true, NULL, 3, 1, NULL},
    {"broker", "retry_backoff_ms", SCHEMA_INT, true, NULL, 1000, 0, NULL},
    {"broker", "wal_limit_mb", SCHEMA_INT, true, NULL, 64, 1, NULL},
    {"broker", "min_free_mb", SCHEMA_INT, true, NULL, 64, 0, NULL},
    {"broker", "reserve_mb", SCHEMA_INT, true, NULL, 16, 0, NULL},
    {"broker", "keep_finished_days", SCHEMA_INT, true, NULL, 30, 0, NULL},
    {"broker", "max_peers", SCHEMA_INT, true, NULL, 4096, 1, NULL},
    {"broker", "unread_replies_per_peer_mb", SCHEMA_INT, true, NULL, 16, 1, NULL},
    {"broker", "unread_replies_mb", SCHEMA_INT, true, NULL, 256, 1, NULL},

    {"agent", "cli", SCHEMA_STRING, true, "claude", 0, 0, "claude|codex|gemini"},
    {"agent", "command", SCHEMA_STRING, true, "claude", 0, 0, NULL},
    {"agent", "args", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "permission_mode", SCHEMA_STRING, true, "acceptEdits", 0, 0, NULL},
    {"agent", "allowed_tools", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "disallowed_tools", SCHEMA_STRING_ARRAY, true, NULL, 0, 0, NULL},
    {"agent", "max_turns", SCHEMA_INT, true, NULL, 50, 1, NULL},
    {"agent", "max_budget_usd", SCHEMA_FLOAT, false, NULL, 0, 0, NULL},
    {"agent", "session_token_limit", SCHEMA_INT, true, NULL, 150000, 1, NULL},
    {"agent", "no_output_timeout", SCHEMA_INT, true, NULL, 300, 1, NULL},
    {"agent", "result_grace_ms", SCHEMA_INT, true, NULL, 2000, 0, NULL},
    {"agent", "append_system_prompt", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"agent", "fallback_model", SCHEMA_STRING, false, NULL, 0, 0, NULL},

    {"agent", "prompts_dir", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"agent", "mcp", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"agent", "mcp_command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"agent", "mcp_key", SCHEMA_STRING, false, NULL, 0, 0, NULL},

    {"review", "mode", SCHEMA_STRING, true, "normal", 0, 0, "strict|normal|yolo|disabled"},
    {"review", "checks", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"review", "check_timeout_s", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"review", "diff_budget_chars", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"review", "post", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"review", "gh_command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"review", "reviewers", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"review", "concurrency", SCHEMA_INT, true, NULL, 3, 1, NULL},
    {"review", "reviewer_timeout_s", SCHEMA_INT, true, NULL, 600, 1, NULL},
    {"review", "max_iterations", SCHEMA_INT, true, NULL, 10, 1, NULL},
    {"review", "stagnation", SCHEMA_INT, true, NULL, 2, 1, NULL},
    {"review", "network", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"review.checks.*", "command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"review.checks.*", "kind", SCHEMA_STRING, false, NULL, 0, 0, "build|lint|coverage|e2e|custom"},
    {"review.checks.*", "severity", SCHEMA_STRING, false, NULL, 0, 0, "error|warning|info"},
    {"review.checks.*", "timeout_s", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"review.checks.*", "threshold", SCHEMA_FLOAT, false, NULL, 0, 0, NULL},
    {"review.checks.*", "report", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"review", "user_facing_paths", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"review", "e2e_test_paths", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"review", "e2e_severity", SCHEMA_STRING, false, NULL, 0, 0, "error|warning|info"},

    {"context", "custom_instructions", SCHEMA_STRING, true, "", 0, 0, NULL},
    {"context", "relevant_files_limit", SCHEMA_INT, true, NULL, 10, 0, NULL},
    {"context", "tree_budget_chars", SCHEMA_INT, true, NULL, 4000, 0, NULL},
    {"context", "files_budget_chars", SCHEMA_INT, true, NULL, 12000, 0, NULL},
    {"context", "session_context_limit", SCHEMA_INT, true, NULL, 10, 0, NULL},

    {"merge", "remote", SCHEMA_STRING, true, "origin", 0, 0, NULL},
    {"merge", "push_retries", SCHEMA_INT, true, NULL, 3, 0, NULL},
    {"merge", "push", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"merge", "queue", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"merge", "queue_window", SCHEMA_INT, true, NULL, 8, 1, NULL},

    {"tests", "command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"tests", "timeout_s", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {"tests", "sandbox", SCHEMA_STRING, false, NULL, 0, 0, "auto|bwrap|none"},
    {"tests", "env", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},
    {"tests", "network", SCHEMA_BOOL, false, NULL, 0, 0, NULL},

    {"security", "curve", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "allow_insecure", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "require_review", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {"security", "workspace_roots", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},

    {"web", "port", SCHEMA_INT, true, NULL, 7700, 0, NULL},
    {"web", "bind", SCHEMA_STRING, true, "127.0.0.1", 0, 0, NULL},
    {"web", "hosts", SCHEMA_STRING_ARRAY, false, NULL, 0, 0, NULL},

    {"hooks", "after_review", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"hooks", "after_test", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"hooks", "after_merge", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"hooks", "timeout_s", SCHEMA_INT, true, NULL, 30, 1, NULL},
    {"hooks", "webhook", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"hooks", "webhook_secret", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {"hooks", "webhook_attempts", SCHEMA_INT, true, NULL, 5, 1, NULL},
    {"hooks", "webhook_backoff_ms", SCHEMA_INT, true, NULL, 1000, 0, NULL},

    {"pipeline", "after_review", SCHEMA_STRING, true, "merge", 0, 0, "merge|test|none"},
    {"pipeline", "after_test", SCHEMA_STRING, true, "none", 0, 0, "merge|none"},

    {SPECIALIST_TABLE, "enabled", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "auto_wake", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "model", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "fallback_model", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "agent", SCHEMA_STRING, false, NULL, 0, 0, "claude|codex|gemini"},
    {SPECIALIST_TABLE, "command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "test_command", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "timeout", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {SPECIALIST_TABLE, "workdir", SCHEMA_STRING, false, NULL, 0, 0, NULL},
    {SPECIALIST_TABLE, "max_attempts", SCHEMA_INT, false, NULL, 0, 1, NULL},
    {SPECIALIST_TABLE, "fix", SCHEMA_BOOL, false, NULL, 0, 0, NULL},
};

#define SCHEMA_COUNT (sizeof s_schema / sizeof s_schema[0])

/* ---------------------------------------------------------------- values and tables --- */


/* Compares a stored (normalised) table name with a name a caller asked for, treating `_`
 * in the caller's specialist segment as `-`. */
static bool s_table_name_equal(const char *stored, const char *query)
{
    size_t prefix = strlen(SPECIALIST_PREFIX);
    bool specialist = strncmp(query, SPECIALIST_PREFIX, prefix) == 0;
    bool in_segment = false;
    size_t i = 0;
    for (; stored[i] != '\0' && query[i] != '\0'; i++) {
        char q = query[i];
        if (specialist && i == prefix)
            in_segment = true;
        if (in_segment && q == '.')
            in_segment = false;
        if (in_segment && q == '_')
            q = '-';
        if (stored[i] != q)
            return false;
    }
    return stored[i] == query[i];
}

/* In a "specialists.<name>..." path, turns `_` into `-` within <name>. */
static void s_normalise_table_name(char *name)
{
    size_t prefix = strlen(SPECIALIST_PREFIX);
    if (strncmp(name, SPECIALIST_PREFIX, prefix) != 0)
        return;
    for (char *c = name + prefix; *c != '\0' && *c != '.'; c++) {
        if (*c == '_')
            *c = '-';
    }
}

static table_t *s_find_table(const config_t *self, const char *name)
{
    if (self == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < self->count; i++) {
        if (s_table_name_equal(self->tables[i].name, name))
            return &self->tables[i];
    }
    return NULL;
}

static entry_t *s_find_entry(const table_t *table, const char *key)
{
    if (table == NULL || key == NULL)
        return NULL;
    for (size_t i = 0; i < table->count; i++) {
        if (strcmp(table->entries[i].key, key) == 0)
            return &table->entries[i];
    }
    return NULL;
}

static const toml_value_t *s_find_value(const config_t *self, const char *table, const char *key)
{
    entry_t *entry = s_find_entry(s_find_table(self, table), key);
    return entry ? &entry->value : NULL;
}

/* Returns the table called `name` (already normalised), creating it if needed; NULL if
 * memory runs out. The pointer is valid until the next table is added. */
static table_t *s_add_table(config_t *self, const char *name)
{
    table_t *found = s_find_table(self, name);
    if (found != NULL)
        return found;
    if (self->count == self->capacity) {
        size_t capacity = self->capacity ? self->capacity * 2 : 8;
        table_t *tables = realloc(self->tables, capacity * sizeof *tables);
        if (tables == NULL)
            return NULL;
        self->tables = tables;
        self->capacity = capacity;
    }
    table_t *table = &self->tables[self->count];
    memset(table, 0, sizeof *table);
    table->name = strdup(name);
    if (table->name == NULL)
        return NULL;
    self->count++;
    return table;
}

/* Sets `key` in `table` to `*value`, taking ownership of the value's memory (it is zeroed
 * in the caller) whether or not this succeeds. Replaces an existing entry. Returns 0 or
 * FAILURE_MEMORY. */
static int s_table_set(table_t *table, const char *key, toml_value_t *value, bool from_file, int line)
{
    entry_t *entry = s_find_entry(table, key);
    if (entry == NULL) {
        if (table->count == table->capacity) {
            size_t capacity = table->capacity ? table->capacity * 2 : 8;
            entry_t *entries = realloc(table->entries, capacity * sizeof *entries);
            if (entries == NULL) {
                toml_value_free(value);
                return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
            }
            table->entries = entries;
            table->capacity = capacity;
        }
        entry = &table->entries[table->count];
        memset(entry, 0, sizeof *entry);
        entry->key = strdup(key);
        if (entry->key == NULL) {
            toml_value_free(value);
            return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
        }
        table->count++;
    } else {
        toml_value_free(&entry->value);
    }
    entry->value = *value;
    entry->from_file = from_file;
    entry->line = line;
    memset(value, 0, sizeof *value);
    return 0;
}

static int s_set_string(config_t *self, const char *table_name, const char *key,
                        const char *text)
{
    table_t *table = s_add_table(self, table_name);
    toml_value_t value = {.kind = TOML_STRING, .string = strdup(text)};
    if (table == NULL || value.string == NULL) {
        free(value.string);
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    }
    return s_table_set(table, key, &value, false, 0);
}

/* True if `text` is one of the `|`-separated words in `choices`. */
static bool s_is_choice(const char *choices, const char *text)
{
    size_t len = strlen(text);
    const char *word = choices;
    while (*word != '\0') {
        const char *end = strchr(word, '|');
        size_t word_len = end ? (size_t)(end - word) : strlen(word);
        if (word_len == len && strncmp(word, text, len) == 0)
            return true;
        if (end == NULL)
            break;
        word = end + 1;
    }
    return false;
}

/* True if the schema's table `pattern` covers `table_name`: the same name, or for a
 * pattern "a.b.*" any "a.b.<x>" with no further dot. */
static bool s_table_matches(const char *pattern, const char *table_name)
{
    size_t len = strlen(pattern);
    if (len < 2 || strcmp(pattern + len - 2, ".*") != 0)
        return strcmp(pattern, table_name) == 0;
    size_t prefix = len - 1; /* "a.b." */
    return strncmp(table_name, pattern, prefix) == 0 && table_name[prefix] != '\0' &&
           strchr(table_name + prefix, '.') == NULL;
}

static const schema_t *s_schema_find(const char *table_name, const char *key)
{
    for (size_t i = 0; i < SCHEMA_COUNT; i++) {
        const schema_t *s = &s_schema[i];
        if (s_table_matches(s->table, table_name) && strcmp(s->key, key) == 0)
            return s;
    }
    return NULL;
}

/* True if Cloister reads table `table_name` (so a key it does not know there is a typo,
 * not somebody else's setting). */
static bool s_known_table(const char *table_name)
{
    for (size_t i = 0; i < SCHEMA_COUNT; i++)
        if (s_table_matches(s_schema[i].table, table_name))
            return true;
    return false;
}

/* A key Cloister does not know in a table it reads is kept (see config.h), but most likely
 * a misspelling that would otherwise silently do nothing: say so. */
static void s_warn_unknown(const toml_reader_t *p, toml_mark_t at, const char *table_name,
                           const char *key)
{
    if (s_known_table(table_name))
        log_warn("%s:%d: unknown key '%s' in [%s] (ignored; misspelt?)", toml_name(p), at.line, key,
                 table_name);
}

/* Checks a file value against the schema (and turns an integer into a float for a float
 * key). `at` is where the value starts. */
static int s_check_schema(toml_reader_t *p, toml_mark_t at, const char *table_name, const char *key,
                          toml_value_t *value)
{
    const schema_t *s = s_schema_find(table_name, key);
    if (s == NULL) {
        s_warn_unknown(p, at, table_name, key);
        return 0;
    }
    char expected[160];
    char found[160];
    snprintf(found, sizeof found, "%s", toml_kind_name(value));
    bool ok = true;
    switch (s->type) {
    case SCHEMA_STRING:
        snprintf(expected, sizeof expected, "a string for %s.%s", table_name, key);
        ok = value->kind == TOML_STRING;
        if (ok && s->choices != NULL && !s_is_choice(s->choices, value->string)) {
            snprintf(expected, sizeof expected, "one of %s for %s.%s", s->choices, table_name,
                     key);
            snprintf(found, sizeof found, "\"%.100s\"", value->string);
            ok = false;
        }
        break;
    case SCHEMA_INT:
        snprintf(expected, sizeof expected, "an integer >= %lld for %s.%s", (long long)s->min,
                 table_name, key);
        ok = value->kind == TOML_INT;
        if (ok && value->integer < s->min) {
            snprintf(found, sizeof found, "%lld", (long long)value->integer);
            ok = false;
        }
        break;
    case SCHEMA_FLOAT:
        snprintf(expected, sizeof expected, "a number >= %lld for %s.%s", (long long)s->min,
                 table_name, key);
        if (value->kind == TOML_INT)
            *value = (toml_value_t){.kind = TOML_FLOAT, .number = (double)value->integer};
        ok = value->kind == TOML_FLOAT;
        if (ok && value->number < (double)s->min) {
            snprintf(found, sizeof found, "%g", value->number);
            ok = false;
        }
        break;
    case SCHEMA_BOOL:
        snprintf(expected, sizeof expected, "a boolean for %s.%s", table_name, key);
        ok = value->kind == TOML_BOOL;
        break;
    case SCHEMA_STRING_ARRAY:
        snprintf(expected, sizeof expected, "an array of strings for %s.%s", table_name, key);
        ok = value->kind == TOML_ARRAY
          && (value->nitems == 0 || value->items[0].kind == TOML_STRING);
        break;
    }
    return ok ? 0 : toml_error_at(p, at, expected, found);
}

/* ---------------------------------------------------------------- reading ------------ */

/* Where the reader is: the config it fills and the current table. */
typedef struct {
    config_t *config;
    size_t table; /* index of the current table */
} reading_t;

/* toml_handler_t.table: a [header] opens (or declares) its table. */
static int s_on_table(toml_reader_t *reader, toml_mark_t at, const char *header, void *arg)
{
    reading_t *r = arg;
    char name[1024];
    snprintf(name, sizeof name, "%s", header);
    s_normalise_table_name(name);
    table_t *table = s_find_table(r->config, name);
    if (table != NULL && table->declared) {
        char found[600];
        snprintf(found, sizeof found, "[%.500s] again (first at line %d)", name, table->line);
        return toml_error_at(reader, at, "a new table", found);
    }
    if (table == NULL && r->config->count >= CONFIG_MAX_TABLES) {
        char expected[64];
        snprintf(expected, sizeof expected, "at most %d tables", CONFIG_MAX_TABLES);
        return toml_error_at(reader, at, expected, "one more");
    }
    table = s_add_table(r->config, name);
    if (table == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    table->declared = true;
    table->line = at.line;
    r->table = (size_t)(table - r->config->tables);
    return 0;
}

/* toml_handler_t.key_value: a key of the current table, checked against the schema. */
static int s_on_key_value(toml_reader_t *reader, toml_mark_t key_at, const char *key,
                          toml_mark_t value_at, toml_value_t *value, void *arg)
{
    reading_t *r = arg;
    table_t *table = &r->config->tables[r->table];
    entry_t *existing = s_find_entry(table, key);
    if (existing != NULL && existing->from_file) {
        char found[200];
        snprintf(found, sizeof found, "'%.100s' again (first at line %d)", key, existing->line);
        return toml_error_at(reader, key_at, "a new key", found);
    }
    if (existing == NULL && table->count >= CONFIG_MAX_KEYS) {
        char expected[64];
        snprintf(expected, sizeof expected, "at most %d keys in a table", CONFIG_MAX_KEYS);
        return toml_error_at(reader, key_at, expected, "one more");
    }
    int rc = s_check_schema(reader, value_at, table->name, key, value);
    if (rc != 0)
        return rc;
    /* The entry takes what the value owns. */
    toml_value_t kept = *value;
    *value = (toml_value_t){0};
    return s_table_set(table, key, &kept, true, key_at.line);
}

/* ---------------------------------------------------------------- loading ------------ */

config_t *config_defaults(void)
{
    config_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    if (s_add_table(self, "") == NULL)
        goto fail;
    for (size_t i = 0; i < SCHEMA_COUNT; i++) {
        const schema_t *s = &s_schema[i];
        if (!s->has_default)
            continue;
        table_t *table = s_add_table(self, s->table);
        if (table == NULL)
            goto fail;
        toml_value_t value = {0};
        switch (s->type) {
        case SCHEMA_STRING:
            value = (toml_value_t){.kind = TOML_STRING, .string = strdup(s->default_string)};
            if (value.string == NULL)
                goto fail;
            break;
        case SCHEMA_INT: value = (toml_value_t){.kind = TOML_INT, .integer = s->default_int}; break;
        case SCHEMA_FLOAT:
            value = (toml_value_t){.kind = TOML_FLOAT, .number = (double)s->default_int};
            break;
        case SCHEMA_BOOL: value = (toml_value_t){.kind = TOML_BOOL, .boolean = s->default_int}; break;
        case SCHEMA_STRING_ARRAY: value = (toml_value_t){.kind = TOML_ARRAY}; break;
        }
        if (s_table_set(table, s->key, &value, false, 0) != 0)
            goto fail;
    }
    return self;
fail:
    config_destroy(&self);
    return NULL;
}

void config_destroy(config_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    config_t *self = *self_p;
    for (size_t t = 0; t < self->count; t++) {
        table_t *table = &self->tables[t];
        for (size_t e = 0; e < table->count; e++) {
            free(table->entries[e].key);
            toml_value_free(&table->entries[e].value);
        }
        free(table->entries);
        free(table->name);
    }
    free(self->tables);
    free(self);
    *self_p = NULL;
}

/* Parses text into `config` (which holds at least the "" table first); on success *out is
 * it, on failure it is destroyed. */
static int s_parse_into(config_t *config, const char *name, const char *text, size_t len,
                        config_t **out)
{
    *out = NULL;
    if (config == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    reading_t reading = {.config = config, .table = 0}; /* the "" table created first */
    const toml_handler_t handler = {.table = s_on_table, .key_value = s_on_key_value};
    int rc = toml_parse(name ? name : "cloister.toml", text, len, &handler, &reading);
    if (rc != 0) {
        config_destroy(&config);
        return rc;
    }
    *out = config;
    return 0;
}

int config_parse_buffer(const char *name, const char *text, size_t len, config_t **out)
{
    return s_parse_into(config_defaults(), name, text, len, out);
}

int config_parse_overlay(const char *name, const char *text, size_t len, config_t **out)
{
    config_t *config = calloc(1, sizeof *config);
    if (config != NULL && s_add_table(config, "") == NULL)
        config_destroy(&config);
    return s_parse_into(config, name, text, len, out);
}

/* Applies CLOISTER_* variables over the loaded values. */
static int s_apply_environment(config_t *self)
{
    static const struct {
        const char *variable;
        const char *table;
        const char *key;
    } overrides[] = {
        {"CLOISTER_IN", "broker", "in"},
        {"CLOISTER_EVENTS", "broker", "events"},
        {"CLOISTER_CONTROL", "broker", "control"},
        {"CLOISTER_SYNC", "broker", "sync"},
        {"CLOISTER_AGENT_COMMAND", "agent", "command"},
    };
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++) {
        const char *text = getenv(overrides[i].variable);
        if (text == NULL || text[0] == '\0')
            continue;
        const schema_t *s = s_schema_find(overrides[i].table, overrides[i].key);
        if (s != NULL && s->choices != NULL && !s_is_choice(s->choices, text))
            return failure_set(FAILURE_INVALID, "%s: expected one of %s, found \"%.100s\"",
                               overrides[i].variable, s->choices, text);
        int rc = s_set_string(self, overrides[i].table, overrides[i].key, text);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Reads the whole file. Returns 0 with *text (caller frees) and *len, FAILURE_NOT_FOUND if
 * the file does not exist, or FAILURE_IO / FAILURE_TOO_BIG. */
static int s_read_file(const char *path, char **text, size_t *len)
{
    *text = NULL;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        if (errno == ENOENT)
            return FAILURE_NOT_FOUND;
        return failure_set(FAILURE_IO, "cannot open %s: %s", path, strerror(errno));
    }
    int rc = 0;
    struct stat st;
    if (fstat(fileno(file), &st) != 0) {
        rc = failure_set(FAILURE_IO, "cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    if (st.st_size > CONFIG_MAX_FILE_BYTES) {
        rc = failure_set(FAILURE_TOO_BIG, "%s is larger than %d bytes", path,
                         CONFIG_MAX_FILE_BYTES);
        goto out;
    }
    *text = malloc((size_t)st.st_size + 1);
    if (*text == NULL) {
        rc = failure_set(FAILURE_MEMORY, "out of memory reading %s", path);
        goto out;
    }
    *len = fread(*text, 1, (size_t)st.st_size, file);
    if (ferror(file)) {
        rc = failure_set(FAILURE_IO, "cannot read %s", path);
        free(*text);
        *text = NULL;
    }
out:
    fclose(file);
    return rc;
}

int config_load(const char *path, config_t **out)
{
    *out = NULL;
    char default_path[1100];
    if (path == NULL) {
        int rc = home_path(default_path, sizeof default_path, "cloister.toml");
        if (rc != 0)
            return rc;
        path = default_path;
    }
    char *text = NULL;
    size_t len = 0;
    config_t *config = NULL;
    int rc = s_read_file(path, &text, &len);
    if (rc == FAILURE_NOT_FOUND) {
        config = config_defaults(); /* no file: defaults, and the file stays absent */
        rc = config ? 0 : failure_set(FAILURE_MEMORY, "out of memory reading the configuration");
    } else if (rc == 0) {
        rc = config_parse_buffer(path, text, len, &config);
    }
    free(text);
    if (rc == 0)
        rc = s_apply_environment(config);
    if (rc != 0) {
        config_destroy(&config);
        return rc;
    }
    *out = config;
    return 0;
}

/* ---------------------------------------------------------------- getters ------------ */

const char *config_string(const config_t *self, const char *table, const char *key,
                          const char *fallback)
{
    const toml_value_t *value = s_find_value(self, table, key);
    return value && value->kind == TOML_STRING ? value->string : fallback;
}

int64_t config_int(const config_t *self, const char *table, const char *key, int64_t fallback)
{
    const toml_value_t *value = s_find_value(self, table, key);
    return value && value->kind == TOML_INT ? value->integer : fallback;
}

double config_double(const config_t *self, const char *table, const char *key, double fallback)
{
    const toml_value_t *value = s_find_value(self, table, key);
    if (value && value->kind == TOML_FLOAT)
        return value->number;
    if (value && value->kind == TOML_INT)
        return (double)value->integer;
    return fallback;
}

bool config_bool(const config_t *self, const char *table, const char *key, bool fallback)
{
    const toml_value_t *value = s_find_value(self, table, key);
    return value && value->kind == TOML_BOOL ? value->boolean : fallback;
}

bool config_has(const config_t *self, const char *table, const char *key)
{
    return s_find_value(self, table, key) != NULL;
}

size_t config_array_len(const config_t *self, const char *table, const char *key)
{
    const toml_value_t *value = s_find_value(self, table, key);
    return value && value->kind == TOML_ARRAY ? value->nitems : 0;
}

const char *config_array_string(const config_t *self, const char *table, const char *key,
                                size_t i)
{
    const toml_value_t *value = s_find_value(self, table, key);
    if (value == NULL || value->kind != TOML_ARRAY || i >= value->nitems)
        return NULL;
    return value->items[i].kind == TOML_STRING ? value->items[i].string : NULL;
}

int64_t config_array_int(const config_t *self, const char *table, const char *key, size_t i,
                         int64_t fallback)
{
    const toml_value_t *value = s_find_value(self, table, key);
    if (value == NULL || value->kind != TOML_ARRAY || i >= value->nitems)
        return fallback;
    return value->items[i].kind == TOML_INT ? value->items[i].integer : fallback;
}

size_t config_table_count(const config_t *self)
{
    return self ? self->count : 0;
}

const char *config_table_name(const config_t *self, size_t i)
{
    return self && i < self->count ? self->tables[i].name : NULL;
}

/* True when two values read the same (one type, one value; arrays item by item). */
static bool s_value_equal(const toml_value_t *a, const toml_value_t *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case TOML_STRING:
        return strcmp(a->string, b->string) == 0;
    case TOML_INT:
        return a->integer == b->integer;
    case TOML_FLOAT:
        return a->number == b->number;
    case TOML_BOOL:
        return a->boolean == b->boolean;
    case TOML_ARRAY:
        if (a->nitems != b->nitems)
            return false;
        for (size_t i = 0; i < a->nitems; i++)
            if (!s_value_equal(&a->items[i], &b->items[i]))
                return false;
        return true;
    }
    return false;
}

/* Calls fn for each key of `from` that `other` lacks or (with `compare`) holds otherwise. */
static void s_each_change_from(const config_t *from, const config_t *other, bool compare,
                               config_change_fn *fn, void *arg)
{
    for (size_t t = 0; t < from->count; t++) {
        const table_t *table = &from->tables[t];
        const table_t *peer = s_find_table(other, table->name);
        for (size_t e = 0; e < table->count; e++) {
            const entry_t *mine = &table->entries[e];
            const entry_t *entry = peer ? s_find_entry(peer, mine->key) : NULL;
            if (entry == NULL || (compare && !s_value_equal(&entry->value, &mine->value)))
                fn(table->name, mine->key, arg);
        }
    }
}

void config_each_change(const config_t *a, const config_t *b, config_change_fn *fn, void *arg)
{
    s_each_change_from(a, b, true, fn, arg);
    s_each_change_from(b, a, false, fn, arg);
}

/* ---------------------------------------------------------------- specialists -------- */

/* Writes "specialists.<name>" into buf; returns false if it does not fit. */
static bool s_specialist_table(char *buf, size_t size, const char *specialist)
{
    int n = snprintf(buf, size, "%s%s", SPECIALIST_PREFIX, specialist ? specialist : "");
    return n > 0 && (size_t)n < size;
}

/* True if `specialist` names `canonical` ("merge-agent"), `_` and `-` being the same. */
static bool s_specialist_is(const char *specialist, const char *canonical)
{
    if (specialist == NULL)
        return false;
    size_t i = 0;
    for (; specialist[i] != '\0' && canonical[i] != '\0'; i++) {
        char c = specialist[i] == '_' ? '-' : specialist[i];
        if (c != canonical[i])
            return false;
    }
    return specialist[i] == canonical[i];
}

const char *config_specialist_cli(const config_t *self, const char *specialist)
{
    const char *fallback = config_string(self, "agent", "cli", "claude");
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_string(self, table, "agent", fallback);
}

const char *config_specialist_command(const config_t *self, const char *specialist)
{
    char table[256];
    const char *own = s_specialist_table(table, sizeof table, specialist)
                          ? config_string(self, table, "command", NULL)
                          : NULL;
    if (own != NULL)
        return own;
    /* [agent] command is the command of [agent] cli, not of another CLI. */
    const char *cli = config_specialist_cli(self, specialist);
    if (strcmp(cli, config_string(self, "agent", "cli", "claude")) == 0)
        return config_string(self, "agent", "command", NULL);
    return NULL;
}

const char *config_specialist_model(const config_t *self, const char *specialist)
{
    /* The aliases are Claude's; another CLI uses its own default unless told. */
    bool claude = strcmp(config_specialist_cli(self, specialist), "claude") == 0;
    const char *fallback =
        !claude ? NULL : s_specialist_is(specialist, "test-agent") ? "haiku" : "sonnet";
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_string(self, table, "model", fallback);
}

const char *config_specialist_fallback_model(const config_t *self, const char *specialist)
{
    const char *fallback = config_string(self, "agent", "fallback_model", NULL);
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_string(self, table, "fallback_model", fallback);
}

int64_t config_specialist_timeout_s(const config_t *self, const char *specialist)
{
    int64_t fallback = s_specialist_is(specialist, "merge-agent") ? 900 : 600;
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_int(self, table, "timeout", fallback);
}

const char *config_specialist_test_command(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return NULL;
    return config_string(self, table, "test_command", NULL);
}

const char *config_specialist_workdir(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return NULL;
    return config_string(self, table, "workdir", NULL);
}

bool config_specialist_enabled(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return true;
    return config_bool(self, table, "enabled", true);
}

bool config_specialist_auto_wake(const config_t *self, const char *specialist)
{
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return false;
    return config_bool(self, table, "auto_wake", false);
}

int64_t config_specialist_max_attempts(const config_t *self, const char *specialist)
{
    int64_t fallback = config_int(self, "broker", "max_attempts", 3);
    char table[256];
    if (!s_specialist_table(table, sizeof table, specialist))
        return fallback;
    return config_int(self, table, "max_attempts", fallback);
}
