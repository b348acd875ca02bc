/* agent_stream: reads the agent CLI's `--output-format stream-json` output, one line at a
 * time (docs/agent-cli.md has the contract): assistant text and tool calls become progress,
 * the `result` event is kept, the input side of the latest top-level API call is the
 * conversation's size, and the `system`/`init` event gives the CLI's version.
 *
 * The output is untrusted: a line that is not a JSON object is skipped (and logged), NUL
 * bytes inside strings become U+FFFD, counts outside 0..10^12 read as 0. No process, no
 * file: fuzzed by tests/fuzz/fuzz_agent_stream.c. */
#ifndef CLOISTER_AGENT_STREAM_H
#define CLOISTER_AGENT_STREAM_H

#include "agent.h"
#include "session.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    agent_progress_fn *progress; /* optional: called for text blocks and tool calls */
    void *progress_arg;
    const char *name; /* named in log lines (borrowed), e.g. the specialist */
    json_t *result;   /* the last `result` event (owned), or NULL */
    int64_t context_tokens; /* input side of the latest top-level API call; 0 = none seen */
    char cli_version[SESSION_VERSION_SIZE]; /* from system/init; "" until seen */
} agent_stream_t;

typedef enum {
    AGENT_STREAM_SKIPPED, /* empty, or not a JSON object */
    AGENT_STREAM_EVENT,   /* an event (read, or of a type we do not use) */
    AGENT_STREAM_RESULT   /* the `result` event: stream->result is it now */
} agent_stream_line_t;

/* Reads one line (without its newline; need not be NUL-terminated). */
agent_stream_line_t agent_stream_read(agent_stream_t *stream, const char *line, size_t len);

/* A new attempt: drops the result and the context size (the CLI version stays). Also what
 * frees the stream's memory. */
void agent_stream_reset(agent_stream_t *stream);

/* A count the CLI reports (tokens, turns, milliseconds), believed in 0..10^12: anything
 * else (not a number, negative, huge) is 0, so sums of counts cannot overflow. */
int64_t agent_stream_count(const json_t *value);

/* input + cache creation + cache read tokens of a `usage` object: what the call read as
 * input, i.e. the size of the conversation it was given. */
int64_t agent_stream_input_tokens(const json_t *usage);

#endif
