/* A process a job detaches from its process group (setsid) does not outlive the job: the
 * services are child subreapers, so the orphan is adopted and killed when the job ends —
 * from a generic worker's command and from a test command run without a sandbox. */
#include "test_test_service_harness.h"

int main(void)
{
    harness_t *h = harness_new("orphans");
    if (h == NULL)
        return 1;
    tsh_config(h, "[tests]\nsandbox = \"none\"\n");

    /* A generic worker whose command leaves a detached sleeper behind (the marker is
     * spelt so that the worker's own command line does not contain it) and says whether the
     * sleeper was running when the command ended: gone afterwards proves nothing if it
     * never started. */
    harness_worker(h, "w1", "orphan-agent",
                   "setsid sleep 47.3$((10 + 1)) </dev/null >/dev/null 2>&1 & sleep 0.2; "
                   "kill -0 $! && echo 'SLEEPER: running'; echo 'RESULT: ok'");
    harness_submit(h, "o1", "orphan-agent", "normal", 30, 1, NULL);
    json_t *done = harness_wait(h, "task.done", "o1", 10000);
    CHECK(done != NULL);
    CHECK_STR(tsh_result_str(done, "SLEEPER"), "running");
    CHECK(testenv_wait_until(testenv_process_gone, "sleep 47.311", 5000));

    /* The test-agent: a test command that does the same. */
    tsh_service(h, "t1");
    tsh_file(h, "proj", "tests.sh",
             "setsid sleep 47.312 </dev/null >/dev/null 2>&1 &\nsleep 0.2\n"
             "kill -0 $! && echo 'sleeper running'\n"
             "echo '=== 1 passed in 0.01s ==='\n");
    const char *dir = tsh_file(h, "proj", "Makefile", "test:\n\t@sh tests.sh\n");
    tsh_submit(h, "o2", 30, "{\"workspace\": \"%s\"}", dir);
    json_t *end = tsh_end(h, "o2", 15000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK(strstr(tsh_result_str(end, "output_tail"), "sleeper running") != NULL);
    CHECK(testenv_wait_until(testenv_process_gone, "sleep 47.312", 5000));
    harness_destroy(&h);
    return check_exit_code("test_orphans");
}
