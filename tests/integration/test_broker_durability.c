/* kill -9 of the broker while submits stream in: every submit the broker acknowledged is
 * there after a restart, exactly once, in order; nothing is doubled by resubmitting. */
#include "check.h"
#include "testbroker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TASKS 100000

/* The submitter runs in a child process: it submits until the broker stops answering and
 * appends each acknowledged id to `acked_path`, one per line, flushed after each ack. */
static void s_submitter(testenv_t *env, const char *acked_path, const char *prefix)
{
    FILE *acked = fopen(acked_path, "w");
    client_t *client = client_new(env->control_ep, 1000);
    for (int i = 0; i < MAX_TASKS; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s-%06d", prefix, i);
        if (testbroker_submit(client, id, "test-agent", i % 4 == 0 ? "high" : NULL, NULL) != 0)
            break;
        fprintf(acked, "%s\n", id);
        fflush(acked);
    }
    fclose(acked);
    client_destroy(&client);
    _exit(0);
}

/* Counts how many times each acked id appears in the queue listing. */
static void s_check_all_there_once(const char *acked_text, const char *queue_text, int *acked_count)
{
    *acked_count = 0;
    char *acked = strdup(acked_text);
    char *save = NULL;
    for (char *id = strtok_r(acked, "\n", &save); id; id = strtok_r(NULL, "\n", &save)) {
        (*acked_count)++;
        size_t len = strlen(id);
        int found = 0;
        for (const char *at = strstr(queue_text, id); at; at = strstr(at + 1, id))
            if ((at == queue_text || at[-1] == ' ') && (at[len] == ' ' || at[len] == '\0'))
                found++;
        if (found != 1) {
            fprintf(stderr, "acked task %s appears %d times after the restart\n", id, found);
            check_fail();
        }
    }
    free(acked);
}

static void s_round(testenv_t *env, pid_t *broker, const char *sync, const char *prefix)
{
    char acked_path[512];
    snprintf(acked_path, sizeof acked_path, "%s/acked-%s.txt", env->dir, prefix);
    pid_t child = fork();
    if (child == 0)
        s_submitter(env, acked_path, prefix);
    testenv_sleep_ms(400); /* submits are streaming now */
    testenv_signal(*broker, SIGKILL);
    testenv_wait(env, *broker, 3000);
    waitpid(child, NULL, 0);
    *broker = testbroker_start(env, 200, sync);
    CHECK(*broker > 0);

    client_t *client = client_new(env->control_ep, 10000);
    size_t size = 64 * MAX_TASKS;
    char *queue = malloc(size);
    testbroker_queue(client, "test-agent", queue, size);
    char *acked = testenv_read_file(acked_path);
    int acked_count = 0;
    s_check_all_there_once(acked ? acked : "", queue, &acked_count);
    printf("%s (sync=%s): %d submits acknowledged before kill -9, all present once\n", prefix,
           sync, acked_count);
    CHECK(acked_count > 10);
    /* Resubmitting an acknowledged id returns the existing task instead of a copy. */
    if (acked_count > 0) {
        char first[64];
        snprintf(first, sizeof first, "%s-%06d", prefix, 0);
        CHECK_INT(testbroker_submit(client, first, "test-agent", NULL, NULL), 0);
        char again[64 * 4];
        testbroker_queue(client, "test-agent", queue, size);
        int count = 0;
        for (const char *at = strstr(queue, first); at; at = strstr(at + 1, first))
            count++;
        snprintf(again, sizeof again, "%d", count);
        CHECK_STR(again, "1");
    }
    free(acked);
    free(queue);
    client_destroy(&client);
}

int main(void)
{
    testenv_t *env = testenv_new("broker-durability");
    if (env == NULL)
        return 1;
    pid_t broker = testbroker_start(env, 200, "full");
    CHECK(broker > 0);
    if (broker > 0) {
        s_round(env, &broker, "full", "full");
        /* sync=normal loses nothing on a process crash either (only on power loss). */
        testenv_signal(broker, SIGTERM);
        testenv_wait(env, broker, 3000);
        broker = testbroker_start(env, 200, "normal");
        s_round(env, &broker, "normal", "normal");
    }
    testenv_destroy(&env);
    return check_exit_code("test_broker_durability");
}
