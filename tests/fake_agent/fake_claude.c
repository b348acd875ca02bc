/* fake-claude: a test double for the Claude Code CLI in headless (-p) mode.
 *
 * It follows the contract in docs/agent-cli.md §6: the same flags, the same
 * validation order and stderr texts (2.1.330 wording), a session store laid out like the
 * real one, and json / stream-json / text output. Environment knobs choose a scenario
 * (auth failure, max turns, crash, hang, ...) and an action script (fake_actions.h) lets
 * it really edit files and run commands, so service tests drive real behaviour. See
 * README.md next to this file for every knob. */
#include "clock.h"
#include "failure.h"
#include "fake_actions.h"
#include "fake_common.h"
#include "fake_mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>
#include <uuid/uuid.h>

#define FAKE_VERSION "2.1.330"
#define FAKE_DEFAULT_MODEL "claude-opus-5-5"
#define FAKE_DEFAULT_RESULT "Done."
#define FAKE_STDIN_WAIT_MS 3000

/* ---------------------------------------------------------------------------------------
 * Command line: the flags of §6, parsed the way commander does it. */

typedef enum { ARG_FLAG, ARG_ONE, ARG_MANY } arg_kind_t;

typedef enum {
    OPT_PRINT,
    OPT_OUTPUT_FORMAT,
    OPT_INPUT_FORMAT,
    OPT_VERBOSE,
    OPT_RESUME,
    OPT_SESSION_ID,
    OPT_FORK_SESSION,
    OPT_CONTINUE,
    OPT_NO_SESSION_PERSISTENCE,
    OPT_MODEL,
    OPT_FALLBACK_MODEL,
    OPT_MAX_TURNS,
    OPT_MAX_BUDGET_USD,
    OPT_PERMISSION_MODE,
    OPT_PERMISSION_PROMPTS,
    OPT_DANGEROUSLY_SKIP_PERMISSIONS,
    OPT_ALLOWED_TOOLS,
    OPT_DISALLOWED_TOOLS,
    OPT_TOOLS,
    OPT_APPEND_SYSTEM_PROMPT,
    OPT_SYSTEM_PROMPT,
    OPT_SYSTEM_PROMPT_SNAPSHOT,
    OPT_ADD_DIR,
    OPT_MCP_CONFIG,
    OPT_STRICT_MCP_CONFIG,
    OPT_SETTINGS,
    OPT_SETTING_SOURCES,
    OPT_JSON_SCHEMA,
    OPT_EFFORT,
    OPT_VERSION,
    OPT_COUNT
} option_id_t;

typedef struct {
    const char *name;  /* the long (or only) spelling */
    const char *alias; /* a second spelling, or NULL */
    arg_kind_t kind;
    const char *usage; /* how commander names the option in its error messages */
} option_spec_t;

static const option_spec_t s_specs[OPT_COUNT] = {
    [OPT_PRINT] = {"--print", "-p", ARG_FLAG, "-p, --print"},
    [OPT_OUTPUT_FORMAT] = {"--output-format", NULL, ARG_ONE, "--output-format <format>"},
    [OPT_INPUT_FORMAT] = {"--input-format", NULL, ARG_ONE, "--input-format <format>"},
    [OPT_VERBOSE] = {"--verbose", NULL, ARG_FLAG, "--verbose"},
    [OPT_RESUME] = {"--resume", "-r", ARG_ONE, "-r, --resume [value]"},
    [OPT_SESSION_ID] = {"--session-id", NULL, ARG_ONE, "--session-id <uuid>"},
    [OPT_FORK_SESSION] = {"--fork-session", NULL, ARG_FLAG, "--fork-session"},
    [OPT_CONTINUE] = {"--continue", "-c", ARG_FLAG, "-c, --continue"},
    [OPT_NO_SESSION_PERSISTENCE] = {"--no-session-persistence", NULL, ARG_FLAG,
                                    "--no-session-persistence"},
    [OPT_MODEL] = {"--model", NULL, ARG_ONE, "--model <model>"},
    [OPT_FALLBACK_MODEL] = {"--fallback-model", NULL, ARG_ONE, "--fallback-model <model>"},
    [OPT_MAX_TURNS] = {"--max-turns", NULL, ARG_ONE, "--max-turns <turns>"},
    [OPT_MAX_BUDGET_USD] = {"--max-budget-usd", NULL, ARG_ONE, "--max-budget-usd <amount>"},
    [OPT_PERMISSION_MODE] = {"--permission-mode", NULL, ARG_ONE, "--permission-mode <mode>"},
    [OPT_PERMISSION_PROMPTS] = {"--permission-prompts", NULL, ARG_ONE,
                                "--permission-prompts <mode>"},
    [OPT_DANGEROUSLY_SKIP_PERMISSIONS] = {"--dangerously-skip-permissions", NULL, ARG_FLAG,
                                          "--dangerously-skip-permissions"},
    [OPT_ALLOWED_TOOLS] = {"--allowedTools", "--allowed-tools", ARG_MANY,
                           "--allowedTools, --allowed-tools <tools...>"},
    [OPT_DISALLOWED_TOOLS] = {"--disallowedTools", "--disallowed-tools", ARG_MANY,
                              "--disallowedTools, --disallowed-tools <tools...>"},
    [OPT_TOOLS] = {"--tools", NULL, ARG_MANY, "--tools <tools...>"},
    [OPT_APPEND_SYSTEM_PROMPT] = {"--append-system-prompt", NULL, ARG_ONE,
                                  "--append-system-prompt <prompt>"},
    [OPT_SYSTEM_PROMPT] = {"--system-prompt", NULL, ARG_ONE, "--system-prompt <prompt>"},
    [OPT_SYSTEM_PROMPT_SNAPSHOT] = {"--system-prompt-snapshot", NULL, ARG_ONE,
                                    "--system-prompt-snapshot <mode>"},
    [OPT_ADD_DIR] = {"--add-dir", NULL, ARG_MANY, "--add-dir <directories...>"},
    [OPT_MCP_CONFIG] = {"--mcp-config", NULL, ARG_MANY, "--mcp-config <configs...>"},
    [OPT_STRICT_MCP_CONFIG] = {"--strict-mcp-config", NULL, ARG_FLAG, "--strict-mcp-config"},
    [OPT_SETTINGS] = {"--settings", NULL, ARG_ONE, "--settings <file-or-json>"},
    [OPT_SETTING_SOURCES] = {"--setting-sources", NULL, ARG_ONE, "--setting-sources <sources>"},
    [OPT_JSON_SCHEMA] = {"--json-schema", NULL, ARG_ONE, "--json-schema <schema>"},
    [OPT_EFFORT] = {"--effort", NULL, ARG_ONE, "--effort <level>"},
    [OPT_VERSION] = {"--version", "-v", ARG_FLAG, "-v, --version"},
};

/* Everything one invocation knows; lives for the whole process. */
typedef struct {
    int argc;
    char **argv;
    bool given[OPT_COUNT];
    const char *value[OPT_COUNT]; /* ARG_ONE: the last value given */
    json_t *values[OPT_COUNT];    /* ARG_MANY: every value given, in order */
    const char *prompt_arg;       /* the positional prompt, or NULL */
    char *stdin_text;             /* what stdin held (NULL: not read) */
    bool logged;                  /* FAKE_CLAUDE_LOG already written */

    const char *output_format; /* "text", "json" or "stream-json" */
    const char *scenario;
    char cwd[PATH_MAX];
    char project_dir[PATH_MAX + 512];
    char session_id[40];   /* the id this run writes under */
    char init_id[40];      /* the id the init event shows */
    int64_t started_ms;
    int delay_ms;
    bool first_event;
    bool unbilled; /* the run never reached the model: zero usage and turns */
    json_t *transcript; /* json + --verbose: every event, printed as one array at the end */
    int tool_steps;
    int api_calls; /* assistant messages with real usage: the result's usage sums them */
} fake_t;

static void s_write_log(fake_t *self);

/* Prints one line on stderr, writes the invocation log and returns exit code 1. */
__attribute__((format(printf, 2, 3))) static int s_fail(fake_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    s_write_log(self);
    return 1;
}

static int s_find_option(const char *name)
{
    for (int i = 0; i < OPT_COUNT; i++) {
        if (strcmp(s_specs[i].name, name) == 0)
            return i;
        if (s_specs[i].alias != NULL && strcmp(s_specs[i].alias, name) == 0)
            return i;
    }
    return -1;
}

/* Parses argv into self. Returns 0, or an exit code after printing commander's error. */
static int s_parse(fake_t *self)
{
    bool options_done = false;
    int positionals = 0;
    for (int i = 1; i < self->argc; i++) {
        const char *arg = self->argv[i];
        if (options_done || arg[0] != '-' || strcmp(arg, "-") == 0) {
            positionals++;
            if (positionals == 1)
                self->prompt_arg = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        /* --name=value */
        char name[128];
        const char *inline_value = NULL;
        const char *eq = strchr(arg, '=');
        if (strncmp(arg, "--", 2) == 0 && eq != NULL && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            inline_value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
        int id = s_find_option(name);
        if (id < 0 || (inline_value != NULL && s_specs[id].kind == ARG_FLAG))
            return s_fail(self, "error: unknown option '%s'", arg);
        self->given[id] = true;
        if (s_specs[id].kind == ARG_FLAG)
            continue;
        if (s_specs[id].kind == ARG_ONE) {
            if (inline_value != NULL) {
                self->value[id] = inline_value;
            } else if (i + 1 < self->argc && (id != OPT_RESUME || self->argv[i + 1][0] != '-')) {
                self->value[id] = self->argv[++i];
            } else {
                return s_fail(self, "error: option '%s' argument missing", s_specs[id].usage);
            }
            continue;
        }
        /* ARG_MANY: values until the next argument that starts with '-'. */
        if (self->values[id] == NULL)
            self->values[id] = json_array();
        int taken = 0;
        if (inline_value != NULL) {
            json_array_append_new(self->values[id], json_string(inline_value));
            taken++;
        }
        while (i + 1 < self->argc && self->argv[i + 1][0] != '-') {
            json_array_append_new(self->values[id], json_string(self->argv[++i]));
            taken++;
        }
        if (taken == 0)
            return s_fail(self, "error: option '%s' argument missing", s_specs[id].usage);
    }
    if (positionals > 1)
        return s_fail(self, "error: too many arguments. Expected 1 argument but got %d.",
                      positionals);
    return 0;
}

/* commander's "choices" check. Returns 0 or exit code 1 after printing the error. */
static int s_check_choice(fake_t *self, int id, const char *const *accepted, const char *shown)
{
    const char *value = self->value[id];
    if (value == NULL)
        return 0;
    for (int i = 0; accepted[i] != NULL; i++)
        if (strcmp(accepted[i], value) == 0)
            return 0;
    return s_fail(self, "error: option '%s' argument '%s' is invalid. Allowed choices are %s.",
                  s_specs[id].usage, value, shown);
}

static int s_check_choices(fake_t *self)
{
    static const char *const output_formats[] = {"text", "json", "stream-json", NULL};
    static const char *const input_formats[] = {"text", "stream-json", NULL};
    static const char *const modes[] = {"acceptEdits", "auto",     "bypassPermissions", "manual",
                                        "default",     "dontAsk", "plan",              NULL};
    static const char *const prompts[] = {"host", "none", NULL};
    static const char *const on_off[] = {"on", "off", NULL};
    static const char *const efforts[] = {"low", "medium", "high", "xhigh", "max", NULL};
    int rc = s_check_choice(self, OPT_OUTPUT_FORMAT, output_formats, "text, json, stream-json");
    if (rc == 0)
        rc = s_check_choice(self, OPT_INPUT_FORMAT, input_formats, "text, stream-json");
    if (rc == 0)
        rc = s_check_choice(self, OPT_PERMISSION_MODE, modes,
                            "acceptEdits, auto, bypassPermissions, manual, dontAsk, plan");
    if (rc == 0)
        rc = s_check_choice(self, OPT_PERMISSION_PROMPTS, prompts, "host, none");
    if (rc == 0)
        rc = s_check_choice(self, OPT_SYSTEM_PROMPT_SNAPSHOT, on_off, "on, off");
    if (rc == 0)
        rc = s_check_choice(self, OPT_EFFORT, efforts, "low, medium, high, xhigh, max");
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Small helpers. */

static bool s_scenario(const fake_t *self, const char *name)
{
    return strcmp(self->scenario, name) == 0;
}

/* ---------------------------------------------------------------------------------------
 * stdin and the invocation log. */

/* Reads stdin to EOF when it is not a terminal. Like the real CLI, gives up with a warning
 * when a pipe stays silent for 3 s, so a caller that forgets to close stdin stalls, not
 * hangs. */
static void s_read_stdin(fake_t *self)
{
    bool timed_out = false;
    self->stdin_text = fake_read_stdin(FAKE_STDIN_WAIT_MS, &timed_out);
    if (timed_out)
        fprintf(stderr, "Warning: no stdin data received in 3s, proceeding without it. If piping "
                        "from a slow command, redirect stdin explicitly: < /dev/null to skip, "
                        "or wait longer.\n");
}

/* FAKE_CLAUDE_LOG=<file>: appends {argv, cwd, stdin, env} as one JSON line, once. */
static void s_write_log(fake_t *self)
{
    static const char *const env_names[] = {"PANOPTICON_AGENT_ID", "CLAUDECODE",
                                            "CLOISTER_REVIEWER", NULL};
    if (self->logged)
        return;
    self->logged = true;
    fake_log_invocation(getenv("FAKE_CLAUDE_LOG"), self->argc, self->argv, self->stdin_text,
                        env_names);
}

/* ---------------------------------------------------------------------------------------
 * The session store: ${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<encoded cwd>/<id>.jsonl */

static void s_init_store(fake_t *self)
{
    char resolved[PATH_MAX];
    if (realpath(".", resolved) == NULL)
        snprintf(resolved, sizeof resolved, "%s", self->cwd);
    snprintf(self->cwd, sizeof self->cwd, "%s", resolved);
    char encoded[PATH_MAX];
    size_t i = 0;
    for (; resolved[i] != '\0' && i + 1 < sizeof encoded; i++) {
        char c = resolved[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        encoded[i] = keep ? c : '-';
    }
    encoded[i] = '\0';
    const char *config = getenv("CLAUDE_CONFIG_DIR");
    const char *home = getenv("HOME") != NULL ? getenv("HOME") : "/";
    if (config != NULL && *config != '\0')
        snprintf(self->project_dir, sizeof self->project_dir, "%s/projects/%s", config, encoded);
    else
        snprintf(self->project_dir, sizeof self->project_dir, "%s/.claude/projects/%s", home,
                 encoded);
}

static void s_session_path(const fake_t *self, const char *id, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.jsonl", self->project_dir, id);
}

static bool s_session_exists(const fake_t *self, const char *id)
{
    char path[PATH_MAX + 600];
    s_session_path(self, id, path, sizeof path);
    return access(path, F_OK) == 0;
}

/* The newest transcript in this cwd's project directory (for --continue). */
static bool s_latest_session(const fake_t *self, char out[40])
{
    DIR *dir = opendir(self->project_dir);
    if (dir == NULL)
        return false;
    struct dirent *entry;
    struct timespec newest = {0, 0};
    bool found = false;
    while ((entry = readdir(dir)) != NULL) {
        size_t len = strlen(entry->d_name);
        if (len != 36 + 6 || strcmp(entry->d_name + 36, ".jsonl") != 0)
            continue;
        char path[PATH_MAX + 1024];
        snprintf(path, sizeof path, "%s/%s", self->project_dir, entry->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (!found || st.st_mtim.tv_sec > newest.tv_sec ||
            (st.st_mtim.tv_sec == newest.tv_sec && st.st_mtim.tv_nsec > newest.tv_nsec)) {
            newest = st.st_mtim;
            memcpy(out, entry->d_name, 36);
            out[36] = '\0';
            found = true;
        }
    }
    closedir(dir);
    return found;
}

/* Copies transcript `from` to `to` (fork, and the 1.0.x new-id-per-resume behaviour). */
static void s_session_copy(const fake_t *self, const char *from, const char *to)
{
    char from_path[PATH_MAX + 600], to_path[PATH_MAX + 600];
    s_session_path(self, from, from_path, sizeof from_path);
    s_session_path(self, to, to_path, sizeof to_path);
    fake_copy_file(from_path, to_path);
}

/* Appends one line for this turn to the transcript of self->session_id. */
static void s_session_append(const fake_t *self, const char *prompt)
{
    char path[PATH_MAX + 600], stamp[40], uuid[40];
    fake_mkdirs(self->project_dir);
    s_session_path(self, self->session_id, path, sizeof path);
    fake_timestamp(stamp);
    fake_new_uuid(uuid);
    json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "user", "sessionId",
                             self->session_id, "cwd", self->cwd, "prompt", prompt, "timestamp",
                             stamp, "uuid", uuid);
    FILE *f = fopen(path, "ab");
    if (f != NULL && line != NULL) {
        json_dumpf(line, f, JSON_COMPACT | JSON_REAL_PRECISION(10));
        fputc('\n', f);
    }
    if (f != NULL)
        fclose(f);
    json_decref(line);
}

/* ---------------------------------------------------------------------------------------
 * Output. */

/* Prints one stream-json event (stream-json mode only), then waits FAKE_CLAUDE_DELAY_MS
 * before the next one; with json + --verbose it only collects the event (the real CLI then
 * prints a JSON array of every message instead of one result). Takes ownership of `event`. */
static void s_emit(fake_t *self, json_t *event)
{
    if (self->transcript != NULL && event != NULL) {
        json_array_append(self->transcript, event);
    } else if (strcmp(self->output_format, "stream-json") == 0 && event != NULL) {
        if (!self->first_event && self->delay_ms > 0)
            fake_sleep_ms(self->delay_ms);
        self->first_event = false;
        json_dumpf(event, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        fflush(stdout);
    }
    json_decref(event);
}

static const char *s_model(const fake_t *self)
{
    const char *model = self->value[OPT_MODEL];
    if (model == NULL)
        return FAKE_DEFAULT_MODEL;
    if (strcmp(model, "sonnet") == 0 || strcmp(model, "opusplan") == 0)
        return "claude-sonnet-5";
    if (strcmp(model, "haiku") == 0)
        return "claude-haiku-4-5-20251001";
    if (strcmp(model, "opus") == 0)
        return "claude-opus-4-8";
    return model;
}

static const char *s_permission_mode(const fake_t *self)
{
    if (self->given[OPT_DANGEROUSLY_SKIP_PERMISSIONS])
        return "bypassPermissions";
    return self->value[OPT_PERMISSION_MODE] != NULL ? self->value[OPT_PERMISSION_MODE]
                                                    : "default";
}

/* The init tool list: the default set, or what --tools names ("" = none). */
static json_t *s_tools(const fake_t *self)
{
    static const char *const defaults[] = {"Task", "Bash",     "Edit",      "Read", "Write",
                                           "Glob", "Grep",     "WebFetch",  "WebSearch", NULL};
    json_t *tools = json_array();
    json_t *given = self->values[OPT_TOOLS];
    bool use_default = given == NULL;
    size_t i;
    json_t *item;
    json_array_foreach(given, i, item) {
        if (strcmp(json_string_value(item), "default") == 0)
            use_default = true;
    }
    if (use_default) {
        for (int k = 0; defaults[k] != NULL; k++)
            json_array_append_new(tools, json_string(defaults[k]));
        return tools;
    }
    json_array_foreach(given, i, item) {
        char *copy = strdup(json_string_value(item));
        char *save = NULL;
        for (char *tok = strtok_r(copy, ", ", &save); tok != NULL;
             tok = strtok_r(NULL, ", ", &save))
            json_array_append_new(tools, json_string(tok));
        free(copy);
    }
    return tools;
}

static void s_emit_init(fake_t *self)
{
    char uuid[40];
    fake_new_uuid(uuid);
    json_t *event = json_pack(
        "{s:s, s:s, s:s, s:o, s:[], s:s, s:s, s:s, s:s, s:s, s:s, s:[], s:s, s:s}", "subtype",
        "init", "cwd", self->cwd, "session_id", self->init_id, "tools", s_tools(self),
        "mcp_servers", "model", s_model(self), "permissionMode", s_permission_mode(self),
        "apiKeySource", "none", "claude_code_version", FAKE_VERSION, "output_style", "default",
        "type", "system", "plugins", "uuid", uuid, "fast_mode_state", "off");
    s_emit(self, event);
}

static void s_emit_unknown(fake_t *self)
{
    char uuid[40];
    fake_new_uuid(uuid);
    json_t *event = json_pack("{s:{s:s, s:i, s:s}, s:s, s:s, s:s}", "rate_limit_info", "status",
                              "allowed", "resetsAt", 1900000000, "rateLimitType", "five_hour",
                              "uuid", uuid, "session_id", self->session_id, "type",
                              "rate_limit_event");
    s_emit(self, event);
}

/* Token counts of one API call (FAKE_CLAUDE_INPUT_TOKENS / _OUTPUT_TOKENS, 500 cache
 * creation, 2000 cache read): every call of a run reports the same. */
typedef struct {
    int input, cache_creation, cache_read, output;
} fake_usage_t;

static fake_usage_t s_call_usage(void)
{
    fake_usage_t u = {fake_env_int("FAKE_CLAUDE_INPUT_TOKENS", 1000), 500, 2000,
                      fake_env_int("FAKE_CLAUDE_OUTPUT_TOKENS", 200)};
    return u;
}

/* The usage of one assistant message: that call's own counts, or zeros for a synthetic
 * error message (which never reached the model, as with the real CLI). */
static json_t *s_message_usage(bool synthetic)
{
    fake_usage_t u = s_call_usage();
    if (synthetic)
        u.input = u.cache_creation = u.cache_read = u.output = 0;
    return json_pack("{s:i, s:i, s:i, s:i, s:s}", "input_tokens", u.input,
                     "cache_creation_input_tokens", u.cache_creation, "cache_read_input_tokens",
                     u.cache_read, "output_tokens", u.output, "service_tier", "standard");
}

/* An assistant message with `content` (owned: taken). `error` may be NULL. */
static void s_emit_assistant(fake_t *self, json_t *content, const char *stop_reason,
                             const char *error)
{
    char msg_id[40], uuid[40];
    fake_new_uuid(msg_id);
    fake_new_uuid(uuid);
    json_t *message = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:n, s:o}", "id", msg_id, "type",
                                "message", "role", "assistant", "model",
                                error != NULL ? "<synthetic>" : s_model(self), "content", content,
                                "stop_reason", stop_reason, "stop_sequence", "usage",
                                s_message_usage(error != NULL));
    if (error == NULL)
        self->api_calls++;
    json_t *event = json_pack("{s:o, s:n, s:s, s:s, s:s}", "message", message,
                              "parent_tool_use_id", "session_id", self->session_id, "uuid", uuid,
                              "type", "assistant");
    if (error != NULL) {
        json_object_set_new(event, "error", json_string(error));
        json_object_set_new(event, "is_api_error_message", json_true());
    }
    s_emit(self, event);
}

static void s_emit_text(fake_t *self, const char *text, const char *error)
{
    s_emit_assistant(self, json_pack("[{s:s, s:s}]", "type", "text", "text", text),
                     error != NULL ? "stop_sequence" : "end_turn", error);
}

/* One action of the script: an assistant tool_use and the user tool_result. */
static void s_report_step(const fake_step_t *step, void *arg)
{
    fake_t *self = arg;
    self->tool_steps++;
    char tool_id[40], uuid[40], stamp[40];
    snprintf(tool_id, sizeof tool_id, "toolu_fake%06d", self->tool_steps);
    json_t *content = json_pack("[{s:s, s:s, s:s, s:O}]", "type", "tool_use", "id", tool_id,
                                "name", step->tool, "input", step->input);
    s_emit_assistant(self, content, "tool_use", NULL);

    fake_new_uuid(uuid);
    fake_timestamp(stamp);
    json_t *result = json_pack(
        "{s:{s:s, s:[{s:s, s:s, s:s, s:b}]}, s:n, s:s, s:s, s:s, s:{s:s, s:s, s:b, s:b, s:i}, "
        "s:s}",
        "message", "role", "user", "content", "tool_use_id", tool_id, "type", "tool_result",
        "content", step->output, "is_error", step->is_error, "parent_tool_use_id", "session_id",
        self->session_id, "uuid", uuid, "timestamp", stamp, "tool_use_result", "stdout",
        step->output, "stderr", "", "interrupted", false, "isImage", false, "exit_code",
        step->exit_code, "type", "user");
    s_emit(self, result);
}

/* Builds the result object in the 2.1.330 key order (type is not first). `text` is the
 * result text (NULL: no result key, as in the error subtypes); `error` the one entry of
 * errors[] (NULL: no errors key). */
static json_t *s_result(fake_t *self, const char *subtype, bool is_error, const char *text,
                        const char *error, const char *terminal_reason)
{
    /* Like the real CLI, the result totals every API call of the run (so the cached context
     * counts once per call); a billed run that printed no assistant message counts one. */
    fake_usage_t u = s_call_usage();
    bool billed = !self->unbilled;
    int calls = !billed ? 0 : self->api_calls > 0 ? self->api_calls : 1;
    int input_tokens = u.input * calls, output_tokens = u.output * calls;
    int cache_creation = u.cache_creation * calls, cache_read = u.cache_read * calls;
    double cost = (input_tokens * 3.0 + cache_creation * 3.75 + cache_read * 0.3 +
                   output_tokens * 15.0) / 1e6;
    const char *cost_env = getenv("FAKE_CLAUDE_COST_USD");
    if (billed && cost_env != NULL && *cost_env != '\0')
        cost = strtod(cost_env, NULL);
    int num_turns = billed ? self->tool_steps + 1 : 0;
    int64_t duration = clock_now_ms() - self->started_ms;
    char uuid[40];
    fake_new_uuid(uuid);

    json_t *usage = json_pack("{s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:s}", "input_tokens",
                              input_tokens, "cache_creation_input_tokens", cache_creation,
                              "cache_read_input_tokens", cache_read, "output_tokens",
                              output_tokens, "server_tool_use", "web_search_requests", 0,
                              "web_fetch_requests", 0, "service_tier", "standard");
    json_t *result = json_pack(
        "{s:I, s:s?, s:s, s:f, s:o, s:{}, s:[], s:s, s:s, s:b, s:i, s:s, s:n}", "duration_api_ms",
        (json_int_t)(duration > 1 ? duration - 1 : 0), "stop_reason",
        is_error ? NULL : "end_turn", "session_id", self->session_id, "total_cost_usd", cost,
        "usage", usage, "modelUsage", "permission_denials", "terminal_reason", terminal_reason,
        "fast_mode_state", "off", "is_error", is_error, "num_turns", num_turns, "subtype",
        subtype, "api_error_status");
    if (text != NULL)
        json_object_set_new(result, "result", json_string(text));
    json_object_set_new(result, "type", json_string("result"));
    json_object_set_new(result, "duration_ms", json_integer((json_int_t)duration));
    json_object_set_new(result, "uuid", json_string(uuid));
    if (error != NULL)
        json_object_set_new(result, "errors", json_pack("[s]", error));
    return result;
}

/* Prints the result in the chosen format: the event (stream-json), the object (json) or
 * `text` (text). Takes ownership of `result`. */
static void s_print_result(fake_t *self, json_t *result, const char *text)
{
    if (strcmp(self->output_format, "stream-json") == 0) {
        s_emit(self, result);
        return;
    }
    if (self->transcript != NULL) {
        s_emit(self, result);
        json_dumpf(self->transcript, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        fflush(stdout);
        return;
    }
    if (strcmp(self->output_format, "json") == 0)
        json_dumpf(result, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10));
    else
        fputs(text, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(result);
}

/* ---------------------------------------------------------------------------------------
 * Validation (§6 order) and the run itself. */

/* The prompt: the argument and stdin joined with "\n". With --input-format stream-json the
 * stdin lines are user messages whose text is taken instead. Caller frees. */
static char *s_prompt(const fake_t *self)
{
    const char *arg = self->prompt_arg != NULL ? self->prompt_arg : "";
    const char *input = self->stdin_text != NULL ? self->stdin_text : "";
    char *from_json = NULL;
    if (self->value[OPT_INPUT_FORMAT] != NULL &&
        strcmp(self->value[OPT_INPUT_FORMAT], "stream-json") == 0) {
        size_t size = strlen(input) + 1;
        from_json = calloc(1, size);
        char *copy = strdup(input);
        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line != NULL && from_json != NULL;
             line = strtok_r(NULL, "\n", &save)) {
            json_t *msg = json_loads(line, 0, NULL);
            const char *content = json_string_value(json_object_get(
                json_object_get(msg, "message"), "content"));
            if (content != NULL && strlen(from_json) + strlen(content) + 2 <= size) {
                if (from_json[0] != '\0')
                    strcat(from_json, "\n");
                strcat(from_json, content);
            }
            json_decref(msg);
        }
        free(copy);
        input = from_json != NULL ? from_json : "";
    }
    size_t len = strlen(arg) + strlen(input) + 2;
    char *prompt = malloc(len);
    if (prompt != NULL) {
        if (*arg != '\0' && *input != '\0')
            snprintf(prompt, len, "%s\n%s", arg, input);
        else
            snprintf(prompt, len, "%s", *arg != '\0' ? arg : input);
    }
    free(from_json);
    return prompt;
}

static bool s_is_root_bypass_refused(const fake_t *self)
{
    bool bypass = self->given[OPT_DANGEROUSLY_SKIP_PERMISSIONS] ||
                  (self->value[OPT_PERMISSION_MODE] != NULL &&
                   strcmp(self->value[OPT_PERMISSION_MODE], "bypassPermissions") == 0);
    const char *sandbox = getenv("IS_SANDBOX");
    const char *bubblewrap = getenv("CLAUDE_CODE_BUBBLEWRAP");
    return bypass && getuid() == 0 && (sandbox == NULL || strcmp(sandbox, "1") != 0) &&
           (bubblewrap == NULL || *bubblewrap == '\0');
}

/* Checks 1-7 of §6 and settles which session this run reads and writes. Returns 0 or the
 * exit code. `resumed` is set to the transcript continued (empty for a new session). */
static int s_validate(fake_t *self, char resumed[40])
{
    bool stream = strcmp(self->output_format, "stream-json") == 0;
    const char *session_id = self->value[OPT_SESSION_ID];
    const char *resume = self->value[OPT_RESUME];
    bool resuming = self->given[OPT_RESUME] || self->given[OPT_CONTINUE];
    resumed[0] = '\0';

    if (stream && !self->given[OPT_VERBOSE])
        return s_fail(self,
                      "Error: When using --print, --output-format=stream-json requires --verbose");
    if (self->value[OPT_INPUT_FORMAT] != NULL &&
        strcmp(self->value[OPT_INPUT_FORMAT], "stream-json") == 0 && !stream)
        return s_fail(self, "Error: --input-format=stream-json requires output-format=stream-json.");
    if (session_id != NULL && !fake_is_uuid(session_id))
        return s_fail(self, "Error: Invalid session ID. Must be a valid UUID.");
    if (session_id != NULL && resuming && !self->given[OPT_FORK_SESSION])
        return s_fail(self, "Error: --session-id with --continue or --resume also needs "
                            "--fork-session.");
    if (session_id != NULL && s_session_exists(self, session_id))
        return s_fail(self, "Error: Session ID %s is already in use.", session_id);
    if (resume != NULL && !fake_is_uuid(resume))
        return s_fail(self,
                      "Error: --resume requires a valid session ID or session title when used "
                      "with --print. Usage: claude -p --resume <session-id|title>. Provided "
                      "value \"%s\" is not a UUID and does not match any session title.",
                      resume);
    if (resume != NULL && !s_session_exists(self, resume)) {
        fprintf(stderr, "No conversation found with session ID: %s\n", resume);
        if (stream) {
            char message[128];
            snprintf(message, sizeof message, "No conversation found with session ID: %s",
                     resume);
            snprintf(self->session_id, sizeof self->session_id, "%s", resume);
            self->unbilled = true;
            json_t *result = s_result(self, "error_during_execution", true, NULL, message,
                                      "completed");
            json_object_del(result, "terminal_reason");
            s_print_result(self, result, NULL);
        }
        s_write_log(self);
        return 1;
    }
    if (resume != NULL) {
        snprintf(resumed, 40, "%s", resume);
    } else if (self->given[OPT_CONTINUE] && !s_latest_session(self, resumed)) {
        return s_fail(self, "No conversation found to continue");
    }
    if (resumed[0] != '\0' && s_scenario(self, "in_use") && !self->given[OPT_FORK_SESSION])
        return s_fail(self, "Error: Session ID %s is already in use.", resumed);
    return 0;
}

/* Chooses the id this run writes under and prepares its transcript. */
static void s_open_session(fake_t *self, const char *resumed, const char *prompt)
{
    bool forking = resumed[0] != '\0' && self->given[OPT_FORK_SESSION];
    bool new_id = resumed[0] != '\0' && s_scenario(self, "new_id_on_resume");
    if (resumed[0] == '\0' || forking || new_id) {
        if (self->value[OPT_SESSION_ID] != NULL)
            snprintf(self->session_id, sizeof self->session_id, "%s",
                     self->value[OPT_SESSION_ID]);
        else
            fake_new_uuid(self->session_id);
    } else {
        snprintf(self->session_id, sizeof self->session_id, "%s", resumed);
    }
    if (s_scenario(self, "bogus_init_id"))
        fake_new_uuid(self->init_id);
    else
        snprintf(self->init_id, sizeof self->init_id, "%s", self->session_id);
    if (self->given[OPT_NO_SESSION_PERSISTENCE])
        return;
    fake_mkdirs(self->project_dir);
    if (forking || new_id)
        s_session_copy(self, resumed, self->session_id);
    s_session_append(self, prompt);
}

/* Whether the Bash tool runs a command unasked: in a bypass mode, or when --allowedTools
 * grants Bash ("Bash" or "Bash(...)"). Otherwise the real CLI asks, and with nobody to ask
 * (-p) refuses: "This command requires approval" (docs/agent-cli.md §3.3). It lets a few
 * commands it deems safe through on its own; the double does not tell those apart. */
static bool s_bash_allowed(const fake_t *self)
{
    if (strcmp(s_permission_mode(self), "bypassPermissions") == 0)
        return true;
    size_t i;
    json_t *value;
    json_array_foreach(self->values[OPT_ALLOWED_TOOLS], i, value)
    {
        char list[1024];
        snprintf(list, sizeof list, "%s", json_string_value(value) ? json_string_value(value) : "");
        for (char *save = NULL, *tool = strtok_r(list, ", ", &save); tool != NULL;
             tool = strtok_r(NULL, ", ", &save)) {
            if (strcmp(tool, "Bash") == 0 || strncmp(tool, "Bash(", 5) == 0)
                return true;
        }
    }
    return false;
}

/* Runs the action script, if any. Returns 0, or -1 with the reason in `error`. */
static int s_run_actions(fake_t *self, json_t *said, char *error, size_t error_size)
{
    const char *script = getenv("FAKE_CLAUDE_ACTIONS");
    if (script == NULL || *script == '\0')
        return 0;
    fake_mcp_set_configs(self->values[OPT_MCP_CONFIG]);
    fake_actions_refuse_run(s_bash_allowed(self) ? NULL : "This command requires approval");
    if (fake_actions_run(script, s_report_step, self, said) == 0)
        return 0;
    snprintf(error, error_size, "%s", failure_message());
    fprintf(stderr, "fake-claude: %s\n", error);
    return -1;
}

/* The turn after validation: events, actions and the result. Returns the exit code. */
static int s_turn(fake_t *self)
{
    if (s_scenario(self, "hang"))
        fake_hang();
    s_emit_init(self);
    s_emit_unknown(self);

    if (s_scenario(self, "auth")) {
        const char *text = "Not logged in · Please run /login";
        self->unbilled = true;
        s_emit_text(self, text, "authentication_failed");
        json_t *result = s_result(self, "success", true, text, NULL, "api_error");
        s_print_result(self, result, text);
        return 1;
    }

    json_t *said = json_array();
    char error[1024] = "";
    int actions_rc = s_run_actions(self, said, error, sizeof error);
    if (s_scenario(self, "crash")) {
        fprintf(stderr, "fake-claude: simulated crash\n");
        json_decref(said);
        return 2;
    }

    const char *knob = getenv("FAKE_CLAUDE_RESULT");
    char *joined = fake_join_lines(said);
    json_decref(said);
    const char *text = knob != NULL                          ? knob
                       : (joined != NULL && *joined != '\0') ? joined
                                                             : FAKE_DEFAULT_RESULT;
    json_t *result;
    char message[1100];
    const char *printed = text;
    bool is_error = true;
    if (actions_rc != 0) {
        result = s_result(self, "error_during_execution", true, NULL, error, "completed");
        printed = "Execution error";
    } else if (s_scenario(self, "max_turns")) {
        const char *turns = self->value[OPT_MAX_TURNS] != NULL ? self->value[OPT_MAX_TURNS] : "10";
        snprintf(message, sizeof message, "Reached maximum number of turns (%s)", turns);
        result = s_result(self, "error_max_turns", true, NULL, message, "max_turns");
        json_object_set_new(result, "stop_reason", json_string("tool_use"));
        snprintf(message, sizeof message, "Error: Reached max turns (%s)", turns);
        printed = message;
    } else if (s_scenario(self, "budget")) {
        const char *budget =
            self->value[OPT_MAX_BUDGET_USD] != NULL ? self->value[OPT_MAX_BUDGET_USD] : "1";
        snprintf(message, sizeof message, "Reached maximum budget ($%s)", budget);
        result = s_result(self, "error_max_budget_usd", true, NULL, message, "completed");
        snprintf(message, sizeof message, "Error: Exceeded USD budget (%s)", budget);
        printed = message;
    } else if (s_scenario(self, "exec_error")) {
        result = s_result(self, "error_during_execution", true, NULL,
                          "fake-claude: simulated execution error", "completed");
        printed = "Execution error";
    } else if (s_scenario(self, "exit0_on_error")) {
        text = "API Error: Rate limit reached";
        s_emit_text(self, text, "rate_limit");
        result = s_result(self, "success", true, text, NULL, "api_error");
        printed = text;
    } else {
        s_emit_text(self, text, NULL);
        result = s_result(self, "success", false, text, NULL, "completed");
        is_error = false;
    }
    s_print_result(self, result, printed);
    free(joined);
    if (s_scenario(self, "hang_after_result"))
        fake_hang();
    if (s_scenario(self, "exit0_on_error"))
        return 0;
    return is_error ? 1 : 0;
}

static bool s_known_scenario(const char *name)
{
    static const char *const known[] = {"success",   "auth",
                                        "max_turns", "budget",
                                        "exec_error", "crash",
                                        "hang_after_result", "hang",
                                        "new_id_on_resume", "bogus_init_id",
                                        "exit0_on_error", "in_use",
                                        NULL};
    for (int i = 0; known[i] != NULL; i++)
        if (strcmp(known[i], name) == 0)
            return true;
    return false;
}

static int s_main(fake_t *self)
{
    int rc = s_parse(self);
    if (rc != 0)
        return rc;
    if (!s_known_scenario(self->scenario))
        return s_fail(self, "fake-claude: unknown FAKE_CLAUDE_SCENARIO '%s'", self->scenario);
    if (self->given[OPT_VERSION]) {
        printf("%s (Claude Code)\n", FAKE_VERSION);
        s_write_log(self);
        return 0;
    }
    rc = s_check_choices(self);
    if (rc != 0)
        return rc;
    if (!self->given[OPT_PRINT])
        return s_fail(self, "fake-claude: only the non-interactive mode (-p/--print) is "
                            "supported");
    if (s_is_root_bypass_refused(self))
        return s_fail(self, "--dangerously-skip-permissions cannot be used with root/sudo "
                            "privileges for security reasons");
    self->output_format =
        self->value[OPT_OUTPUT_FORMAT] != NULL ? self->value[OPT_OUTPUT_FORMAT] : "text";
    if (strcmp(self->output_format, "json") == 0 && self->given[OPT_VERBOSE])
        self->transcript = json_array();
    s_read_stdin(self);
    s_write_log(self);
    s_init_store(self);

    char resumed[40];
    rc = s_validate(self, resumed);
    if (rc != 0)
        return rc;
    char *prompt = s_prompt(self);
    if (prompt == NULL || *prompt == '\0') {
        free(prompt);
        return s_fail(self, "Error: Input must be provided either through stdin or as a prompt "
                            "argument when using --print");
    }
    s_open_session(self, resumed, prompt);
    free(prompt);
    return s_turn(self);
}

/* ---------------------------------------------------------------------------------------
 * Scripted per reviewer (the review's domain reviewers run in parallel, one process each,
 * so one set of FAKE_CLAUDE_* variables cannot tell them apart): with CLOISTER_REVIEWER and
 * FAKE_CLAUDE_REVIEWER_DIR set, <dir>/<reviewer>.result, .actions, .scenario and .delay
 * stand in for FAKE_CLAUDE_RESULT, _ACTIONS, _SCENARIO and _DELAY_MS (a file that is
 * missing leaves the variable as it was); "{call}" in the result becomes the number of
 * this run of that reviewer (1, 2, ..., counted in <dir>/<reviewer>.calls), and each run
 * that ends appends {reviewer, call, start_ms, end_ms} (CLOCK_REALTIME) to <dir>/runs.jsonl. */

typedef struct {
    char dir[PATH_MAX];
    const char *name;
    int call;
    int64_t start_ms;
} reviewer_run_t;

static int64_t s_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The whole file at dir/name.suffix (caller frees), or NULL. */
static char *s_reviewer_file(const reviewer_run_t *rv, const char *suffix)
{
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s.%s", rv->dir, rv->name, suffix);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (out != NULL && (n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, out);
    fclose(f);
    if (out == NULL || fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* text with every "{call}" replaced by the call number (caller frees). */
static char *s_with_call(const char *text, int call)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (f == NULL)
        return NULL;
    for (const char *p = text; *p != '\0';) {
        if (strncmp(p, "{call}", 6) == 0) {
            fprintf(f, "%d", call);
            p += 6;
        } else {
            fputc(*p++, f);
        }
    }
    fclose(f);
    return out;
}

/* Counts this run in <dir>/<reviewer>.calls and sets the knobs from the reviewer's files.
 * Returns false when this run is not scripted per reviewer. */
static bool s_reviewer_begin(reviewer_run_t *rv)
{
    const char *dir = getenv("FAKE_CLAUDE_REVIEWER_DIR");
    rv->name = getenv("CLOISTER_REVIEWER");
    if (dir == NULL || *dir == '\0' || rv->name == NULL || *rv->name == '\0' ||
        strchr(rv->name, '/') != NULL)
        return false;
    snprintf(rv->dir, sizeof rv->dir, "%s", dir);
    rv->start_ms = s_realtime_ms();
    char *calls = s_reviewer_file(rv, "calls");
    rv->call = (calls ? atoi(calls) : 0) + 1;
    free(calls);
    char path[PATH_MAX + 128];
    snprintf(path, sizeof path, "%s/%s.calls", rv->dir, rv->name);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%d\n", rv->call);
        fclose(f);
    }
    /* {file suffix, variable, whole text (else its first line)} */
    static const struct {
        const char *suffix, *variable;
        bool whole;
    } knobs[] = {{"result", "FAKE_CLAUDE_RESULT", true},
                 {"actions", "FAKE_CLAUDE_ACTIONS", true},
                 {"scenario", "FAKE_CLAUDE_SCENARIO", false},
                 {"delay", "FAKE_CLAUDE_DELAY_MS", false}};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        char *text = s_reviewer_file(rv, knobs[i].suffix);
        if (text == NULL)
            continue;
        if (!knobs[i].whole)
            text[strcspn(text, "\n")] = '\0';
        char *value = s_with_call(text, rv->call);
        setenv(knobs[i].variable, value ? value : text, 1);
        free(value);
        free(text);
    }
    return true;
}

/* Appends the run's line to <dir>/runs.jsonl. */
static void s_reviewer_end(const reviewer_run_t *rv)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/runs.jsonl", rv->dir);
    char line[512];
    int n = snprintf(line, sizeof line,
                     "{\"reviewer\":\"%s\",\"call\":%d,\"start_ms\":%lld,\"end_ms\":%lld}\n",
                     rv->name, rv->call, (long long)rv->start_ms, (long long)s_realtime_ms());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0 && n > 0 && (size_t)n < sizeof line && write(fd, line, (size_t)n) < 0)
        fprintf(stderr, "fake-claude: cannot write %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    reviewer_run_t reviewer = {0};
    bool per_reviewer = s_reviewer_begin(&reviewer);
    static fake_t fake;
    fake.argc = argc;
    fake.argv = argv;
    fake.first_event = true;
    fake.started_ms = clock_now_ms();
    fake.delay_ms = fake_env_int("FAKE_CLAUDE_DELAY_MS", 0);
    fake.scenario = getenv("FAKE_CLAUDE_SCENARIO") != NULL && *getenv("FAKE_CLAUDE_SCENARIO")
                        ? getenv("FAKE_CLAUDE_SCENARIO")
                        : "success";
    fake.output_format = "text";
    if (getcwd(fake.cwd, sizeof fake.cwd) == NULL)
        snprintf(fake.cwd, sizeof fake.cwd, ".");
    int rc = s_main(&fake);
    if (per_reviewer)
        s_reviewer_end(&reviewer);
    free(fake.stdin_text);
    json_decref(fake.transcript);
    for (int i = 0; i < OPT_COUNT; i++)
        json_decref(fake.values[i]);
    return rc;
}
