/* tcp_thin: a ZeroMQ socket's TCP connection gets linear retransmission timeouts once its
 * monitor's events are drained, and only the watched socket's connections do. */
#include "check.h"
#include "tcp_thin.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

/* The local (local = true) or remote port of a TCP socket `fd`; 0 if it is not one. */
static int s_port(int fd, bool local)
{
    struct sockaddr_in address;
    socklen_t len = sizeof address;
    int type = 0;
    socklen_t type_len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM)
        return 0;
    int rc = local ? getsockname(fd, (struct sockaddr *)&address, &len)
                   : getpeername(fd, (struct sockaddr *)&address, &len);
    if (rc != 0 || address.sin_family != AF_INET)
        return 0;
    return ntohs(address.sin_port);
}

/* The descriptor of this process's connection whose remote (or local) port is `port`,
 * or -1. */
static int s_connection(int port, bool local)
{
    DIR *fds = opendir("/proc/self/fd");
    CHECK(fds != NULL);
    int found = -1;
    for (struct dirent *entry; fds != NULL && (entry = readdir(fds)) != NULL && found < 0;) {
        int fd = atoi(entry->d_name);
        if (entry->d_name[0] != '.' && s_port(fd, local) == port && s_port(fd, !local) != 0)
            found = fd;
    }
    if (fds != NULL)
        closedir(fds);
    return found;
}

static int s_thin(int fd)
{
    int on = -1;
    socklen_t len = sizeof on;
    CHECK_INT(getsockopt(fd, IPPROTO_TCP, TCP_THIN_LINEAR_TIMEOUTS, &on, &len), 0);
    return on;
}

int main(void)
{
    void *context = zmq_ctx_new();
    void *pull = zmq_socket(context, ZMQ_PULL);
    void *push = zmq_socket(context, ZMQ_PUSH);
    int linger = 0;
    zmq_setsockopt(pull, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK_INT(zmq_bind(pull, "tcp://127.0.0.1:*"), 0);
    char endpoint[128];
    size_t size = sizeof endpoint;
    CHECK_INT(zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, endpoint, &size), 0);
    int port = atoi(strrchr(endpoint, ':') + 1);
    CHECK(port > 0);

    tcp_thin_t *thin = NULL;
    CHECK_INT(tcp_thin_new(context, push, "test", &thin), 0);
    CHECK(thin != NULL);
    CHECK_INT(zmq_connect(push, endpoint), 0);
    CHECK_INT(zmq_send(push, "x", 1, 0), 1);
    char byte;
    CHECK_INT(zmq_recv(pull, &byte, 1, 0), 1);

    zmq_pollitem_t item = {tcp_thin_socket(thin), 0, ZMQ_POLLIN, 0};
    CHECK_INT(zmq_poll(&item, 1, 5000), 1);
    tcp_thin_drain(thin);
    int connected = s_connection(port, false); /* the push's end: its peer is the pull */
    int accepted = s_connection(port, true);   /* the pull's end, not watched */
    CHECK(connected >= 0 && accepted >= 0 && connected != accepted);
    if (connected >= 0)
        CHECK_INT(s_thin(connected), 1);
    if (accepted >= 0)
        CHECK_INT(s_thin(accepted), 0);

    /* Anything but a TCP socket is left alone. */
    int pipe_fds[2];
    CHECK_INT(pipe(pipe_fds), 0);
    CHECK(!tcp_thin_apply(pipe_fds[0]));
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    tcp_thin_destroy(&thin);
    CHECK(thin == NULL);
    zmq_close(push);
    zmq_close(pull);
    zmq_ctx_term(context);
    return check_exit_code("test_tcp_thin");
}
