/* testbroker: start a real cloister-broker for a test, on the test environment's ipc
 * endpoints and home directory, and wait until it answers on control. */
#ifndef CLOISTER_TESTBROKER_H
#define CLOISTER_TESTBROKER_H

#include "client.h"
#include "testenv.h"

#include <stdbool.h>
#include <sys/types.h>

/* The one way tests start a broker: on the environment's endpoints and home, with
 * `heartbeat_ms` (0: the default) and `sync` ("full"/"normal"/"off"; NULL: the default),
 * logging to <dir>/broker.log. testbroker_spawn() returns at once (the chaos test restarts
 * brokers under load); testbroker_start() also waits (up to 10 s) until it answers a stats
 * request. Both return the pid, or -1 (saying why on stderr). */
pid_t testbroker_spawn(testenv_t *env, int heartbeat_ms, const char *sync);
pid_t testbroker_start(testenv_t *env, int heartbeat_ms, const char *sync);

/* Waits (up to 10 s) until the environment's broker answers a stats request; false, having
 * said so, when it does not. */
bool testbroker_wait_ready(testenv_t *env);

/* A control client for the environment's broker (caller owns). */
client_t *testbroker_client(testenv_t *env);

/* Submits through control; returns 0 or the client's error. `priority`/`group` may be NULL. */
int testbroker_submit(client_t *client, const char *id, const char *specialist,
                      const char *priority, const char *group);

/* The state of task `id` ("queued", "running", ...) copied into buf; "" when the broker
 * has no such task and also when it did not answer: fit for waiting for a state, not for
 * checking that a task does not exist (testbroker_task_unknown() does that). */
const char *testbroker_state(client_t *client, const char *id, char *buf, size_t size);

/* True when the broker answers that it has no task `id`; false when it has one, and when
 * it does not answer at all (a broker that crashed must not read as "no such task"). */
bool testbroker_task_unknown(client_t *client, const char *id);

/* The ids queued for `specialist` in dispatch order, written space-separated into buf. */
const char *testbroker_queue(client_t *client, const char *specialist, char *buf, size_t size);

/* How many messages the broker refused as `category` (stats.rejected); -1 when stats
 * could not be had. */
int64_t testbroker_rejected(client_t *client, const char *category);

#endif
