/* pan task list, pan dead, pan retry --all-dead: tasks of every state, newest first, with
 * filters and paging, as a table and as JSON; bad filters are refused with the reason. */
#include "pan_harness.h"
#include "worker_harness.h"

static char s_out[PAN_OUT_SIZE];

/* The ids of a --json listing in s_out, joined by spaces, into `ids`. */
static void s_ids(char *ids, size_t size)
{
    json_t *tasks = json_loads(s_out, 0, NULL);
    if (!json_is_array(tasks))
        fprintf(stderr, "not a JSON array: %s\n", s_out);
    CHECK(json_is_array(tasks));
    ids[0] = '\0';
    size_t index;
    json_t *task;
    json_array_foreach(tasks, index, task)
    {
        size_t len = strlen(ids);
        snprintf(ids + len, size - len, "%s%s", len ? " " : "", harness_field(task, "id"));
    }
    json_decref(tasks);
}

int main(void)
{
    harness_t *h = harness_new("pan-list");
    CHECK(h != NULL);
    harness_worker(h, "w-ok", "echo-agent", "echo 'VERDICT: fine'");

    /* Submitted one after the other, so creation order is submission order. */
    const char *ok[] = {"ok-1", "ok-2", "ok-3"};
    for (int i = 0; i < 3; i++) {
        harness_submit(h, ok[i], "echo-agent", "normal", 0, 0, NULL);
        CHECK(harness_wait(h, "task.done", ok[i], 10000) != NULL);
    }
    /* Dead: the only attempt's worker is lost (killed), so the broker gives up. */
    const char *bad[] = {"bad-1", "bad-2"};
    const char *bad_workers[] = {"w-bad-1", "w-bad-2"};
    for (int i = 0; i < 2; i++) {
        pid_t worker = harness_worker(h, bad_workers[i], "broken-agent", "sleep 30");
        harness_submit(h, bad[i], "broken-agent", "normal", 0, 1, NULL);
        CHECK(harness_wait(h, "task.dispatched", bad[i], 10000) != NULL);
        CHECK(kill(worker, SIGKILL) == 0);
        CHECK(harness_wait(h, "task.dead", bad[i], 10000) != NULL);
    }
    CHECK_INT(harness_pan_all(h->env, s_out, "submit", "review-agent", "--workspace", h->env->dir, "--id", "waiting-1", "--issue", "ISS-7", "--title",
                    "two\nlines <b>", NULL),
              0);

    char ids[1024];
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "waiting-1 bad-2 bad-1 ok-3 ok-2 ok-1");

    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "dead", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "bad-2 bad-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--specialist", "echo_agent", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "ok-3 ok-2 ok-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--issue", "ISS-7", "--state", "queued", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "waiting-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--since", "1h", "--state", "done", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "ok-3 ok-2 ok-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--since", "0s", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "");

    /* Paging: a full page says how to go on, and --before goes on from its last task. */
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--limit", "2", NULL), 0);
    CHECK(strstr(s_out, "more may follow: add --before bad-2") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--limit", "2", "--before", "bad-2", "--json", NULL), 0);
    CHECK(strstr(s_out, "more may follow: add --before ok-3") != NULL);
    *strstr(s_out, "pan: more") = '\0';
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "bad-1 ok-3");

    /* The table: a header, one line per task, untrusted titles kept on their line. */
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "queued", NULL), 0);
    CHECK(strncmp(s_out, "ID ", 3) == 0 && strstr(s_out, "STATE") != NULL);
    CHECK(strstr(s_out, "waiting-1") != NULL && strstr(s_out, "two\\nlines <b>") != NULL);
    CHECK(strstr(s_out, "review-agent") != NULL && strstr(s_out, "0/3") != NULL);

    /* Refusals: exit 1 with the broker's reason, 2 for pan's own usage errors. */
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "finished", NULL), 1);
    CHECK(strstr(s_out, "pan: list_tasks: unknown state 'finished'") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--specialist", "nobody", NULL), 1);
    CHECK(strstr(s_out, "unknown specialist 'nobody'") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--before", "no-such-task", NULL), 1);
    CHECK(strstr(s_out, "before: no task 'no-such-task'") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--since", "5 minutes", NULL), 2);
    CHECK(strstr(s_out, "--since takes a duration") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--limit", "0", NULL), 2);
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--colour", NULL), 2);

    /* pan dead, then every dead task of a specialist back to its queue. */
    CHECK_INT(harness_pan_all(h->env, s_out, "dead", "--json", NULL), 0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "bad-2 bad-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "dead", "--state", "done", NULL), 2);
    /* pan status: the broker's counts since its start on one line, the stored counts
     * (done, failed and dead, kept across restarts) on their own: never mixed. */
    CHECK_INT(harness_pan_all(h->env, s_out, "status", NULL), 0);
    if (strstr(s_out, "submitted 6,") == NULL)
        fprintf(stderr, "%s\n", s_out);
    CHECK(strstr(s_out, "Since the broker started: submitted 6, completed ") != NULL);
    CHECK(strstr(s_out, "\nIn all (kept across restarts): done 3, failed 0, died 2\n") != NULL);
    const char *since = strstr(s_out, "Since the broker started");
    CHECK(since != NULL && strchr(since, '\n') != NULL);
    CHECK(strstr(since, "done") == NULL || strstr(since, "done") > strchr(since, '\n'));
    CHECK_INT(harness_pan_all(h->env, s_out, "retry", "--all-dead", "--specialist", "echo-agent", NULL), 0);
    CHECK(strstr(s_out, "Requeued 0 dead tasks") != NULL);
    CHECK_INT(harness_pan_all(h->env, s_out, "retry", "--specialist", "broken-agent", "--all-dead", "--json", NULL), 0);
    json_t *summary = json_loads(s_out, 0, NULL);
    CHECK(summary != NULL);
    CHECK_INT((int)json_integer_value(json_object_get(summary, "retried")), 2);
    CHECK_INT((int)json_integer_value(json_object_get(summary, "failed")), 0);
    json_decref(summary);
    /* No worker of theirs is left, so they stay queued. */
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--specialist", "broken-agent", "--state", "queued", "--json",
                    NULL),
              0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "bad-2 bad-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "dead", NULL), 0);
    CHECK(strstr(s_out, "(no tasks)") != NULL);

    /* Queued tasks of several queues and priorities come newest first, whatever their
     * priority (the broker merges its queues' lists from their newest end), and page on. */
    const char *queued[][3] = {{"q-1", "test-agent", "low"},     {"q-2", "review-agent", "urgent"},
                               {"q-3", "test-agent", "high"},    {"q-4", "test-agent", "low"},
                               {"q-5", "review-agent", "normal"}};
    for (size_t i = 0; i < sizeof queued / sizeof queued[0]; i++) {
        CHECK_INT(harness_pan_all(h->env, s_out, "submit", queued[i][1], "--workspace", h->env->dir, "--id", queued[i][0],
                                  "--priority", queued[i][2], "--issue", "ISS-Q", NULL),
                  0);
        testenv_sleep_ms(5); /* a distinct creation time each */
    }
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "queued", "--issue",
                              "ISS-Q", "--limit", "3", "--json", NULL),
              0);
    CHECK(strstr(s_out, "pan: more may follow: add --before q-3") != NULL);
    *strstr(s_out, "pan: more") = '\0';
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "q-5 q-4 q-3");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "queued", "--issue",
                              "ISS-Q", "--before", "q-3", "--json", NULL),
              0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "q-2 q-1");
    CHECK_INT(harness_pan_all(h->env, s_out, "task", "list", "--state", "queued", "--specialist",
                              "test-agent", "--issue", "ISS-Q", "--json", NULL),
              0);
    s_ids(ids, sizeof ids);
    CHECK_STR(ids, "q-4 q-3 q-1");

    harness_destroy(&h);
    return check_exit_code("test_pan_list");
}
