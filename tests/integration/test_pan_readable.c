/* pan's output for people (issue 31, section 2), against a real broker: task ids whole in
 * `pan task list` and taken back as a unique prefix (an ambiguous one refused with the
 * candidates, exit 2); `pan task show` and `pan task wait` lead with the verdict and what
 * to do next, then the result as indented fields with costs rounded; `pan status` says
 * each thing once; a review or test submit without --workspace takes the repository pan
 * runs in or is refused, and a submit no connected worker can take says so; misspelt
 * commands, options and specialist names get a "did you mean"; `pan events` follows from now
 * unless given --since, one line an event under the terminal's width; `pan approve` and
 * `pan events --task` take a unique prefix of a task id too; colour on a terminal (through
 * a pseudo-terminal, `script`), none with NO_COLOR or into a pipe. The results come from a
 * worker played by the test (fakeworker). */
#include "pan_harness.h"

#include "fakeworker.h"
#include "msgjson.h"

static char s_out[PAN_OUT_SIZE];

/* Runs `sh -c script` with pan's path as $0; its stdout into s_out. */
static int s_shell(testenv_t *env, const char *script)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, (char *)testenv_bin("pan"), NULL};
    return testenv_run(env, argv, s_out, sizeof s_out, 20000);
}

/* The first line of s_out, in place. */
static const char *s_first_line(void)
{
    char *end = strchr(s_out, '\n');
    if (end != NULL)
        *end = '\0';
    return s_out;
}

static void test_ids(testenv_t *env)
{
    const char *long_id = "readable-a-task-id-longer-than-a-uuid-0001";
    CHECK_INT(harness_pan(env, s_out, "submit", "docs-agent", "--id", long_id, NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "task", "list", NULL), 0);
    CHECK(strstr(s_out, long_id) != NULL); /* whole, not cut at 36 characters */

    const char *ids[] = {"pfx-alpha-1", "pfx-alpha-2", "pfx-beta-1", "pfx-gamma", "pfx-gamma-2"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        CHECK_INT(harness_pan(env, s_out, "submit", "docs-agent", "--id", ids[i], NULL), 0);
    /* A unique prefix is the task. */
    CHECK_INT(harness_pan(env, s_out, "task", "show", "pfx-b", "--json", NULL), 0);
    json_t *task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "id")), "pfx-beta-1");
    json_decref(task);
    CHECK_INT(harness_pan(env, s_out, "task", "show", "readable-a", NULL), 0);
    CHECK(strstr(s_out, long_id) != NULL);
    /* A whole id is itself, even when it starts another id. */
    CHECK_INT(harness_pan(env, s_out, "task", "show", "pfx-gamma", "--json", NULL), 0);
    task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "id")), "pfx-gamma");
    json_decref(task);
    /* An ambiguous prefix is a usage error naming the candidates. */
    CHECK_INT(harness_pan_all(env, s_out, "task", "show", "pfx-alpha", NULL), 2);
    CHECK(strstr(s_out, "'pfx-alpha' is the start of 2 task ids:\n") != NULL);
    CHECK(strstr(s_out, "  pfx-alpha-1\n") != NULL && strstr(s_out, "  pfx-alpha-2\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "cancel", "pfx-", NULL), 2);
    /* No match: the broker's answer, exit 1. */
    CHECK_INT(harness_pan_all(env, s_out, "task", "show", "zzz-none", NULL), 1);
    CHECK(strstr(s_out, "no task 'zzz-none'") != NULL);
    /* cancel, retry and wait take a prefix too. */
    CHECK_INT(harness_pan(env, s_out, "cancel", "pfx-alpha-2", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "cancel", "pfx-b", NULL), 0);
    CHECK_STR(s_out, "Cancelled pfx-beta-1 (state: cancelled)\n");
    CHECK_INT(harness_pan(env, s_out, "task", "wait", "pfx-b", "--timeout", "5", NULL), 1);
    CHECK(strncmp(s_out, "pfx-beta-1: cancelled", 21) == 0);
    CHECK_INT(harness_pan(env, s_out, "retry", "pfx-b", NULL), 0);
    CHECK_STR(s_out, "Requeued pfx-beta-1 (state: queued)\n");
}

/* Submits `id` to `specialist` with pan (issue PAN-42, the environment's directory as
 * workspace), lets the worker take it and report `result` (JSON text); returns the output
 * of `pan task wait` (exit code checked against `expected_exit`). */
static void s_run(testenv_t *env, fakeworker_t *worker, const char *specialist, const char *id,
                  const char *result, int expected_exit)
{
    CHECK_INT(harness_pan_all(env, s_out, "submit", specialist, "--id", id, "--issue", "PAN-42",
                              "--workspace", env->dir, NULL),
              0);
    CHECK(strstr(s_out, "worker is connected") == NULL); /* one is */
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 5000, NULL, 0);
    CHECK(task != NULL);
    int attempt = (int)wire_msg_int(task, FIELD_ATTEMPT, 1);
    CHECK_STR(wire_msg_str(task, FIELD_ID, ""), id);
    wire_msg_destroy(&task);
    json_t *object = json_loads(result, 0, NULL);
    CHECK(object != NULL);
    wire_writer_t *writer = wire_writer_new();
    CHECK_INT(msgjson_to_map(writer, object), 0);
    size_t len = 0;
    const void *raw = wire_writer_data(writer, &len);
    fakeworker_result_map(worker, id, attempt, "done", NULL, raw, len);
    wire_writer_destroy(&writer);
    json_decref(object);
    CHECK_INT(harness_pan(env, s_out, "task", "wait", id, "--timeout", "10", NULL), expected_exit);
}

static void test_verdicts(testenv_t *env)
{
    char expected[1024];
    fakeworker_t *review = fakeworker_new(env->dir, env->in_ep, "review-agent", "w-review");
    CHECK(review != NULL);
    fakeworker_hello(review, NULL, 0);
    s_run(env, review, "review-agent", "v-blocked",
          "{\"REVIEW_RESULT\": \"CHANGES_REQUESTED\", \"GATE\": \"blocked\","
          " \"FINDINGS\": [{\"severity\": \"error\", \"file\": \"src/a.c\", \"line\": 12,"
          " \"message\": \"SQL injection\", \"blocking\": true},"
          " {\"severity\": \"info\", \"file\": \"src/b.c\", \"message\": \"style\","
          " \"blocking\": false}],"
          " \"merge_gate\": {\"decision\": \"block\", \"must_fix\": [\"f1\"]},"
          " \"cost_usd\": 0.123456}",
          6);
    snprintf(expected, sizeof expected,
             "v-blocked: gate blocked by 1 error — fix src/a.c:12, then `pan submit review-agent "
             "--issue PAN-42 --workspace %s`",
             env->dir);
    if (strncmp(s_out, expected, strlen(expected)) != 0)
        fprintf(stderr, "pan task wait v-blocked:\n%s\n", s_out);
    CHECK(strncmp(s_out, expected, strlen(expected)) == 0);
    CHECK(strstr(s_out, "verdict: gate_blocked\n") != NULL);

    /* task show: the same line first; nested results as fields, the cost rounded. */
    CHECK_INT(harness_pan(env, s_out, "task", "show", "v-bl", NULL), 0);
    CHECK(strstr(s_out, "    merge_gate:\n        decision: block\n        must_fix (1):\n"
                        "            - f1\n") != NULL);
    CHECK(strstr(s_out, "    cost_usd: $0.12\n") != NULL);
    CHECK(strstr(s_out, "{\"") == NULL); /* no escaped JSON */
    CHECK_STR(s_first_line(), expected + strlen("v-blocked: "));

    s_run(env, review, "review-agent", "v-open",
          "{\"REVIEW_RESULT\": \"APPROVED\", \"GATE\": \"open\"}", 0);
    CHECK_STR(s_first_line(), "v-open: gate open — run `pan approve PAN-42`");
    fakeworker_bye(review);
    fakeworker_destroy(&review);

    fakeworker_t *tester = fakeworker_new(env->dir, env->in_ep, "test-agent", "w-test");
    CHECK(tester != NULL);
    fakeworker_hello(tester, NULL, 0);
    s_run(env, tester, "test-agent", "v-red",
          "{\"TEST_RESULT\": \"FAIL\", \"FAILURES\": [\"t_one\", \"t_two\"]}", 5);
    snprintf(expected, sizeof expected,
             "v-red: tests failed: 2 failing tests (t_one, t_two) — fix them, then `pan submit "
             "test-agent --issue PAN-42 --workspace %s`",
             env->dir);
    CHECK_STR(s_first_line(), expected);
    fakeworker_bye(tester);
    fakeworker_destroy(&tester);

    fakeworker_t *merger = fakeworker_new(env->dir, env->in_ep, "merge-agent", "w-merge");
    CHECK(merger != NULL);
    fakeworker_hello(merger, NULL, 0);
    s_run(env, merger, "merge-agent", "v-merged",
          "{\"MERGE_RESULT\": \"SUCCESS\", \"source\": \"feat\", \"target\": \"main\","
          " \"merge_commit\": \"0123456789abcdef0123456789abcdef01234567\", \"pushed\": true,"
          " \"cost_usd\": 0.25, \"input_tokens\": 1000, \"output_tokens\": 100}",
          0);
    CHECK_STR(s_first_line(), "v-merged: merged feat into main as 0123456789ab (pushed)");
    s_run(env, merger, "merge-agent", "v-local",
          "{\"MERGE_RESULT\": \"SUCCESS\", \"source\": \"feat\", \"target\": \"main\","
          " \"merge_commit\": \"0123456789abcdef0123456789abcdef01234567\", \"pushed\": false,"
          " \"landed\": \"local\", \"cost_usd\": 0.5, \"input_tokens\": 3000, \"output_tokens\": 300}",
          0);
    CHECK_STR(s_first_line(),
              "v-local: merged feat into main as 0123456789ab (landed locally: nothing pushed)");

    /* The agent cost and tokens: the sums over its tasks' results (0.123456 from
     * v-blocked, 0.25 and 0.5 from the merges). */
    CHECK_INT(harness_pan(env, s_out, "task", "list", "--issue", "PAN-42", NULL), 0);
    CHECK(strstr(s_out, "\nIssue PAN-42: agent cost $0.87, tokens 4000 in / 400 out, over the 5 "
                        "tasks listed\n") != NULL);
    fakeworker_bye(merger);
    fakeworker_destroy(&merger);
}

/* `pan keys --help` names every option (it left out --role). */
static void test_keys_help(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "keys", "--help", NULL), 0);
    CHECK(strstr(s_out, "--role ROLE") != NULL && strstr(s_out, "submitter") != NULL &&
          strstr(s_out, "worker") != NULL && strstr(s_out, "admin") != NULL);
}

/* Each line of `pan status` once: "Since the broker started" was printed twice. */
static void test_status_once(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "status", NULL), 0);
    const char *first = strstr(s_out, "Since the broker started");
    CHECK(first != NULL && strstr(first + 1, "Since the broker started") == NULL);
    CHECK(strstr(s_out, "Since the broker started: submitted ") != NULL);
}

/* A review or test without --workspace works on the repository pan runs in, or is refused
 * outside one; a submit nobody can take yet says so. */
static void test_submit_checks(testenv_t *env)
{
    char script[1200];
    snprintf(script, sizeof script, "cd '%s' && exec \"$0\" submit test-agent --id ws-none 2>&1",
             env->dir);
    CHECK_INT(s_shell(env, script), 2);
    CHECK(strstr(s_out, "a test-agent task needs a repository: give --workspace DIR") != NULL);

    snprintf(script, sizeof script,
             "cd '%s' && git init -q repo && mkdir repo/sub && cd repo/sub && "
             "exec \"$0\" submit review-agent --id ws-default --json 2>&1",
             env->dir);
    CHECK_INT(s_shell(env, script), 0);
    char repo[600];
    snprintf(repo, sizeof repo, "pan: --workspace %s/repo (the repository here)\n", env->dir);
    CHECK(strstr(s_out, repo) != NULL);
    CHECK(strstr(s_out, "pan: queued; no review-agent worker is connected") != NULL);
    CHECK_INT(harness_pan(env, s_out, "task", "show", "ws-default", "--json", NULL), 0);
    json_t *task = harness_json(s_out);
    snprintf(repo, sizeof repo, "%s/repo", env->dir);
    CHECK_STR(json_string_value(json_object_get(json_object_get(task, "payload"), "workspace")),
              repo);
    json_decref(task);
}

/* Misspelt commands, subcommands and options get a suggestion; usage errors exit 2. */
static void test_did_you_mean(testenv_t *env)
{
    CHECK_INT(harness_pan_all(env, s_out, "stauts", NULL), 2);
    CHECK(strncmp(s_out, "pan: unknown command 'stauts'; did you mean 'status'?\n", 53) == 0);
    CHECK_INT(harness_pan_all(env, s_out, "task", "lsit", NULL), 2);
    CHECK(strstr(s_out, "pan: unknown task command 'lsit'; did you mean 'list'?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "wkae", "x", NULL), 2);
    CHECK(strstr(s_out, "did you mean 'wake'?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "task", "list", "--stat", "queued", NULL), 2);
    CHECK(strstr(s_out, "pan: unknown option '--stat'; did you mean --state?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "test-agent", "--prioirty=high", NULL), 2);
    CHECK(strstr(s_out, "unknown option '--prioirty=high'; did you mean --priority?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "events", "--folow", NULL), 2);
    CHECK(strstr(s_out, "did you mean --follow?\n") != NULL);
    /* Nothing near: no guess. */
    CHECK_INT(harness_pan_all(env, s_out, "task", "list", "--zebra", NULL), 2);
    CHECK(strstr(s_out, "pan: unknown option '--zebra'\n") != NULL);

    /* Specialist names: pan's own check, and the broker's refusals. A name becomes known
     * when a worker of it joins, so an unknown one is the broker's "no" (exit 1). */
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "queue", "test-agnet", NULL), 1);
    CHECK(strstr(s_out, "Error: Unknown specialist 'test-agnet'\nDid you mean 'test-agent'?\n") !=
          NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "docs-agnet", "--id", "dym-1", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'docs-agnet'") != NULL &&
          strstr(s_out, "pan: did you mean 'docs-agent'?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "task", "list", "--specialist", "reveiw-agent", NULL),
              1);
    CHECK(strstr(s_out, "pan: did you mean 'review-agent'?\n") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "zzzzzz", "--id", "dym-2", NULL), 1);
    CHECK(strstr(s_out, "did you mean") == NULL);
}

/* pan approve --task and pan events --task take a unique prefix of a task id; pan approve
 * without --task takes an issue, and never a task id or the start of one. */
static void test_prefixes(testenv_t *env)
{
    /* The review v-blocked, by the start of its id: found (it has no branch to merge). */
    CHECK_INT(harness_pan_all(env, s_out, "approve", "--task", "v-bl", NULL), 1);
    CHECK(strstr(s_out, "pan: review v-blocked has no workspace and branch") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "approve", "--task", "v-", NULL), 2);
    CHECK(strstr(s_out, "'v-' is the start of ") != NULL &&
          strstr(s_out, "ambiguous task id 'v-'") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "approve", "v-bl", NULL), 1);
    CHECK(strstr(s_out, "no finished review found for issue 'v-bl'") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "approve", "zz-none", NULL), 1);
    CHECK(strstr(s_out, "no finished review found for issue 'zz-none'") != NULL);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--task", "v-bl", "--topic",
                          "task.done/", NULL),
              0);
    CHECK(strstr(s_out, " v-blocked verdict=gate_blocked") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "events", "--since", "0", "--task", "v-", NULL), 2);
}

/* Colour on a terminal only: `script` gives pan a pseudo-terminal for stdout and stderr. */
static void test_colour(testenv_t *env)
{
    static const char red[] = "\033[31m", green[] = "\033[32m";
    CHECK_INT(s_shell(env, "exec script -qec \"'$0' task show v-blocked\" /dev/null"), 0);
    CHECK(strstr(s_out, red) != NULL && strstr(s_out, "gate blocked by 1 error") != NULL);
    CHECK_INT(s_shell(env, "exec script -qec \"'$0' task list --state done\" /dev/null"), 0);
    CHECK(strstr(s_out, green) != NULL);
    CHECK_INT(s_shell(env, "exec script -qec \"'$0' task show zz-none\" /dev/null"), 1);
    CHECK(strstr(s_out, "\033[31mpan:\033[0m no task 'zz-none'") != NULL); /* stderr too */
    /* NO_COLOR (any value but empty) turns it off; an empty one does not. */
    CHECK_INT(s_shell(env, "NO_COLOR=1 exec script -qec \"'$0' task show v-blocked\" /dev/null"),
              0);
    CHECK(strstr(s_out, "\033[") == NULL && strstr(s_out, "gate blocked by 1 error") != NULL);
    CHECK_INT(s_shell(env, "NO_COLOR= exec script -qec \"'$0' task show v-blocked\" /dev/null"),
              0);
    CHECK(strstr(s_out, red) != NULL);
    /* Not a terminal: never colour, whatever else says. */
    CHECK_INT(s_shell(env, "exec \"$0\" task show v-blocked 2>&1 | cat"), 0);
    CHECK(strstr(s_out, "\033[") == NULL && strstr(s_out, "gate blocked by 1 error") != NULL);
}

/* The characters (UTF-8 code points) of the longest line of s_out. */
static size_t s_widest_line(void)
{
    size_t widest = 0, chars = 0;
    for (const unsigned char *c = (const unsigned char *)s_out; *c; c++) {
        if (*c == '\n') {
            widest = chars > widest ? chars : widest;
            chars = 0;
        } else if ((*c & 0xC0) != 0x80) {
            chars++;
        }
    }
    return chars > widest ? chars : widest;
}

/* `pan events` without --since follows from now; a line an event, under the terminal's
 * width, the verdict instead of the result (which -v adds). */
static void test_events(testenv_t *env)
{
    char script[1200];
    snprintf(script, sizeof script,
             "\"$0\" events --topic task.queued/docs-agent --limit 1 > '%s/now.txt' & "
             "sleep 1; \"$0\" submit docs-agent --id ev-now >/dev/null; wait",
             env->dir);
    CHECK_INT(s_shell(env, script), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/now.txt", env->dir);
    char *now = testenv_read_file(path);
    CHECK(now != NULL && strstr(now, " ev-now") != NULL && strstr(now, "pfx-") == NULL);
    free(now);

    CHECK_INT(s_shell(env, "COLUMNS=60 exec \"$0\" events --since 0 --topic task.queued/"), 0);
    CHECK(s_widest_line() <= 60);
    CHECK(strstr(s_out, "…\n") != NULL);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--task", "v-blocked", "--topic",
                          "task.done/", NULL),
              0);
    CHECK(strstr(s_out, " verdict=gate_blocked") != NULL && strstr(s_out, "result=") == NULL);
    CHECK_INT(harness_pan(env, s_out, "events", "--since", "0", "--task", "v-blocked", "--topic",
                          "task.done/", "-v", NULL),
              0);
    CHECK(strstr(s_out, " result={") != NULL);
}

int main(void)
{
    testenv_t *env = testenv_new("pan-readable");
    if (env == NULL)
        return 1;
    char config[400];
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(config, "[specialists.docs-agent]\nenabled = true\n"
                                     "[security]\nrequire_review = false\n") == 0);
    if (harness_start_broker(env) > 0) {
        test_ids(env);
        test_verdicts(env);
        test_status_once(env);
        test_keys_help(env);
        test_submit_checks(env);
        test_did_you_mean(env);
        test_events(env);
        test_prefixes(env);
        test_colour(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_readable");
}
