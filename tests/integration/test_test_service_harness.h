/* test_test_service_harness: what the test_test_service_* integration tests share, on top
 * of worker_harness.h (a real broker in a testenv directory, submits over PUSH, events
 * recorded from PUB). Adds: writing cloister.toml for the service, making project
 * directories, starting a real cloister-test, and waiting for a task's end event.
 * Everything is static (included by each test). */
#ifndef CLOISTER_TEST_TEST_SERVICE_HARNESS_H
#define CLOISTER_TEST_TEST_SERVICE_HARNESS_H

#include "worker_harness.h"

#include <stdarg.h>

/* Replaces $PANOPTICON_HOME/cloister.toml with the harness's broker settings plus
 * `extra` (read by services started afterwards; the broker already has its settings). */
static inline void tsh_config(harness_t *h, const char *extra)
{
    char path[512], text[8192];
    snprintf(path, sizeof path, "%s/cloister.toml", h->env->home);
    snprintf(text, sizeof text, "[broker]\nretry_backoff_ms = 50\n\n%s", extra ? extra : "");
    CHECK(testenv_write_file(path, text) == 0);
}

/* Creates the file `name` (with parents) in project directory `project` of the test
 * directory, containing `text`; returns the project's absolute path (static slot). */
static inline const char *tsh_file(harness_t *h, const char *project, const char *name,
                                   const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s/%s", h->env->dir, project, name);
    CHECK(testenv_write_file(path, text) == 0);
    return harness_path(h, project);
}

/* Makes project `project`: a Makefile whose `test` target runs tests.sh, which prints
 * `output` and exits with `exit_code`. Returns the project's path (static slot). */
static inline const char *tsh_make_project(harness_t *h, const char *project, const char *output,
                                           int exit_code)
{
    char script[8192];
    snprintf(script, sizeof script, "cat <<'EOF'\n%sEOF\nexit %d\n", output, exit_code);
    tsh_file(h, project, "tests.sh", script);
    return tsh_file(h, project, "Makefile", "test:\n\t@sh tests.sh\n");
}

/* Starts cloister-test as worker `id` and waits until the broker announced it. */
static inline pid_t tsh_service(harness_t *h, const char *id)
{
    return harness_service(h, "cloister-test", id, 3000, NULL);
}

/* Submits a test-agent task whose payload is `payload_json` (printf-style). */
static inline void tsh_submit(harness_t *h, const char *id, int timeout_s, const char *payload_fmt,
                              ...) __attribute__((format(printf, 4, 5)));

static inline void tsh_submit(harness_t *h, const char *id, int timeout_s, const char *payload_fmt,
                              ...)
{
    char payload[4096];
    va_list ap;
    va_start(ap, payload_fmt);
    vsnprintf(payload, sizeof payload, payload_fmt, ap);
    va_end(ap);
    harness_submit(h, id, "test-agent", "normal", timeout_s, 1, payload);
}

/* check_on_fail()'s hook: a failing check prints the task's end event. */
static inline void tsh_dump_hook(void *event)
{
    char *text = json_dumps(event, JSON_COMPACT);
    fprintf(stderr, "the task ended with: %s\n", text ? text : "(none)");
    free(text);
}

/* Waits up to timeout_ms for the task's end (task.done, task.failed or task.dead); returns
 * the event (owned by the harness) or NULL. A check that fails later prints the event. */
static inline json_t *tsh_end(harness_t *h, const char *task, int timeout_ms)
{
    static const char *const ends[] = {"task.done", "task.failed", "task.dead"};
    for (int waited = 0;; waited += 20) {
        for (size_t i = 0; i < 3; i++) {
            int at = harness_find(h, 0, ends[i], task);
            if (at >= 0) {
                check_on_fail(tsh_dump_hook, h->events[at]);
                return h->events[at];
            }
        }
        if (waited >= timeout_ms)
            return NULL;
        harness_pump(h, 20);
    }
}

/* The event's name ("" for NULL). */
static inline const char *tsh_event(const json_t *event)
{
    return event ? harness_field(event, "event") : "";
}

/* A field of the event's result map (NULL when absent). */
static inline const json_t *tsh_result(const json_t *event, const char *key)
{
    return event ? json_object_get(json_object_get(event, "result"), key) : NULL;
}

static inline const char *tsh_result_str(const json_t *event, const char *key)
{
    const json_t *value = tsh_result(event, key);
    return json_is_string(value) ? json_string_value(value) : "";
}

static inline long tsh_result_int(const json_t *event, const char *key)
{
    const json_t *value = tsh_result(event, key);
    return json_is_integer(value) ? (long)json_integer_value(value) : -99;
}

/* The FAILURES item that contains `needle`, or -1. */
static inline int tsh_failure_index(const json_t *event, const char *key, const char *needle)
{
    const json_t *array = tsh_result(event, key);
    for (size_t i = 0; i < json_array_size(array); i++) {
        const char *item = json_string_value(json_array_get(array, i));
        if (item && strstr(item, needle))
            return (int)i;
    }
    return -1;
}

/* Prints the event as JSON on stderr (for failing checks). */
/* Pytest-like output printed by the projects' test commands. */
#define TSH_PYTEST_PASS                                                                            \
    "============================= test session starts ==============================\n"           \
    "collected 3 items\n\n"                                                                        \
    "tests/test_math.py ...                                                   [100%]\n\n"          \
    "============================== 3 passed in 0.01s ===============================\n"

#define TSH_PYTEST_FAIL                                                                            \
    "============================= test session starts ==============================\n"           \
    "collected 3 items\n\n"                                                                        \
    "tests/test_math.py .FF                                                   [100%]\n\n"          \
    "=========================== short test summary info ============================\n"           \
    "FAILED tests/test_math.py::test_add - assert 3 == 4\n"                                        \
    "FAILED tests/test_math.py::test_div - ZeroDivisionError: division by zero\n"                  \
    "========================= 2 failed, 1 passed in 0.02s ==========================\n"

#endif
