/* pan against a real broker: submit, task show, idempotent ids, priority checks, queue
 * order, wake, cancel/retry, status, the merge group, unknown names, reset, and a broker
 * that is not there. */
#include "fakeworker.h"
#include "pan_harness.h"
#include "testgit.h"

#include "clock.h"
#include "failure.h"
#include "session.h"

#include <git2.h>
#include <limits.h>
#include <sys/stat.h>

static char s_out[PAN_OUT_SIZE];

static void test_no_broker(testenv_t *env)
{
    char endpoint[400];
    snprintf(endpoint, sizeof endpoint, "ipc://%s/nobody.sock", env->dir);
    int64_t start = clock_now_ms();
    int code = harness_pan_all(env, s_out, "--control", endpoint, "status", NULL);
    int64_t elapsed = clock_now_ms() - start;
    CHECK_INT(code, 3);
    CHECK(elapsed < 5000);
    CHECK(strstr(s_out, "pan: no reply from broker at ") != NULL);
    CHECK(strstr(s_out, endpoint) != NULL);
    CHECK(strstr(s_out, "within 3s") != NULL);
}

static void test_submit_and_show(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "submit", "review-agent", "--workspace", env->dir, "--title", "Review PR 7", "--issue",
                          "PAN-7", "--pr-url", "https://example/pr/7", NULL),
              0);
    harness_chomp(s_out);
    CHECK_INT(strlen(s_out), 36); /* a uuid */
    char id[64];
    snprintf(id, sizeof id, "%.36s", s_out); /* a uuid */
    CHECK_INT(harness_pan(env, s_out, "task", "show", id, "--json", NULL), 0);
    json_t *task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "id")), id);
    CHECK_STR(json_string_value(json_object_get(task, "state")), "queued");
    CHECK_STR(json_string_value(json_object_get(task, "specialist")), "review-agent");
    CHECK_STR(json_string_value(json_object_get(task, "issue")), "PAN-7");
    json_t *payload = json_object_get(task, "payload");
    CHECK_STR(json_string_value(json_object_get(payload, "prUrl")), "https://example/pr/7");
    CHECK_STR(json_string_value(json_object_get(payload, "issueId")), "PAN-7");
    json_decref(task);
    /* The human form names the state too. */
    CHECK_INT(harness_pan(env, s_out, "task", "show", id, NULL), 0);
    CHECK(strstr(s_out, "State:") != NULL && strstr(s_out, "queued") != NULL);
}

static void test_duplicate_id(testenv_t *env)
{
    CHECK_INT(
        harness_pan(env, s_out, "submit", "test-agent", "--workspace", env->dir, "--id", "dup-1", "--title", "first", NULL),
        0);
    CHECK_STR(s_out, "dup-1\n");
    CHECK_INT(harness_pan(env, s_out, "submit", "test-agent", "--workspace", env->dir, "--id", "dup-1", "--title", "second",
                          "--json", NULL),
              0);
    json_t *task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "id")), "dup-1");
    CHECK_STR(json_string_value(json_object_get(task, "title")), "first");
    json_decref(task);
}

static void test_invalid_input(testenv_t *env)
{
    CHECK_INT(harness_pan_all(env, s_out, "submit", "merge-agent", "--priority", "asap", NULL), 2);
    CHECK(strstr(s_out, "invalid priority 'asap' (urgent, high, normal, low)") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", NULL), 2);
    CHECK(strstr(s_out, "usage:") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "x", "--max-attempts", "0", NULL), 2);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "x", "--payload", "[1]", NULL), 2);
    /* JSON nested deeper than a message may be is refused, not written past the writer. */
    char deep[400] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{\"a\":");
    strcat(deep, "1");
    for (int i = 0; i < 40; i++)
        strcat(deep, "}");
    CHECK_INT(harness_pan_all(env, s_out, "submit", "merge-agent", "--payload", deep, NULL), 2);
    CHECK(strstr(s_out, "--payload is nested deeper than") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "frobnicate", NULL), 2);
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "wake", "merge-agent", "--priority",
                              "soon", NULL),
              2);
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "queue", "nobody", NULL), 1);
    CHECK(strstr(s_out, "Error: Unknown specialist 'nobody'") != NULL);
    CHECK(strstr(s_out, "Valid specialists: merge-agent, review-agent, test-agent") != NULL);
}

static void test_queue_order(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "merge-agent", NULL), 0);
    CHECK(strstr(s_out, "Queue is empty - no pending work") != NULL);
    const char *order[][2] = {{"q-low", "low"},
                              {"q-normal-1", "normal"},
                              {"q-urgent", "urgent"},
                              {"q-normal-2", "normal"},
                              {"q-high", "high"}};
    for (size_t i = 0; i < 5; i++)
        CHECK_INT(harness_pan(env, s_out, "submit", "merge-agent", "--id", order[i][0],
                              "--priority", order[i][1], "--branch", "feat/q", NULL),
                  0);
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "merge-agent", "--json", NULL), 0);
    json_t *queue = harness_json(s_out);
    CHECK(json_is_true(json_object_get(queue, "hasWork")));
    CHECK_INT(json_integer_value(json_object_get(queue, "urgentCount")), 1);
    json_t *items = json_object_get(queue, "items");
    const char *expected[] = {"q-urgent", "q-high", "q-normal-1", "q-normal-2", "q-low"};
    CHECK_INT(json_array_size(items), 5);
    for (size_t i = 0; i < 5 && i < json_array_size(items); i++) {
        json_t *item = json_array_get(items, i);
        CHECK_STR(json_string_value(json_object_get(item, "id")), expected[i]);
        CHECK_STR(json_string_value(json_object_get(json_object_get(item, "payload"), "branch")),
                  "feat/q");
    }
    json_decref(queue);
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "merge-agent", NULL), 0);
    CHECK(strstr(s_out, "Total items: 5") != NULL);
    CHECK(strstr(s_out, "Urgent items: 1") != NULL);
    CHECK(strstr(s_out, "1. URGENT\n   ID: q-urgent") != NULL);
    CHECK(strstr(s_out, "Branch: feat/q") != NULL);
}

static void test_wake(testenv_t *env)
{
    /* No review-agent worker runs here: queued, and said that nothing wakes up. */
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "wake", "review-agent", "--task",
                              "look at the auth module", "--workspace", env->dir, NULL),
              0);
    CHECK(strstr(s_out, "Queued urgent task") != NULL);
    CHECK(strstr(s_out, "no review-agent worker is running, so nothing wakes up") != NULL);
    CHECK(strstr(s_out, "woken up successfully") == NULL);
    CHECK_INT(harness_pan(env, s_out, "specialists", "queue", "review-agent", "--json", NULL), 0);
    json_t *queue = harness_json(s_out);
    json_t *items = json_object_get(queue, "items");
    /* The review task from test_submit_and_show is normal: the wake goes before it. */
    CHECK_INT(json_array_size(items), 2);
    json_t *first = json_array_get(items, 0);
    CHECK_STR(json_string_value(json_object_get(first, "priority")), "urgent");
    CHECK_STR(json_string_value(json_object_get(json_object_get(first, "payload"), "task")),
              "look at the auth module");
    CHECK_STR(json_string_value(json_object_get(json_object_get(first, "payload"), "workspace")),
              env->dir);
    json_decref(queue);
    CHECK_INT(harness_pan_all(env, s_out, "specialists", "wake", "nobody", NULL), 1);
    CHECK(strstr(s_out, "Error: Unknown specialist 'nobody'") != NULL);
}

static void test_cancel_retry(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "submit", "test-agent", "--workspace", env->dir, "--id", "c-1", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "cancel", "c-1", NULL), 0);
    CHECK(strstr(s_out, "state: cancelled") != NULL);
    CHECK_INT(harness_pan(env, s_out, "task", "show", "c-1", "--json", NULL), 0);
    json_t *task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "state")), "cancelled");
    json_decref(task);
    CHECK_INT(harness_pan(env, s_out, "retry", "c-1", NULL), 0);
    CHECK(strstr(s_out, "state: queued") != NULL);
    /* A queued task moves to another priority; a bad priority is a usage error; an
     * ended task is refused. */
    CHECK_INT(harness_pan(env, s_out, "priority", "c-1", "urgent", NULL), 0);
    CHECK(strstr(s_out, "Moved c-1 to urgent (state: queued)") != NULL);
    CHECK_INT(harness_pan(env, s_out, "task", "show", "c-1", "--json", NULL), 0);
    task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "priority")), "urgent");
    json_decref(task);
    CHECK_INT(harness_pan_all(env, s_out, "priority", "c-1", "sideways", NULL), 2);
    CHECK(strstr(s_out, "urgent, high, normal, low") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "priority", "c-1", NULL), 2);
    CHECK_INT(harness_pan(env, s_out, "cancel", "c-1", NULL), 0);
    CHECK_INT(harness_pan_all(env, s_out, "priority", "c-1", "high", NULL), 1);
    CHECK(strncmp(s_out, "pan: ", 5) == 0 && strstr(s_out, "queued") != NULL);
    CHECK_INT(harness_pan(env, s_out, "retry", "c-1", NULL), 0);
    CHECK_INT(harness_pan_all(env, s_out, "cancel", "no-such-task", NULL), 1);
    CHECK(strncmp(s_out, "pan: ", 5) == 0);
    CHECK_INT(harness_pan_all(env, s_out, "task", "show", "no-such-task", NULL), 1);
}

static void test_status(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "status", "--json", NULL), 0);
    json_t *stats = harness_json(s_out);
    json_t *merge = json_object_get(json_object_get(stats, "queues"), "merge-agent");
    CHECK_INT(json_integer_value(json_object_get(merge, "urgent")), 1);
    CHECK_INT(json_integer_value(json_object_get(merge, "normal")), 2);
    CHECK(json_integer_value(json_object_get(stats, "last_seq")) > 0);
    json_decref(stats);
    CHECK_INT(harness_pan(env, s_out, "status", NULL), 0);
    CHECK(strstr(s_out, "merge-agent") != NULL && strstr(s_out, "Running: 0") != NULL);
}

static void test_merge_group(testenv_t *env)
{
    char repo_dir[PATH_MAX], sub_dir[PATH_MAX + 16], real_repo[PATH_MAX];
    snprintf(repo_dir, sizeof repo_dir, "%s/repo", env->dir);
    git_libgit2_init();
    git_repository *repo = NULL;
    CHECK_INT(git_repository_init(&repo, repo_dir, 0), 0);
    git_repository_free(repo);
    git_libgit2_shutdown();
    snprintf(sub_dir, sizeof sub_dir, "%s/src", repo_dir);
    mkdir(sub_dir, 0755);
    CHECK(realpath(repo_dir, real_repo) != NULL);
    /* A commit and the branch the merge names: pan refuses a branch the repository lacks. */
    setenv("GIT_AUTHOR_NAME", "Test", 1);
    setenv("GIT_AUTHOR_EMAIL", "test@example.com", 1);
    setenv("GIT_COMMITTER_NAME", "Test", 1);
    setenv("GIT_COMMITTER_EMAIL", "test@example.com", 1);
    testgit_commit(repo_dir, "src/a.c", "int a;\n", "init");
    CHECK_INT(testgit_run(repo_dir, "branch", "feat/m", NULL), 0);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "merge-agent", "--id", "m-0", "--workspace",
                              sub_dir, "--branch", "feat/nope", NULL),
              2);
    CHECK(strstr(s_out, "--branch feat/nope: ") != NULL &&
          strstr(s_out, "no branch 'feat/nope' in ") != NULL &&
          strstr(s_out, "(neither refs/heads/feat/nope nor a remote's branch") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "submit", "test-agent", "--id", "m-0",
                              "--workspace", "/nonexistent/dir", NULL),
              2);
    CHECK(strstr(s_out, "--workspace /nonexistent/dir: no such directory") != NULL);
    /* A branch for a directory that is no repository: refused, nothing queued. */
    CHECK_INT(harness_pan_all(env, s_out, "submit", "test-agent", "--id", "m-0", "--workspace",
                              env->home, "--branch", "main", NULL),
              2);
    CHECK(strstr(s_out, "is not in a git repository") != NULL);
    CHECK_INT(harness_pan_all(env, s_out, "task", "show", "m-0", NULL), 1);
    /* A repository owned by another uid (root only can make one): the real cause, git's
     * ownership check and the setting that trusts it, not "is not in a git repository". */
    if (geteuid() == 0) {
        char foreign[PATH_MAX];
        snprintf(foreign, sizeof foreign, "%s/foreign", env->dir);
        CHECK_INT(testgit_run(env->dir, "clone", "-q", repo_dir, foreign, NULL), 0);
        char *chown_argv[] = {"/bin/chown", "-R", "54321:54321", foreign, NULL};
        char ignored[256];
        CHECK_INT(testenv_run(env, chown_argv, ignored, sizeof ignored, 10000), 0);
        CHECK_INT(harness_pan_all(env, s_out, "submit", "test-agent", "--id", "m-0",
                                  "--workspace", foreign, "--branch", "feat/m", NULL),
                  2);
        CHECK(strstr(s_out, "git refuses the repository") != NULL &&
              strstr(s_out, "belongs to uid 54321") != NULL &&
              strstr(s_out, "safe.directory") != NULL);
        CHECK_INT(harness_pan_all(env, s_out, "task", "show", "m-0", NULL), 1);
    }

    CHECK_INT(harness_pan(env, s_out, "submit", "merge-agent", "--id", "m-1", "--workspace",
                          sub_dir, "--target", "develop", "--payload",
                          "{\"filesChanged\":[\"a.c\"],\"branch\":\"overridden\"}", "--branch",
                          "feat/m", "--json", NULL),
              0);
    json_t *task = harness_json(s_out);
    /* No group: the merge-agents' queue orders the merges into a target ([merge] queue). */
    CHECK(json_object_get(task, "group") == NULL);
    json_t *payload = json_object_get(task, "payload");
    CHECK_STR(json_string_value(json_object_get(payload, "branch")), "feat/m");
    /* Pinned to the branch's head, the commit the broker's gate matches with a review. */
    char head[41];
    testgit_rev(repo_dir, "feat/m", head);
    CHECK_STR(json_string_value(json_object_get(payload, "commit")), head);
    CHECK_STR(json_string_value(json_object_get(payload, "target")), "develop");
    CHECK(json_is_array(json_object_get(payload, "filesChanged")));
    char real_sub[PATH_MAX];
    CHECK(realpath(sub_dir, real_sub) != NULL);
    CHECK_STR(json_string_value(json_object_get(payload, "workspace")), real_sub);
    json_decref(task);
    /* An explicit group wins; other specialists get none by default. */
    CHECK_INT(harness_pan(env, s_out, "submit", "merge-agent", "--id", "m-2", "--workspace",
                          sub_dir, "--group", "mine", "--json", NULL),
              0);
    task = harness_json(s_out);
    CHECK_STR(json_string_value(json_object_get(task, "group")), "mine");
    json_decref(task);
    CHECK_INT(harness_pan(env, s_out, "cancel", "m-1", NULL), 0);
    CHECK_INT(harness_pan(env, s_out, "cancel", "m-2", NULL), 0);
}

static void test_list_and_reset(testenv_t *env)
{
    session_state_t state;
    memset(&state, 0, sizeof state);
    session_new_id(state.session_id);
    snprintf(state.cwd, sizeof state.cwd, "%s", env->dir);
    snprintf(state.cli, sizeof state.cli, "codex");
    state.input_tokens = 45000;
    state.cost_usd = 0.25;
    state.runs = 2;
    state.created_at_ms = clock_wall_ms();
    state.last_run_at_ms = clock_wall_ms() - 5 * 60 * 1000;
    CHECK_INT(session_save("merge-agent", &state), 0);

    CHECK_INT(harness_pan(env, s_out, "specialists", "list", NULL), 0);
    CHECK(strncmp(s_out, "Specialist Agents:", 18) == 0);
    CHECK(strstr(s_out, "Merge Agent (enabled)") != NULL);
    char short_id[32];
    snprintf(short_id, sizeof short_id, "Session: %.8s...", state.session_id);
    CHECK(strstr(s_out, short_id) != NULL);
    CHECK(strstr(s_out, "Context: 45,000 tokens") != NULL);
    CHECK(strstr(s_out, "Last wake: 5m ago") != NULL);
    CHECK(strstr(s_out, "Agent: claude (the session is codex's: the next run starts a fresh "
                        "one)") != NULL);
    CHECK(strstr(s_out, "Agent: claude\n") != NULL); /* the others, without a session */
    CHECK_INT(harness_pan(env, s_out, "specialists", "list", "--json", NULL), 0);
    json_t *list = harness_json(s_out);
    CHECK_INT(json_array_size(list), 3);
    json_t *merge = json_array_get(list, 0);
    CHECK_STR(json_string_value(json_object_get(merge, "name")), "merge-agent");
    CHECK_STR(json_string_value(json_object_get(merge, "sessionId")), state.session_id);
    CHECK_INT(json_integer_value(json_object_get(merge, "contextTokens")), 45000);
    CHECK_STR(json_string_value(json_object_get(merge, "agent")), "claude");
    CHECK_STR(json_string_value(json_object_get(merge, "sessionAgent")), "codex");
    CHECK_INT(json_integer_value(json_object_get(merge, "queued")), 5);
    json_decref(list);

    CHECK_INT(harness_pan_all(env, s_out, "specialists", "reset", "nobody", "--force", NULL), 1);
    CHECK(strstr(s_out, "Error: Unknown specialist 'nobody'") != NULL);
    CHECK_INT(harness_pan(env, s_out, "specialists", "reset", "merge-agent", "--force", NULL), 0);
    CHECK(strstr(s_out, "✓ Specialist merge-agent has been reset") != NULL);
    CHECK_INT(session_load("merge-agent", &state), FAILURE_NOT_FOUND);
    CHECK_INT(harness_pan(env, s_out, "specialists", "reset", "--all", "--force", NULL), 0);
    CHECK(strstr(s_out, "✓ Reset 3 specialist(s)") != NULL);

    /* A generic worker runs a command of its own, not an agent CLI: no "Agent: claude". */
    fakeworker_t *docs = fakeworker_new(env->dir, env->in_ep, "docs-agent", "w-docs");
    CHECK(docs != NULL);
    fakeworker_hello(docs, NULL, 0);
    CHECK_INT(harness_pan(env, s_out, "specialists", "list", NULL), 0);
    const char *block = strstr(s_out, "Docs Agent (enabled)");
    CHECK(block != NULL);
    const char *agent = strstr(block, "  Agent: ");
    CHECK(agent != NULL && strncmp(agent, "  Agent: none (its worker runs a command of its own)\n",
                                   53) == 0);
    CHECK_INT(harness_pan(env, s_out, "specialists", "list", "--json", NULL), 0);
    list = harness_json(s_out);
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        if (strcmp(json_string_value(json_object_get(entry, "name")), "docs-agent") == 0)
            CHECK(json_is_null(json_object_get(entry, "agent")));
    }
    json_decref(list);
    fakeworker_bye(docs);
    fakeworker_destroy(&docs);
}

/* Every program prints the one version of the build. */
static void test_versions(testenv_t *env)
{
    CHECK_INT(harness_pan(env, s_out, "--version", NULL), 0);
    CHECK_STR(s_out, "pan " CLOISTER_VERSION "\n");
    const char *const programs[] = {"cloister-broker", "cloister-review", "cloister-test",
                                    "cloister-merge", "cloister-worker"};
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        char *argv[] = {(char *)testenv_bin(programs[i]), "--version", NULL};
        char expected[128];
        snprintf(expected, sizeof expected, "%s %s\n", programs[i], CLOISTER_VERSION);
        CHECK_INT(testenv_run(env, argv, s_out, sizeof s_out, 10000), 0);
        CHECK_STR(s_out, expected);
    }
}

int main(void)
{
    testenv_t *env = testenv_new("pan-cli");
    if (env == NULL)
        return 1;
    test_versions(env);
    test_no_broker(env);
    /* Merges are queued here without reviews (the gate has its own tests). */
    char config[PATH_MAX];
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(config, "[security]\nrequire_review = false\n") == 0);
    if (harness_start_broker(env) > 0) {
        test_submit_and_show(env);
        test_duplicate_id(env);
        test_invalid_input(env);
        test_queue_order(env);
        test_wake(env);
        test_cancel_retry(env);
        test_status(env);
        test_merge_group(env);
        test_list_and_reset(env);
    } else {
        CHECK(!"broker started");
    }
    testenv_destroy(&env);
    return check_exit_code("test_pan_cli");
}
