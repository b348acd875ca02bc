/* agent_cli: what differs between the agent CLIs the runner drives, one adapter each —
 * Claude Code (cli_claude.c, docs/agent-cli.md), OpenAI Codex (cli_codex.c,
 * docs/agent-codex.md) and Google Gemini (cli_gemini.c, docs/agent-gemini.md): the argv of
 * an attempt, the reading of its output, what its failures mean, where it keeps sessions.
 * The runner (agent.c) keeps what they share: the lock, the session file, deadlines, the
 * process group, recovery, history. An adapter holds no state; the stream it reads into
 * (agent_stream.h) holds the run's. */
#ifndef CLOISTER_AGENT_CLI_H
#define CLOISTER_AGENT_CLI_H

#include "agent.h"
#include "agent_stream.h"

#include <stdbool.h>
#include <stddef.h>

/* How an attempt uses its session. */
typedef enum {
    AGENT_CALL_NEW,    /* a new session, named session_id when the CLI takes our name */
    AGENT_CALL_RESUME, /* continue session_id */
    AGENT_CALL_FORK    /* a copy of fork_of, named session_id when the CLI takes our name */
} agent_call_mode_t;

/* One attempt as the runner asks for it. Everything borrowed for the call. */
typedef struct {
    const agent_settings_t *settings;
    agent_call_mode_t mode;
    const char *session_id; /* "" for NEW/FORK when the CLI names sessions itself */
    const char *fork_of;    /* FORK only */
} agent_call_t;

/* What a failed attempt said, when it is something the runner acts on. */
typedef enum {
    AGENT_FAILURE_OTHER,
    AGENT_FAILURE_SESSION_LOST,   /* the CLI does not know the resumed id: start fresh */
    AGENT_FAILURE_SESSION_IN_USE, /* the id is taken or busy */
    AGENT_FAILURE_NOT_LOGGED_IN   /* no credentials: fail clearly, never retry */
} agent_failure_kind_t;

/* An argv under construction; every string is a copy it owns. An allocation failure is
 * remembered (`failed`) and later adds do nothing, so a builder checks once at the end. */
typedef struct {
    char **items; /* NULL-terminated once anything was added */
    size_t count, cap;
    bool failed;
} agent_argv_t;

void agent_argv_add(agent_argv_t *argv, const char *arg);
void agent_argv_addf(agent_argv_t *argv, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Every entry of a NULL-terminated list (NULL adds nothing). */
void agent_argv_add_list(agent_argv_t *argv, const char *const *list);
void agent_argv_free(agent_argv_t *argv);

typedef struct {
    const char *name;            /* what [agent] cli / [specialists.X] agent names */
    const char *default_command; /* searched in PATH */
    bool names_sessions;         /* the CLI names a new session itself and says so in its
                                    output (stream->session_id); we cannot choose the id */
    bool forks;                  /* can copy a session; else a fork is a fresh throwaway */
    bool takes_system_prompt;    /* has a flag for append_system_prompt; else the runner
                                    puts that text in front of the prompt */
    bool usage_is_thread_total;  /* the usage it reports is the session's running total
                                    (Codex): the runner subtracts what earlier runs had */
    bool slash_is_command;       /* input starting with '/' runs as a slash command
                                    (Gemini): the runner puts a line in front of it */
    const char *const *login_check; /* args of a quick credentials check run before each
                                       run (exit 0 = logged in); NULL = none */
    const char *const *login_env;   /* variables that log a run in by themselves: when one
                                       is set, the check is skipped */
    const char *login_hint;         /* what to do when not logged in */
    /* Appends the attempt's argv after the command. */
    void (*build_argv)(agent_argv_t *argv, const agent_call_t *call);
    agent_stream_event_fn *read_event; /* NULL: Claude Code's stream-json */
    /* Reads the failed attempt's stderr tail and result text. */
    agent_failure_kind_t (*classify)(const char *stderr_tail, const char *result_text);
    /* Whether the CLI keeps `session_id` for an agent in `cwd` (before adopting an id the
     * CLI reported); NULL: the reported id is taken as is. */
    bool (*session_exists)(const char *cwd, const char *session_id);
    const char *const *env_remove; /* variables the agent must not inherit */
    const char *const *env_set;    /* "NAME=value" the agent always gets; or NULL */
    /* Called before each attempt to put files the CLI reads in place (NULL: none). An
     * error is logged by the adapter and the run goes on without what it prepares. */
    void (*prepare)(const agent_settings_t *settings);
} agent_cli_t;

extern const agent_cli_t agent_cli_claude;
extern const agent_cli_t agent_cli_codex;
extern const agent_cli_t agent_cli_gemini;

/* The adapter called `name` ("claude", "codex", "gemini"); NULL → Claude's. NULL when
 * there is no such adapter. */
const agent_cli_t *agent_cli_find(const char *name);

/* True if `text` contains `needle` (NULL text: false). */
bool agent_cli_mentions(const char *text, const char *needle);

#endif
