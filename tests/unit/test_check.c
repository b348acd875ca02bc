/* The test harness itself: a failed CHECK stops the program with status 1, its hook runs
 * first, and a live test environment is still cleaned up (its processes killed, its
 * directory removed). The failing program is a forked child; the parent checks. */
#include "check.h"
#include "testenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void s_hook(void *arg)
{
    /* Proves the hook ran: the parent looks for this file. */
    testenv_write_file(arg, "hook ran\n");
}

static bool s_running(void *marker)
{
    return testenv_process_running(marker);
}

/* The child: a live environment with a process, then a failing check. Exit status 3 when
 * the process never ran (its being gone afterwards would prove nothing). */
static void s_failing_child(const char *report, const char *dir_file)
{
    testenv_t *env = testenv_new("check-child");
    if (env == NULL)
        _exit(3);
    char *const argv[] = {"/bin/sleep", "53.917", NULL};
    if (testenv_spawn(env, NULL, argv) < 0 || !testenv_wait_until(s_running, "sleep 53.917", 3000))
        _exit(3);
    if (testenv_write_file(dir_file, env->dir) != 0)
        _exit(3);
    check_on_fail(s_hook, (void *)report);
    CHECK(1 + 1 == 3);
    _exit(0); /* not reached: the check above stops the program */
}

int main(void)
{
    char report[] = "/tmp/cloister-check-report-XXXXXX";
    int fd = mkstemp(report);
    CHECK(fd >= 0);
    close(fd);
    char dir_file[64];
    snprintf(dir_file, sizeof dir_file, "%s.dir", report);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0)
        s_failing_child(report, dir_file);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    char *text = testenv_read_file(report);
    CHECK(text != NULL);
    CHECK_STR(text, "hook ran\n");
    free(text);
    char *dir = testenv_read_file(dir_file);
    CHECK(dir != NULL && dir[0] == '/');
    struct stat st;
    CHECK(stat(dir, &st) != 0); /* removed at exit */
    free(dir);
    CHECK(testenv_wait_until(testenv_process_gone, "sleep 53.917", 3000));
    unlink(report);
    unlink(dir_file);
    return check_exit_code("test_check");
}
