/* test_handoff_context: what a chained task's agent is told. A real broker, a real
 * cloister-review with fake-claude as its agent (calling cloister-mcp as the real CLI
 * does), a real git repository. A review of issue PAN-7 blocks with a finding and hands
 * the work on with handoff_to (message, reason, context); the chained review's agent must
 * start with "[System] Handoff from review-agent (task ...) to review-agent: <context>",
 * with the reason and the message, and its prior attempts must carry what the first review
 * left behind: its NOTES, the files it read and its findings. `pan task show` tells the
 * hand-off on both sides. */
#include "review_harness.h"

static char s_out[1 << 16];

/* The fake agent's stdin (the prompt) of invocation `index`, or "" (static copy). */
static const char *s_prompt(review_env_t *r, int index)
{
    static char prompt[1 << 16];
    json_t *lines[16];
    int n = review_log(r, lines, 16);
    prompt[0] = '\0';
    if (index < n)
        snprintf(prompt, sizeof prompt, "%s", harness_field(lines[index], "stdin"));
    for (int i = 0; i < n; i++)
        json_decref(lines[i]);
    return prompt;
}

/* The task.queued event of the task chained from `parent`, or NULL. */
static json_t *s_chained(review_env_t *r, const char *parent)
{
    for (int waited = 0; waited < 10000; waited += 20) {
        for (int i = 0; i < r->h->nevents; i++) {
            json_t *event = r->h->events[i];
            if (strcmp(harness_field(event, "event"), "task.queued") == 0 &&
                strcmp(harness_field(event, "parent"), parent) == 0)
                return event;
        }
        harness_pump(r->h, 20);
    }
    return NULL;
}

int main(void)
{
    review_env_t *r = review_env_new("handoff-context");
    CHECK(r != NULL);
    /* The first run hands off, then swaps in the second script for the chained review. */
    char first[600], second[600], script[4096];
    snprintf(first, sizeof first, "%s/first.actions", r->h->env->dir);
    snprintf(second, sizeof second, "%s/second.actions", r->h->env->dir);
    CHECK(testenv_write_file(second, "say REVIEW_RESULT: APPROVED\nsay FINDINGS: none\n") == 0);
    snprintf(script, sizeof script,
             "mcp cloister handoff_to {\"specialist\": \"review-agent\", \"message\": \"check "
             "the query builder again\", \"reason\": \"security doubts\", \"context\": \"the "
             "query concatenates the name into SQL; a prepared statement was tried\", "
             "\"workspace\": \"%s\", \"branch\": \"feature\", \"issue\": \"PAN-7\"}\n"
             "run /bin/cp %s %s\n"
             "say REVIEW_RESULT: CHANGES_REQUESTED\n"
             "say FINDINGS:\n"
             "say - error: src/db.c:1 the query concatenates user input\n"
             "say NOTES: tried the prepared statement path\n",
             r->repo, second, first);
    CHECK(testenv_write_file(first, script) == 0);
    setenv("FAKE_CLAUDE_ACTIONS", first, 1);
    pid_t reviewer = review_start(r, "review-handoff");
    CHECK(reviewer > 0);

    review_submit(r, "first", 60, NULL);
    json_t *done = harness_wait(r->h, "task.done", "first", 30000);
    CHECK(done != NULL);
    CHECK_STR(harness_field(review_result(done), "GATE"), "blocked");
    json_t *queued = s_chained(r, "first");
    CHECK(queued != NULL);
    char next[128];
    snprintf(next, sizeof next, "%s", harness_field(queued, "task"));
    CHECK(harness_wait(r->h, "task.done", next, 30000) != NULL);

    /* The chained review's agent starts with the hand-off. */
    const char *prompt = s_prompt(r, 1);
    CHECK(strncmp(prompt, "[System] Handoff from review-agent (task first) to review-agent: ",
                  strlen("[System] Handoff from review-agent (task first) to review-agent: ")) ==
          0);
    CHECK(strstr(prompt, "the query concatenates the name into SQL; a prepared statement was "
                         "tried") != NULL);
    CHECK(strstr(prompt, "Reason: security doubts\n") != NULL);
    CHECK(strstr(prompt, "check the query builder again") != NULL);
    /* Its prior attempts: the first review's notes, files and findings. */
    CHECK(strstr(prompt, "- attempt 1 of first: done") != NULL);
    CHECK(strstr(prompt, "  notes: tried the prepared statement path") != NULL);
    CHECK(strstr(prompt, "  files: src/db.c") != NULL);
    CHECK(strstr(prompt, "  - error src/db.c:1 the query concatenates user input") != NULL);
    if (strncmp(prompt, "[System]", 8) != 0 || strstr(prompt, "  notes:") == NULL)
        fprintf(stderr, "the chained review's prompt:\n%s\n", prompt);
    /* The first review's own prompt had neither. */
    CHECK(strstr(s_prompt(r, 0), "[System] Handoff") == NULL);

    /* pan task show: the hand-off on both sides. */
    char *show_next[] = {(char *)testenv_bin("pan"), "task", "show", next, NULL};
    CHECK_INT(testenv_run(r->h->env, show_next, s_out, sizeof s_out, 10000), 0);
    CHECK(strstr(s_out, "Handed from: review-agent (task first): security doubts") != NULL);
    char *show_first[] = {(char *)testenv_bin("pan"), "task", "show", "first", NULL};
    CHECK_INT(testenv_run(r->h->env, show_first, s_out, sizeof s_out, 10000), 0);
    char line[256];
    snprintf(line, sizeof line, "Handed to:   review-agent as task %s: security doubts", next);
    CHECK(strstr(s_out, line) != NULL);
    /* And the parent's events say it. */
    bool said = false;
    for (int i = 0; (i = harness_find(r->h, i, "task.progress", "first")) >= 0; i++)
        said = said || (strstr(harness_field(r->h->events[i], "text"), "handed off to "
                                                                         "review-agent") &&
                        strstr(harness_field(r->h->events[i], "text"), ": security doubts"));
    CHECK(said);

    CHECK(review_stop(r, reviewer) == 0);
    review_env_destroy(&r);
    return check_exit_code("test_handoff_context");
}
