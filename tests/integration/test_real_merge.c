/* The merge-agent with a real agent CLI against the scripted model
 * (tests/model/scenarios/merge.json): a conflict resolved by real tool calls in the
 * service's worktree (Claude Code: Read and Write; Codex: a shell `cat` and apply_patch;
 * Gemini: read_file and write_file), then tested and pushed; a second conflicting merge
 * resumes the same session and resolves with an edit. Checked on both sides: what reached
 * the remote, and what the CLI sent the model (the tool results it got back). Run for
 * Claude Code, Codex and Gemini. */
#include "real_harness.h"

static const char *s_main_a = "int a(void)\n{\n    return 10;\n}\n";
static const char *s_feature_a = "int a(void)\n{\n    return 20;\n}\n";

/* PUSHes a merge-agent submit of `branch` into main. */
static void s_submit(real_env_t *r, const char *id, const char *branch, const char *issue)
{
    char payload[2048];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"%s\",\"target\":\"main\",\"issueId\":\"%s\"}",
             r->repos.user, branch, issue);
    harness_submit(r->h, id, "merge-agent", "normal", 120, 1, payload);
}

/* The file `path` on the remote's main. */
static const char *s_remote_file(real_env_t *r, const char *path)
{
    char spec[256];
    snprintf(spec, sizeof spec, "refs/heads/main:%s", path);
    CHECK_INT(testgit_run(r->repos.remote, "show", spec, NULL), 0);
    return testgit_out();
}

int main(void)
{
    real_env_t *r = real_env_new(
        "real-merge", "merge.json",
        "[specialists.merge-agent]\n"
        "test_command = \"! grep -rq '<<<<<<<' --include='*.c' . && echo '1 passed'\"\n");
    testgit_push_branch(r->repos.user, "feature/x", "a.c", s_feature_a);
    testgit_push_main(r->repos.dev, "a.c", s_main_a);
    harness_service(r->h, "cloister-merge", "merge-1", 3000, NULL);

    /* 1. Read, Write, the tests, the push. */
    s_submit(r, "merge-1", "feature/x", "PAN-1");
    json_t *end = real_wait_end(r, "merge-1", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_STR(real_result_str(end, "MERGE_RESULT"), "SUCCESS");
    CHECK_STR(real_result_str(end, "strategy"), "resolved");
    CHECK_STR(real_result_str(end, "TESTS"), "PASS");
    CHECK(strstr(real_result_str(end, "NOTES"), "(Write)") != NULL);
    CHECK(strstr(s_remote_file(r, "a.c"), "return 20;") != NULL);
    CHECK(strstr(s_remote_file(r, "a.c"), "<<<<<<<") == NULL);
    CHECK(real_progress_has(r, "merge-1", real_progress_tool("write")));

    json_t *requests = testmodel_requests_of(&r->model, "merge-write");
    CHECK_INT(json_array_size(requests), 3);
    CHECK_STR(real_served_action(requests, 0), "read");
    CHECK_STR(real_served_action(requests, 1), "write");
    bool is_error = true;
    const char *read = real_tool_result(requests, 0, &is_error);
    CHECK(!is_error && read != NULL && strstr(read, "<<<<<<<") != NULL); /* it read the conflict */
    const char *wrote = real_tool_result(requests, 1, &is_error);
    CHECK(!is_error && wrote != NULL && strstr(wrote, "a.c") != NULL);
    /* The CLI got the merge prompt; Claude Code offered its file tools. */
    const json_t *first = json_array_get(requests, 0);
    CHECK(strstr(harness_field(first, "prompt"), "feature/x") != NULL);
    char *tools = json_dumps(json_object_get(first, "tools"), 0);
    CHECK(tools != NULL);
    CHECK(!real_cli_is("claude") ||
          (strstr(tools, "\"Edit\"") != NULL && strstr(tools, "\"Write\"") != NULL));
    free(tools);
    json_decref(requests);
    json_t *session = real_session(r, "merge-agent");
    char first_session[64];
    snprintf(first_session, sizeof first_session, "%s", harness_field(session, "session_id"));
    json_decref(session);

    /* 2. Another conflict, another branch: the same session, resumed; an Edit this time. */
    CHECK_INT(testgit_run(r->repos.user, "fetch", "-q", "origin", NULL), 0);
    CHECK_INT(testgit_run(r->repos.user, "checkout", "-q", "-b", "feature/y", "origin/main", NULL),
              0);
    testgit_commit(r->repos.user, "b.c", "int b(void)\n{\n    return 30;\n}\n", "feature y");
    CHECK_INT(testgit_run(r->repos.user, "push", "-q", "origin", "feature/y", NULL), 0);
    CHECK_INT(testgit_run(r->repos.user, "checkout", "-q", "main", NULL), 0);
    testgit_push_main(r->repos.dev, "b.c", "int b(void)\n{\n    return 40;\n}\n");
    s_submit(r, "merge-2", "feature/y", "PAN-2");
    end = real_wait_end(r, "merge-2", 90000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    CHECK_STR(real_result_str(end, "MERGE_RESULT"), "SUCCESS");
    CHECK(strstr(real_result_str(end, "NOTES"), "(Edit)") != NULL);
    CHECK(strstr(s_remote_file(r, "b.c"), "return 30;") != NULL);
    CHECK(json_is_false(json_object_get(json_object_get(end, "result"), "session_fresh")));
    CHECK_STR(real_result_str(end, "session_id"), first_session);

    requests = testmodel_requests_of(&r->model, "merge-edit");
    CHECK_INT(json_array_size(requests), 3);
    CHECK_STR(real_served_action(requests, 1), "edit");
    const char *edited = real_tool_result(requests, 1, &is_error);
    CHECK(!is_error && edited != NULL && strstr(edited, real_edit_said()) != NULL);
    /* The model saw the first merge's conversation: the session was resumed, not restarted. */
    const json_t *resumed = json_array_get(requests, 0);
    CHECK_INT(json_array_size(json_object_get(resumed, "earlier_prompts")), 1);
    CHECK(strstr(json_string_value(json_array_get(json_object_get(resumed, "earlier_prompts"), 0)),
                 "merge-agent") != NULL);
    if (!real_cli_is("gemini")) /* its requests name no session */
        CHECK_STR(harness_field(resumed, "session"), first_session);
    json_decref(requests);

    real_env_destroy(&r);
    return check_exit_code("test_real_merge");
}
