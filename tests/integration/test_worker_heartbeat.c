/* A worker learns the broker's heartbeat from the ping that answers its hello: one
 * started with a heartbeat 20 times slower than the broker's (100 ms x 3 misses) follows
 * the broker and is not declared lost, and runs a task. */
#include "worker_harness.h"

int main(void)
{
    harness_t *h = harness_new("worker-heartbeat");
    CHECK(h != NULL);
    const char *const slow[] = {"--heartbeat-ms", "2000", "--grace-ms", "3000", NULL};
    harness_spawn_worker(h, "slow-w1", "slow-agent", "echo RESULT: ok", slow);
    CHECK(harness_wait_joined(h, "slow-w1"));
    /* Left to its own 2 s beat, the broker would lose it after 300 ms of silence. */
    harness_pump(h, 2500);
    CHECK_INT(harness_count(h, "worker.lost", NULL), 0);
    harness_submit(h, "beat-1", "slow-agent", NULL, 30, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "beat-1", 10000);
    CHECK(done != NULL);
    CHECK_INT(harness_count(h, "worker.lost", NULL), 0);
    harness_destroy(&h);
    return check_exit_code("test_worker_heartbeat");
}
