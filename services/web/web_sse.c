/* web_sse: the broker's events as Server-Sent Events (see web_sse.h). */
#include "web_sse.h"

#include "client.h"
#include "msgjson.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const web_t *web;
    int64_t since;
    int fds[2]; /* the pipe: the thread writes [1], the connection reads [0] */
    pthread_t thread;
    volatile sig_atomic_t stop;
} stream_t;

/* Writes all of `len` bytes; false once the reader is gone. */
static bool s_write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

static int s_on_event(const wire_msg_t *event, const void *raw, size_t len, void *arg)
{
    stream_t *stream = arg;
    json_t *json = msgjson_from_raw(raw, len);
    char *text = json != NULL ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    if (text == NULL)
        return 0; /* not representable: skipped, the stream goes on */
    char head[64];
    int head_len = snprintf(head, sizeof head, "id: %lld\ndata: ",
                            (long long)wire_msg_int(event, FIELD_SEQ, 0));
    bool ok = s_write_all(stream->fds[1], head, (size_t)head_len) &&
              s_write_all(stream->fds[1], text, strlen(text)) &&
              s_write_all(stream->fds[1], "\n\n", 2);
    free(text);
    return ok ? 0 : 1;
}

static void *s_follow(void *arg)
{
    stream_t *stream = arg;
    client_t *control = client_new(stream->web->control_ep, stream->web->timeout_ms);
    client_events_t *events = client_events_new(stream->web->events_ep, NULL);
    if (control != NULL && events != NULL)
        client_events_run(events, control, stream->since, true, &stream->stop, s_on_event,
                          stream);
    client_events_destroy(&events);
    client_destroy(&control);
    close(stream->fds[1]); /* the connection reads the end of the stream */
    return NULL;
}

/* MHD's reader: what the thread wrote, or a keep-alive comment after a quiet while. */
static ssize_t s_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_t *stream = cls;
    struct pollfd item = {.fd = stream->fds[0], .events = POLLIN};
    int ready = poll(&item, 1, WEB_SSE_KEEPALIVE_MS);
    if (ready == 0) {
        static const char keepalive[] = ": keep-alive\n\n";
        size_t n = sizeof keepalive - 1 < max ? sizeof keepalive - 1 : max;
        memcpy(buf, keepalive, n);
        return (ssize_t)n;
    }
    ssize_t n = ready > 0 ? read(stream->fds[0], buf, max) : -1;
    if (n > 0)
        return n;
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The connection is over: the thread is told to stop, and its next write fails. */
static void s_free(void *cls)
{
    stream_t *stream = cls;
    stream->stop = 1;
    close(stream->fds[0]);
    pthread_join(stream->thread, NULL);
    free(stream);
}

struct MHD_Response *web_sse_response(const web_t *web, int64_t since)
{
    stream_t *stream = calloc(1, sizeof *stream);
    if (stream == NULL)
        return NULL;
    stream->web = web;
    stream->since = since;
    if (pipe2(stream->fds, O_CLOEXEC) != 0) {
        free(stream);
        return NULL;
    }
    if (pthread_create(&stream->thread, NULL, s_follow, stream) != 0) {
        close(stream->fds[0]);
        close(stream->fds[1]);
        free(stream);
        return NULL;
    }
    struct MHD_Response *response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, s_read, stream, s_free);
    if (response == NULL) {
        s_free(stream);
        return NULL;
    }
    MHD_add_response_header(response, "Content-Type", "text/event-stream");
    MHD_add_response_header(response, "Cache-Control", "no-cache");
    return response;
}
