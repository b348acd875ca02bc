/* fake-gemini: a test double for the Gemini CLI in headless mode (`gemini -p ... -o
 * stream-json`).
 *
 * It follows the contract in docs/agent-gemini.md §8: the options of release 0.61.0, refused
 * the way yargs refuses them (the message, then the help, exit 1); the same order of checks
 * and the same exit codes (42 bad session / no input, 41 no auth, 55 untrusted folder); stdin
 * joined before the -p text; chat files laid out like the real ones under
 * ~/.gemini/tmp/<project>/chats; and the stream-json events. Environment knobs choose a
 * scenario and an action script (fake_actions.h). See README.md next to this file. */
#include "clock.h"
#include "failure.h"
#include "fake_actions.h"
#include "fake_common.h"
#include "fake_mcp.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_VERSION "0.61.0"
#define FAKE_DEFAULT_RESULT "Done."
#define FAKE_AUTO_MODEL "gemini-3.1-pro-preview" /* what "auto" picked in the observed runs */
#define FAKE_STDIN_WAIT_MS 500                  /* gemini gives up on a silent pipe after 500 ms */

/* `gemini --help` of 0.61.0 as printed into a pipe (no wrapping); yargs prints it after
 * every argument error too. */
static const char s_help[] =
    "Usage: gemini [options] [command]\n"
    "\n"
    "Gemini CLI - Defaults to interactive mode. Use -p/--prompt for non-interactive "
    "(headless) mode.\n"
    "\n"
    "Commands:\n"
    "  gemini mcp                   Manage MCP servers\n"
    "  gemini extensions <command>  Manage Gemini CLI extensions.  [aliases: extension]\n"
    "  gemini skills <command>      Manage agent skills.  [aliases: skill]\n"
    "  gemini hooks <command>       Manage Gemini CLI hooks.  [aliases: hook]\n"
    "  gemini gemma                 Manage local Gemma model routing\n"
    "  gemini [query..]             Launch Gemini CLI  [default]\n"
    "\n"
    "Positionals:\n"
    "  query  Initial prompt. Runs in interactive mode by default; use -p/--prompt "
    "for non-interactive.\n"
    "\n"
    "Options:\n"
    "  -d, --debug                     Run in debug mode (open debug console with "
    "F12)  [boolean] [default: false]\n"
    "  -m, --model                     Model  [string]\n"
    "  -p, --prompt                    Run in non-interactive (headless) mode with "
    "the given prompt. Appended to input on stdin (if any).  [string]\n"
    "  -i, --prompt-interactive        Execute the provided prompt and continue in "
    "interactive mode  [string]\n"
    "      --skip-trust                Trust the current workspace for this session. "
    " [boolean] [default: false]\n"
    "  -w, --worktree                  Start Gemini in a new git worktree. If no "
    "name is provided, one is generated automatically.  [string]\n"
    "  -s, --sandbox                   Run in sandbox?  [boolean]\n"
    "  -y, --yolo                      Automatically accept all actions (aka YOLO "
    "mode, see https://www.youtube.com/watch?v=xvFZjo5PgG0 for more details)?  [boolean] [default: false]\n"
    "      --approval-mode             Set the approval mode: default (prompt for "
    "approval), auto_edit (auto-approve edit tools), yolo (auto-approve all tools), plan (read-only mode)  [string] [choices: \"default\", \"auto_edit\", \"yolo\", \"plan\"]\n"
    "      --policy                    Additional policy files or directories to "
    "load (comma-separated or multiple --policy)  [array]\n"
    "      --admin-policy              Additional admin policy files or directories "
    "to load (comma-separated or multiple --admin-policy)  [array]\n"
    "      --acp                       Starts the agent in ACP mode  [boolean]\n"
    "      --experimental-acp          Starts the agent in ACP mode (deprecated, use "
    "--acp instead)  [boolean]\n"
    "      --allowed-mcp-server-names  Allowed MCP server names  [array]\n"
    "      --allowed-tools             [DEPRECATED: Use Policy Engine instead See "
    "https://geminicli.com/docs/core/policy-engine] Tools that are allowed to run without confirmation  [array]\n"
    "  -e, --extensions                A list of extensions to use. If not provided, "
    "all extensions are used.  [array]\n"
    "  -l, --list-extensions           List all available extensions and exit.  [boolean]\n"
    "  -r, --resume                    Resume a previous session. Use \"latest\" for "
    "most recent or index number (e.g. --resume 5)  [string]\n"
    "      --session-file              Load a session from a JSON file  [string]\n"
    "      --session-id                Start a new session with a manually provided "
    "UUID.  [string]\n"
    "      --list-sessions             List available sessions for the current "
    "project and exit.  [boolean]\n"
    "      --delete-session            Delete a session by index number (use "
    "--list-sessions to see available sessions).  [string]\n"
    "      --include-directories       Additional directories to include in the "
    "workspace (comma-separated or multiple --include-directories)  [array]\n"
    "      --screen-reader             Enable screen reader mode for accessibility.  "
    "[boolean]\n"
    "  -o, --output-format             The format of the CLI output.  [string] "
    "[choices: \"text\", \"json\", \"stream-json\"]\n"
    "      --raw-output                Disable sanitization of model output (e.g. "
    "allow ANSI escape sequences). WARNING: This can be a security risk if the model output is untrusted.  [boolean]\n"
    "      --accept-raw-output-risk    Suppress the security warning when using "
    "--raw-output.  [boolean]\n"
    "  -v, --version                   Show version number  [boolean]\n"
    "  -h, --help                      Show help  [boolean]\n";

/* ---------------------------------------------------------------------------------------
 * Command line: the options of `gemini [query..]`, parsed the way yargs (strict mode) does:
 * --name value, --name=value, -x value, camelCase spellings, --no-<boolean>. */

typedef enum { ARG_BOOL, ARG_STRING, ARG_OPTIONAL, ARG_ARRAY } arg_kind_t;

typedef enum {
    OPT_DEBUG,
    OPT_MODEL,
    OPT_PROMPT,
    OPT_PROMPT_INTERACTIVE,
    OPT_SKIP_TRUST,
    OPT_WORKTREE,
    OPT_SANDBOX,
    OPT_YOLO,
    OPT_APPROVAL_MODE,
    OPT_POLICY,
    OPT_ADMIN_POLICY,
    OPT_ACP,
    OPT_EXPERIMENTAL_ACP,
    OPT_ALLOWED_MCP_SERVER_NAMES,
    OPT_ALLOWED_TOOLS,
    OPT_EXTENSIONS,
    OPT_LIST_EXTENSIONS,
    OPT_RESUME,
    OPT_SESSION_FILE,
    OPT_SESSION_ID,
    OPT_LIST_SESSIONS,
    OPT_DELETE_SESSION,
    OPT_INCLUDE_DIRECTORIES,
    OPT_SCREEN_READER,
    OPT_OUTPUT_FORMAT,
    OPT_FAKE_RESPONSES,
    OPT_FAKE_RESPONSES_NON_STRICT,
    OPT_RECORD_RESPONSES,
    OPT_RAW_OUTPUT,
    OPT_ACCEPT_RAW_OUTPUT_RISK,
    OPT_IS_COMMAND,
    OPT_VERSION,
    OPT_HELP,
    OPT_COUNT
} option_id_t;

typedef struct {
    const char *name; /* the kebab-case name, without "--" */
    char alias;       /* the one-letter alias, or 0 */
    arg_kind_t kind;
} option_spec_t;

static const option_spec_t s_specs[OPT_COUNT] = {
    [OPT_DEBUG] = {"debug", 'd', ARG_BOOL},
    [OPT_MODEL] = {"model", 'm', ARG_STRING},
    [OPT_PROMPT] = {"prompt", 'p', ARG_STRING},
    [OPT_PROMPT_INTERACTIVE] = {"prompt-interactive", 'i', ARG_STRING},
    [OPT_SKIP_TRUST] = {"skip-trust", 0, ARG_BOOL},
    [OPT_WORKTREE] = {"worktree", 'w', ARG_OPTIONAL},
    [OPT_SANDBOX] = {"sandbox", 's', ARG_BOOL},
    [OPT_YOLO] = {"yolo", 'y', ARG_BOOL},
    [OPT_APPROVAL_MODE] = {"approval-mode", 0, ARG_STRING},
    [OPT_POLICY] = {"policy", 0, ARG_ARRAY},
    [OPT_ADMIN_POLICY] = {"admin-policy", 0, ARG_ARRAY},
    [OPT_ACP] = {"acp", 0, ARG_BOOL},
    [OPT_EXPERIMENTAL_ACP] = {"experimental-acp", 0, ARG_BOOL},
    [OPT_ALLOWED_MCP_SERVER_NAMES] = {"allowed-mcp-server-names", 0, ARG_ARRAY},
    [OPT_ALLOWED_TOOLS] = {"allowed-tools", 0, ARG_ARRAY},
    [OPT_EXTENSIONS] = {"extensions", 'e', ARG_ARRAY},
    [OPT_LIST_EXTENSIONS] = {"list-extensions", 'l', ARG_BOOL},
    [OPT_RESUME] = {"resume", 'r', ARG_OPTIONAL},
    [OPT_SESSION_FILE] = {"session-file", 0, ARG_STRING},
    [OPT_SESSION_ID] = {"session-id", 0, ARG_STRING},
    [OPT_LIST_SESSIONS] = {"list-sessions", 0, ARG_BOOL},
    [OPT_DELETE_SESSION] = {"delete-session", 0, ARG_OPTIONAL},
    [OPT_INCLUDE_DIRECTORIES] = {"include-directories", 0, ARG_ARRAY},
    [OPT_SCREEN_READER] = {"screen-reader", 0, ARG_BOOL},
    [OPT_OUTPUT_FORMAT] = {"output-format", 'o', ARG_STRING},
    [OPT_FAKE_RESPONSES] = {"fake-responses", 0, ARG_OPTIONAL},
    [OPT_FAKE_RESPONSES_NON_STRICT] = {"fake-responses-non-strict", 0, ARG_OPTIONAL},
    [OPT_RECORD_RESPONSES] = {"record-responses", 0, ARG_OPTIONAL},
    [OPT_RAW_OUTPUT] = {"raw-output", 0, ARG_BOOL},
    [OPT_ACCEPT_RAW_OUTPUT_RISK] = {"accept-raw-output-risk", 0, ARG_BOOL},
    [OPT_IS_COMMAND] = {"isCommand", 0, ARG_BOOL},
    [OPT_VERSION] = {"version", 'v', ARG_BOOL},
    [OPT_HELP] = {"help", 'h', ARG_BOOL},
};

/* Everything one invocation knows; lives for the whole process. */
typedef struct {
    int argc;
    char **argv;
    bool given[OPT_COUNT];
    bool flag[OPT_COUNT];         /* ARG_BOOL: its value */
    const char *value[OPT_COUNT]; /* ARG_STRING / ARG_OPTIONAL: the last value ("" if none) */
    json_t *values[OPT_COUNT];    /* ARG_ARRAY: every value, comma-separated ones split */
    json_t *query;                /* positional words */
    json_t *unknown;              /* unknown option names, as yargs lists them */
    char *stdin_text;
    char *input; /* what the model is sent: stdin, a blank line, then the -p text */
    bool logged;

    const char *scenario;
    const char *output_format;
    char model[256];       /* what init reports: -m, $GEMINI_MODEL or "auto" */
    char stats_model[256]; /* the model the calls are counted under */
    char cwd[PATH_MAX];
    char gemini_dir[PATH_MAX];   /* ${GEMINI_CLI_HOME:-$HOME}/.gemini */
    char chats_dir[PATH_MAX * 2]; /* <gemini_dir>/tmp/<project>/chats */
    char session_id[128];
    char session_file[PATH_MAX * 2 + 300];
    bool resumed;
    bool trusted;
    int64_t started_ms;
    int delay_ms;
    bool first_event;
    int tool_steps;
    json_t *tool_errors; /* stats.tool_calls counts them too */
} fake_t;

static void s_write_log(fake_t *self)
{
    /* GEMINI_CLI=1 is what gemini sets for the commands it runs: seeing it here means a run
     * was started from inside another gemini run */
    static const char *const env_names[] = {"PANOPTICON_AGENT_ID", "GEMINI_CLI_HOME", "GEMINI_CLI",
                                            NULL};
    if (self->logged)
        return;
    self->logged = true;
    fake_log_invocation(getenv("FAKE_GEMINI_LOG"), self->argc, self->argv, self->stdin_text,
                        env_names);
}

/* Prints one line (printf style) on stderr, writes the invocation log, returns `code`. */
__attribute__((format(printf, 3, 4))) static int s_fail(fake_t *self, int code, const char *fmt,
                                                         ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    s_write_log(self);
    return code;
}

/* A yargs failure: the message, the whole help, exit 1 (all on stderr). */
__attribute__((format(printf, 2, 3))) static int s_yargs_error(fake_t *self, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(s_help, stderr);
    s_write_log(self);
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Parsing. */

/* "skipTrust" -> "skip-trust": yargs knows every option under both spellings. */
static void s_kebab(const char *name, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = name; *c && n + 2 < size; c++) {
        if (isupper((unsigned char)*c) && c != name) {
            out[n++] = '-';
            out[n++] = (char)tolower((unsigned char)*c);
        } else {
            out[n++] = *c;
        }
    }
    out[n] = '\0';
}

/* "bogus-flag" -> "bogusFlag", for the "Unknown arguments" list. */
static void s_camel(const char *name, char *out, size_t size)
{
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < size; c++) {
        if (*c == '-' && c[1] != '\0' && c != name)
            out[n++] = (char)toupper((unsigned char)*++c);
        else
            out[n++] = *c;
    }
    out[n] = '\0';
}

static int s_find_long(const char *name)
{
    char kebab[256];
    s_kebab(name, kebab, sizeof kebab);
    for (int i = 0; i < OPT_COUNT; i++)
        if (strcmp(s_specs[i].name, name) == 0 || strcmp(s_specs[i].name, kebab) == 0)
            return i;
    return -1;
}

static int s_find_alias(char c)
{
    for (int i = 0; i < OPT_COUNT; i++)
        if (s_specs[i].alias == c)
            return i;
    return -1;
}

/* yargs-parser takes the next argument as a value unless it looks like an option. */
static bool s_looks_like_option(const char *arg)
{
    return arg[0] == '-' && arg[1] != '\0' && !isdigit((unsigned char)arg[1]);
}

static void s_note_unknown(fake_t *self, const char *name)
{
    json_array_append_new(self->unknown, json_string(name));
    char camel[256];
    s_camel(name, camel, sizeof camel);
    if (strcmp(camel, name) != 0)
        json_array_append_new(self->unknown, json_string(camel));
}

/* Stores option `id` from argv[*i]; `key` is how it was written (for messages), `inline_value`
 * the text after '=' or NULL. Returns 0 or the exit code. */
static int s_take(fake_t *self, int id, const char *key, const char *inline_value, bool negated,
                  int *i)
{
    const char *next = *i + 1 < self->argc ? self->argv[*i + 1] : NULL;
    self->given[id] = true;
    switch (s_specs[id].kind) {
    case ARG_BOOL:
        if (inline_value != NULL) {
            self->flag[id] = strcmp(inline_value, "false") != 0;
        } else if (next != NULL && (strcmp(next, "true") == 0 || strcmp(next, "false") == 0)) {
            self->flag[id] = strcmp(next, "true") == 0;
            (*i)++;
        } else {
            self->flag[id] = !negated;
        }
        return 0;
    case ARG_OPTIONAL:
        if (inline_value == NULL && next != NULL && !s_looks_like_option(next))
            inline_value = self->argv[++*i];
        self->value[id] = inline_value != NULL ? inline_value : "";
        return 0;
    case ARG_STRING:
    case ARG_ARRAY:
        if (inline_value == NULL) {
            if (next == NULL || s_looks_like_option(next))
                return s_yargs_error(self, "Not enough arguments following: %s", key);
            inline_value = self->argv[++*i];
        }
        self->value[id] = inline_value;
        if (s_specs[id].kind == ARG_ARRAY) {
            if (self->values[id] == NULL)
                self->values[id] = json_array();
            char *copy = strdup(inline_value), *save = NULL;
            for (char *part = strtok_r(copy, ",", &save); part != NULL;
                 part = strtok_r(NULL, ",", &save))
                json_array_append_new(self->values[id], json_string(part));
            free(copy);
        }
        return 0;
    }
    return 0;
}

static int s_parse_arg(fake_t *self, int *i)
{
    const char *arg = self->argv[*i];
    char key[256];
    const char *inline_value = NULL;
    const char *eq = strchr(arg, '=');
    bool long_form = arg[1] == '-';
    const char *name = arg + (long_form ? 2 : 1);
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    snprintf(key, sizeof key, "%.*s", (int)len, name);
    if (eq != NULL)
        inline_value = eq + 1;
    int id = -1;
    bool negated = false;
    if (long_form) {
        id = s_find_long(key);
        if (id < 0 && strncmp(key, "no-", 3) == 0 && s_find_long(key + 3) >= 0) {
            id = s_find_long(key + 3);
            negated = true;
        }
    } else if (len == 1) {
        id = s_find_alias(key[0]);
    } else {
        /* -abc: yargs reads a group of one-letter booleans; a letter it does not know is an
         * unknown argument of its own */
        for (const char *c = key; *c; c++) {
            int one = s_find_alias(*c);
            if (one < 0 || s_specs[one].kind != ARG_BOOL) {
                char letter[2] = {*c, '\0'};
                s_note_unknown(self, letter);
                continue;
            }
            self->given[one] = self->flag[one] = true;
        }
        return 0;
    }
    if (id < 0) {
        s_note_unknown(self, key);
        /* an unknown option still takes a following value, as yargs-parser does */
        if (inline_value == NULL && *i + 1 < self->argc &&
            !s_looks_like_option(self->argv[*i + 1]))
            (*i)++;
        return 0;
    }
    return s_take(self, id, key, inline_value, negated, i);
}

static int s_parse(fake_t *self)
{
    self->query = json_array();
    self->unknown = json_array();
    bool options_done = false;
    for (int i = 1; i < self->argc; i++) {
        const char *arg = self->argv[i];
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || !s_looks_like_option(arg)) {
            json_array_append_new(self->query, json_string(arg));
            continue;
        }
        int rc = s_parse_arg(self, &i);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The coerce functions, yargs strict mode, the choices and the CLI's own check(), in the
 * order yargs runs them. Returns 0 or exit code 1. */
static int s_validate_args(fake_t *self)
{
    const char *sid = self->value[OPT_SESSION_ID];
    if (sid != NULL) {
        char trimmed[256];
        snprintf(trimmed, sizeof trimmed, "%s", sid + strspn(sid, " \t\n"));
        for (size_t n = strlen(trimmed); n > 0 && isspace((unsigned char)trimmed[n - 1]); n--)
            trimmed[n - 1] = '\0';
        if (trimmed[0] == '\0')
            return s_yargs_error(self, "The --session-id option cannot be empty.");
        if (strspn(trimmed, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
            strlen(trimmed))
            return s_yargs_error(self,
                                 "Invalid session ID \"%s\": Only alphanumeric characters, "
                                 "dashes, and underscores are allowed.",
                                 trimmed);
    }
    size_t unknown = json_array_size(self->unknown);
    if (unknown > 0) {
        char list[1024] = "";
        for (size_t i = 0; i < unknown; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     json_string_value(json_array_get(self->unknown, i)));
        return s_yargs_error(self, "Unknown argument%s: %s", unknown > 1 ? "s" : "", list);
    }
    static const char *const modes[] = {"default", "auto_edit", "yolo", "plan", NULL};
    static const char *const formats[] = {"text", "json", "stream-json", NULL};
    const struct {
        int id;
        const char *const *choices;
    } choice_checks[] = {{OPT_APPROVAL_MODE, modes}, {OPT_OUTPUT_FORMAT, formats}};
    for (size_t c = 0; c < 2; c++) {
        const char *value = self->value[choice_checks[c].id];
        if (value == NULL)
            continue;
        bool ok = false;
        char shown[256] = "";
        for (int k = 0; choice_checks[c].choices[k] != NULL; k++) {
            ok = ok || strcmp(value, choice_checks[c].choices[k]) == 0;
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s\"%s\"",
                     k ? ", " : "", choice_checks[c].choices[k]);
        }
        if (!ok)
            return s_yargs_error(self, "Invalid values:\n  Argument: %s, Given: \"%s\", Choices: %s",
                                 s_specs[choice_checks[c].id].name, value, shown);
    }
    int sessions = self->given[OPT_RESUME] + self->given[OPT_SESSION_ID] +
                   self->given[OPT_SESSION_FILE];
    if (sessions > 1)
        return s_yargs_error(self, "The flags --resume, --session-id, and --session-file are "
                                   "mutually exclusive. Please provide only one.");
    bool prompt = self->value[OPT_PROMPT] != NULL && self->value[OPT_PROMPT][0] != '\0';
    if (prompt && json_array_size(self->query) > 0)
        return s_yargs_error(self,
                             "Cannot use both a positional prompt and the --prompt (-p) flag "
                             "together");
    if (prompt && self->value[OPT_PROMPT_INTERACTIVE] != NULL &&
        self->value[OPT_PROMPT_INTERACTIVE][0] != '\0')
        return s_yargs_error(self,
                             "Cannot use both --prompt (-p) and --prompt-interactive (-i) together");
    if (self->flag[OPT_YOLO] && self->value[OPT_APPROVAL_MODE] != NULL)
        return s_yargs_error(self, "Cannot use both --yolo (-y) and --approval-mode together. Use "
                                   "--approval-mode=yolo instead.");
    if (self->given[OPT_WORKTREE])
        return s_yargs_error(self, "The --worktree flag is only available when "
                                   "experimental.worktrees is enabled in your settings.");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Where gemini keeps things: ${GEMINI_CLI_HOME:-$HOME}/.gemini; projects.json maps each
 * project directory to a short name; chats of a project are in tmp/<name>/chats. */

static bool s_scenario(const fake_t *self, const char *name)
{
    return strcmp(self->scenario, name) == 0;
}

/* The project's short name: basename(cwd) lower-cased, [^a-z0-9] runs -> '-', then "-1",
 * "-2", ... while another project owns it (its .project_root names another directory). */
static void s_project_name(fake_t *self, char *out, size_t size)
{
    char registry[PATH_MAX + 32];
    snprintf(registry, sizeof registry, "%s/projects.json", self->gemini_dir);
    json_t *data = json_load_file(registry, 0, NULL);
    if (!json_is_object(json_object_get(data, "projects"))) {
        json_decref(data);
        data = json_pack("{s:{}}", "projects");
    }
    json_t *projects = json_object_get(data, "projects");
    const char *known = json_string_value(json_object_get(projects, self->cwd));
    if (known != NULL) {
        snprintf(out, size, "%s", known);
        json_decref(data);
        return;
    }
    const char *base = strrchr(self->cwd, '/');
    base = base != NULL && base[1] != '\0' ? base + 1 : "project";
    char slug[256];
    size_t n = 0;
    for (const char *c = base; *c && n + 1 < sizeof slug; c++) {
        char lower = (char)tolower((unsigned char)*c);
        bool keep = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9');
        if (keep)
            slug[n++] = lower;
        else if (n > 0 && slug[n - 1] != '-')
            slug[n++] = '-';
    }
    while (n > 0 && slug[n - 1] == '-')
        n--;
    slug[n] = '\0';
    if (n == 0)
        snprintf(slug, sizeof slug, "project");
    for (int counter = 0;; counter++) {
        char candidate[300], marker[PATH_MAX * 2];
        if (counter == 0)
            snprintf(candidate, sizeof candidate, "%s", slug);
        else
            snprintf(candidate, sizeof candidate, "%s-%d", slug, counter);
        snprintf(marker, sizeof marker, "%s/tmp/%s/.project_root", self->gemini_dir, candidate);
        char *owner = fake_read_file(marker);
        bool taken = owner != NULL && strcmp(owner, self->cwd) != 0;
        free(owner);
        const char *key;
        json_t *value;
        json_object_foreach(projects, key, value) {
            taken = taken || strcmp(json_string_value(value), candidate) == 0;
        }
        if (taken)
            continue;
        snprintf(out, size, "%s", candidate);
        break;
    }
    /* claim it: the registry entry and an ownership marker in tmp/ and history/ */
    json_object_set_new(projects, self->cwd, json_string(out));
    fake_mkdirs(self->gemini_dir);
    json_dump_file(data, registry, JSON_INDENT(2));
    json_decref(data);
    const char *const bases[] = {"tmp", "history"};
    for (int b = 0; b < 2; b++) {
        char dir[PATH_MAX * 2], marker[PATH_MAX * 2 + 32];
        snprintf(dir, sizeof dir, "%s/%s/%s", self->gemini_dir, bases[b], out);
        fake_mkdirs(dir);
        snprintf(marker, sizeof marker, "%s/.project_root", dir);
        FILE *f = fopen(marker, "w");
        if (f != NULL) {
            fputs(self->cwd, f);
            fclose(f);
        }
    }
}

static void s_init_store(fake_t *self)
{
    const char *home = fake_env_or("GEMINI_CLI_HOME", fake_env_or("HOME", "/"));
    snprintf(self->gemini_dir, sizeof self->gemini_dir, "%s/.gemini", home);
    char project[300];
    s_project_name(self, project, sizeof project);
    snprintf(self->chats_dir, sizeof self->chats_dir, "%s/tmp/%s/chats", self->gemini_dir,
             project);
}

/* What the fake needs of a chat file: its session id, start time, and whether it holds a
 * user message (the real CLI ignores files without one). */
typedef struct {
    char path[PATH_MAX * 2 + 300];
    char id[128];
    char start[40];
    bool resumable;
} chat_t;

static bool s_read_chat(const char *path, chat_t *chat)
{
    memset(chat, 0, sizeof *chat);
    snprintf(chat->path, sizeof chat->path, "%s", path);
    char *text = fake_read_file(path);
    for (char *line = text, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        json_t *record = json_loads(line, 0, NULL);
        json_t *set = json_object_get(record, "$set");
        const char *id = json_string_value(json_object_get(record, "sessionId"));
        if (id == NULL)
            id = json_string_value(json_object_get(set, "sessionId"));
        if (id != NULL)
            snprintf(chat->id, sizeof chat->id, "%s", id);
        const char *start = json_string_value(json_object_get(record, "startTime"));
        if (start != NULL && chat->start[0] == '\0')
            snprintf(chat->start, sizeof chat->start, "%s", start);
        const char *type = json_string_value(json_object_get(record, "type"));
        if (type != NULL && strcmp(type, "user") == 0 && json_object_get(record, "id") != NULL)
            chat->resumable = true;
        json_decref(record);
    }
    free(text);
    return chat->id[0] != '\0';
}

static int s_compare_chats(const void *a, const void *b)
{
    return strcmp(((const chat_t *)a)->start, ((const chat_t *)b)->start);
}

/* The project's resumable sessions, oldest first (as --list-sessions numbers them), one per
 * id. Returns how many; *out is malloc'd. */
static size_t s_list_chats(const fake_t *self, chat_t **out)
{
    *out = NULL;
    DIR *dir = opendir(self->chats_dir);
    if (dir == NULL)
        return 0;
    size_t count = 0, cap = 0;
    chat_t *chats = NULL;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        size_t len = strlen(entry->d_name);
        bool json = (len > 5 && strcmp(entry->d_name + len - 5, ".json") == 0) ||
                    (len > 6 && strcmp(entry->d_name + len - 6, ".jsonl") == 0);
        if (strncmp(entry->d_name, "session-", 8) != 0 || !json)
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 8;
            chat_t *bigger = realloc(chats, cap * sizeof *chats);
            if (bigger == NULL)
                break;
            chats = bigger;
        }
        char path[PATH_MAX * 2 + 300];
        snprintf(path, sizeof path, "%s/%s", self->chats_dir, entry->d_name);
        if (s_read_chat(path, &chats[count]) && chats[count].resumable)
            count++;
    }
    closedir(dir);
    if (count > 0)
        qsort(chats, count, sizeof *chats, s_compare_chats);
    *out = chats;
    return count;
}

/* Whether a chat file of `id` exists (the --session-id check: any file named for its first
 * 8 characters whose session id is `id`, resumable or not). */
static bool s_session_exists(const fake_t *self, const char *id)
{
    DIR *dir = opendir(self->chats_dir);
    if (dir == NULL)
        return false;
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%.8s.json", id);
    bool found = false;
    struct dirent *entry;
    while (!found && (entry = readdir(dir)) != NULL) {
        const char *tail = strstr(entry->d_name, suffix);
        if (strncmp(entry->d_name, "session-", 8) != 0 || tail == NULL ||
            (strcmp(tail + strlen(suffix), "") != 0 && strcmp(tail + strlen(suffix), "l") != 0))
            continue;
        char path[PATH_MAX * 2 + 300];
        chat_t chat;
        snprintf(path, sizeof path, "%s/%s", self->chats_dir, entry->d_name);
        found = s_read_chat(path, &chat) && strcmp(chat.id, id) == 0;
    }
    closedir(dir);
    return found;
}

/* --session-id / --resume, as resolveSessionId() does it. Returns 0 or exit code 42. */
static int s_resolve_session(fake_t *self)
{
    const char *sid = self->value[OPT_SESSION_ID];
    if (self->given[OPT_SESSION_FILE])
        return s_fail(self, 2, "fake-gemini: --session-file is not reproduced");
    if (sid != NULL) {
        if (s_session_exists(self, sid))
            return s_fail(self, 42,
                          "Error starting session: Session ID \"%s\" already exists. Use --resume "
                          "to resume it, or provide a different ID.",
                          sid);
        snprintf(self->session_id, sizeof self->session_id, "%s", sid);
        return 0;
    }
    if (!self->given[OPT_RESUME]) {
        fake_new_uuid(self->session_id);
        return 0;
    }
    char wanted[128];
    const char *raw = self->value[OPT_RESUME] + strspn(self->value[OPT_RESUME], " \t");
    snprintf(wanted, sizeof wanted, "%s", raw[0] != '\0' ? raw : "latest");
    chat_t *chats = NULL;
    size_t count = s_list_chats(self, &chats);
    const chat_t *pick = NULL;
    if (count == 0 && strcmp(wanted, "latest") == 0) {
        /* nothing to resume: a warning, and a new session */
        fprintf(stderr, "No previous sessions found for this project.\n");
        fake_new_uuid(self->session_id);
        free(chats);
        return 0;
    }
    if (count == 0) {
        free(chats);
        return s_fail(self, 42,
                      "Error resuming session: No previous sessions found for this project.");
    }
    if (strcmp(wanted, "latest") == 0)
        pick = &chats[count - 1];
    for (size_t i = 0; pick == NULL && i < count; i++)
        if (strcmp(chats[i].id, wanted) == 0)
            pick = &chats[i];
    char *end = NULL;
    long index = strtol(wanted, &end, 10);
    if (pick == NULL && *end == '\0' && index > 0 && (size_t)index <= count)
        pick = &chats[index - 1];
    if (pick == NULL) {
        free(chats);
        return s_fail(self, 42,
                      "Error resuming session: Invalid session identifier \"%s\".\n  Searched "
                      "for sessions in %s.\n  Use --list-sessions to see available sessions, "
                      "then use --resume {number}, --resume {uuid}, or --resume latest.",
                      wanted, self->chats_dir);
    }
    snprintf(self->session_id, sizeof self->session_id, "%s", pick->id);
    snprintf(self->session_file, sizeof self->session_file, "%s", pick->path);
    self->resumed = true;
    free(chats);
    return 0;
}

/* A 64-hex-digit stand-in for the sha256 of the project directory the real CLI records
 * (nothing reads it back; the fake does not carry a SHA-256). */
static void s_project_hash(const char *text, char out[65])
{
    uint64_t h[4] = {1469598103934665603ULL, 1099511628211ULL, 7809847782465536322ULL,
                     14695981039346656037ULL};
    for (const char *c = text; *c; c++)
        for (int k = 0; k < 4; k++)
            h[k] = (h[k] ^ (unsigned char)*c) * (1099511628211ULL + 2 * (uint64_t)k);
    snprintf(out, 65, "%016llx%016llx%016llx%016llx", (unsigned long long)h[0],
             (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3]);
}

static void s_record(fake_t *self, json_t *line)
{
    if (line != NULL)
        fake_append_json(self->session_file, line);
    json_decref(line);
}

static void s_record_updated(fake_t *self)
{
    char stamp[40];
    fake_timestamp(stamp);
    s_record(self, json_pack("{s:{s:s}}", "$set", "lastUpdated", stamp));
}

/* Opens this run's chat file: a new one named session-<UTC minute>-<id[0:8]>.jsonl with its
 * metadata line, or the resumed one; then records the user message. */
static void s_open_session(fake_t *self)
{
    char stamp[40];
    fake_timestamp(stamp);
    fake_mkdirs(self->chats_dir);
    if (!self->resumed) {
        char minute[17];
        snprintf(minute, sizeof minute, "%.16s", stamp);
        minute[13] = '-'; /* 2026-11-25T16:08 -> 2026-11-25T16-08 */
        snprintf(self->session_file, sizeof self->session_file, "%s/session-%s-%.8s.jsonl",
                 self->chats_dir, minute, self->session_id);
        char hash[65];
        s_project_hash(self->cwd, hash);
        s_record(self, json_pack("{s:s, s:s, s:s, s:s, s:s}", "sessionId", self->session_id,
                                 "projectHash", hash, "startTime", stamp, "lastUpdated", stamp,
                                 "kind", "main"));
    } else {
        s_record(self, json_pack("{s:{s:s}}", "$set", "sessionId", self->session_id));
    }
    char id[40];
    fake_new_uuid(id);
    s_record(self, json_pack("{s:s, s:s, s:s, s:[{s:s}]}", "id", id, "timestamp", stamp, "type",
                             "user", "content", "text", self->input));
    s_record_updated(self);
}

/* ---------------------------------------------------------------------------------------
 * Output: the stream-json events (one JSON object per line, "type" and "timestamp" first). */

/* {"type":type,"timestamp":now, ...body}: prints it (stream-json only), after
 * FAKE_GEMINI_DELAY_MS unless it is the first. Takes `body`. */
static void s_emit(fake_t *self, const char *type, json_t *body)
{
    if (strcmp(self->output_format, "stream-json") != 0) {
        json_decref(body);
        return;
    }
    if (!self->first_event && self->delay_ms > 0)
        fake_sleep_ms(self->delay_ms);
    self->first_event = false;
    char stamp[40];
    fake_timestamp(stamp);
    json_t *event = json_pack("{s:s, s:s}", "type", type, "timestamp", stamp);
    json_object_update(event, body);
    json_decref(body);
    fake_print_json(event);
}

/* The token counts of one model call, the same for every call of a run. */
typedef struct {
    json_int_t input, output;
} call_usage_t;

static call_usage_t s_call_usage(void)
{
    call_usage_t u = {fake_env_int("FAKE_GEMINI_INPUT_TOKENS", 1000),
                      fake_env_int("FAKE_GEMINI_OUTPUT_TOKENS", 200)};
    return u;
}

/* result.stats: this run's calls only (a resumed session starts again from zero). `calls`
 * of the fake's per-call usage; duration_ms is 0 in error results, as in the real CLI. */
static json_t *s_stats(const fake_t *self, int calls, bool with_duration)
{
    call_usage_t u = s_call_usage();
    json_int_t input = calls * u.input, output = calls * u.output;
    json_int_t duration = with_duration ? clock_now_ms() - self->started_ms : 0;
    json_t *model = json_pack("{s:I, s:I, s:I, s:i, s:I}", "total_tokens", input + output,
                              "input_tokens", input, "output_tokens", output, "cached", 0, "input",
                              input);
    json_t *stats = json_pack("{s:I, s:I, s:I, s:i, s:I, s:I, s:i, s:{s:o}}", "total_tokens",
                              input + output, "input_tokens", input, "output_tokens", output,
                              "cached", 0, "input", input, "duration_ms", duration, "tool_calls",
                              with_duration ? self->tool_steps : 0, "models", self->stats_model,
                              model);
    return stats;
}

/* The tool the real CLI would have used for a step of the script, and its error type. */
static void s_tool_name(const char *step_tool, char *out, size_t size, const char **error_type)
{
    if (strcmp(step_tool, "Bash") == 0) {
        snprintf(out, size, "run_shell_command");
        *error_type = "shell_execute_error";
    } else if (strcmp(step_tool, "Write") == 0) {
        snprintf(out, size, "write_file");
        *error_type = "file_write_failure";
    } else if (strncmp(step_tool, "mcp__", 5) == 0) {
        /* mcp__<server>__<tool> -> mcp_<server>_<tool> */
        const char *rest = step_tool + 5, *sep = strstr(rest, "__");
        snprintf(out, size, "mcp_%.*s_%s", sep ? (int)(sep - rest) : 0, rest, sep ? sep + 2 : rest);
        *error_type = "mcp_tool_error";
    } else {
        snprintf(out, size, "replace");
        *error_type = "edit_preparation_failure";
    }
}

/* One action of the script: a tool_use and its tool_result, and the call in the chat. */
static void s_report_step(const fake_step_t *step, void *arg)
{
    fake_t *self = arg;
    self->tool_steps++;
    char name[256], tool_id[600];
    const char *error_type = NULL;
    s_tool_name(step->tool, name, sizeof name, &error_type);
    snprintf(tool_id, sizeof tool_id, "%s__%s_%lld_0", name, name, (long long)clock_wall_ms());
    s_emit(self, "tool_use",
           json_pack("{s:s, s:s, s:O}", "tool_name", name, "tool_id", tool_id, "parameters",
                     step->input));
    json_t *result = json_pack("{s:s, s:s}", "tool_id", tool_id, "status",
                               step->is_error && step->exit_code == 0 ? "error" : "success");
    /* run_shell_command shows the command's output (trailing newline cut) and stays a
     * success whatever its exit code; write_file shows nothing */
    size_t len = strlen(step->output);
    if (strcmp(name, "run_shell_command") == 0 || strncmp(name, "mcp_", 4) == 0 ||
        (step->is_error && step->exit_code == 0)) {
        char *output = strdup(step->output);
        if (output != NULL && len > 0 && output[len - 1] == '\n')
            output[len - 1] = '\0';
        json_object_set_new(result, "output", json_string(output != NULL ? output : ""));
        free(output);
    }
    if (step->is_error && step->exit_code == 0)
        json_object_set_new(result, "error",
                            json_pack("{s:s, s:s}", "type", error_type, "message", step->output));
    s_emit(self, "tool_result", result);

    char stamp[40], id[40];
    fake_timestamp(stamp);
    fake_new_uuid(id);
    s_record(self, json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:O, s:s, s:s}], s:[], s:s}", "id",
                             id, "timestamp", stamp, "type", "gemini", "content", "", "toolCalls",
                             "id", tool_id, "name", name, "args", step->input, "status",
                             step->is_error && step->exit_code == 0 ? "error" : "success",
                             "timestamp", stamp, "thoughts", "model", self->stats_model));
    s_record_updated(self);
}

/* The answer streamed as two delta messages (the first word, then the rest), as the real
 * CLI streams chunks: a parser must concatenate them. */
static void s_emit_answer(fake_t *self, const char *text)
{
    const char *space = strchr(text, ' ');
    size_t first = space != NULL ? (size_t)(space - text) + 1 : strlen(text);
    char *head = strndup(text, first);
    s_emit(self, "message",
           json_pack("{s:s, s:s, s:b}", "role", "assistant", "content", head, "delta", true));
    free(head);
    if (text[first] != '\0')
        s_emit(self, "message", json_pack("{s:s, s:s, s:b}", "role", "assistant", "content",
                                          text + first, "delta", true));
}

/* result{status:"error", error{type,message}}: how the CLI ends a run that failed (stats
 * zeroed, as its error path passes no duration). Returns `code`. */
static int s_emit_failure(fake_t *self, const char *type, const char *message, int code)
{
    s_emit(self, "result",
           json_pack("{s:s, s:{s:s, s:s}, s:o}", "status", "error", "error", "type", type,
                     "message", message, "stats", s_stats(self, 0, false)));
    if (strcmp(self->output_format, "json") == 0) {
        json_t *out = json_pack("{s:s, s:{s:s, s:s, s:i}}", "session_id", self->session_id,
                                "error", "type", type, "message", message, "code", code);
        char *text = json_dumps(out, JSON_INDENT(2));
        fprintf(stderr, "%s\n", text != NULL ? text : "");
        free(text);
        json_decref(out);
    } else if (strcmp(self->output_format, "text") == 0) {
        fprintf(stderr, "%s\n", message);
    }
    return code;
}

static int s_finish(fake_t *self, const char *text)
{
    s_emit_answer(self, text);
    call_usage_t u = s_call_usage();
    char stamp[40], id[40];
    fake_timestamp(stamp);
    fake_new_uuid(id);
    s_record(self, json_pack("{s:s, s:s, s:s, s:s, s:[], s:{s:I, s:I, s:i, s:i, s:i, s:I}, s:s}",
                             "id", id, "timestamp", stamp, "type", "gemini", "content", text,
                             "thoughts", "tokens", "input", u.input, "output", u.output, "cached",
                             0, "thoughts", 0, "tool", 0, "total", u.input + u.output, "model",
                             self->stats_model));
    s_record_updated(self);
    json_t *stats = s_stats(self, self->tool_steps + 1, true);
    if (strcmp(self->output_format, "json") == 0) {
        json_t *out = json_pack("{s:s, s:s, s:O}", "session_id", self->session_id, "response",
                                text, "stats", stats);
        char *dump = json_dumps(out, JSON_INDENT(2));
        printf("%s", dump != NULL ? dump : "");
        fflush(stdout);
        free(dump);
        json_decref(out);
    } else if (strcmp(self->output_format, "text") == 0) {
        printf("%s\n", text);
        fflush(stdout);
    }
    s_emit(self, "result", json_pack("{s:s, s:o}", "status", "success", "stats", stats));
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The run. */

/* Runs the action script, if any. Returns 0, or -1 with the reason in `error`. MCP servers
 * come from the settings files, as the real CLI reads them (settings.json "mcpServers"). */
static int s_run_actions(fake_t *self, json_t *said, char *error, size_t error_size)
{
    const char *script = getenv("FAKE_GEMINI_ACTIONS");
    if (script == NULL || *script == '\0')
        return 0;
    char user[PATH_MAX + 32], workspace[PATH_MAX + 32];
    snprintf(user, sizeof user, "%s/settings.json", self->gemini_dir);
    snprintf(workspace, sizeof workspace, "%s/.gemini/settings.json", self->cwd);
    json_t *configs = json_pack("[s, s]", workspace, user);
    fake_mcp_set_configs(configs);
    int rc = fake_actions_run(script, s_report_step, self, said);
    fake_mcp_set_configs(NULL);
    json_decref(configs);
    if (rc == 0)
        return 0;
    snprintf(error, error_size, "fake-gemini: %s", failure_message());
    fprintf(stderr, "%s\n", error);
    return -1;
}

static int s_turn(fake_t *self)
{
    s_open_session(self);
    s_emit(self, "init", json_pack("{s:s, s:s}", "session_id", self->session_id, "model",
                                   self->model));
    s_emit(self, "message", json_pack("{s:s, s:s}", "role", "user", "content", self->input));

    if (s_scenario(self, "error") || s_scenario(self, "turn_failed"))
        return s_emit_failure(self, "unknown",
                              "[API Error: exception TypeError: fetch failed sending request]", 1);
    json_t *said = json_array();
    char error[1100] = "";
    int actions_rc = s_run_actions(self, said, error, sizeof error);
    if (s_scenario(self, "crash")) {
        fprintf(stderr, "fake-gemini: simulated crash\n");
        json_decref(said);
        return 2;
    }
    int rc;
    if (actions_rc != 0) {
        rc = s_emit_failure(self, "Error", error, 1);
    } else if (s_scenario(self, "turn_limit")) {
        rc = s_emit_failure(self, "FatalTurnLimitedError",
                            "Reached max session turns for this session. Increase the number of "
                            "turns by specifying maxSessionTurns in settings.json.",
                            53);
    } else {
        if (s_scenario(self, "warning"))
            s_emit(self, "error", json_pack("{s:s, s:s}", "severity", "warning", "message",
                                            "Loop detected, stopping execution"));
        char *joined = fake_join_lines(said);
        const char *text = fake_env_or("FAKE_GEMINI_RESULT", NULL);
        if (text == NULL)
            text = joined != NULL && *joined != '\0' ? joined : FAKE_DEFAULT_RESULT;
        rc = s_finish(self, text);
        free(joined);
    }
    json_decref(said);
    if (s_scenario(self, "hang_after_result"))
        fake_hang();
    return rc;
}

/* Folder trust: trusted with --skip-trust or GEMINI_CLI_TRUST_WORKSPACE=true, when the user
 * settings turn folder trust off, or when trustedFolders.json trusts the directory. */
static bool s_is_trusted(const fake_t *self)
{
    const char *env = getenv("GEMINI_CLI_TRUST_WORKSPACE");
    if (env != NULL && strcmp(env, "false") == 0)
        return false;
    if (self->flag[OPT_SKIP_TRUST] || (env != NULL && strcmp(env, "true") == 0))
        return true;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/settings.json", self->gemini_dir);
    json_t *settings = json_load_file(path, 0, NULL);
    json_t *enabled = json_object_get(
        json_object_get(json_object_get(settings, "security"), "folderTrust"), "enabled");
    bool off = json_is_false(enabled);
    json_decref(settings);
    if (off)
        return true;
    snprintf(path, sizeof path, "%s/trustedFolders.json", self->gemini_dir);
    json_t *folders = json_load_file(fake_env_or("GEMINI_CLI_TRUSTED_FOLDERS_PATH", path), 0, NULL);
    bool trusted = false;
    const char *folder;
    json_t *level;
    json_object_foreach(folders, folder, level) {
        char scope[PATH_MAX];
        snprintf(scope, sizeof scope, "%s", folder);
        if (strcmp(json_string_value(level) ? json_string_value(level) : "", "TRUST_PARENT") == 0) {
            char *slash = strrchr(scope, '/');
            if (slash != NULL)
                *(slash == scope ? slash + 1 : slash) = '\0';
        } else if (strcmp(json_string_value(level) ? json_string_value(level) : "",
                          "TRUST_FOLDER") != 0) {
            continue;
        }
        size_t n = strlen(scope);
        trusted = trusted || (strncmp(self->cwd, scope, n) == 0 &&
                              (self->cwd[n] == '\0' || self->cwd[n] == '/' || scope[n - 1] == '/'));
    }
    json_decref(folders);
    return trusted;
}

static const char *s_approval_mode(const fake_t *self)
{
    if (self->value[OPT_APPROVAL_MODE] != NULL)
        return self->value[OPT_APPROVAL_MODE];
    return self->flag[OPT_YOLO] ? "yolo" : "default";
}

/* What loading the configuration prints (the real CLI loads it twice, so twice). */
static void s_config_warnings(const fake_t *self)
{
    const char *mode = s_approval_mode(self);
    if (strcmp(mode, "yolo") == 0)
        fputs("YOLO mode is enabled. All tool calls will be automatically approved.\n", stderr);
    if (!self->trusted && strcmp(mode, "default") != 0)
        fputs("Approval mode overridden to \"default\" because the current folder is not "
              "trusted.\n",
              stderr);
}

static bool s_headless(const fake_t *self)
{
    const char *ci = getenv("CI"), *actions = getenv("GITHUB_ACTIONS");
    return (ci != NULL && strcmp(ci, "true") == 0) ||
           (actions != NULL && strcmp(actions, "true") == 0) || !isatty(0) || !isatty(1) ||
           self->given[OPT_PROMPT] || json_array_size(self->query) > 0;
}

/* The input: stdin, then a blank line, then the -p (or positional) text. */
static void s_build_input(fake_t *self)
{
    const char *prompt = self->value[OPT_PROMPT];
    char *query = NULL;
    if ((prompt == NULL || *prompt == '\0') && json_array_size(self->query) > 0) {
        size_t i;
        json_t *word;
        size_t len = 1;
        json_array_foreach(self->query, i, word) len += strlen(json_string_value(word)) + 1;
        query = calloc(1, len);
        json_array_foreach(self->query, i, word) {
            if (query == NULL)
                break;
            if (i > 0)
                strcat(query, " ");
            strcat(query, json_string_value(word));
        }
        prompt = query;
    }
    const char *in = self->stdin_text != NULL ? self->stdin_text : "";
    prompt = prompt != NULL ? prompt : "";
    size_t len = strlen(in) + strlen(prompt) + 3;
    self->input = malloc(len);
    if (self->input != NULL) {
        if (*in != '\0' && *prompt != '\0')
            snprintf(self->input, len, "%s\n\n%s", in, prompt);
        else
            snprintf(self->input, len, "%s", *in != '\0' ? in : prompt);
    }
    free(query);
}

static bool s_known_scenario(const char *name)
{
    static const char *const known[] = {"success",    "auth",    "error",     "turn_failed",
                                        "turn_limit", "warning", "crash",     "hang",
                                        "hang_after_result", NULL};
    for (int i = 0; known[i] != NULL; i++)
        if (strcmp(known[i], name) == 0)
            return true;
    return false;
}

static int s_not_logged_in(fake_t *self)
{
    char message[PATH_MAX + 300];
    snprintf(message, sizeof message,
             "Please set an Auth method in your %s/settings.json or specify one of the following "
             "environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, "
             "GOOGLE_GENAI_USE_GCA",
             self->gemini_dir);
    if (strcmp(self->output_format, "json") == 0) {
        json_t *out = json_pack("{s:s, s:{s:s, s:s, s:i}}", "session_id", self->session_id,
                                "error", "type", "Error", "message", message, "code", 41);
        char *text = json_dumps(out, JSON_INDENT(2));
        fprintf(stderr, "%s\n", text != NULL ? text : "");
        free(text);
        json_decref(out);
    } else {
        fprintf(stderr, "%s\n", message);
    }
    s_write_log(self);
    return 41;
}

static int s_main(fake_t *self)
{
    int rc = s_parse(self);
    if (rc == 0)
        rc = s_validate_args(self);
    if (rc != 0)
        return rc;
    if (self->flag[OPT_HELP]) {
        fputs(s_help, stdout);
        return 0;
    }
    if (self->flag[OPT_VERSION]) {
        printf("%s\n", FAKE_VERSION);
        return 0;
    }
    if (!s_known_scenario(self->scenario))
        return s_fail(self, 2, "fake-gemini: unknown FAKE_GEMINI_SCENARIO '%s'", self->scenario);
    const char *first = json_string_value(json_array_get(self->query, 0));
    static const char *const commands[] = {"mcp",  "extensions", "extension", "skills",
                                           "skill", "hooks",     "hook",      "gemma", NULL};
    for (int i = 0; first != NULL && commands[i] != NULL; i++)
        if (strcmp(first, commands[i]) == 0)
            return s_fail(self, 2, "fake-gemini: `gemini %s` is not reproduced", first);
    if (self->value[OPT_PROMPT_INTERACTIVE] != NULL && !isatty(0))
        return s_fail(self, 42, "Error: The --prompt-interactive flag cannot be used when input "
                                "is piped from stdin.");
    if (!s_headless(self) || self->value[OPT_PROMPT_INTERACTIVE] != NULL || self->flag[OPT_ACP] ||
        self->flag[OPT_EXPERIMENTAL_ACP] || self->flag[OPT_LIST_SESSIONS] ||
        self->flag[OPT_LIST_EXTENSIONS] || self->given[OPT_DELETE_SESSION])
        return s_fail(self, 2, "fake-gemini: only the headless run (-p) is reproduced");
    self->output_format =
        self->value[OPT_OUTPUT_FORMAT] != NULL ? self->value[OPT_OUTPUT_FORMAT] : "text";
    const char *model = self->value[OPT_MODEL] != NULL && *self->value[OPT_MODEL]
                            ? self->value[OPT_MODEL]
                            : fake_env_or("GEMINI_MODEL", "auto");
    snprintf(self->model, sizeof self->model, "%s", model);
    snprintf(self->stats_model, sizeof self->stats_model, "%s",
             strcmp(model, "auto") == 0 ? FAKE_AUTO_MODEL : model);

    /* the real order: the session, then the configuration (its warnings), then the auth
     * check, the configuration again, the folder trust check, and only then stdin */
    s_init_store(self);
    rc = s_resolve_session(self);
    if (rc != 0)
        return rc;
    self->trusted = s_is_trusted(self);
    s_config_warnings(self);
    if (s_scenario(self, "auth"))
        return s_not_logged_in(self);
    s_config_warnings(self);
    if (!self->trusted)
        return s_fail(self, 55,
                      "\033[31mGemini CLI is not running in a trusted directory. To proceed, "
                      "either use `--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` "
                      "environment variable, or trust this directory in interactive mode. For "
                      "more details, see "
                      "https://geminicli.com/docs/cli/trusted-folders/"
                      "#headless-and-automated-environments\033[0m");
    self->stdin_text = fake_read_stdin(FAKE_STDIN_WAIT_MS, NULL);
    s_write_log(self);
    s_build_input(self);
    if (self->input == NULL || self->input[0] == '\0')
        return s_fail(self, 42, "No input provided via stdin. Input can be provided by piping "
                                "data into gemini or using the --prompt option.");
    if (s_scenario(self, "hang"))
        fake_hang();
    return s_turn(self);
}

/* SIGTERM, SIGINT and SIGHUP make the real CLI shut down "gracefully" with exit code 0 and
 * no result event: a killed run looks like a clean exit, only the missing result tells. */
static void s_on_signal(int sig)
{
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv)
{
    static fake_t fake;
    signal(SIGTERM, s_on_signal);
    signal(SIGINT, s_on_signal);
    signal(SIGHUP, s_on_signal);
    fake.argc = argc;
    fake.argv = argv;
    fake.first_event = true;
    fake.started_ms = clock_now_ms();
    fake.delay_ms = fake_env_int("FAKE_GEMINI_DELAY_MS", 0);
    fake.scenario = fake_env_or("FAKE_GEMINI_SCENARIO", "success");
    fake.output_format = "text";
    if (getcwd(fake.cwd, sizeof fake.cwd) == NULL)
        snprintf(fake.cwd, sizeof fake.cwd, ".");
    int rc = s_main(&fake);
    free(fake.stdin_text);
    free(fake.input);
    json_decref(fake.query);
    json_decref(fake.unknown);
    for (int i = 0; i < OPT_COUNT; i++)
        json_decref(fake.values[i]);
    return rc;
}
