/* What pan prints and says, against a real broker: exit codes of `pan tests detect`;
 * which specialist names a submit may use (proto/PROTOCOL.md); text that is not UTF-8
 * never makes --json output vanish, and a wake title is cut between characters; a queue
 * listing the broker cut short says so; `pan events` keeps an event on one line whatever
 * its text holds. */
#include "pan_harness.h"

#include "fakeworker.h"

#include <sys/stat.h>

static char s_out[PAN_OUT_SIZE];

/* A directory without any test runner is a failed detection (1), not a usage error (2). */
static void test_tests_detect_exit_codes(testenv_t *env)
{
    char empty[400];
    snprintf(empty, sizeof empty, "%s/empty-project", env->dir);
    CHECK(mkdir(empty, 0755) == 0);
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, NULL), 1);
    CHECK(strncmp(s_out, "pan: ", 5) == 0);
    CHECK(strstr(s_out, "usage:") == NULL);
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, "--json", NULL), 1);
    /* A usage error stays one. */
    CHECK_INT(harness_pan_all(env, s_out, "tests", "detect", empty, "--frob", NULL), 2);
}

/* The names the broker accepts, as proto/PROTOCOL.md says: the built-in three, those
 * declared in cloister.toml and those a worker announced; any other is refused. */
typedef struct {
    testenv_t *env;
} submit_try_t;

static bool s_late_agent_accepted(void *arg)
{
    submit_try_t *try = arg;
    return harness_pan(try->env, s_out, "submit", "late-agent", "--id", "late-1", NULL) == 0;
}

static void test_specialist_names(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "submit", "test-agent", "--workspace", env->dir, "--id", "n-builtin", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "submit", "docs-agent", "--id", "n-declared", NULL), 0);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "nobody-agent", "--id", "n-unknown", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'nobody-agent'") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "late-agent", "--id", "late-1", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'late-agent'") != NULL);
    fakeworker_t *worker = fakeworker_new(env->dir, env->in_ep, "late-agent", "w-late");
    CHECK(worker != NULL);
    fakeworker_hello(worker, NULL, 0);
    submit_try_t try = {env};
    CHECK(testenv_wait_until(s_late_agent_accepted, &try, 5000));
    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
}

/* ---- text that is not UTF-8 ---- */

#define FFFD "\xEF\xBF\xBD"

/* A task whose title and payload hold bytes that are not UTF-8 (the broker stores them
 * as given): every --json view of it is still JSON, with U+FFFD for those bytes. */
static void test_invalid_utf8(testenv_t *env)
{
    client_t *control = client_new(env->control_ep, 3000);
    wire_writer_t *payload = wire_writer_new();
    wire_writer_start_map(payload);
    wire_put_key_str(payload, "note", "n\xFEte");
    wire_close(payload);
    size_t payload_len;
    const void *payload_data = wire_writer_data(payload, &payload_len);
    submit_t task = {.id = "utf-bad",
                          .specialist = "test-agent",
                          .title = "bad \xFF title",
                          .payload = payload_data,
                          .payload_len = payload_len};
    wire_msg_t *reply = NULL;
    CHECK_INT(client_submit(control, &task, NULL, 0, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&payload);
    client_destroy(&control);

    CHECK_INT(harness_pan(env, s_out, "task", "show", "utf-bad", "--json", NULL), 0);
    json_t *shown = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(shown, "title")), "bad " FFFD " title");
    CHECK_STR(json_string_value(json_object_get(json_object_get(shown, "payload"), "note")),
              "n" FFFD "te");
    json_decref(shown);

    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "test-agent", "--json", NULL), 0);
    json_t *queue = harness_json(s_out);
    json_t *items = json_object_get(queue, "items");
    bool listed = false;
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "id")), "utf-bad") == 0)
            listed = strcmp(json_string_value(json_object_get(item, "title")),
                            "bad " FFFD " title") == 0;
    }
    CHECK(listed);
    json_decref(queue);

    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--json", "--topic", "task.queued/test-agent",
                          NULL),
              0);
    bool seen = false;
    for (char *line = strtok(s_out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        json_t *event = harness_json(line);
        if (strcmp(json_string_value(json_object_get(event, "task")), "utf-bad") == 0)
            seen = strcmp(json_string_value(json_object_get(event, "title")),
                          "bad " FFFD " title") == 0;
        json_decref(event);
    }
    CHECK(seen);
}

/* `pan specialists wake --task` puts the first 200 bytes of the text in the title: a
 * character that would straddle the cut is left out whole, not halved. */
static void test_wake_title_cut(testenv_t *env)
{
    char text[256];
    memset(text, 'a', 199);
    snprintf(text + 199, sizeof text - 199, "\xC3\xA9 and more");
    CHECK_INT(harness_pan(env, s_out, "specialists", "wake", "merge-agent", "--task", text,
                          "--workspace", env->dir, "--branch", "feature", NULL),
              0);
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "merge-agent", "--json", NULL), 0);
    json_t *queue = harness_json(s_out);
    json_t *first = json_array_get(json_object_get(queue, "items"), 0);
    char expected[256];
    snprintf(expected, sizeof expected, "Wake merge-agent: %.199s", text);
    CHECK_STR(json_string_value(json_object_get(first, "title")), expected);
    CHECK_STR(json_string_value(json_object_get(json_object_get(first, "payload"), "task")), text);
    json_decref(queue);
}

/* ---- a queue listing cut at the broker's reply cap ---- */

#define BIG_PAYLOAD_BYTES (1500 * 1024)
#define BIG_TASKS 3

/* Runs `sh -c script` with pan's path as $0; stdout and stderr into s_out. */
static int s_shell(testenv_t *env, const char *script)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, (char *)testenv_bin("pan"), NULL};
    return testenv_run(env, argv, s_out, sizeof s_out, 20000);
}

static void test_queue_truncated(testenv_t *env)
{
    /* Three tasks of ~1.5 MB: the broker's list_queue reply holds two. */
    client_t *control = client_new(env->control_ep, 5000);
    char *blob = malloc(BIG_PAYLOAD_BYTES);
    memset(blob, 'b', BIG_PAYLOAD_BYTES);
    wire_writer_t *payload = wire_writer_new();
    wire_writer_start_map(payload);
    wire_put_key_strn(payload, "blob", blob, BIG_PAYLOAD_BYTES);
    size_t payload_len;
    const void *payload_data = wire_writer_data(payload, &payload_len);
    for (int i = 0; i < BIG_TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "heavy-%d", i);
        submit_t task = {.id = id,
                              .specialist = "review-agent",
                              .priority = i == 0 ? "urgent" : "low",
                              .payload = payload_data,
                              .payload_len = payload_len};
        wire_msg_t *reply = NULL;
        CHECK_INT(client_submit(control, &task, NULL, 0, &reply), 0);
        wire_msg_destroy(&reply);
    }
    wire_writer_destroy(&payload);
    free(blob);
    client_destroy(&control);

    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "review-agent", NULL), 0);
    CHECK(strstr(s_out, "Total items: 3 (showing 2 of 3") != NULL);
    CHECK(strstr(s_out, "Urgent items: 1") != NULL);

    char path[400], script[600];
    snprintf(path, sizeof path, "%s/queue.json", env->dir);
    snprintf(script, sizeof script, "\"$0\" specialists queue review-agent --json > '%s'", path);
    CHECK_INT(s_shell(env, script), 0);
    char *text = testenv_read_file(path);
    json_t *queue = text ? harness_json(text) : NULL;
    free(text);
    CHECK(json_is_true(json_object_get(queue, "truncated")));
    CHECK_INT(json_integer_value(json_object_get(queue, "total")), BIG_TASKS);
    CHECK_INT(json_array_size(json_object_get(queue, "items")), 2);
    CHECK_INT(json_integer_value(json_object_get(queue, "urgentCount")), 1);
    json_decref(queue);

    /* A listing that was not cut says nothing of the kind. */
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "merge-agent", "--json", NULL), 0);
    queue = harness_json(s_out);
    CHECK(json_object_get(queue, "truncated") == NULL);
    json_decref(queue);
}

/* ---- control characters in event text ---- */

static void test_events_escaped(testenv_t *env)
{
    const char *title = "line1\nline2\r \x1b[31mred\x1b[0m \xC2\x9B" "2J tab\there \"q\" back\\slash "
                        "bad\xFF caf\xC3\xA9";
    CHECK_INT(harness_pan(env, s_out, "submit", "docs-agent", "--id", "ctl-1", "--title", title,
                          NULL),
              0);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--topic", "task.queued/docs-agent", NULL), 0);
    /* Two events of docs-agent (n-declared and ctl-1): two lines, no raw control byte. */
    int lines = 0;
    for (const char *p = s_out; *p; p++)
        lines += *p == '\n';
    CHECK_INT(lines, 2);
    CHECK(strchr(s_out, '\x1b') == NULL && strchr(s_out, '\r') == NULL &&
          strchr(s_out, '\t') == NULL);
    CHECK(strstr(s_out, "\xC2\x9B") == NULL);
    /* The byte that is not UTF-8 was sent as U+FFFD (the wire carries text only). */
    CHECK(strstr(s_out, " \"line1\\nline2\\r \\x1b[31mred\\x1b[0m \\u009b2J tab\\there "
                        "\\\"q\\\" back\\\\slash bad\xEF\xBF\xBD caf\xC3\xA9\"") != NULL);

    /* `pan task show` prints the same title escaped, on its own line. */
    CHECK_INT(harness_pan(env, s_out, "task", "show", "ctl-1", NULL), 0);
    CHECK(strchr(s_out, '\x1b') == NULL && strchr(s_out, '\r') == NULL);
    CHECK(strstr(s_out, "  Title:       line1\\nline2\\r \\x1b[31mred") != NULL);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-output");
    if (env == NULL)
        return 1;
    test_tests_detect_exit_codes(env);
    char config[400];
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(config, "[specialists.docs-agent]\nenabled = true\n"
                                         "[security]\nrequire_review = false\n") == 0);
    if (harness_start_broker(env) > 0) {
        test_specialist_names(env);
        test_invalid_utf8(env);
        test_wake_title_cut(env);
        test_queue_truncated(env);
        test_events_escaped(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_output");
}
