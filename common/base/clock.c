/* clock: monotonic and wall time with a test offset (see clock.h). */
#include "clock.h"

#include <time.h>

static int64_t s_offset_ms;

static int64_t s_read_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_now_ms(void)
{
    return s_read_us(CLOCK_MONOTONIC) / 1000 + s_offset_ms;
}

int64_t clock_wall_ms(void)
{
    return s_read_us(CLOCK_REALTIME) / 1000 + s_offset_ms;
}

int64_t clock_now_us(void)
{
    return s_read_us(CLOCK_MONOTONIC);
}

void clock_advance(int64_t ms)
{
    s_offset_ms += ms;
}
