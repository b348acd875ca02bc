/* An agent that ignores SIGTERM, in a service started with a short --grace-ms: the agent
 * is killed within the grace (half of it after SIGTERM), the task ends as timed out, and the
 * service keeps serving instead of giving itself up as stuck (exit 3). */
#include "review_harness.h"

#include <sys/stat.h>

int main(void)
{
    review_env_t *r = review_env_new("review-grace");
    CHECK(r != NULL);
    if (r == NULL)
        return check_exit_code("test_review_grace");
    char script[600], config[700], text[2048];
    snprintf(script, sizeof script, "%s/stubborn-agent.sh", r->h->env->dir);
    CHECK(testenv_write_file(script, "#!/bin/sh\ntrap '' TERM\nexec sleep 1000\n") == 0);
    CHECK(chmod(script, 0755) == 0);
    snprintf(config, sizeof config, "%s/cloister.toml", r->h->env->home);
    snprintf(text, sizeof text, "[broker]\nretry_backoff_ms = 50\n\n[agent]\ncommand = \"%s\"\n",
             script);
    CHECK(testenv_write_file(config, text) == 0);

    char bind[600];
    snprintf(bind, sizeof bind, "ipc://%s/grace.sock", r->h->env->dir);
    char *argv[] = {(char *)testenv_bin("cloister-review"), "--heartbeat-ms", HARNESS_HB,
                    "--worker-id", "review-grace", "--bind", bind, "--grace-ms", "800",
                    "--workdir", r->workdir, NULL};
    pid_t svc = testenv_spawn(r->h->env, "review-grace", argv);
    CHECK(harness_wait_joined(r->h, "review-grace"));
    review_submit(r, "stubborn-1", 1, NULL);
    json_t *failed = harness_wait(r->h, "task.failed", "stubborn-1", 15000);
    CHECK(failed != NULL);
    if (failed != NULL)
        CHECK(strstr(harness_field(failed, "error"), "timed out") != NULL);
    /* Still serving: not exited, and it takes the next task. */
    CHECK_INT(testenv_wait(r->h->env, svc, 200), -1);
    review_submit(r, "stubborn-2", 1, NULL);
    CHECK(harness_wait(r->h, "task.dispatched", "stubborn-2", 10000) != NULL);
    CHECK(review_stop(r, svc) >= 0);
    review_env_destroy(&r);
    return check_exit_code("test_review_grace");
}
