/* cli_claude: the adapter for Claude Code in headless mode (docs/agent-cli.md). */
#include "agent_cli.h"

#include "failure.h"
#include "msgjson.h"
#include "utf8.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAUDE_DEFAULT_MODEL "sonnet"
/* The texts of docs/agent-cli.md §3 the runner acts on. */
#define CLAUDE_LOST_TEXT "No conversation found with session ID"
#define CLAUDE_IN_USE_TEXT "is already in use"
#define CLAUDE_NOT_LOGGED_IN_TEXT "Not logged in"
/* Longer encoded project names are cut by the CLI and given a hash suffix. */
#define CLAUDE_ENCODED_MAX 200

/* list joined with "," (NULL on OOM). */
static char *s_join(const char *const *list)
{
    size_t len = 1;
    for (size_t i = 0; list[i] != NULL; i++)
        len += strlen(list[i]) + 1;
    char *joined = calloc(1, len);
    if (joined == NULL)
        return NULL;
    for (size_t i = 0; list[i] != NULL; i++) {
        if (i > 0)
            strcat(joined, ",");
        strcat(joined, list[i]);
    }
    return joined;
}

static void s_add_joined(agent_argv_t *argv, const char *flag, const char *const *list)
{
    if (list == NULL)
        return;
    char *joined = s_join(list);
    agent_argv_add(argv, flag);
    if (joined == NULL)
        argv->failed = true;
    else
        agent_argv_add(argv, joined);
    free(joined);
}

/* <extra args> -p --output-format stream-json --verbose --model M [--fallback-model F] [options]
 * (--session-id ID | --resume ID | --resume OF --fork-session --session-id ID) (§1). */
static void s_build_argv(agent_argv_t *argv, const agent_call_t *call)
{
    const agent_settings_t *set = call->settings;
    agent_argv_add_list(argv, set->extra_args);
    agent_argv_add(argv, "-p");
    agent_argv_add(argv, "--output-format");
    agent_argv_add(argv, "stream-json");
    agent_argv_add(argv, "--verbose");
    agent_argv_add(argv, "--model");
    agent_argv_add(argv, set->model ? set->model : CLAUDE_DEFAULT_MODEL);
    if (set->fallback_model != NULL) {
        agent_argv_add(argv, "--fallback-model");
        agent_argv_add(argv, set->fallback_model);
    }
    if (set->max_turns > 0) {
        agent_argv_add(argv, "--max-turns");
        agent_argv_addf(argv, "%d", set->max_turns);
    }
    if (set->max_budget_usd > 0) {
        agent_argv_add(argv, "--max-budget-usd");
        agent_argv_addf(argv, "%g", set->max_budget_usd);
    }
    if (set->permission_mode != NULL) {
        agent_argv_add(argv, "--permission-mode");
        agent_argv_add(argv, set->permission_mode);
    }
    s_add_joined(argv, "--allowedTools", set->allowed_tools);
    s_add_joined(argv, "--disallowedTools", set->disallowed_tools);
    for (size_t i = 0; set->add_dirs != NULL && set->add_dirs[i] != NULL; i++) {
        agent_argv_add(argv, "--add-dir");
        agent_argv_add(argv, set->add_dirs[i]);
    }
    if (set->mcp_config != NULL) {
        agent_argv_add(argv, "--mcp-config");
        agent_argv_add(argv, set->mcp_config);
    }
    if (set->append_system_prompt != NULL) {
        agent_argv_add(argv, "--append-system-prompt");
        agent_argv_add(argv, set->append_system_prompt);
    }
    if (call->mode == AGENT_CALL_FORK) {
        agent_argv_add(argv, "--resume");
        agent_argv_add(argv, call->fork_of);
        agent_argv_add(argv, "--fork-session");
    }
    agent_argv_add(argv, call->mode == AGENT_CALL_RESUME ? "--resume" : "--session-id");
    agent_argv_add(argv, call->session_id);
}

static agent_failure_kind_t s_classify(const char *stderr_tail, const char *result_text)
{
    if (agent_cli_mentions(stderr_tail, CLAUDE_LOST_TEXT) ||
        agent_cli_mentions(result_text, CLAUDE_LOST_TEXT))
        return AGENT_FAILURE_SESSION_LOST;
    if (agent_cli_mentions(stderr_tail, CLAUDE_IN_USE_TEXT) ||
        agent_cli_mentions(result_text, CLAUDE_IN_USE_TEXT))
        return AGENT_FAILURE_SESSION_IN_USE;
    if (agent_cli_mentions(result_text, CLAUDE_NOT_LOGGED_IN_TEXT))
        return AGENT_FAILURE_NOT_LOGGED_IN;
    return AGENT_FAILURE_OTHER;
}

/* ---------------------------------------------------------------------------------------
 * Transcripts on disk (§5). */

static void s_encode_cwd(char *out, size_t size, const char *path)
{
    size_t i = 0;
    for (; path[i] != '\0' && i + 1 < size; i++) {
        char c = path[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        out[i] = keep ? c : '-';
    }
    out[i] = '\0';
}

int agent_transcript_path(char *buf, size_t size, const char *cwd, const char *session_id)
{
    char real[PATH_MAX];
    if (realpath(cwd, real) == NULL)
        return failure_set(FAILURE_NOT_FOUND, "cannot resolve %s: %s", cwd, strerror(errno));
    char encoded[PATH_MAX];
    s_encode_cwd(encoded, sizeof encoded, real);

    char projects[PATH_MAX];
    const char *config = getenv("CLAUDE_CONFIG_DIR");
    const char *home = getenv("HOME");
    int n;
    if (config != NULL && config[0] != '\0')
        n = snprintf(projects, sizeof projects, "%s/projects", config);
    else
        n = snprintf(projects, sizeof projects, "%s/.claude/projects", home ? home : "");
    if (n < 0 || (size_t)n >= sizeof projects)
        return failure_set(FAILURE_TOO_BIG, "transcript path too long");

    if (strlen(encoded) > CLAUDE_ENCODED_MAX) {
        /* The CLI truncates long names and appends a hash we cannot compute: look for it. */
        encoded[CLAUDE_ENCODED_MAX] = '\0';
        DIR *dir = opendir(projects);
        struct dirent *entry = NULL;
        bool found = false;
        while (dir != NULL && (entry = readdir(dir)) != NULL) {
            if (strncmp(entry->d_name, encoded, CLAUDE_ENCODED_MAX) == 0) {
                utf8_copy(encoded, sizeof encoded, entry->d_name);
                found = true;
                break;
            }
        }
        if (dir != NULL)
            closedir(dir);
        if (!found)
            return failure_set(FAILURE_NOT_FOUND, "no project directory for %s", real);
    }
    n = snprintf(buf, size, "%s/%s/%s.jsonl", projects, encoded, session_id);
    if (n < 0 || (size_t)n >= size)
        return failure_set(FAILURE_TOO_BIG, "transcript path too long");
    return 0;
}

static bool s_session_exists(const char *cwd, const char *session_id)
{
    char path[PATH_MAX + 512];
    return agent_transcript_path(path, sizeof path, cwd, session_id) == 0 &&
           access(path, F_OK) == 0;
}

/* Exactly what Claude Code sets for its own children (§1): not every CLAUDE_CODE_*
 * variable, since CLAUDE_CODE_OAUTH_TOKEN, CLAUDE_CODE_USE_BEDROCK and friends are how the
 * CLI is logged in or pointed at a provider. */
static const char *const s_env_remove[] = {"CLAUDECODE", "CLAUDE_CODE_SESSION_ID",
                                           "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_CODE_ENTRYPOINT",
                                           NULL};

const agent_cli_t agent_cli_claude = {
    .name = "claude",
    .default_command = "claude",
    .names_sessions = false,
    .forks = true,
    .takes_system_prompt = true,
    .login_check = NULL, /* a run without a login fails at once and says so (§2) */
    .login_hint = "run `claude` once to log in, or set ANTHROPIC_API_KEY",
    .build_argv = s_build_argv,
    .read_event = NULL,
    .classify = s_classify,
    .session_exists = s_session_exists,
    .env_remove = s_env_remove,
};
