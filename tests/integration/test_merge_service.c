/* test_merge_service: cloister-merge end to end. A real broker (worker_harness.h), real
 * cloister-merge processes, fake-claude as the agent ([agent] command in a temporary
 * cloister.toml), and real repositories made with the git CLI: a bare "remote", the user's
 * clone (the task's workspace) and a second clone that plays other people pushing. Each
 * scenario submits merge-agent tasks, watches the broker's events, and checks what reached
 * the remote, that the user's clone is left clean, and the history lines. */
#include "testgit.h"
#include "worker_harness.h"

#include <dirent.h>
#include <sys/wait.h>

static harness_t *s_h;
static testgit_fixture_t s_repos;
static char s_workdir[512], s_wtdir[600];

/* ---- git -------------------------------------------------------------------------------- */

/* The remote's main. */
static void s_remote_main(char *buf)
{
    testgit_rev(s_repos.remote, "refs/heads/main", buf);
}

/* Number of merge commits on the remote's main. */
static int s_remote_merges(void)
{
    CHECK_INT(
        testgit_run(s_repos.remote, "rev-list", "--merges", "--count", "refs/heads/main", NULL), 0);
    return atoi(testgit_out());
}

/* True when the user's clone has a clean status on main at `head`, only its own worktree,
 * no engine branch or ref, and the service's worktree directory is empty. */
static bool s_user_clean(const char *head)
{
    bool ok = true;
    char now[41];
    testgit_rev(s_repos.user, "HEAD", now);
    if (strcmp(now, head) != 0) {
        fprintf(stderr, "user HEAD moved: %s -> %s\n", head, now);
        ok = false;
    }
    CHECK_INT(testgit_run(s_repos.user, "status", "--porcelain", NULL), 0);
    if (testgit_out()[0] != '\0') {
        fprintf(stderr, "user tree changed: %s\n", testgit_out());
        ok = false;
    }
    CHECK_INT(testgit_run(s_repos.user, "worktree", "list", "--porcelain", NULL), 0);
    if (strstr(testgit_out(), s_wtdir) != NULL) {
        fprintf(stderr, "worktree left: %s\n", testgit_out());
        ok = false;
    }
    CHECK_INT(testgit_run(s_repos.user, "for-each-ref", "--format=%(refname)", NULL), 0);
    if (strstr(testgit_out(), "cloister-merge") != NULL) {
        fprintf(stderr, "ref left: %s\n", testgit_out());
        ok = false;
    }
    DIR *d = opendir(s_wtdir);
    struct dirent *entry;
    while (d != NULL && (entry = readdir(d)) != NULL) {
        if (entry->d_name[0] != '.') {
            fprintf(stderr, "left in the worktree directory: %s\n", entry->d_name);
            ok = false;
        }
    }
    if (d != NULL)
        closedir(d);
    return ok;
}

/* ---- the environment -------------------------------------------------------------------- */

/* A broker, a cloister.toml (fake agent + `extra_config`), and the repositories: main with
 * a.c, b.c and c.txt on the remote, the user's clone on main, a dev clone. With `gated` the
 * broker merges only reviewed commits (the default); without, merges are submitted by hand. */
static void s_setup_gate(const char *name, const char *extra_config, bool gated)
{
    char config[2048];
    snprintf(config, sizeof config,
             "[broker]\nretry_backoff_ms = 50\n\n[agent]\ncommand = \"%s\"\n\n"
             "[security]\nrequire_review = %s\n\n%s\n",
             testenv_bin("fake-claude"), gated ? "true" : "false",
             extra_config ? extra_config : "");
    s_h = harness_new_config(name, config);
    CHECK(s_h != NULL);
    const char *dir = s_h->env->dir;
    char path[700];
    snprintf(path, sizeof path, "%s/home", dir);
    testgit_env(path);
    snprintf(path, sizeof path, "%s/claude", dir);
    setenv("CLAUDE_CONFIG_DIR", path, 1);
    unsetenv("CLOISTER_AGENT_COMMAND");
    unsetenv("FAKE_CLAUDE_ACTIONS");
    unsetenv("FAKE_CLAUDE_SCENARIO");
    unsetenv("FAKE_CLAUDE_DELAY_MS");
    snprintf(path, sizeof path, "%s/fake.log", dir);
    setenv("FAKE_CLAUDE_LOG", path, 1);

    snprintf(s_workdir, sizeof s_workdir, "%s/specialists/merge-agent/work", s_h->env->home);
    snprintf(s_wtdir, sizeof s_wtdir, "%s/merges", s_workdir);
    testgit_fixture(&s_repos, dir);
}

static void s_setup(const char *name, const char *extra_config)
{
    s_setup_gate(name, extra_config, false);
}

/* Kills whatever fake-claude is still running in the test directory (an agent orphaned by
 * a kill -9 of its service); returns how many there were. */
static int s_kill_stray_agents(void)
{
    int found = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc != NULL && (entry = readdir(proc)) != NULL) {
        pid_t pid = (pid_t)atoi(entry->d_name);
        if (pid <= 0)
            continue;
        char path[64], cwd[1024];
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
        char *cmdline = testenv_read_file(path);
        snprintf(path, sizeof path, "/proc/%d/cwd", (int)pid);
        ssize_t n = readlink(path, cwd, sizeof cwd - 1);
        cwd[n > 0 ? n : 0] = '\0';
        if (cmdline != NULL && strstr(cmdline, "fake-claude") != NULL &&
            strncmp(cwd, s_h->env->dir, strlen(s_h->env->dir)) == 0 && !harness_pid_gone(pid)) {
            found++;
            kill(pid, SIGKILL);
        }
        free(cmdline);
    }
    if (proc != NULL)
        closedir(proc);
    return found;
}

static void s_teardown(void)
{
    s_kill_stray_agents();
    harness_destroy(&s_h);
}

/* Starts cloister-merge instance `id` and waits until the broker announced it. */
static pid_t s_start_merge(const char *id)
{
    return harness_service(s_h, "cloister-merge", id, 2000, NULL);
}

/* PUSHes a merge-agent submit of `branch` into main (group set unless `group` is ""). */
static void s_submit(const char *id, const char *branch, const char *group, int timeout_s,
                     const char *issue)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_SPECIALIST, "merge-agent");
    wire_put_str(w, FIELD_TITLE, id);
    if (group[0] != '\0')
        wire_put_str(w, FIELD_GROUP, group);
    if (timeout_s > 0)
        wire_put_int(w, FIELD_TIMEOUT_S, timeout_s);
    json_t *payload =
        json_pack("{s:s, s:s, s:s}", "workspace", s_repos.user, "branch", branch, "target", "main");
    if (issue != NULL)
        json_object_set_new(payload, "issueId", json_string(issue));
    msgjson_put(w, "payload", payload);
    json_decref(payload);
    size_t len = 0;
    const void *data = wire_writer_data(w, &len);
    CHECK(zmq_send(s_h->push, data, len, 0) == (int)len);
    wire_writer_destroy(&w);
}

static const char *s_group(void)
{
    static char group[700];
    snprintf(group, sizeof group, "merge:%s:main", s_repos.user);
    return group;
}

/* Waits for the end of task `id` (done or failed); returns the event or NULL. */
static json_t *s_wait_end(const char *id, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        int i = harness_find(s_h, 0, "task.done", id);
        if (i < 0)
            i = harness_find(s_h, 0, "task.failed", id);
        if (i >= 0)
            return s_h->events[i];
        harness_pump(s_h, 20);
    }
    fprintf(stderr, "task %s did not end\n", id);
    return NULL;
}

static const char *s_result_str(const json_t *event, const char *key)
{
    const json_t *value = json_object_get(json_object_get(event, "result"), key);
    return json_is_string(value) ? json_string_value(value) : "";
}

/* True when the result's array `key` holds `item`. */
static bool s_result_has(const json_t *event, const char *key, const char *item)
{
    const json_t *array = json_object_get(json_object_get(event, "result"), key);
    size_t i;
    const json_t *value;
    json_array_foreach(array, i, value)
    {
        if (json_is_string(value) && strcmp(json_string_value(value), item) == 0)
            return true;
    }
    return false;
}

/* True when some progress of task `id` contains `text`. */
static bool s_progress_has(const char *id, const char *text)
{
    for (int i = 0; (i = harness_find(s_h, i, "task.progress", id)) >= 0; i++)
        if (strstr(harness_field(s_h->events[i], "text"), text) != NULL)
            return true;
    return false;
}

/* Lines of the merge history with "kind":"merge" and, if `task` is not NULL, that task. */
static int s_history_lines(const char *task)
{
    char path[700];
    snprintf(path, sizeof path, "%s/specialists/merge-agent/history.jsonl", s_h->env->home);
    char *text = testenv_read_file(path);
    int n = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        json_t *entry = json_loads(line, 0, NULL);
        if (strcmp(harness_field(entry, "kind"), "merge") == 0 &&
            (task == NULL || strcmp(harness_field(entry, "task"), task) == 0))
            n++;
        json_decref(entry);
    }
    free(text);
    return n;
}

/* Field `key` of `task`'s merge line in the history, as JSON text ("" when there is no such
 * line; the caller frees). */
static char *s_history_field(const char *task, const char *key)
{
    char path[700];
    snprintf(path, sizeof path, "%s/specialists/merge-agent/history.jsonl", s_h->env->home);
    char *text = testenv_read_file(path);
    char *found = NULL;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        json_t *entry = json_loads(line, 0, NULL);
        if (found == NULL && strcmp(harness_field(entry, "task"), task) == 0)
            found = json_dumps(json_object_get(entry, key), JSON_ENCODE_ANY);
        json_decref(entry);
    }
    free(text);
    return found ? found : strdup("");
}

/* Writes the fake agent's action script and points FAKE_CLAUDE_ACTIONS at it. */
static void s_actions(const char *script)
{
    char path[700];
    snprintf(path, sizeof path, "%s/actions.txt", s_h->env->dir);
    CHECK(testenv_write_file(path, script) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", path, 1);
}

static const char *s_conflict_main = "int a(void)\n{\n    return 10;\n}\n";
static const char *s_conflict_feature = "int a(void)\n{\n    return 20;\n}\n";

/* ---- scenarios -------------------------------------------------------------------------- */

static void test_fast_forward(void)
{
    s_setup("merge-svc-ff", NULL);
    testgit_push_branch(s_repos.user, "feature/ff", "d.c", "int d;\n");
    char feature[41], head[41], main_after[41];
    testgit_rev(s_repos.user, "feature/ff", feature);
    testgit_rev(s_repos.user, "HEAD", head);
    s_start_merge("merge-1");
    /* Pinned to another commit than the branch's (payload "commit", what a review hands
     * over): not merged. */
    char pinned[2048];
    snprintf(pinned, sizeof pinned,
             "{\"workspace\": \"%s\", \"branch\": \"feature/ff\", \"target\": \"main\","
             " \"commit\": \"%s\"}",
             s_repos.user, head);
    harness_submit(s_h, "ff-0", "merge-agent", NULL, 0, 0, pinned);
    json_t *end = s_wait_end("ff-0", 20000);
    CHECK(end != NULL && strstr(harness_field(end, "error"), "moved since the review") != NULL);
    s_remote_main(main_after);
    CHECK(strcmp(main_after, feature) != 0);

    s_submit("ff-1", "feature/ff", s_group(), 0, "PAN-1");
    end = s_wait_end("ff-1", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK_STR(s_result_str(end, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(s_result_str(end, "strategy"), "fast-forward");
    CHECK_STR(s_result_str(end, "TESTS"), "SKIP");
    CHECK(json_is_true(json_object_get(json_object_get(end, "result"), "pushed")));
    CHECK_STR(s_result_str(end, "landed"), "remote");
    s_remote_main(main_after);
    CHECK_STR(main_after, feature);
    CHECK(s_progress_has("ff-1", "fetching"));
    CHECK(s_progress_has("ff-1", "pushing"));
    /* The user's clone is clean on main: it is fast-forwarded with the merge. */
    CHECK_STR(s_result_str(end, "local_target"), "checkout_updated");
    CHECK(s_user_clean(main_after));
    CHECK_INT(s_history_lines("ff-1"), 1);
    char *field = s_history_field("ff-1", "pushed");
    CHECK_STR(field, "true");
    free(field);
    field = s_history_field("ff-1", "landed");
    CHECK_STR(field, "\"remote\"");
    free(field);

    /* Submitting the same merge again under a new id: already merged, nothing pushed. */
    s_submit("ff-2", "feature/ff", s_group(), 0, "PAN-1");
    end = s_wait_end("ff-2", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK_STR(s_result_str(end, "strategy"), "up-to-date");
    CHECK(json_is_false(json_object_get(json_object_get(end, "result"), "pushed")));
    CHECK_INT(s_history_lines(NULL), 3); /* ff-0, ff-1, ff-2 */
    s_teardown();
}

/* [merge] push = false (as with no remote): the merge lands on the local main, and the
 * user's clean checkout of it moves with it; with uncommitted changes in that checkout the
 * merge fails at once and nothing moves. The remote is never touched. */
static void test_local_target(void)
{
    s_setup("merge-svc-local", "[merge]\npush = false\n");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "feature/local", NULL), 0);
    testgit_commit(s_repos.user, "d.c", "int d;\n", "local work");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    char head[41], remote_before[41], remote_after[41], feature[41];
    testgit_rev(s_repos.user, "HEAD", head);
    testgit_rev(s_repos.user, "feature/local", feature);
    s_remote_main(remote_before);
    char path[700];
    snprintf(path, sizeof path, "%s/c.txt", s_repos.user);
    CHECK(testenv_write_file(path, "an edit of my own\n") == 0);
    s_start_merge("merge-1");

    s_submit("local-1", "feature/local", s_group(), 0, NULL);
    json_t *end = s_wait_end("local-1", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"), "your checkout of main at") != NULL &&
          strstr(harness_field(end, "error"), "has uncommitted changes (c.txt)") != NULL);
    char now[41];
    testgit_rev(s_repos.user, "main", now);
    CHECK_STR(now, head);

    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "--", "c.txt", NULL), 0);
    s_submit("local-2", "feature/local", s_group(), 0, NULL);
    end = s_wait_end("local-2", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK_STR(s_result_str(end, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(s_result_str(end, "local_target"), "checkout_updated");
    CHECK(!s_progress_has("local-2", "fetching"));
    /* Nothing was pushed, and nothing says it was. */
    CHECK(json_is_false(json_object_get(json_object_get(end, "result"), "pushed")));
    CHECK_STR(s_result_str(end, "landed"), "local");
    CHECK(!s_progress_has("local-2", "pushing"));
    CHECK(s_progress_has("local-2", "landing on the local 'main'"));
    char *field = s_history_field("local-2", "pushed");
    CHECK_STR(field, "false");
    free(field);
    field = s_history_field("local-2", "landed");
    CHECK_STR(field, "\"local\"");
    free(field);
    testgit_rev(s_repos.user, "main", now);
    CHECK_STR(now, feature);
    s_remote_main(remote_after);
    CHECK_STR(remote_after, remote_before);
    snprintf(path, sizeof path, "%s/d.c", s_repos.user);
    char *d = testenv_read_file(path);
    CHECK(d != NULL && strcmp(d, "int d;\n") == 0);
    free(d);
    CHECK(s_user_clean(feature));
    s_teardown();
}

/* The fake agent's invocations, from FAKE_CLAUDE_LOG (caller frees). */
static char *s_fake_log(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/fake.log", s_h->env->dir);
    return testenv_read_file(path);
}

static void test_conflict_resolved(void)
{
    s_setup("merge-svc-resolve", NULL);
    s_actions("resolve-all theirs\nsay MERGE_RESULT: SUCCESS\n"
              "say NOTES: kept the feature's value");
    testgit_push_branch(s_repos.user, "feature/x", "a.c", s_conflict_feature);
    testgit_push_main(s_repos.dev, "a.c", s_conflict_main);
    char head[41], before[41], after[41];
    testgit_rev(s_repos.user, "HEAD", head);
    s_remote_main(before);
    s_start_merge("merge-1");
    s_submit("resolve-1", "feature/x", s_group(), 0, "PAN-2");
    json_t *end = s_wait_end("resolve-1", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK_STR(s_result_str(end, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(s_result_str(end, "strategy"), "resolved");
    CHECK(s_result_has(end, "RESOLVED_FILES", "a.c"));
    CHECK(strstr(s_result_str(end, "NOTES"), "kept the feature's value") != NULL);
    CHECK(json_is_number(json_object_get(json_object_get(end, "result"), "cost_usd")));
    CHECK(s_progress_has("resolve-1", "conflicting file(s): a.c"));
    s_remote_main(after);
    CHECK(strcmp(after, before) != 0);
    CHECK_STR(s_result_str(end, "merge_commit"), after);
    CHECK_INT(s_remote_merges(), 1);
    CHECK_INT(testgit_run(s_repos.remote, "show", "refs/heads/main:a.c", NULL), 0);
    CHECK(strstr(testgit_out(), "return 20;") != NULL && strstr(testgit_out(), "<<<<<<<") == NULL);
    CHECK(s_user_clean(after));

    /* The agent ran in the fixed workdir with the worktree granted and named. */
    char *log = s_fake_log();
    json_t *first = log ? json_loads(log, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    CHECK(first != NULL);
    CHECK_STR(harness_field(first, "cwd"), s_workdir);
    char *argv_text = first ? json_dumps(json_object_get(first, "argv"), 0) : NULL;
    CHECK(argv_text != NULL && strstr(argv_text, "\"--add-dir\"") != NULL);
    CHECK(argv_text != NULL && strstr(argv_text, s_wtdir) != NULL);
    CHECK(argv_text != NULL && strstr(argv_text, "--session-id") != NULL);
    CHECK(strstr(harness_field(first, "stdin"), "feature/x") != NULL);
    CHECK(strstr(harness_field(first, "stdin"), "- a.c") != NULL);
    free(argv_text);
    json_decref(first);
    free(log);

    /* A second conflicting merge resumes the same agent session. */
    CHECK_INT(testgit_run(s_repos.user, "fetch", "-q", "origin", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "-b", "feature/y", "origin/main", NULL),
              0);
    testgit_commit(s_repos.user, "b.c", "int b(void)\n{\n    return 30;\n}\n", "feature y");
    CHECK_INT(testgit_run(s_repos.user, "push", "-q", "origin", "feature/y", NULL), 0);
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_push_main(s_repos.dev, "b.c", "int b(void)\n{\n    return 40;\n}\n");
    s_submit("resolve-2", "feature/y", s_group(), 0, "PAN-3");
    end = s_wait_end("resolve-2", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    log = s_fake_log();
    char *second = log ? strchr(log, '\n') : NULL;
    CHECK(second != NULL && strstr(second, "\"--resume\"") != NULL);
    CHECK_INT(s_remote_merges(), 2);
    CHECK_INT(s_history_lines(NULL), 2);
    free(log);
    s_teardown();
}

static void test_conflict_unresolved(void)
{
    s_setup("merge-svc-unresolved", NULL);
    /* The agent claims success but leaves the markers. */
    s_actions("say MERGE_RESULT: SUCCESS");
    testgit_push_branch(s_repos.user, "feature/x", "a.c", s_conflict_feature);
    testgit_push_main(s_repos.dev, "a.c", s_conflict_main);
    char head[41], before[41], after[41];
    testgit_rev(s_repos.user, "HEAD", head);
    s_remote_main(before);
    s_start_merge("merge-1");
    s_submit("unresolved-1", "feature/x", s_group(), 0, NULL);
    json_t *end = s_wait_end("unresolved-1", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK_STR(s_result_str(end, "MERGE_RESULT"), "FAILURE");
    CHECK(s_result_has(end, "FAILED_FILES", "a.c"));
    CHECK(strstr(harness_field(end, "error"), "a.c") != NULL);
    CHECK(json_is_false(json_object_get(json_object_get(end, "result"), "pushed")));
    s_remote_main(after);
    CHECK_STR(after, before);
    CHECK(s_user_clean(head));

    /* The agent says it failed: the resolver gives up, nothing pushed. */
    s_actions("say MERGE_RESULT: FAILURE\nsay NOTES: incompatible");
    pid_t pid = s_h->env->procs[s_h->env->nprocs - 1];
    testenv_signal(pid, SIGTERM);
    CHECK(testenv_wait(s_h->env, pid, 5000) >= 0);
    s_start_merge("merge-2");
    s_submit("unresolved-2", "feature/x", s_group(), 0, NULL);
    end = s_wait_end("unresolved-2", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"), "incompatible") != NULL);
    CHECK(strstr(harness_field(end, "error"), "the conflicts in 1 file(s) were not resolved") !=
          NULL);
    CHECK_STR(s_result_str(end, "agent_merge_result"), "FAILURE");
    s_remote_main(after);
    CHECK_STR(after, before);
    CHECK(s_user_clean(head));
    CHECK_INT(s_history_lines(NULL), 2);

    /* No agent at all: the task's error names the root cause and what to change. */
    pid = s_h->env->procs[s_h->env->nprocs - 1];
    testenv_signal(pid, SIGTERM);
    CHECK(testenv_wait(s_h->env, pid, 5000) >= 0);
    setenv("CLOISTER_AGENT_COMMAND", "/nonexistent/claude", 1);
    s_start_merge("merge-3");
    unsetenv("CLOISTER_AGENT_COMMAND");
    s_submit("unresolved-3", "feature/x", s_group(), 0, NULL);
    end = s_wait_end("unresolved-3", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"),
                 "cannot execute /nonexistent/claude: No such file or directory — set [agent] "
                 "command or CLOISTER_AGENT_COMMAND — so the conflicts in 1 file(s) were not "
                 "resolved") != NULL);
    s_teardown();
}

static void test_tests_fail(void)
{
    s_setup("merge-svc-tests", "[specialists.merge-agent]\ntest_command = \"false\"\n");
    testgit_push_branch(s_repos.user, "feature/x", "d.c", "int d;\n");
    testgit_push_main(s_repos.dev, "e.c", "int e;\n"); /* a clean three-way merge */
    char head[41], before[41], after[41];
    testgit_rev(s_repos.user, "HEAD", head);
    s_remote_main(before);
    s_start_merge("merge-1");
    s_submit("tests-1", "feature/x", s_group(), 0, NULL);
    json_t *end = s_wait_end("tests-1", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK_STR(s_result_str(end, "TESTS"), "FAIL");
    CHECK_STR(s_result_str(end, "strategy"), "clean");
    CHECK(strstr(harness_field(end, "error"), "tests failed") != NULL);
    CHECK(strstr(s_result_str(end, "NOTES"), "`false`") != NULL);
    s_remote_main(after);
    CHECK_STR(after, before);
    CHECK(s_user_clean(head));
    CHECK_INT(s_history_lines("tests-1"), 1);
    s_teardown();
}

static void test_agent_hangs(void)
{
    s_setup("merge-svc-hang", NULL);
    setenv("FAKE_CLAUDE_SCENARIO", "hang", 1);
    testgit_push_branch(s_repos.user, "feature/x", "a.c", s_conflict_feature);
    testgit_push_main(s_repos.dev, "a.c", s_conflict_main);
    char head[41], before[41], after[41];
    testgit_rev(s_repos.user, "HEAD", head);
    s_remote_main(before);
    s_start_merge("merge-1");
    int64_t start = clock_now_ms();
    s_submit("hang-1", "feature/x", s_group(), 3, NULL);
    json_t *end = s_wait_end("hang-1", 15000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(clock_now_ms() - start < 10000);
    CHECK(s_progress_has("hang-1", "conflicting file(s): a.c"));
    CHECK(strstr(s_result_str(end, "NOTES"), "timed out") != NULL);
    CHECK(s_result_has(end, "FAILED_FILES", "a.c"));
    s_remote_main(after);
    CHECK_STR(after, before);
    CHECK(s_user_clean(head));
    CHECK_INT(s_kill_stray_agents(), 0);
    s_teardown();
}

static void test_hostile_branch_names(void)
{
    s_setup("merge-svc-names", NULL);
    char head[41], before[41], marker[700], branch[900];
    testgit_rev(s_repos.user, "HEAD", head);
    s_remote_main(before);
    s_start_merge("merge-1");
    snprintf(marker, sizeof marker, "%s/PWNED", s_h->env->dir);
    /* A valid ref name that would run `touch` if it ever reached a shell. */
    snprintf(branch, sizeof branch, "x';touch${IFS}%s;'", marker);
    s_submit("names-1", branch, s_group(), 0, NULL);
    s_submit("names-2", "feature; rm -rf ~", s_group(), 0, NULL);
    s_submit("names-3", "\"quoted\" branch", s_group(), 0, NULL);
    json_t *end = s_wait_end("names-1", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"), "not found") != NULL);
    end = s_wait_end("names-2", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"), "invalid branch name") != NULL);
    end = s_wait_end("names-3", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    CHECK(strstr(harness_field(end, "error"), "invalid branch name") != NULL);
    struct stat st;
    CHECK(stat(marker, &st) != 0);
    char after[41];
    s_remote_main(after);
    CHECK_STR(after, before);
    CHECK(s_user_clean(head));
    CHECK_INT(s_history_lines(NULL), 3);

    /* A payload without a branch, or with a relative workspace (which the broker refuses). */
    char nowhere[800];
    snprintf(nowhere, sizeof nowhere, "{\"workspace\": \"%s/nowhere\"}", s_h->env->dir);
    harness_submit(s_h, "names-4", "merge-agent", NULL, 0, 0, nowhere);
    end = s_wait_end("names-4", 20000);
    CHECK(end != NULL && strstr(harness_field(end, "error"), "'branch'") != NULL);
    harness_submit(s_h, "names-5", "merge-agent", NULL, 0, 0,
                   "{\"workspace\": \"user\", \"branch\": \"b\"}");
    end = harness_wait(s_h, "task.rejected", "names-5", 5000);
    CHECK(end != NULL && strstr(harness_field(end, "error"), "is not an absolute path") != NULL);
    s_teardown();
}

static void test_remote_unreachable(void)
{
    s_setup("merge-svc-unreachable", NULL);
    testgit_push_branch(s_repos.user, "feature/x", "d.c", "int d;\n");
    char gone[700], payload[1200];
    snprintf(gone, sizeof gone, "%s/moved-away.git", s_h->env->dir);
    CHECK_INT(testgit_run(s_repos.user, "remote", "set-url", "origin", gone, NULL), 0);
    s_start_merge("merge-1");
    snprintf(payload, sizeof payload, "{\"workspace\": \"%s\", \"branch\": \"feature/x\"}",
             s_repos.user);
    harness_submit(s_h, "unreachable-1", "merge-agent", NULL, 0, 2, payload);
    /* Transient: retried (a failure counted), then dead after max_attempts. */
    json_t *dead = harness_wait(s_h, "task.dead", "unreachable-1", 20000);
    CHECK(dead != NULL);
    CHECK(harness_count(s_h, "task.retry", "unreachable-1") >= 1);
    CHECK_INT(harness_count(s_h, "task.failed", "unreachable-1"), 0);
    CHECK(dead != NULL && strstr(harness_field(dead, "error"), "remote") != NULL);
    CHECK_INT(s_history_lines("unreachable-1"), 2);
    s_teardown();
}

static void test_serialised_by_group(void)
{
    /* Slow tests make each merge take a while, so unserialised merges would overlap. */
    s_setup("merge-svc-group", "[specialists.merge-agent]\ntest_command = \"sleep 1\"\n");
    testgit_push_branch(s_repos.user, "feature/a", "d.c", "int d;\n");
    testgit_push_branch(s_repos.user, "feature/b", "e.c", "int e;\n");
    testgit_push_main(s_repos.dev, "f.c", "int f;\n");
    char head[41];
    testgit_rev(s_repos.user, "HEAD", head);
    s_start_merge("merge-1");
    s_start_merge("merge-2");
    s_submit("group-a", "feature/a", s_group(), 0, NULL);
    s_submit("group-b", "feature/b", s_group(), 0, NULL);
    json_t *a = s_wait_end("group-a", 30000);
    json_t *b = s_wait_end("group-b", 30000);
    CHECK(a != NULL && strcmp(harness_field(a, "event"), "task.done") == 0);
    CHECK(b != NULL && strcmp(harness_field(b, "event"), "task.done") == 0);
    int da = harness_find(s_h, 0, "task.dispatched", "group-a");
    int db = harness_find(s_h, 0, "task.dispatched", "group-b");
    int ea = harness_find(s_h, 0, "task.done", "group-a");
    int eb = harness_find(s_h, 0, "task.done", "group-b");
    CHECK(da >= 0 && db >= 0 && ea >= 0 && eb >= 0);
    /* Whichever ran first finished before the other was dispatched. */
    if (da < db)
        CHECK(harness_int(s_h->events[ea], "seq") < harness_int(s_h->events[db], "seq"));
    else
        CHECK(harness_int(s_h->events[eb], "seq") < harness_int(s_h->events[da], "seq"));
    CHECK_INT(testgit_run(s_repos.remote, "merge-base", "--is-ancestor", "refs/heads/feature/a",
                          "refs/heads/main", NULL),
              0);
    CHECK_INT(testgit_run(s_repos.remote, "merge-base", "--is-ancestor", "refs/heads/feature/b",
                          "refs/heads/main", NULL),
              0);
    CHECK_INT(s_remote_merges(), 2);
    char main_after[41];
    s_remote_main(main_after);
    CHECK(s_user_clean(main_after));
    CHECK_INT(s_history_lines(NULL), 2);
    s_teardown();
}

static bool s_agent_started(void *arg)
{
    (void)arg;
    char *log = s_fake_log();
    bool started = log != NULL && log[0] != '\0';
    free(log);
    return started;
}

static void test_killed_mid_merge(void)
{
    s_setup("merge-svc-kill", NULL);
    s_actions("resolve-all theirs\nsay MERGE_RESULT: SUCCESS");
    setenv("FAKE_CLAUDE_DELAY_MS", "500", 1);
    testgit_push_branch(s_repos.user, "feature/x", "a.c", s_conflict_feature);
    testgit_push_main(s_repos.dev, "a.c", s_conflict_main);
    char head[41];
    testgit_rev(s_repos.user, "HEAD", head);
    pid_t first = s_start_merge("merge-1");
    s_submit("kill-1", "feature/x", s_group(), 0, NULL);
    CHECK(testenv_wait_until(s_agent_started, NULL, 15000));
    kill(first, SIGKILL);
    CHECK(testenv_wait(s_h->env, first, 5000) >= 0);
    /* The agent it started lives on as an orphan, writing into a worktree the next run
     * removes as stale; it is killed by s_teardown(). */
    s_start_merge("merge-2");
    json_t *end = s_wait_end("kill-1", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK(end != NULL && harness_int(end, "attempt") == 2);
    CHECK_STR(harness_field(end, "worker"), "merge-2");
    CHECK_INT(s_remote_merges(), 1);
    CHECK_INT(testgit_run(s_repos.remote, "show", "refs/heads/main:a.c", NULL), 0);
    CHECK(strstr(testgit_out(), "return 20;") != NULL);
    char main_after[41];
    s_remote_main(main_after);
    CHECK(s_user_clean(main_after));
    s_teardown();
}

/* pan's output (s_pan). */
static char s_pan_out[16384];

/* Runs pan with the NULL-terminated arguments, stdout and stderr into s_pan_out. */
static int s_pan(const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "/bin/sh";
    argv[argc++] = "-c";
    argv[argc++] = "exec \"$0\" \"$@\" 2>&1";
    argv[argc++] = (char *)testenv_bin("pan");
    argv[argc++] = (char *)first;
    va_list args;
    va_start(args, first);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && argc < 31)
        argv[argc++] = arg;
    va_end(args);
    argv[argc] = NULL;
    return testenv_run(s_h->env, argv, s_pan_out, sizeof s_pan_out, 20000);
}

/* True when task `id` said it is in phase `text` (a task.progress of kind "phase"). */
static bool s_phase_said(const char *id, const char *text)
{
    for (int i = 0; (i = harness_find(s_h, i, "task.progress", id)) >= 0; i++)
        if (strcmp(harness_field(s_h->events[i], "kind"), "phase") == 0 &&
            strcmp(harness_field(s_h->events[i], "text"), text) == 0)
            return true;
    return false;
}

/* A merge resolving conflicts shows that phase in pan status, pan specialists list and pan
 * task show; a reset of the busy merge-agent is refused, and with --force cancels the task
 * (saying why) and then resets the session; waking a specialist no worker serves says so. */
static void test_conflict_phase_and_reset(void)
{
    s_setup("merge-svc-phase", NULL);
    s_actions("sleep 20000\nresolve-all theirs\nsay MERGE_RESULT: SUCCESS");
    testgit_push_branch(s_repos.user, "feature/x", "a.c", s_conflict_feature);
    testgit_push_main(s_repos.dev, "a.c", s_conflict_main);
    s_start_merge("merge-1");
    s_submit("phase-1", "feature/x", s_group(), 60, "PAN-5");
    for (int waited = 0;
         waited < 20000 && !s_phase_said("phase-1", "resolving conflicts in 1 file"); waited += 20)
        harness_pump(s_h, 20);
    CHECK(s_phase_said("phase-1", "merging 'feature/x' into 'main'"));
    CHECK(s_phase_said("phase-1", "resolving conflicts in 1 file"));

    CHECK_INT(s_pan("status", NULL), 0);
    CHECK(strstr(s_pan_out, "merge-agent: resolving conflicts in 1 file (task phase-1)") != NULL);
    CHECK_INT(s_pan("specialists", "list", NULL), 0);
    CHECK(strstr(s_pan_out, "Now: resolving conflicts in 1 file (task phase-1)") != NULL);
    CHECK_INT(s_pan("task", "show", "phase-1", NULL), 0);
    CHECK(strstr(s_pan_out, "Phase:       resolving conflicts in 1 file") != NULL);
    if (strstr(s_pan_out, "Phase:") == NULL)
        fprintf(stderr, "pan task show:\n%s\n", s_pan_out);

    /* The agent's session is in use: a plain reset is refused and changes nothing. */
    char session[700];
    snprintf(session, sizeof session, "%s/specialists/merge-agent.session", s_h->env->home);
    CHECK(access(session, F_OK) == 0);
    CHECK_INT(s_pan("specialists", "reset", "merge-agent", NULL), 1);
    CHECK(strstr(s_pan_out, "merge-agent is running task phase-1") != NULL);
    CHECK(access(session, F_OK) == 0);
    /* --force: the task is cancelled with the reason, then the session goes. */
    CHECK_INT(s_pan("specialists", "reset", "merge-agent", "--force", NULL), 0);
    CHECK(strstr(s_pan_out, "merge-agent: cancelled its running task phase-1") != NULL);
    CHECK(strstr(s_pan_out, "has been reset") != NULL);
    CHECK(access(session, F_OK) != 0);
    json_t *cancelled = harness_wait(s_h, "task.cancelled", "phase-1", 5000);
    CHECK(cancelled != NULL &&
          strstr(harness_field(cancelled, "error"),
                 "cancelled by a user: pan specialists reset --force") != NULL);
    CHECK_INT(s_pan("task", "show", "phase-1", NULL), 0);
    CHECK(strstr(s_pan_out, "Phase:") == NULL);

    /* No test-agent worker: wake queues, and says nothing will take it yet. */
    CHECK_INT(s_pan("specialists", "wake", "test-agent", "--workspace", s_repos.user, "--task",
                    "run the suite", NULL),
              0);
    CHECK(strstr(s_pan_out, "no test-agent worker is running") != NULL);
    CHECK(strstr(s_pan_out, "woken up successfully") == NULL);
    s_teardown();
}

/* Submits a review-agent task for `issue` and waits until it is done. */
static void s_review(const char *id, const char *issue, const char *branch)
{
    char payload[1200];
    snprintf(payload, sizeof payload,
             "{\"workspace\": \"%s\", \"branch\": \"%s\", \"target\": \"main\", "
             "\"issueId\": \"%s\"}",
             s_repos.user, branch, issue);
    harness_submit(s_h, id, "review-agent", NULL, 0, 0, payload);
    json_t *end = s_wait_end(id, 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
}

static void test_pan_approve(void)
{
    s_setup_gate("merge-svc-approve", NULL, true);
    testgit_push_branch(s_repos.user, "feature/ok", "d.c", "int d;\n");
    char feature[41];
    testgit_rev(s_repos.user, "feature/ok", feature);
    /* A review-agent that approves PAN-7 only (the task JSON, with its payload, is on the
     * command's stdin). */
    char review_command[2048];
    snprintf(review_command, sizeof review_command,
             "if grep -q PAN-7 ; then echo 'REVIEW_RESULT: APPROVED'; "
             "else echo 'REVIEW_RESULT: CHANGES_REQUESTED'; fi; "
             "echo \"REVIEWED_COMMIT: $(git -C '%s' rev-parse feature/ok)\"; "
             "echo \"MERGE_BASE: $(git -C '%s' merge-base feature/ok main)\"",
             s_repos.user, s_repos.user);
    harness_worker(s_h, "review-1", "review-agent", review_command);
    s_review("review-7", "PAN-7", "feature/ok");
    s_review("review-8", "PAN-8", "feature/ok");

    /* Approving an issue considers reviews OF it only, exactly as stored (issue 38 §3):
     * a review whose task id is PAN-43 (of another issue) is not PAN-43's; PAN-44 has no
     * review, and the task PAN-44x is no prefix fallback; the newer review of pan-45 does not
     * stand in for PAN-45's. */
    s_review("PAN-43", "OTHER-1", "feature/ok");
    CHECK(s_pan("approve", "PAN-43", NULL) == 1);
    CHECK(strstr(s_pan_out, "no finished review found for issue 'PAN-43'") != NULL);
    s_review("PAN-44x", "OTHER-2", "feature/ok");
    CHECK(s_pan("approve", "PAN-44", NULL) == 1);
    CHECK(strstr(s_pan_out, "no finished review found for issue 'PAN-44'") != NULL);
    s_review("review-45", "PAN-45", "feature/ok");
    s_review("review-45-lower", "pan-45", "feature/ok");
    CHECK(s_pan("approve", "PAN-45", NULL) == 6);
    CHECK(strstr(s_pan_out, "review review-45 blocked") != NULL);
    CHECK(s_pan("approve", "--task", "PAN-4", NULL) == 2); /* PAN-43, PAN-44x: ambiguous */
    CHECK(strstr(s_pan_out, "ambiguous task id 'PAN-4'") != NULL);

    CHECK(s_pan("approve", "PAN-404", NULL) == 1);
    CHECK(strstr(s_pan_out, "no finished review found") != NULL);
    CHECK(s_pan("approve", "PAN-8", NULL) == 6); /* gate_blocked */
    CHECK(strstr(s_pan_out, "review review-8 blocked the merge gate (REVIEW_RESULT: "
                             "CHANGES_REQUESTED)") != NULL);
    CHECK(s_pan("task", "show", "merge-review-8", NULL) != 0);

    /* An issue matches exactly as stored: pan-7 is not PAN-7. */
    CHECK(s_pan("approve", "pan-7", NULL) == 1);
    CHECK(strstr(s_pan_out, "no finished review found for issue 'pan-7'") != NULL);
    CHECK(s_pan("approve", "PAN-7", NULL) == 0);
    CHECK(strstr(s_pan_out, "merge-review-7") != NULL);
    CHECK(s_pan("task", "show", "merge-review-7", "--json", NULL) == 0);
    json_t *task = json_loads(s_pan_out, 0, NULL);
    CHECK_STR(harness_field(task, "specialist"), "merge-agent");
    CHECK_STR(harness_field(task, "priority"), "high");
    CHECK_STR(harness_field(task, "group"), ""); /* the merge queue orders it */
    CHECK_STR(harness_field(json_object_get(task, "payload"), "branch"), "feature/ok");
    json_decref(task);
    /* Approving again (here by task id) queues nothing new; --wait waits for the merge and
     * exits with its verdict. */
    s_start_merge("merge-1");
    CHECK(s_pan("approve", "--task", "review-7", "--wait", "--wait-timeout", "30", NULL) == 0);
    CHECK(strstr(s_pan_out, "merge-review-7") != NULL);
    CHECK(strstr(s_pan_out, "merged") != NULL);
    json_t *end = s_wait_end("merge-review-7", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    char after[41];
    s_remote_main(after);
    CHECK_STR(after, feature);
    CHECK_INT(harness_count(s_h, "task.dispatched", "merge-review-7"), 1);
    CHECK_INT(s_history_lines(NULL), 1);
    s_teardown();
}

/* `disabled` means disabled: the target branch's own settings say [review] mode =
 * "disabled", and once a review-agent has reported that mode (the broker opens no
 * repository), `pan approve` merges the branch's head with no review at all. In a mode
 * that is not disabled the same approve finds no review and merges nothing, and a merge let
 * through on an old report is held by the merge-agent, which reads the mode at the target
 * commit it merges into. */
static void test_approve_disabled(void)
{
    s_setup_gate("merge-svc-approve-disabled", NULL, true);
    testgit_push_branch(s_repos.user, "feature/ok", "d.c", "int d;\n");
    char feature[41];
    testgit_rev(s_repos.user, "feature/ok", feature);
    CHECK(s_pan("approve", "PAN-20", "--workspace", s_repos.user, "--branch", "feature/ok",
                NULL) == 1);
    CHECK(strstr(s_pan_out, "no finished review found") != NULL);

    testgit_push_main(s_repos.user, ".cloister/config.toml", "[review]\nmode = \"disabled\"\n");
    /* The broker opens no repository: it learns the mode from a review-agent's report (the
     * review ends at once in that mode), and the merge-agent reads it again at the target
     * commit it merges into. */
    CHECK(s_pan("approve", "PAN-20", "--workspace", s_repos.user, "--branch", "feature/ok",
                NULL) == 1);
    CHECK(strstr(s_pan_out, "once a review-agent has reported the mode \"disabled\"") != NULL);
    harness_service(s_h, "cloister-review", "review-1", 3000, NULL);
    /* The command docs/security.md gives (and pan approve printed). */
    CHECK(s_pan("submit", "review-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--issue", "PAN-20", "--wait", "--wait-timeout", "30", NULL) == 0);
    s_start_merge("merge-1");
    CHECK(s_pan("approve", "PAN-20", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--wait", "--wait-timeout", "30", NULL) == 0);
    CHECK(strstr(s_pan_out, "Review mode is disabled for 'main'") != NULL);
    CHECK(strstr(s_pan_out, "merged") != NULL);
    CHECK_INT(testgit_run(s_repos.remote, "show", "refs/heads/main:d.c", NULL), 0);
    CHECK_STR(testgit_out(), "int d;");

    /* main turns reviews back on. The report made while it said "disabled" still lets an
     * unreviewed merge reach the merge-agent, which reads the mode at the very target
     * commit it merges into, and holds it. */
    testgit_push_main(s_repos.user, ".cloister/config.toml", "[review]\nmode = \"normal\"\n");
    testgit_push_branch(s_repos.user, "feature/late", "late.c", "int late;\n");
    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/late",
                "--issue", "PAN-20", "--id", "late", "--wait", "--wait-timeout", "30",
                NULL) != 0);
    json_t *end = s_wait_end("late", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.failed") == 0);
    if (end != NULL &&
        strstr(harness_field(end, "error"), "no review opened the gate for this merge") == NULL)
        fprintf(stderr, "the late merge: %s\n", harness_field(end, "error"));
    CHECK(end != NULL && strstr(harness_field(end, "error"),
                                "no review opened the gate for this merge") != NULL &&
          strstr(harness_field(end, "error"), "is \"normal\"") != NULL);
    CHECK(testgit_run(s_repos.remote, "cat-file", "-e", "refs/heads/main:late.c", NULL) != 0);
    s_teardown();
}

/* The issue's only review ran while the mode was disabled, and the mode is normal now:
 * pan approve says that review approves nothing, before printing "Approving review" (it
 * used to print that, then relay the broker's "issue D-2 has no finished review"). */
static void test_approve_disabled_review(void)
{
    s_setup_gate("merge-svc-approve-disabled-review", NULL, true);
    testgit_push_main(s_repos.user, ".cloister/config.toml", "[review]\nmode = \"disabled\"\n");
    testgit_push_branch(s_repos.user, "feature/d2", "d.c", "int d;\n");
    pid_t review = harness_service(s_h, "cloister-review", "review-d2", 3000, NULL);
    s_review("d2r", "D-2", "feature/d2");
    testenv_signal(review, SIGKILL);
    testgit_push_main(s_repos.user, ".cloister/config.toml", "[review]\nmode = \"normal\"\n");
    CHECK(s_pan("approve", "D-2", NULL) == 6);
    CHECK(strstr(s_pan_out, "Approving review") == NULL);
    CHECK(strstr(s_pan_out, "review d2r ran while the review mode was disabled, and approves "
                            "nothing now that it is not") != NULL);
    CHECK(s_pan("task", "show", "merge-d2r", NULL) != 0);
    s_teardown();
}

/* pan doctor --workspace checks that merges there can be pushed: a dry-run push to the
 * remote (nothing written); a remote that cannot be reached is a ✗ with git's reason. */
static void test_doctor_push(void)
{
    s_setup("merge-svc-doctor-push", NULL);
    CHECK(s_pan("doctor", "--workspace", s_repos.user, NULL) >= 0);
    if (strstr(s_pan_out, "✓ push") == NULL)
        fprintf(stderr, "pan doctor said: %s\n", s_pan_out);
    CHECK(strstr(s_pan_out, "✓ push") != NULL);
    char before[41], after[41];
    testgit_rev(s_repos.remote, "refs/heads/main", before);
    CHECK_INT(testgit_run(s_repos.remote, "for-each-ref", "--format=%(refname)", NULL), 0);
    CHECK(strstr(testgit_out(), "cloister-doctor") == NULL); /* a dry run writes nothing */
    testgit_rev(s_repos.remote, "refs/heads/main", after);
    CHECK_STR(after, before);
    CHECK_INT(testgit_run(s_repos.user, "remote", "set-url", "origin", "/nonexistent/remote.git",
                          NULL),
              0);
    CHECK(s_pan("doctor", "--workspace", s_repos.user, NULL) == 1);
    CHECK(strstr(s_pan_out, "✗ push") != NULL &&
          strstr(s_pan_out, "give the merge-agent push credentials") != NULL);
    s_teardown();
}

/* The merge history's line of `task`, as text ("" when there is none; static). */
static const char *s_history_line(const char *task)
{
    static char found[8192];
    char path[700], needle[300];
    snprintf(path, sizeof path, "%s/specialists/merge-agent/history.jsonl", s_h->env->home);
    snprintf(needle, sizeof needle, "\"task\":\"%s\"", task);
    char *text = testenv_read_file(path);
    found[0] = '\0';
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
        if (strstr(line, needle) != NULL)
            snprintf(found, sizeof found, "%s", line);
    free(text);
    return found;
}

/* A blocked review gate holds: pan approve refuses and names the review, a merge submitted
 * directly for the issue is refused by the broker, and --force merges with the override
 * recorded in the merge's payload, its events and the merge history. */
static void test_approve_override(void)
{
    s_setup_gate("merge-svc-override", NULL, true);
    testgit_push_branch(s_repos.user, "feature/ok", "d.c", "int d;\n");
    char feature[41];
    testgit_rev(s_repos.user, "feature/ok", feature);
    harness_worker(s_h, "review-1", "review-agent", "echo 'REVIEW_RESULT: CHANGES_REQUESTED'");
    s_review("review-9", "PAN-9", "feature/ok");

    CHECK(s_pan("approve", "PAN-9", NULL) == 6); /* gate_blocked */
    CHECK(strstr(s_pan_out, "review review-9 blocked the merge gate") != NULL);
    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--issue", "PAN-9", "--id", "direct-9", NULL) != 0);
    CHECK(strstr(s_pan_out, "the newest review of issue PAN-9 (task review-9) blocked the merge "
                            "gate") != NULL);
    CHECK(s_pan("task", "show", "direct-9", NULL) != 0);
    CHECK(harness_wait(s_h, "task.rejected", "direct-9", 5000) != NULL);

    CHECK(s_pan("approve", "PAN-9", "--force", NULL) == 0);
    CHECK(strstr(s_pan_out, "overridden by --force") != NULL);
    CHECK(s_pan("task", "show", "merge-review-9", "--json", NULL) == 0);
    json_t *task = json_loads(s_pan_out, 0, NULL);
    const json_t *payload = json_object_get(task, "payload");
    const json_t *override = json_object_get(payload, "override");
    CHECK(json_is_true(json_object_get(payload, "force")));
    CHECK_STR(harness_field(override, "reason"), "review gate blocked (pan approve --force)");
    CHECK_STR(harness_field(override, "review"), "review-9");
    CHECK(harness_field(override, "by")[0] != '\0');
    CHECK(strlen(harness_field(override, "at")) == strlen("2026-01-01T00:00:00Z"));
    json_decref(task);

    s_start_merge("merge-1");
    json_t *end = s_wait_end("merge-review-9", 20000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    char after[41];
    s_remote_main(after);
    CHECK_STR(after, feature);
    bool mentioned = false;
    for (int i = 0; (i = harness_find(s_h, i, "task.progress", "merge-review-9")) >= 0; i++)
        mentioned = mentioned ||
                    strcmp(harness_field(s_h->events[i], "kind"), "review.overridden") == 0;
    CHECK(mentioned);
    CHECK(strstr(s_history_line("merge-review-9"), "\"override\"") != NULL);
    CHECK(strstr(s_history_line("merge-review-9"), "review gate blocked") != NULL);
    s_teardown();
}

/* The broker merges only a commit that passed the issue's review: a merge with no issue,
 * naming no commit, or of a commit the review did not read (the branch moved since) is
 * refused with the reason; the reviewed commit goes through; --force goes through. */
static void test_gate_same_commit(void)
{
    s_setup_gate("merge-svc-same-commit", NULL, true);
    testgit_push_branch(s_repos.user, "feature/ok", "d.c", "int d;\n");
    char reviewed[41], moved[41];
    testgit_rev(s_repos.user, "feature/ok", reviewed);
    char review_command[2048];
    snprintf(review_command, sizeof review_command,
             "echo 'REVIEW_RESULT: APPROVED'; "
             "echo \"REVIEWED_COMMIT: $(git -C '%s' rev-parse feature/ok)\"; "
             "echo \"MERGE_BASE: $(git -C '%s' merge-base feature/ok main)\"",
             s_repos.user, s_repos.user);
    harness_worker(s_h, "review-1", "review-agent", review_command);
    s_review("review-5", "PAN-5", "feature/ok");

    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--id", "no-issue", NULL) != 0);
    CHECK(strstr(s_pan_out, "a merge needs an issueId") != NULL);
    CHECK(s_pan("submit", "merge-agent", "--issue", "PAN-5", "--id", "no-commit", NULL) != 0);
    CHECK(strstr(s_pan_out, "a merge must name the commit it merges (payload.commit)") != NULL);
    CHECK(s_pan("submit", "merge-agent", "--issue", "PAN-6", "--payload",
                "{\"commit\": \"0123456789012345678901234567890123456789\"}", "--id",
                "no-review", NULL) != 0);
    CHECK(strstr(s_pan_out, "issue PAN-6 has no finished review") != NULL);

    /* The branch moves after the review: its new head was never reviewed. */
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "feature/ok", NULL), 0);
    testgit_commit(s_repos.user, "e.c", "int e;\n", "unreviewed");
    CHECK_INT(testgit_run(s_repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_rev(s_repos.user, "feature/ok", moved);
    CHECK(strcmp(moved, reviewed) != 0);
    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--issue", "PAN-5", "--id", "moved", NULL) != 0);
    char expected[200];
    snprintf(expected, sizeof expected, "no review of issue PAN-5 read commit %.12s", moved);
    CHECK(strstr(s_pan_out, expected) != NULL);
    CHECK(s_pan("task", "show", "moved", NULL) != 0);

    /* The reviewed commit, named with the merge base the review read: accepted, and
     * pinned. */
    CHECK_INT(testgit_run(s_repos.user, "merge-base", reviewed, "main", NULL), 0);
    char payload[300];
    snprintf(payload, sizeof payload, "{\"commit\": \"%s\", \"merge_base\": \"%s\"}", reviewed,
             testgit_out());
    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--issue", "PAN-5", "--payload", payload, "--id", "reviewed", NULL) == 0);
    CHECK(s_pan("cancel", "reviewed", NULL) == 0);
    /* --force: accepted without a review, recorded. */
    CHECK(s_pan("submit", "merge-agent", "--workspace", s_repos.user, "--branch", "feature/ok",
                "--issue", "PAN-5", "--force", "--id", "forced", NULL) == 0);
    CHECK(s_pan("task", "show", "forced", "--json", NULL) == 0);
    json_t *task = json_loads(s_pan_out, 0, NULL);
    const json_t *forced_payload = json_object_get(task, "payload");
    CHECK_STR(harness_field(forced_payload, "commit"), moved);
    CHECK(json_object_get(forced_payload, "override") != NULL);
    json_decref(task);
    CHECK(s_pan("cancel", "forced", NULL) == 0);
    s_teardown();
}

static bool s_file_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* A merge-agent stopped (SIGSTOP) in the middle of a merge loses its lease and the task is
 * requeued. When it runs again its job is past its last cancel check, with the broker
 * restarting (nobody to send it `cancel`): the service sees its own loop did not run for
 * the broker's grace and stops the job, and the fence before the push (which keeps asking
 * until the broker is back) would refuse it too; nothing is pushed by the stale attempt,
 * and the task's next attempt merges it, once. */
static void test_stopped_worker_is_fenced(void)
{
    char started[700], go[700], config[2400];
    s_setup("merge-svc-fenced", NULL);
    snprintf(started, sizeof started, "%s/tests-started", s_h->env->dir);
    snprintf(go, sizeof go, "%s/go", s_h->env->dir);
    snprintf(config, sizeof config,
             "[broker]\nretry_backoff_ms = 50\n\n[agent]\ncommand = \"%s\"\n\n"
             "[security]\nrequire_review = false\n\n" /* the merge-agent reads it too */
             "[tests]\nsandbox = \"none\"\n\n" /* the command sees the test's files */
             "[specialists.merge-agent]\ntest_command = \"touch '%s'; "
             "while [ ! -e '%s' ]; do sleep 0.05; done\"\n",
             testenv_bin("fake-claude"), started, go);
    char path[700];
    snprintf(path, sizeof path, "%s/cloister.toml", s_h->env->home);
    CHECK(testenv_write_file(path, config) == 0);
    testgit_push_branch(s_repos.user, "feature/fence", "f.c", "int f;\n");
    char before[41], after[41];
    s_remote_main(before);

    pid_t merge = s_start_merge("merge-1");
    CHECK(merge > 0);
    s_submit("fence-1", "feature/fence", s_group(), 120, NULL);
    CHECK(testenv_wait_until(s_file_exists, started, 20000));
    CHECK(kill(merge, SIGSTOP) == 0);
    CHECK(harness_wait(s_h, "worker.lost", NULL, 10000) != NULL);
    CHECK(kill(s_h->broker, SIGTERM) == 0);
    CHECK(testenv_wait(s_h->env, s_h->broker, 10000) == 0);

    /* The job's tests end while it is stopped; it runs on with no broker to tell it. */
    CHECK(testenv_write_file(go, "") == 0);
    CHECK(kill(merge, SIGCONT) == 0);
    testenv_sleep_ms(1500);
    s_remote_main(after);
    CHECK_STR(after, before);

    s_h->broker = testbroker_start(s_h->env, atoi(HARNESS_HB), NULL);
    CHECK(s_h->broker > 0);
    json_t *end = s_wait_end("fence-1", 30000);
    CHECK(end != NULL && strcmp(harness_field(end, "event"), "task.done") == 0);
    CHECK(json_integer_value(json_object_get(end, "attempt")) >= 2);
    char feature[41];
    testgit_rev(s_repos.user, "feature/fence", feature);
    s_remote_main(after);
    CHECK_STR(after, feature);
    snprintf(path, sizeof path, "%s/merge-1.log", s_h->env->dir);
    char *log = testenv_read_file(path);
    /* Stopped by the first fence that saw it: the service's own (its loop did not run for
     * the broker's grace, so it stops the job on waking) or the one before the push. */
    CHECK(log != NULL && (strstr(log, "past the broker's grace") != NULL ||
                          strstr(log, "not pushed: stale attempt: task fence-1 is queued") != NULL));
    free(log);
    s_teardown();
}

/* Runs every scenario, or only those named on the command line. */
int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } scenarios[] = {
        {"fast_forward", test_fast_forward},
        {"local_target", test_local_target},
        {"conflict_phase_and_reset", test_conflict_phase_and_reset},
        {"conflict_resolved", test_conflict_resolved},
        {"conflict_unresolved", test_conflict_unresolved},
        {"tests_fail", test_tests_fail},
        {"agent_hangs", test_agent_hangs},
        {"hostile_branch_names", test_hostile_branch_names},
        {"remote_unreachable", test_remote_unreachable},
        {"serialised_by_group", test_serialised_by_group},
        {"killed_mid_merge", test_killed_mid_merge},
        {"pan_approve", test_pan_approve},
        {"approve_override", test_approve_override},
        {"gate_same_commit", test_gate_same_commit},
        {"approve_disabled", test_approve_disabled},
        {"approve_disabled_review", test_approve_disabled_review},
        {"doctor_push", test_doctor_push},
        {"stopped_worker_is_fenced", test_stopped_worker_is_fenced},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        bool wanted = argc < 2;
        for (int j = 1; j < argc; j++)
            wanted = wanted || strcmp(argv[j], scenarios[i].name) == 0;
        if (wanted)
            scenarios[i].run();
    }
    return check_exit_code("test_merge_service");
}
