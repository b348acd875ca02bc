/* cloister-test stops a running test command when the broker cancels the task (the command
 * and what it started die, the worker takes the next task at once) and on SIGTERM (the task
 * is released back to the queue, the service exits 0, nothing is left running). */
#include "test_test_service_harness.h"

#include "testbroker.h"

static const char *const HANGING = "echo $$ > shell.pid\n"
                                   "sleep 60 &\n"
                                   "echo $! > child.pid\n"
                                   "echo collecting tests\n"
                                   "wait\n";

/* Makes a hanging project; returns its path (static slot). */
static const char *s_hanging(harness_t *h, const char *name)
{
    tsh_file(h, name, "tests.sh", HANGING);
    return tsh_file(h, name, "Makefile", "test:\n\t@sh tests.sh\n");
}

static pid_t s_read_pid(const char *dir, const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = testenv_read_file(path);
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid;
}

/* Waits for the task's "collecting tests" output; true when it came. */
static bool s_wait_output(harness_t *h, const char *task)
{
    for (int waited = 0; waited < 5000; waited += 20) {
        for (int i = 0; (i = harness_find(h, i, "task.progress", task)) >= 0; i++) {
            if (strstr(harness_field(h->events[i], "text"), "collecting tests") != NULL)
                return true;
        }
        harness_pump(h, 20);
    }
    return false;
}

/* True when the project's shell and its background sleep are gone (waits up to 3 s);
 * kills any survivor so the test leaves nothing behind. */
static bool s_all_gone(const char *dir)
{
    pid_t shell = s_read_pid(dir, "shell.pid");
    pid_t child = s_read_pid(dir, "child.pid");
    if (shell <= 0 || child <= 0)
        return false;
    for (int i = 0; i < 150; i++) {
        if (harness_pid_gone(shell) && harness_pid_gone(child))
            return true;
        testenv_sleep_ms(20);
    }
    kill(shell, SIGKILL);
    kill(child, SIGKILL);
    return false;
}

static void s_cancel(harness_t *h)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", s_hanging(h, "hang-cancel"));
    tsh_submit(h, "c1", 60, "{\"workspace\": \"%s\"}", dir);
    CHECK(s_wait_output(h, "c1"));
    client_t *client = testbroker_client(h->env);
    wire_writer_t *cancel = wire_writer_new();
    wire_writer_start(cancel, MSG_CANCEL_TASK);
    wire_put_str(cancel, FIELD_ID, "c1");
    wire_msg_t *reply = NULL;
    CHECK_INT(client_call(client, cancel, &reply), 0);
    wire_msg_destroy(&reply);
    wire_writer_destroy(&cancel);
    client_destroy(&client);
    CHECK(harness_wait(h, "task.cancelled", "c1", 5000) != NULL);
    CHECK(s_all_gone(dir));

    /* The worker is free at once (not after the 60 s lease). */
    const char *pass = tsh_make_project(h, "pass", TSH_PYTEST_PASS, 0);
    tsh_submit(h, "p1", 30, "{\"workspace\": \"%s\"}", pass);
    json_t *end = tsh_end(h, "p1", 5000);
    CHECK_STR(tsh_event(end), "task.done");
    CHECK_STR(tsh_result_str(end, "TEST_RESULT"), "PASS");
}

static void s_sigterm(harness_t *h, pid_t service)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s", s_hanging(h, "hang-term"));
    tsh_submit(h, "c2", 60, "{\"workspace\": \"%s\"}", dir);
    CHECK(s_wait_output(h, "c2"));
    kill(service, SIGTERM);
    int status = testenv_wait(h->env, service, 5000);
    CHECK(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(s_all_gone(dir));
    client_t *client = testbroker_client(h->env);
    char state[32] = "";
    for (int i = 0; i < 100 && strcmp(state, "queued") != 0; i++) {
        testbroker_state(client, "c2", state, sizeof state);
        if (strcmp(state, "queued") != 0)
            testenv_sleep_ms(20);
    }
    CHECK_STR(state, "queued");
    client_destroy(&client);
}

int main(void)
{
    harness_t *h = harness_new("test-service-cancel");
    if (h == NULL)
        return 1;
    /* The pids the commands write down must be this namespace's: no bwrap pid namespace
     * (the sandbox's own clean-up is test_sandbox's). */
    tsh_config(h, "[tests]\nsandbox = \"none\"\n");
    pid_t service = tsh_service(h, "t1");
    s_cancel(h);
    s_sigterm(h, service);
    harness_destroy(&h);
    return check_exit_code("test_test_service_cancel");
}
