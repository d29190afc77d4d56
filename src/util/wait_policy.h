/* How idle OpenMP threads wait (src/util/wait_policy.c, docs/runtime.md). */
#ifndef TS_UTIL_WAIT_POLICY_H
#define TS_UTIL_WAIT_POLICY_H

#include <stdbool.h>

/* Spin iterations before an idle thread sleeps when the cores are free
 * (GOMP_SPINCOUNT; about 1 ms on the 2-core Zen 5 development machine). */
#define TS_WAIT_SPINCOUNT "30000"

/* Tasks runnable besides the reader, from the text of /proc/loadavg
 * ("0.52 0.58 0.59 R/T LASTPID": R counts the reading task itself);
 * -1 when the text does not parse. */
int ts_wait_others_runnable(const char *loadavg);

/* Sets this process's environment for libgomp (which reads it when it is
 * loaded, so the caller re-executes itself afterwards): GOMP_SPINCOUNT when
 * no other task was runnable in at least five of seven samples of
 * /proc/loadavg 5 ms apart, else OMP_WAIT_POLICY=passive.  Returns false
 * (environment untouched) when the user already chose (OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT set) or nothing could be set. */
bool ts_wait_policy_choose(void);

/* The policy this process's libgomp runs with, for reports: the value of
 * OMP_WAIT_POLICY ("passive", "active"), else "spin" when GOMP_SPINCOUNT
 * is set, else "default" (libgomp's own). */
const char *ts_wait_policy_name(void);

/* True when idle OpenMP threads sleep at once (OMP_WAIT_POLICY=passive):
 * every parallel region then pays a wake-up, so kernels need more work
 * before a second thread pays off. */
bool ts_wait_threads_sleep(void);

#endif
