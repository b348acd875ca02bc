/* pan_harness: what the pan integration tests share -- a broker started in a testenv on
 * ipc endpoints, and running `pan` with its output captured. Header-only so each test
 * stays one program. */
#ifndef PAN_HARNESS_H
#define PAN_HARNESS_H

#include "check.h"
#include "client.h"
#include "testbroker.h"
#include "testenv.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAN_OUT_SIZE (256 * 1024)

/* Starts cloister-broker on the environment's endpoints and waits until it answers.
 * Returns its pid, or -1. */
static inline pid_t harness_start_broker(testenv_t *env)
{
    return testbroker_start(env, 0, NULL);
}

/* Runs `pan` with the NULL-terminated arguments; stdout only (stderr: the test's) or, with
 * `merge_stderr`, both into `out` (PAN_OUT_SIZE bytes). Returns the exit code. */
static inline int harness_pan_v(testenv_t *env, char *out, bool merge_stderr, va_list args)
{
    char *argv[64];
    int argc = 0;
    if (merge_stderr) {
        argv[argc++] = "/bin/sh";
        argv[argc++] = "-c";
        argv[argc++] = "exec \"$0\" \"$@\" 2>&1";
    }
    argv[argc++] = (char *)testenv_bin("pan");
    const char *arg;
    while ((arg = va_arg(args, const char *)) != NULL && argc < 63)
        argv[argc++] = (char *)arg;
    argv[argc] = NULL;
    return testenv_run(env, argv, out, PAN_OUT_SIZE, 20000);
}

static inline int harness_pan(testenv_t *env, char *out, ...)
{
    va_list args;
    va_start(args, out);
    int code = harness_pan_v(env, out, false, args);
    va_end(args);
    return code;
}

static inline int harness_pan_all(testenv_t *env, char *out, ...)
{
    va_list args;
    va_start(args, out);
    int code = harness_pan_v(env, out, true, args);
    va_end(args);
    return code;
}

/* Parses pan's JSON output; NULL (and a CHECK failure) when it is not JSON. */
static inline json_t *harness_json(const char *text)
{
    json_error_t error;
    json_t *value = json_loads(text, JSON_DECODE_ANY, &error);
    if (value == NULL)
        fprintf(stderr, "not JSON (%s): %s\n", error.text, text);
    CHECK(value != NULL);
    return value;
}

/* Drops the trailing newline of a one-line output. */
static inline void harness_chomp(char *text)
{
    size_t len = strlen(text);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
}

#endif
