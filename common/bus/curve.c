/* curve: the bus's keys (see curve.h). */
#include "curve.h"

#include "failure.h"
#include "home.h"

#include <czmq.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct curve_t {
    zcert_t *own;            /* this side's pair */
    char broker_public[41];  /* a client's: the broker's public key (Z85) */
    char authorized[4096];   /* keys/authorized */
    char trusted[4096];      /* keys/trusted */
};

/* $PANOPTICON_HOME/keys/<relative> into buf. */
static void s_key_path(char *buf, size_t size, const char *relative)
{
    char inside[256];
    snprintf(inside, sizeof inside, "%s/%s", CURVE_KEYS_DIR, relative);
    home_path(buf, size, inside);
}

static bool s_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* True when `host` (after tcp://) is a loopback address or name. */
static bool s_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strncmp(host, "localhost:", 10) == 0 ||
           strncmp(host, "[::1]:", 6) == 0 || strncmp(host, "lo:", 3) == 0;
}

int curve_decide(const config_t *config, const char *const *endpoints, bool listening,
                 bool *enabled)
{
    const char *exposed = NULL;
    bool tcp = false;
    for (size_t i = 0; endpoints[i] != NULL; i++) {
        if (strncmp(endpoints[i], "tcp://", 6) != 0)
            continue;
        tcp = true;
        if (exposed == NULL && !s_loopback(endpoints[i] + 6))
            exposed = endpoints[i];
    }
    const char *env = getenv("CLOISTER_CURVE");
    if (env != NULL && env[0] != '\0')
        *enabled = strcmp(env, "0") != 0 && strcmp(env, "false") != 0;
    else if (config_has(config, "security", "curve"))
        *enabled = config_bool(config, "security", "curve", true);
    else
        *enabled = tcp;
    if (listening && exposed != NULL && !*enabled &&
        !config_bool(config, "security", "allow_insecure", false))
        return failure_set(FAILURE_INVALID,
                           "%s is reachable beyond this machine and [security] curve is off: "
                           "anyone who reaches it could submit, read and cancel tasks. Turn "
                           "curve on (pan keys init), listen on 127.0.0.1, or set [security] "
                           "allow_insecure = true",
                           exposed);
    return 0;
}

static const char *const s_role_names[] = {"submitter", "worker", "admin", "agent"};

int curve_role_parse(const char *text)
{
    for (int i = 0; i < (int)(sizeof s_role_names / sizeof s_role_names[0]); i++)
        if (text != NULL && strcmp(text, s_role_names[i]) == 0)
            return i;
    return -1;
}

const char *curve_role_name(curve_role_t role)
{
    return s_role_names[role];
}

/* Makes the pair `name` (keys/<name> and <name>_secret) unless it exists; the secret file
 * is 0600. With `authorized`, its public key is also copied to authorized/<authorized>,
 * with `role` in its metadata (a pair made before roles gets it then). */
static int s_make_pair(const char *name, const char *authorized, curve_role_t role)
{
    char path[4200], secret[4300], dir[4200];
    s_key_path(path, sizeof path, name);
    snprintf(secret, sizeof secret, "%s_secret", path);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    if (home_mkdirs(dir) != 0 || chmod(dir, 0700) != 0)
        return failure_set(FAILURE_IO, "cannot make %s: %s", dir, strerror(errno));
    /* A public key without its secret was copied here from the host that has the pair
     * (keys/broker on a client of a remote broker): it is kept, never replaced. */
    if (!s_exists(secret) && s_exists(path))
        return 0;
    zcert_t *cert = s_exists(secret) ? zcert_load(path) : zcert_new();
    if (cert == NULL)
        return failure_set(FAILURE_IO, "cannot read the key pair %s", path);
    if (authorized != NULL)
        zcert_set_meta(cert, CURVE_ROLE_META, "%s", curve_role_name(role));
    mode_t old = umask(077);
    int rc = s_exists(secret) ? 0 : zcert_save(cert, path);
    if (rc == 0 && authorized != NULL) {
        char allowed[4200], allowed_dir[4200];
        s_key_path(allowed_dir, sizeof allowed_dir, "authorized");
        s_key_path(allowed, sizeof allowed, "authorized");
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "/%s", authorized);
        rc = home_mkdirs(allowed_dir) == 0 ? zcert_save_public(cert, allowed) : -1;
    }
    umask(old);
    zcert_destroy(&cert);
    return rc == 0 ? 0 : failure_set(FAILURE_IO, "cannot write the key pair %s", path);
}

/* Copies the broker's public key to trusted/broker. */
static int s_trust_broker(void)
{
    char broker[4300], dir[4300], trusted[4400];
    s_key_path(broker, sizeof broker, "broker");
    s_key_path(dir, sizeof dir, "trusted");
    snprintf(trusted, sizeof trusted, "%s/broker", dir);
    zcert_t *cert = zcert_load(broker);
    mode_t old = umask(077);
    int rc = cert != NULL && home_mkdirs(dir) == 0 ? zcert_save_public(cert, trusted) : -1;
    umask(old);
    zcert_destroy(&cert);
    return rc == 0 ? 0 : failure_set(FAILURE_IO, "cannot write %s", trusted);
}

int curve_keys_init(void)
{
    /* The broker and its local clients may start at once, and each makes what is missing:
     * one at a time, or two broker pairs would be made and one of them lost. */
    char dir[4200], lock_path[4300];
    home_path(dir, sizeof dir, CURVE_KEYS_DIR);
    s_key_path(lock_path, sizeof lock_path, ".lock");
    if (home_mkdirs(dir) != 0 || chmod(dir, 0700) != 0)
        return failure_set(FAILURE_IO, "cannot make %s: %s", dir, strerror(errno));
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) {
        int rc = failure_set(FAILURE_IO, "cannot lock %s: %s", lock_path, strerror(errno));
        if (lock >= 0)
            close(lock);
        return rc;
    }
    int rc = s_make_pair("broker", NULL, CURVE_ROLE_ADMIN);
    if (rc == 0)
        rc = s_make_pair("client", "client", CURVE_ROLE_ADMIN);
    if (rc == 0)
        rc = s_make_pair("agent", "agent", CURVE_ROLE_AGENT);
    if (rc == 0)
        rc = s_trust_broker();
    close(lock); /* and with it the lock */
    return rc;
}

int curve_agent_cert(char *buf, size_t size)
{
    char path[4200];
    s_key_path(path, sizeof path, "agent_secret");
    if (snprintf(buf, size, "%s", path) >= (int)size)
        return failure_set(FAILURE_TOO_BIG, "the path %s is too long", path);
    return 0;
}

/* True for a name usable as a file name: [A-Za-z0-9._-], not starting with '.'. */
static bool s_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 64 || name[0] == '.')
        return false;
    return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
           len;
}

int curve_keys_add(const char *name, curve_role_t role)
{
    if (!s_name_ok(name) || strcmp(name, "client") == 0 || strcmp(name, "agent") == 0)
        return failure_set(FAILURE_INVALID,
                           "'%s' cannot name a key (letters, digits, '.', '_', '-'; not 'client' "
                           "or 'agent')",
                           name);
    char relative[128], path[4300];
    snprintf(relative, sizeof relative, "clients/%s", name);
    s_key_path(path, sizeof path, relative);
    if (s_exists(path))
        return failure_set(FAILURE_INVALID, "a key named '%s' exists already (%s)", name, path);
    return s_make_pair(relative, name, role);
}

int curve_keys_revoke(const char *name)
{
    char relative[128], path[4300];
    snprintf(relative, sizeof relative, "authorized/%s", name);
    s_key_path(path, sizeof path, relative);
    if (!s_name_ok(name) || unlink(path) != 0)
        return failure_set(FAILURE_NOT_FOUND, "no authorized key named '%s' (%s)", name, path);
    return 0;
}

int curve_load(curve_t **out, bool server)
{
    *out = NULL;
    curve_t *self = calloc(1, sizeof *self);
    if (self == NULL)
        return failure_set(FAILURE_MEMORY, "out of memory");
    char path[4300], secret[4400];
    const char *chosen = server ? NULL : getenv("CLOISTER_CURVE_CERT");
    if (chosen != NULL && chosen[0] != '\0') {
        /* The secret file; zcert_load wants the public name and reads "<name>_secret". */
        snprintf(path, sizeof path, "%s", chosen);
        size_t len = strlen(path);
        if (len > 7 && strcmp(path + len - 7, "_secret") == 0)
            path[len - 7] = '\0';
    } else {
        s_key_path(path, sizeof path, server ? "broker" : "client");
    }
    snprintf(secret, sizeof secret, "%s_secret", path);
    s_key_path(self->authorized, sizeof self->authorized, "authorized");
    s_key_path(self->trusted, sizeof self->trusted, "trusted");
    self->own = s_exists(secret) ? zcert_load(path) : NULL;
    int rc = 0;
    if (self->own == NULL)
        rc = failure_set(FAILURE_NOT_FOUND, "CURVE is on but there is no key pair %s (run `pan "
                                            "keys init`)", secret);
    if (rc == 0 && !server) {
        char broker[4300];
        s_key_path(broker, sizeof broker, "broker");
        zcert_t *cert = s_exists(broker) ? zcert_load(broker) : NULL;
        if (cert == NULL)
            rc = failure_set(FAILURE_NOT_FOUND,
                             "CURVE is on but the broker's public key %s is missing (copy it "
                             "from the broker's keys/, or run `pan keys init` there)",
                             broker);
        else
            snprintf(self->broker_public, sizeof self->broker_public, "%s",
                     zcert_public_txt(cert));
        zcert_destroy(&cert);
    }
    if (rc != 0) {
        curve_destroy(&self);
        return rc;
    }
    *out = self;
    return 0;
}

void curve_destroy(curve_t **self_p)
{
    curve_t *self = *self_p;
    if (self == NULL)
        return;
    zcert_destroy(&self->own);
    free(self);
    *self_p = NULL;
}

const char *curve_authorized_dir(const curve_t *self)
{
    return self->authorized;
}

const char *curve_trusted_dir(const curve_t *self)
{
    return self->trusted;
}

const char *curve_public(const curve_t *self)
{
    return zcert_public_txt(self->own);
}

void curve_apply_client_of(const curve_t *self, void *socket, const char *server_public)
{
    zcert_apply(self->own, socket);
    zsock_set_curve_serverkey(socket, server_public);
}

void curve_apply_server(const curve_t *self, void *socket)
{
    zsock_set_curve_server(socket, 1);
    zcert_apply(self->own, socket);
}

void curve_apply_client(const curve_t *self, void *socket)
{
    zcert_apply(self->own, socket);
    zsock_set_curve_serverkey(socket, self->broker_public);
}

/* The process's client keys: set once, at start, before any socket exists. */
static curve_t *s_client;

/* True when every tcp endpoint is on this machine. */
static bool s_all_local(const char *const *endpoints)
{
    for (size_t i = 0; endpoints[i] != NULL; i++)
        if (strncmp(endpoints[i], "tcp://", 6) == 0 && !s_loopback(endpoints[i] + 6))
            return false;
    return true;
}

int curve_client_init(const config_t *config, const char *const *endpoints)
{
    bool enabled = false;
    int rc = curve_decide(config, endpoints, false, &enabled);
    if (rc != 0 || !enabled || s_client != NULL)
        return rc;
    /* A broker on this machine shares the home: whoever starts first makes the keys (a
     * remote broker's public key must be copied here instead, so none is made for it). */
    const char *chosen = getenv("CLOISTER_CURVE_CERT");
    if ((chosen == NULL || chosen[0] == '\0') && s_all_local(endpoints))
        rc = curve_keys_init();
    /* A worker's task socket accepts the broker's key from trusted/: on a host where only
     * the broker's public key was copied to keys/broker, that is the key it trusts. */
    char broker[4300], trusted[4300];
    s_key_path(broker, sizeof broker, "broker");
    s_key_path(trusted, sizeof trusted, "trusted/broker");
    if (rc == 0 && s_exists(broker) && !s_exists(trusted))
        rc = s_trust_broker();
    return rc != 0 ? rc : curve_load(&s_client, false);
}

const curve_t *curve_client(void)
{
    return s_client;
}
