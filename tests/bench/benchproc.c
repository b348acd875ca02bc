/* benchproc: a server's CPU time and a free port (see benchproc.h). */
#include "benchproc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

int64_t benchproc_cpu_us(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, file);
    fclose(file);
    buf[n] = '\0';
    /* Fields after the command name (which may hold spaces) start past the last ')'. */
    const char *rest = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0;
    if (rest == NULL || sscanf(rest + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                               &utime, &stime) != 2)
        return -1;
    return (int64_t)((utime + stime) * 1000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
}

int64_t benchproc_self_cpu_us(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return -1;
    return (int64_t)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000 +
           usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

int benchproc_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    socklen_t len = sizeof address;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) == 0 &&
        getsockname(fd, (struct sockaddr *)&address, &len) == 0)
        port = ntohs(address.sin_port);
    close(fd);
    return port;
}
