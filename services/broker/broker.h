/* broker: the loop that owns Cloister's queues.
 *
 * It binds three sockets (in: PULL, events: PUB, control: ROUTER), keeps the active tasks
 * in memory and every change in the store, and connects one PUSH socket to each worker
 * that announces itself. One loop iteration: wait for input or the next deadline, apply
 * everything that arrived, run the timers (worker liveness, leases, backoff), hand tasks
 * to idle workers, commit once, and only then publish events, answer requests and send
 * tasks and acks. A crash before the commit loses nothing anyone was told about.
 *
 * With CURVE on (common/bus/curve.h; on by default when an endpoint is reachable beyond
 * loopback) the three sockets are CURVE servers: a czmq zauth actor (the ZAP handler)
 * admits only the public keys in keys/authorized, so a stranger's connection never
 * completes its handshake and nothing it sends is read. The broker makes its keys and the
 * default client's on first start. */
#ifndef CLOISTER_BROKER_H
#define CLOISTER_BROKER_H

#include "config.h"
#include "store.h"

#include <signal.h>

typedef struct {
    const char *in_endpoint;
    const char *events_endpoint;
    const char *control_endpoint;
    const char *db_path;
    store_sync_t sync;
    int heartbeat_ms;      /* ping interval; workers are lost after heartbeat_misses */
    int heartbeat_misses;  /* ... intervals of silence, on this host (ipc://, loopback) */
    /* ... and over a network (tcp:// to another address: another host, a container): a
     * lossy link holds a heartbeat back for seconds while TCP retransmits, and taking a
     * worker that is still running for lost runs its task twice. 0: heartbeat_misses. */
    int remote_heartbeat_misses;
    int64_t event_retention; /* events kept for replay */
    int retry_backoff_ms;    /* base of the exponential backoff */
    int64_t wal_limit_mb;    /* the store's WAL bound (0: the store's default) */
    int64_t min_free_mb;     /* below this much free disk, submits are refused (disk_guard.h) */
    int64_t reserve_mb;      /* room kept for running tasks' results when the disk fills */
    int64_t keep_finished_days; /* finished tasks older than this are deleted (0: kept) */
    int64_t max_peers;       /* connections to in, events and control, together (peer_guard.h) */
    int max_sockets;         /* ZeroMQ sockets (ZMQ_MAX_SOCKETS): each worker takes one */
    int64_t unread_replies_per_peer_mb; /* replies held for one peer that does not read */
    int64_t unread_replies_mb;          /* ... and for all of them (replies.h) */
    /* cloister.toml (borrowed, outlives the broker): per specialist `timeout` and
     * `max_attempts` defaults, and the declared [specialists.<name>] are known names. */
    const config_t *config;
    const char *const *specialists; /* the declared names (NULL-terminated) */
    /* Set (by a SIGHUP) to read cloister.toml and the authorized keys again
     * (broker_reload.c); may be NULL. */
    volatile sig_atomic_t *reload;
} broker_config_t;

typedef struct broker_t broker_t;

/* Opens the store, recovers the active tasks and binds the sockets. Returns 0 or a
 * negative FAILURE_* code (reason in failure_message()). The caller owns *out. */
int broker_new(const broker_config_t *config, broker_t **out);
void broker_destroy(broker_t **self_p);

/* Runs until *stop becomes non-zero (set it from a signal handler). Returns 0, or a
 * negative code if the store failed for another reason than a full disk (the broker stops
 * rather than acknowledge anything it could not commit; a full disk it rides out, see
 * disk_guard.h). */
int broker_run(broker_t *self, volatile sig_atomic_t *stop);

#endif
