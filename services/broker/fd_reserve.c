/* fd_reserve: the spare descriptor that keeps accept() from failing (see fd_reserve.h). */
#include "fd_reserve.h"

#include "failure.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static int s_reserve = -1;
static atomic_int_fast64_t s_dropped;

int fd_reserve_init(void)
{
    pthread_mutex_lock(&s_lock);
    if (s_reserve < 0)
        s_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int reserve = s_reserve;
    pthread_mutex_unlock(&s_lock);
    return reserve >= 0 ? 0
                        : failure_set(FAILURE_IO, "cannot open the reserve descriptor: %s",
                                      strerror(errno));
}

int64_t fd_reserve_take_dropped(void)
{
    return atomic_exchange(&s_dropped, 0);
}

/* No descriptor was left to accept a connection on `fd`: the reserve's is used to accept
 * it and close it, so it does not wait there, then taken back. */
static void s_drop_one(int fd)
{
    pthread_mutex_lock(&s_lock);
    if (s_reserve >= 0) {
        close(s_reserve);
        int dropped = (int)syscall(SYS_accept4, fd, NULL, NULL, SOCK_CLOEXEC);
        if (dropped >= 0) {
            close(dropped);
            atomic_fetch_add(&s_dropped, 1);
        }
        s_reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    pthread_mutex_unlock(&s_lock);
}

int accept4(int fd, struct sockaddr *address, socklen_t *address_len, int flags)
{
    int accepted = (int)syscall(SYS_accept4, fd, address, address_len, flags);
    if (accepted >= 0 || (errno != EMFILE && errno != ENFILE))
        return accepted;
    s_drop_one(fd);
    errno = ECONNABORTED;
    return -1;
}

int accept(int fd, struct sockaddr *address, socklen_t *address_len)
{
    return accept4(fd, address, address_len, 0);
}
