/* test_events_gap: a follower that could not take the events for a while -- stopped here
 * (SIGSTOP), so the publisher drops what its full pipe cannot hold, as it does for one cut
 * off by the network -- gets every event once, in order, when it resumes: the gap in the
 * sequence numbers is filled by a replay of the stored events. Twice: the first time an
 * event published after it resumes shows the gap; the second time none does (the dropped
 * events were the last ones), and the follower's check after a silence finds them. */
#include "check.h"
#include "msgjson.h"
#include "testbroker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More task.queued events than the broker's publisher (10,000 messages), the subscriber
 * (1,000) and the kernel's socket buffers hold together, so some are certainly dropped
 * while the follower sleeps. */
#define EVENTS 24000

/* The seqs of the JSON lines in `text`, in order, into seqs (at most max); their count. */
static int s_seqs(const char *text, int64_t *seqs, int max)
{
    int n = 0;
    for (const char *line = text; *line != '\0' && n < max;) {
        size_t len = strcspn(line, "\n");
        json_t *event = json_loadb(line, len, 0, NULL);
        if (json_is_object(event))
            seqs[n++] = json_integer_value(json_object_get(event, "seq"));
        json_decref(event);
        line += len + (line[len] == '\n');
    }
    return n;
}

/* True once the file `path` holds `text` (waits up to 20 s). */
static bool s_printed(const char *path, const char *text)
{
    bool found = false;
    for (int i = 0; i < 400 && !found; i++) {
        char *content = testenv_read_file(path);
        found = content != NULL && strstr(content, text) != NULL;
        free(content);
        if (!found)
            testenv_sleep_ms(50);
    }
    return found;
}

/* Stops the follower, submits EVENTS tasks PREFIX-00000... (a task.queued event each), and
 * lets it go on. */
static void s_burst_while_stopped(client_t *client, pid_t follower, const char *prefix)
{
    testenv_signal(follower, SIGSTOP);
    for (int i = 0; i < EVENTS; i++) {
        char id[32];
        snprintf(id, sizeof id, "%s-%05d", prefix, i);
        CHECK_INT(testbroker_submit(client, id, "gap-agent", NULL, NULL), 0);
    }
    testenv_signal(follower, SIGCONT);
}

int main(void)
{
    testenv_t *env = testenv_new("events-gap");
    CHECK(env != NULL);
    char config[600], out[600];
    snprintf(config, sizeof config, "%s/cloister.toml", env->home);
    CHECK(testenv_write_file(config, "[specialists.gap-agent]\nenabled = true\n") == 0);
    pid_t broker = testbroker_start(env, 0, NULL);
    CHECK(broker > 0);
    /* Its stdout and stderr (no JSON object there) in follow.log; spawned, so a failed
     * check does not leave it running (stopped, perhaps). */
    snprintf(out, sizeof out, "%s/follow.log", env->dir);
    /* From the start of the store: what it prints does not depend on when it subscribed. */
    char *argv[] = {(char *)testenv_bin("pan"), "events", "--follow", "--since", "0", "--json",
                    NULL};
    pid_t follower = testenv_spawn(env, "follow", argv);
    CHECK(follower > 0);
    client_t *client = testbroker_client(env);
    /* Two events printed: the first may come from the replay at its start, the second only
     * from the live stream (a follower that replayed waits for a live event), so it is
     * following live when it is stopped. */
    CHECK_INT(testbroker_submit(client, "gap-first", "gap-agent", NULL, NULL), 0);
    CHECK(s_printed(out, "gap-first"));
    testenv_sleep_ms(300);
    CHECK_INT(testbroker_submit(client, "gap-second", "gap-agent", NULL, NULL), 0);
    CHECK(s_printed(out, "gap-second"));
    s_burst_while_stopped(client, follower, "gap");
    /* One more event after it wakes: the gap shows, and is filled. */
    testenv_sleep_ms(500);
    CHECK_INT(testbroker_submit(client, "gap-last", "gap-agent", NULL, NULL), 0);
    CHECK(s_printed(out, "gap-last"));
    /* Again, with no event after the burst: the last ones published were dropped. */
    s_burst_while_stopped(client, follower, "tail");
    char last[32];
    snprintf(last, sizeof last, "\"tail-%05d\"", EVENTS - 1);
    bool caught_up = s_printed(out, last);
    testenv_signal(follower, SIGKILL);
    testenv_wait(env, follower, 5000);
    CHECK(caught_up);
    char *text = testenv_read_file(out);
    CHECK(text != NULL);
    static int64_t seqs[2 * EVENTS + 16];
    int n = text ? s_seqs(text, seqs, 2 * EVENTS + 16) : 0;
    free(text);
    /* gap-first, gap-second, the EVENTS in between, gap-last and the EVENTS after it:
     * every seq once, none missing. */
    CHECK_INT(n, 2 * EVENTS + 3);
    int out_of_order = 0;
    for (int i = 1; i < n; i++)
        out_of_order += seqs[i] != seqs[i - 1] + 1;
    CHECK_INT(out_of_order, 0);
    client_destroy(&client);
    testenv_destroy(&env);
    return check_exit_code("test_events_gap");
}
