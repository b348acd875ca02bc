/* The broker stays up when the disk under its store fills (a 40 MB tmpfs here, mounted in a
 * namespace of the test's own: testenv_mount_tmpfs): below [broker] min_free_mb new submits are refused with
 * code disk_full, while reads, status and the result of a running task still go through
 * (the reserve file is given up for them); when the space comes back, submits are accepted
 * again without a restart. test_broker_disk_zero fills the disk to its last byte. */
#include "check.h"
#include "failure.h"
#include "fakeworker.h"
#include "testbroker.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* disk_low from stats, or -1 when the broker does not answer. */
static int s_disk_low(client_t *client)
{
    wire_writer_t *w = wire_writer_new();
    wire_writer_start(w, MSG_STATS);
    wire_msg_t *reply = NULL;
    int rc = client_call(client, w, &reply);
    wire_writer_destroy(&w);
    const msgpack_object *low =
        rc == 0 ? wire_map_get(wire_msg_object(reply, FIELD_DATA), FIELD_DISK_LOW) : NULL;
    int answer = low != NULL && low->type == MSGPACK_OBJECT_BOOLEAN ? low->via.boolean : -1;
    wire_msg_destroy(&reply);
    return answer;
}

typedef struct {
    client_t *client;
    int want;
} disk_wait_t;

static bool s_disk_is(void *arg)
{
    disk_wait_t *wait = arg;
    return s_disk_low(wait->client) == wait->want;
}

/* Fills `path` until `leave` bytes are free on its file system. */
static bool s_fill(const char *path, int64_t leave)
{
    struct statvfs fs;
    if (statvfs(path, &fs) != 0)
        return false;
    int64_t free_bytes = (int64_t)fs.f_bavail * (int64_t)fs.f_frsize;
    char file[700];
    snprintf(file, sizeof file, "%s/filler", path);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool ok = fd >= 0 && free_bytes > leave &&
              posix_fallocate(fd, 0, (off_t)(free_bytes - leave)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

int main(void)
{
    testenv_t *env = testenv_new("broker-disk-full");
    if (env == NULL)
        return 1;
    /* The broker's home (its store and config) on a small file system of its own. */
    CHECK(testenv_mount_tmpfs(env, env->home, 40));
    char path[700];
    snprintf(path, sizeof path, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(path, "[broker]\nmin_free_mb = 16\nreserve_mb = 4\n") == 0);
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    client_t *client = testbroker_client(env);
    snprintf(path, sizeof path, "%s/broker.db.reserve", env->home);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 4 << 20);

    /* A task running when the disk fills. */
    CHECK_INT(testbroker_submit(client, "before", "test-agent", NULL, NULL), 0);
    fakeworker_t *worker = fakeworker_new(env->dir, env->in_ep, "test-agent", "w1");
    fakeworker_hello(worker, NULL, 0);
    wire_msg_t *task = fakeworker_expect(worker, MSG_TASK, 5000, NULL, 0);
    CHECK(task != NULL);
    wire_msg_destroy(&task);

    CHECK(s_fill(env->home, 10 << 20));
    disk_wait_t low = {client, 1};
    CHECK(testenv_wait_until(s_disk_is, &low, 3000));
    CHECK(stat(path, &st) != 0); /* the reserve is given up */
    int rc = testbroker_submit(client, "refused", "test-agent", NULL, NULL);
    CHECK_INT(rc, FAILURE_DISK_FULL);
    CHECK(strstr(failure_message(), "disk full: ") != NULL &&
          strstr(failure_message(), "at least 16 MB wanted") != NULL);
    char state[64];
    CHECK(testbroker_task_unknown(client, "refused"));
    /* pan status says so. */
    char out[8192];
    char *status[] = {(char *)testenv_bin("pan"), "status", NULL};
    CHECK_INT(testenv_run(env, status, out, sizeof out, 10000), 0);
    CHECK(strstr(out, "LOW: new submits are refused (disk_full)") != NULL);
    /* The running task's result still commits. */
    fakeworker_result(worker, "before", 1, "done", NULL, NULL, 0);
    wire_msg_t *ack = fakeworker_expect(worker, MSG_ACK, 5000, NULL, 0);
    CHECK(ack != NULL);
    wire_msg_destroy(&ack);
    CHECK_STR(testbroker_state(client, "before", state, sizeof state), "done");

    /* Room again: accepted, no restart. */
    snprintf(path, sizeof path, "%s/filler", env->home);
    CHECK(unlink(path) == 0);
    disk_wait_t fine = {client, 0};
    CHECK(testenv_wait_until(s_disk_is, &fine, 3000));
    CHECK_INT(testbroker_submit(client, "after", "test-agent", NULL, NULL), 0);
    CHECK(testenv_wait(env, broker, 0) == -1); /* it never stopped */

    fakeworker_bye(worker);
    fakeworker_destroy(&worker);
    client_destroy(&client);
    if (broker > 0) {
        testenv_signal(broker, SIGTERM);
        testenv_wait(env, broker, 5000);
    }
    testenv_destroy(&env);
    return check_exit_code("test_broker_disk_full");
}
