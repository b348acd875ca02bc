/* sandbox: how commands that come from a repository run — a test suite, a review check,
 * the tests of a merge. They are the branch's own code (its Makefile, its package.json):
 * running them is what testing is, but a branch is a stranger's code, so it must not
 * inherit our secrets nor read what the services keep.
 *
 *  - The environment is an allow-list: PATH, HOME, USER, LOGNAME, SHELL, LANG, LANGUAGE,
 *    LC_*, TERM, TZ, TMPDIR, and the names in [tests] env (e.g. ["JAVA_HOME"]); nothing
 *    else (no ANTHROPIC_API_KEY, GH_TOKEN, CLOISTER_*, ...). CI=true is set by testrun.
 *  - With bubblewrap (`bwrap`, Debian's package), the command runs in a sandbox, whoever
 *    the services run as (root included): no capability and no_new_privs (a user namespace
 *    of its own that may make no other, or, where a container forbids that, every
 *    capability dropped in the machine's); the system read-only; a fresh /tmp, /var/tmp,
 *    /run and /dev/shm (no host Unix socket); $HOME, the services' user's home, /root,
 *    $PANOPTICON_HOME and $CLAUDE_CONFIG_DIR hidden behind empty tmpfs (so ~/.ssh,
 *    ~/.claude, the keys and the services' state are out of reach), and, run by root,
 *    /etc/shadow and the ssh host keys; the directory under test writable, its
 *    repository's git directory read-only (so `git` works in the tests, but no hook can be
 *    planted); its own pid namespace and /proc (nothing outlives it, no other process is
 *    seen), a session of its own, and -- unless its repository opted in -- a network
 *    namespace of its own with only a loopback: code under test cannot reach Cloister's
 *    bus (even on 127.0.0.1), the network, or abstract unix sockets. A repository opts in
 *    with [tests] network = true (tests, the merge's tests) or [review] network = true
 *    (review checks) in its target branch's .cloister/config.toml (or the operator's
 *    cloister.toml); a branch under test cannot opt itself in. Where bwrap cannot make a
 *    network namespace, the command runs with the machine's network and every result
 *    says so (sandbox_network()); where bwrap cannot run at all, the reason names the
 *    cause (a container's masked /proc, no user namespaces, missing capabilities, no
 *    bwrap) and what would fix it. docs/security.md says what is and is not isolated.
 *
 * [tests] sandbox = "auto" (default: bwrap when it works on this machine, else none, and
 * the reason is logged once), "bwrap" (required: a machine where it does not work fails
 * every run, saying why) or "none". */
#ifndef CLOISTER_SANDBOX_H
#define CLOISTER_SANDBOX_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

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

/* What network a command gets, written into buf for results and notes: "isolated: ...",
 * "open: <opted_in_by>" (opted_in_by: who allowed it, e.g. "[tests] network = true in
 * main:.cloister/config.toml"; NULL when nobody did), or "NOT ISOLATED (<why>): ..." when
 * this machine cannot isolate it. Returns true when the command is isolated. */
bool sandbox_network(const sandbox_t *self, const char *opted_in_by, char *buf, size_t size);

/* A new argv (caller frees with sandbox_argv_free()) that runs `argv` for the directory
 * `dir`: inside bwrap (with a network of its own unless `network`), or `argv` itself when
 * not isolating. Returns 0, FAILURE_STATE ("bwrap" mode on a machine where bwrap does not
 * work, with why), FAILURE_INVALID (`dir` is / or a place the sandbox hides, such as a
 * home or /tmp itself: its commands would see what is hidden) or FAILURE_MEMORY. */
int sandbox_wrap(const sandbox_t *self, const char *dir, bool network, char *const *argv,
                 char ***out);
void sandbox_argv_free(char ***argv_p);

#endif
