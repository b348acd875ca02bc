/* greeting: a ZeroMQ endpoint's security mechanism, read from its greeting; -1 when nothing
 * listens or what listens is not ZeroMQ. */
#include "check.h"
#include "greeting.h"

#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

/* The mechanism a bound ROUTER socket (CURVE server when `curve`) reports to the probe. */
static void s_check_mechanism(bool curve, const char *expected)
{
    zsock_t *router = zsock_new(ZMQ_ROUTER);
    CHECK(router != NULL);
    zcert_t *cert = zcert_new();
    if (curve) {
        zcert_apply(cert, router);
        zsock_set_curve_server(router, 1);
    }
    int port = zsock_bind(router, "tcp://127.0.0.1:*");
    CHECK(port > 0);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    char mechanism[32] = "";
    CHECK_INT(greeting_mechanism(endpoint, 2000, mechanism, sizeof mechanism), 0);
    CHECK_STR(mechanism, expected);
    /* The probe leaves the socket serving: a real client still gets through. */
    zsock_t *dealer = zsock_new(ZMQ_DEALER);
    if (curve) {
        zcert_t *client = zcert_new();
        zcert_apply(client, dealer);
        zsock_set_curve_serverkey(dealer, zcert_public_txt(cert));
        zcert_destroy(&client);
    }
    CHECK_INT(zsock_connect(dealer, "%s", endpoint), 0);
    CHECK_INT(zstr_send(dealer, "hello"), 0);
    zsock_set_rcvtimeo(router, 2000);
    zmsg_t *got = zmsg_recv(router);
    CHECK(got != NULL && zmsg_size(got) == 2);
    zmsg_destroy(&got);
    zsock_destroy(&dealer);
    zsock_destroy(&router);
    zcert_destroy(&cert);
}

/* A port nothing listens on, and a listener that is not ZeroMQ (it says nothing). */
static void s_check_unknown(void)
{
    /* A socket bound and never listening holds the port, and the kernel refuses every
     * connection to it. (A ZeroMQ listener destroyed just before would not do: its I/O
     * thread closes the port a moment later, and may still answer.) */
    int holder = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof address;
    CHECK(holder >= 0 && bind(holder, (struct sockaddr *)&address, sizeof address) == 0 &&
          getsockname(holder, (struct sockaddr *)&address, &len) == 0);
    int port = ntohs(address.sin_port);
    char endpoint[64];
    char mechanism[32];
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    CHECK_INT(greeting_mechanism(endpoint, 500, mechanism, sizeof mechanism), -1);
    close(holder);

    zsock_t *stream = zsock_new(ZMQ_STREAM); /* raw TCP: accepts, sends no greeting */
    port = zsock_bind(stream, "tcp://127.0.0.1:*");
    CHECK(port > 0);
    snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", port);
    CHECK_INT(greeting_mechanism(endpoint, 300, mechanism, sizeof mechanism), -1);
    zsock_destroy(&stream);

    CHECK_INT(greeting_mechanism("inproc://x", 300, mechanism, sizeof mechanism), -1);
    CHECK_INT(greeting_mechanism("tcp://no-port", 300, mechanism, sizeof mechanism), -1);
}

int main(void)
{
    s_check_mechanism(false, "NULL");
    s_check_mechanism(true, "CURVE");
    s_check_unknown();
    return check_exit_code("test_greeting");
}
