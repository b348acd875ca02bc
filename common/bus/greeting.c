/* greeting: which security mechanism a ZeroMQ endpoint speaks (see greeting.h). */
#include "greeting.h"

#include "clock.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define GREETING_SIZE 64
#define GREETING_MECHANISM_AT 12
#define GREETING_MECHANISM_SIZE 20

/* Waits until `fd` has `events` or the deadline (monotonic ms) passes. Returns true when
 * it has them. */
static bool s_wait(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - clock_now_ms();
        if (left <= 0)
            return false;
        struct pollfd item = {fd, events, 0};
        int rc = poll(&item, 1, (int)left);
        if (rc > 0)
            return true;
        if (rc < 0 && errno != EINTR)
            return false;
    }
}

/* Starts a non-blocking connect of `fd` to `address` and waits for it. */
static bool s_connect(int fd, const struct sockaddr *address, socklen_t length, int64_t deadline)
{
    if (connect(fd, address, length) == 0)
        return true;
    if (errno != EINPROGRESS || !s_wait(fd, POLLOUT, deadline))
        return false;
    int error = 0;
    socklen_t size = sizeof error;
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
}

/* A connected non-blocking socket to an ipc:// path, or -1. */
static int s_open_ipc(const char *path, int64_t deadline)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path)
        return -1;
    strcpy(address.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0 && !s_connect(fd, (struct sockaddr *)&address, sizeof address, deadline)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A connected non-blocking socket to a tcp:// HOST:PORT (HOST may be [IPv6]), or -1. */
static int s_open_tcp(const char *host_port, int64_t deadline)
{
    char host[256];
    const char *colon = strrchr(host_port, ':');
    if (colon == NULL || (size_t)(colon - host_port) >= sizeof host)
        return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - host_port), host_port);
    char *name = host;
    size_t length = strlen(host);
    if (length >= 2 && host[0] == '[' && host[length - 1] == ']') {
        host[length - 1] = '\0';
        name = host + 1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *found = NULL;
    if (getaddrinfo(name, colon + 1, &hints, &found) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *at = found; at != NULL && fd < 0; at = at->ai_next) {
        fd = socket(at->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd >= 0 && !s_connect(fd, at->ai_addr, at->ai_addrlen, deadline)) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    return fd;
}

/* Sends the start of a ZMTP 3 greeting and reads the peer's whole one into `greeting`. */
static bool s_exchange(int fd, unsigned char greeting[GREETING_SIZE], int64_t deadline)
{
    /* Signature (0xFF, 8 bytes of padding, 0x7F) and major version 3. */
    static const unsigned char start[11] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3};
    if (!s_wait(fd, POLLOUT, deadline) ||
        send(fd, start, sizeof start, MSG_NOSIGNAL) != (ssize_t)sizeof start)
        return false;
    size_t have = 0;
    while (have < GREETING_SIZE) {
        if (!s_wait(fd, POLLIN, deadline))
            return false;
        ssize_t got = recv(fd, greeting + have, GREETING_SIZE - have, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (got > 0)
            have += (size_t)got;
    }
    return greeting[0] == 0xFF && greeting[9] == 0x7F && greeting[10] >= 3;
}

int greeting_mechanism(const char *endpoint, int timeout_ms, char *mechanism, size_t size)
{
    int64_t deadline = clock_now_ms() + timeout_ms;
    int fd = -1;
    if (strncmp(endpoint, "tcp://", 6) == 0)
        fd = s_open_tcp(endpoint + 6, deadline);
    else if (strncmp(endpoint, "ipc://", 6) == 0)
        fd = s_open_ipc(endpoint + 6, deadline);
    if (fd < 0)
        return -1;
    unsigned char greeting[GREETING_SIZE];
    bool read = s_exchange(fd, greeting, deadline);
    close(fd);
    if (!read || size == 0)
        return -1;
    const char *name = (const char *)greeting + GREETING_MECHANISM_AT;
    size_t length = strnlen(name, GREETING_MECHANISM_SIZE);
    snprintf(mechanism, size, "%.*s", (int)length, name);
    return 0;
}
