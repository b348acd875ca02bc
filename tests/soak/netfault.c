/* netfault: delay and loss on a link, where the kernel has no netem qdisc.
 *
 *   usage: netfault --queue N [--queue M] --delay-ms D --loss-percent P
 *
 * Takes the packets that iptables sends to NFQUEUE queue N (and M: one for each direction),
 * drops P % of them at random, and lets the others through D ms after they came, in the
 * order they came — what `tc qdisc … netem delay Dms loss P%` does on an interface. Prints
 * "ready" once its queues are bound (add the iptables rules after that, with
 * `--queue-bypass` so that packets pass if it is gone), and runs until SIGTERM or SIGINT,
 * then says how many packets it delayed and dropped. Packets still held at exit are lost.
 *
 * The partition tests (tests/soak/partition.py, tests/integration/test_partition.c) run it
 * inside a network namespace, whose queues are its own. Needs root (CAP_NET_ADMIN). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_QUEUES 2
#define HELD_MAX 65536 /* packets held at once; past it, one more is dropped (netem: 1000) */

/* A packet waiting for its time. */
typedef struct {
    struct nfq_q_handle *queue;
    uint32_t id;
    int64_t due_ms;
} held_t;

/* Everything the callback needs: the settings, the packets held (a ring, oldest first:
 * every packet gets the same delay, so the oldest is always the first due) and counts. */
typedef struct {
    int delay_ms;
    double loss;
    held_t held[HELD_MAX];
    size_t first, count;
    uint64_t delayed, dropped, overflowed;
} link_t;

static volatile sig_atomic_t s_stop;

static void s_on_signal(int signum)
{
    (void)signum;
    s_stop = 1;
}

static int64_t s_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* A packet came: dropped now (at random, or when too many are held), or held. */
static int s_on_packet(struct nfq_q_handle *queue, struct nfgenmsg *message,
                       struct nfq_data *packet, void *data)
{
    (void)message;
    link_t *link = data;
    struct nfqnl_msg_packet_hdr *header = nfq_get_msg_packet_hdr(packet);
    if (header == NULL)
        return 0;
    uint32_t id = ntohl(header->packet_id);
    if (drand48() < link->loss || link->count == HELD_MAX) {
        link->dropped++;
        link->overflowed += link->count == HELD_MAX;
        return nfq_set_verdict(queue, id, NF_DROP, 0, NULL);
    }
    held_t *slot = &link->held[(link->first + link->count) % HELD_MAX];
    *slot = (held_t){.queue = queue, .id = id, .due_ms = s_now_ms() + link->delay_ms};
    link->count++;
    return 0;
}

/* Lets through every held packet whose time has come; returns the ms until the next one
 * is due, or -1 when none is held. */
static int s_release_due(link_t *link)
{
    int64_t now = s_now_ms();
    while (link->count > 0) {
        held_t *oldest = &link->held[link->first];
        if (oldest->due_ms > now)
            return (int)(oldest->due_ms - now);
        nfq_set_verdict(oldest->queue, oldest->id, NF_ACCEPT, 0, NULL);
        link->delayed++;
        link->first = (link->first + 1) % HELD_MAX;
        link->count--;
    }
    return -1;
}

static void s_usage(void)
{
    fprintf(stderr, "usage: netfault --queue N [--queue M] --delay-ms D --loss-percent P\n");
}

/* Reads the options into the queue numbers and the link; false (after saying why) when
 * they are wrong. */
static bool s_options(int argc, char **argv, int *queues, int *nqueues, link_t *link)
{
    static const struct option options[] = {{"queue", required_argument, NULL, 'q'},
                                            {"delay-ms", required_argument, NULL, 'd'},
                                            {"loss-percent", required_argument, NULL, 'l'},
                                            {NULL, 0, NULL, 0}};
    int opt;
    double loss_percent = -1;
    link->delay_ms = -1;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        if (opt == 'q' && *nqueues < MAX_QUEUES)
            queues[(*nqueues)++] = atoi(optarg);
        else if (opt == 'd')
            link->delay_ms = atoi(optarg);
        else if (opt == 'l')
            loss_percent = atof(optarg);
        else
            return false;
    }
    if (*nqueues == 0 || link->delay_ms < 0 || loss_percent < 0 || loss_percent > 100 ||
        optind != argc)
        return false;
    link->loss = loss_percent / 100;
    return true;
}

int main(int argc, char **argv)
{
    static link_t link;
    int queue_numbers[MAX_QUEUES];
    int nqueues = 0;
    if (!s_options(argc, argv, queue_numbers, &nqueues, &link)) {
        s_usage();
        return 2;
    }
    srand48((long)time(NULL) ^ (long)getpid());
    struct nfq_handle *handle = nfq_open();
    if (handle == NULL) {
        fprintf(stderr, "netfault: cannot open nfnetlink_queue (root? the module?): %s\n",
                strerror(errno));
        return 1;
    }
    struct nfq_q_handle *queues[MAX_QUEUES] = {NULL};
    for (int i = 0; i < nqueues; i++) {
        queues[i] = nfq_create_queue(handle, (uint16_t)queue_numbers[i], s_on_packet, &link);
        if (queues[i] == NULL || nfq_set_mode(queues[i], NFQNL_COPY_META, 0) < 0) {
            fprintf(stderr, "netfault: cannot bind queue %d: %s\n", queue_numbers[i],
                    strerror(errno));
            nfq_close(handle);
            return 1;
        }
        nfq_set_queue_maxlen(queues[i], HELD_MAX);
    }
    struct sigaction action = {.sa_handler = s_on_signal};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    printf("ready\n");
    fflush(stdout);

    int fd = nfq_fd(handle);
    char buffer[65536];
    while (!s_stop) {
        struct pollfd item = {.fd = fd, .events = POLLIN};
        int ready = poll(&item, 1, s_release_due(&link));
        if (ready > 0) {
            ssize_t got = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
            if (got > 0)
                nfq_handle_packet(handle, buffer, (int)got);
        }
        /* ENOBUFS: the kernel dropped packets it could not hand over; they are lost. */
    }
    for (int i = 0; i < nqueues; i++)
        nfq_destroy_queue(queues[i]);
    nfq_close(handle);
    fprintf(stderr, "netfault: %llu packets delayed %d ms, %llu dropped (%llu of them over "
            "the %d held at most), %zu held at exit\n", (unsigned long long)link.delayed,
            link.delay_ms, (unsigned long long)link.dropped, (unsigned long long)link.overflowed,
            HELD_MAX, link.count);
    return 0;
}
