/* workspace_roots: the directories a task's repository may be in.
 *
 * A task names its repository in payload.workspace, and the specialists then run that
 * repository's own commands (its tests, its review checks) and push from it. The broker
 * accepts a workspace only under one of the configured roots, so a client cannot point a
 * specialist at /etc, another user's checkout or a directory it planted elsewhere.
 *
 * The roots are `[security] workspace_roots` (a leading "~" is $HOME), or the
 * colon-separated CLOISTER_WORKSPACE_ROOTS, which wins (compose passes the shared
 * workspaces directory this way); by default the broker user's $HOME. "/" allows every
 * directory. */
#ifndef CLOISTER_WORKSPACE_ROOTS_H
#define CLOISTER_WORKSPACE_ROOTS_H

#include "config.h"

typedef struct workspace_roots_t workspace_roots_t;

/* Reads the roots from `config` and the environment. Returns 0 and *out (caller destroys),
 * FAILURE_INVALID when a root is not an absolute path (saying which), or FAILURE_MEMORY. */
int workspace_roots_new(const config_t *config, workspace_roots_t **out);
void workspace_roots_destroy(workspace_roots_t **self_p);

/* The roots as one line ("/home/me, /srv/repos"; "none" when there are none), for the log. */
const char *workspace_roots_text(const workspace_roots_t *self);

/* 0 when `workspace` is an absolute path under one of the roots, with no "." or ".."
 * component and, where it exists on this machine, still under the root once symlinks are
 * resolved; else FAILURE_INVALID saying why. */
int workspace_roots_check(const workspace_roots_t *self, const char *workspace);

#endif
