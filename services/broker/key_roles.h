/* key_roles: what each authorized CURVE key may do on the bus (see curve.h for the roles).
 *
 * The roles are read from the authorized/ directory's certificates (their "role"
 * metadata); czmq's certificate store reloads the directory when it changes, so `pan keys
 * add --role` and `pan keys revoke` take effect without a restart. On a plain bus (no CURVE,
 * the ipc default inside the 0700 home) there are no keys and everything is allowed. */
#ifndef CLOISTER_KEY_ROLES_H
#define CLOISTER_KEY_ROLES_H

#include "curve.h"

/* What a message or request asks to do. */
typedef enum {
    KEY_ACTION_READ,         /* status, lists, show, replay */
    KEY_ACTION_SUBMIT,       /* a new task (not a merge: KEY_ACTION_MERGE) */
    KEY_ACTION_MERGE,        /* a new merge-agent task from outside: approving a merge */
    KEY_ACTION_CHANGE,       /* cancelling or retrying one's own task */
    KEY_ACTION_WORK,         /* hello, heartbeat, progress, result, release, bye */
    KEY_ACTION_FORCE,        /* payload.force: a merge past the review gate */
    KEY_ACTION_OTHERS_TASKS, /* cancelling or retrying a task another key submitted */
    KEY_ACTION_RETRY_DEAD,   /* retrying a task that gave up */
    KEY_ACTION_RELOAD,       /* reading cloister.toml again */
    KEY_ACTION_NOTE,         /* adding a note to a task's events (note_task) */
    KEY_ACTION_RESUME,       /* resuming a paused specialist */
} key_action_t;

typedef struct key_roles_t key_roles_t;

/* The roles of the keys in `authorized_dir`. Returns a new table (caller destroys) or NULL
 * when memory runs out. */
key_roles_t *key_roles_new(const char *authorized_dir);
void key_roles_destroy(key_roles_t **self_p);

/* Whether the key `public_key` (Z85) may do `action`: 0, or FAILURE_DENIED with a reason
 * naming the role and the action ("a worker key may not submit tasks (submitter or admin
 * may)"). `self` NULL (a plain bus) or `public_key` NULL allows everything. A key without
 * a role is an admin, and a warning is logged once per key. */
int key_roles_check(key_roles_t *self, const char *public_key, key_action_t action);

#endif
