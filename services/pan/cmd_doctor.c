/* pan doctor: checks what the system needs before it can do anything useful, one line each.
 *
 *   pan doctor [--workspace DIR]... [--json]
 *
 * ✓/✗ per check, exit 1 if any ✗:
 *   configuration  $PANOPTICON_HOME/cloister.toml parses (or is absent: defaults);
 *   broker         answers a `stats` request on the control endpoint, with the bus's keys
 *                  when CURVE is on (as every other command; keys it cannot load are the
 *                  failure then);
 *   agent          for each agent CLI the enabled built-in specialists use: its command
 *                  runs (`<command> --version`), and it is logged in — Claude:
 *                  ANTHROPIC_API_KEY, else `<command> auth status` (exit 1 when not);
 *                  Codex: CODEX_API_KEY/CODEX_ACCESS_TOKEN, else `<command> login status`;
 *                  Gemini: GEMINI_API_KEY and friends, else an auth method chosen in
 *                  ~/.gemini/settings.json;
 *   git identity   user.name and user.email, or GIT_AUTHOR_NAME/EMAIL (the agents' git
 *                  commands, e.g. a fix or a resolution, commit in that name);
 *   workspaces     each --workspace opens as a git repository for this user (an
 *                  unsafe-ownership refusal names the safe.directory setting);
 *   gh             present, when [review] post = true;
 *   disk           at least DOCTOR_MIN_FREE_MB free in $PANOPTICON_HOME;
 *   model API      only for a specialist the broker paused (its model API refused the key,
 *                  specialist.h): one short real run of its agent CLI (a throwaway session,
 *                  "pan-doctor" in the history) must get an answer. When every check
 *                  passes, the paused specialists are resumed.
 * Workspaces are named on the command line: the configuration has no list of them. */
#include "pan.h"
#include "sandbox.h"

#include "agent_cli.h"
#include "agent_job.h"
#include "failure.h"
#include "home.h"
#include "msgjson.h"
#include "proc.h"

#include <git2.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* Free space in $PANOPTICON_HOME below which the store and worktrees are at risk. */
#define DOCTOR_MIN_FREE_MB 1024
/* How long `<command> --version` may take. */
#define DOCTOR_COMMAND_TIMEOUT_MS 15000
/* How long the model API check's agent run may take. */
#define DOCTOR_MODEL_TIMEOUT_S 120

static const char *const s_usage = "pan doctor [--workspace DIR]... [--json]";
static const char *const s_builtin[] = {"review-agent", "test-agent", "merge-agent"};

typedef struct {
    json_t *checks; /* array of {check, ok, detail} */
    bool json;
    bool failed;
} doctor_t;

static void s_report(doctor_t *d, const char *check, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void s_report(doctor_t *d, const char *check, bool ok, const char *fmt, ...)
{
    char detail[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    if (!ok)
        d->failed = true;
    if (d->json)
        json_array_append_new(d->checks, json_pack("{s:s, s:b, s:s}", "check", check, "ok", ok,
                                                   "detail", detail));
    else
        printf("%s%s%s %-14s %s\n", pan_colour(stdout, ok ? PAN_COLOUR_GOOD : PAN_COLOUR_BAD),
               ok ? "✓" : "✗", pan_colour_end(stdout), check, detail);
}

static void s_check_config(doctor_t *d, const char *config_error)
{
    char path[4096];
    home_path(path, sizeof path, "cloister.toml");
    struct stat st;
    if (config_error != NULL)
        s_report(d, "configuration", false, "%s", config_error);
    else if (stat(path, &st) != 0)
        s_report(d, "configuration", true, "%s absent: the defaults apply", path);
    else
        s_report(d, "configuration", true, "%s parses", path);
}

static void s_check_broker(doctor_t *d, const pan_t *pan, const char *keys_error)
{
    if (keys_error != NULL) {
        s_report(d, "broker", false, "not asked on %s: the bus's keys: %s", pan->control_ep,
                 keys_error);
        return;
    }
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client ? client_call(client, writer, &reply) : FAILURE_INVALID;
    if (rc == 0)
        s_report(d, "broker", true, "answers on %s", pan->control_ep);
    else
        s_report(d, "broker", false, "no answer on %s: %s", pan->control_ep, failure_message());
    wire_msg_destroy(&reply);
    wire_writer_destroy(&writer);
    client_destroy(&client);
}

/* True when the agent can call its API: an API key, else what `<command> auth status` says
 * (the CLI exits 1 when not logged in; docs/agent-cli.md §1). */
static bool s_logged_in(const char *command, char *how, size_t size)
{
    const char *key = getenv("ANTHROPIC_API_KEY");
    if (key != NULL && key[0] != '\0') {
        snprintf(how, size, "ANTHROPIC_API_KEY is set");
        return true;
    }
    char *argv[] = {(char *)command, "auth", "status", NULL};
    char out[1024];
    bool ok = proc_probe(argv, DOCTOR_COMMAND_TIMEOUT_MS, out, sizeof out);
    if (ok)
        snprintf(how, size, "`%s auth status`: %s", command, out);
    else
        snprintf(how, size,
                 "no ANTHROPIC_API_KEY, and `%s auth status` says not logged in (%s): set the key "
                 "or log in with `%s`",
                 command, out, command);
    return ok;
}

/* Codex: a key in the environment that `codex exec` sends, else `<command> login status`
 * (exit 0; it looks at $CODEX_HOME/auth.json only). */
static bool s_codex_logged_in(const char *command, char *how, size_t size)
{
    const char *keys[] = {"CODEX_API_KEY", "CODEX_ACCESS_TOKEN"}; /* OPENAI_API_KEY: ignored */
    for (size_t i = 0; i < 2; i++) {
        if (getenv(keys[i]) != NULL && getenv(keys[i])[0] != '\0') {
            snprintf(how, size, "%s is set", keys[i]);
            return true;
        }
    }
    char *argv[] = {(char *)command, "login", "status", NULL};
    char out[1024];
    bool ok = proc_probe(argv, DOCTOR_COMMAND_TIMEOUT_MS, out, sizeof out);
    snprintf(how, size, "`%s login status`: %s%s", command, out,
             ok ? "" : " — run `codex login` or set CODEX_API_KEY");
    return ok;
}

/* Gemini has no status command: a key in the environment, or an auth method chosen in
 * ~/.gemini/settings.json (security.auth.selectedType). */
static bool s_gemini_logged_in(char *how, size_t size)
{
    const char *keys[] = {"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI",
                          "GOOGLE_GENAI_USE_GCA"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (getenv(keys[i]) != NULL && getenv(keys[i])[0] != '\0') {
            snprintf(how, size, "%s is set", keys[i]);
            return true;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/.gemini/settings.json", getenv("HOME") ? getenv("HOME") : "");
    json_t *settings = json_load_file(path, 0, NULL);
    const char *chosen = json_string_value(json_object_get(
        json_object_get(json_object_get(settings, "security"), "auth"), "selectedType"));
    bool ok = chosen != NULL && chosen[0] != '\0';
    if (ok)
        snprintf(how, size, "auth method %s in %s", chosen, path);
    else
        snprintf(how, size, "no GEMINI_API_KEY and no auth method in %s: set the key", path);
    json_decref(settings);
    return ok;
}

/* One agent CLI (and command) used by `users`, the specialists that run it. */
static void s_check_cli(doctor_t *d, const char *cli, const char *command, const char *users)
{
    char *argv[] = {(char *)command, "--version", NULL};
    char out[1200];
    bool runs = proc_probe(argv, DOCTOR_COMMAND_TIMEOUT_MS, out, sizeof out);
    if (runs)
        s_report(d, "agent", true, "%s: `%s --version`: %s (for %s)", cli, command, out, users);
    else
        s_report(d, "agent", false,
                 "%s: `%s --version` failed: %s — set [agent] command (or [specialists.<name>] "
                 "command), or CLOISTER_AGENT_COMMAND",
                 cli, command, out);
    char how[4200];
    bool ok = strcmp(cli, "codex") == 0    ? s_codex_logged_in(command, how, sizeof how)
              : strcmp(cli, "gemini") == 0 ? s_gemini_logged_in(how, sizeof how)
                                           : s_logged_in(command, how, sizeof how);
    s_report(d, "agent login", ok, "%s: %s", cli, how);
}

/* Each distinct CLI and command of the enabled built-in specialists, checked once. */
static void s_check_agent(doctor_t *d, const config_t *config)
{
    size_t n = sizeof s_builtin / sizeof s_builtin[0];
    bool done[sizeof s_builtin / sizeof s_builtin[0]] = {false};
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (done[i] || !config_specialist_enabled(config, s_builtin[i]))
            continue;
        any = true;
        const char *cli = config_specialist_cli(config, s_builtin[i]);
        const char *command = config_specialist_command(config, s_builtin[i]);
        if (command == NULL || command[0] == '\0')
            command = agent_cli_find(cli) ? agent_cli_find(cli)->default_command : cli;
        char users[200] = "";
        for (size_t k = i; k < n; k++) {
            const char *other = config_specialist_command(config, s_builtin[k]);
            if (done[k] || !config_specialist_enabled(config, s_builtin[k]) ||
                strcmp(config_specialist_cli(config, s_builtin[k]), cli) != 0 ||
                (other != NULL && other[0] != '\0' && strcmp(other, command) != 0))
                continue;
            done[k] = true;
            size_t len = strlen(users);
            snprintf(users + len, sizeof users - len, "%s%s", len ? ", " : "", s_builtin[k]);
        }
        s_check_cli(d, cli, command, users);
    }
    if (!any)
        s_report(d, "agent", true, "no built-in specialist is enabled: no agent needed");
}

static void s_check_git_identity(doctor_t *d)
{
    const char *env_name = getenv("GIT_AUTHOR_NAME"), *env_email = getenv("GIT_AUTHOR_EMAIL");
    if (env_name != NULL && env_name[0] != '\0' && env_email != NULL && env_email[0] != '\0') {
        s_report(d, "git identity", true, "%s <%s> (GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL)", env_name,
                 env_email);
        return;
    }
    git_config *config = NULL;
    git_buf name = {0}, email = {0};
    bool ok = git_config_open_default(&config) == 0 &&
              git_config_get_string_buf(&name, config, "user.name") == 0 &&
              git_config_get_string_buf(&email, config, "user.email") == 0;
    if (ok)
        s_report(d, "git identity", true, "%s <%s>", name.ptr, email.ptr);
    else
        s_report(d, "git identity", false,
                 "user.name and user.email are not both set (git config --global user.name ...)");
    git_buf_dispose(&name);
    git_buf_dispose(&email);
    git_config_free(config);
}

static void s_check_workspace(doctor_t *d, const char *workspace)
{
    git_repository *repo = NULL;
    if (git_repository_open_ext(&repo, workspace, 0, NULL) == 0) {
        s_report(d, "workspace", true, "%s opens as a git repository", workspace);
        git_repository_free(repo);
        return;
    }
    const git_error *e = git_error_last();
    const char *why = e && e->message ? e->message : "not a git repository";
    bool owner = e != NULL && e->klass == GIT_ERROR_CONFIG && strstr(why, "owner") != NULL;
    s_report(d, "workspace", false, "%s: %s%s%s", workspace, why,
             owner ? " — trust it with: git config --global --add safe.directory " : "",
             owner ? workspace : "");
}

/* Whether merges into the workspace can be pushed: `git push --dry-run` to [merge] remote
 * authenticates and negotiates like a push (an SSH agent, a credential helper, GH_TOKEN
 * through gh) but writes nothing. Never prompts: a check that would wait for a password is
 * a failure saying so. */
static void s_check_push(doctor_t *d, const config_t *config, const char *workspace)
{
    const char *remote = config_string(config, "merge", "remote", "origin");
    char *has_remote[] = {"git", "-C", (char *)workspace, "remote", "get-url", (char *)remote, NULL};
    char out[1200];
    if (!proc_probe(has_remote, DOCTOR_COMMAND_TIMEOUT_MS, out, sizeof out)) {
        s_report(d, "push", true, "%s has no remote '%s': merges there are not pushed", workspace,
                 remote);
        return;
    }
    setenv("GIT_TERMINAL_PROMPT", "0", 1);
    setenv("GIT_SSH_COMMAND", "ssh -o BatchMode=yes", 0);
    char *push[] = {"git", "-C", (char *)workspace, "push", "--dry-run", "--porcelain",
                    (char *)remote, "HEAD:refs/heads/cloister-doctor-push-check", NULL};
    char why[1200];
    bool ok = proc_probe(push, DOCTOR_COMMAND_TIMEOUT_MS, why, sizeof why);
    s_report(d, "push", ok,
             ok ? "`git push --dry-run %s` from %s is accepted (credentials work)"
                : "`git push --dry-run %s` from %s failed: %s — give the merge-agent push "
                  "credentials (an SSH agent, or GH_TOKEN with gh; docs/deploy-compose.md)",
             remote, workspace, why);
}

static void s_check_gh(doctor_t *d, const config_t *config)
{
    if (!config_bool(config, "review", "post", false))
        return;
    const char *gh = config_string(config, "review", "gh_command", "gh");
    char *argv[] = {(char *)gh, "--version", NULL};
    char out[1200];
    bool runs = proc_probe(argv, DOCTOR_COMMAND_TIMEOUT_MS, out, sizeof out);
    s_report(d, "gh", runs, runs ? "`%s --version`: %s ([review] post = true)"
                                 : "`%s --version` failed: %s ([review] post = true needs it)",
             gh, out);
}

/* Whether code under test (tests, review checks, the merge's tests) runs isolated here:
 * bwrap, and a network of its own (sandbox.h). A machine that cannot isolate it fails the
 * check, unless the configuration chose [tests] sandbox = "none" (it is then said). */
static void s_check_sandbox(doctor_t *d, const config_t *config)
{
    sandbox_t *sandbox = NULL;
    if (sandbox_new(&sandbox, config) != 0) {
        s_report(d, "sandbox", false, "%s", failure_message());
        return;
    }
    char network[1600];
    bool isolated = sandbox_network(sandbox, NULL, network, sizeof network);
    bool chosen = strcmp(config_string(config, "tests", "sandbox", "auto"), "none") == 0;
    /* The network's words name the cause and its remedy (sandbox.c). */
    s_report(d, "sandbox", isolated || chosen, "%s; network %s%s", sandbox_describe(sandbox),
             network, !isolated && chosen ? " ([tests] sandbox = \"none\" chose it)" : "");
    sandbox_destroy(&sandbox);
}

static void s_check_disk(doctor_t *d)
{
    /* A home not made yet will be made inside its nearest existing parent. */
    char home[4096];
    snprintf(home, sizeof home, "%s", home_dir());
    struct statvfs fs;
    while (statvfs(home, &fs) != 0) {
        char *slash = strrchr(home, '/');
        if (slash == NULL || slash == home) {
            s_report(d, "disk", false, "cannot read the free space of %s", home_dir());
            return;
        }
        *slash = '\0';
    }
    unsigned long long free_mb =
        (unsigned long long)fs.f_bavail * (unsigned long long)fs.f_frsize / (1024 * 1024);
    s_report(d, "disk", free_mb >= DOCTOR_MIN_FREE_MB, "%llu MB free in %s (at least %d wanted)",
             free_mb, home, DOCTOR_MIN_FREE_MB);
}

/* The broker's paused specialists (list_specialists entries with `paused`; caller owns), or
 * NULL when it does not answer. */
static json_t *s_paused_specialists(const pan_t *pan)
{
    client_t *client = client_new(pan->control_ep, pan->timeout_ms);
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_LIST_SPECIALISTS);
    wire_msg_t *reply = NULL;
    json_t *paused = NULL;
    const msgpack_object *object = NULL;
    if (client != NULL && client_call(client, writer, &reply) == 0 &&
        (object = wire_msg_object(reply, FIELD_DATA)) != NULL) {
        json_t *all = msgjson_from_object(object);
        paused = json_array();
        size_t i;
        json_t *entry;
        json_array_foreach(all, i, entry)
        {
            if (pan_json_str(entry, "paused", NULL) != NULL)
                json_array_append(paused, entry);
        }
        json_decref(all);
    }
    wire_msg_destroy(&reply);
    wire_writer_destroy(&writer);
    client_destroy(&client);
    return paused;
}

/* A paused specialist's model API: one short run of its agent CLI, with its settings, in a
 * throwaway session of its own ("pan-doctor"), must be answered. */
static void s_check_model(doctor_t *d, const config_t *config, const char *name, const char *why)
{
    agent_job_settings_t settings;
    if (agent_job_settings_from_config(&settings, config, name, NULL) != 0) {
        s_report(d, "model API", false, "%s: %s", name, failure_message());
        return;
    }
    char workdir[AGENT_JOB_WORKDIR_SIZE];
    if (agent_job_workdir(workdir, sizeof workdir, config, "pan-doctor") != 0) {
        s_report(d, "model API", false, "%s: %s", name, failure_message());
        return;
    }
    agent_settings_t probe = settings.agent;
    probe.specialist = "pan-doctor";
    probe.session = NULL;
    probe.workdir = workdir;
    probe.mcp_config = NULL;
    probe.max_turns = 1;
    probe.timeout_s = DOCTOR_MODEL_TIMEOUT_S;
    probe.fork_session = true; /* a throwaway session: nothing stored for the next probe */
    agent_run_t *run = NULL;
    if (agent_run(&run, &probe, "Reply with the word ok.", NULL, NULL, NULL) != 0) {
        s_report(d, "model API", false, "%s: %s", name, failure_message());
        return;
    }
    const agent_outcome_t *o = agent_run_outcome(run);
    if (o->ok)
        s_report(d, "model API", true, "%s (paused: %s): its agent got an answer now", name, why);
    else
        s_report(d, "model API", false, "%s stays paused: %s", name, o->error);
    agent_run_destroy(&run);
}

/* After every check passed: the paused specialists take tasks again. */
static void s_resume_paused(doctor_t *d, const pan_t *pan, const json_t *paused)
{
    size_t i;
    json_t *entry;
    json_array_foreach(paused, i, entry)
    {
        const char *name = pan_json_str(entry, "name", "");
        json_t *data = NULL;
        int code = pan_resume_specialist(pan, name, &data);
        s_report(d, "resumed", code == PAN_EXIT_OK, "%s: %s", name,
                 code == PAN_EXIT_OK ? "its tasks are dispatched again"
                                     : "the broker did not resume it");
        json_decref(data);
    }
}

int cmd_doctor(const pan_t *pan, int argc, char **argv, const char *config_error,
               const char *keys_error)
{
    doctor_t d = {.checks = json_array()};
    const char *workspaces[32];
    int nworkspaces = 0;
    for (int i = 0; i < argc; i++) {
        const char *value = NULL;
        int found = pan_option(argc, argv, &i, "--workspace", &value);
        if (found < 0)
            return pan_usage(s_usage, "--workspace needs a value");
        if (found > 0 && nworkspaces < 32)
            workspaces[nworkspaces++] = value;
        else if (found == 0 && strcmp(argv[i], "--json") == 0)
            d.json = true;
        else if (found == 0)
            return pan_usage_unknown(s_usage, argv[i]);
    }
    git_libgit2_init();
    s_check_config(&d, config_error);
    s_check_broker(&d, pan, keys_error);
    s_check_agent(&d, pan->config);
    s_check_git_identity(&d);
    for (int i = 0; i < nworkspaces; i++) {
        s_check_workspace(&d, workspaces[i]);
        s_check_push(&d, pan->config, workspaces[i]);
    }
    s_check_gh(&d, pan->config);
    s_check_sandbox(&d, pan->config);
    s_check_disk(&d);
    json_t *paused = s_paused_specialists(pan);
    size_t i;
    json_t *entry;
    json_array_foreach(paused, i, entry)
    {
        s_check_model(&d, pan->config, pan_json_str(entry, "name", ""),
                      pan_json_str(entry, "paused", ""));
    }
    if (!d.failed)
        s_resume_paused(&d, pan, paused);
    json_decref(paused);
    git_libgit2_shutdown();
    if (d.json)
        pan_print_json(d.checks);
    json_decref(d.checks);
    return d.failed ? PAN_EXIT_ERROR : PAN_EXIT_OK;
}
