/* curve: who may use the bus. CURVE is ZeroMQ's public-key security: every connection to
 * the broker is encrypted, and only clients whose public key is authorised get through.
 *
 * Keys live in $PANOPTICON_HOME/keys/, in czmq's certificate format (zcert: a text file per
 * key, the secret one 0600):
 *   broker, broker_secret    the broker's pair; clients need its public key
 *   client, client_secret    the default client pair (pan, the specialists, a cloister-mcp
 *                            started by hand)
 *   agent, agent_secret      the pair a specialist gives its agent's cloister-mcp (role
 *                            agent: what a prompt-injected agent could do is bounded by it)
 *   clients/NAME(_secret)    more client pairs, one per party (`pan keys add NAME`)
 *   authorized/NAME          the public keys the broker accepts (client, and each NAME)
 *   trusted/broker           the broker's public key alone: what a worker's task socket
 *                            accepts (a worker's PULL is a CURVE server too, and only the
 *                            broker may hand it a task)
 * The broker reloads authorized/ on SIGHUP (and czmq notices a changed directory itself),
 * so `pan keys revoke NAME` takes effect without a restart.
 *
 * [security] curve = true | false. Unset, it is true whenever an endpoint is tcp, loopback
 * included (ipc stays plain: its socket files live where the configuration puts them,
 * by default nowhere another user reaches when inside the 0700 home): on a shared machine
 * any local user can connect to 127.0.0.1, so TCP is authenticated by default, and TCP
 * without CURVE is an explicit choice the broker warns about at start. A broker asked to
 * listen beyond loopback with curve off refuses to start unless [security] allow_insecure
 * = true. The keys are made on first start, by the broker or by the first local client
 * (everything on this machine shares $PANOPTICON_HOME/keys); a public key whose secret is
 * not there (keys/broker copied from the broker's host) is kept, never replaced, and a
 * client copies keys/broker to trusted/broker when that is missing. CLOISTER_CURVE=1|0 overrides
 * the setting; CLOISTER_CURVE_CERT names the secret certificate a client uses instead of
 * keys/client_secret. */
#ifndef CLOISTER_CURVE_H
#define CLOISTER_CURVE_H

#include "config.h"

#include <stdbool.h>

#define CURVE_KEYS_DIR "keys"

typedef struct curve_t curve_t;

/* Whether the bus uses CURVE, for these endpoints (NULL-terminated) and configuration.
 * Returns 0 with *enabled, or (`listening`: the broker's own endpoints) FAILURE_INVALID
 * when one would be reachable beyond loopback without CURVE and allow_insecure is not set
 * (the reason names the endpoint). */
int curve_decide(const config_t *config, const char *const *endpoints, bool listening,
                 bool *enabled);

/* For a client process (pan, a specialist, cloister-mcp): decides with the endpoints it
 * connects to and, when CURVE is on, loads its keys for the whole process: every client
 * socket and every specialist's socket to the broker then uses them. Returns 0 or
 * curve_load()'s failure. */
int curve_client_init(const config_t *config, const char *const *endpoints);

/* The process's client keys (curve_client_init), or NULL when the bus is plain. */
const curve_t *curve_client(void);

/* What an authorized key may do on the bus, kept in its authorized/NAME file's metadata
 * (czmq's zcert metadata "role"):
 *   submitter  submits tasks, cancels and retries its own, reads (status, lists, events)
 *   worker     says hello, heartbeats, reports progress and results for the tasks it was
 *              given, reads (the fence asks for its task)
 *   agent      the key of the MCP server a specialist gives its coding agent: reads, and
 *              submits tasks other than merges (reviews, tests, work to hand off). It never
 *              forces, never submits a merge (that is approving one), never cancels or
 *              retries a task (all agents share it, so "its own" would be every agent's),
 *              and cannot act as a worker
 *   admin      all of that, and what overrides or reaches other people's work: payload.force,
 *              cancelling or retrying others' tasks, retrying dead tasks
 * A key without a role (made before roles existed) is an admin; the broker logs a warning.
 * Keys themselves are files in $PANOPTICON_HOME/keys: changing them needs that directory. */
typedef enum {
    CURVE_ROLE_SUBMITTER,
    CURVE_ROLE_WORKER,
    CURVE_ROLE_ADMIN,
    CURVE_ROLE_AGENT,
} curve_role_t;

#define CURVE_ROLE_META "role"

/* The role a name spells ("submitter", "worker", "admin", "agent"), or -1. */
int curve_role_parse(const char *text);
const char *curve_role_name(curve_role_t role);

/* Makes the broker pair, the default client pair and authorizes the client (an admin: the
 * owner's pan and local services), and the agent pair, authorized as an agent, in
 * $PANOPTICON_HOME/keys (the pairs that exist already are kept). Returns 0 or FAILURE_IO. */
int curve_keys_init(void);

/* The path of the agent pair's secret file (keys/agent_secret) into buf: what a specialist
 * names in CLOISTER_CURVE_CERT for its agent's cloister-mcp. Returns 0 or FAILURE_TOO_BIG. */
int curve_agent_cert(char *buf, size_t size);

/* A new client pair keys/clients/NAME(_secret), authorized with `role`. Returns 0,
 * FAILURE_INVALID (a bad or taken name; "client" and "agent" are the home's own) or
 * FAILURE_IO. */
int curve_keys_add(const char *name, curve_role_t role);

/* Removes NAME from authorized/ (its pair stays in clients/). FAILURE_NOT_FOUND if it was
 * not there. */
int curve_keys_revoke(const char *name);

/* The keys of one side, loaded from $PANOPTICON_HOME/keys: `server` for the broker (its
 * pair), else a client (its pair and the broker's public key). Returns 0 with *out (caller
 * destroys), or FAILURE_NOT_FOUND naming the missing file (run `pan keys init`). */
int curve_load(curve_t **out, bool server);
void curve_destroy(curve_t **self_p);

/* The directory of authorized public keys (for the broker's zauth). Owned by the keys. */
const char *curve_authorized_dir(const curve_t *self);

/* The directory holding only the broker's public key (for a worker's zauth). Owned. */
const char *curve_trusted_dir(const curve_t *self);

/* This side's public key (Z85, 40 characters). Owned by the keys. */
const char *curve_public(const curve_t *self);

/* Sets a socket (zsock or raw libzmq) up as a CURVE server with the broker's pair, or as a
 * client of the broker with the client pair. Before bind / connect. */
void curve_apply_server(const curve_t *self, void *socket);
void curve_apply_client(const curve_t *self, void *socket);

/* Sets a socket up as a CURVE client of another server than the broker (the broker's PUSH to
 * a worker): this side's pair, and `server_public` (Z85) as the server's key. */
void curve_apply_client_of(const curve_t *self, void *socket, const char *server_public);

#endif
