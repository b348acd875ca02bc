/* pan_launcher: the services deploy/run-local.sh started, through its files in
 * $PANOPTICON_HOME/run (see pan.h): reloading them on `pan reload`, starting a specialist
 * on `pan specialists wake`. */
#include "pan.h"

#include "clock.h"
#include "home.h"
#include "proc.h"
#include "specialist_reload.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* The programs that read cloister.toml again on SIGHUP (the specialist skeleton). To any
 * other, SIGHUP is not sent: it would end it. */
static const char *const s_reloading[] = {"cloister-review", "cloister-test", "cloister-merge",
                                          "cloister-worker", NULL};

/* The first line of `path` into buf (no newline); false when unreadable or empty. */
static bool s_first_line(const char *path, char *buf, size_t size)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return false;
    bool ok = fgets(buf, (int)size, file) != NULL;
    fclose(file);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok && buf[0] != '\0';
}

/* True when process `pid` runs exactly `program` with no arguments, as the launcher starts
 * its services (so a pid file whose number was reused names nobody). */
static bool s_runs(pid_t pid, const char *program)
{
    char path[64], cmdline[PATH_MAX + 2];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    if (n <= 0)
        return false;
    cmdline[n] = '\0';
    return strcmp(cmdline, program) == 0 && (size_t)n == strlen(program) + 1;
}

size_t pan_launched_list(pan_launched_t *out, size_t cap)
{
    char dir_path[PATH_MAX];
    if (home_path(dir_path, sizeof dir_path, "run") != 0)
        return 0;
    DIR *dir = opendir(dir_path);
    if (dir == NULL)
        return 0;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL && count < cap) {
        size_t len = strlen(entry->d_name);
        if (len <= 4 || len - 4 >= sizeof out->name || strcmp(entry->d_name + len - 4, ".pid") != 0)
            continue;
        pan_launched_t *item = &out[count];
        memset(item, 0, sizeof *item);
        memcpy(item->name, entry->d_name, len - 4);
        char path[PATH_MAX + 512], text[32];
        snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name);
        int64_t pid = 0;
        if (!s_first_line(path, text, sizeof text) || !pan_parse_int(text, 1, INT_MAX, &pid))
            continue;
        item->pid = (pid_t)pid;
        snprintf(path, sizeof path, "%s/%s.program", dir_path, item->name);
        if (s_first_line(path, item->program, sizeof item->program) &&
            s_runs(item->pid, item->program))
            count++;
    }
    closedir(dir);
    return count;
}

/* True when `launched` runs a program that reloads on SIGHUP. */
static bool s_reloads(const pan_launched_t *launched)
{
    const char *base = strrchr(launched->program, '/');
    base = base ? base + 1 : launched->program;
    for (size_t i = 0; s_reloading[i] != NULL; i++)
        if (strcmp(base, s_reloading[i]) == 0)
            return true;
    return false;
}

/* The report `pid` wrote (removed before it is signalled), or NULL (caller owns). */
static json_t *s_report(pid_t pid)
{
    char path[PATH_MAX];
    if (specialist_reload_report_path(path, sizeof path, pid) != 0)
        return NULL;
    return json_load_file(path, 0, NULL);
}

/* Sends SIGHUP to a launched service that reloads, its old report removed first so that
 * any report found afterwards is this reload's. False when it is gone. */
static bool s_signal(const pan_launched_t *launched)
{
    char path[PATH_MAX];
    if (specialist_reload_report_path(path, sizeof path, launched->pid) == 0)
        unlink(path);
    return kill(launched->pid, SIGHUP) == 0;
}

/* Waits for a report to be written in run/ (renamed into place), at most `ms`. */
static void s_wait_report(int watch, int64_t ms)
{
    struct pollfd item = {.fd = watch, .events = POLLIN};
    /* Without inotify, look again every 100 ms. */
    if (poll(&item, watch >= 0 ? 1 : 0, (int)(watch >= 0 ? ms : (ms < 100 ? ms : 100))) > 0) {
        char events[4096];
        while (read(watch, events, sizeof events) > 0)
            continue;
    }
}

json_t *pan_launched_reload(int wait_ms)
{
    pan_launched_t launched[64];
    size_t count = pan_launched_list(launched, sizeof launched / sizeof launched[0]);
    json_t *services = json_array();
    char run_dir[PATH_MAX];
    int watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (watch >= 0 && (home_path(run_dir, sizeof run_dir, "run") != 0 ||
                       inotify_add_watch(watch, run_dir, IN_MOVED_TO) < 0)) {
        close(watch);
        watch = -1;
    }
    for (size_t i = 0; i < count; i++) {
        const char *name = launched[i].name;
        if (strcmp(name, "broker") == 0 || strcmp(name, "supervisor") == 0)
            continue;
        bool reloads = s_reloads(&launched[i]);
        json_t *entry =
            json_pack("{s:s, s:I, s:s}", "name", name, "pid", (json_int_t)launched[i].pid, "state",
                      reloads ? "signalled" : "start-only");
        if (reloads && !s_signal(&launched[i]))
            json_object_set_new(entry, "state", json_string("gone"));
        json_array_append_new(services, entry);
    }
    /* Each answers within a moment when idle; one busy with a task says "pending" and
     * reloads when its task ends. */
    int64_t deadline = clock_now_ms() + wait_ms;
    for (bool waiting = true; waiting;) {
        waiting = false;
        size_t i;
        json_t *entry;
        json_array_foreach(services, i, entry)
        {
            const char *state = pan_json_str(entry, "state", "");
            if (strcmp(state, "signalled") != 0 && strcmp(state, "pending") != 0)
                continue;
            json_t *report = s_report((pid_t)pan_json_int(entry, "pid", 0));
            if (report != NULL)
                json_object_update(entry, report);
            json_decref(report);
            waiting |= strcmp(pan_json_str(entry, "state", ""), "signalled") == 0;
        }
        int64_t left = deadline - clock_now_ms();
        if (!waiting || left <= 0)
            break;
        s_wait_report(watch, left);
    }
    if (watch >= 0)
        close(watch);
    return services;
}

/* How long `deploy/run-local.sh start NAME` may take (it waits for the supervisor). */
#define PAN_LAUNCHER_START_MS 40000

/* Reads /proc/<pid>/cmdline into buf; its length (arguments separated by NUL), or -1. */
static ssize_t s_cmdline(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n > 0)
        buf[n] = '\0';
    return n;
}

bool pan_launcher_script(char *script, size_t size)
{
    char path[PATH_MAX], text[32], cmdline[PATH_MAX * 2];
    int64_t pid = 0;
    if (home_path(path, sizeof path, "run/supervisor.pid") != 0 ||
        !s_first_line(path, text, sizeof text) || !pan_parse_int(text, 1, INT_MAX, &pid))
        return false;
    ssize_t len = s_cmdline((pid_t)pid, cmdline, sizeof cmdline);
    for (ssize_t at = 0; at < len; at += (ssize_t)strlen(cmdline + at) + 1) {
        const char *arg = cmdline + at;
        size_t n = strlen(arg);
        if (n < 12 || strcmp(arg + n - 12, "run-local.sh") != 0 || (n > 12 && arg[n - 13] != '/'))
            continue;
        if (arg[0] == '/')
            return (size_t)snprintf(script, size, "%s", arg) < size;
        /* Started with a relative path: relative to the supervisor's directory. */
        char cwd_link[64], cwd[PATH_MAX];
        snprintf(cwd_link, sizeof cwd_link, "/proc/%ld/cwd", (long)pid);
        ssize_t cwd_len = readlink(cwd_link, cwd, sizeof cwd - 1);
        if (cwd_len <= 0)
            return false;
        cwd[cwd_len] = '\0';
        return (size_t)snprintf(script, size, "%s/%s", cwd, arg) < size;
    }
    return false;
}

bool pan_launcher_start(const char *script, const char *name, char *answer, size_t size)
{
    char *argv[] = {"bash", (char *)script, "start", (char *)name, NULL};
    bool ok = proc_probe(argv, PAN_LAUNCHER_START_MS, answer, size);
    /* Its lines start with "run-local: "; the answer reads without it. */
    char *said = strstr(answer, "run-local: ");
    if (said != NULL)
        memmove(said, said + 11, strlen(said + 11) + 1);
    return ok;
}
