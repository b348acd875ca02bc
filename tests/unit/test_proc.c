/* Unit tests for proc: lines in order, big stdin without deadlock, environment scrubbing,
 * deadlines that kill the whole process group, exit codes and signals, early stop from
 * the line callback, cancellation, stderr tail. Children are small sh/cat/env programs. */
#include "check.h"
#include "clock.h"
#include "failure.h"
#include "proc.h"
#include "testenv.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LINES 4096

typedef struct {
    char *lines[MAX_LINES];
    int64_t at_ms[MAX_LINES];
    size_t count;
    size_t bytes;
    int stop_at; /* return stop_code when this line number (1-based) arrives; 0 = never */
    int stop_code;
} collector_t;

static int s_collect(void *arg, const char *line, size_t len)
{
    collector_t *c = arg;
    CHECK_INT(strlen(line), len);
    if (c->count < MAX_LINES) {
        c->lines[c->count] = strdup(line);
        c->at_ms[c->count] = clock_now_ms();
    }
    c->count++;
    c->bytes += len + 1;
    if (c->stop_at > 0 && (int)c->count == c->stop_at)
        return c->stop_code;
    return 0;
}

static void s_collector_clear(collector_t *c)
{
    for (size_t i = 0; i < c->count && i < MAX_LINES; i++)
        free(c->lines[i]);
    memset(c, 0, sizeof *c);
}

/* Number of live (non-zombie) processes whose process group is pgid. */
static int s_group_alive(pid_t pgid)
{
    DIR *dir = opendir("/proc");
    if (dir == NULL)
        return -1;
    int alive = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* pid (comm) state ppid pgrp ... ; comm may contain spaces, so parse after ')'. */
        char *close_paren = strrchr(buf, ')');
        char state;
        int ppid, pgrp;
        if (close_paren && sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 &&
            pgrp == pgid && state != 'Z')
            alive++;
    }
    closedir(dir);
    return alive;
}

static bool s_group_gone_pred(void *arg)
{
    return s_group_alive(*(pid_t *)arg) == 0;
}

/* True once no live process is left in group pgid. A process that got SIGKILL may still
 * be finishing its exit for a moment after its pipes closed, so allow it a little time. */
static bool s_group_gone(pid_t pgid)
{
    return testenv_wait_until(s_group_gone_pred, &pgid, 2000);
}

static void test_lines_in_order(void)
{
    collector_t c = {0};
    char *argv[] = {"sh", "-c",
                    "i=0; while [ $i -lt 500 ]; do echo line$i; i=$((i+1)); done; printf tail",
                    NULL};
    proc_options_t opt = {.argv = argv, .on_line = s_collect, .on_line_arg = &c};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    const proc_status_t *st = proc_status(proc);
    CHECK(!st->running);
    CHECK(st->exited);
    CHECK_INT(st->exit_code, 0);
    CHECK_INT(st->stopped_by, PROC_STOP_NONE);
    CHECK_INT(c.count, 501);
    CHECK_INT(st->lines, 501);
    int in_order = 1;
    for (int i = 0; i < 500; i++) {
        char want[32];
        snprintf(want, sizeof want, "line%d", i);
        if (strcmp(c.lines[i], want) != 0)
            in_order = 0;
    }
    CHECK(in_order);
    CHECK_STR(c.lines[500], "tail"); /* a last line without a newline still arrives */
    proc_destroy(&proc);
    CHECK(proc == NULL);
    s_collector_clear(&c);
}

static void test_big_stdin(void)
{
    /* 1 MiB through cat: cat writes back while we write, so both pipes fill up unless
     * writing and reading are interleaved. */
    size_t size = 1024 * 1024;
    char *input = malloc(size);
    for (size_t i = 0; i < size; i++)
        input[i] = (i % 64 == 63) ? '\n' : (char)('a' + i % 26);
    collector_t c = {0};
    char *argv[] = {"cat", NULL};
    proc_options_t opt = {.argv = argv,
                          .stdin_data = input,
                          .stdin_len = size,
                          .on_line = s_collect,
                          .on_line_arg = &c,
                          .timeout_ms = 20000};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    const proc_status_t *st = proc_status(proc);
    CHECK(st->exited);
    CHECK_INT(st->exit_code, 0);
    CHECK_INT(st->stopped_by, PROC_STOP_NONE);
    CHECK_INT(c.bytes, size);
    CHECK_INT(c.count, size / 64);
    CHECK(c.count > 0 && strncmp(c.lines[0], input, 63) == 0);
    proc_destroy(&proc);
    s_collector_clear(&c);

    /* A child that never reads its stdin: the write fails with EPIPE, not SIGPIPE. */
    char *ignore[] = {"sh", "-c", "exit 0", NULL};
    opt.argv = ignore;
    CHECK_INT(proc_run(&proc, &opt), 0);
    CHECK(proc_status(proc)->exited);
    CHECK_INT(proc_status(proc)->exit_code, 0);
    proc_destroy(&proc);
    free(input);
}

static void test_env_scrub_and_set(void)
{
    setenv("PROCTEST_DROP_A", "1", 1);
    setenv("PROCTEST_DROP_B", "1", 1);
    setenv("PROCTEST_EXACT", "1", 1);
    setenv("PROCTEST_EXACTLY", "kept", 1);
    setenv("PROCTEST_REPLACED", "old", 1);
    const char *remove[] = {"PROCTEST_DROP_*", "PROCTEST_EXACT", NULL};
    const char *set[] = {"PROCTEST_NEW=fresh", "PROCTEST_REPLACED=new", NULL};
    collector_t c = {0};
    char *argv[] = {"env", NULL};
    proc_options_t opt = {.argv = argv,
                          .env_remove = remove,
                          .env_set = set,
                          .on_line = s_collect,
                          .on_line_arg = &c};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    int drop = 0, exact = 0, exactly = 0, fresh = 0, replaced_new = 0, replaced_old = 0, path = 0;
    for (size_t i = 0; i < c.count && i < MAX_LINES; i++) {
        const char *l = c.lines[i];
        drop += strncmp(l, "PROCTEST_DROP_", 14) == 0;
        exact += strcmp(l, "PROCTEST_EXACT=1") == 0;
        exactly += strcmp(l, "PROCTEST_EXACTLY=kept") == 0;
        fresh += strcmp(l, "PROCTEST_NEW=fresh") == 0;
        replaced_new += strcmp(l, "PROCTEST_REPLACED=new") == 0;
        replaced_old += strcmp(l, "PROCTEST_REPLACED=old") == 0;
        path += strncmp(l, "PATH=", 5) == 0;
    }
    CHECK_INT(drop, 0);
    CHECK_INT(exact, 0);
    CHECK_INT(exactly, 1);
    CHECK_INT(fresh, 1);
    CHECK_INT(replaced_new, 1);
    CHECK_INT(replaced_old, 0);
    CHECK_INT(path, 1);
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_cwd(void)
{
    collector_t c = {0};
    char *argv[] = {"pwd", NULL};
    proc_options_t opt = {.argv = argv, .cwd = "/tmp", .on_line = s_collect, .on_line_arg = &c};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    CHECK_INT(c.count, 1);
    if (c.count == 1)
        CHECK_STR(c.lines[0], "/tmp");
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_timeout_kills_group(void)
{
    char *argv[] = {"sh", "-c", "sleep 100 & sleep 100", NULL};
    proc_options_t opt = {.argv = argv, .timeout_ms = 300, .kill_grace_ms = 1000};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_start(&proc, &opt), 0);
    pid_t pgid = proc_pid(proc);
    CHECK(s_group_alive(pgid) >= 1);
    while (proc_step(proc, -1) == 0) {
    }
    int64_t took = clock_now_ms() - t0;
    const proc_status_t *st = proc_status(proc);
    CHECK_INT(st->stopped_by, PROC_STOP_TIMEOUT);
    CHECK(!st->exited);
    CHECK_INT(st->term_signal, SIGTERM);
    CHECK(took >= 300 && took < 5000);
    CHECK(s_group_gone(pgid));
    proc_destroy(&proc);
}

/* A descendant in a session of its own (Claude Code runs its Bash tool's commands under
 * setsid) is out of the group's reach: stopping signals its group too, while the leader
 * still runs, so it does not outlive the stop as an orphan. */
static void test_stop_reaches_detached_descendants(void)
{
    /* The time is in a variable so that only the sleep's own command line reads
     * "sleep 58.71", not the shell's: the wait below must see the sleep itself. */
    char *argv[] = {"sh", "-c", "t=58.71; setsid sleep $t & wait", NULL};
    proc_options_t opt = {.argv = argv, .kill_grace_ms = 1000};
    proc_t *proc = NULL;
    CHECK_INT(proc_start(&proc, &opt), 0);
    for (int waited = 0; !testenv_process_running("sleep 58.71") && waited < 5000; waited += 20)
        proc_step(proc, 20);
    CHECK(testenv_process_running("sleep 58.71"));
    proc_stop(proc, PROC_STOP_REQUESTED);
    while (proc_step(proc, -1) == 0) {
    }
    CHECK(testenv_wait_until(testenv_process_gone, "sleep 58.71", 3000));
    proc_destroy(&proc);
}

/* Counts lines, slowly (like parsing JSON), so a flooding child always has more ready. */
static int s_count_line(void *arg, const char *line, size_t len)
{
    (void)line;
    (void)len;
    (*(size_t *)arg)++;
    int64_t until = clock_now_us() + 20;
    while (clock_now_us() < until) {
    }
    return 0;
}

/* A child that writes without pause still meets its deadline: reading is bounded per step. */
static void test_flood_meets_deadline(void)
{
    char *argv[] = {"sh", "-c", "exec yes '{\"type\":\"x\"}'", NULL};
    size_t lines = 0;
    proc_options_t opt = {.argv = argv, .timeout_ms = 500, .kill_grace_ms = 1000,
                          .on_line = s_count_line, .on_line_arg = &lines};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_start(&proc, &opt), 0);
    while (proc_step(proc, -1) == 0) {
    }
    int64_t took = clock_now_ms() - t0;
    CHECK_INT(proc_status(proc)->stopped_by, PROC_STOP_TIMEOUT);
    CHECK(took < 4000); /* unbounded reading would never stop; 4 s leaves room for a loaded machine */
    CHECK(lines > 1000);
    proc_destroy(&proc);
}

static void test_term_ignored_then_kill(void)
{
    /* The whole group ignores SIGTERM: SIGKILL follows after the grace period. */
    char *argv[] = {"sh", "-c", "trap '' TERM; sleep 100 & sleep 100", NULL};
    proc_options_t opt = {.argv = argv, .timeout_ms = 200, .kill_grace_ms = 300};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_start(&proc, &opt), 0);
    pid_t pgid = proc_pid(proc);
    while (proc_step(proc, -1) == 0) {
    }
    int64_t took = clock_now_ms() - t0;
    const proc_status_t *st = proc_status(proc);
    CHECK_INT(st->stopped_by, PROC_STOP_TIMEOUT);
    CHECK_INT(st->term_signal, SIGKILL);
    CHECK(took >= 500 && took < 5000);
    CHECK(s_group_gone(pgid));
    proc_destroy(&proc);
}

static void test_no_output_watchdog(void)
{
    collector_t c = {0};
    char *argv[] = {"sh", "-c", "echo hi; sleep 0.2; echo again; sleep 100", NULL};
    proc_options_t opt = {.argv = argv,
                          .no_output_timeout_ms = 500,
                          .timeout_ms = 20000,
                          .on_line = s_collect,
                          .on_line_arg = &c};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_run(&proc, &opt), 0);
    int64_t took = clock_now_ms() - t0;
    const proc_status_t *st = proc_status(proc);
    CHECK_INT(st->stopped_by, PROC_STOP_NO_OUTPUT);
    CHECK_INT(c.count, 2);
    CHECK(took >= 700 && took < 5000); /* the watchdog restarts with every output */
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_exit_codes_and_signals(void)
{
    proc_t *proc = NULL;
    char *exit3[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
    proc_options_t opt = {.argv = exit3};
    CHECK_INT(proc_run(&proc, &opt), 0);
    CHECK(proc_status(proc)->exited);
    CHECK_INT(proc_status(proc)->exit_code, 3);
    CHECK_STR(proc_status(proc)->stderr_tail, "oops\n");
    proc_destroy(&proc);

    char *usr1[] = {"sh", "-c", "kill -USR1 $$", NULL};
    opt.argv = usr1;
    CHECK_INT(proc_run(&proc, &opt), 0);
    CHECK(!proc_status(proc)->exited);
    CHECK_INT(proc_status(proc)->term_signal, SIGUSR1);
    proc_destroy(&proc);

    char *missing[] = {"/nonexistent/program", NULL};
    opt.argv = missing;
    CHECK_INT(proc_run(&proc, &opt), FAILURE_NOT_FOUND);
    CHECK(proc == NULL);
    CHECK(strstr(failure_message(), "/nonexistent/program") != NULL);

    char *pwd[] = {"pwd", NULL};
    opt.argv = pwd;
    opt.cwd = "/nonexistent/dir";
    CHECK_INT(proc_run(&proc, &opt), FAILURE_NOT_FOUND);
    CHECK(strstr(failure_message(), "/nonexistent/dir") != NULL);
}

static void test_callback_stops(void)
{
    collector_t c = {.stop_at = 2, .stop_code = 7};
    char *argv[] = {"sh", "-c", "echo a; echo b; echo c; sleep 100", NULL};
    proc_options_t opt = {
        .argv = argv, .on_line = s_collect, .on_line_arg = &c, .timeout_ms = 20000};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_run(&proc, &opt), 0);
    const proc_status_t *st = proc_status(proc);
    CHECK_INT(st->stopped_by, PROC_STOP_CALLBACK);
    CHECK_INT(st->callback_code, 7);
    CHECK_INT(c.count, 2); /* nothing after the stop */
    CHECK(clock_now_ms() - t0 < 5000);
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_step_and_cancel(void)
{
    collector_t c = {0};
    char *argv[] = {"sh", "-c", "echo first; sleep 100", NULL};
    proc_options_t opt = {.argv = argv, .on_line = s_collect, .on_line_arg = &c};
    proc_t *proc = NULL;
    CHECK_INT(proc_start(&proc, &opt), 0);
    pid_t pgid = proc_pid(proc);
    /* The line arrives while the child keeps running; steps return on time. */
    int64_t deadline = clock_now_ms() + 5000;
    while (c.count == 0 && clock_now_ms() < deadline)
        CHECK_INT(proc_step(proc, 100), 0);
    CHECK_INT(c.count, 1);
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_step(proc, 100), 0);
    int64_t waited = clock_now_ms() - t0;
    CHECK(waited >= 90 && waited < 3000);
    CHECK(proc_status(proc)->running);

    proc_stop(proc, PROC_STOP_REQUESTED);
    while (proc_step(proc, 100) == 0) {
    }
    CHECK_INT(proc_status(proc)->stopped_by, PROC_STOP_REQUESTED);
    CHECK_INT(proc_status(proc)->term_signal, SIGTERM);
    CHECK_INT(proc_step(proc, 100), 1);
    CHECK(s_group_gone(pgid));
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_leftovers_killed_at_exit(void)
{
    /* The leader exits while a background child still holds stdout: we do not wait for
     * it, and it does not survive. */
    collector_t c = {0};
    char *argv[] = {"sh", "-c", "sleep 100 & echo done", NULL};
    proc_options_t opt = {.argv = argv, .on_line = s_collect, .on_line_arg = &c};
    proc_t *proc = NULL;
    int64_t t0 = clock_now_ms();
    CHECK_INT(proc_start(&proc, &opt), 0);
    pid_t pgid = proc_pid(proc);
    while (proc_step(proc, -1) == 0) {
    }
    CHECK(clock_now_ms() - t0 < 3000);
    CHECK(proc_status(proc)->exited);
    CHECK_INT(proc_status(proc)->exit_code, 0);
    CHECK_INT(c.count, 1);
    CHECK(s_group_gone(pgid));
    proc_destroy(&proc);
    s_collector_clear(&c);
}

static void test_stderr_tail_and_long_lines(void)
{
    char *argv[] = {"sh", "-c",
                    "i=0; while [ $i -lt 300 ]; do echo err$i >&2; i=$((i+1)); done;"
                    "head -c 5000 /dev/zero | tr '\\0' x; echo; echo short",
                    NULL};
    collector_t c = {0};
    proc_options_t opt = {
        .argv = argv, .stderr_cap = 64, .max_line = 1000, .on_line = s_collect, .on_line_arg = &c};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    const proc_status_t *st = proc_status(proc);
    CHECK(strlen(st->stderr_tail) <= 64);
    size_t len = strlen(st->stderr_tail);
    CHECK(len >= 7 && strcmp(st->stderr_tail + len - 7, "err299\n") == 0);
    CHECK_INT(st->dropped_lines, 1);
    CHECK_INT(c.count, 1);
    if (c.count == 1)
        CHECK_STR(c.lines[0], "short");
    proc_destroy(&proc);
    s_collector_clear(&c);
}

/* A NUL byte on stderr does not hide the rest of the tail. */
static void test_stderr_nul(void)
{
    char *argv[] = {"sh", "-c", "printf 'before\\000after\\n' >&2", NULL};
    proc_options_t opt = {.argv = argv};
    proc_t *proc = NULL;
    CHECK_INT(proc_run(&proc, &opt), 0);
    CHECK_STR(proc_status(proc)->stderr_tail, "before?after\n");
    proc_destroy(&proc);
}

static void test_kill_group(void)
{
    char *argv[] = {"sleep", "100", NULL};
    proc_options_t opt = {.argv = argv};
    proc_t *proc = NULL;
    CHECK_INT(proc_start(&proc, &opt), 0);
    CHECK_INT(proc_kill_group(proc_pid(proc), SIGKILL), 0);
    while (proc_step(proc, -1) == 0) {
    }
    CHECK_INT(proc_status(proc)->term_signal, SIGKILL);
    CHECK_INT(proc_status(proc)->stopped_by, PROC_STOP_NONE);
    proc_destroy(&proc);
    CHECK_INT(proc_kill_group(0, SIGKILL), FAILURE_NOT_FOUND);
}

/* The process running a child dies by kill -9 (nothing of ours can act): the child and
 * whatever it started still go, so a retried task never runs next to its first attempt. */
static void test_owner_killed(void)
{
    int ready[2];
    CHECK_INT(pipe(ready), 0);
    pid_t owner = fork();
    if (owner == 0) {
        close(ready[0]);
        /* A program with a background grandchild, both in the group. */
        char *argv[] = {"sh", "-c", "sleep 100 & echo started; wait", NULL};
        proc_options_t opt = {.argv = argv};
        proc_t *proc = NULL;
        if (proc_start(&proc, &opt) != 0)
            _exit(1);
        pid_t pgid = proc_pid(proc);
        ssize_t wrote = write(ready[1], &pgid, sizeof pgid);
        (void)wrote;
        while (proc_step(proc, -1) == 0) {
        }
        _exit(0);
    }
    close(ready[1]);
    pid_t pgid = 0;
    CHECK(read(ready[0], &pgid, sizeof pgid) == (ssize_t)sizeof pgid);
    close(ready[0]);
    /* Wait until the program and its grandchild run (sh + sleep). */
    for (int i = 0; i < 200 && s_group_alive(pgid) < 2; i++)
        testenv_sleep_ms(10);
    CHECK_INT(s_group_alive(pgid), 2);
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);
    CHECK(s_group_gone(pgid));
}

/* A program that makes itself a process-group leader (timeout(1) does) is still the
 * group we stop: its group is the one proc made for it. */
static void test_program_leads_own_group(void)
{
    char *argv[] = {"timeout", "100", "sleep", "77", NULL};
    proc_options_t opt = {.argv = argv, .timeout_ms = 300, .kill_grace_ms = 300};
    proc_t *proc = NULL;
    CHECK_INT(proc_start(&proc, &opt), 0);
    pid_t pgid = proc_pid(proc);
    while (proc_step(proc, -1) == 0) {
    }
    CHECK_INT(proc_status(proc)->stopped_by, PROC_STOP_TIMEOUT);
    CHECK_INT(proc_status(proc)->term_signal, SIGTERM);
    CHECK(s_group_gone(pgid));
    proc_destroy(&proc);
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* proc must survive a child that stops reading on its own */
    test_lines_in_order();
    test_big_stdin();
    test_env_scrub_and_set();
    test_cwd();
    test_timeout_kills_group();
    test_stop_reaches_detached_descendants();
    test_flood_meets_deadline();
    test_term_ignored_then_kill();
    test_no_output_watchdog();
    test_exit_codes_and_signals();
    test_callback_stops();
    test_step_and_cancel();
    test_leftovers_killed_at_exit();
    test_stderr_tail_and_long_lines();
    test_kill_group();
    test_stderr_nul();
    test_owner_killed();
    test_program_leads_own_group();
    return check_exit_code("test_proc");
}
