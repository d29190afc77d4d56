/* OpenMP wait policy of the tsopt binary.
 *
 * A plan run is hundreds of parallel regions a few microseconds apart.
 * Between two of them libgomp's idle thread either spins or sleeps on a
 * futex.  Sleeping costs a wake-up per region, and on an idle machine the
 * core has dropped into a sleep state by then: nasnet_a 15.0 ms passive vs
 * 10.3-10.7 ms spinning (docs/runtime.md).  Spinning on a machine with other work
 * is far worse: the spinner holds a core that the thread it waits for (or
 * another process) needs, 8-40x slower.  So spin only when nothing else is
 * runnable when tsopt starts, and bound the spin so that work arriving
 * later costs at most about a millisecond per region. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include "util/wait_policy.h"

int ts_wait_others_runnable(const char *loadavg)
{
    double l1, l5, l15;
    int running, total;
    if (!loadavg || sscanf(loadavg, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) return -1;
    if (running < 1 || total < running) return -1;
    return running - 1;
}

static int sample_others(void)
{
    char buf[128];
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return -1;
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    return ok ? ts_wait_others_runnable(buf) : -1;
}

bool ts_wait_policy_choose(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return false;
    /* Seven samples 5 ms apart, and two busy ones are forgiven: a process
     * started beside tsopt (the other end of a pipe) is runnable while it
     * loads, and the kernel frees a large process's memory for some
     * milliseconds after it exits (bench.py runs tsopt right after ONNX
     * Runtime); a competing job is runnable in every sample.  No /proc
     * means passive. */
    int busy = 0;
    for (int i = 0; i < 7; i++) {
        if (i) nanosleep(&(struct timespec){0, 5000000}, NULL);
        busy += sample_others() != 0; /* -1 (unreadable) counts as busy */
    }
    bool spin = busy <= 2;
    return spin ? setenv("GOMP_SPINCOUNT", TS_WAIT_SPINCOUNT, 1) == 0 : setenv("OMP_WAIT_POLICY", "passive", 1) == 0;
}

const char *ts_wait_policy_name(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (policy) return policy;
    return getenv("GOMP_SPINCOUNT") ? "spin" : "default";
}

bool ts_wait_threads_sleep(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    return policy && !strcasecmp(policy, "passive");
}
