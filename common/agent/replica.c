/* replica: which copy of a scaled specialist this process is (see replica.h). */
#include "replica.h"

#include "failure.h"
#include "home.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* The slots this process holds, by name (a service claims one, a test process may claim
 * a few). Their lock files stay open until exit. */
#define REPLICA_CLAIMS 8

static struct {
    char name[128];
    int index;
} s_claims[REPLICA_CLAIMS];
static int s_nclaims;
static pthread_mutex_t s_mutex = PTHREAD_MUTEX_INITIALIZER;

static int s_lock_path(char *buf, size_t size, const char *specialist, int index)
{
    char relative[256];
    snprintf(relative, sizeof relative, "specialists/%s.replica-%d", specialist, index);
    return home_path(buf, size, relative);
}

/* Opens slot `index`'s lock file (created): the descriptor, or -1. */
static int s_open(const char *specialist, int index)
{
    char path[PATH_MAX];
    if (s_lock_path(path, sizeof path, specialist, index) != 0)
        return -1;
    return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

static int s_claim_free_slot(const char *specialist)
{
    char dir[PATH_MAX];
    if (home_path(dir, sizeof dir, "specialists") != 0 || home_mkdirs(dir) != 0)
        return failure_set(FAILURE_IO, "cannot create %s", dir);
    for (int index = 0; index < REPLICA_MAX; index++) {
        int fd = s_open(specialist, index);
        if (fd < 0)
            return failure_set(FAILURE_IO, "cannot open the replica lock of %s: %s",
                               specialist, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return index; /* fd stays open: the lock lives as long as the process */
        close(fd);
    }
    return failure_set(FAILURE_STATE, "all %d replica slots of %s are taken", REPLICA_MAX,
                       specialist);
}

int replica_claim(const char *specialist)
{
    pthread_mutex_lock(&s_mutex);
    int index = -1;
    for (int i = 0; i < s_nclaims && index < 0; i++) {
        if (strcmp(s_claims[i].name, specialist) == 0)
            index = s_claims[i].index;
    }
    if (index < 0) {
        index = s_claim_free_slot(specialist);
        if (index >= 0 && s_nclaims < REPLICA_CLAIMS) {
            snprintf(s_claims[s_nclaims].name, sizeof s_claims[0].name, "%s", specialist);
            s_claims[s_nclaims++].index = index;
        }
    }
    pthread_mutex_unlock(&s_mutex);
    return index;
}

bool replica_live(const char *specialist, int index)
{
    char path[PATH_MAX];
    if (s_lock_path(path, sizeof path, specialist, index) != 0)
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    /* A shared lock is refused while the holder's exclusive one stands. */
    bool live = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return live;
}

void replica_session_key(char *buf, size_t size, const char *specialist, int index)
{
    if (index == 0)
        snprintf(buf, size, "%s", specialist);
    else
        snprintf(buf, size, "%s~%d", specialist, index);
}
