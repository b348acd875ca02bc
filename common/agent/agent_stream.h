/* agent_stream: reads the agent CLI's JSON-lines output, one line at a time. The line is
 * parsed here; what its events mean is the CLI adapter's business (agent_cli.h), through
 * `on_event` — NULL means Claude Code's stream-json (docs/agent-cli.md): assistant text and
 * tool calls become progress, the `result` event is kept, the input side of the latest
 * top-level API call is the conversation's size, and the `system`/`init` event gives the
 * CLI's version. Whatever the CLI, `result` ends up in the shape of Claude's result event
 * (is_error, subtype, result or errors[], session_id, total_cost_usd, usage{input_tokens,
 * cache_creation_input_tokens, cache_read_input_tokens, output_tokens}, num_turns,
 * duration_ms): the other adapters build it from their CLI's own final event.
 *
 * Model API failures: each retry the CLI announces becomes an AGENT_PROGRESS_API progress
 * and is remembered (api_error, api_status, api_retries, api_retry_delay_ms), as is the
 * failure in its final error; a failure that no retry can mend (a refused key) sets
 * api_stop, so that the runner stops the CLI instead of waiting out its retries.
 *
 * The output is untrusted: a line that is not a JSON object is skipped (and logged), NUL
 * bytes inside strings become U+FFFD, counts outside 0..10^12 read as 0. No process, no
 * file: fuzzed by tests/fuzz/fuzz_agent_stream.c. */
#ifndef CLOISTER_AGENT_STREAM_H
#define CLOISTER_AGENT_STREAM_H

#include "agent.h"
#include "session.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct agent_stream agent_stream_t;
typedef enum agent_stream_line agent_stream_line_t;

/* An adapter's reading of one event (a JSON object, borrowed for the call). */
typedef agent_stream_line_t(agent_stream_event_fn)(agent_stream_t *stream, json_t *event);

struct agent_stream {
    agent_stream_event_fn *on_event; /* the CLI's events; NULL → Claude Code's */
    agent_progress_fn *progress; /* optional: called for text blocks and tool calls */
    void *progress_arg;
    const char *name; /* named in log lines (borrowed), e.g. the specialist */
    json_t *result;   /* the last `result` event (owned), or NULL */
    int64_t context_tokens; /* input side of the latest top-level API call; 0 = none seen */
    char cli_version[SESSION_VERSION_SIZE]; /* from system/init; "" until seen */
    char session_id[SESSION_ID_SIZE]; /* the session the CLI says it runs; "" until said */
    bool not_logged_in;  /* the CLI said it has no credentials */
    agent_api_error_t api_error; /* the latest model API failure the CLI reported */
    int api_status;              /* its HTTP status; 0 when none was said */
    int api_retries;             /* retries of API calls the CLI announced */
    int64_t api_retry_delay_ms;  /* the delay of the latest */
    char api_detail[256];        /* the CLI's own words for it when they are not in its
                                    result (an adapter sets them); "" when none */
    bool api_stop;               /* the CLI retries what cannot succeed: stop it */
    bool awaiting_model;         /* the last event left the next move to the model (the
                                    prompt sent, tool results, a retry) */
    char *text;          /* the assistant's text so far, for CLIs whose final event has none
                            (owned; NULL when none) */
};

enum agent_stream_line {
    AGENT_STREAM_SKIPPED, /* empty, or not a JSON object */
    AGENT_STREAM_EVENT,   /* an event (read, or of a type we do not use) */
    AGENT_STREAM_RESULT   /* the final event: stream->result is set now */
};

/* Reads one line (without its newline; need not be NUL-terminated). */
agent_stream_line_t agent_stream_read(agent_stream_t *stream, const char *line, size_t len);

/* A new attempt: drops the result, the text, the context size, the announced session and
 * the API failures (the CLI version stays). Also what frees the stream's memory. */
void agent_stream_reset(agent_stream_t *stream);

/* For adapters. Calls the progress callback, if any. */
void agent_stream_progress(agent_stream_t *stream, agent_progress_kind_t kind, const char *text,
                           const char *detail);
/* A one-line summary of a tool's input (its most telling string field, else the JSON). */
void agent_stream_tool_summary(char *out, size_t size, json_t *input);
/* Keeps `result` (a new reference is taken) as the run's result. */
void agent_stream_set_result(agent_stream_t *stream, json_t *result);
/* Appends an assistant text to stream->text (a blank line between texts when `paragraph`). */
void agent_stream_add_text(agent_stream_t *stream, const char *text, bool paragraph);

/* A count the CLI reports (tokens, turns, milliseconds), believed in 0..10^12: anything
 * else (not a number, negative, huge) is 0, so sums of counts cannot overflow. */
int64_t agent_stream_count(const json_t *value);

/* input + cache creation + cache read tokens of a `usage` object: what the call read as
 * input, i.e. the size of the conversation it was given. */
int64_t agent_stream_input_tokens(const json_t *usage);

/* For adapters: the CLI reports a failed model API call with HTTP `status` (0: none, e.g.
 * the connection failed) and the CLI's own name for it (`error`, may be NULL). With
 * `retry` > 0 it says it tries again (retry `retry` of `max_retries`, in `delay_ms`): a
 * progress says so. Records the failure; a refused key sets api_stop. */
void agent_stream_api_failure(agent_stream_t *stream, int status, const char *error, int retry,
                              int max_retries, int64_t delay_ms);

/* What the failure is called in messages: "refused the key", "overloaded", ... */
const char *agent_stream_api_error_name(agent_api_error_t error, int status);

#endif
