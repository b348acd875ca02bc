/* fuzz_agent_stream: feeds arbitrary bytes to the stream-json reader (agent_stream.h) as
 * an agent CLI's stdout, a line at a time, read as the CLI the first byte picks (its value
 * modulo 3: Claude Code — '{' is 0 —, Codex — '\n' —, Gemini — ' '; agent_cli.h). Besides "no crash, no leak, no undefined
 * behaviour" it checks the reader's promises: a kept result is a JSON object, the context
 * size is within 0..3*10^12 (three believable counts), the CLI version is a short C string
 * of whole UTF-8 characters, and progress texts are C strings. */
#include "agent_cli.h"
#include "agent_stream.h"
#include "msgjson.h"
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_progress(void *arg, const agent_progress_t *progress)
{
    size_t *seen = arg;
    *seen += strlen(progress->text) + strlen(progress->detail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const agent_cli_t *const clis[] = {&agent_cli_claude, &agent_cli_codex,
                                               &agent_cli_gemini};
    size_t seen = 0;
    agent_stream_t stream = {.progress = s_progress, .progress_arg = &seen, .name = "fuzz"};
    if (size > 0)
        stream.on_event = clis[data[0] % 3]->read_event;
    const char *text = (const char *)data;
    size_t at = 0;
    while (at < size) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (text + at)) : size - at;
        agent_stream_line_t kind = agent_stream_read(&stream, text + at, len);
        if (kind == AGENT_STREAM_RESULT && !json_is_object(stream.result))
            abort();
        at += len + 1;
    }
    if (stream.context_tokens < 0 || stream.context_tokens > (int64_t)3e12)
        abort();
    size_t version_len = strnlen(stream.cli_version, sizeof stream.cli_version);
    if (version_len >= sizeof stream.cli_version ||
        utf8_cut(stream.cli_version, version_len) != version_len)
        abort();
    if (stream.text != NULL && strlen(stream.text) > size * 2 + 4)
        abort(); /* the kept text is made of what was read */
    agent_stream_reset(&stream);
    if (stream.result != NULL || stream.context_tokens != 0 || stream.text != NULL ||
        stream.session_id[0] != '\0')
        abort();
    return 0;
}
