/* sandbox: how commands that come from a repository run — a test suite, a review check,
 * the tests of a merge. They are the branch's own code (its Makefile, its package.json):
 * running them is what testing is, but a branch is a stranger's code, so it must not
 * inherit our secrets nor read what the services keep.
 *
 *  - The environment is an allow-list: PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE,
 *    LC_*, TERM, TZ, TMPDIR, and the names in [tests] env (e.g. ["JAVA_HOME"]); nothing
 *    else (no ANTHROPIC_API_KEY, GH_TOKEN, CLOISTER_*, ...). CI=true is set by testrun.
 *  - With bubblewrap (`bwrap`, Debian's package), the command runs in a sandbox: the system
 *    read-only, a fresh /tmp, $HOME, $PANOPTICON_HOME and $CLAUDE_CONFIG_DIR hidden behind
 *    empty tmpfs (so ~/.ssh, ~/.claude, the user's other repositories and the services'
 *    state are out of reach), the directory under test writable, its repository's git
 *    directory read-only (so `git` works in the tests), its own pid namespace (nothing
 *    outlives it).
 *
 * [tests] sandbox = "auto" (default: bwrap when it works on this machine, else none, and
 * the reason is logged once), "bwrap" (required: a machine where it does not work fails
 * every run, saying why) or "none". */
#ifndef CLOISTER_SANDBOX_H
#define CLOISTER_SANDBOX_H

#include "config.h"

#include <stdbool.h>

typedef struct sandbox_t sandbox_t;

/* Builds the policy from the configuration; in "auto" and "bwrap" mode, tries bwrap once.
 * Returns 0 with *out (caller destroys), FAILURE_INVALID for a bad [tests] sandbox value,
 * or FAILURE_MEMORY. */
int sandbox_new(sandbox_t **out, const config_t *config);
void sandbox_destroy(sandbox_t **self_p);

/* The environment allow-list: NULL-terminated names ("LC_*" is a prefix), owned by the
 * sandbox. */
const char *const *sandbox_env_keep(const sandbox_t *self);

/* "bwrap", "none" or "none (bwrap: <why not>)", for notes and logs. Owned by the sandbox. */
const char *sandbox_describe(const sandbox_t *self);

/* A new argv (caller frees with sandbox_argv_free()) that runs `argv` for the directory
 * `dir`: inside bwrap, or `argv` itself when not isolating. Returns 0, FAILURE_STATE
 * ("bwrap" mode on a machine where bwrap does not work, with why) or FAILURE_MEMORY. */
int sandbox_wrap(const sandbox_t *self, const char *dir, char *const *argv, char ***out);
void sandbox_argv_free(char ***argv_p);

#endif
