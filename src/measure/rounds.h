/* Rounds of timed runs under load, and whether another process disturbed
 * them: the measurement module's judgement (rounds.c), shared by the keep
 * decision (opt/measure.c, opt/keep.c), tsopt bench (cli/bench_rounds.c)
 * and the cost model (medians).  The module's other parts: the clock
 * (util/clock.h), the wait policy (wait_policy.h, whose run-delay threshold
 * the judgement uses) and the plan's step timer (step_timer.h). */
#ifndef TS_MEASURE_ROUNDS_H
#define TS_MEASURE_ROUNDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "tsopt.h"

/* Median of v[0..n-1], sorting v (0 when n <= 0); the comparator it sorts with. */
double ts_median(double *v, long n);
int ts_cmp_double(const void *a, const void *b);

/* Undisturbed rounds needed to decide and wanted, by default; rounds judged at most. */
#define TS_MEASURE_MIN_ROUNDS 4
#define TS_MEASURE_WANT_ROUNDS 8
#define TS_MEASURE_MAX_ROUNDS 256

/* A comparison of two graphs in alternating rounds (opt/measure.h runs it). */
typedef struct ts_measure_opts {
    int threads;                /* 0: one per core */
    int min_rounds, max_rounds; /* undisturbed rounds needed to decide / wanted (0: 4 / 8) */
    double budget_s;            /* wall clock for the whole comparison, waiting for quiet included (0: 10) */
    double min_gain;            /* percent the result's fastest run must gain */
    uint64_t seed;              /* random inputs (0: a fixed seed) */
    ts_tensor *const *inputs;   /* the user's inputs, one per graph input (NULL: random ones from seed) */
    FILE *trace;                /* one line per half-round and its verdict (NULL: none) */
} ts_measure_opts;

typedef struct ts_measure_result {
    double median0_ms, median1_ms, min0_ms, min1_ms; /* original (0), result (1), undisturbed rounds */
    int rounds;    /* undisturbed rounds the decision read */
    int discarded; /* rounds measured and thrown away as disturbed */
    bool busy;     /* the machine was too noisy to decide */
    bool faster;   /* result faster by min_gain (fastest run), median not worse, on undisturbed rounds */
    double ratio, ratio_upper, ratio_med; /* the ort target's per-round estimates (keep.h; 0 otherwise) */
    char why[200]; /* one sentence: the decision and its evidence */
} ts_measure_result;

/* ---- the decision over recorded rounds (pure: unit-tested without timing) */

/* Why a half-round was judged disturbed (ts_measure_sample.flags). */
enum {
    TS_MEASURE_WAITED = 1 << 0,    /* its threads waited for a CPU (run delay) */
    TS_MEASURE_CPU_SHARE = 1 << 1, /* CPU time per wall time fell well below the graph's best round */
    TS_MEASURE_OTHERS = 1 << 2,    /* more tasks runnable besides ours than cores the graph leaves idle */
    TS_MEASURE_STOLEN = 1 << 3,    /* the hypervisor took CPU time (steal) */
    TS_MEASURE_COLLAPSE = 1 << 4,  /* median run several times the graph's best round */
};

/* One half of a round: one graph run `runs` times back to back. */
typedef struct ts_measure_sample {
    int graph;             /* 0: original, 1: result */
    double min_ms, med_ms; /* fastest and median run */
    double wall_ms;        /* the whole half-round */
    double cpu_ms;         /* process CPU time over it, all threads */
    double wait_ms;        /* time the process's threads were runnable but not running; < 0 unknown */
    double steal_ms;       /* CPU time stolen from the machine (all CPUs); < 0 unknown */
    /* for the trace only (not judged): times the threads were put on a
     * CPU, and switched out while they could still run; < 0 unknown */
    double slices, preempted;
    int others;            /* tasks runnable besides ours, the fewer of before and after; < 0 unknown */
    unsigned flags;        /* out: TS_MEASURE_* reasons, 0 when undisturbed */
} ts_measure_sample;

/* The machine the samples were taken on. */
typedef struct ts_measure_machine {
    int threads; /* threads the plans run on */
    int cores;   /* cores the process may use */
} ts_measure_machine;

/* Judges samples s[0..n-1] (round k is s[2k], s[2k+1], one per graph, n
 * even): sets each sample's flags; a round is undisturbed when both its
 * halves are.  Fills every field of r from the undisturbed rounds (busy
 * when fewer than o->min_rounds and at least one was discarded) and
 * returns their count. */
int ts_measure_judge(ts_measure_sample *s, int n, const ts_measure_machine *m, const ts_measure_opts *o,
                     ts_measure_result *r);
/* Appends to r->why, cutting what does not fit. */
void ts_measure_say(ts_measure_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the same evidence around any stretch of runs (tsopt bench's rounds) */

/* The counters read before and after a stretch. */
typedef struct ts_measure_probe {
    double wall_ms, cpu_ms;
    double wait_ms;   /* sum of the threads' run delay; < 0 unknown */
    double slices;    /* sum of the threads' timeslices; < 0 unknown */
    double preempted; /* involuntary context switches; < 0 unknown */
    double steal_ms;  /* machine-wide; < 0 unknown */
    int others;       /* runnable tasks not ours; < 0 unknown */
} ts_measure_probe;
void ts_measure_probe_take(ts_measure_probe *p);
/* The evidence of the stretch between a and b (not min_ms, med_ms, graph). */
void ts_measure_sample_between(ts_measure_sample *s, const ts_measure_probe *a, const ts_measure_probe *b);
/* Flags samples s[0..n-1], all of one graph, by the evidence and
 * thresholds of ts_measure_judge; returns how many are undisturbed. */
int ts_measure_judge_runs(ts_measure_sample *s, int n, const ts_measure_machine *m);

#endif
