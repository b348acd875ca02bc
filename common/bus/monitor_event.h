/* monitor_event: the events of a ZeroMQ socket monitor (zmq_socket_monitor), as read from
 * the PAIR socket connected to the monitor's endpoint. */
#ifndef CLOISTER_MONITOR_EVENT_H
#define CLOISTER_MONITOR_EVENT_H

#include <stdbool.h>
#include <stdint.h>

/* Reads the next event waiting on `monitor` without blocking: its id (a ZMQ_EVENT_* bit)
 * into *event and its value (for connection events, the connection's descriptor) into
 * *value. False when none is waiting. */
bool monitor_event_read(void *monitor, uint16_t *event, uint32_t *value);

#endif
