/* testenv: temporary directories and child processes for integration tests. */
#include "testenv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void testenv_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Environments not destroyed yet, cleaned up at exit (a failed CHECK exits), and the
 * process that made them: a forked child's exit must not kill its parent's processes. */
#define TESTENV_MAX_LIVE 16
static testenv_t *s_live[TESTENV_MAX_LIVE];
static pid_t s_owner;

static void s_cleanup_at_exit(void)
{
    if (getpid() != s_owner)
        return;
    for (int i = 0; i < TESTENV_MAX_LIVE; i++)
        if (s_live[i] != NULL)
            testenv_destroy(&s_live[i]);
}

static void s_register(testenv_t *self)
{
    if (s_owner == 0) {
        s_owner = getpid();
        atexit(s_cleanup_at_exit);
    }
    for (int i = 0; i < TESTENV_MAX_LIVE; i++) {
        if (s_live[i] == NULL) {
            s_live[i] = self;
            return;
        }
    }
}

static void s_unregister(const testenv_t *self)
{
    for (int i = 0; i < TESTENV_MAX_LIVE; i++)
        if (s_live[i] == self)
            s_live[i] = NULL;
}

testenv_t *testenv_new(const char *name)
{
    testenv_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(self->dir, sizeof self->dir, "%s/cloister-%s-XXXXXX", base, name);
    if (mkdtemp(self->dir) == NULL) {
        fprintf(stderr, "testenv: mkdtemp %s: %s\n", self->dir, strerror(errno));
        free(self);
        return NULL;
    }
    snprintf(self->home, sizeof self->home, "%s/home", self->dir);
    mkdir(self->home, 0700);
    snprintf(self->in_ep, sizeof self->in_ep, "ipc://%s/in.sock", self->dir);
    snprintf(self->events_ep, sizeof self->events_ep, "ipc://%s/events.sock", self->dir);
    snprintf(self->control_ep, sizeof self->control_ep, "ipc://%s/control.sock", self->dir);
    setenv("PANOPTICON_HOME", self->home, 1);
    setenv("CLOISTER_IN", self->in_ep, 1);
    setenv("CLOISTER_EVENTS", self->events_ep, 1);
    setenv("CLOISTER_CONTROL", self->control_ep, 1);
    /* The test's repositories are made in its directory, not under $HOME. */
    setenv("CLOISTER_WORKSPACE_ROOTS", self->dir, 1);
    setenv("CLOISTER_WEB_PORT", "0", 1); /* a dashboard started here takes a free port */
    s_register(self);
    return self;
}

static int s_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void testenv_destroy(testenv_t **self_p)
{
    testenv_t *self = *self_p;
    if (self == NULL)
        return;
    s_unregister(self);
    for (int i = 0; i < self->nprocs; i++) {
        if (self->procs[i] > 0) {
            kill(-self->procs[i], SIGKILL);
            kill(self->procs[i], SIGKILL);
            waitpid(self->procs[i], NULL, 0);
        }
    }
    if (self->mounted[0] != '\0')
        umount2(self->mounted, MNT_DETACH);
    if (getenv("CLOISTER_KEEP_TESTDIR") == NULL)
        nftw(self->dir, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    else
        fprintf(stderr, "testenv: kept %s\n", self->dir);
    free(self);
    *self_p = NULL;
}

/* Writes `text` to the /proc file `path`. */
static bool s_write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY);
    bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Enters a mount namespace of its own (and, not root, a user namespace where it is root),
 * whose mounts nobody else sees. */
static bool s_private_mounts(void)
{
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int flags = CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER);
    if (unshare(flags) != 0) {
        perror("testenv: unshare (a test of a full disk mounts a tmpfs)");
        return false;
    }
    if (uid != 0) {
        char map[64];
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
        bool ok = s_write_proc("/proc/self/setgroups", "deny") &&
                  s_write_proc("/proc/self/uid_map", map);
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
        if (!ok || !s_write_proc("/proc/self/gid_map", map)) {
            fprintf(stderr, "testenv: cannot map this user into its namespace\n");
            return false;
        }
    }
    /* Mounts made from now on stay in this namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        perror("testenv: making / private to the test");
        return false;
    }
    return true;
}

bool testenv_mount_tmpfs(testenv_t *self, const char *dir, int mb)
{
    char options[64];
    snprintf(options, sizeof options, "size=%dm", mb);
    if (!s_private_mounts())
        return false;
    if (mount("tmpfs", dir, "tmpfs", 0, options) != 0) {
        fprintf(stderr, "testenv: cannot mount a tmpfs on %s (%s): this test needs to, as root "
                        "or in a user namespace\n", dir, strerror(errno));
        return false;
    }
    snprintf(self->mounted, sizeof self->mounted, "%s", dir);
    return true;
}

const char *testenv_bin(const char *name)
{
    static char slots[4][512];
    static int next;
    char *slot = slots[next++ % 4];
    snprintf(slot, sizeof slots[0], "%s/%s", CLOISTER_BIN_DIR, name);
    return slot;
}

static void s_forget(testenv_t *self, pid_t pid)
{
    for (int i = 0; i < self->nprocs; i++)
        if (self->procs[i] == pid)
            self->procs[i] = 0;
}

pid_t testenv_spawn(testenv_t *self, const char *log_name, char *const argv[])
{
    char log_path[512] = "";
    if (log_name != NULL)
        snprintf(log_path, sizeof log_path, "%s/%s.log", self->dir, log_name);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        if (log_path[0] != '\0') {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        execv(argv[0], argv);
        fprintf(stderr, "testenv: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    /* Reuse a free slot so long tests can start many processes. */
    for (int i = 0; i < self->nprocs; i++) {
        if (self->procs[i] == 0) {
            self->procs[i] = pid;
            return pid;
        }
    }
    if (self->nprocs < TESTENV_MAX_PROCS)
        self->procs[self->nprocs++] = pid;
    return pid;
}

void testenv_signal(pid_t pid, int sig)
{
    if (pid > 0)
        kill(-pid, sig);
}

int testenv_wait(testenv_t *self, pid_t pid, int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            s_forget(self, pid);
            return status;
        }
        if (r < 0) {
            s_forget(self, pid);
            return -1;
        }
        if (waited >= timeout_ms)
            return -1;
        testenv_sleep_ms(10);
    }
}

int testenv_run(testenv_t *self, char *const argv[], char *out, size_t out_size, int timeout_ms)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    self->procs[self->nprocs < TESTENV_MAX_PROCS ? self->nprocs++ : TESTENV_MAX_PROCS - 1] = pid;
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    size_t used = 0;
    int status = -1;
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
        for (;;) {
            char buf[4096];
            ssize_t n = read(fds[0], buf, sizeof buf);
            if (n <= 0)
                break;
            size_t take = (size_t)n;
            if (out != NULL && used + take >= out_size)
                take = used + 1 < out_size ? out_size - used - 1 : 0;
            if (out != NULL)
                memcpy(out + used, buf, take);
            used += take;
        }
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s_forget(self, pid);
            char buf[4096];
            ssize_t n;
            while ((n = read(fds[0], buf, sizeof buf)) > 0) {
                size_t take = (size_t)n;
                if (out != NULL && used + take >= out_size)
                    take = used + 1 < out_size ? out_size - used - 1 : 0;
                if (out != NULL)
                    memcpy(out + used, buf, take);
                used += take;
            }
            close(fds[0]);
            if (out != NULL && out_size > 0)
                out[used < out_size ? used : out_size - 1] = '\0';
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        testenv_sleep_ms(5);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s_forget(self, pid);
    close(fds[0]);
    if (out != NULL && out_size > 0)
        out[used < out_size ? used : out_size - 1] = '\0';
    return -1;
}

bool testenv_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (pred(arg))
            return true;
        testenv_sleep_ms(20);
    }
    return pred(arg);
}

/* Read to the end, not to the size stat reports: /proc files report 0 and would read as
 * "" (a process's command line then never matches, so "no such process" always passes). */
char *testenv_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t size = 0, capacity = 4096;
    char *text = malloc(capacity);
    while (text != NULL) {
        size += fread(text + size, 1, capacity - size - 1, f);
        if (size < capacity - 1)
            break;
        capacity *= 2;
        char *bigger = realloc(text, capacity);
        if (bigger == NULL)
            free(text);
        text = bigger;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (text == NULL || failed) {
        free(text);
        return NULL;
    }
    text[size] = '\0';
    return text;
}

static void s_mkdir_parents(const char *path)
{
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", path);
    for (char *p = copy + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(copy, 0755);
            *p = '/';
        }
    }
}

int testenv_write_file(const char *path, const char *text)
{
    s_mkdir_parents(path);
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t len = strlen(text);
    int rc = fwrite(text, 1, len, f) == len ? 0 : -1;
    fclose(f);
    return rc;
}

bool testenv_process_running(const char *marker)
{
    DIR *proc = opendir("/proc");
    bool found = false;
    struct dirent *entry;
    while (proc != NULL && !found && (entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
            continue;
        char path[300], cmdline[512];
        snprintf(path, sizeof path, "/proc/%s/cmdline", entry->d_name);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(cmdline, 1, sizeof cmdline - 1, f) : 0;
        if (f)
            fclose(f);
        for (size_t i = 0; i < n; i++)
            if (cmdline[i] == '\0')
                cmdline[i] = ' ';
        cmdline[n] = '\0';
        found = strstr(cmdline, marker) != NULL;
    }
    if (proc)
        closedir(proc);
    return found;
}

bool testenv_process_gone(void *marker)
{
    return !testenv_process_running(marker);
}

pid_t testenv_start_io(const char *cwd, const char *const argv[], const char *stdin_path,
                       const char *out_path, const char *err_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (chdir(cwd) != 0)
            _exit(126);
        int in = open(stdin_path != NULL ? stdin_path : "/dev/null", O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int testenv_wait_exit(pid_t pid, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 5) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        testenv_sleep_ms(5);
    }
    return -1;
}

void testenv_kill_group(pid_t pid)
{
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

bool testenv_bwrap_works(bool own_network)
{
    char *argv[14] = {"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                      "--unshare-pid", "--die-with-parent"};
    int n = 10;
    if (own_network)
        argv[n++] = "--unshare-net";
    argv[n++] = "true";
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
