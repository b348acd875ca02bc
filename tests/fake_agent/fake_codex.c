/* fake-codex: a test double for the OpenAI Codex CLI in headless mode (`codex exec --json`).
 *
 * It follows the contract in docs/agent-codex.md §8: the flags of `codex exec`, `exec resume`
 * and `exec fork` of release 0.169.0, refused the way clap refuses them (exit 2); the same
 * stdin rules, stderr texts and exit codes; thread ids (UUIDv7) and rollout files laid out
 * like the real ones under $CODEX_HOME/sessions; and the JSONL events of `--json`. Like the
 * real CLI, turn.completed reports the thread's running token total, so a resumed run
 * counts the earlier runs too. Environment knobs choose a scenario and an action script
 * (fake_actions.h). See README.md next to this file for every knob. */
#include "clock.h"
#include "failure.h"
#include "fake_actions.h"
#include "fake_common.h"
#include "fake_mcp.h"
#include "toml.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKE_VERSION "0.169.0"
#define FAKE_DEFAULT_RESULT "Done."
#define FAKE_CACHED_PER_CALL 200 /* cached_input_tokens of each model call (capped by input) */

/* The models of the catalog compiled into 0.169.0; any other -m value makes the real CLI
 * report a (harmless) error item first. */
static const char *const s_known_models[] = {
    "gpt-6.1-sol", "gpt-6.1-terra", "gpt-6-sol",  "gpt-6-luna",        "gpt-6-astra",
    "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna", "gpt-5.5",         "codex-auto-review",
    "gpt-daybreak-blue-latest", "gpt-daybreak-red-latest", NULL};

/* ---------------------------------------------------------------------------------------
 * Command line: `codex exec [OPTIONS] [PROMPT]`, `codex exec resume [OPTIONS] [SESSION_ID]
 * [PROMPT]` and `codex exec fork [OPTIONS] <SESSION_ID> [PROMPT]`, parsed the way clap does
 * it. Each level only knows its own options (resume and fork lack --sandbox, --add-dir,
 * --cd, ...); options given before `resume`/`fork` belong to `exec`. */

typedef enum { CMD_EXEC = 1, CMD_RESUME = 2, CMD_FORK = 4 } command_t;
#define ALL (CMD_EXEC | CMD_RESUME | CMD_FORK)

typedef enum { ARG_FLAG, ARG_VALUE, ARG_VALUES } arg_kind_t;

typedef enum {
    OPT_CONFIG,
    OPT_ENABLE,
    OPT_DISABLE,
    OPT_STRICT_CONFIG,
    OPT_IMAGE,
    OPT_IMAGES, /* exec's -i takes several values, resume's and fork's one */
    OPT_MODEL,
    OPT_OSS,
    OPT_LOCAL_PROVIDER,
    OPT_PROFILE,
    OPT_SANDBOX,
    OPT_APPROVE_FOR_ME,
    OPT_BYPASS,
    OPT_BYPASS_HOOK_TRUST,
    OPT_CD,
    OPT_WORKTREE,
    OPT_ADD_DIR,
    OPT_THREAD_SOURCE,
    OPT_CYBER,
    OPT_SKIP_GIT_REPO_CHECK,
    OPT_TRUST,
    OPT_EPHEMERAL,
    OPT_IGNORE_USER_CONFIG,
    OPT_IGNORE_RULES,
    OPT_OUTPUT_SCHEMA,
    OPT_COLOR,
    OPT_JSON,
    OPT_OUTPUT_LAST_MESSAGE,
    OPT_LAST,
    OPT_ALL,
    OPT_HELP,
    OPT_VERSION,
    OPT_COUNT
} option_id_t;

static const char *const s_sandbox_modes[] = {"read-only", "workspace-write", "danger-full-access",
                                              NULL};
static const char *const s_cyber_programs[] = {"standard", "daybreak_blue", "daybreak_red", NULL};
static const char *const s_colors[] = {"always", "never", "auto", NULL};

typedef struct {
    const char *name;        /* the long name, without "--" */
    char short_name;         /* 0: none */
    arg_kind_t kind;
    const char *value_name;  /* how clap names the value: --model <MODEL> */
    const char *const *choices;
    unsigned commands;       /* where the option exists (command_t bits) */
} option_spec_t;

static const option_spec_t s_specs[OPT_COUNT] = {
    [OPT_CONFIG] = {"config", 'c', ARG_VALUE, "key=value", NULL, ALL},
    [OPT_ENABLE] = {"enable", 0, ARG_VALUE, "FEATURE", NULL, ALL},
    [OPT_DISABLE] = {"disable", 0, ARG_VALUE, "FEATURE", NULL, ALL},
    [OPT_STRICT_CONFIG] = {"strict-config", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_IMAGE] = {"image", 'i', ARG_VALUE, "FILE", NULL, CMD_RESUME | CMD_FORK},
    [OPT_IMAGES] = {"image", 'i', ARG_VALUES, "FILE", NULL, CMD_EXEC},
    [OPT_MODEL] = {"model", 'm', ARG_VALUE, "MODEL", NULL, ALL},
    [OPT_OSS] = {"oss", 0, ARG_FLAG, NULL, NULL, CMD_EXEC},
    [OPT_LOCAL_PROVIDER] = {"local-provider", 0, ARG_VALUE, "OSS_PROVIDER", NULL, CMD_EXEC},
    [OPT_PROFILE] = {"profile", 'p', ARG_VALUE, "CONFIG_PROFILE_V2", NULL, CMD_EXEC},
    [OPT_SANDBOX] = {"sandbox", 's', ARG_VALUE, "SANDBOX_MODE", s_sandbox_modes, CMD_EXEC},
    [OPT_APPROVE_FOR_ME] = {"approve-for-me", 0, ARG_FLAG, NULL, NULL, CMD_EXEC},
    [OPT_BYPASS] = {"dangerously-bypass-approvals-and-sandbox", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_BYPASS_HOOK_TRUST] = {"dangerously-bypass-hook-trust", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_CD] = {"cd", 'C', ARG_VALUE, "DIR", NULL, CMD_EXEC},
    [OPT_WORKTREE] = {"worktree", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_ADD_DIR] = {"add-dir", 0, ARG_VALUE, "DIR", NULL, CMD_EXEC},
    [OPT_THREAD_SOURCE] = {"thread-source", 0, ARG_VALUE, "SOURCE", NULL, ALL},
    [OPT_CYBER] = {"cyber-access-program", 0, ARG_VALUE, "PROGRAM", s_cyber_programs, ALL},
    [OPT_SKIP_GIT_REPO_CHECK] = {"skip-git-repo-check", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_TRUST] = {"trust", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_EPHEMERAL] = {"ephemeral", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_IGNORE_USER_CONFIG] = {"ignore-user-config", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_IGNORE_RULES] = {"ignore-rules", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_OUTPUT_SCHEMA] = {"output-schema", 0, ARG_VALUE, "FILE", NULL, ALL},
    [OPT_COLOR] = {"color", 0, ARG_VALUE, "COLOR", s_colors, CMD_EXEC},
    [OPT_JSON] = {"json", 0, ARG_FLAG, NULL, NULL, ALL},
    [OPT_OUTPUT_LAST_MESSAGE] = {"output-last-message", 'o', ARG_VALUE, "FILE", NULL, ALL},
    [OPT_LAST] = {"last", 0, ARG_FLAG, NULL, NULL, CMD_RESUME},
    [OPT_ALL] = {"all", 0, ARG_FLAG, NULL, NULL, CMD_RESUME},
    [OPT_HELP] = {"help", 'h', ARG_FLAG, NULL, NULL, ALL},
    [OPT_VERSION] = {"version", 'V', ARG_FLAG, NULL, NULL, CMD_EXEC},
};

/* Everything one invocation knows; lives for the whole process. */
typedef struct {
    int argc;
    char **argv;
    command_t command;
    bool given[OPT_COUNT];
    const char *value[OPT_COUNT]; /* ARG_VALUE: the last value given */
    json_t *values[OPT_COUNT];    /* every value given, in order */
    int count[OPT_COUNT];         /* occurrences */
    int used[OPT_COUNT];          /* options of the current level, in first-use order */
    int nused;
    const char *prompt_arg;       /* the PROMPT positional, or NULL */
    const char *session_arg;      /* resume/fork: the SESSION_ID positional, or NULL */
    char *stdin_text;             /* what stdin held (NULL: not read) */
    char *prompt;                 /* what the model would be sent */
    bool logged;

    json_t *overrides; /* -c key=value, values parsed as TOML like the real CLI */
    const char *scenario;
    char cwd[PATH_MAX];
    char codex_home[PATH_MAX];
    char thread_id[40];
    char rollout[PATH_MAX + 256]; /* where this run records ("" with --ephemeral) */
    char history[PATH_MAX + 256]; /* the rollout continued or forked ("" for a new thread) */
    int delay_ms;
    bool first_event;
    int next_item;
    int tool_steps;
    char *last_message; /* the final agent message, for -o */
} fake_t;

static void s_write_log(fake_t *self)
{
    /* CODEX_THREAD_ID is what codex sets for the commands it runs: seeing it here means a
     * run was started from inside another codex run */
    static const char *const env_names[] = {"PANOPTICON_AGENT_ID", "CODEX_HOME",
                                            "CODEX_THREAD_ID", NULL};
    if (self->logged)
        return;
    self->logged = true;
    fake_log_invocation(getenv("FAKE_CODEX_LOG"), self->argc, self->argv, self->stdin_text,
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

/* ---------------------------------------------------------------------------------------
 * clap's error messages (exit code 2). */

static const char *s_command_name(command_t command)
{
    return command == CMD_RESUME ? "resume" : command == CMD_FORK ? "fork" : "exec";
}

/* "--model <MODEL>" or "--json": how clap shows an option in messages and usage lines. */
static void s_option_label(int id, char *out, size_t size)
{
    const option_spec_t *spec = &s_specs[id];
    if (spec->kind == ARG_FLAG)
        snprintf(out, size, "--%s", spec->name);
    else
        snprintf(out, size, "--%s <%s>%s", spec->name, spec->value_name,
                 spec->kind == ARG_VALUES ? "..." : "");
}

/* The Usage line(s). `smart`: list the options used so far instead of [OPTIONS], the way
 * clap does for an unknown long option of a command without subcommands; `required`: the
 * form clap prints for a missing <SESSION_ID> (no [OPTIONS] at all). */
static void s_print_usage(const fake_t *self, bool smart, bool required)
{
    if (self->command == CMD_EXEC) {
        fputs("Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]\n",
              stderr);
        return;
    }
    fprintf(stderr, "Usage: codex exec %s", s_command_name(self->command));
    if ((smart || required) && self->nused > 0) {
        for (int i = 0; i < self->nused; i++) {
            char label[128];
            s_option_label(self->used[i], label, sizeof label);
            fprintf(stderr, " %s", label);
        }
    } else if (!required) {
        fputs(" [OPTIONS]", stderr);
    }
    fputs(self->command == CMD_FORK ? " <SESSION_ID> [PROMPT]\n" : " [SESSION_ID] [PROMPT]\n",
          stderr);
}

typedef enum { USAGE_NONE, USAGE_PLAIN, USAGE_SMART, USAGE_REQUIRED } usage_form_t;

static int s_clap_error(fake_t *self, const char *message, const char *tip, usage_form_t usage)
{
    fprintf(stderr, "error: %s\n", message);
    if (tip != NULL)
        fprintf(stderr, "\n  tip: %s\n", tip);
    if (usage != USAGE_NONE) {
        fputc('\n', stderr);
        s_print_usage(self, usage == USAGE_SMART, usage == USAGE_REQUIRED);
    }
    fputs("\nFor more information, try '--help'.\n", stderr);
    s_write_log(self);
    return 2;
}

/* Jaro similarity, which clap uses (above 0.7) to suggest "a similar argument". */
static double s_jaro(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la == 0 && lb == 0)
        return 1.0;
    if (la == 0 || lb == 0)
        return 0.0;
    int window = (la > lb ? la : lb) / 2 - 1;
    if (window < 0)
        window = 0;
    bool ma[256] = {false}, mb[256] = {false};
    if (la > 255 || lb > 255)
        return 0.0;
    int matches = 0;
    for (int i = 0; i < la; i++) {
        int lo = i - window > 0 ? i - window : 0, hi = i + window + 1 < lb ? i + window + 1 : lb;
        for (int j = lo; j < hi; j++) {
            if (!mb[j] && a[i] == b[j]) {
                ma[i] = mb[j] = true;
                matches++;
                break;
            }
        }
    }
    if (matches == 0)
        return 0.0;
    int transpositions = 0;
    for (int i = 0, j = 0; i < la; i++) {
        if (!ma[i])
            continue;
        while (!mb[j])
            j++;
        if (a[i] != b[j])
            transpositions++;
        j++;
    }
    double m = matches;
    return (m / la + m / lb + (m - transpositions / 2.0) / m) / 3.0;
}

static int s_unknown_long(fake_t *self, const char *arg, const char *name)
{
    char message[512], tip[512];
    snprintf(message, sizeof message, "unexpected argument '%s' found", arg);
    int best = -1;
    double best_score = 0.7;
    for (int i = 0; i < OPT_COUNT; i++) {
        double score = s_jaro(name, s_specs[i].name);
        if ((s_specs[i].commands & self->command) && score > best_score) {
            best_score = score;
            best = i;
        }
    }
    if (best >= 0) {
        snprintf(tip, sizeof tip, "a similar argument exists: '--%s'", s_specs[best].name);
        /* clap's usage line then shows the suggestion as if it had been given */
        bool listed = false;
        for (int i = 0; i < self->nused; i++)
            listed = listed || self->used[i] == best;
        if (!listed)
            self->used[self->nused++] = best;
    } else
        snprintf(tip, sizeof tip, "to pass '%s' as a value, use '-- %s'", arg, arg);
    return s_clap_error(self, message, tip, USAGE_SMART);
}

static int s_unknown_short(fake_t *self, char c)
{
    char message[128], tip[128];
    snprintf(message, sizeof message, "unexpected argument '-%c' found", c);
    snprintf(tip, sizeof tip, "to pass '-%c' as a value, use '-- -%c'", c, c);
    return s_clap_error(self, message, tip, USAGE_PLAIN);
}

/* ---------------------------------------------------------------------------------------
 * Parsing. */

static int s_find_long(const fake_t *self, const char *name)
{
    for (int i = 0; i < OPT_COUNT; i++)
        if ((s_specs[i].commands & self->command) && strcmp(s_specs[i].name, name) == 0)
            return i;
    return -1;
}

static int s_find_short(const fake_t *self, char c)
{
    for (int i = 0; i < OPT_COUNT; i++)
        if ((s_specs[i].commands & self->command) && s_specs[i].short_name == c)
            return i;
    return -1;
}

/* Options that collect every value; the others keep the last one. */
static bool s_repeatable(int id)
{
    return id == OPT_CONFIG || id == OPT_ENABLE || id == OPT_DISABLE || id == OPT_ADD_DIR ||
           id == OPT_IMAGE || id == OPT_IMAGES;
}

/* Notes an occurrence for clap's usage line, which lists the options used so far, except
 * a single-value option given twice (clap drops it there). */
static void s_mark_used(fake_t *self, int id)
{
    self->count[id]++;
    for (int i = 0; i < self->nused; i++) {
        if (self->used[i] != id)
            continue;
        if (!s_repeatable(id)) {
            memmove(&self->used[i], &self->used[i + 1],
                    (size_t)(self->nused - i - 1) * sizeof self->used[0]);
            self->nused--;
        }
        return;
    }
    if (self->count[id] == 1)
        self->used[self->nused++] = id;
}

/* clap refuses a flag given twice. Returns 0 or 2. */
static int s_check_repeat(fake_t *self, int id)
{
    if (s_specs[id].kind != ARG_FLAG || self->count[id] < 2)
        return 0;
    char message[256];
    snprintf(message, sizeof message, "the argument '--%s' cannot be used multiple times",
             s_specs[id].name);
    return s_clap_error(self, message, NULL, USAGE_PLAIN);
}

/* Stores one value of option `id`, checking clap's possible values. Returns 0 or 2. */
static int s_take_value(fake_t *self, int id, const char *value)
{
    const char *const *choices = s_specs[id].choices;
    if (choices != NULL) {
        bool ok = false;
        char shown[256] = "";
        for (int i = 0; choices[i] != NULL; i++) {
            ok = ok || strcmp(choices[i], value) == 0;
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s%s", i ? ", " : "",
                     choices[i]);
        }
        if (!ok) {
            char label[128], message[512];
            s_option_label(id, label, sizeof label);
            snprintf(message, sizeof message, "invalid value '%s' for '%s'\n  [possible values: %s]",
                     value, label, shown);
            return s_clap_error(self, message, NULL, USAGE_NONE);
        }
    }
    if (self->values[id] == NULL)
        self->values[id] = json_array();
    json_array_append_new(self->values[id], json_string(value));
    self->value[id] = value;
    return 0;
}

static int s_missing_value(fake_t *self, int id)
{
    char label[128], message[256];
    s_option_label(id, label, sizeof label);
    snprintf(message, sizeof message, "a value is required for '%s' but none was supplied", label);
    return s_clap_error(self, message, NULL, USAGE_NONE);
}

/* clap takes the next argument as a value unless it looks like an option ("-" alone is a
 * value: stdin). */
static bool s_is_value(const char *arg)
{
    return arg[0] != '-' || arg[1] == '\0';
}

/* One option occurrence at argv[*i]. Returns 0 or the exit code. */
static int s_parse_option(fake_t *self, int *i)
{
    const char *arg = self->argv[*i];
    int id = -1;
    const char *inline_value = NULL;
    if (arg[1] == '-') {
        char name[128];
        const char *eq = strchr(arg, '=');
        size_t len = eq != NULL ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        snprintf(name, sizeof name, "%.*s", (int)len, arg + 2);
        if (eq != NULL)
            inline_value = eq + 1;
        id = s_find_long(self, name);
        if (id < 0) {
            char bare[160];
            snprintf(bare, sizeof bare, "--%s", name);
            return s_unknown_long(self, bare, name);
        }
        if (s_specs[id].kind == ARG_FLAG && inline_value != NULL) {
            char message[512];
            snprintf(message, sizeof message,
                     "unexpected value '%s' for '--%s' found; no more were expected", inline_value,
                     name);
            return s_clap_error(self, message, NULL, USAGE_PLAIN);
        }
    } else {
        /* Short options: -m VALUE, -mVALUE, -m=VALUE; flags may be bundled (-hV). */
        for (const char *c = arg + 1; *c; c++) {
            id = s_find_short(self, *c);
            if (id < 0)
                return s_unknown_short(self, *c);
            if (s_specs[id].kind != ARG_FLAG) {
                if (c[1] != '\0')
                    inline_value = c[1] == '=' ? c + 2 : c + 1;
                break;
            }
            self->given[id] = true;
            s_mark_used(self, id);
            if (s_check_repeat(self, id) != 0)
                return 2;
        }
        if (s_specs[id].kind == ARG_FLAG)
            return 0;
    }
    self->given[id] = true;
    s_mark_used(self, id);
    if (s_specs[id].kind == ARG_FLAG)
        return s_check_repeat(self, id);
    if (inline_value != NULL)
        return s_take_value(self, id, inline_value);
    if (*i + 1 >= self->argc || !s_is_value(self->argv[*i + 1]))
        return s_missing_value(self, id);
    int rc = s_take_value(self, id, self->argv[++*i]);
    /* exec's --image <FILE>...: further values up to the next option. */
    while (rc == 0 && s_specs[id].kind == ARG_VALUES && *i + 1 < self->argc &&
           self->argv[*i + 1][0] != '-')
        rc = s_take_value(self, id, self->argv[++*i]);
    return rc;
}

/* A positional argument: the subcommand, SESSION_ID or PROMPT. Returns 0 or 2. */
static int s_parse_positional(fake_t *self, const char *arg, bool options_done)
{
    if (self->command == CMD_EXEC && self->prompt_arg == NULL && !options_done &&
        (strcmp(arg, "resume") == 0 || strcmp(arg, "fork") == 0)) {
        self->command = strcmp(arg, "resume") == 0 ? CMD_RESUME : CMD_FORK;
        self->nused = 0; /* clap's usage lines only show the subcommand's own options */
        return 0;
    }
    if (self->command == CMD_EXEC && self->prompt_arg == NULL && !options_done &&
        (strcmp(arg, "review") == 0 || strcmp(arg, "help") == 0)) {
        fprintf(stderr, "fake-codex: `codex exec %s` is not reproduced\n", arg);
        return 2;
    }
    if (self->command != CMD_EXEC && self->session_arg == NULL) {
        self->session_arg = arg;
        return 0;
    }
    if (self->prompt_arg == NULL) {
        self->prompt_arg = arg;
        return 0;
    }
    char message[512];
    snprintf(message, sizeof message, "unexpected argument '%s' found", arg);
    return s_clap_error(self, message, NULL, USAGE_PLAIN);
}

/* Parses argv after "exec". Returns 0 or the exit code. */
static int s_parse(fake_t *self, int first)
{
    bool options_done = false;
    self->command = CMD_EXEC;
    for (int i = first; i < self->argc; i++) {
        const char *arg = self->argv[i];
        int rc;
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || s_is_value(arg))
            rc = s_parse_positional(self, arg, options_done);
        else
            rc = s_parse_option(self, &i);
        if (rc != 0)
            return rc;
    }
    /* --last with one positional: it is the prompt, not an id (as in the real CLI). */
    if (self->command == CMD_RESUME && self->given[OPT_LAST] && self->session_arg != NULL &&
        self->prompt_arg == NULL) {
        self->prompt_arg = self->session_arg;
        self->session_arg = NULL;
    }
    if (self->command == CMD_FORK && self->session_arg == NULL)
        return s_clap_error(self, "the following required arguments were not provided:\n  <SESSION_ID>",
                            NULL, USAGE_REQUIRED);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * -c key=value: the value is TOML, or the raw text when it is not valid TOML. */

static int s_toml_value(toml_reader_t *reader, toml_mark_t key_at, const char *key,
                        toml_mark_t value_at, toml_value_t *value, void *arg)
{
    (void)reader, (void)key_at, (void)key, (void)value_at;
    json_t **out = arg;
    switch (value->kind) {
    case TOML_STRING:
        *out = json_string(value->string);
        break;
    case TOML_INT:
        *out = json_integer(value->integer);
        break;
    case TOML_FLOAT:
        *out = json_real(value->number);
        break;
    case TOML_BOOL:
        *out = json_boolean(value->boolean);
        break;
    case TOML_ARRAY:
        *out = json_array();
        for (size_t i = 0; i < value->nitems; i++)
            json_array_append_new(*out, value->items[i].kind == TOML_STRING
                                            ? json_string(value->items[i].string)
                                            : json_integer(value->items[i].integer));
        break;
    }
    return 0;
}

static json_t *s_parse_override_value(const char *text)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "v = %s\n", text);
    toml_handler_t handler = {NULL, s_toml_value};
    json_t *value = NULL;
    if (toml_parse("-c", buf, strlen(buf), &handler, &value) != 0 || value == NULL) {
        json_decref(value);
        return json_string(text);
    }
    return value;
}

/* Reads every -c into self->overrides ({dotted key: value}). Returns 0 or exit code 1. */
static int s_parse_overrides(fake_t *self)
{
    self->overrides = json_object();
    size_t i;
    json_t *item;
    json_array_foreach(self->values[OPT_CONFIG], i, item) {
        const char *text = json_string_value(item);
        const char *eq = strchr(text, '=');
        if (eq == NULL)
            return s_fail(self, 1, "Error parsing -c overrides: Invalid override (missing '='): %s",
                          text);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
        /* the key is trimmed; an empty one is refused too */
        char *k = key;
        while (*k == ' ')
            k++;
        for (size_t n = strlen(k); n > 0 && k[n - 1] == ' '; n--)
            k[n - 1] = '\0';
        if (*k == '\0')
            return s_fail(self, 1, "Error parsing -c overrides: Empty key in override: %s", text);
        json_object_set_new(self->overrides, k, s_parse_override_value(eq + 1));
    }
    return 0;
}

static const char *s_override_string(const fake_t *self, const char *key)
{
    return json_string_value(json_object_get(self->overrides, key));
}

/* The two settings a runner sets with -c, checked as the real config loader does. */
static int s_check_variant(fake_t *self, const char *key, const char *const *variants)
{
    json_t *value = json_object_get(self->overrides, key);
    if (value == NULL)
        return 0;
    const char *text = json_string_value(value);
    char expected[512] = "";
    bool ok = false;
    for (int i = 0; variants[i] != NULL; i++) {
        ok = ok || (text != NULL && strcmp(text, variants[i]) == 0);
        snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s`%s`",
                 i ? ", " : "", variants[i]);
    }
    if (ok)
        return 0;
    if (text == NULL)
        return s_fail(self, 1,
                      "Error loading config.toml: invalid type: %s, expected a string\nin `%s`\n",
                      json_typeof(value) == JSON_INTEGER ? "integer" : "value", key);
    return s_fail(self, 1,
                  "Error loading config.toml: unknown variant `%s`, expected one of %s\nin `%s`\n",
                  text, expected, key);
}

/* -c mcp_servers.<name>.command / .args / .env.<KEY> become an mcpServers config for the
 * `mcp` action (fake_mcp.h), as codex would start those servers. Under approval_policy
 * "never" (exec's default) a server whose default_tools_approval_mode is not "approve" has
 * its calls refused, as the real CLI refuses them. */
static json_t *s_mcp_configs(const fake_t *self)
{
    json_t *servers = json_object();
    const char *key;
    json_t *value;
    json_object_foreach(self->overrides, key, value) {
        if (strncmp(key, "mcp_servers.", 12) != 0)
            continue;
        char name[128];
        const char *rest = key + 12;
        const char *dot = strchr(rest, '.');
        if (dot == NULL)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)(dot - rest), rest);
        json_t *server = json_object_get(servers, name);
        if (server == NULL) {
            server = json_object();
            json_object_set_new(servers, name, server);
        }
        const char *field = dot + 1;
        if (strncmp(field, "env.", 4) == 0) {
            if (json_object_get(server, "env") == NULL)
                json_object_set_new(server, "env", json_object());
            json_object_set(json_object_get(server, "env"), field + 4, value);
        } else {
            json_object_set(server, field, value);
        }
    }
    const char *policy = s_override_string(self, "approval_policy");
    const char *name;
    json_t *server;
    json_object_foreach(servers, name, server) {
        const char *mode =
            json_string_value(json_object_get(server, "default_tools_approval_mode"));
        if ((policy == NULL || strcmp(policy, "never") == 0) &&
            (mode == NULL || strcmp(mode, "approve") != 0))
            json_object_set_new(server, "refused",
                                json_string("MCP tool call requires approval, but approval "
                                            "policy is never"));
    }
    json_t *config = json_pack("{s:o}", "mcpServers", servers);
    char *text = json_dumps(config, JSON_COMPACT);
    json_decref(config);
    json_t *configs = json_pack("[s]", text != NULL ? text : "{}");
    free(text);
    return configs;
}

/* ---------------------------------------------------------------------------------------
 * The rollout store: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl */

static bool s_scenario(const fake_t *self, const char *name)
{
    return strcmp(self->scenario, name) == 0;
}

/* Finds, under `dir` (recursively), the rollout file whose name ends in "-<id>.jsonl". */
static bool s_find_rollout_in(const char *dir, const char *id, char *out, size_t size)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-%s.jsonl", id);
    bool found = false;
    struct dirent *entry;
    while (!found && (entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        size_t len = strlen(entry->d_name), slen = strlen(suffix);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            found = s_find_rollout_in(path, id, out, size);
        } else if (strncmp(entry->d_name, "rollout-", 8) == 0 && len > slen &&
                   strcmp(entry->d_name + len - slen, suffix) == 0) {
            snprintf(out, size, "%s", path);
            found = true;
        }
    }
    closedir(d);
    return found;
}

static bool s_find_rollout(const fake_t *self, const char *id, char *out, size_t size)
{
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/sessions", self->codex_home);
    return fake_is_uuid(id) && s_find_rollout_in(dir, id, out, size);
}

/* The last `cwd` recorded in a rollout (its latest turn_context, else its session_meta). */
static bool s_rollout_cwd(const char *path, char *out, size_t size)
{
    char *text = fake_read_file(path);
    bool found = false;
    for (char *line = text, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        json_t *record = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(record, "type"));
        const char *cwd = json_string_value(json_object_get(json_object_get(record, "payload"),
                                                            "cwd"));
        if (type != NULL && cwd != NULL &&
            (strcmp(type, "turn_context") == 0 || strcmp(type, "session_meta") == 0)) {
            snprintf(out, size, "%s", cwd);
            found = true;
        }
        json_decref(record);
    }
    free(text);
    return found;
}

/* --last: the most recently written rollout, of this cwd unless --all. */
typedef struct {
    const fake_t *self;
    struct timespec newest;
    char path[PATH_MAX + 256];
    bool found;
} latest_t;

static void s_latest_in(const char *dir, latest_t *latest)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            s_latest_in(path, latest);
            continue;
        }
        if (strncmp(entry->d_name, "rollout-", 8) != 0)
            continue;
        bool newer = !latest->found || st.st_mtim.tv_sec > latest->newest.tv_sec ||
                     (st.st_mtim.tv_sec == latest->newest.tv_sec &&
                      st.st_mtim.tv_nsec > latest->newest.tv_nsec);
        char cwd[PATH_MAX];
        if (!newer)
            continue;
        if (!latest->self->given[OPT_ALL] &&
            (!s_rollout_cwd(path, cwd, sizeof cwd) || strcmp(cwd, latest->self->cwd) != 0))
            continue;
        latest->newest = st.st_mtim;
        snprintf(latest->path, sizeof latest->path, "%s", path);
        latest->found = true;
    }
    closedir(d);
}

/* The thread id in a rollout file name (its last 36 characters before ".jsonl"). */
static void s_id_from_rollout(const char *path, char out[40])
{
    size_t len = strlen(path);
    snprintf(out, 40, "%.36s", len >= 42 ? path + len - 42 : "");
}

/* The path for a new rollout of self->thread_id, named like the real ones (local time). */
static void s_new_rollout_path(fake_t *self)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/sessions/%04d/%02d/%02d", self->codex_home, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday);
    fake_mkdirs(dir);
    snprintf(self->rollout, sizeof self->rollout,
             "%s/rollout-%04d-%02d-%02dT%02d-%02d-%02d-%s.jsonl", dir, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, self->thread_id);
}

/* Appends {"timestamp", "type", "payload"} to this thread's rollout. Takes `payload`. */
static void s_record(fake_t *self, const char *type, json_t *payload)
{
    char stamp[40];
    fake_timestamp(stamp);
    json_t *line = json_pack("{s:s, s:s, s:o}", "timestamp", stamp, "type", type, "payload",
                             payload);
    if (self->rollout[0] != '\0' && line != NULL)
        fake_append_json(self->rollout, line);
    json_decref(line);
}

static void s_record_session_meta(fake_t *self, const char *forked_from)
{
    char stamp[40];
    fake_timestamp(stamp);
    const char *provider = s_override_string(self, "model_provider");
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "session_id",
                             self->thread_id, "id", self->thread_id, "timestamp", stamp, "cwd",
                             self->cwd, "originator", "codex_exec", "cli_version", FAKE_VERSION,
                             "source", "exec", "model_provider",
                             provider != NULL ? provider : "openai");
    if (forked_from != NULL)
        json_object_set_new(meta, "forked_from_id", json_string(forked_from));
    s_record(self, "session_meta", meta);
}

/* Token totals of a thread: what its last token_count event recorded. */
typedef struct {
    json_int_t input, cached, cache_write, output, reasoning;
} usage_t;

static usage_t s_recorded_usage(const char *path)
{
    usage_t usage = {0, 0, 0, 0, 0};
    char *text = path[0] != '\0' ? fake_read_file(path) : NULL;
    for (char *line = text, *next; line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strstr(line, "\"token_count\"") == NULL)
            continue;
        json_t *record = json_loads(line, 0, NULL);
        json_t *total = json_object_get(
            json_object_get(json_object_get(record, "payload"), "info"), "total_token_usage");
        if (total != NULL) {
            usage.input = json_integer_value(json_object_get(total, "input_tokens"));
            usage.cached = json_integer_value(json_object_get(total, "cached_input_tokens"));
            usage.cache_write =
                json_integer_value(json_object_get(total, "cache_write_input_tokens"));
            usage.output = json_integer_value(json_object_get(total, "output_tokens"));
            usage.reasoning = json_integer_value(json_object_get(total, "reasoning_output_tokens"));
        }
        json_decref(record);
    }
    free(text);
    return usage;
}

static json_t *s_usage_json(usage_t u, bool with_total)
{
    json_t *usage = json_pack("{s:I, s:I, s:I, s:I, s:I}", "input_tokens", u.input,
                              "cached_input_tokens", u.cached, "cache_write_input_tokens",
                              u.cache_write, "output_tokens", u.output, "reasoning_output_tokens",
                              u.reasoning);
    if (with_total)
        json_object_set_new(usage, "total_tokens", json_integer(u.input + u.output));
    return usage;
}

/* ---------------------------------------------------------------------------------------
 * Output: the --json events. */

/* Prints one event, after FAKE_CODEX_DELAY_MS unless it is the first. Takes `event`. */
static void s_emit(fake_t *self, json_t *event)
{
    if (!self->first_event && self->delay_ms > 0)
        fake_sleep_ms(self->delay_ms);
    self->first_event = false;
    if (self->given[OPT_JSON])
        fake_print_json(event);
    else
        json_decref(event);
}

/* {"type":"item.<phase>","item":{"id":"item_N",<details>}}. Takes `details`. */
static void s_emit_item(fake_t *self, const char *phase, int item, json_t *details)
{
    char type[32], id[32];
    snprintf(type, sizeof type, "item.%s", phase);
    snprintf(id, sizeof id, "item_%d", item);
    json_t *body = json_pack("{s:s}", "id", id);
    json_object_update(body, details);
    json_decref(details);
    s_emit(self, json_pack("{s:s, s:o}", "type", type, "item", body));
}

static void s_emit_error(fake_t *self, const char *message)
{
    s_emit(self, json_pack("{s:s, s:s}", "type", "error", "message", message));
}

/* The fatal end of a turn: a last error event, then turn.failed. */
static void s_emit_turn_failed(fake_t *self, const char *message)
{
    s_emit_error(self, message);
    s_emit(self, json_pack("{s:s, s:{s:s}}", "type", "turn.failed", "error", "message", message));
}

/* "/bin/bash -lc '<cmd>'": how the real CLI shows a command the model ran. */
static char *s_shell_command(const char *command)
{
    size_t len = strlen("/bin/bash -lc ''") + 4 * strlen(command) + 1;
    char *out = malloc(len);
    if (out == NULL)
        return NULL;
    strcpy(out, "/bin/bash -lc '");
    char *w = out + strlen(out);
    for (const char *r = command; *r; r++) {
        if (*r == '\'') {
            memcpy(w, "'\\''", 4);
            w += 4;
        } else {
            *w++ = *r;
        }
    }
    strcpy(w, "'");
    return out;
}

/* The command's own output: fake_actions adds Claude's "Exit code N" line, codex does not. */
static char *s_command_output(const fake_step_t *step)
{
    char *out = strdup(step->output);
    if (out == NULL || step->exit_code == 0)
        return out;
    char marker[32];
    snprintf(marker, sizeof marker, "Exit code %d", step->exit_code);
    size_t len = strlen(out), mlen = strlen(marker);
    if (len >= mlen && strcmp(out + len - mlen, marker) == 0) {
        len -= mlen;
        if (len > 0 && out[len - 1] == '\n')
            len--; /* the separator fake_actions put before it */
        out[len] = '\0';
    }
    return out;
}

static void s_report_command(fake_t *self, const fake_step_t *step, int item)
{
    char *command = s_shell_command(json_string_value(json_object_get(step->input, "command")));
    s_emit_item(self, "started", item,
                json_pack("{s:s, s:s, s:s, s:n, s:s}", "type", "command_execution", "command",
                          command, "aggregated_output", "", "exit_code", "status", "in_progress"));
    char *output = s_command_output(step);
    bool ran = !(step->is_error && step->exit_code == 0); /* it could not even start */
    json_t *details = json_pack("{s:s, s:s, s:s, s:o, s:s}", "type", "command_execution",
                                "command", command, "aggregated_output", output ? output : "",
                                "exit_code", ran ? json_integer(step->exit_code) : json_null(),
                                "status", step->is_error ? "failed" : "completed");
    s_emit_item(self, "completed", item, details);
    free(output);
    free(command);
}

/* The files a Write/Edit step touched, as file_change changes with absolute paths. */
static json_t *s_file_changes(const fake_t *self, const fake_step_t *step)
{
    json_t *changes = json_array();
    const char *path = json_string_value(json_object_get(step->input, "file_path"));
    char absolute[PATH_MAX * 2];
    if (path != NULL && strcmp(path, ".") != 0) {
        snprintf(absolute, sizeof absolute, "%s%s%s", path[0] == '/' ? "" : self->cwd,
                 path[0] == '/' ? "" : "/", path);
        json_array_append_new(changes, json_pack("{s:s, s:s}", "path", absolute, "kind",
                                                 step->created ? "add" : "update"));
        return changes;
    }
    /* resolve-all: its output lists "<file> (N block(s))" after the first line */
    const char *line = strchr(step->output, '\n');
    while (line != NULL && *line) {
        line++;
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        const char *paren = memchr(line, '(', len);
        if (paren != NULL && paren > line) {
            snprintf(absolute, sizeof absolute, "%s/%.*s", self->cwd, (int)(paren - line - 1),
                     line);
            json_array_append_new(changes,
                                  json_pack("{s:s, s:s}", "path", absolute, "kind", "update"));
        }
        line = end;
    }
    return changes;
}

static void s_report_file_change(fake_t *self, const fake_step_t *step, int item)
{
    json_t *changes = s_file_changes(self, step);
    s_emit_item(self, "started", item,
                json_pack("{s:s, s:O, s:s}", "type", "file_change", "changes", changes, "status",
                          "in_progress"));
    s_emit_item(self, "completed", item,
                json_pack("{s:s, s:o, s:s}", "type", "file_change", "changes", changes, "status",
                          step->is_error ? "failed" : "completed"));
}

static void s_report_mcp(fake_t *self, const fake_step_t *step, int item)
{
    /* fake_actions names the step mcp__<server>__<tool> */
    char server[128] = "", tool[128] = "";
    const char *rest = step->tool + 5;
    const char *sep = strstr(rest, "__");
    if (sep != NULL) {
        snprintf(server, sizeof server, "%.*s", (int)(sep - rest), rest);
        snprintf(tool, sizeof tool, "%s", sep + 2);
    }
    s_emit_item(self, "started", item,
                json_pack("{s:s, s:s, s:s, s:O, s:n, s:n, s:s}", "type", "mcp_tool_call", "server",
                          server, "tool", tool, "arguments", step->input, "result", "error",
                          "status", "in_progress"));
    json_t *result = step->is_error ? json_null()
                                    : json_pack("{s:[{s:s, s:s}], s:n}", "content", "type", "text",
                                                "text", step->output, "structured_content");
    json_t *error = step->is_error ? json_pack("{s:s}", "message", step->output) : json_null();
    s_emit_item(self, "completed", item,
                json_pack("{s:s, s:s, s:s, s:O, s:o, s:o, s:s}", "type", "mcp_tool_call",
                          "server", server, "tool", tool, "arguments", step->input, "result",
                          result, "error", error, "status", step->is_error ? "failed" : "completed"));
}

/* One action of the script, as the item the real CLI reports for that kind of tool call. */
static void s_report_step(const fake_step_t *step, void *arg)
{
    fake_t *self = arg;
    self->tool_steps++;
    int item = self->next_item++;
    if (strcmp(step->tool, "Bash") == 0)
        s_report_command(self, step, item);
    else if (strncmp(step->tool, "mcp__", 5) == 0)
        s_report_mcp(self, step, item);
    else
        s_report_file_change(self, step, item);
}

/* ---------------------------------------------------------------------------------------
 * The prompt, as `codex exec` resolves it (docs/agent-codex.md §2). */

/* Reads stdin for the prompt. `required`: an empty stdin is an error. Returns 0 or 1. */
static int s_stdin_prompt(fake_t *self, bool required)
{
    self->stdin_text = fake_read_stdin(FAKE_STDIN_WAIT_FOREVER, NULL);
    const char *text = self->stdin_text != NULL ? self->stdin_text : "";
    bool blank = text[strspn(text, " \t\r\n")] == '\0';
    if (blank && required)
        return s_fail(self, 1, "No prompt provided via stdin.");
    return 0;
}

static int s_resolve_prompt(fake_t *self)
{
    const char *arg = self->prompt_arg;
    bool stdin_tty = isatty(0);
    if (arg != NULL && strcmp(arg, "-") != 0) {
        /* exec with a prompt argument appends piped stdin as a <stdin> block; resume and fork
         * take the argument alone */
        if (self->command != CMD_EXEC || stdin_tty) {
            self->prompt = strdup(arg);
            return 0;
        }
        fputs("Reading additional input from stdin...\n", stderr);
        s_stdin_prompt(self, false);
        const char *text = self->stdin_text != NULL ? self->stdin_text : "";
        if (text[strspn(text, " \t\r\n")] == '\0') {
            self->prompt = strdup(arg);
            return 0;
        }
        size_t len = strlen(arg) + strlen(text) + 32;
        self->prompt = malloc(len);
        if (self->prompt != NULL)
            snprintf(self->prompt, len, "%s\n\n<stdin>\n%s%s</stdin>", arg, text,
                     text[strlen(text) - 1] == '\n' ? "" : "\n");
        return 0;
    }
    if (arg == NULL && stdin_tty)
        return s_fail(self, 1, "No prompt provided. Either specify one as an argument or pipe "
                               "the prompt into stdin.");
    if (arg == NULL)
        fputs("Reading prompt from stdin...\n", stderr);
    int rc = s_stdin_prompt(self, true);
    if (rc == 0)
        self->prompt = strdup(self->stdin_text);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Checks and the run. */

static bool s_inside_git_repo(const char *cwd)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", cwd);
    for (;;) {
        char probe[PATH_MAX + 8];
        snprintf(probe, sizeof probe, "%s/.git", dir);
        if (access(probe, F_OK) == 0)
            return true;
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            return strcmp(dir, "/") != 0 && access("/.git", F_OK) == 0;
        *slash = '\0';
    }
}

/* $CODEX_HOME (which must exist) or ~/.codex (created). Returns 0 or 1. */
static int s_codex_home(fake_t *self)
{
    const char *env = getenv("CODEX_HOME");
    if (env != NULL && *env != '\0') {
        struct stat st;
        if (stat(env, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "WARNING: proceeding, even though we could not create PATH aliases: "
                            "CODEX_HOME points to \"%s\", but that path does not exist\n",
                    env);
            return s_fail(self, 1,
                          "Error finding codex home: CODEX_HOME points to \"%s\", but that path "
                          "does not exist",
                          env);
        }
        snprintf(self->codex_home, sizeof self->codex_home, "%s", env);
        return 0;
    }
    snprintf(self->codex_home, sizeof self->codex_home, "%s/.codex", fake_env_or("HOME", "/"));
    fake_mkdirs(self->codex_home);
    return 0;
}

/* Settles which thread this run continues: a new one, a resumed one (same id, same file) or
 * a fork (new id, the history copied). Returns 0 or the exit code. */
static int s_open_thread(fake_t *self)
{
    char found[PATH_MAX + 256] = "";
    const char *id = self->session_arg;
    bool ephemeral = self->given[OPT_EPHEMERAL];
    if (self->command == CMD_RESUME && self->given[OPT_LAST]) {
        latest_t latest = {self, {0, 0}, "", false};
        char dir[PATH_MAX + 32];
        snprintf(dir, sizeof dir, "%s/sessions", self->codex_home);
        s_latest_in(dir, &latest);
        if (latest.found)
            snprintf(found, sizeof found, "%s", latest.path);
    } else if (id != NULL && fake_is_uuid(id)) {
        if (!s_find_rollout(self, id, found, sizeof found))
            return s_fail(self, 1,
                          "Error: thread/%s: thread/%s failed: no rollout found for thread id %s "
                          "(code -32600)",
                          s_command_name(self->command), s_command_name(self->command), id);
    } else if (id != NULL && self->command == CMD_FORK) {
        /* not a UUID: a thread name, and this fake never names threads */
        return s_fail(self, 1, "Error: Session not found: %s", id);
    }
    /* resume of an unknown name (or --last with nothing to pick) starts a new thread, as the
     * real CLI does */
    snprintf(self->history, sizeof self->history, "%s", found);
    if (found[0] != '\0' && self->command == CMD_RESUME) {
        s_id_from_rollout(found, self->thread_id);
        if (!ephemeral)
            snprintf(self->rollout, sizeof self->rollout, "%s", found);
        return 0;
    }
    fake_new_uuid_v7(self->thread_id);
    if (ephemeral)
        return 0;
    s_new_rollout_path(self);
    if (found[0] == '\0') {
        s_record_session_meta(self, NULL);
        return 0;
    }
    /* a fork: a new session_meta, then the parent's history (its token totals included) */
    char parent[40];
    s_id_from_rollout(found, parent);
    s_record_session_meta(self, parent);
    char *text = fake_read_file(found);
    FILE *out = fopen(self->rollout, "ab");
    for (char *line = text, *next; out != NULL && line != NULL && *line; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        if (strstr(line, "\"session_meta\"") == NULL)
            fprintf(out, "%s\n", line);
    }
    if (out != NULL)
        fclose(out);
    free(text);
    return 0;
}

static void s_record_turn_start(fake_t *self)
{
    const char *model = self->value[OPT_MODEL] != NULL ? self->value[OPT_MODEL] : "gpt-6.1-sol";
    const char *approval = s_override_string(self, "approval_policy");
    const char *sandbox = self->value[OPT_SANDBOX] != NULL ? self->value[OPT_SANDBOX]
                                                           : s_override_string(self, "sandbox_mode");
    s_record(self, "turn_context",
             json_pack("{s:s, s:s, s:s, s:s}", "cwd", self->cwd, "model", model, "approval_policy",
                       approval != NULL ? approval : "never", "sandbox_mode",
                       sandbox != NULL ? sandbox : "read-only"));
    s_record(self, "response_item",
             json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "type", "message", "role", "user", "content",
                       "type", "input_text", "text", self->prompt));
}

/* Runs the action script, if any. Returns 0, or -1 with the reason in `error`. */
static int s_run_actions(fake_t *self, json_t *said, char *error, size_t error_size)
{
    const char *script = getenv("FAKE_CODEX_ACTIONS");
    if (script == NULL || *script == '\0')
        return 0;
    json_t *configs = s_mcp_configs(self);
    fake_mcp_set_configs(configs);
    int rc = fake_actions_run(script, s_report_step, self, said);
    fake_mcp_set_configs(NULL);
    json_decref(configs);
    if (rc == 0)
        return 0;
    snprintf(error, error_size, "fake-codex: %s", failure_message());
    fprintf(stderr, "%s\n", error);
    return -1;
}

static bool s_known_model(const char *model)
{
    for (int i = 0; s_known_models[i] != NULL; i++)
        if (strcmp(s_known_models[i], model) == 0)
            return true;
    return false;
}

/* The successful end: the agent's message, the token totals, turn.completed. */
static int s_finish(fake_t *self, const char *text)
{
    s_emit_item(self, "completed", self->next_item++,
                json_pack("{s:s, s:s}", "type", "reasoning", "text", "**Checking** the task"));
    s_emit_item(self, "completed", self->next_item++,
                json_pack("{s:s, s:s}", "type", "agent_message", "text", text));
    s_record(self, "response_item",
             json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "type", "message", "role", "assistant",
                       "content", "type", "output_text", "text", text));
    /* Every model call of the run (one per action, one for the answer) adds to the thread's
     * totals, and turn.completed reports those totals, as the real CLI does. */
    usage_t total = s_recorded_usage(self->history);
    json_int_t calls = self->tool_steps + 1;
    json_int_t input = fake_env_int("FAKE_CODEX_INPUT_TOKENS", 1000);
    json_int_t output = fake_env_int("FAKE_CODEX_OUTPUT_TOKENS", 200);
    usage_t last = {input, input < FAKE_CACHED_PER_CALL ? input : FAKE_CACHED_PER_CALL, 0, output, 0};
    total.input += calls * last.input;
    total.cached += calls * last.cached;
    total.output += calls * last.output;
    s_record(self, "event_msg",
             json_pack("{s:s, s:{s:o, s:o}}", "type", "token_count", "info", "total_token_usage",
                       s_usage_json(total, true), "last_token_usage", s_usage_json(last, true)));
    s_emit(self, json_pack("{s:s, s:o}", "type", "turn.completed", "usage",
                           s_usage_json(total, false)));
    self->last_message = strdup(text);
    if (!self->given[OPT_JSON]) {
        printf("%s\n", text);
        fflush(stdout);
    }
    return 0;
}

/* The turn: events, actions and the end the scenario asks for. Returns the exit code. */
static int s_turn(fake_t *self)
{
    s_emit(self, json_pack("{s:s, s:s}", "type", "thread.started", "thread_id", self->thread_id));
    const char *model = self->value[OPT_MODEL];
    if (model != NULL && !s_known_model(model)) {
        char message[512];
        snprintf(message, sizeof message,
                 "Model metadata for `%s` not found. Defaulting to fallback metadata; this can "
                 "degrade performance and cause issues.",
                 model);
        s_emit_item(self, "completed", self->next_item++,
                    json_pack("{s:s, s:s}", "type", "error", "message", message));
    }
    s_emit(self, json_pack("{s:s}", "type", "turn.started"));
    s_record_turn_start(self);

    if (s_scenario(self, "auth")) {
        /* no credentials: the request goes out without Authorization and gets a 401, which
         * codex retries five times before giving up */
        const char *why = "unexpected status 401 Unauthorized: Missing bearer or basic "
                          "authentication in header, url: https://api.openai.com/v1/responses";
        for (int attempt = 1; attempt <= 5; attempt++) {
            char message[512];
            snprintf(message, sizeof message, "Reconnecting... %d/5 (%s)", attempt, why);
            s_emit_error(self, message);
        }
        s_emit_turn_failed(self, why);
        return 1;
    }
    if (s_scenario(self, "reconnect")) {
        for (int attempt = 1; attempt <= 2; attempt++) {
            char message[256];
            snprintf(message, sizeof message,
                     "Reconnecting... %d/5 (stream disconnected before completion: error sending "
                     "request for url (https://api.openai.com/v1/responses))",
                     attempt);
            s_emit_error(self, message);
        }
    }

    json_t *said = json_array();
    char error[1100] = "";
    int actions_rc = s_run_actions(self, said, error, sizeof error);
    if (s_scenario(self, "crash")) {
        fprintf(stderr, "fake-codex: simulated crash\n");
        json_decref(said);
        return 2;
    }
    int rc = 1;
    if (actions_rc != 0) {
        s_emit_turn_failed(self, error);
    } else if (s_scenario(self, "turn_failed") || s_scenario(self, "error")) {
        s_emit_turn_failed(self, "stream disconnected before completion: The server had an error "
                                 "while processing your request. Sorry about that!");
    } else {
        char *joined = fake_join_lines(said);
        const char *text = fake_env_or("FAKE_CODEX_RESULT", NULL);
        if (text == NULL)
            text = joined != NULL && *joined != '\0' ? joined : FAKE_DEFAULT_RESULT;
        rc = s_finish(self, text);
        free(joined);
    }
    json_decref(said);
    if (rc == 0 && self->value[OPT_OUTPUT_LAST_MESSAGE] != NULL && self->last_message != NULL) {
        FILE *f = fopen(self->value[OPT_OUTPUT_LAST_MESSAGE], "w");
        if (f != NULL) {
            fputs(self->last_message, f);
            fclose(f);
        }
    }
    if (s_scenario(self, "hang_after_result"))
        fake_hang();
    return rc;
}

static bool s_known_scenario(const char *name)
{
    static const char *const known[] = {"success", "auth",  "turn_failed", "error",
                                        "reconnect", "crash", "hang",      "hang_after_result",
                                        NULL};
    for (int i = 0; known[i] != NULL; i++)
        if (strcmp(known[i], name) == 0)
            return true;
    return false;
}

/* `codex login status`: only $CODEX_HOME/auth.json counts (not CODEX_API_KEY, not
 * OPENAI_API_KEY), and the answer goes to stderr. */
static int s_login_status(fake_t *self)
{
    if (s_codex_home(self) != 0)
        return 1;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/auth.json", self->codex_home);
    json_t *auth = s_scenario(self, "auth") ? NULL : json_load_file(path, 0, NULL);
    if (auth == NULL) {
        fputs("Not logged in\n", stderr);
        return 1;
    }
    const char *key = json_string_value(json_object_get(auth, "OPENAI_API_KEY"));
    if (key != NULL && strlen(key) > 13)
        fprintf(stderr, "API key configured - %.8s***%s\nAuthentication is checked when you send "
                        "a request.\n", key, key + strlen(key) - 5);
    else
        fputs("Logged in using ChatGPT\n", stderr);
    json_decref(auth);
    return 0;
}

static int s_exec(fake_t *self)
{
    int rc = s_parse(self, 2);
    if (rc != 0)
        return rc;
    if (self->given[OPT_HELP]) {
        printf("Run Codex non-interactively (fake-codex: see docs/agent-codex.md)\n\n"
               "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> "
               "[ARGS]\n");
        return 0;
    }
    if (self->given[OPT_VERSION]) {
        printf("codex-cli-exec %s\n", FAKE_VERSION);
        return 0;
    }
    if (!s_known_scenario(self->scenario))
        return s_fail(self, 2, "fake-codex: unknown FAKE_CODEX_SCENARIO '%s'", self->scenario);
    rc = s_parse_overrides(self);
    if (rc != 0)
        return rc;
    if (self->value[OPT_CD] != NULL && chdir(self->value[OPT_CD]) != 0)
        return s_fail(self, 1, "Error: %s (os error %d)", strerror(errno), errno);
    if (getcwd(self->cwd, sizeof self->cwd) == NULL)
        snprintf(self->cwd, sizeof self->cwd, ".");
    rc = s_codex_home(self);
    if (rc == 0)
        rc = s_check_variant(self, "sandbox_mode", s_sandbox_modes);
    if (rc == 0) {
        static const char *const policies[] = {"untrusted", "on-failure", "on-request",
                                               "granular",  "never",      NULL};
        rc = s_check_variant(self, "approval_policy", policies);
    }
    if (rc == 0)
        rc = s_resolve_prompt(self);
    if (rc != 0)
        return rc;
    s_write_log(self);
    if (!self->given[OPT_SKIP_GIT_REPO_CHECK] && !self->given[OPT_BYPASS] &&
        !s_inside_git_repo(self->cwd))
        return s_fail(self, 1,
                      "Not inside a trusted directory and --skip-git-repo-check was not specified.");
    rc = s_open_thread(self);
    if (rc != 0)
        return rc;
    if (s_scenario(self, "hang"))
        fake_hang();
    return s_turn(self);
}

/* The real CLI interrupts the turn on SIGINT and exits 1 without a turn.failed event (a
 * SIGTERM just kills it: 143). */
static void s_on_sigint(int sig)
{
    (void)sig;
    _exit(1);
}

int main(int argc, char **argv)
{
    static fake_t fake;
    signal(SIGINT, s_on_sigint);
    fake.argc = argc;
    fake.argv = argv;
    fake.first_event = true;
    fake.delay_ms = fake_env_int("FAKE_CODEX_DELAY_MS", 0);
    fake.scenario = fake_env_or("FAKE_CODEX_SCENARIO", "success");
    int rc;
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("codex-cli %s\n", FAKE_VERSION);
        rc = 0;
    } else if (argc >= 2 && (strcmp(argv[1], "exec") == 0 || strcmp(argv[1], "e") == 0)) {
        rc = s_exec(&fake);
    } else if (argc == 3 && strcmp(argv[1], "login") == 0 && strcmp(argv[2], "status") == 0) {
        rc = s_login_status(&fake);
    } else {
        rc = s_fail(&fake, 2, "fake-codex: only `codex exec ...`, `codex login status` and "
                              "`codex --version` are reproduced");
    }
    free(fake.stdin_text);
    free(fake.prompt);
    free(fake.last_message);
    json_decref(fake.overrides);
    for (int i = 0; i < OPT_COUNT; i++)
        json_decref(fake.values[i]);
    return rc;
}
