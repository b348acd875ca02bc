/* pan task fence: does an attempt still hold its task, and `--exec`: run a command only
 * while it does.
 *
 * A worker runs each task at least once, and a stopped worker's command may run on beside
 * the attempt that replaced it: a check made before a side effect does not cover a command
 * frozen (or slowed) after the check. `--exec` keeps checking while the command runs, and
 * kills the command's whole process group once the attempt no longer holds the task. */
#include "pan.h"

#include "clock.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often --exec asks the broker, how long the broker may stay silent before the
 * command is stopped (a lease nobody confirms is not held), and how long a stopped command
 * has between SIGTERM and SIGKILL. */
#define FENCE_CHECK_MS 250
#define FENCE_UNCONFIRMED_MS 10000
#define FENCE_TERM_GRACE_MS 2000

/* What an attempt is: its task, number, and (from a fence token) the worker it runs on. */
typedef struct {
    char id[256];
    int64_t attempt;
    char worker[256]; /* "" when not known (the `<id> <attempt>` form) */
} fence_attempt_t;

/* Reads CLOISTER_FENCE_TOKEN, "<attempt>:<worker id>:<task id>", into `out`. */
static int s_parse_token(const char *token, fence_attempt_t *out, const char *usage)
{
    if (token == NULL || token[0] == '\0')
        return pan_usage(usage, "fence takes a task id and its attempt number, or reads them "
                                "from $CLOISTER_FENCE_TOKEN (set for a worker's command)");
    char *end = NULL;
    errno = 0;
    long long attempt = strtoll(token, &end, 10);
    const char *worker = end != NULL && *end == ':' ? end + 1 : NULL;
    const char *id = worker != NULL ? strchr(worker, ':') : NULL;
    if (errno != 0 || attempt < 1 || id == NULL || id[1] == '\0' ||
        (size_t)(id - worker) >= sizeof out->worker || strlen(id + 1) >= sizeof out->id)
        return pan_usage(usage, "$CLOISTER_FENCE_TOKEN is not <attempt>:<worker>:<task>");
    out->attempt = attempt;
    snprintf(out->worker, sizeof out->worker, "%.*s", (int)(id - worker), worker);
    snprintf(out->id, sizeof out->id, "%s", id + 1);
    return PAN_EXIT_OK;
}

/* Asks the broker once. PAN_EXIT_OK when the attempt holds the task, PAN_EXIT_ERROR with
 * *why filled when it does not, PAN_EXIT_UNREACHABLE when the broker did not answer. */
static int s_holds(const pan_t *pan, const fence_attempt_t *mine, char *why, size_t size)
{
    wire_writer_t *writer = wire_writer_new();
    wire_writer_start(writer, MSG_SHOW_TASK);
    wire_put_str(writer, FIELD_ID, mine->id);
    json_t *task = NULL;
    int code = pan_call(pan, writer, &task);
    wire_writer_destroy(&writer);
    if (code != PAN_EXIT_OK) {
        snprintf(why, size, "the broker did not confirm it");
        return code == PAN_EXIT_UNREACHABLE ? code : PAN_EXIT_ERROR;
    }
    const char *state = pan_json_str(task, "state", "?");
    const char *worker = pan_json_str(task, "worker", "");
    int64_t running = pan_json_int(task, "attempt", 0);
    bool holds = strcmp(state, "running") == 0 && running == mine->attempt &&
                 (mine->worker[0] == '\0' || strcmp(worker, mine->worker) == 0);
    if (!holds)
        snprintf(why, size, "it is %s, at attempt %lld%s%s", state, (long long)running,
                 worker[0] ? " on " : "", worker);
    json_decref(task);
    return holds ? PAN_EXIT_OK : PAN_EXIT_ERROR;
}

static void s_sleep_ms(int ms)
{
    struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* The exit code pan gives for a command's wait status. */
static int s_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Stops the command's process group: SIGTERM, then SIGKILL after the grace. */
static void s_stop_group(pid_t pid)
{
    kill(-pid, SIGTERM);
    int64_t until = clock_now_ms() + FENCE_TERM_GRACE_MS;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0 && clock_now_ms() < until)
        s_sleep_ms(20);
    kill(-pid, SIGKILL); /* what is left of the group, the command itself included */
    waitpid(pid, &status, 0);
}

/* Runs argv in a process group of its own while the attempt holds the task. A broker that
 * does not answer (restarting) is asked again for up to FENCE_UNCONFIRMED_MS first. */
static int s_exec(const pan_t *pan, const fence_attempt_t *mine, char **argv)
{
    char why[600];
    int64_t give_up = clock_now_ms() + FENCE_UNCONFIRMED_MS;
    int code = s_holds(pan, mine, why, sizeof why);
    while (code == PAN_EXIT_UNREACHABLE && clock_now_ms() < give_up) {
        s_sleep_ms(FENCE_CHECK_MS);
        code = s_holds(pan, mine, why, sizeof why);
    }
    if (code != PAN_EXIT_OK) {
        fprintf(stderr, "pan: attempt %lld of %s does not hold the task (%s): not running %s\n",
                (long long)mine->attempt, mine->id, why, argv[0]);
        return code;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pan: cannot start %s: %s\n", argv[0], strerror(errno));
        return PAN_EXIT_ERROR;
    }
    if (pid == 0) {
        setpgid(0, 0);
        execvp(argv[0], argv);
        fprintf(stderr, "pan: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    int64_t confirmed = clock_now_ms(), next_check = confirmed + FENCE_CHECK_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            /* The group may still hold what the command left behind: it goes too. */
            kill(-pid, SIGKILL);
            return s_exit_code(status);
        }
        int64_t now = clock_now_ms();
        if (now < next_check) {
            s_sleep_ms(20);
            continue;
        }
        code = s_holds(pan, mine, why, sizeof why);
        now = clock_now_ms();
        next_check = now + FENCE_CHECK_MS;
        if (code == PAN_EXIT_OK) {
            confirmed = now;
            continue;
        }
        if (code == PAN_EXIT_UNREACHABLE && now - confirmed < FENCE_UNCONFIRMED_MS)
            continue;
        fprintf(stderr, "pan: attempt %lld of %s no longer holds the task (%s): stopping %s "
                        "and its process group\n",
                (long long)mine->attempt, mine->id, why, argv[0]);
        s_stop_group(pid);
        return PAN_EXIT_ERROR;
    }
}

int cmd_task_fence(const pan_t *pan, int argc, char **argv, const char *usage)
{
    int exec_at = -1;
    for (int i = 0; i < argc && exec_at < 0; i++)
        if (strcmp(argv[i], "--exec") == 0)
            exec_at = i;
    int positional = exec_at < 0 ? argc : exec_at;
    if (exec_at >= 0 && exec_at + 1 >= argc)
        return pan_usage(usage, "--exec takes a command to run");
    fence_attempt_t mine = {0};
    int code = PAN_EXIT_OK;
    if (positional == 0) {
        code = s_parse_token(getenv("CLOISTER_FENCE_TOKEN"), &mine, usage);
    } else if (positional == 2 && pan_parse_int(argv[1], 1, INT32_MAX, &mine.attempt)) {
        code = pan_task_id_resolve(pan, argv[0], mine.id, sizeof mine.id);
    } else {
        return pan_usage(usage, "fence takes a task id and its attempt number (or reads "
                                "$CLOISTER_FENCE_TOKEN), then optionally --exec CMD [ARG...]");
    }
    if (code != PAN_EXIT_OK)
        return code;
    if (exec_at >= 0)
        return s_exec(pan, &mine, argv + exec_at + 1);
    char why[600];
    code = s_holds(pan, &mine, why, sizeof why);
    if (code == PAN_EXIT_OK)
        printf("attempt %lld of %s holds the task\n", (long long)mine.attempt, mine.id);
    else if (code == PAN_EXIT_ERROR)
        fprintf(stderr, "pan: attempt %lld of %s no longer holds the task: %s\n",
                (long long)mine.attempt, mine.id, why);
    return code;
}
