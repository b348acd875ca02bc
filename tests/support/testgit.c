/* testgit: fixture git repositories for integration tests (see testgit.h). */
#include "testgit.h"

#include "check.h"
#include "testenv.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_MAX_ARGS 32

static char s_out[TESTGIT_OUT_MAX];

void testgit_env(const char *home)
{
    mkdir(home, 0700);
    setenv("HOME", home, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    setenv("GIT_AUTHOR_NAME", "Test", 1);
    setenv("GIT_AUTHOR_EMAIL", "test@example.com", 1);
    setenv("GIT_COMMITTER_NAME", "Test", 1);
    setenv("GIT_COMMITTER_EMAIL", "test@example.com", 1);
}

int testgit_run(const char *dir, ...)
{
    char *argv[S_MAX_ARGS];
    int argc = 0;
    argv[argc++] = "git";
    va_list args;
    va_start(args, dir);
    char *arg;
    while ((arg = va_arg(args, char *)) != NULL && argc < S_MAX_ARGS - 1)
        argv[argc++] = arg;
    va_end(args);
    argv[argc] = NULL;
    s_out[0] = '\0';
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        if (chdir(dir) != 0)
            _exit(126);
        dup2(fds[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        close(fds[0]);
        close(fds[1]);
        execvp("git", argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    while ((n = read(fds[0], s_out + used, sizeof s_out - 1 - used)) > 0)
        used += (size_t)n;
    close(fds[0]);
    s_out[used] = '\0';
    while (used > 0 && (s_out[used - 1] == '\n' || s_out[used - 1] == ' '))
        s_out[--used] = '\0';
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char *testgit_out(void)
{
    return s_out;
}

void testgit_rev(const char *dir, const char *rev, char *buf)
{
    buf[0] = '\0';
    int code = testgit_run(dir, "rev-parse", "--verify", "-q", rev, NULL);
    /* 1 is "no such revision"; anything else is a repository git cannot read, which must
     * not read as "" (two of those compare equal: "unchanged"). */
    if (code != 0 && code != 1) {
        fprintf(stderr, "testgit: git rev-parse %s in %s failed (%d)\n", rev, dir, code);
        check_fail();
    }
    if (code == 0 && strlen(s_out) == 40)
        memcpy(buf, s_out, 41);
}

/* Stops the test (a failed check) when a fixture step `what` in `dir` did not work: a
 * fixture that was not made must not let a test that expects a refusal pass. */
static void s_step(int code, const char *what, const char *dir)
{
    if (code != 0) {
        fprintf(stderr, "testgit: %s in %s failed (%d)\n", what, dir, code);
        check_fail();
    }
}

void testgit_commit(const char *dir, const char *file, const char *text, const char *msg)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    s_step(testenv_write_file(path, text), "writing the file to commit", path);
    s_step(testgit_run(dir, "add", file, NULL), "git add", dir);
    s_step(testgit_run(dir, "commit", "-q", "-m", msg, NULL), "git commit", dir);
}

void testgit_fixture(testgit_fixture_t *fixture, const char *dir)
{
    snprintf(fixture->remote, sizeof fixture->remote, "%s/remote.git", dir);
    snprintf(fixture->user, sizeof fixture->user, "%s/user", dir);
    snprintf(fixture->dev, sizeof fixture->dev, "%s/dev", dir);
    s_step(testgit_run(dir, "init", "-q", "--bare", "-b", "main", fixture->remote, NULL),
           "git init --bare", dir);
    s_step(testgit_run(dir, "clone", "-q", fixture->remote, fixture->user, NULL), "git clone",
           dir);
    s_step(testgit_run(fixture->user, "checkout", "-q", "-b", "main", NULL), "git checkout -b main",
           fixture->user);
    testgit_commit(fixture->user, "a.c", "int a(void)\n{\n    return 1;\n}\n", "initial a");
    testgit_commit(fixture->user, "b.c", "int b(void)\n{\n    return 2;\n}\n", "initial b");
    testgit_commit(fixture->user, "c.txt", "notes\n", "initial c");
    s_step(testgit_run(fixture->user, "push", "-q", "origin", "main", NULL), "git push",
           fixture->user);
    s_step(testgit_run(dir, "clone", "-q", fixture->remote, fixture->dev, NULL), "git clone", dir);
}

void testgit_push_branch(const char *clone, const char *branch, const char *file, const char *text)
{
    s_step(testgit_run(clone, "checkout", "-q", "-b", branch, "main", NULL), "git checkout -b",
           clone);
    testgit_commit(clone, file, text, "feature work");
    s_step(testgit_run(clone, "push", "-q", "origin", branch, NULL), "git push", clone);
    s_step(testgit_run(clone, "checkout", "-q", "main", NULL), "git checkout main", clone);
}

void testgit_push_main(const char *clone, const char *file, const char *text)
{
    s_step(testgit_run(clone, "pull", "-q", "origin", "main", NULL), "git pull", clone);
    testgit_commit(clone, file, text, "work on main");
    s_step(testgit_run(clone, "push", "-q", "origin", "main", NULL), "git push", clone);
}
