/* sandbox: running a repository's commands (see sandbox.h). */
#include "sandbox.h"

#include "failure.h"
#include "home.h"
#include "log.h"
#include "proc.h"

#include <git2.h>
#include <glob.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SANDBOX_MAX_KEEP 64
/* Most arguments the bwrap wrapper adds before the command. */
#define SANDBOX_MAX_WRAP 160
/* How long one trial of bwrap may take. */
#define SANDBOX_PROBE_TIMEOUT_MS 10000

typedef enum { SANDBOX_AUTO, SANDBOX_BWRAP, SANDBOX_NONE } sandbox_mode_t;

static const char *const s_default_keep[] = {"PATH",     "HOME", "USER", "LOGNAME", "SHELL",
                                             "LANG",     "LANGUAGE", "LC_*", "TERM", "TZ",
                                             "TMPDIR", NULL};

/* How bwrap takes every privilege away from the command, best first. Both drop every
 * capability, and bwrap always sets no_new_privs (no setuid or file capability gives one
 * back). A user namespace of its own also puts the command's uid 0, if it is root, in a
 * namespace that owns nothing, and forbids it further user namespaces. Where a container
 * masks paths under /proc, no procfs can be mounted in a new user namespace: the second
 * way stays in the machine's user namespace, which needs CAP_SYS_ADMIN for bwrap (root
 * with it, or bwrap setuid root). */
static const char *const s_drop_userns[] = {"--unshare-user", "--disable-userns", "--cap-drop",
                                            "ALL", NULL};
static const char *const s_drop_caps[] = {"--cap-drop", "ALL", NULL};

/* The trial's command: succeeds only with no effective capability and no_new_privs. */
static const char s_trial_check[] =
    "test \"$(grep -cE '^(CapEff:[[:space:]]+0+|NoNewPrivs:[[:space:]]+1)$' "
    "/proc/self/status)\" = 2 || { echo 'the command would keep privileges:' >&2; "
    "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status >&2; exit 1; }";

struct sandbox_t {
    sandbox_mode_t mode;
    const char *const *drop; /* s_drop_userns or s_drop_caps when bwrap works, else NULL */
    char why_not[1200];       /* why the best way does not work here (drop NULL: any way) */
    bool net_works;          /* bwrap can also give a command a network of its own */
    char why_no_net[1400];
    char description[1400];
    const char *keep[SANDBOX_MAX_KEEP + 1];
};

/* Appends the strings of `add` (NULL-terminated) to the argv being built. */
static bool s_push(char **argv, size_t *n, size_t cap, const char *const *add)
{
    for (size_t i = 0; add[i] != NULL; i++) {
        if (*n >= cap)
            return false;
        argv[(*n)++] = strdup(add[i]);
        if (argv[*n - 1] == NULL)
            return false;
    }
    return true;
}

static void s_argv_free(char **argv)
{
    for (size_t i = 0; argv[i] != NULL; i++)
        free(argv[i]);
}

/* True when a trivial bwrap sandbox, taking privileges away with `drop` (and a network of
 * its own when `net`), starts here and its command has no capability left; else why not. */
static bool s_bwrap_works(const char *const *drop, bool net, char *why, size_t size)
{
    char *argv[32] = {NULL};
    size_t n = 0;
    const char *const head[] = {"bwrap", NULL};
    const char *const base[] = {"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--unshare-pid", "--die-with-parent", NULL};
    const char *const unshare_net[] = {"--unshare-net", NULL};
    const char *const tail[] = {"--", "/bin/sh", "-c", s_trial_check, NULL};
    bool ok = s_push(argv, &n, 31, head) && s_push(argv, &n, 31, drop) &&
              s_push(argv, &n, 31, base) && (!net || s_push(argv, &n, 31, unshare_net)) &&
              s_push(argv, &n, 31, tail);
    if (!ok)
        snprintf(why, size, "out of memory");
    else
        ok = proc_probe(argv, SANDBOX_PROBE_TIMEOUT_MS, why, size);
    s_argv_free(argv);
    return ok;
}

/* The mount points under /proc (a container's masked paths, e.g. /proc/kcore), the first
 * few into buf; false when there is none. */
static bool s_proc_masked(char *buf, size_t size)
{
    FILE *file = fopen("/proc/self/mountinfo", "r");
    if (file == NULL)
        return false;
    char line[4096];
    int found = 0;
    size_t len = 0;
    buf[0] = '\0';
    while (fgets(line, sizeof line, file) != NULL) {
        char point[1024];
        /* id parent major:minor root mount-point ... */
        if (sscanf(line, "%*s %*s %*s %*s %1023s", point) != 1 ||
            strncmp(point, "/proc/", 6) != 0)
            continue;
        if (found++ < 3 && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", found > 1 ? ", " : "",
                                    point);
    }
    fclose(file);
    return found > 0;
}

/* Why bwrap cannot make a user namespace of its own here, from what its trial said
 * (`said`), into why: the cause, not only bwrap's words. Sets *masked when the cause is a
 * container's masked /proc. */
static void s_explain_userns(const char *said, char *why, size_t size, bool *masked)
{
    char paths[200];
    *masked = false;
    if (strstr(said, "No such file") != NULL || strstr(said, "exited 127") != NULL)
        snprintf(why, size, "bwrap is not installed (Debian: apt-get install bubblewrap): %s",
                 said);
    else if (strstr(said, "proc") != NULL && s_proc_masked(paths, sizeof paths)) {
        *masked = true;
        snprintf(why, size,
                 "this container masks paths under /proc (%s), so bwrap cannot mount a /proc "
                 "in a user namespace of its own (bwrap said: %s)",
                 paths, said);
    } else if (strstr(said, "capset") != NULL)
        snprintf(why, size,
                 "bwrap is setuid root, but this container does not let it take the "
                 "capabilities it needs: give the container cap_add SYS_ADMIN, NET_ADMIN, "
                 "SYS_PTRACE (bwrap said: %s)",
                 said);
    else if (strstr(said, "pivot_root") != NULL)
        snprintf(why, size,
                 "a seccomp profile refuses the system calls bwrap needs (pivot_root), such "
                 "as Docker's default: give the container security_opt seccomp=unconfined "
                 "(bwrap said: %s)",
                 said);
    else if (strstr(said, "namespace") != NULL || strstr(said, "uid map") != NULL ||
               strstr(said, "Operation not permitted") != NULL)
        snprintf(why, size,
                 "user namespaces are not allowed here (sysctl kernel.unprivileged_userns_clone "
                 "or user.max_user_namespaces, or a seccomp or AppArmor profile such as a "
                 "container's default: Docker needs security_opt seccomp=unconfined and "
                 "apparmor=unconfined; bwrap said: %s)",
                 said);
    else
        snprintf(why, size, "%s", said);
}

/* Tries the ways to drop privileges, best first: sets self->drop (NULL when none works)
 * and, when the best did not, why not in self->why_not (with what would make one work
 * when none does). */
static void s_choose(sandbox_t *self)
{
    char said_userns[300], said_caps[300];
    if (s_bwrap_works(s_drop_userns, false, said_userns, sizeof said_userns)) {
        self->drop = s_drop_userns;
        return;
    }
    bool masked = false;
    s_explain_userns(said_userns, self->why_not, sizeof self->why_not, &masked);
    if (s_bwrap_works(s_drop_caps, false, said_caps, sizeof said_caps)) {
        self->drop = s_drop_caps;
        return;
    }
    size_t len = strlen(self->why_not);
    if (!masked)
        return;
    /* In a container: the other way needs bwrap to hold CAP_SYS_ADMIN (and, setuid, the
     * other capabilities it takes for itself) in the container's bounding set. */
    snprintf(self->why_not + len, sizeof self->why_not - len,
             "; and without a user namespace bwrap has no CAP_SYS_ADMIN (bwrap said: %s): "
             "give the container cap_add SYS_ADMIN, NET_ADMIN, SYS_PTRACE with bwrap setuid "
             "root, or run the services as root with cap_add SYS_ADMIN, NET_ADMIN "
             "(docs/security.md)",
             said_caps);
}

/* Why bwrap cannot give a command a network of its own, from its trial's words. */
static void s_explain_net(const char *said, char *why, size_t size)
{
    if (strstr(said, "loopback") != NULL)
        snprintf(why, size,
                 "bwrap cannot set up the loopback of a network of its own without "
                 "CAP_NET_ADMIN (in a container: cap_add NET_ADMIN; bwrap said: %s)",
                 said);
    else
        snprintf(why, size, "bwrap --unshare-net: %s", said);
}

int sandbox_new(sandbox_t **out, const config_t *config)
{
    *out = NULL;
    const char *mode = config_string(config, "tests", "sandbox", "auto");
    sandbox_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    if (strcmp(mode, "auto") == 0)
        self->mode = SANDBOX_AUTO;
    else if (strcmp(mode, "bwrap") == 0)
        self->mode = SANDBOX_BWRAP;
    else if (strcmp(mode, "none") == 0)
        self->mode = SANDBOX_NONE;
    else {
        free(self);
        return failure_set(FAILURE_INVALID, "[tests] sandbox = \"%s\": expected auto|bwrap|none",
                           mode);
    }
    size_t n = 0;
    for (size_t i = 0; s_default_keep[i] != NULL; i++)
        self->keep[n++] = s_default_keep[i];
    size_t extra = config_array_len(config, "tests", "env");
    for (size_t i = 0; i < extra && n < SANDBOX_MAX_KEEP; i++) {
        const char *name = config_array_string(config, "tests", "env", i);
        if (name != NULL && name[0] != '\0')
            self->keep[n++] = name;
    }
    self->keep[n] = NULL;
    if (self->mode != SANDBOX_NONE)
        s_choose(self);
    if (self->drop != NULL) {
        char said[300];
        self->net_works = s_bwrap_works(self->drop, true, said, sizeof said);
        if (!self->net_works)
            s_explain_net(said, self->why_no_net, sizeof self->why_no_net);
    } else
        snprintf(self->why_no_net, sizeof self->why_no_net, "no sandbox: %s",
                 self->mode == SANDBOX_NONE ? "[tests] sandbox = \"none\"" : self->why_not);
    if (self->drop != NULL && !self->net_works)
        log_warn("repository commands run in bwrap, but with this machine's network (%s): "
                 "code under test can reach Cloister's bus",
                 self->why_no_net);
    if (self->drop == s_drop_userns)
        snprintf(self->description, sizeof self->description, "bwrap");
    else if (self->drop == s_drop_caps)
        snprintf(self->description, sizeof self->description,
                 "bwrap, every capability dropped, no user namespace of its own (%s)",
                 self->why_not);
    else if (self->mode == SANDBOX_NONE)
        snprintf(self->description, sizeof self->description, "none");
    else
        snprintf(self->description, sizeof self->description, "none (bwrap: %s)", self->why_not);
    if (self->mode == SANDBOX_AUTO && self->drop == NULL)
        log_warn("repository commands run without a sandbox (only the environment is "
                 "scrubbed): %s; or set [tests] sandbox = \"none\" to choose that",
                 self->why_not);
    *out = self;
    return 0;
}

void sandbox_destroy(sandbox_t **self_p)
{
    free(*self_p);
    *self_p = NULL;
}

const char *const *sandbox_env_keep(const sandbox_t *self)
{
    return self->keep;
}

const char *sandbox_describe(const sandbox_t *self)
{
    return self->description;
}

/* True when path names an existing directory (not a symbolic link to one). */
static bool s_is_dir(const char *path)
{
    struct stat st;
    return path != NULL && path[0] == '/' && lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The git directory shared by the repository containing dir (its common dir), into buf;
 * false outside git. */
static bool s_git_common_dir(const char *dir, char *buf, size_t size)
{
    git_libgit2_init();
    git_repository *repo = NULL;
    bool found = git_repository_open_ext(&repo, dir, 0, NULL) == 0;
    if (found) {
        char resolved[PATH_MAX];
        const char *common = git_repository_commondir(repo);
        found = common != NULL && realpath(common, resolved) != NULL;
        if (found)
            snprintf(buf, size, "%s", resolved);
    }
    git_repository_free(repo);
    git_libgit2_shutdown();
    return found;
}

/* True when path is inside (or is) dir. */
static bool s_inside(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

bool sandbox_network(const sandbox_t *self, const char *opted_in_by, char *buf, size_t size)
{
    if (opted_in_by != NULL) {
        snprintf(buf, size, "open: %s", opted_in_by);
        return false;
    }
    if (self->net_works) {
        snprintf(buf, size, "isolated: a network of its own, loopback only");
        return true;
    }
    snprintf(buf, size,
             "NOT ISOLATED (%s): the code under test could reach the network and Cloister's "
             "bus",
             self->why_no_net);
    return false;
}

/* The places a command must not see, as real paths of existing directories, into
 * hidden[] (strings owned by the caller, freed with free()); returns how many. */
static size_t s_hidden(char **hidden, size_t max)
{
    /* Private /tmp and /var/tmp, and no socket of /run (D-Bus, an ssh-agent, docker's):
     * the machine's Unix sockets live there, in /tmp (ssh-agent, X11) or in the homes. The
     * services' user's home (by $HOME and by the password database), the services' state
     * (keys, client_secret, the store) and the agent CLI's credentials. */
    const struct passwd *pw = getpwuid(geteuid());
    const char *const places[] = {"/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm", "/root",
                                  getenv("HOME"), pw != NULL ? pw->pw_dir : NULL, home_dir(),
                                  getenv("CLAUDE_CONFIG_DIR")};
    size_t n = 0;
    for (size_t i = 0; i < sizeof places / sizeof places[0] && n < max; i++) {
        if (!s_is_dir(places[i]))
            continue;
        char *real = realpath(places[i], NULL);
        if (real != NULL && strcmp(real, "/") != 0)
            hidden[n++] = real;
        else
            free(real);
    }
    return n;
}

/* Pushes a --tmpfs over each hidden place for which `inside` is true of (place, dir). */
static bool s_push_hide(char **wrapped, size_t *n, size_t cap, char *const *hidden,
                        size_t nhidden, const char *dir)
{
    bool ok = true;
    for (size_t i = 0; ok && i < nhidden; i++) {
        if (dir != NULL && (!s_inside(hidden[i], dir) || strcmp(hidden[i], dir) == 0))
            continue;
        const char *const add[] = {"--tmpfs", hidden[i], NULL};
        ok = s_push(wrapped, n, cap, add);
    }
    return ok;
}

/* The bwrap arguments that hide what the command must not see, in the order bwrap mounts
 * them: fresh empty tmpfs over the places that hold secrets or the machine's Unix sockets,
 * then the directory under test and its git directory, then the hidden places inside
 * those again. Returns 0, FAILURE_INVALID (the directory is / or one of the hidden places
 * itself: its commands would see what is hidden) or FAILURE_MEMORY. */
static int s_push_mounts(char **wrapped, size_t *n, size_t cap, const char *dir)
{
    char *hidden[16];
    size_t nhidden = s_hidden(hidden, sizeof hidden / sizeof hidden[0]);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nhidden; i++)
        if (strcmp(hidden[i], dir) == 0)
            rc = failure_set(FAILURE_INVALID,
                             "the directory to run in, %s, is a place the sandbox hides (a "
                             "home, the services' state, /tmp, /run): a branch's commands run "
                             "there would see what is kept in it; run them in a checkout of "
                             "its own",
                             dir);
    if (rc == 0 && strcmp(dir, "/") == 0)
        rc = failure_set(FAILURE_INVALID, "the directory to run in is /: it would be writable");
    bool ok = rc == 0 && s_push_hide(wrapped, n, cap, hidden, nhidden, NULL);
    /* Run by root, the command is uid 0 without capabilities: a file only root may read is
     * still its own. The usual ones on a system are covered (reading them is refused). */
    if (ok && geteuid() == 0) {
        const char *const patterns[] = {"/etc/shadow*", "/etc/gshadow*",
                                        "/etc/ssh/ssh_host_*key"};
        for (size_t p = 0; ok && p < sizeof patterns / sizeof patterns[0]; p++) {
            glob_t found = {0};
            if (glob(patterns[p], 0, NULL, &found) == 0)
                for (size_t i = 0; ok && i < found.gl_pathc; i++) {
                    const char *const add[] = {"--ro-bind", "/dev/null", found.gl_pathv[i],
                                               NULL};
                    ok = s_push(wrapped, n, cap, add);
                }
            globfree(&found);
        }
    }
    /* Name resolution keeps working where /etc/resolv.conf points into /run (resolved). */
    char resolv[PATH_MAX];
    if (ok && realpath("/etc/resolv.conf", resolv) != NULL && s_inside(resolv, "/run")) {
        const char *const add[] = {"--ro-bind", resolv, resolv, NULL};
        ok = s_push(wrapped, n, cap, add);
    }
    /* The directory under test is writable; its repository's git directory read-only (git
     * works, but no hook or config can be planted for the services to run later). The
     * one mounted last wins where they nest. Hidden places inside either (the directory
     * is, say, the parent of the state home) are hidden again. */
    char common[PATH_MAX];
    bool git = ok && s_git_common_dir(dir, common, sizeof common);
    const char *const rw[] = {"--bind", dir, dir, NULL};
    const char *const ro[] = {"--ro-bind", common, common, NULL};
    if (ok && git && s_inside(dir, common))
        ok = s_push(wrapped, n, cap, ro) && s_push(wrapped, n, cap, rw);
    else if (ok)
        ok = s_push(wrapped, n, cap, rw) && (!git || s_push(wrapped, n, cap, ro));
    ok = ok && s_push_hide(wrapped, n, cap, hidden, nhidden, dir) &&
         (!git || s_push_hide(wrapped, n, cap, hidden, nhidden, common));
    for (size_t i = 0; i < nhidden; i++)
        free(hidden[i]);
    if (rc == 0 && !ok)
        rc = failure_set(FAILURE_MEMORY, "out of memory");
    return rc;
}

int sandbox_wrap(const sandbox_t *self, const char *dir, bool network, char *const *argv,
                 char ***out)
{
    *out = NULL;
    bool isolate = self->mode != SANDBOX_NONE && self->drop != NULL;
    if (self->mode == SANDBOX_BWRAP && self->drop == NULL)
        return failure_set(FAILURE_STATE,
                           "[tests] sandbox = \"bwrap\", but bwrap does not work here: %s",
                           self->why_not);
    size_t argc = 0;
    while (argv[argc] != NULL)
        argc++;
    size_t cap = argc + (isolate ? SANDBOX_MAX_WRAP : 0) + 1;
    char **wrapped = calloc(cap, sizeof *wrapped);
    if (wrapped == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    size_t n = 0;
    bool ok = true;
    char real[PATH_MAX];
    if (isolate && realpath(dir, real) == NULL)
        snprintf(real, sizeof real, "%s", dir);
    if (isolate) {
        const char *const head[] = {"bwrap", NULL};
        const char *const base[] = {"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                    NULL};
        ok = s_push(wrapped, &n, cap, head) && s_push(wrapped, &n, cap, self->drop) &&
             s_push(wrapped, &n, cap, base);
        int rc = ok ? s_push_mounts(wrapped, &n, cap, real) : 0;
        if (rc == FAILURE_INVALID) {
            sandbox_argv_free(&wrapped);
            return rc;
        }
        ok = ok && rc == 0;
        /* No network but a loopback of its own: the bus (even on 127.0.0.1), the world and
         * abstract Unix sockets are out of reach unless the repository opted in. */
        if (ok && !network && self->net_works) {
            const char *const add[] = {"--unshare-net", NULL};
            ok = s_push(wrapped, &n, cap, add);
        }
        /* A session of its own: no ioctl(TIOCSTI) into a terminal the services have. */
        const char *const tail[] = {"--chdir",       real,          "--unshare-pid",
                                    "--unshare-ipc", "--unshare-uts", "--new-session",
                                    "--die-with-parent", "--",     NULL};
        if (ok)
            ok = s_push(wrapped, &n, cap, tail);
    }
    if (ok)
        ok = s_push(wrapped, &n, cap, (const char *const *)argv);
    if (!ok) {
        sandbox_argv_free(&wrapped);
        return failure_set(FAILURE_MEMORY, "out of memory");
    }
    *out = wrapped;
    return 0;
}

void sandbox_argv_free(char ***argv_p)
{
    char **argv = *argv_p;
    if (argv == NULL)
        return;
    for (size_t i = 0; argv[i] != NULL; i++)
        free(argv[i]);
    free(argv);
    *argv_p = NULL;
}
