/* How idle OpenMP threads wait, decided while the process runs
 * (src/measure/wait_policy.c, docs/runtime.md "Threading"). */
#ifndef TS_MEASURE_WAIT_POLICY_H
#define TS_MEASURE_WAIT_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* Tasks runnable besides the reader, from the text of /proc/loadavg
 * ("0.52 0.58 0.59 R/T LASTPID": R counts the reading task itself);
 * -1 when the text does not parse. */
int ts_wait_others_runnable(const char *loadavg);

/* Where this process's wait policy comes from, for reports: the user's
 * OMP_WAIT_POLICY ("passive", "active"), "spin" when the user set
 * GOMP_SPINCOUNT, "spin" or "sleep" when TSOPT_WAIT forces one, else
 * "adaptive" (tsopt switches between the two while it runs). */
const char *ts_wait_policy_name(void);

/* True when idle OpenMP threads sleep at once now (passive, or the
 * adaptive policy in its sleeping mode): every parallel region then pays a
 * wake-up, so kernels need more work before a second thread pays off.
 * Cheap: one atomic load. */
bool ts_wait_threads_sleep(void);

/* Brackets one plan run on `threads` OpenMP threads (exec/run.c): some
 * runs are sampled (how long their threads waited for a CPU) and the
 * adaptive policy may switch mode at the end. */
typedef struct ts_wait_run {
    double begin_ms;    /* start of the run (its time is counted to the mode it began in) */
    int begin_mode;
    double t0_ms;       /* start of the sampled stretch */
    uint64_t delay0_ns; /* the team's run delay then */
    int threads;
    bool active; /* adaptive policy, 2+ threads */
    bool sampled;
} ts_wait_run;
void ts_wait_run_begin(ts_wait_run *r, int threads);
/* Between steps (every few: it reads the clock): a long run is judged
 * while it runs. */
void ts_wait_run_poll(ts_wait_run *r);
void ts_wait_run_end(ts_wait_run *r);

/* The run delay so far (ns, summed over the threads) of the calling
 * thread's OpenMP team of `threads`: a run whose team waited more than
 * TS_WAIT_DELAY_MAX of its wall time met another process (the cost model
 * drops such runs).  False when unknown (no schedstat). */
bool ts_wait_team_delay(int threads, uint64_t *ns);

/* Puts the process in one mode now (TS_WAIT_SPIN or TS_WAIT_SLEEP), for
 * tests and A/B measurements; the adaptive policy goes on deciding from
 * there.  Nothing happens when the user set OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT.  `threads`: the team size the plans run with. */
void ts_wait_set_mode(int mode, int threads);

/* What the adaptive policy did so far in this process. */
typedef struct ts_wait_stats {
    long spin_runs, sleep_runs;   /* plan runs (2+ threads) begun in each mode */
    double spin_ms, sleep_ms;     /* their wall time, by the mode each run began in */
    int to_sleep, to_spin;        /* switches */
    long windows, busy_windows;   /* spinning: sampled windows judged, and those whose threads waited */
    long vetoed;                  /* disturbed windows not followed: the others' CPU use was low */
} ts_wait_stats;
void ts_wait_get_stats(ts_wait_stats *s);

/* ---- the decision: a pure state machine over measured samples ---- */

enum { TS_WAIT_SPIN = 0, TS_WAIT_SLEEP = 1 };

/* A spinning team is judged over at least this much sampled run time. */
#define TS_WAIT_WINDOW_MS 10.0
/* Spinning stops when the team's threads together waited for a CPU more
 * than this share of the wall time (undisturbed: 0.2-0.6%; beside one busy
 * loop with spinning threads 30% and more: docs/runtime.md; rounds.c
 * judges a round's run delay by it too).  Summed, not averaged over the
 * threads: a region ends with its last thread, so one thread that waits
 * stalls the whole team, however large. */
#define TS_WAIT_DELAY_MAX 0.08
/* ... in this many windows in a row. */
#define TS_WAIT_STRIKES 2
/* Sleeping lasts at least this long, doubled (up to TS_WAIT_QUIET_MAX_MS)
 * each time spinning resumed and failed within TS_WAIT_SPIN_OK_MS. */
#define TS_WAIT_QUIET_MS 250.0
#define TS_WAIT_QUIET_MAX_MS 8000.0
#define TS_WAIT_SPIN_OK_MS 2000.0
/* Spinning resumes when other processes used at most the cores the team
 * leaves free plus this much (jiffy resolution, kernel noise). */
#define TS_WAIT_QUIET_MARGIN 0.3

typedef struct ts_wait_ctl {
    int mode;
    double since_ms;                  /* when the current mode began */
    double win_ms, win_delay_ms;      /* spinning: sampled wall time, the threads' waiting in it */
    int strikes;                      /* disturbed windows in a row */
    double last_share;                /* the last judged window: waiting / wall time (traces) */
    long windows, busy_windows;       /* windows judged, and judged disturbed */
    long vetoed;                      /* strikes enough, but the others left the team its cores */
    double quiet_ms;                  /* sleeping: how long before the next look */
    int to_sleep, to_spin;
} ts_wait_ctl;

void ts_wait_ctl_init(ts_wait_ctl *c, double now_ms);
/* Spinning mode: `wall_ms` of a sampled run on `threads` threads whose
 * threads waited `delay_ms` in all for a CPU; `others_cores`: the cores
 * other processes used over the last 100-400 ms on a machine of `cores`
 * (the same measure as the sleeping mode's look), -1 when it cannot be
 * known (no /proc/stat: run delay decides alone), NAN when not yet (too
 * short a stretch: the switch waits for it).  The team sleeps after
 * TS_WAIT_STRIKES disturbed windows in a row only when the others also
 * used more than the cores the team leaves free: a short task that
 * preempts one thread for a moment makes run delay without being a
 * competitor (ts_wait_ctl.vetoed counts such windows).  Returns the mode. */
int ts_wait_ctl_run(ts_wait_ctl *c, double now_ms, double wall_ms, double delay_ms, int threads,
                    double others_cores, int cores);
/* Sleeping mode: true when it is time to look at the machine again. */
bool ts_wait_ctl_look_due(const ts_wait_ctl *c, double now_ms);
/* Sleeping mode: other processes used `others_cores` cores on average
 * since the mode began (or the last look) on a machine of `cores`, for a
 * team of `threads`.  Returns the mode. */
int ts_wait_ctl_look(ts_wait_ctl *c, double now_ms, double others_cores, int cores, int threads);

/* Parsers for the kernel's text. */
/* /proc/<pid>/task/<tid>/schedstat: "RUN_NS WAIT_NS SLICES": WAIT_NS. */
bool ts_wait_parse_schedstat(const char *text, uint64_t *wait_ns);
/* /proc/stat's first line "cpu  user nice system idle iowait irq softirq
 * steal ...": the ticks every CPU spent not idle (steal counts: a
 * hypervisor's other guest took the CPU). */
bool ts_wait_parse_stat(const char *text, uint64_t *busy_ticks);
/* The same summed over the per-CPU lines "cpuN ..." whose N is allowed
 * (allowed[N] for N < nallowed): the CPUs this process may run on, since
 * /proc/stat counts the whole machine (a container's cpuset, taskset).
 * False when no allowed CPU's line parses. */
bool ts_wait_parse_stat_cpus(const char *text, const unsigned char *allowed, int nallowed, uint64_t *busy_ticks);

#endif
