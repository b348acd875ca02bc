/* SIGTERM hands a task back only once its job has ended.
 *
 * cloister-worker: a command that takes about a second to stop after SIGTERM keeps its task
 * running (and its group locked) meanwhile. The broker requeues it (task.queued after the
 * release) only after the command wrote its "stopped" marker, and a second, idle worker of
 * the same specialist gets neither that task nor the next task of the same group before
 * then. The worker still exits 0 within its grace. Without this, the release went out at the
 * signal and the second worker could run the group's next task (e.g. the next merge into
 * the same branch) beside the first job.
 *
 * A job that ignores the cancel (specialist_run() in a forked child, with a job of our own):
 * the skeleton kills its child group a tenth of the grace before the end, and the release
 * comes after that kill — after the child is reaped when the job returns then (exit 0), and
 * at the end of the grace when it does not return at all (exit 3). */
#include "testbroker.h"
#include "worker_harness.h"

#include "specialist.h"

#include <spawn.h>
#include <sys/wait.h>

#define GRACE_MS 4000
#define STUBBORN_GRACE_MS 1000

/* Stops a second after SIGTERM, then records the wall time (ms) it stopped at. */
static const char *const SLOW_STOP =
    "trap 'sleep 1; date +%s%3N > \"$PANOPTICON_HOME/../stopped.tmp\";"
    " mv \"$PANOPTICON_HOME/../stopped.tmp\" \"$PANOPTICON_HOME/../stopped\"; exit 1' TERM\n"
    "echo started\n"
    "sleep 30 &\n"
    "wait\n";

static const char *const QUICK = "echo \"RAN_BY: quick $CLOISTER_TASK_ID\"\n";

static void s_submit_grouped(harness_t *h, const char *id, const char *group)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_SUBMIT);
    wire_put_str(w, FIELD_ID, id);
    wire_put_str(w, FIELD_SPECIALIST, "order-agent");
    wire_put_str(w, FIELD_PRIORITY, "normal");
    wire_put_str(w, FIELD_TITLE, id);
    wire_put_str(w, FIELD_GROUP, group);
    size_t len = 0;
    const void *data = wire_writer_data(w, &len);
    CHECK(zmq_send(h->push, data, len, 0) == (int)len);
    wire_writer_destroy(&w);
}

/* The wall time (ms) the slow command stopped at, or 0 while it has not. */
static int64_t s_stopped_ms(harness_t *h)
{
    char *text = testenv_read_file(harness_path(h, "stopped"));
    int64_t ms = text ? strtoll(text, NULL, 10) : 0;
    free(text);
    return ms;
}

static void test_slow_command(harness_t *h)
{
    char grace[16];
    snprintf(grace, sizeof grace, "%d", GRACE_MS);
    const char *const flags[] = {"--heartbeat-ms", HARNESS_HB, "--grace-ms", grace, NULL};

    pid_t slow = harness_spawn_worker(h, "slow", "order-agent", SLOW_STOP, flags);
    CHECK(harness_wait_joined(h, "slow"));
    s_submit_grouped(h, "first", "merge:repo:main");
    CHECK(harness_wait(h, "task.progress", "first", 5000) != NULL); /* the trap is set */
    /* Only now the second worker, idle, and the group's next task: the group is locked. */
    harness_spawn_worker(h, "quick", "order-agent", QUICK, flags);
    CHECK(harness_wait_joined(h, "quick"));
    s_submit_grouped(h, "second", "merge:repo:main");
    CHECK(harness_wait(h, "task.queued", "second", 2000) != NULL);
    harness_pump(h, 300);
    CHECK_INT(harness_count(h, "task.dispatched", "second"), 0);

    int from = h->nevents;
    int64_t signalled = clock_now_ms();
    CHECK(kill(slow, SIGTERM) == 0);

    /* While the command stops, the broker still has the task running on the slow worker:
     * nothing requeued, nothing dispatched. */
    for (int waited = 0; waited < 400; waited += 20)
        harness_pump(h, 20);
    if (s_stopped_ms(h) == 0) {
        CHECK(harness_find(h, from, "task.queued", "first") < 0);
        CHECK(harness_find(h, from, "task.dispatched", NULL) < 0);
        client_t *client = testbroker_client(h->env);
        char state[32] = "";
        CHECK_STR(testbroker_state(client, "first", state, sizeof state), "running");
        client_destroy(&client);
    }

    /* Both tasks end on the quick worker; remember when the release and its first dispatch
     * were published. */
    int64_t requeued = 0, quick_dispatched = 0;
    int seen = from;
    for (int waited = 0; waited < 8000; waited += 20) {
        for (; seen < h->nevents; seen++) {
            const json_t *e = h->events[seen];
            const char *name = harness_field(e, "event");
            if (requeued == 0 && strcmp(name, "task.queued") == 0 &&
                strcmp(harness_field(e, "task"), "first") == 0)
                requeued = harness_int(e, "time");
            if (quick_dispatched == 0 && strcmp(name, "task.dispatched") == 0 &&
                strcmp(harness_field(e, "worker"), "quick") == 0)
                quick_dispatched = harness_int(e, "time");
        }
        if (harness_find(h, from, "task.done", "first") >= 0 &&
            harness_find(h, from, "task.done", "second") >= 0)
            break;
        harness_pump(h, 20);
    }
    int64_t stopped = s_stopped_ms(h);
    CHECK(stopped > 0);
    CHECK(requeued > 0);
    CHECK(quick_dispatched > 0);
    if (stopped == 0 || requeued == 0 || quick_dispatched == 0) {
        fprintf(stderr, "stopped %lld, requeued %lld, quick dispatched %lld\n", (long long)stopped,
                (long long)requeued, (long long)quick_dispatched);
    } else {
        /* The command's end, then the release, then the group goes to the other worker. */
        if (stopped > requeued || stopped > quick_dispatched)
            fprintf(stderr, "stopped at %lld but requeued at %lld, dispatched to quick at %lld\n",
                    (long long)stopped, (long long)requeued, (long long)quick_dispatched);
        CHECK(stopped <= requeued);
        CHECK(stopped <= quick_dispatched);
    }

    int status = testenv_wait(h->env, slow, GRACE_MS + 2000);
    CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(clock_now_ms() - signalled < GRACE_MS);
    CHECK(harness_wait(h, "worker.left", NULL, 1000) != NULL);

    /* Released, not failed: both tasks done once, by the quick worker. */
    json_t *first = harness_wait(h, "task.done", "first", 100);
    json_t *second = harness_wait(h, "task.done", "second", 100);
    CHECK(first != NULL && strcmp(harness_field(first, "worker"), "quick") == 0);
    CHECK(second != NULL && strcmp(harness_field(second, "worker"), "quick") == 0);
    CHECK_INT(harness_count(h, "task.done", "first"), 1);
    CHECK_INT(harness_count(h, "task.failed", "first"), 0);
    CHECK_INT(harness_count(h, "task.retry", "first"), 0);
}

/* ---- a job that ignores the cancel ---- */

/* Runs `sleep 30` in a process group of its own (watched by the skeleton) and ignores the
 * cancel. Task "reaps": waits for the child (killed by the skeleton), writes the wall time it
 * was reaped at to <dir>/reaped, returns. Task "wedged": never returns in time. */
static specialist_outcome_t s_stubborn_job(specialist_ctx_t *ctx, void *arg)
{
    const char *dir = arg;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    char *argv[] = {"sleep", "30", NULL};
    pid_t child = -1;
    int rc = posix_spawn(&child, "/bin/sleep", NULL, &attr, argv, NULL);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
        return SPECIALIST_RETRY;
    specialist_watch_child(ctx, child);
    specialist_progress(ctx, "info", "child started");
    if (strcmp(specialist_task(ctx)->id, "wedged") == 0) {
        testenv_sleep_ms(20000);
        return SPECIALIST_FAILED;
    }
    waitpid(child, NULL, 0);
    char path[512], text[32];
    snprintf(path, sizeof path, "%s/reaped", dir);
    snprintf(text, sizeof text, "%lld\n", (long long)clock_wall_ms());
    CHECK(testenv_write_file(path, text) == 0);
    return SPECIALIST_FAILED;
}

/* A worker (and specialist) `id` for one task: a task released by one is not taken by
 * the next. */
static pid_t s_start_stubborn(harness_t *h, const char *id)
{
    pid_t pid = fork();
    if (pid == 0) {
        char bind[512];
        snprintf(bind, sizeof bind, "ipc://%s/%s.sock", h->env->dir, id);
        specialist_config_t config = {
            .specialist = id,
            .in_endpoint = h->env->in_ep,
            .bind_endpoint = bind,
            .heartbeat_ms = atoi(HARNESS_HB),
            .worker_id = id,
            .grace_ms = STUBBORN_GRACE_MS,
        };
        _exit(specialist_run(&config, s_stubborn_job, h->env->dir, NULL));
    }
    return pid;
}

/* SIGTERM to a stubborn worker running task `task`; returns its exit status (-1 if it had to
 * be killed) and sets *signalled and *requeued to the wall times of the signal and of the
 * task.queued after the release. */
static int s_stop_stubborn(harness_t *h, const char *task, int64_t *signalled, int64_t *requeued)
{
    char worker[64];
    snprintf(worker, sizeof worker, "stubborn-%s", task);
    pid_t pid = s_start_stubborn(h, worker);
    CHECK(pid > 0 && harness_wait_joined(h, worker));
    harness_submit(h, task, worker, "normal", 0, 1, NULL);
    CHECK(harness_wait(h, "task.progress", task, 5000) != NULL);
    int from = h->nevents;
    *signalled = clock_wall_ms();
    kill(pid, SIGTERM);
    *requeued = 0;
    for (int waited = 0; *requeued == 0 && waited < STUBBORN_GRACE_MS + 2000; waited += 20) {
        int i = harness_find(h, from, "task.queued", task);
        if (i >= 0)
            *requeued = harness_int(h->events[i], "time");
        else
            harness_pump(h, 20);
    }
    CHECK(*requeued > 0);
    int status = -1;
    for (int waited = 0; waited < 3000 && waitpid(pid, &status, WNOHANG) == 0; waited += 20)
        testenv_sleep_ms(20);
    if (waitpid(pid, NULL, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        status = -1;
    }
    return status;
}

static void test_stubborn_job(harness_t *h)
{
    /* The job returns once the skeleton's kill ends its child: released after that. */
    int64_t signalled = 0, requeued = 0;
    int status = s_stop_stubborn(h, "reaps", &signalled, &requeued);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *text = testenv_read_file(harness_path(h, "reaped"));
    int64_t reaped = text ? strtoll(text, NULL, 10) : 0;
    free(text);
    CHECK(reaped > 0);
    CHECK(reaped <= requeued);
    CHECK(requeued - signalled >= STUBBORN_GRACE_MS * 8 / 10);
    CHECK(requeued - signalled < STUBBORN_GRACE_MS + 500);

    /* The job never returns: released at the end of the grace, after the kill; exit 3. */
    status = s_stop_stubborn(h, "wedged", &signalled, &requeued);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == SPECIALIST_EXIT_STUCK);
    CHECK(requeued - signalled >= STUBBORN_GRACE_MS * 9 / 10);
    CHECK(requeued - signalled < STUBBORN_GRACE_MS + 500);
    CHECK_INT(harness_count(h, "task.failed", "reaps"), 0);
    CHECK_INT(harness_count(h, "task.failed", "wedged"), 0);
}

int main(void)
{
    harness_t *h = harness_new("worker-release-order");
    if (h == NULL)
        return 1;
    test_slow_command(h);
    test_stubborn_job(h);
    harness_destroy(&h);
    return check_exit_code("test_worker_release_order");
}
