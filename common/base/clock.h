/* clock: the one source of time for Cloister. Deadlines use the monotonic clock; what is
 * stored or shown uses wall-clock milliseconds since the epoch. Tests may shift both with
 * clock_advance() to exercise leases and backoff without sleeping. */
#ifndef CLOISTER_CLOCK_H
#define CLOISTER_CLOCK_H

#include <stdint.h>

/* Milliseconds on a monotonic clock (arbitrary origin), plus any test offset. */
int64_t clock_now_ms(void);

/* Milliseconds since the Unix epoch, plus any test offset. */
int64_t clock_wall_ms(void);

/* Microseconds on the monotonic clock, for latency measurements; not shifted. */
int64_t clock_now_us(void);

/* Moves both clocks forward by `ms` for this process (tests only). */
void clock_advance(int64_t ms);

#endif
