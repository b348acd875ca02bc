/* cloister-worker takes the ack a task carries (PROTOCOL.md, `ack`: its hello says
 * `acks_in_task`, and the broker then acknowledges a result inside the worker's next task).
 * A worker that ignored it would keep every such result pending and resend it at each
 * heartbeat until a plain ack came. Ten tasks queued at once run one after the other on one
 * worker, so nine of their acks ride on the next task; the worker must not resend those
 * results. (A resend can still happen when a heartbeat falls between a result and its ack,
 * rarely; an ignored carried ack makes at least nine.) */
#include "worker_harness.h"

#define TASKS 10

static long s_results_resent(const char *log_text)
{
    const char *line = log_text ? strstr(log_text, "results resent") : NULL;
    if (line == NULL)
        return -1;
    /* "..., %llu results resent": the number just before. */
    const char *digits = line - 1;
    while (digits > log_text && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    return strtol(digits, NULL, 10);
}

int main(void)
{
    harness_t *h = harness_new("worker-acks");
    if (h == NULL)
        return 1;
    pid_t worker = harness_worker(h, "acks-w1", "acks-agent", "cat > /dev/null");
    for (int i = 0; i < TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "acks-%d", i);
        harness_submit(h, id, "acks-agent", "normal", 0, 0, NULL);
    }
    for (int i = 0; i < TASKS; i++) {
        char id[32];
        snprintf(id, sizeof id, "acks-%d", i);
        CHECK(harness_wait(h, "task.done", id, 10000) != NULL);
    }
    /* Five heartbeats: a result still pending would have been resent by now. */
    harness_pump(h, 500);
    testenv_signal(worker, SIGTERM);
    CHECK_INT(testenv_wait(h->env, worker, 5000), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/acks-w1.log", h->env->dir);
    char *log_text = testenv_read_file(path);
    long resent = s_results_resent(log_text);
    if (resent >= TASKS / 2)
        fprintf(stderr, "the worker resent %ld results\n", resent);
    CHECK(resent >= 0);
    CHECK(resent < TASKS / 2);
    free(log_text);
    harness_destroy(&h);
    return check_exit_code("test_worker_acks");
}
