/* The one clock of the tree (issue 27, "one clock"): every timing in tsopt
 * (step timers, costs, the keep decision, search and fuzz budgets, reports)
 * reads CLOCK_MONOTONIC through these, and CPU time through ts_clock_cpu_ms,
 * so a change of clock (or a fake one in a test) is made here once. */
#ifndef TS_UTIL_CLOCK_H
#define TS_UTIL_CLOCK_H

#include <time.h>

static inline double ts_clock_read_ms(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Wall time, milliseconds and seconds, from an arbitrary origin. */
static inline double ts_clock_ms(void) { return ts_clock_read_ms(CLOCK_MONOTONIC); }
static inline double ts_clock_s(void) { return ts_clock_ms() * 1e-3; }

/* CPU time of the whole process (all threads), milliseconds and seconds. */
static inline double ts_clock_cpu_ms(void) { return ts_clock_read_ms(CLOCK_PROCESS_CPUTIME_ID); }
static inline double ts_clock_cpu_s(void) { return ts_clock_cpu_ms() * 1e-3; }

#endif
