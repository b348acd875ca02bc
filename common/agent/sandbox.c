/* sandbox: running a repository's commands (see sandbox.h). */
#include "sandbox.h"

#include "failure.h"
#include "home.h"
#include "log.h"
#include "proc.h"

#include <git2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SANDBOX_MAX_KEEP 64
/* Most arguments the bwrap wrapper adds before the command. */
#define SANDBOX_MAX_WRAP 48
/* How long the one trial of bwrap may take. */
#define SANDBOX_PROBE_TIMEOUT_MS 10000

typedef enum { SANDBOX_AUTO, SANDBOX_BWRAP, SANDBOX_NONE } sandbox_mode_t;

static const char *const s_default_keep[] = {"PATH",     "HOME", "USER", "LOGNAME", "SHELL",
                                             "LANG",     "LANGUAGE", "LC_*", "TERM", "TZ",
                                             "TMPDIR", NULL};

struct sandbox_t {
    sandbox_mode_t mode;
    bool bwrap_works;
    char why_not[300]; /* why bwrap does not work here */
    bool net_works;    /* bwrap can also give a command a network of its own */
    char why_no_net[400];
    char description[400];
    const char *keep[SANDBOX_MAX_KEEP + 1];
};

/* True when a trivial bwrap sandbox starts here (with a network namespace of its own when
 * `net`); else why not in why. */
static bool s_bwrap_works(bool net, char *why, size_t size)
{
    char *argv[14] = {"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                      "--unshare-pid", "--die-with-parent"};
    int n = 10;
    if (net)
        argv[n++] = "--unshare-net";
    argv[n++] = "true";
    argv[n] = NULL;
    return proc_probe(argv, SANDBOX_PROBE_TIMEOUT_MS, why, size);
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
        self->bwrap_works = s_bwrap_works(false, self->why_not, sizeof self->why_not);
    if (self->bwrap_works)
        self->net_works = s_bwrap_works(true, self->why_no_net, sizeof self->why_no_net);
    else
        snprintf(self->why_no_net, sizeof self->why_no_net, "no sandbox: %s",
                 self->mode == SANDBOX_NONE ? "[tests] sandbox = \"none\"" : self->why_not);
    if (self->bwrap_works && !self->net_works)
        log_warn("repository commands run in bwrap, but with this machine's network (bwrap "
                 "--unshare-net: %s): code under test can reach Cloister's bus",
                 self->why_no_net);
    if (self->bwrap_works)
        snprintf(self->description, sizeof self->description, "bwrap");
    else if (self->mode == SANDBOX_NONE)
        snprintf(self->description, sizeof self->description, "none");
    else
        snprintf(self->description, sizeof self->description, "none (bwrap: %s)", self->why_not);
    if (self->mode == SANDBOX_AUTO && !self->bwrap_works)
        log_warn("repository commands run without a sandbox (only the environment is "
                 "scrubbed): %s; install bubblewrap, or set [tests] sandbox = \"none\"",
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

/* True when path names an existing directory. */
static bool s_is_dir(const char *path)
{
    struct stat st;
    return path != NULL && path[0] == '/' && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
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

int sandbox_wrap(const sandbox_t *self, const char *dir, bool network, char *const *argv,
                 char ***out)
{
    *out = NULL;
    bool isolate = self->mode != SANDBOX_NONE && self->bwrap_works;
    if (self->mode == SANDBOX_BWRAP && !self->bwrap_works)
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
    if (isolate) {
        const char *const base[] = {"bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                                    "/proc", "--tmpfs", "/tmp", NULL};
        ok = s_push(wrapped, &n, cap, base);
        /* Hidden: whatever exists of these (a tmpfs needs a mount point). */
        const char *hidden[] = {getenv("HOME"), home_dir(), getenv("CLAUDE_CONFIG_DIR")};
        for (size_t i = 0; ok && i < sizeof hidden / sizeof hidden[0]; i++) {
            if (!s_is_dir(hidden[i]) || strcmp(hidden[i], "/") == 0)
                continue;
            const char *const add[] = {"--tmpfs", hidden[i], NULL};
            ok = s_push(wrapped, &n, cap, add);
        }
        char common[PATH_MAX];
        if (ok && s_git_common_dir(dir, common, sizeof common)) {
            const char *const add[] = {"--ro-bind", common, common, NULL};
            ok = s_push(wrapped, &n, cap, add);
        }
        /* No network but a loopback of its own: the bus (even on 127.0.0.1) and the world
         * are out of reach unless the repository opted in. */
        if (ok && !network && self->net_works) {
            const char *const add[] = {"--unshare-net", NULL};
            ok = s_push(wrapped, &n, cap, add);
        }
        const char *const tail[] = {"--bind",         dir,          dir,
                                    "--chdir",        dir,          "--unshare-pid",
                                    "--unshare-ipc",  "--unshare-uts", "--die-with-parent",
                                    "--",             NULL};
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
