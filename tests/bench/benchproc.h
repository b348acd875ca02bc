/* benchproc: what the queue benchmarks need to know about the server they measure and the
 * machine they run on -- a server's CPU time and a free loopback port. */
#ifndef CLOISTER_BENCHPROC_H
#define CLOISTER_BENCHPROC_H

#include <stdint.h>
#include <sys/types.h>

/* CPU time (user + system, every thread) process `pid` has used so far, in µs, from
 * /proc/PID/stat; -1 when it cannot be read. */
int64_t benchproc_cpu_us(pid_t pid);

/* CPU time (user + system, every thread) this process has used so far, in µs: the load
 * generator's own cost, to tell a server-bound figure from a client-bound one. */
int64_t benchproc_self_cpu_us(void);

/* A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick), or -1. Another
 * process may take it before the caller binds it: a server that cannot bind must fail. */
int benchproc_free_port(void);

#endif
