/* roles: what the agent is asked to be for a task (the "agent roles" of the execution spec).
 *
 * Choosing the role, first match wins:
 *   1. the task's payload `role` (a per-task override);
 *   2. the specialist's own role: review-agent → review, test-agent → test,
 *      merge-agent → merge;
 *   3. the payload `type`: feature → implement, bug/bugfix/fix → fix, refactor → refactor,
 *      test/tests → test, docs/doc/documentation → document, review → review,
 *      chore → implement;
 *   4. implement.
 * Its text: the repository's `.cloister/roles/<role>.md` as committed on the target branch
 * (repo_files.h: read through git, never from a working tree, so a branch under review
 * cannot supply its own reviewer) when present (this defines a custom role or overrides a
 * built-in one; it is the project's own configuration, used as instructions and labelled
 * with where it came from), else the built-in text, else the
 * role is unknown (an error). When the task has a `type`, a line saying what that kind of
 * change needs is added (e.g. a bug fix needs a regression test), so a reviewer of a bug
 * fix still reviews with the bug in mind.
 *
 * Role names are [a-z0-9_-], 1..64 characters (they name a file). */
#ifndef CLOISTER_ROLES_H
#define CLOISTER_ROLES_H

#include <stddef.h>

#define ROLES_NAME_MAX 64
/* The largest custom role file read. */
#define ROLES_FILE_MAX (16 * 1024)

/* The built-in role for a task type (see above), or NULL for an unknown or NULL type.
 * Static string. */
const char *roles_for_type(const char *type);

/* Picks the role for a task of `specialist` with payload `type` and `role` (each may be
 * NULL or ""), looking for custom roles in the repository containing `repo` as committed
 * at `rev` (the target branch; either NULL: none). On 0, `name` (at least
 * ROLES_NAME_MAX + 1 bytes) holds the role's name and *text a new string the caller frees:
 *   "Role: <name> (<source>)\n\n<role text>\n[\nTask type: <type> - <what it needs>\n]"
 * Returns FAILURE_INVALID (an override that is not a valid role name), FAILURE_NOT_FOUND
 * ("unknown role 'x': no built-in role and no .cloister/roles/x.md"), or FAILURE_MEMORY;
 * *text is then NULL. */
int roles_resolve(char **text, char *name, const char *specialist, const char *type,
                  const char *role, const char *repo, const char *rev);

#endif
