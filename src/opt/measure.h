/* Timing that survives load: is the optimized graph faster than the
 * original on this machine?  The keep decision of the optimize pipeline
 * (measure.c; docs/runtime.md, "Comparing two graphs under load").
 *
 * Both graphs are planned once and run on the same random inputs in
 * alternating rounds (original, result, result, original, ...).  Each half
 * of a round records, besides its run times, the evidence of disturbance:
 * the process's CPU time, the time its threads waited for a CPU (the
 * scheduler's run delay), the tasks runnable besides its own and the CPU
 * time the hypervisor stole.  Rounds that show another process competing
 * are discarded and measured again after a short sleep; the decision reads
 * undisturbed rounds only, and with too few of them it says "busy" and
 * never "faster". */
#ifndef TS_OPT_MEASURE_H
#define TS_OPT_MEASURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "tsopt.h"

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

/* Times g0 (original) against g1 (result): same graph inputs (count,
 * dtype, shape) required.  An error only for what is wrong with the graphs
 * or the plans; a busy machine is a result (r->busy), not an error. */
ts_status ts_measure_pair(const ts_graph *g0, const ts_graph *g1, const ts_measure_opts *o, ts_measure_result *r,
                          ts_error *err);

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
