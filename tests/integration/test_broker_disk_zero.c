/* A disk filled to its last byte does not stop the broker.
 *
 * The store is on an 8 MiB tmpfs (testenv_mount_tmpfs) and [broker] min_free_mb is 0, so
 * the guard never refuses first: the fill beats it, as a `dd` filling 200 MB in 100 ms
 * does. Filled at once and then filled slowly, to 0 bytes free and kept there, the broker:
 * stays up; answers stats; refuses submits with disk_full (a commit that found no room
 * gives up the reserve and is made again once; after that, the iteration's submits are
 * refused and the broker goes on from its store); loses no task it acknowledged; says so
 * in a handful of log lines, not one per failure; and, once room comes back, accepts
 * submits again and commits the running task's resent result. */
#include "check.h"
#include "failure.h"
#include "fakeworker.h"
#include "testbroker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_ACKED 4000
#define WANT_REFUSED 20

typedef struct {
    testenv_t *env;
    client_t *client;
    fakeworker_t *worker;
    char filler[700];
    char running[48]; /* the task the worker holds while the disk is full, or "" */
    int attempt;
    char *acked[MAX_ACKED];
    int nacked, refused, submitted;
    char first_refusal[512]; /* the reason of the first refusal of a fill */
} run_t;

static int64_t s_free_bytes(const char *dir)
{
    struct statvfs fs;
    return statvfs(dir, &fs) == 0 ? (int64_t)fs.f_bavail * (int64_t)fs.f_frsize : -1;
}

/* Appends up to `bytes` (all there is when negative) to the filler; false once the disk
 * is full. */
static bool s_fill(run_t *run, int64_t bytes)
{
    int fd = open(run->filler, O_WRONLY | O_CREAT | O_APPEND, 0600);
    CHECK(fd >= 0);
    static char block[4096];
    bool room = true;
    for (int64_t written = 0; room && (bytes < 0 || written < bytes); written += sizeof block)
        room = write(fd, block, sizeof block) == (ssize_t)sizeof block;
    close(fd);
    return room && s_free_bytes(run->env->home) > 0;
}

/* One submit through control with a 2 KiB title: acknowledged, or refused for the disk. */
static void s_submit(run_t *run)
{
    char id[48], title[2048];
    snprintf(id, sizeof id, "t-%d", run->submitted++);
    memset(title, 'x', sizeof title - 1);
    title[sizeof title - 1] = '\0';
    submit_t task = {.id = id, .specialist = "test-agent", .title = title};
    wire_msg_t *reply = NULL;
    int rc = client_submit(run->client, &task, NULL, 0, &reply);
    wire_msg_destroy(&reply);
    if (rc == 0) {
        CHECK(run->nacked < MAX_ACKED);
        run->acked[run->nacked++] = strdup(id);
        return;
    }
    if (rc != FAILURE_DISK_FULL || strstr(failure_message(), "disk full") == NULL)
        fprintf(stderr, "submit %s: %s\n", id, failure_message());
    CHECK(rc == FAILURE_DISK_FULL && strstr(failure_message(), "disk full") != NULL);
    if (run->refused++ == 0)
        snprintf(run->first_refusal, sizeof run->first_refusal, "%s", failure_message());
}

static bool s_stats_ok(client_t *client)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    wire_msg_destroy(&reply);
    return rc == 0;
}

/* Submits until WANT_REFUSED were refused, filling the disk back to 0 bytes as it goes:
 * `chunk` bytes before each submit (negative: all at once). */
static void s_fill_and_submit(run_t *run, pid_t broker, int64_t chunk)
{
    run->refused = 0;
    for (int i = 0; run->refused < WANT_REFUSED; i++) {
        CHECK(i < 3000);
        s_fill(run, chunk);
        s_submit(run);
        if (i % 10 == 0) {
            fakeworker_heartbeat(run->worker, run->running[0] ? run->running : NULL, run->attempt);
            CHECK(s_stats_ok(run->client));
            CHECK(testenv_wait(run->env, broker, 0) == -1);
        }
    }
    CHECK(s_stats_ok(run->client));
}

static bool s_accepts(void *arg)
{
    run_t *run = arg;
    fakeworker_heartbeat(run->worker, run->running[0] ? run->running : NULL, run->attempt);
    int before = run->nacked;
    s_submit(run);
    return run->nacked > before;
}

/* Room again: submits are accepted without a restart. */
static void s_make_room(run_t *run)
{
    CHECK(unlink(run->filler) == 0);
    CHECK(testenv_wait_until(s_accepts, run, 5000));
}

/* Every acknowledged task is still known to the broker. */
static void s_check_acked(run_t *run)
{
    for (int i = 0; i < run->nacked; i++) {
        char state[32];
        testbroker_state(run->client, run->acked[i], state, sizeof state);
        if (state[0] == '\0')
            fprintf(stderr, "acknowledged task %s is lost\n", run->acked[i]);
        CHECK(state[0] != '\0');
    }
}

static int s_count_lines(const char *path, const char *needle)
{
    char *text = testenv_read_file(path);
    int count = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
        count += strstr(line, needle) != NULL;
    free(text);
    return count;
}

/* Starts a broker whose reserve is `reserve_mb` (the tasks of earlier runs still queued),
 * fills its disk at once then slowly, and checks it through; ends with a kill -9 and a restart, after which every acknowledged
 * task is still there: what the broker acknowledged was in the store, not only in memory. */
static void s_scenario(run_t *run, int reserve_mb)
{
    testenv_t *env = run->env;
    char path[700], config[256];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    snprintf(config, sizeof config,
             "[broker]\nmin_free_mb = 0\nreserve_mb = %d\nwal_limit_mb = 1\n", reserve_mb);
    CHECK(testenv_write_file(path, config) == 0);
    pid_t broker = testbroker_start(env, 0, "full");
    CHECK(broker > 0);
    run->client = testbroker_client(env);
    int acked_before = run->nacked;

    /* A task runs on a worker while the disk fills; ten more wait in the queue. */
    for (int i = 0; i < 10; i++)
        s_submit(run);
    CHECK_INT(run->nacked - acked_before, 10);
    run->worker = fakeworker_new(env->dir, env->in_ep, "test-agent", "w1");
    fakeworker_hello(run->worker, NULL, 0);
    wire_msg_t *task = fakeworker_expect(run->worker, MSG_TASK, 5000, NULL, 0);
    CHECK(task != NULL);
    snprintf(run->running, sizeof run->running, "%s", wire_msg_str(task, FIELD_ID, ""));
    run->attempt = (int)wire_msg_int(task, FIELD_ATTEMPT, 0);
    wire_msg_destroy(&task);

    /* At once: every free byte taken, and taken again whenever some comes back. The first
     * commit that finds no room is written again once the reserve is given up, so the first
     * refusal is the guard's; with no reserve, it is that commit's own. */
    s_fill_and_submit(run, broker, -1);
    fprintf(stderr, "test_broker_disk_zero: reserve %d MB, first refusal: %s\n", reserve_mb,
            run->first_refusal);
    CHECK(strstr(run->first_refusal, reserve_mb > 0 ? "not accepting new tasks until"
                                                    : "nothing was stored") != NULL);
    fakeworker_result(run->worker, run->running, run->attempt, "done", NULL, NULL, 0);
    CHECK(s_stats_ok(run->client));
    s_make_room(run);
    /* The result, resent until acknowledged, is committed now. */
    wire_msg_t *ack = NULL;
    for (int i = 0; i < 20 && ack == NULL; i++) {
        fakeworker_result(run->worker, run->running, run->attempt, "done", NULL, NULL, 0);
        ack = fakeworker_expect(run->worker, MSG_ACK, 500, NULL, 0);
    }
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    char state[32];
    CHECK_STR(testbroker_state(run->client, run->running, state, sizeof state), "done");
    run->running[0] = '\0';
    s_check_acked(run);

    /* Slowly: 64 KiB before each submit, down to 0 bytes and kept there. */
    s_fill_and_submit(run, broker, 64 * 1024);
    s_make_room(run);
    s_check_acked(run);
    CHECK(testenv_wait(env, broker, 0) == -1);

    fakeworker_destroy(&run->worker);
    client_destroy(&run->client);
    testenv_signal(broker, SIGKILL);
    CHECK(testenv_wait(env, broker, 5000) != -1);
    broker = testbroker_start(env, 0, "full");
    CHECK(broker > 0);
    run->client = testbroker_client(env);
    s_check_acked(run);
    client_destroy(&run->client);
    testenv_signal(broker, SIGTERM);
    CHECK(testenv_wait(env, broker, 5000) != -1);
}

int main(void)
{
    run_t run = {.env = testenv_new("broker-disk-zero")};
    testenv_t *env = run.env;
    if (env == NULL)
        return 1;
    CHECK(testenv_mount_tmpfs(env, env->home, 8));
    snprintf(run.filler, sizeof run.filler, "%s/filler", env->home);
    /* With a reserve: the first commit that finds no room is made again once the reserve is
     * given up. Without: it is refused at once, with the submits of its iteration. */
    s_scenario(&run, 1);
    s_scenario(&run, 0);

    /* Hundreds of failed commits, a few lines of log. */
    char path[700];
    snprintf(path, sizeof path, "%s/broker.log", env->dir);
    int lines = s_count_lines(path, "disk full") + s_count_lines(path, "checkpoint");
    fprintf(stderr, "test_broker_disk_zero: %d acknowledged, %d log lines about the disk\n",
            run.nacked, lines);
    CHECK(lines > 0 && lines <= 30);

    for (int i = 0; i < run.nacked; i++)
        free(run.acked[i]);
    testenv_destroy(&env);
    return check_exit_code("test_broker_disk_zero");
}
