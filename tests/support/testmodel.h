/* testmodel: the scripted model (tests/model/model.mjs) and the real agent CLIs for
 * integration tests.
 *
 * testmodel_start() runs the model server on a loopback port the kernel picks, in the
 * test's directory, as a process of the test environment (killed by testenv_destroy()),
 * and points the CLIs at it through this process's environment, which the services under
 * test and their agents inherit: Claude Code through ANTHROPIC_BASE_URL with a dummy key, its
 * own CLAUDE_CONFIG_DIR, few API retries (CLAUDE_CODE_MAX_RETRIES) and no traffic but the
 * model's; Codex with its own CODEX_HOME, a dummy CODEX_API_KEY and a TMPDIR in the test's
 * directory (its provider is configuration: testmodel_codex_args()); Gemini with
 * GOOGLE_GEMINI_BASE_URL, a dummy GEMINI_API_KEY and a GEMINI_CLI_HOME whose settings
 * choose that key. The scenario (tests/model/README.md) is a file the model reads for each request,
 * so a test may switch it between runs; every request served is a JSON line of the log.
 *
 * The CLIs are the pinned ones (tests/model/package.json) that the CTest fixture
 * integration.real_clis_install put into CLOISTER_REAL_CLIS_DIR. A missing one fails the
 * test (CHECK), saying how to install it. */
#ifndef CLOISTER_TESTMODEL_H
#define CLOISTER_TESTMODEL_H

#include "testenv.h"

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char url[64];       /* http://127.0.0.1:<port> */
    char scenario[512]; /* the scenario file */
    char log[512];      /* the request log (JSON lines) */
} testmodel_t;

/* Starts the model in env's directory and sets the CLIs' environment (above). The test
 * fails (CHECK) when it cannot start. */
void testmodel_start(testmodel_t *model, testenv_t *env);

/* Makes `name` (a file of tests/model/scenarios/) the scenario; fails the test when it
 * cannot be copied. */
void testmodel_use(testmodel_t *model, const char *name);

/* Writes `json` as the scenario. */
void testmodel_write(testmodel_t *model, const char *json);

/* The arguments that point Codex at the model (a model provider "scripted" speaking the
 * Responses API, two retries; /tmp kept out of its sandbox's writable roots), for
 * agent_settings_t.extra_args: NULL-terminated, static storage. */
const char *const *testmodel_codex_argv(const testmodel_t *model);

/* The same as the `[agent] args` value of cloister.toml (a TOML array) into buf. */
void testmodel_codex_args(const testmodel_t *model, char *buf, size_t size);

/* The requests served so far, a JSON array of the log's objects (the caller owns it). */
json_t *testmodel_requests(const testmodel_t *model);

/* The requests served so far whose rule is `rule` (NULL: every one); caller owns. */
json_t *testmodel_requests_of(const testmodel_t *model, const char *rule);

/* The path of a pinned CLI's executable ("claude", "codex", "gemini"); fails the test
 * when it is not installed. Static buffer per call slot (3). */
const char *testmodel_cli(const char *name);

#endif
