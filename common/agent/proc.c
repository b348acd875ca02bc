/* proc: child processes in their own group, driven by poll (see proc.h).
 *
 * Life of a child:
 *
 *   running ──(deadline / callback / proc_stop)──▶ stopping: SIGTERM to the tree,
 *      │                                                    SIGKILL at kill_at_ms
 *      ▼
 *   leader exited (pidfd readable; still a zombie, so its group id cannot be reused)
 *      │  SIGKILL to the group for anything it left behind
 *      ▼
 *   draining: read stdout/stderr to EOF, at most PROC_DRAIN_MS
 *      ▼
 *   reaped (waitpid), status final
 *
 * The leader stays a zombie until the very end on purpose: every kill(-pgid) we send is
 * then guaranteed to reach our group and nobody else's.
 *
 * "The tree" is the group and every group that a descendant of the leader leads or joined
 * (found in /proc at the moment of the signal): a program that runs its tools in sessions
 * of their own (Claude Code's Bash tool runs `bash -c` under setsid) would otherwise keep
 * them out of reach of the group's signals; once the leader is gone they are orphans that
 * proc_kill_orphans() ends.
 *
 * Nothing may outlive the service either, not even after a kill -9 of it, when no code of
 * ours can act: a retried task would run next to its first attempt. So each child has a
 * watcher, a fork of ours outside the child's group that only waits: the kernel sends it
 * PROC_ORPHAN_SIGNAL when the thread that started it ends (PR_SET_PDEATHSIG), and if that
 * was the whole service (its parent is now someone else) it kills the child's group. The
 * child itself stays the leader of its group, so a program that makes itself a group
 * leader (timeout(1) does) changes nothing, and `kill -- -$$` in a script still works. The
 * watcher is killed and reaped with the child. */
#include "proc.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* How long to keep reading pipes after the leader exited and its group was killed (a
 * process that left the group may still hold them). */
#define PROC_DRAIN_MS 1000
/* What the kernel sends a watcher when the thread that started it ends (see the top). */
#define PROC_ORPHAN_SIGNAL SIGUSR2
/* Without a pidfd we cannot poll for the leader's exit; check at least this often. */
#define PROC_FALLBACK_TICK_MS 50
#define PROC_READ_CHUNK 65536
/* Reads per pipe per step: a child writing without pause must not keep us from checking
 * its deadlines (the rest is read at the next step, poll says it is there). */
#define PROC_READS_PER_STEP 16

struct proc_t {
    pid_t pid;
    pid_t watcher; /* the watcher's pid (see the top), or -1 */
    int pidfd; /* -1 if the kernel has no pidfd_open */
    int in_fd; /* our ends of the pipes; -1 once closed */
    int out_fd;
    int err_fd;

    char *in_buf;
    size_t in_len;
    size_t in_off;

    proc_line_fn *on_line;
    void *on_line_arg;
    bool delivering; /* false after the callback asked to stop */
    char *line;      /* the stdout line being assembled */
    size_t line_len;
    size_t line_cap;
    size_t max_line;
    bool skipping_line; /* the current line is over max_line: drop it */

    char *err_tail; /* the last err_cap bytes of stderr, NUL-terminated */
    size_t err_len;
    size_t err_cap;

    int64_t started_ms;
    int64_t deadline_ms;  /* 0 = no wall-clock limit */
    int64_t no_output_ms; /* 0 = no watchdog */
    int64_t last_output_ms;
    int64_t kill_grace_ms;
    bool stopping;
    int64_t kill_at_ms; /* 0 = no SIGKILL pending */
    bool leader_exited;
    int64_t drain_until_ms;

    proc_status_t status;
};

int proc_kill_group(pid_t pgid, int sig)
{
    if (pgid <= 1 || kill(-pgid, sig) != 0)
        return FAILURE_NOT_FOUND;
    return 0;
}

/* True if environment entry "NAME=value" names a variable listed in `names` (exact, or a
 * prefix when the listed name ends in '*'). */
static bool s_env_listed(const char *entry, const char *const *names)
{
    if (names == NULL)
        return false;
    size_t name_len = strcspn(entry, "=");
    for (size_t i = 0; names[i] != NULL; i++) {
        size_t len = strcspn(names[i], "=");
        if (len > 0 && names[i][len - 1] == '*' && names[i][len] == '\0') {
            if (name_len >= len - 1 && strncmp(entry, names[i], len - 1) == 0)
                return true;
        } else if (len == name_len && strncmp(entry, names[i], len) == 0) {
            return true;
        }
    }
    return false;
}

/* The child's environment: ours (only the env_keep names, when there is such a list) minus
 * env_remove and minus names in env_set, plus env_set. The array is malloc'd; the strings
 * are borrowed from environ and options. */
static char **s_build_env(const proc_options_t *options)
{
    size_t count = 0, set_count = 0;
    for (char **e = environ; e && *e; e++)
        count++;
    for (size_t i = 0; options->env_set && options->env_set[i]; i++)
        set_count++;
    char **env = calloc(count + set_count + 1, sizeof *env);
    if (env == NULL)
        return NULL;
    size_t n = 0;
    for (char **e = environ; e && *e; e++) {
        bool kept = options->env_keep == NULL || s_env_listed(*e, options->env_keep);
        if (kept && !s_env_listed(*e, options->env_remove) && !s_env_listed(*e, options->env_set))
            env[n++] = *e;
    }
    for (size_t i = 0; i < set_count; i++)
        env[n++] = (char *)options->env_set[i];
    env[n] = NULL;
    return env;
}

/* In the forked child: report (stage, errno) on the CLOEXEC pipe and die. */
static void s_child_fail(int report_fd, int stage)
{
    int msg[2] = {stage, errno};
    ssize_t ignored = write(report_fd, msg, sizeof msg);
    (void)ignored;
    _exit(127);
}

/* In the forked child: only async-signal-safe calls from here to exec. */
static void s_child(const proc_options_t *options, char **env, int in_r, int out_w, int err_w,
                    int report_fd)
{
    setpgid(0, 0);
    if (in_r < 0)
        in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in_r < 0 || dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        s_child_fail(report_fd, 0);
    /* Nothing else of ours (sockets, lock files) may leak into the agent. */
    close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (options->cwd != NULL && chdir(options->cwd) != 0)
        s_child_fail(report_fd, 1);
    /* Ignored signals and the blocked mask survive exec; give the child a clean slate. */
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(options->argv[0], options->argv, env);
    s_child_fail(report_fd, 2);
}

/* The watcher's state (set before its handler can run). */
static pid_t s_watched_group;
static pid_t s_watcher_parent;

/* PROC_ORPHAN_SIGNAL in the watcher: the thread that started it ended. If the service is
 * gone (we were handed to another parent), the child's group goes too. */
static void s_watcher_signal(int sig)
{
    (void)sig;
    if (getppid() != s_watcher_parent) {
        kill(-s_watched_group, SIGKILL);
        _exit(0);
    }
}

/* The watcher (see the top of the file). Forked from a threaded process and never execs, so
 * only async-signal-safe calls. Never returns. */
static void s_watcher(pid_t group, pid_t parent)
{
    s_watched_group = group;
    s_watcher_parent = parent;
    sigset_t all, orphan_only;
    sigfillset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    /* Hold nothing of ours: no pipe end, no socket, no lock. */
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    if (close_range(3, ~0U, 0) != 0) { /* kernels before 5.9, some seccomp profiles */
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 ? max : 1024); fd++)
            close((int)fd);
    }
    /* Only its own signal moves it; whatever else reaches the service's group does not. */
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP && sig != PROC_ORPHAN_SIGNAL)
            signal(sig, SIG_IGN);
    }
    struct sigaction orphaned;
    memset(&orphaned, 0, sizeof orphaned);
    orphaned.sa_handler = s_watcher_signal;
    sigfillset(&orphaned.sa_mask);
    sigaction(PROC_ORPHAN_SIGNAL, &orphaned, NULL);
    prctl(PR_SET_PDEATHSIG, PROC_ORPHAN_SIGNAL);
    prctl(PR_SET_NAME, "proc-watcher"); /* what ps shows, instead of the service's name */
    sigfillset(&orphan_only);
    sigdelset(&orphan_only, PROC_ORPHAN_SIGNAL);
    for (;;) {
        s_watcher_signal(0); /* the service may have died before prctl() took effect */
        sigsuspend(&orphan_only);
    }
}

/* Starts the watcher of group `group` (our child); returns its pid, or -1 (the child then
 * runs unwatched: a failed fork here is not worth failing the run). */
static pid_t s_start_watcher(pid_t group)
{
    pid_t parent = getpid();
    pid_t watcher = fork();
    if (watcher == 0)
        s_watcher(group, parent);
    if (watcher < 0)
        log_warn("proc: no watcher for process group %ld: %s", (long)group, strerror(errno));
    return watcher;
}

/* Kills and reaps the watcher: the child it watched is gone. */
static void s_stop_watcher(proc_t *self)
{
    if (self->watcher <= 0)
        return;
    kill(self->watcher, SIGKILL);
    while (waitpid(self->watcher, NULL, 0) < 0 && errno == EINTR) {
    }
    self->watcher = -1;
}

static int s_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

static void s_close(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static proc_t *s_new(const proc_options_t *options)
{
    proc_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->pid = self->watcher = -1;
    self->pidfd = self->in_fd = self->out_fd = self->err_fd = -1;
    self->on_line = options->on_line;
    self->on_line_arg = options->on_line_arg;
    self->delivering = true;
    self->max_line = options->max_line ? options->max_line : PROC_DEFAULT_MAX_LINE;
    self->err_cap = options->stderr_cap ? options->stderr_cap : PROC_DEFAULT_STDERR_CAP;
    self->err_tail = calloc(1, self->err_cap + 1);
    self->line_cap = 4096;
    self->line = malloc(self->line_cap);
    self->kill_grace_ms =
        options->kill_grace_ms ? options->kill_grace_ms : PROC_DEFAULT_KILL_GRACE_MS;
    self->no_output_ms = options->no_output_timeout_ms;
    if (options->stdin_len > 0) {
        self->in_buf = malloc(options->stdin_len);
        if (self->in_buf != NULL) {
            memcpy(self->in_buf, options->stdin_data, options->stdin_len);
            self->in_len = options->stdin_len;
        }
    }
    if (self->err_tail == NULL || self->line == NULL ||
        (options->stdin_len > 0 && self->in_buf == NULL)) {
        free(self->err_tail);
        free(self->line);
        free(self->in_buf);
        free(self);
        return NULL;
    }
    self->status.stderr_tail = self->err_tail;
    return self;
}

static void s_free(proc_t *self)
{
    s_close(&self->in_fd);
    s_close(&self->out_fd);
    s_close(&self->err_fd);
    s_close(&self->pidfd);
    free(self->in_buf);
    free(self->line);
    free(self->err_tail);
    free(self);
}

int proc_start(proc_t **proc_p, const proc_options_t *options)
{
    if (proc_p == NULL || options == NULL || options->argv == NULL || options->argv[0] == NULL)
        return failure_set(FAILURE_INVALID, "proc_start: no program to run");
    *proc_p = NULL;

    int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    int report[2] = {-1, -1};
    char **env = NULL;
    int rc = 0;
    proc_t *self = s_new(options);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "proc_start: out of memory");
    env = s_build_env(options);
    if (env == NULL) {
        rc = failure_set(FAILURE_MEMORY, "proc_start: out of memory");
        goto out;
    }
    if ((self->in_len > 0 && pipe2(in_pipe, O_CLOEXEC) != 0) || pipe2(out_pipe, O_CLOEXEC) != 0 ||
        pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) {
        rc = failure_set(FAILURE_IO, "proc_start: pipe: %s", strerror(errno));
        goto out;
    }

    self->started_ms = clock_now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        rc = failure_set(FAILURE_IO, "proc_start: fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0)
        s_child(options, env, in_pipe[0], out_pipe[1], err_pipe[1], report[1]);

    /* Both sides call setpgid so the group exists before either side relies on it. */
    setpgid(pid, pid);
    self->pid = pid;
    self->status.running = true;
    s_close(&report[1]);
    s_close(&in_pipe[0]);
    s_close(&out_pipe[1]);
    s_close(&err_pipe[1]);

    int msg[2];
    ssize_t got;
    do {
        got = read(report[0], msg, sizeof msg);
    } while (got < 0 && errno == EINTR);
    if (got == (ssize_t)sizeof msg) {
        static const char *const stage[] = {"set up stdio for", "change directory to run",
                                            "execute"};
        const char *what = stage[msg[0] >= 0 && msg[0] <= 2 ? msg[0] : 2];
        rc = failure_set(FAILURE_NOT_FOUND, "cannot %s %s%s%s: %s", what, options->argv[0],
                         msg[0] == 1 ? " in " : "", msg[0] == 1 ? options->cwd : "",
                         strerror(msg[1]));
        waitpid(pid, NULL, 0);
        s_stop_watcher(self);
        self->status.running = false;
        goto out;
    }

    self->in_fd = in_pipe[1];
    self->out_fd = out_pipe[0];
    self->err_fd = err_pipe[0];
    in_pipe[1] = out_pipe[0] = err_pipe[0] = -1;
    if ((self->in_fd >= 0 && s_set_nonblocking(self->in_fd) != 0) ||
        s_set_nonblocking(self->out_fd) != 0 || s_set_nonblocking(self->err_fd) != 0) {
        rc = failure_set(FAILURE_IO, "proc_start: fcntl: %s", strerror(errno));
        goto out;
    }
    /* Only now: the watcher must not hold a copy of the child's pipe ends while we wait
     * for their EOF above. */
    self->watcher = s_start_watcher(pid);
    self->pidfd = pidfd_open(pid, 0);
    self->last_output_ms = self->started_ms;
    if (options->timeout_ms > 0)
        self->deadline_ms = self->started_ms + options->timeout_ms;
    *proc_p = self;
    self = NULL;

out:
    free(env);
    s_close(&in_pipe[0]);
    s_close(&in_pipe[1]);
    s_close(&out_pipe[0]);
    s_close(&out_pipe[1]);
    s_close(&err_pipe[0]);
    s_close(&err_pipe[1]);
    s_close(&report[0]);
    s_close(&report[1]);
    if (self != NULL)
        proc_destroy(&self);
    return rc;
}

/* The parent pid and process group of /proc/<pid>/stat (fields 4 and 5, after the
 * command, which is in parentheses and may itself contain ") "). False when unreadable. */
static bool s_stat_of(const char *pid, pid_t *ppid, pid_t *pgid)
{
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return false;
    text[n] = '\0';
    const char *end = strrchr(text, ')');
    char state;
    int parent, group;
    if (end == NULL || sscanf(end + 1, " %c %d %d", &state, &parent, &group) != 3)
        return false;
    *ppid = (pid_t)parent;
    *pgid = (pid_t)group;
    return true;
}

/* The most processes s_kill_tree() looks at in a tree. */
#define PROC_TREE_MAX 1024

/* Sends `sig` to the group of `leader` and to every other group of its descendants (see
 * the top), never to our own group. */
static void s_kill_tree(pid_t leader, int sig)
{
    pid_t pids[PROC_TREE_MAX], parents[PROC_TREE_MAX], groups[PROC_TREE_MAX];
    size_t n = 0;
    DIR *dir = opendir("/proc");
    struct dirent *entry;
    while (dir != NULL && n < PROC_TREE_MAX && (entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9')
            continue;
        if (s_stat_of(entry->d_name, &parents[n], &groups[n]))
            pids[n++] = (pid_t)atoi(entry->d_name);
    }
    if (dir != NULL)
        closedir(dir);
    /* Marks the descendants, generation by generation, from the leader down. */
    bool in_tree[PROC_TREE_MAX] = {false};
    bool grew = true;
    while (grew) {
        grew = false;
        for (size_t i = 0; i < n; i++) {
            if (in_tree[i])
                continue;
            bool child = parents[i] == leader;
            for (size_t k = 0; k < n && !child; k++)
                child = in_tree[k] && parents[i] == pids[k];
            if (child)
                in_tree[i] = grew = true;
        }
    }
    proc_kill_group(leader, sig);
    pid_t ours = getpgrp();
    for (size_t i = 0; i < n; i++) {
        if (in_tree[i] && groups[i] != leader && groups[i] != ours && groups[i] > 1)
            kill(-groups[i], sig);
    }
}

void proc_stop(proc_t *self, proc_stop_t reason)
{
    if (!self->status.running || self->stopping)
        return;
    self->stopping = true;
    self->status.stopped_by = reason;
    if (self->leader_exited)
        return; /* its group was already killed */
    s_kill_tree(self->pid, SIGTERM);
    self->kill_at_ms = clock_now_ms() + self->kill_grace_ms;
}

/* Writes as much of the pending stdin as the pipe takes now; closes it when done or when
 * the child stopped reading. SIGPIPE is blocked around the write (and a pending one
 * consumed) so a child that exits early cannot kill us. */
static void s_write_stdin(proc_t *self)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    bool give_up = false;
    while (self->in_off < self->in_len) {
        ssize_t n = write(self->in_fd, self->in_buf + self->in_off, self->in_len - self->in_off);
        if (n > 0) {
            self->in_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break; /* the pipe is full: wait for POLLOUT */
        if (n < 0 && errno == EPIPE) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_set, NULL, &zero);
        }
        give_up = true; /* the child closed its stdin, or the pipe failed */
        break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (give_up || self->in_off >= self->in_len)
        s_close(&self->in_fd);
}

static void s_deliver_line(proc_t *self)
{
    if (self->skipping_line) {
        self->skipping_line = false;
    } else if (self->delivering) {
        self->line[self->line_len] = '\0';
        self->status.lines++;
        if (self->on_line != NULL) {
            int rc = self->on_line(self->on_line_arg, self->line, self->line_len);
            if (rc != 0) {
                self->delivering = false;
                self->status.callback_code = rc;
                proc_stop(self, PROC_STOP_CALLBACK);
            }
        }
    }
    self->line_len = 0;
}

/* Appends bytes to the current line, growing it, or starts skipping an oversized line. */
static void s_append_line(proc_t *self, const char *data, size_t len)
{
    if (self->skipping_line || len == 0)
        return;
    if (self->line_len + len > self->max_line) {
        log_warn("proc: dropping a stdout line of %d over %zu bytes", (int)self->pid,
                 self->max_line);
        self->status.dropped_lines++;
        self->skipping_line = true;
        self->line_len = 0;
        return;
    }
    if (self->line_len + len + 1 > self->line_cap) {
        size_t cap = self->line_cap;
        while (cap < self->line_len + len + 1)
            cap *= 2;
        char *bigger = realloc(self->line, cap);
        if (bigger == NULL) {
            log_error("proc: out of memory for a stdout line; dropping it");
            self->status.dropped_lines++;
            self->skipping_line = true;
            self->line_len = 0;
            return;
        }
        self->line = bigger;
        self->line_cap = cap;
    }
    memcpy(self->line + self->line_len, data, len);
    self->line_len += len;
}

static void s_read_stdout(proc_t *self)
{
    char chunk[PROC_READ_CHUNK];
    for (int reads = 0; reads < PROC_READS_PER_STEP; reads++) {
        ssize_t n = read(self->out_fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                s_close(&self->out_fd);
            return;
        }
        self->last_output_ms = clock_now_ms();
        const char *p = chunk, *end = chunk + n;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            if (nl == NULL) {
                s_append_line(self, p, (size_t)(end - p));
                break;
            }
            s_append_line(self, p, (size_t)(nl - p));
            s_deliver_line(self);
            p = nl + 1;
        }
    }
}

static void s_read_stderr(proc_t *self)
{
    char chunk[PROC_READ_CHUNK];
    for (int reads = 0; reads < PROC_READS_PER_STEP; reads++) {
        ssize_t n = read(self->err_fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                s_close(&self->err_fd);
            return;
        }
        self->last_output_ms = clock_now_ms();
        size_t len = (size_t)n;
        const char *data = chunk;
        if (len >= self->err_cap) {
            data += len - self->err_cap;
            len = self->err_cap;
            self->err_len = 0;
        } else if (self->err_len + len > self->err_cap) {
            size_t drop = self->err_len + len - self->err_cap;
            memmove(self->err_tail, self->err_tail + drop, self->err_len - drop);
            self->err_len -= drop;
        }
        /* The tail is handed out as a C string: a NUL byte in it would hide what follows. */
        for (size_t i = 0; i < len; i++)
            self->err_tail[self->err_len + i] = data[i] != '\0' ? data[i] : '?';
        self->err_len += len;
        self->err_tail[self->err_len] = '\0';
    }
}

/* True once the leader has exited (it stays a zombie: WNOWAIT). */
static bool s_leader_gone(proc_t *self)
{
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_PID, (id_t)self->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD;
    return info.si_pid == self->pid;
}

static void s_on_leader_exit(proc_t *self, int64_t now)
{
    self->leader_exited = true;
    self->kill_at_ms = 0;
    self->drain_until_ms = now + PROC_DRAIN_MS;
    s_close(&self->in_fd);
    /* Whatever it started and left behind goes with it. */
    proc_kill_group(self->pid, SIGKILL);
}

static void s_reap(proc_t *self)
{
    s_close(&self->out_fd);
    s_close(&self->err_fd);
    s_close(&self->pidfd);
    if (self->line_len > 0 || self->skipping_line)
        s_deliver_line(self);
    /* The watcher goes first: once the leader is reaped its group id may be reused. */
    s_stop_watcher(self);
    int wstatus = 0;
    pid_t got;
    do {
        got = waitpid(self->pid, &wstatus, 0);
    } while (got < 0 && errno == EINTR);
    if (got == self->pid && WIFEXITED(wstatus)) {
        self->status.exited = true;
        self->status.exit_code = WEXITSTATUS(wstatus);
    } else if (got == self->pid && WIFSIGNALED(wstatus)) {
        self->status.term_signal = WTERMSIG(wstatus);
    }
    self->status.running = false;
    self->status.duration_ms = clock_now_ms() - self->started_ms;
}

static void s_check_deadlines(proc_t *self, int64_t now)
{
    if (self->leader_exited)
        return;
    if (!self->stopping && self->deadline_ms > 0 && now >= self->deadline_ms)
        proc_stop(self, PROC_STOP_TIMEOUT);
    if (!self->stopping && self->no_output_ms > 0 &&
        now - self->last_output_ms >= self->no_output_ms)
        proc_stop(self, PROC_STOP_NO_OUTPUT);
    if (self->kill_at_ms > 0 && now >= self->kill_at_ms) {
        s_kill_tree(self->pid, SIGKILL);
        self->kill_at_ms = 0;
    }
}

static bool s_drained(const proc_t *self, int64_t now)
{
    return (self->out_fd < 0 && self->err_fd < 0) || now >= self->drain_until_ms;
}

/* Milliseconds poll may wait: the caller's timeout cut to the next deadline. */
static int s_wait_ms(const proc_t *self, int64_t now, int timeout_ms)
{
    int64_t wait = timeout_ms < 0 ? INT64_MAX : timeout_ms;
    int64_t next[4] = {0, 0, 0, 0};
    if (self->leader_exited) {
        next[0] = self->drain_until_ms;
    } else {
        if (!self->stopping) {
            next[0] = self->deadline_ms;
            next[1] = self->no_output_ms > 0 ? self->last_output_ms + self->no_output_ms : 0;
        }
        next[2] = self->kill_at_ms;
        next[3] = self->pidfd < 0 ? now + PROC_FALLBACK_TICK_MS : 0;
    }
    for (int i = 0; i < 4; i++) {
        if (next[i] > 0 && next[i] - now < wait)
            wait = next[i] - now;
    }
    if (wait < 0)
        wait = 0;
    return wait > 60000 ? 60000 : (int)wait;
}

int proc_step(proc_t *self, int timeout_ms)
{
    if (!self->status.running)
        return 1;
    int64_t now = clock_now_ms();
    s_check_deadlines(self, now);
    if (self->leader_exited && s_drained(self, now)) {
        s_reap(self);
        return 1;
    }

    struct pollfd fds[4];
    int nfds = 0, in_i = -1, out_i = -1, err_i = -1, pid_i = -1;
    if (self->in_fd >= 0) {
        in_i = nfds;
        fds[nfds++] = (struct pollfd){.fd = self->in_fd, .events = POLLOUT};
    }
    if (self->out_fd >= 0) {
        out_i = nfds;
        fds[nfds++] = (struct pollfd){.fd = self->out_fd, .events = POLLIN};
    }
    if (self->err_fd >= 0) {
        err_i = nfds;
        fds[nfds++] = (struct pollfd){.fd = self->err_fd, .events = POLLIN};
    }
    if (self->pidfd >= 0 && !self->leader_exited) {
        pid_i = nfds;
        fds[nfds++] = (struct pollfd){.fd = self->pidfd, .events = POLLIN};
    }
    int ready = poll(fds, (nfds_t)nfds, s_wait_ms(self, now, timeout_ms));
    if (ready < 0 && errno != EINTR)
        return failure_set(FAILURE_IO, "proc_step: poll: %s", strerror(errno));

    if (ready > 0) {
        if (in_i >= 0 && fds[in_i].revents != 0)
            s_write_stdin(self);
        if (out_i >= 0 && fds[out_i].revents != 0)
            s_read_stdout(self);
        if (err_i >= 0 && fds[err_i].revents != 0)
            s_read_stderr(self);
    }
    now = clock_now_ms();
    if (!self->leader_exited &&
        (self->pidfd < 0 || (pid_i >= 0 && ready > 0 && fds[pid_i].revents != 0)) &&
        s_leader_gone(self))
        s_on_leader_exit(self, now);
    s_check_deadlines(self, now);
    if (self->leader_exited && s_drained(self, now)) {
        s_reap(self);
        return 1;
    }
    return 0;
}

int proc_run(proc_t **proc_p, const proc_options_t *options)
{
    int rc = proc_start(proc_p, options);
    if (rc != 0)
        return rc;
    while ((rc = proc_step(*proc_p, -1)) == 0) {
    }
    if (rc < 0) {
        proc_destroy(proc_p);
        return rc;
    }
    return 0;
}

const proc_status_t *proc_status(proc_t *self)
{
    if (self->status.running)
        self->status.duration_ms = clock_now_ms() - self->started_ms;
    return &self->status;
}

pid_t proc_pid(const proc_t *self)
{
    return self->pid;
}

void proc_destroy(proc_t **self_p)
{
    if (self_p == NULL || *self_p == NULL)
        return;
    proc_t *self = *self_p;
    *self_p = NULL;
    s_stop_watcher(self);
    if (self->status.running && self->pid > 0) {
        proc_kill_group(self->pid, SIGKILL);
        while (waitpid(self->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    s_free(self);
}

#define PROC_PROBE_LINE 256

/* proc_probe's line callback: keeps the first line. */
static int s_keep_first_line(void *arg, const char *line, size_t len)
{
    char *first = arg; /* PROC_PROBE_LINE bytes */
    if (first[0] == '\0')
        snprintf(first, PROC_PROBE_LINE, "%.*s", (int)len, line);
    return 0;
}

bool proc_probe(char *const *argv, int64_t timeout_ms, char *out, size_t size)
{
    char first[PROC_PROBE_LINE] = "";
    proc_options_t options = {
        .argv = argv, .on_line = s_keep_first_line, .on_line_arg = first, .timeout_ms = timeout_ms};
    proc_t *proc = NULL;
    if (proc_run(&proc, &options) != 0) {
        snprintf(out, size, "%s", failure_message());
        return false;
    }
    const proc_status_t *status = proc_status(proc);
    bool ok = status->exited && status->exit_code == 0;
    if (ok)
        snprintf(out, size, "%s", first[0] ? first : "(no output)");
    else if (status->exited)
        snprintf(out, size, "exited %d: %.200s", status->exit_code,
                 status->stderr_tail ? status->stderr_tail : "");
    else if (status->stopped_by == PROC_STOP_TIMEOUT)
        snprintf(out, size, "did not finish within %lld ms", (long long)timeout_ms);
    else
        snprintf(out, size, "killed by signal %d", status->term_signal);
    proc_destroy(&proc);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return ok;
}

int proc_become_subreaper(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        return failure_set(FAILURE_IO, "cannot become a child subreaper: %s", strerror(errno));
    return 0;
}

int proc_kill_orphans(void)
{
    DIR *dir = opendir("/proc");
    if (dir == NULL)
        return 0;
    pid_t self = getpid();
    int killed = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        pid_t parent, group;
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9' ||
            !s_stat_of(entry->d_name, &parent, &group) || parent != self)
            continue;
        pid_t pid = (pid_t)atoi(entry->d_name);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        killed++;
    }
    closedir(dir);
    return killed;
}
