/* Timing that survives load (measure.h): the keep decision of the optimize
 * pipeline compares the original and the optimized graph in-process, in
 * alternating rounds, and throws away rounds in which another process
 * competed for the CPU.
 *
 * Why a disturbed round must be detected, not averaged away: tsopt's
 * OpenMP threads either spin or sleep between the hundreds of parallel
 * regions of a run (docs/runtime.md, "OpenMP wait policy"), chosen once when
 * the process starts.  A process that chose to spin on a quiet machine and
 * then meets a competitor collapses (nasrnn: 0.95 ms quiet, medians of
 * 69-92 ms beside one busy loop), and three optimizers side by side
 * measured 5-10x their quiet latencies.  Sleeping threads are disturbed
 * too, in either direction: beside a busy loop nasnet_a ran 14 ms instead
 * of its quiet 22 (the loop keeps the other core awake for the wake-ups).
 * Such rounds say nothing about which graph is faster, and a minimum over
 * them is not safe either: the two graphs were not disturbed alike.
 *
 * The evidence per half-round and its judgement: measure/rounds.c.
 *
 * In-process, not in a worker process (docs/decisions.md): libgomp does not
 * support fork() after the parent ran a parallel region (the child's pool
 * refers to threads it does not have), which tsopt's search and the final
 * check always did; posix_spawn of /proc/self/exe works only for the tsopt
 * binary, not for programs linking libtsopt, and needs both graphs written
 * out as ONNX (seconds and gigabytes for the large models).  What a worker
 * would buy -- a wait policy chosen afresh for the machine as it is now --
 * does not make a disturbed round trustworthy; detecting and discarding it
 * does, with any policy.  A pool that spins while a competitor runs is slow,
 * not stuck, and returns to sleep ~1 ms after the last region. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "opt/measure.h"
#include "opt/passes.h"
#include "measure/wait_policy.h"
#include "util/clock.h"

#define DEFAULT_BUDGET_S 10.0
#define DEFAULT_SEED 0x6d656173ULL

/* A half-round lasts about this long (runs = HALF_MS / run time, 3..64):
 * long enough that the CPU-time and tick-based counters mean something,
 * short enough that a retried round costs little. */
#define HALF_MS 25.0
#define MIN_RUNS 3
#define MAX_RUNS 64

/* ---------------------------------------------------------- measuring */

typedef ts_measure_probe probe;

/* One graph, `runs` runs back to back, between probes *a (taken before)
 * and *b (taken here after); fewer runs once the deadline has passed (a
 * collapsed run takes 100x its time: nasrnn 0.95 -> 90 ms). */
static ts_status half_round(ts_plan *p, ts_tensor **in, ts_tensor **out, int runs, double deadline_ms, double *t,
                            const probe *a, probe *b, ts_measure_sample *s, ts_error *err)
{
    for (int i = 0; i < runs; i++) {
        double t0 = ts_clock_ms();
        ts_status st = ts_plan_run(p, in, out, err);
        if (st) return st;
        t[i] = ts_clock_ms() - t0;
        if (t0 + t[i] > deadline_ms) runs = i + 1;
    }
    ts_measure_probe_take(b);
    s->med_ms = ts_median(t, runs); /* sorts t */
    s->min_ms = t[0];
    ts_measure_sample_between(s, a, b);
    return TS_OK;
}

static ts_status same_inputs(const ts_graph *g0, const ts_graph *g1, ts_error *err)
{
    if (g0->ninputs != g1->ninputs)
        return ts_error_set(err, TS_ERR_INVALID, "measure: graphs have %d and %d inputs", g0->ninputs, g1->ninputs);
    for (int i = 0; i < g0->ninputs; i++) {
        const ts_value *a = &g0->values[g0->inputs[i]], *b = &g1->values[g1->inputs[i]];
        if (a->dtype != b->dtype || !ts_shape_eq(&a->shape, &b->shape))
            return ts_error_set(err, TS_ERR_INVALID, "measure: input %d ('%s') differs between the graphs", i, a->name);
    }
    return TS_OK;
}

/* Random float/bool inputs; integer inputs stay 0, a valid index whatever
 * the table size (as xcost_io_new). */
static ts_status make_inputs(const ts_graph *g, uint64_t seed, ts_tensor **in, ts_error *err)
{
    uint64_t rng = seed;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
        if (ts_dtype_is_float(v->dtype) || v->dtype == TS_BOOL)
            ts_tensor_fill_random(in[i], &rng, v->dtype == TS_BOOL ? 0 : -1, 1);
    }
    return TS_OK;
}

static ts_status make_outputs(const ts_graph *g, ts_tensor **out, ts_error *err)
{
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
    }
    return TS_OK;
}

static void sleep_ms(double ms)
{
    if (ms <= 0) return;
    struct timespec t = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&t, NULL);
}

/* Warm-up: one untimed run (first-touch, lazily built kernels), then timed
 * runs until three or until limit_ms; returns the fastest. */
static ts_status warm_up(ts_plan *p, ts_tensor **in, ts_tensor **out, double limit_ms, double *fastest, ts_error *err)
{
    ts_status st = ts_plan_run(p, in, out, err);
    double start = ts_clock_ms();
    *fastest = INFINITY;
    for (int i = 0; !st && i < 3; i++) {
        double t0 = ts_clock_ms();
        st = ts_plan_run(p, in, out, err);
        *fastest = fmin(*fastest, ts_clock_ms() - t0);
        if (ts_clock_ms() - start > limit_ms) break;
    }
    return st;
}

ts_status ts_measure_pair(const ts_graph *g0, const ts_graph *g1, const ts_measure_opts *o, ts_measure_result *r,
                          ts_error *err)
{
    ts_measure_opts opts = *o;
    if (opts.min_rounds <= 0) opts.min_rounds = TS_MEASURE_MIN_ROUNDS;
    if (opts.max_rounds <= 0) opts.max_rounds = TS_MEASURE_WANT_ROUNDS;
    if (opts.max_rounds < opts.min_rounds) opts.max_rounds = opts.min_rounds;
    if (opts.max_rounds > TS_MEASURE_MAX_ROUNDS) opts.max_rounds = TS_MEASURE_MAX_ROUNDS;
    if (opts.min_rounds > opts.max_rounds) opts.min_rounds = opts.max_rounds;
    if (!(opts.budget_s > 0)) opts.budget_s = DEFAULT_BUDGET_S;
    memset(r, 0, sizeof *r);
    double start = ts_clock_ms(), budget_ms = opts.budget_s * 1e3;

    ts_status st = same_inputs(g0, g1, err);
    if (st) return st;
    /* each as a session runs it: at level all (the caller's graphs kept) */
    ts_graph *g[2] = {ts_graph_copy(g0), ts_graph_copy(g1)};
    ts_plan *plan[2] = {NULL, NULL};
    ts_tensor **in = calloc((size_t)g0->ninputs + 1, sizeof *in);
    ts_tensor **out[2] = {calloc((size_t)g0->noutputs + 1, sizeof **out),
                          calloc((size_t)g1->noutputs + 1, sizeof **out)};
    ts_measure_sample *s = calloc(2 * TS_MEASURE_MAX_ROUNDS, sizeof *s);
    double *t = calloc(MAX_RUNS, sizeof *t);
    if (!g[0] || !g[1] || !in || !out[0] || !out[1] || !s || !t) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    ts_plan_opts po = {.threads = opts.threads};
    if (opts.inputs) /* optimize --inputs: a loop's trip count, a branch, as the user's data take them */
        for (int i = 0; i < g0->ninputs; i++) in[i] = ts_tensor_ref(opts.inputs[i]);
    else if ((st = make_inputs(g0, opts.seed ? opts.seed : DEFAULT_SEED, in, err)))
        goto done;
    for (int k = 0; k < 2; k++)
        if ((st = make_outputs(g[k], out[k], err)) || (st = ts_graph_opt_plan(g[k], &po, &plan[k], err))) goto done;
    ts_measure_machine m = {.threads = opts.threads > 0 ? opts.threads : omp_get_num_procs(),
                            .cores = omp_get_num_procs()};

    double fast[2];
    for (int k = 0; k < 2; k++)
        if ((st = warm_up(plan[k], in, out[k], budget_ms / 20, &fast[k], err))) goto done;
    double slow = fmax(fast[0], fast[1]);
    int runs = slow > 0 ? (int)ceil(HALF_MS / slow) : MAX_RUNS;
    /* all wanted rounds must fit in half the budget left, the rest is for
     * retries */
    double left = budget_ms - (ts_clock_ms() - start);
    int fit = slow > 0 ? (int)(left / 2 / (2.0 * opts.max_rounds * slow)) : MAX_RUNS;
    if (runs > fit) runs = fit;
    if (runs < MIN_RUNS) runs = fit < MIN_RUNS ? (fit > 1 ? fit : 1) : MIN_RUNS;
    if (runs > MAX_RUNS) runs = MAX_RUNS;

    /* Rounds alternate the order on the count of undisturbed rounds, so
     * that the kept rounds are balanced (ABBA) even when some were thrown
     * away; a disturbed round is measured again after a short sleep that
     * doubles while the machine stays busy (10 -> 160 ms). */
    int n = 0, clean = 0;
    double round_ms = 2.0 * runs * (fast[0] + fast[1]) / 2, backoff = 10;
    while (clean < opts.max_rounds && n + 2 <= 2 * TS_MEASURE_MAX_ROUNDS) {
        double elapsed = ts_clock_ms() - start;
        if (elapsed + round_ms > budget_ms) break;
        int first = clean % 2;
        probe a, b, c;
        ts_measure_probe_take(&a);
        s[n].graph = first;
        double deadline = start + budget_ms;
        if ((st = half_round(plan[first], in, out[first], runs, deadline, t, &a, &b, &s[n], err))) goto done;
        s[n + 1].graph = 1 - first;
        if ((st = half_round(plan[1 - first], in, out[1 - first], runs, deadline, t, &b, &c, &s[n + 1], err)))
            goto done;
        round_ms = c.wall_ms - a.wall_ms;
        n += 2;
        ts_measure_result verdict; /* so far: the count, and this round's flags */
        clean = ts_measure_judge(s, n, &m, &opts, &verdict);
        if (s[n - 2].flags || s[n - 1].flags) {
            double rest = budget_ms - (ts_clock_ms() - start) - round_ms;
            sleep_ms(fmin(backoff, rest));
            backoff = fmin(2 * backoff, 160);
            /* a sleeper's cores went to the competitor: the first runs
             * after the sleep wait to get them back (nasrnn: 4-8 ms of
             * run delay in a 26 ms half-round, the second half none) */
            for (int k = 0; k < 2 && !st; k++) st = ts_plan_run(plan[k], in, out[k], err);
            if (st) goto done;
        } else {
            backoff = 10;
        }
    }
    ts_measure_judge(s, n, &m, &opts, r);
    /* the policy was chosen when the process started (wait_policy.c) and
     * cannot change now; a busy verdict with spinning threads says why the
     * rounds collapsed */
    if (r->busy && m.threads > 1 && !ts_wait_threads_sleep()) ts_measure_say(r, "; idle OpenMP threads spin");
    if (opts.trace) {
        fprintf(opts.trace, "measure: %d threads, %d cores, wait policy %s, %d runs per half-round\n", m.threads,
                m.cores, ts_wait_policy_name(), runs);
        for (int i = 0; i < n; i++)
            fprintf(opts.trace,
                    "measure: round %d graph %d: min %.4g med %.4g ms, wall %.1f cpu %.1f (share %.2f) wait %.2f "
                    "steal %.0f ms, slices %.0f, preempted %.0f, others %d, flags %#x\n",
                    i / 2, s[i].graph, s[i].min_ms, s[i].med_ms, s[i].wall_ms, s[i].cpu_ms,
                    s[i].cpu_ms / (s[i].wall_ms * m.threads), s[i].wait_ms, s[i].steal_ms, s[i].slices,
                    s[i].preempted, s[i].others, s[i].flags);
        fprintf(opts.trace, "measure: %s\n", r->why);
    }
done:
    for (int k = 0; k < 2; k++) {
        ts_plan_free(plan[k]);
        for (int i = 0; out[k] && g[k] && i < g[k]->noutputs; i++) ts_tensor_unref(out[k][i]);
        free(out[k]);
        ts_graph_free(g[k]);
    }
    for (int i = 0; in && i < g0->ninputs; i++) ts_tensor_unref(in[i]);
    free(in);
    free(s);
    free(t);
    return st;
}
