/* listener: is anything listening on an endpoint (see listener.h). */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* ipc://PATH: a Unix stream socket connection. */
static bool s_ipc_absent(const char *path)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path)
        return false;
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool absent = connect(fd, (struct sockaddr *)&address, sizeof address) != 0 &&
                  (errno == ENOENT || errno == ECONNREFUSED);
    close(fd);
    return absent;
}

/* One address of a tcp:// endpoint: refused within LISTENER_PROBE_MS? */
static bool s_tcp_refused(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return false;
    bool refused = false;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno == ECONNREFUSED) {
            refused = true;
        } else if (errno == EINPROGRESS) {
            struct pollfd item = {.fd = fd, .events = POLLOUT};
            int error = 0;
            socklen_t len = sizeof error;
            if (poll(&item, 1, LISTENER_PROBE_MS) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0)
                refused = error == ECONNREFUSED;
        }
    }
    close(fd);
    return refused;
}

/* tcp://HOST:PORT: refused on every address HOST has. */
static bool s_tcp_absent(const char *address)
{
    char host[256];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof host || colon[1] == '\0')
        return false;
    snprintf(host, sizeof host, "%.*s", (int)(colon - address), address);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') { /* [::1] */
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    if (strcmp(host, "*") == 0)
        return false;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *found = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &found) != 0)
        return false;
    bool absent = found != NULL;
    for (const struct addrinfo *ai = found; ai != NULL && absent; ai = ai->ai_next)
        absent = s_tcp_refused(ai);
    freeaddrinfo(found);
    return absent;
}

bool listener_absent(const char *endpoint)
{
    if (endpoint == NULL)
        return false;
    if (strncmp(endpoint, "ipc://", 6) == 0)
        return s_ipc_absent(endpoint + 6);
    if (strncmp(endpoint, "tcp://", 6) == 0)
        return s_tcp_absent(endpoint + 6);
    return false;
}
