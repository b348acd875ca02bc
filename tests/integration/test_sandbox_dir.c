/* test_sandbox_dir: the directory a branch's commands run in cannot bring back what the
 * sandbox hides. Through `pan tests sandbox` (the sandbox the services use):
 *
 *   parent        the directory holds $PANOPTICON_HOME and $HOME (a workspace root above
 *                 the state home): the commands run there, see their own files, but
 *                 neither the keys nor ~/.ssh (binding the directory would have shown them)
 *   hidden        the directory is $HOME, $PANOPTICON_HOME or /tmp itself: refused, saying
 *                 why
 *   root          the directory is /: refused (it would be writable)
 *
 * Where bwrap does not work here (the test looks for itself), it exits 77. */
#include "check.h"
#include "testenv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static testenv_t *s_env;

/* Runs `pan tests sandbox --dir DIR -- COMMAND` (stdout and stderr) into out; returns its
 * exit code. */
static int s_pan(const char *dir, const char *command, char *out, size_t size)
{
    char line[4096];
    snprintf(line, sizeof line, "'%s' tests sandbox --dir '%s' -- '%s' 2>&1",
             testenv_bin("pan"), dir, command);
    FILE *pipe = popen(line, "r");
    CHECK(pipe != NULL);
    size_t len = fread(out, 1, size - 1, pipe);
    out[len] = '\0';
    int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
    if (!testenv_bwrap_works(false)) {
        fprintf(stderr, "test_sandbox_dir: SKIPPED: bwrap does not work on this machine\n");
        return 77;
    }
    s_env = testenv_new("sandbox-dir");
    CHECK(s_env != NULL);
    char path[700], home[600], out[8192];
    snprintf(home, sizeof home, "%s/userhome", s_env->dir);
    snprintf(path, sizeof path, "%s/.ssh/id_rsa", home);
    CHECK(testenv_write_file(path, "sekrit-ssh-key\n") == 0);
    snprintf(path, sizeof path, "%s/keys/client_secret", s_env->home);
    CHECK(testenv_write_file(path, "sekrit-client-secret\n") == 0);
    snprintf(path, sizeof path, "%s/own.txt", s_env->dir);
    CHECK(testenv_write_file(path, "own-file\n") == 0);
    setenv("HOME", home, 1);

    /* parent: the state home and the home are inside the directory. */
    char command[1400];
    snprintf(command, sizeof command,
             "cat own.txt; cat %s/keys/client_secret %s/.ssh/id_rsa; echo written > new.txt",
             s_env->home, home);
    int code = s_pan(s_env->dir, command, out, sizeof out);
    if (strstr(out, "own-file") == NULL || strstr(out, "sekrit") != NULL)
        fprintf(stderr, "test_sandbox_dir: parent: exit %d:\n%s\n", code, out);
    CHECK(strstr(out, "pan: sandbox bwrap") != NULL);
    CHECK(strstr(out, "own-file") != NULL);
    CHECK(strstr(out, "sekrit") == NULL);
    snprintf(path, sizeof path, "%s/new.txt", s_env->dir);
    char *written = testenv_read_file(path);
    CHECK(written != NULL && strcmp(written, "written\n") == 0);
    free(written);

    /* hidden: the directory is a hidden place itself. */
    const char *const hidden[] = {home, s_env->home, "/tmp", NULL};
    for (size_t i = 0; hidden[i] != NULL; i++) {
        snprintf(command, sizeof command, "echo RAN; cat .ssh/id_rsa keys/client_secret");
        code = s_pan(hidden[i], command, out, sizeof out);
        if (code == 0 || strstr(out, "is a place the sandbox hides") == NULL)
            fprintf(stderr, "test_sandbox_dir: %s: exit %d:\n%s\n", hidden[i], code, out);
        CHECK(code != 0);
        CHECK(strstr(out, "is a place the sandbox hides") != NULL);
        CHECK(strstr(out, "RAN") == NULL);
        CHECK(strstr(out, "sekrit") == NULL);
    }

    /* root: / would be writable. */
    code = s_pan("/", "echo RAN", out, sizeof out);
    CHECK(code != 0);
    CHECK(strstr(out, "the directory to run in is /") != NULL);
    CHECK(strstr(out, "RAN") == NULL);

    testenv_destroy(&s_env);
    return check_exit_code("test_sandbox_dir");
}
