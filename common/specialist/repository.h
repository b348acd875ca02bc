/* repository: facts about a git repository that several services must agree on. */
#ifndef CLOISTER_REPOSITORY_H
#define CLOISTER_REPOSITORY_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct git_repository git_repository;

/* Opens the repository that contains `path` (libgit2; the caller has called
 * git_libgit2_init() and frees *out). Returns 0, FAILURE_STATE when git refuses a
 * repository owned by another uid (its safe.directory check: the message names the owner,
 * this uid and the setting that trusts it), or FAILURE_NOT_FOUND when `path` is in no
 * repository. */
int repository_open(git_repository **out, const char *path);

/* Writes into `out` the root of the repository that contains `path`: the main working
 * tree's directory (the same for every linked worktree and subdirectory of it), or the
 * repository directory itself when it is bare; resolved with realpath(). This is the
 * repository part of a merge's serialisation group, "merge:<root>:<target>", so every
 * submitter must compute it here.
 * Returns 0, or repository_open()'s failure (with `out` set to `path` unchanged). */
int repository_root(const char *path, char *out, size_t size);

/* Writes the root of the working tree `path` is in into `out`: a linked worktree's own
 * directory (where repository_root() names its main repository). Returns 0, or
 * FAILURE_NOT_FOUND when `path` is in no working tree (not in a repository, or a bare one). */
int repository_worktree(const char *path, char *out, size_t size);

/* Writes "merge:<repository root of path>:<target>" into `out` (the group every merge of
 * that repository into `target` must carry). Returns as repository_root(). */
int repository_merge_group(const char *path, const char *target, char *out, size_t size);

/* Resolves `branch` as a branch of the repository containing `path`, by the one rule every
 * service follows: the local branch refs/heads/<branch>, else the remote-tracking branch
 * refs/remotes/<remote>/<branch> (a remote's branch, as fetched). Never a tag, a commit id
 * or any other revision: a tag named "main" does not stand for the branch main. A name
 * that is not a valid branch name ("-x", "refs/...", "a..b") is refused; so is one with no
 * local branch that two remotes have at different commits (ambiguous, naming both).
 * Writes the full ref name into `ref` and the commit's hex id into `commit` (either may be
 * NULL). Returns 0, FAILURE_NOT_FOUND (no repository, or no such branch) or
 * FAILURE_INVALID (not a branch name, or ambiguous), with the reason. */
int repository_branch_resolve(const char *path, const char *branch, char *ref, size_t ref_size,
                              char *commit, size_t commit_size);

/* Whether the repository containing `path` has `branch` (repository_branch_resolve()).
 * Returns 1 (it has), 0 (it has not, or the name is no branch's) or -1 (no repository
 * there, or one git refuses to open: failure_message() says which). */
int repository_branch_exists(const char *path, const char *branch);

/* As repository_branch_exists(), and writes the commit `branch` names into `out` as hex
 * (`out` may be NULL). */
int repository_branch_commit(const char *path, const char *branch, char *out, size_t size);

/* Where a repository keeps its own Cloister settings, relative to its root. */
#define REPOSITORY_CONFIG_PATH ".cloister/config.toml"

/* Reads the file at `path` (relative to the repository's root) as committed at `rev` (a
 * full 40-hex commit id, else a branch name resolved by repository_branch_resolve(): never
 * a tag) of the repository containing `workspace`. Returns 0 with *text a new
 * NUL-terminated string the caller frees, or NULL when there is no such file at `rev`;
 * FAILURE_NOT_FOUND (no repository, or no such commit or branch), FAILURE_INVALID (the
 * file holds a NUL byte, or `rev` is no branch name or an ambiguous one) or
 * FAILURE_MEMORY, with *text NULL. */
int repository_file_at(const char *workspace, const char *rev, const char *path, char **text);

/* Reads the repository's own settings (REPOSITORY_CONFIG_PATH) as committed at `rev` (a
 * commit id or a branch, as repository_file_at()) of the repository containing
 * `workspace` — never from a working tree, so what counts is what is committed where it
 * matters (the commit under test; the target branch for the review mode, which a branch
 * under review cannot change). *out is an overlay (config_parse_overlay(): only the keys
 * the file sets) or NULL when there is no such file. Returns 0, FAILURE_NOT_FOUND (no
 * repository, or no such commit or branch) or FAILURE_INVALID ("<rev>:.cloister/
 * config.toml:line:col: ...", or `rev` no branch name or an ambiguous one). */
int repository_config_at(const char *workspace, const char *rev, config_t **out);

/* The review mode that holds for a change into `target` of the repository containing
 * `workspace`: the target branch's own [review] mode (REPOSITORY_CONFIG_PATH as committed
 * there) when it sets one, else `config`'s [review] mode ("normal" when unset). This is
 * policy, so it is read from configuration only, never from a task's payload; the branch
 * under review cannot change it. Writes the mode's name into `out` and returns 0; with no
 * repository or no such target the configuration's mode holds. A settings file that does
 * not parse, or a mode that is not strict|normal|yolo|disabled, gives "normal" (the safe
 * side) and returns FAILURE_INVALID with the reason. */
int repository_review_mode(const config_t *config, const char *workspace, const char *target,
                           char *out, size_t size);

/* Whether a repository's commands may use the network (see sandbox.h): `section`
 * ("tests" or "review") network = true in the target branch's own settings (as committed
 * on `target` of the repository containing `workspace`), else in `config`; the target's
 * file wins when it sets the key. Returns true with who allowed it in `out` ("[tests]
 * network = true in main:.cloister/config.toml"); false (out "") when nobody did, or when
 * the target's settings cannot be read (the safe side). */
bool repository_network_opt_in(const config_t *config, const char *workspace,
                               const char *target, const char *section, char *out,
                               size_t size);

#endif
