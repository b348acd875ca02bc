/* Workers and the broker's dispatch: each worker holds one task at a time (two slow tasks
 * run in parallel on two workers while a third waits), and priority is decided when a
 * worker becomes free (normal x3 submitted while the only worker is busy, then urgent: the
 * urgent one runs next). */
#include "worker_harness.h"

static const char *const SCRIPT =
    "echo \"started $CLOISTER_TASK_ID\"\n"
    "while [ ! -f \"$PANOPTICON_HOME/../go-$CLOISTER_TASK_ID\" ]; do sleep 0.02; done\n"
    "echo 'DONE_BY: '\"$CLOISTER_TASK_ID\"\n";

static void test_one_task_per_worker(void)
{
    harness_t *h = harness_new("worker-parallel");
    CHECK(h != NULL);
    harness_worker(h, "wa", "slow-agent", SCRIPT);
    harness_worker(h, "wb", "slow-agent", SCRIPT);
    harness_submit(h, "p1", "slow-agent", "normal", 0, 0, NULL);
    harness_submit(h, "p2", "slow-agent", "normal", 0, 0, NULL);
    harness_submit(h, "p3", "slow-agent", "normal", 0, 0, NULL);
    json_t *d1 = harness_wait(h, "task.dispatched", "p1", 5000);
    json_t *d2 = harness_wait(h, "task.dispatched", "p2", 5000);
    CHECK(d1 != NULL && d2 != NULL);
    if (d1 != NULL && d2 != NULL)
        CHECK(strcmp(harness_field(d1, "worker"), harness_field(d2, "worker")) != 0);
    /* Both run at once: each printed its first line before either finished. */
    CHECK(harness_wait(h, "task.progress", "p1", 3000) != NULL);
    CHECK(harness_wait(h, "task.progress", "p2", 3000) != NULL);
    /* The third waits while both workers are busy. */
    harness_pump(h, 500);
    CHECK_INT(harness_count(h, "task.dispatched", "p3"), 0);
    harness_go(h, "go-p2");
    CHECK(harness_wait(h, "task.done", "p2", 5000) != NULL);
    json_t *d3 = harness_wait(h, "task.dispatched", "p3", 5000);
    CHECK(d3 != NULL);
    if (d3 != NULL && d2 != NULL)
        CHECK_STR(harness_field(d3, "worker"), harness_field(d2, "worker"));
    harness_go(h, "go-p1");
    harness_go(h, "go-p3");
    CHECK(harness_wait(h, "task.done", "p1", 5000) != NULL);
    CHECK(harness_wait(h, "task.done", "p3", 5000) != NULL);
    harness_destroy(&h);
}

static void test_urgent_overtakes(void)
{
    harness_t *h = harness_new("worker-priority");
    CHECK(h != NULL);
    harness_worker(h, "w1", "slow-agent", SCRIPT);
    harness_submit(h, "busy", "slow-agent", "normal", 0, 0, NULL);
    CHECK(harness_wait(h, "task.progress", "busy", 5000) != NULL);
    harness_submit(h, "n1", "slow-agent", "normal", 0, 0, NULL);
    harness_submit(h, "n2", "slow-agent", "normal", 0, 0, NULL);
    harness_submit(h, "n3", "slow-agent", "normal", 0, 0, NULL);
    harness_submit(h, "u1", "slow-agent", "urgent", 0, 0, NULL);
    CHECK(harness_wait(h, "task.queued", "u1", 3000) != NULL);
    harness_go(h, "go-n1");
    harness_go(h, "go-n2");
    harness_go(h, "go-n3");
    harness_go(h, "go-u1");
    harness_go(h, "go-busy");
    CHECK(harness_wait(h, "task.done", "n3", 10000) != NULL);
    const char *order[] = {"busy", "u1", "n1", "n2", "n3"};
    int last = -1;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        int at = harness_find(h, 0, "task.dispatched", order[i]);
        CHECK(at > last);
        if (at <= last)
            fprintf(stderr, "%s dispatched out of order\n", order[i]);
        last = at;
    }
    harness_destroy(&h);
}

int main(void)
{
    test_one_task_per_worker();
    test_urgent_overtakes();
    return check_exit_code("test_worker_scheduling");
}
