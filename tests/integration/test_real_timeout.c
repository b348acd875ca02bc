/* A task timeout with a real agent CLI against the scripted model
 * (tests/model/scenarios/timeout.json); run for Claude Code, Codex (a Node launcher
 * starting its native binary, which runs commands in bubblewrap) and Gemini (Node, which
 * relaunches itself). The review-agent's agent runs a command that never ends with its
 * shell tool and waits for it; at the task's timeout the service stops the agent's process
 * tree — the CLI, the command its tool started, the MCP server it was given — and nothing
 * of it outlives the task; the service then takes the next task. */
#include "real_harness.h"

int main(void)
{
    /* Bash granted: the CLI would ask before running the command, and refuse in -p. */
    real_env_t *r = real_env_new("real-timeout", "timeout.json", "allowed_tools = [\"Bash\"]\n");
    testgit_push_branch(r->repos.user, "feature/t", "a.c", "int a(void) { return 4; }\n");
    pid_t svc = harness_service(r->h, "cloister-review", "review-1", 3000, NULL);
    char payload[1024];
    snprintf(payload, sizeof payload,
             "{\"workspace\":\"%s\",\"branch\":\"feature/t\",\"target\":\"main\"}",
             r->repos.user);
    harness_submit(r->h, "slow-1", "review-agent", "normal", 5, 1, payload);

    /* The agent's Bash call is under way. */
    bool running = false;
    for (int waited = 0; !running && waited < 30000; waited += 50) {
        harness_pump(r->h, 50);
        running = testenv_process_running("tail -s 63.917");
    }
    CHECK(running);
    int64_t start = clock_now_ms();
    json_t *end = real_wait_end(r, "slow-1", 30000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.failed");
    CHECK(strstr(harness_field(end, "error"), "timed out after 5 s") != NULL);
    CHECK(clock_now_ms() - start < 10000);
    /* Nothing the agent started is left: not the CLI, its tool's command, nor cloister-mcp. */
    CHECK(testenv_wait_until(testenv_process_gone, "tail -s 63.917", 5000));
    CHECK_INT(real_leftovers(r, &svc, 1), 0);

    /* The service goes on. */
    testmodel_write(&r->model, "{\"rules\": [{\"name\": \"ok\", \"steps\": [{\"text\": "
                               "\"REVIEW_RESULT: APPROVED\\nFINDINGS: none\"}]}]}");
    harness_submit(r->h, "slow-2", "review-agent", "normal", 60, 1, payload);
    end = real_wait_end(r, "slow-2", 60000);
    CHECK(end != NULL);
    CHECK_STR(harness_field(end, "event"), "task.done");
    json_t *served = testmodel_requests_of(&r->model, "ok");
    CHECK_INT(json_array_size(served), 1);
    json_decref(served);

    real_env_destroy(&r);
    return check_exit_code("test_real_timeout");
}
