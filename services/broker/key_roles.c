/* key_roles: see key_roles.h. */
#include "key_roles.h"

#include "clock.h"
#include "failure.h"
#include "log.h"

#include <czmq.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* How often the directory is listed again when its own time stamp says nothing changed
 * (a file edited in place changes only its own). */
#define KEY_ROLES_RESCAN_MS 200

/* One authorized key, read from the file `name`. */
typedef struct {
    char *name;
    char public_key[41];
    int role; /* curve_role_t, or -1: the file has no role (an admin, with a warning) */
} key_entry_t;

/* The keys read whole from the directory at one time. Replaced as a whole, never edited. */
typedef struct {
    key_entry_t *entries;
    size_t count;
    zhashx_t *by_key; /* public key -> its entry (borrowed) */
} key_set_t;

struct key_roles_t {
    char *dir;
    key_set_t *set;          /* the keys in force */
    uint64_t signature;      /* of the listing `set` was read from (s_signature) */
    struct timespec dir_mtime;
    int64_t scanned_at;      /* monotonic ms of the last listing */
    zhashx_t *warned;        /* keys without a role already warned about (key -> "") */
};

static void s_set_destroy(key_set_t **set_p)
{
    key_set_t *set = *set_p;
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->count; i++)
        free(set->entries[i].name);
    free(set->entries);
    zhashx_destroy(&set->by_key);
    free(set);
    *set_p = NULL;
}

/* True for a file the store reads: not hidden, not a secret. */
static bool s_key_file(const char *name)
{
    size_t len = strlen(name);
    return name[0] != '.' && (len < 7 || strcmp(name + len - 7, "_secret") != 0);
}

/* FNV-1a over the names, inodes, sizes and times of the key files: any rename, rewrite or
 * removal changes it. */
static uint64_t s_signature(const char *dir, bool *ok)
{
    uint64_t hash = 1469598103934665603ULL;
    DIR *listing = opendir(dir);
    *ok = listing != NULL;
    if (listing == NULL)
        return 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (!s_key_file(entry->d_name))
            continue;
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        if (stat(path, &st) != 0)
            continue;
        int64_t fields[] = {(int64_t)st.st_ino, (int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec,
                            (int64_t)st.st_mtim.tv_nsec};
        const unsigned char *bytes = (const unsigned char *)entry->d_name;
        for (size_t i = 0; bytes[i] != '\0'; i++)
            hash = (hash ^ bytes[i]) * 1099511628211ULL;
        bytes = (const unsigned char *)fields;
        for (size_t i = 0; i < sizeof fields; i++)
            hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
    closedir(listing);
    return hash;
}

static const key_entry_t *s_find_name(const key_set_t *set, const char *name)
{
    for (size_t i = 0; set != NULL && i < set->count; i++)
        if (strcmp(set->entries[i].name, name) == 0)
            return &set->entries[i];
    return NULL;
}

/* Reads one key file into `entry`; false when it does not read as a certificate. */
static bool s_read_entry(const char *dir, const char *name, key_entry_t *entry)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    zcert_t *cert = zcert_load(path);
    if (cert == NULL)
        return false;
    snprintf(entry->public_key, sizeof entry->public_key, "%s", zcert_public_txt(cert));
    entry->role = curve_role_parse(zcert_meta(cert, CURVE_ROLE_META));
    zcert_destroy(&cert);
    entry->name = strdup(name);
    return entry->name != NULL;
}

/* Reads the directory into a new set. A file that does not read (written in place by
 * something else, and caught half-way) keeps the key the previous set had under its name,
 * and *whole is false: the directory is read again at the next check. */
static key_set_t *s_read_set(const key_roles_t *self, bool *whole)
{
    *whole = true;
    key_set_t *set = calloc(1, sizeof *set);
    DIR *listing = set != NULL ? opendir(self->dir) : NULL;
    if (listing == NULL) {
        free(set);
        return NULL;
    }
    size_t cap = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL) {
        if (!s_key_file(entry->d_name))
            continue;
        if (set->count == cap) {
            size_t new_cap = cap ? cap * 2 : 16;
            key_entry_t *grown = realloc(set->entries, new_cap * sizeof *grown);
            if (grown == NULL)
                break;
            set->entries = grown;
            cap = new_cap;
        }
        key_entry_t *slot = &set->entries[set->count];
        if (s_read_entry(self->dir, entry->d_name, slot)) {
            set->count++;
            continue;
        }
        *whole = false;
        const key_entry_t *before = s_find_name(self->set, entry->d_name);
        if (before == NULL)
            continue;
        *slot = *before;
        slot->name = strdup(before->name);
        if (slot->name != NULL)
            set->count++;
    }
    closedir(listing);
    set->by_key = zhashx_new();
    if (set->by_key == NULL) {
        s_set_destroy(&set);
        return NULL;
    }
    for (size_t i = 0; i < set->count; i++)
        zhashx_insert(set->by_key, set->entries[i].public_key, &set->entries[i]);
    return set;
}

/* Reads the directory again if it changed. The new set replaces the old one only once it
 * has been read to the end: a check never sees a half-read directory. */
static void s_refresh(key_roles_t *self)
{
    struct stat st;
    int64_t now = clock_now_ms();
    bool dir_changed = stat(self->dir, &st) == 0 &&
                       (st.st_mtim.tv_sec != self->dir_mtime.tv_sec ||
                        st.st_mtim.tv_nsec != self->dir_mtime.tv_nsec);
    if (self->set != NULL && !dir_changed && now - self->scanned_at < KEY_ROLES_RESCAN_MS)
        return;
    self->scanned_at = now;
    if (dir_changed)
        self->dir_mtime = st.st_mtim;
    bool ok = false;
    uint64_t signature = s_signature(self->dir, &ok);
    if (self->set != NULL && (!ok || signature == self->signature))
        return;
    bool whole = false;
    key_set_t *set = s_read_set(self, &whole);
    if (set == NULL)
        return; /* the directory cannot be read now: the keys in force stay */
    s_set_destroy(&self->set);
    self->set = set;
    /* Not whole (a file caught half-written): recorded under a signature no listing gives,
     * so the directory is read again at the next check. */
    self->signature = whole ? signature : signature + 1;
}

key_roles_t *key_roles_new(const char *authorized_dir)
{
    key_roles_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return NULL;
    self->dir = strdup(authorized_dir);
    self->warned = zhashx_new();
    if (self->dir == NULL || self->warned == NULL)
        key_roles_destroy(&self);
    return self;
}

void key_roles_destroy(key_roles_t **self_p)
{
    key_roles_t *self = *self_p;
    if (self == NULL)
        return;
    s_set_destroy(&self->set);
    free(self->dir);
    zhashx_destroy(&self->warned);
    free(self);
    *self_p = NULL;
}

/* The role of `public_key`: its certificate's, or admin for a key made before roles (with
 * a warning, once); -1 for a key gone from the directory since its handshake (revoked:
 * the ZAP handler refuses its next connection, and nothing it sends meanwhile counts). */
static int s_role(key_roles_t *self, const char *public_key)
{
    s_refresh(self);
    const key_entry_t *found = self->set ? zhashx_lookup(self->set->by_key, public_key) : NULL;
    if (found == NULL)
        return -1;
    if (found->role >= 0)
        return found->role;
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
