/* test_mcp_ergonomics: what a coding agent gets from cloister-mcp's tools, against a real
 * broker and a real cloister-worker standing in for the review-agent (its review blocks):
 * request_review can wait for the review's end and verdict; a refused merge is explained
 * in the tool's terms (`force: true`, not pan's `--force`); cancel_task (with a reason) and
 * retry_task; list_tasks and recent_events give their data in the text as well; an
 * argument that would read as one of pan's options is refused; apply_patch takes a plain
 * `diff -u` / `diff -ruN` patch (time stamps, /dev/null, a removed line that starts with
 * "--" inside a hunk). */
#include "testgit.h"
#include "worker_harness.h"

static harness_t *s_h;
static char s_out[1 << 20];

/* One tools/call line. `arguments` is stolen. */
static void s_call(FILE *input, int id, const char *tool, json_t *arguments)
{
    json_t *request = json_pack("{s:s, s:i, s:s, s:{s:s, s:o}}", "jsonrpc", "2.0", "id", id,
                                "method", "tools/call", "params", "name", tool, "arguments",
                                arguments);
    char *text = json_dumps(request, JSON_COMPACT);
    fprintf(input, "%s\n", text);
    free(text);
    json_decref(request);
}

/* The result of response `id` (the responses come in order, one a line) (caller frees). */
static json_t *s_result(int id)
{
    for (const char *line = s_out; line != NULL && *line != '\0';) {
        json_t *response = json_loadb(line, strcspn(line, "\n"), 0, NULL);
        if (json_integer_value(json_object_get(response, "id")) == id) {
            json_t *result = json_incref(json_object_get(response, "result"));
            json_decref(response);
            return result;
        }
        json_decref(response);
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    fprintf(stderr, "no response %d in:\n%s\n", id, s_out);
    return NULL;
}

static const char *s_text(const json_t *result)
{
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
    return text ? text : "";
}

static bool s_is_error(const json_t *result)
{
    return json_is_true(json_object_get(result, "isError"));
}

/* The data after the text's first line, parsed (caller frees). */
static json_t *s_text_data(const json_t *result)
{
    const char *newline = strchr(s_text(result), '\n');
    return newline ? json_loads(newline + 1, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
}

static char *s_file(const char *dir, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return testenv_read_file(path);
}

/* A plain `diff -ruN old new` of four files, as GNU diff writes it: a.txt changed,
 * new.txt created and gone.txt deleted (-N: the missing side dated at the epoch, here in
 * two time zones; they used to be refused with "could not stat"), and sub/c.txt changed,
 * whose removed first line starts with "--" and whose added line with "++": inside the
 * hunk, they are not file headers. */
static const char *s_plain_diff =
    "diff -ruN old/a.txt new/a.txt\n"
    "--- old/a.txt\t2024-05-01 10:00:00.000000000 +0000\n"
    "+++ new/a.txt\t2024-05-01 10:01:00.000000000 +0000\n"
    "@@ -1,3 +1,3 @@\n"
    " one\n"
    "-two\n"
    "+TWO\n"
    " three\n"
    "diff -ruN old/gone.txt new/gone.txt\n"
    "--- old/gone.txt\t2024-05-01 10:00:00.000000000 +0000\n"
    "+++ new/gone.txt\t1969-12-31 19:00:00.000000000 -0500\n"
    "@@ -1 +0,0 @@\n"
    "-bye\n"
    "diff -ruN old/new.txt new/new.txt\n"
    "--- old/new.txt\t1970-01-01 00:00:00.000000000 +0000\n"
    "+++ new/new.txt\t2024-05-01 10:01:00.000000000 +0000\n"
    "@@ -0,0 +1 @@\n"
    "+fresh\n"
    "diff -ruN old/sub/c.txt new/sub/c.txt\n"
    "--- old/sub/c.txt\t2024-05-01 10:00:00.000000000 +0000\n"
    "+++ new/sub/c.txt\t2024-05-01 10:01:00.000000000 +0000\n"
    "@@ -1,2 +1,2 @@\n"
    "--- sql\n"
    "++++ x\n"
    " select 1;\n";

int main(void)
{
    s_h = harness_new("mcp-ergonomics");
    CHECK(s_h != NULL);
    char home[600], repo[600];
    snprintf(home, sizeof home, "%s/userhome", s_h->env->dir);
    testgit_env(home);
    snprintf(repo, sizeof repo, "%s/repo", s_h->env->dir);
    CHECK_INT(testgit_run(s_h->env->dir, "init", "-q", "-b", "main", repo, NULL), 0);
    testgit_commit(repo, "a.txt", "one\ntwo\nthree\n", "a");
    testgit_commit(repo, "sub/c.txt", "-- sql\nselect 1;\n", "c");
    testgit_commit(repo, "gone.txt", "bye\n", "gone");
    CHECK_INT(testgit_run(repo, "checkout", "-q", "-b", "feature", NULL), 0);
    testgit_commit(repo, "a.txt", "one\n2\nthree\n", "feature");
    CHECK_INT(testgit_run(repo, "checkout", "-q", "main", NULL), 0);
    /* A review-agent whose reviews block. */
    harness_worker(s_h, "review-1", "review-agent",
                   "echo 'REVIEW_RESULT: CHANGES_REQUESTED'; echo 'GATE: blocked'");

    char input_path[600];
    snprintf(input_path, sizeof input_path, "%s/input.jsonl", s_h->env->dir);
    FILE *input = fopen(input_path, "w");
    CHECK(input != NULL);
    fprintf(input, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    s_call(input, 2, "request_review",
           json_pack("{s:s, s:s, s:s, s:b, s:i}", "workspace", repo, "branch", "feature", "issue",
                     "ERG-1", "wait", 1, "timeout_s", 30));
    s_call(input, 3, "request_merge", json_pack("{s:s}", "review", "ERG-1"));
    s_call(input, 4, "submit_task",
           json_pack("{s:s, s:s, s:s}", "specialist", "other-agent", "id", "erg-q", "title",
                     "waits for nobody"));
    s_call(input, 5, "cancel_task", json_pack("{s:s, s:s}", "id", "erg-q", "reason",
                                              "not needed any more"));
    s_call(input, 6, "task_status", json_pack("{s:s}", "id", "erg-q"));
    s_call(input, 7, "retry_task", json_pack("{s:s}", "id", "erg-q"));
    s_call(input, 8, "list_tasks", json_pack("{s:s}", "issue", "ERG-1"));
    s_call(input, 9, "recent_events", json_pack("{s:s}", "task", "erg-q"));
    s_call(input, 10, "apply_patch", json_pack("{s:s, s:s}", "workspace", repo, "diff",
                                               s_plain_diff));
    s_call(input, 11, "request_merge", json_pack("{s:s, s:b}", "review", "--force", "force", 0));
    s_call(input, 12, "wait_task", json_pack("{s:s, s:i}", "id", "--chain", "timeout_s", 1));
    /* `diff -u a.txt.orig a.txt`: one file, named as it is. */
    s_call(input, 13, "apply_patch",
           json_pack("{s:s, s:s}", "workspace", repo, "diff",
                     "--- a.txt.orig\t2024-05-02 09:00:00.000000000 +0000\n"
                     "+++ a.txt\t2024-05-02 09:01:00.000000000 +0000\n"
                     "@@ -1,3 +1,3 @@\n one\n-TWO\n+two again\n three\n"));
    /* `diff -ruN old new` that only adds a file, in a directory that does not exist yet:
     * nothing in the tree tells how many directories to strip; the two trees' names do. */
    s_call(input, 14, "apply_patch",
           json_pack("{s:s, s:s}", "workspace", repo, "diff",
                     "diff -ruN old/docs/added.txt new/docs/added.txt\n"
                     "--- old/docs/added.txt\t1970-01-01 00:00:00.000000000 +0000\n"
                     "+++ new/docs/added.txt\t2024-05-02 09:01:00.000000000 +0000\n"
                     "@@ -0,0 +1,2 @@\n+added\n+here\n"));
    fclose(input);
    char script[700];
    snprintf(script, sizeof script, "exec \"$0\" < '%s' 2>/dev/null", input_path);
    char *argv[] = {"/bin/sh", "-c", script, (char *)testenv_bin("cloister-mcp"), NULL};
    CHECK_INT(testenv_run(s_h->env, argv, s_out, sizeof s_out, 120000), 0);

    /* The new tools are listed. */
    json_t *list = s_result(1);
    int found = 0;
    size_t i;
    json_t *tool;
    json_array_foreach(json_object_get(list, "tools"), i, tool)
    {
        const char *name = harness_field(tool, "name");
        found += strcmp(name, "cancel_task") == 0 || strcmp(name, "retry_task") == 0;
    }
    CHECK_INT(found, 2);
    json_decref(list);

    /* request_review waited: the review ended, its verdict is there. */
    json_t *review = s_result(2);
    CHECK(review != NULL && !s_is_error(review));
    const json_t *structured = json_object_get(review, "structuredContent");
    CHECK_STR(harness_field(structured, "verdict"), "gate_blocked");
    CHECK_STR(harness_field(json_object_get(structured, "task"), "state"), "done");
    CHECK(strstr(s_text(review), "verdict gate_blocked") != NULL);
    json_decref(review);

    /* The refused merge, in the tool's own words. */
    json_t *merge = s_result(3);
    CHECK(merge != NULL && s_is_error(merge));
    CHECK(strstr(s_text(merge), "`force: true`") != NULL);
    CHECK(strstr(s_text(merge), "--force") == NULL);
    CHECK(strstr(s_text(merge), "usage:") == NULL && strncmp(s_text(merge), "pan: ", 5) != 0);
    if (strstr(s_text(merge), "`force: true`") == NULL)
        fprintf(stderr, "request_merge said: %s\n", s_text(merge));
    json_decref(merge);

    /* cancel_task with its reason, then retry_task. */
    json_t *cancelled = s_result(5);
    CHECK(cancelled != NULL && !s_is_error(cancelled));
    CHECK_STR(harness_field(json_object_get(json_object_get(cancelled, "structuredContent"),
                                            "task"),
                            "state"),
              "cancelled");
    json_decref(cancelled);
    json_t *status = s_result(6);
    CHECK(strstr(s_text(status), "cancelled by a user: not needed any more") != NULL);
    json_decref(status);
    json_t *retried = s_result(7);
    CHECK(retried != NULL && !s_is_error(retried));
    CHECK_STR(harness_field(json_object_get(json_object_get(retried, "structuredContent"), "task"),
                            "state"),
              "queued");
    json_decref(retried);

    /* The listings' data is in their text. */
    json_t *tasks = s_result(8);
    json_t *listed = s_text_data(tasks);
    CHECK(json_array_size(listed) == 1);
    CHECK_STR(harness_field(json_array_get(listed, 0), "specialist"), "review-agent");
    json_decref(listed);
    json_decref(tasks);
    json_t *events = s_result(9);
    json_t *shown = s_text_data(events);
    bool saw_cancel = false;
    json_t *event;
    json_array_foreach(shown, i, event) saw_cancel =
        saw_cancel || strcmp(harness_field(event, "event"), "task.cancelled") == 0;
    CHECK(saw_cancel);
    json_decref(shown);
    json_decref(events);

    /* The plain patch applied, all three files. */
    json_t *patched = s_result(10);
    CHECK(patched != NULL && !s_is_error(patched));
    if (patched != NULL && s_is_error(patched))
        fprintf(stderr, "apply_patch said: %s\n", s_text(patched));
    json_decref(patched);
    patched = s_result(13);
    CHECK(patched != NULL && !s_is_error(patched));
    json_decref(patched);
    patched = s_result(14);
    CHECK(patched != NULL && !s_is_error(patched));
    if (patched != NULL && s_is_error(patched))
        fprintf(stderr, "apply_patch said: %s\n", s_text(patched));
    json_decref(patched);
    char *added = s_file(repo, "docs/added.txt"), *gone = s_file(repo, "gone.txt");
    CHECK(added != NULL && strcmp(added, "added\nhere\n") == 0);
    CHECK(gone == NULL);
    free(added);
    free(gone);
    char *a = s_file(repo, "a.txt"), *fresh = s_file(repo, "new.txt");
    char *c = s_file(repo, "sub/c.txt");
    CHECK(a != NULL && strcmp(a, "one\ntwo again\nthree\n") == 0);
    CHECK(fresh != NULL && strcmp(fresh, "fresh\n") == 0);
    CHECK(c != NULL && strcmp(c, "+++ x\nselect 1;\n") == 0);
    free(a);
    free(fresh);
    free(c);

    /* An id that pan would read as one of its options is refused, not passed on. */
    json_t *injected = s_result(11);
    CHECK(injected != NULL && s_is_error(injected) &&
          strstr(s_text(injected), "'review' must be an issue or task id") != NULL);
    json_decref(injected);
    json_t *wait_injected = s_result(12);
    CHECK(wait_injected != NULL && s_is_error(wait_injected) &&
          strstr(s_text(wait_injected), "'id' must be a task id") != NULL);
    json_decref(wait_injected);

    harness_destroy(&s_h);
    return check_exit_code("test_mcp_ergonomics");
}
