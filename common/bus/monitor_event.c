#include "monitor_event.h"

#include <string.h>
#include <zmq.h>

bool monitor_event_read(void *monitor, uint16_t *event, uint32_t *value)
{
    /* Two frames: [event id (2 bytes), value (4 bytes)] and the endpoint. */
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frame);
        return false;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&frame) >= 6) {
        memcpy(event, zmq_msg_data(&frame), 2);
        memcpy(value, (const char *)zmq_msg_data(&frame) + 2, 4);
    }
    bool more = zmq_msg_more(&frame);
    while (more) {
        zmq_msg_close(&frame);
        zmq_msg_init(&frame);
        more = zmq_msg_recv(&frame, monitor, 0) >= 0 && zmq_msg_more(&frame);
    }
    zmq_msg_close(&frame);
    return true;
}
