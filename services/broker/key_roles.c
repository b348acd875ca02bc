/* key_roles: see key_roles.h. */
#include "key_roles.h"

#include "failure.h"
#include "log.h"

#include <czmq.h>
#include <stdbool.h>
#include <stdlib.h>

struct key_roles_t {
    zcertstore_t *store; /* authorized/: reloaded by czmq when the directory changes */
    zhashx_t *warned;    /* keys without a role already warned about (key -> "") */
};

key_roles_t *key_roles_new(const char *authorized_dir)
{
    key_roles_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->store = zcertstore_new(authorized_dir);
    self->warned = zhashx_new();
    if (self->store == NULL || self->warned == NULL)
        key_roles_destroy(&self);
    return self;
}

void key_roles_destroy(key_roles_t **self_p)
{
    key_roles_t *self = *self_p;
    if (self == NULL)
        return;
    zcertstore_destroy(&self->store);
    zhashx_destroy(&self->warned);
    free(self);
    *self_p = NULL;
}

/* The role of `public_key`: its certificate's, or admin for a key made before roles (with
 * a warning, once); -1 for a key gone from the directory since its handshake (revoked:
 * the ZAP handler refuses its next connection, and nothing it sends meanwhile counts). */
static int s_role(key_roles_t *self, const char *public_key)
{
    zcert_t *cert = zcertstore_lookup(self->store, public_key);
    if (cert == NULL)
        return -1;
    int role = curve_role_parse(zcert_meta(cert, CURVE_ROLE_META));
    if (role >= 0)
        return role;
    if (zhashx_lookup(self->warned, public_key) == NULL) {
        zhashx_insert(self->warned, public_key, "");
        log_warn("the authorized key %.12s... has no role: it may do everything, as an admin; "
                 "give it one with `pan keys revoke NAME` and `pan keys add NAME --role ROLE`",
                 public_key);
    }
    return CURVE_ROLE_ADMIN;
}

static bool s_allows(curve_role_t role, key_action_t action)
{
    switch (action) {
    case KEY_ACTION_READ:
        return true;
    case KEY_ACTION_SUBMIT:
        return role != CURVE_ROLE_WORKER;
    case KEY_ACTION_MERGE:
    case KEY_ACTION_CHANGE:
        /* An agent's key is shared by every agent and in reach of whatever a branch's
         * content told one to do: it neither approves a merge nor stops anyone's work. */
        return role == CURVE_ROLE_SUBMITTER || role == CURVE_ROLE_ADMIN;
    case KEY_ACTION_WORK:
        return role == CURVE_ROLE_WORKER || role == CURVE_ROLE_ADMIN;
    case KEY_ACTION_FORCE:
    case KEY_ACTION_OTHERS_TASKS:
    case KEY_ACTION_RETRY_DEAD:
    case KEY_ACTION_RELOAD:
    case KEY_ACTION_NOTE:
    case KEY_ACTION_RESUME:
        return role == CURVE_ROLE_ADMIN;
    }
    return false;
}

static const char *s_action_name(key_action_t action)
{
    switch (action) {
    case KEY_ACTION_READ:
        return "read";
    case KEY_ACTION_SUBMIT:
        return "submit tasks";
    case KEY_ACTION_MERGE:
        return "submit a merge (approve one)";
    case KEY_ACTION_CHANGE:
        return "cancel or retry tasks";
    case KEY_ACTION_WORK:
        return "act as a worker";
    case KEY_ACTION_FORCE:
        return "force a merge past the review gate";
    case KEY_ACTION_OTHERS_TASKS:
        return "cancel or retry a task another key submitted";
    case KEY_ACTION_RETRY_DEAD:
        return "retry a dead task";
    case KEY_ACTION_RELOAD:
        return "reload the broker's configuration";
    case KEY_ACTION_NOTE:
        return "add a note to a task's events";
    case KEY_ACTION_RESUME:
        return "resume a paused specialist";
    }
    return "do that";
}

static const char *s_who_may(key_action_t action)
{
    switch (action) {
    case KEY_ACTION_SUBMIT:
        return "submitter, agent or admin";
    case KEY_ACTION_MERGE:
    case KEY_ACTION_CHANGE:
        return "submitter or admin";
    case KEY_ACTION_WORK:
        return "worker or admin";
    default:
        return "admin";
    }
}

int key_roles_check(key_roles_t *self, const char *public_key, key_action_t action)
{
    if (self == NULL || public_key == NULL)
        return 0;
    int role = s_role(self, public_key);
    if (role < 0)
        return failure_set(FAILURE_DENIED, "the key %.12s... is no longer authorized", public_key);
    if (s_allows((curve_role_t)role, action))
        return 0;
    const char *role_name = curve_role_name((curve_role_t)role);
    return failure_set(FAILURE_DENIED, "a%s %s key may not %s (%s may)",
                       role_name[0] == 'a' ? "n" : "", role_name, s_action_name(action),
                       s_who_may(action));
}
