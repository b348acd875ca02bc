/* An agent cannot override the gate (issue 38 §4). A real broker with CURVE (on ipc here),
 * the home's keys made as on first start, and the agent key a specialist gives its agent's
 * cloister-mcp (keys/agent_secret, role agent):
 *  - with that key, pan is refused by the broker a forced merge, a merge at all (approving
 *    one), cancelling a task of another key or its own, and acting as a worker; it may
 *    submit a review-like task and read;
 *  - cloister-mcp run with that key passes a forced submit_task to pan, and the broker
 *    refuses it; inside a task (--task) cloister-mcp refuses it itself;
 *  - apply_patch does not write through a committed symbolic link into a repository
 *    outside the work tree, does not make a symbolic link, and inside a task writes only in
 *    the task's own directories (--root). */
#include "check.h"
#include "curve.h"
#include "testbroker.h"
#include "testenv.h"
#include "testgit.h"

#include <czmq.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char s_said[1 << 16];

/* Runs pan with the agent key, stdout and stderr into s_said; returns its exit code. */
static int s_pan_agent(testenv_t *env, const char *first, ...)
{
    char *argv[24];
    int n = 0;
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = "exec \"$0\" \"$@\" 2>&1";
    argv[n++] = (char *)testenv_bin("pan");
    argv[n++] = "--timeout-ms";
    argv[n++] = "3000";
    argv[n++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && n < 23)
        argv[n++] = arg;
    va_end(args);
    argv[n] = NULL;
    char cert[700];
    snprintf(cert, sizeof cert, "%s/keys/agent_secret", env->home);
    setenv("CLOISTER_CURVE_CERT", cert, 1);
    int code = testenv_run(env, argv, s_said, sizeof s_said, 15000);
    unsetenv("CLOISTER_CURVE_CERT");
    return code;
}

/* Checks that the last output holds `text`. */
static void s_check_said(const char *text)
{
    if (strstr(s_said, text) == NULL)
        fprintf(stderr, "said: %s\n(expected: %s)\n", s_said, text);
    CHECK(strstr(s_said, text) != NULL);
}

/* Calls `tool` with `arguments` (JSON text) on a cloister-mcp started with `flags` (shell
 * words) and the agent key; returns the CallToolResult (caller frees) or NULL. */
static json_t *s_mcp_call(testenv_t *env, const char *flags, const char *tool,
                          const char *arguments)
{
    char input[600];
    snprintf(input, sizeof input, "%s/mcp-input.jsonl", env->dir);
    FILE *file = fopen(input, "w");
    CHECK(file != NULL);
    if (file == NULL)
        return NULL;
    fprintf(file,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
            "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":"
            "\"t\",\"version\":\"1\"}}}\n"
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
            "\"arguments\":%s}}\n",
            tool, arguments);
    fclose(file);
    char script[2048], cert[700];
    snprintf(script, sizeof script,
             "exec \"$0\" --control %s --events %s --in %s %s < \"$1\" 2>/dev/null",
             env->control_ep, env->events_ep, env->in_ep, flags);
    snprintf(cert, sizeof cert, "%s/keys/agent_secret", env->home);
    setenv("CLOISTER_CURVE_CERT", cert, 1);
    char *argv[] = {"/bin/sh", "-c", script, (char *)testenv_bin("cloister-mcp"), input, NULL};
    int code = testenv_run(env, argv, s_said, sizeof s_said, 30000);
    unsetenv("CLOISTER_CURVE_CERT");
    CHECK_INT(code, 0);
    const char *line = strchr(s_said, '\n'); /* the initialize response comes first */
    json_t *response = line ? json_loadb(line + 1, strcspn(line + 1, "\n"), 0, NULL) : NULL;
    json_t *result = json_incref(json_object_get(response, "result"));
    json_decref(response);
    CHECK(result != NULL);
    if (result == NULL)
        fprintf(stderr, "cloister-mcp said: %s\n", s_said);
    return result;
}

/* The text of a CallToolResult; "" when none. */
static const char *s_text(const json_t *result)
{
    const char *text =
        json_string_value(json_object_get(json_array_get(json_object_get(result, "content"), 0),
                                          "text"));
    return text ? text : "";
}

/* Checks that a tool call was refused with `reason` in its text. */
static void s_check_refused(json_t *result, const char *reason)
{
    bool ok = json_is_true(json_object_get(result, "isError")) &&
              strstr(s_text(result), reason) != NULL;
    if (!ok)
        fprintf(stderr, "tool said: %s\n(expected a refusal with: %s)\n", s_text(result), reason);
    CHECK(ok);
    json_decref(result);
}

/* The broker refuses what the agent key may not do, whoever asks. */
static void test_broker_refuses(testenv_t *env)
{
    char path[700];
    snprintf(path, sizeof path, "%s/keys/authorized/agent", env->home);
    char *authorized = testenv_read_file(path);
    CHECK(authorized != NULL && strstr(authorized, "role = \"agent\"") != NULL);
    free(authorized);

    CHECK(s_pan_agent(env, "submit", "merge-agent", "--issue", "PAN-1", "--force", "--id",
                      "agent-force", NULL) != 0);
    s_check_said("an agent key may not force a merge past the review gate (admin may)");
    CHECK(s_pan_agent(env, "submit", "merge_agent", "--issue", "PAN-1", "--id", "agent-merge",
                      "--payload", "{\"commit\": \"0123456789abcdef0123456789abcdef01234567\"}",
                      NULL) != 0);
    s_check_said("an agent key may not submit a merge (approve one) (submitter or admin may)");

    /* What it may do: submit other work, read. */
    CHECK_INT(s_pan_agent(env, "submit", "idle-agent", "--id", "agent-own", NULL), 0);
    CHECK_INT(s_pan_agent(env, "task", "show", "agent-own", NULL), 0);
    CHECK_INT(s_pan_agent(env, "status", NULL), 0);

    /* Cancelling: not another key's task, and not its own (every agent shares the key). */
    char *admin_submit[] = {(char *)testenv_bin("pan"), "submit", "idle-agent", "--id",
                            "by-admin", NULL};
    CHECK_INT(testenv_run(env, admin_submit, s_said, sizeof s_said, 10000), 0);
    CHECK(s_pan_agent(env, "cancel", "by-admin", NULL) != 0);
    s_check_said("an agent key may not cancel or retry tasks (submitter or admin may)");
    CHECK(s_pan_agent(env, "cancel", "agent-own", NULL) != 0);
    s_check_said("an agent key may not cancel or retry tasks");
    client_t *client = testbroker_client(env);
    char state[64];
    CHECK_STR(testbroker_state(client, "by-admin", state, sizeof state), "queued");
    CHECK_STR(testbroker_state(client, "agent-own", state, sizeof state), "queued");
    CHECK(testbroker_task_unknown(client, "agent-force"));
    CHECK(testbroker_task_unknown(client, "agent-merge"));
    client_destroy(&client);
}

/* cloister-mcp with the agent key: what it passes on, the broker refuses; inside a task it
 * refuses first. */
static void test_mcp_refuses(testenv_t *env)
{
    s_check_refused(s_mcp_call(env, "", "submit_task",
                               "{\"specialist\": \"merge-agent\", \"issue\": \"PAN-2\", "
                               "\"payload\": {\"force\": true}}"),
                    "an agent key may not force a merge past the review gate");
    s_check_refused(s_mcp_call(env, "", "request_merge", "{\"review\": \"PAN-2\", \"force\": true}"),
                    "PAN-2");
    char flags[900];
    snprintf(flags, sizeof flags, "--task T-1 --handoff-file %s/T-1.handoff", env->dir);
    s_check_refused(s_mcp_call(env, flags, "submit_task",
                               "{\"specialist\": \"merge-agent\", \"issue\": \"PAN-2\", "
                               "\"payload\": {\"force\": true}}"),
                    "an agent inside a task cannot force past the review gate");
    s_check_refused(s_mcp_call(env, flags, "request_merge", "{\"review\": \"PAN-2\"}"),
                    "an agent inside a task cannot approve a merge");
    s_check_refused(s_mcp_call(env, flags, "submit_task",
                               "{\"specialist\": \"Merge_Agent\", \"issue\": \"PAN-2\"}"),
                    "an agent inside a task cannot approve a merge");
    client_t *client = testbroker_client(env);
    char buf[256];
    CHECK_STR(testbroker_queue(client, "merge-agent", buf, sizeof buf), "");
    client_destroy(&client);
}

/* A patch as JSON text (for the tool's arguments), from the lines given. */
static char *s_diff_json(const char *diff)
{
    json_t *text = json_string(diff);
    char *out = json_dumps(text, JSON_ENCODE_ANY);
    json_decref(text);
    return out;
}

/* apply_patch writes only regular files inside the work tree it was given. */
static void test_patch_stays_inside(testenv_t *env)
{
    char ws[600], outside[600], args[8192], path[700];
    snprintf(ws, sizeof ws, "%s/ws", env->dir);
    snprintf(outside, sizeof outside, "%s/other-repo", env->dir);
    CHECK(mkdir(ws, 0700) == 0 && mkdir(outside, 0700) == 0);
    CHECK_INT(testgit_run(ws, "init", "-q", "-b", "main", NULL), 0);
    CHECK_INT(testgit_run(outside, "init", "-q", "-b", "main", NULL), 0);
    testgit_commit(outside, "secret.txt", "theirs\n", "other");
    testgit_commit(ws, "a.txt", "a\n", "a");
    /* The branch's content: a committed link to the other repository. */
    snprintf(path, sizeof path, "%s/link", ws);
    CHECK(symlink("../other-repo", path) == 0);
    CHECK_INT(testgit_run(ws, "add", "link", NULL), 0);
    CHECK_INT(testgit_run(ws, "commit", "-q", "-m", "link", NULL), 0);

    char *created = s_diff_json("diff --git a/link/evil.txt b/link/evil.txt\n"
                                "new file mode 100644\n--- /dev/null\n+++ b/link/evil.txt\n"
                                "@@ -0,0 +1 @@\n+pwned\n");
    snprintf(args, sizeof args, "{\"workspace\": \"%s\", \"diff\": %s}", ws, created);
    s_check_refused(s_mcp_call(env, "", "apply_patch", args), "is a symbolic link");
    char *changed = s_diff_json("diff --git a/link/secret.txt b/link/secret.txt\n"
                                "--- a/link/secret.txt\n+++ b/link/secret.txt\n"
                                "@@ -1 +1 @@\n-theirs\n+pwned\n");
    snprintf(args, sizeof args, "{\"workspace\": \"%s\", \"diff\": %s}", ws, changed);
    s_check_refused(s_mcp_call(env, "", "apply_patch", args), "is a symbolic link");
    /* A patch that makes a link, and then writes through it, is refused whole. */
    char *makes_link = s_diff_json("diff --git a/door b/door\nnew file mode 120000\n"
                                   "--- /dev/null\n+++ b/door\n@@ -0,0 +1 @@\n"
                                   "+../other-repo\n\\ No newline at end of file\n");
    snprintf(args, sizeof args, "{\"workspace\": \"%s\", \"diff\": %s}", ws, makes_link);
    s_check_refused(s_mcp_call(env, "", "apply_patch", args), "would not be a regular file");
    snprintf(path, sizeof path, "%s/evil.txt", outside);
    CHECK(access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/secret.txt", outside);
    char *secret = testenv_read_file(path);
    CHECK(secret != NULL && strcmp(secret, "theirs\n") == 0);
    free(secret);
    snprintf(path, sizeof path, "%s/door", ws);
    CHECK(access(path, F_OK) != 0);

    /* Inside a task: only the task's own directories (its --root), not another repository. */
    char flags[1500];
    snprintf(flags, sizeof flags, "--task T-2 --handoff-file %s/T-2.handoff --root %s", env->dir,
             ws);
    char *plain = s_diff_json("diff --git a/secret.txt b/secret.txt\n"
                              "--- a/secret.txt\n+++ b/secret.txt\n"
                              "@@ -1 +1 @@\n-theirs\n+pwned\n");
    snprintf(args, sizeof args, "{\"workspace\": \"%s\", \"diff\": %s}", outside, plain);
    s_check_refused(s_mcp_call(env, flags, "apply_patch", args), "is not this task's work tree");
    snprintf(path, sizeof path, "%s/secret.txt", outside);
    secret = testenv_read_file(path);
    CHECK(secret != NULL && strcmp(secret, "theirs\n") == 0);
    free(secret);
    /* ... while a regular file in its own tree is written. */
    char *own = s_diff_json("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n"
                            "@@ -1 +1 @@\n-a\n+b\n");
    snprintf(args, sizeof args, "{\"workspace\": \"%s\", \"diff\": %s}", ws, own);
    json_t *result = s_mcp_call(env, flags, "apply_patch", args);
    CHECK(result != NULL && !json_is_true(json_object_get(result, "isError")));
    if (result != NULL && json_is_true(json_object_get(result, "isError")))
        fprintf(stderr, "apply_patch in its own tree: %s\n", s_text(result));
    json_decref(result);
    snprintf(path, sizeof path, "%s/a.txt", ws);
    char *a = testenv_read_file(path);
    CHECK(a != NULL && strcmp(a, "b\n") == 0);
    free(a);
    free(created);
    free(changed);
    free(makes_link);
    free(plain);
    free(own);
}

int main(void)
{
    testenv_t *env = testenv_new("agent-key");
    CHECK(env != NULL);
    if (env == NULL)
        return check_exit_code("test_agent_key");
    char path[600], gitenv[600];
    snprintf(gitenv, sizeof gitenv, "%s/git-home", env->dir);
    testgit_env(gitenv);
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[security]\ncurve = true\n\n"
                                   "[specialists.idle-agent]\nenabled = true\n") == 0);
    /* This process is an authorized client too (testbroker_start asks for stats). */
    CHECK_INT(curve_keys_init(), 0);
    config_t *config = NULL;
    CHECK_INT(config_load(path, &config), 0);
    const char *endpoints[] = {env->control_ep, NULL};
    CHECK_INT(curve_client_init(config, endpoints), 0);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    if (broker > 0) {
        test_broker_refuses(env);
        test_mcp_refuses(env);
        test_patch_stays_inside(env);
    }
    config_destroy(&config);
    testenv_destroy(&env);
    return check_exit_code("test_agent_key");
}
