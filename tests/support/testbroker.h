/* testbroker: start a real cloister-broker for a test, on the test environment's ipc
 * endpoints and home directory, and wait until it answers on control. */
#ifndef CLOISTER_TESTBROKER_H
#define CLOISTER_TESTBROKER_H

#include "client.h"
#include "testenv.h"

#include <sys/types.h>

/* Starts the broker with `heartbeat_ms` and `sync` ("full"/"normal"/"off"), logging to
 * <dir>/broker.log, and waits (up to 5 s) for a stats reply. Returns the pid or -1. */
pid_t testbroker_start(testenv_t *env, int heartbeat_ms, const char *sync);

/* A control client for the environment's broker (caller owns). */
client_t *testbroker_client(testenv_t *env);

/* Submits through control; returns 0 or the client's error. `priority`/`group` may be NULL. */
int testbroker_submit(client_t *client, const char *id, const char *specialist,
                      const char *priority, const char *group);

/* The state of task `id` ("queued", "running", ...) copied into buf; "" if unknown. */
const char *testbroker_state(client_t *client, const char *id, char *buf, size_t size);

/* The ids queued for `specialist` in dispatch order, written space-separated into buf. */
const char *testbroker_queue(client_t *client, const char *specialist, char *buf, size_t size);

#endif
