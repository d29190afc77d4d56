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
 * Evidence per half-round (one graph, several runs), all read around the
 * runs, never inside them:
 * - run delay: the time the process's threads were runnable but waited for
 *   a CPU (/proc/self/task/N/schedstat, second field; the kernel's
 *   sched_info).  The direct measure: a sleeping thread (passive wait) is
 *   not runnable and costs nothing here, a thread pushed off its core by
 *   another process is;
 * - CPU share: process CPU time / (wall time x threads).  Spinning threads
 *   burn a full core each when undisturbed, sleeping ones less; so it is
 *   compared with the same graph's best round, not with 1.  Catches what
 *   run delay cannot see: time the hypervisor took (the guest thinks its
 *   task ran) and kernels without sched_info;
 * - runnable tasks: /proc/loadavg's running count less this process's own
 *   running threads, the fewer of the counts before and after the runs (a
 *   competing job is runnable in both, a passing kworker in one), against
 *   the cores the graph leaves idle (a serial graph with sleeping workers
 *   keeps one core busy: one other task on the second core shows no run
 *   delay and no change in its times);
 * - steal: /proc/stat's steal time, CPU the hypervisor gave elsewhere;
 * - spread: a median run several times the same graph's best round is a
 *   collapse, whatever the other signals say.
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
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "opt/measure.h"
#include "opt/passes.h"
#include "measure/wait_policy.h"
#include "util/clock.h"

#define DEFAULT_MIN_ROUNDS 4
#define DEFAULT_MAX_ROUNDS 8
#define DEFAULT_BUDGET_S 10.0
#define DEFAULT_SEED 0x6d656173ULL
/* Rounds kept for the decision (judge's working arrays). */
#define MAX_ROUNDS 256

/* Thresholds (docs/runtime.md, "Comparing two graphs under load", has the
 * measurements they come from). */
/* Threads waited for a CPU more than this fraction of the wall time
 * (summed over threads).  2-core machine, quiet: 0.2-0.6% (nasrnn
 * spinning, nasnet_a sleeping: wake-ups of sleeping threads cost next to
 * nothing here); beside one busy loop 30% (nasnet_a sleeping) to over 100%
 * (nasrnn spinning: both threads wait). */
#define WAIT_FRAC 0.08
/* CPU share below this fraction of the same graph's best round. */
#define SHARE_DROP 0.75
/* Stolen CPU time above this fraction of the wall time. */
#define STEAL_FRAC 0.08
/* A median run this many times the same graph's best round median. */
#define COLLAPSE 2.0
/* A half-round lasts about this long (runs = HALF_MS / run time, 3..64):
 * long enough that the CPU-time and tick-based counters mean something,
 * short enough that a retried round costs little. */
#define HALF_MS 25.0
#define MIN_RUNS 3
#define MAX_RUNS 64

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------- judging */

enum { NREASONS = 5 };

/* Counts of rounds flagged per reason and the evidence to quote. */
typedef struct evidence {
    int rounds[NREASONS];
    double worst[NREASONS]; /* largest wait (per thread) and steal fractions, others, spread; smallest share ratio */
} evidence;

static void note(evidence *ev, int reason, double v, bool smaller_is_worse)
{
    if (smaller_is_worse ? v < ev->worst[reason] : v > ev->worst[reason]) ev->worst[reason] = v;
}

/* "threads waited for a CPU 41% of their time in 6 rounds" */
static int describe(char *buf, size_t n, const evidence *ev, int reason)
{
    int k = ev->rounds[reason];
    const char *s = k == 1 ? "" : "s";
    switch (reason) {
    case 0:
        return snprintf(buf, n, "threads waited for a CPU %.0f%% of their time in %d round%s", 100 * ev->worst[0], k,
                        s);
    case 1: return snprintf(buf, n, "CPU share %.2f of the best round's in %d round%s", ev->worst[1], k, s);
    case 2:
        return snprintf(buf, n, "%.0f other task%s runnable in %d round%s", ev->worst[2], ev->worst[2] == 1 ? "" : "s",
                        k, s);
    case 3: return snprintf(buf, n, "hypervisor stole %.0f%% in %d round%s", 100 * ev->worst[3], k, s);
    default: return snprintf(buf, n, "runs %.1fx the best round's in %d round%s", ev->worst[4], k, s);
    }
}

/* The reason that flagged most rounds, and the second one when `two`:
 * "A; B". */
static void describe_top(char *buf, size_t n, const evidence *ev, bool two)
{
    int a = -1, b = -1;
    for (int i = 0; i < NREASONS; i++) {
        if (!ev->rounds[i]) continue;
        if (a < 0 || ev->rounds[i] > ev->rounds[a]) b = a, a = i;
        else if (b < 0 || ev->rounds[i] > ev->rounds[b]) b = i;
    }
    buf[0] = 0;
    if (a < 0) return;
    int w = describe(buf, n, ev, a);
    if (two && b >= 0 && w > 0 && (size_t)w + 2 < n) {
        memcpy(buf + w, "; ", 3);
        describe(buf + w + 2, n - (size_t)w - 2, ev, b);
    }
}

/* Appends to r->why, cutting what does not fit. */
static void say(ts_measure_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(ts_measure_result *r, const char *fmt, ...)
{
    size_t w = strlen(r->why);
    va_list ap;
    va_start(ap, fmt);
    if (w + 1 < sizeof r->why) vsnprintf(r->why + w, sizeof r->why - w, fmt, ap);
    va_end(ap);
}

/* Sets x->flags from its evidence against its graph's best round. */
static void flag_sample(ts_measure_sample *x, double best_share, double best_med, const ts_measure_machine *m,
                        int threads, evidence *ev)
{
    double wall = x->wall_ms > 0 ? x->wall_ms : 1e-9;
    double share = x->cpu_ms / (wall * threads);
    x->flags = 0;
    if (x->wait_ms >= 0 && x->wait_ms > WAIT_FRAC * wall) {
        x->flags |= TS_MEASURE_WAITED;
        note(ev, 0, x->wait_ms / (wall * threads), false);
    }
    if (best_share > 0 && share < SHARE_DROP * best_share) {
        x->flags |= TS_MEASURE_CPU_SHARE;
        note(ev, 1, share / best_share, true);
    }
    /* cores this graph leaves idle when undisturbed: a serial graph with
     * sleeping workers keeps one core busy, spinning workers keep all of
     * theirs */
    double idle = m->cores - best_share * threads;
    if (x->others >= 0 && x->others > (idle > 0 ? floor(idle + 0.5) : 0)) {
        x->flags |= TS_MEASURE_OTHERS;
        note(ev, 2, x->others, false);
    }
    if (x->steal_ms >= 0 && x->steal_ms > STEAL_FRAC * wall) {
        x->flags |= TS_MEASURE_STOLEN;
        note(ev, 3, x->steal_ms / wall, false);
    }
    if (isfinite(best_med) && x->med_ms > COLLAPSE * best_med) {
        x->flags |= TS_MEASURE_COLLAPSE;
        note(ev, 4, x->med_ms / best_med, false);
    }
}

int ts_measure_judge_runs(ts_measure_sample *s, int n, const ts_measure_machine *m)
{
    int threads = m->threads > 0 ? m->threads : 1, clean = 0;
    double best_share = 0, best_med = INFINITY;
    for (int i = 0; i < n; i++) {
        if (s[i].wall_ms > 0) best_share = fmax(best_share, s[i].cpu_ms / (s[i].wall_ms * threads));
        if (s[i].med_ms > 0) best_med = fmin(best_med, s[i].med_ms);
    }
    evidence ev = {.worst = {0, INFINITY, 0, 0, 0}};
    for (int i = 0; i < n; i++) {
        flag_sample(&s[i], best_share, best_med, m, threads, &ev);
        clean += !s[i].flags;
    }
    return clean;
}

int ts_measure_judge(ts_measure_sample *s, int n, const ts_measure_machine *m, const ts_measure_opts *o,
                     ts_measure_result *r)
{
    memset(r, 0, sizeof *r);
    int min_rounds = o->min_rounds > 0 ? o->min_rounds : DEFAULT_MIN_ROUNDS;
    int threads = m->threads > 0 ? m->threads : 1;
    n -= n % 2;
    if (n > 2 * MAX_ROUNDS) n = 2 * MAX_ROUNDS;

    /* References per graph: its best round (the least disturbed). */
    double best_share[2] = {0, 0}, best_med[2] = {INFINITY, INFINITY};
    for (int i = 0; i < n; i++) {
        int g = s[i].graph ? 1 : 0;
        if (s[i].wall_ms > 0) best_share[g] = fmax(best_share[g], s[i].cpu_ms / (s[i].wall_ms * threads));
        if (s[i].med_ms > 0) best_med[g] = fmin(best_med[g], s[i].med_ms);
    }
    evidence ev = {.worst = {0, INFINITY, 0, 0, 0}};
    double med[2][MAX_ROUNDS], mins[2] = {INFINITY, INFINITY};
    int clean = 0;
    for (int k = 0; k < n / 2; k++) {
        unsigned round_flags = 0;
        for (int h = 0; h < 2; h++) {
            ts_measure_sample *x = &s[2 * k + h];
            int g = x->graph ? 1 : 0;
            flag_sample(x, best_share[g], best_med[g], m, threads, &ev);
            round_flags |= x->flags;
        }
        for (int i = 0; i < NREASONS; i++) ev.rounds[i] += (round_flags >> i) & 1;
        if (round_flags || s[2 * k].graph == s[2 * k + 1].graph) continue;
        for (int h = 0; h < 2; h++) {
            const ts_measure_sample *x = &s[2 * k + h];
            int g = x->graph ? 1 : 0;
            med[g][clean] = x->med_ms;
            mins[g] = fmin(mins[g], x->min_ms);
        }
        clean++;
    }
    r->rounds = clean;
    r->discarded = n / 2 - clean;
    char evid[160];
    describe_top(evid, sizeof evid, &ev, clean < min_rounds);
    if (clean < min_rounds) {
        r->busy = r->discarded > 0;
        if (r->busy)
            say(r, "busy (another process competes): %d of %d rounds undisturbed, %d needed%s%s", clean, n / 2,
                min_rounds, *evid ? "; " : "", evid);
        else
            say(r, "undecided: %d round%s fit in the budget, %d needed", clean, clean == 1 ? "" : "s", min_rounds);
        return clean;
    }
    r->min0_ms = mins[0];
    r->min1_ms = mins[1];
    r->median0_ms = median(med[0], clean);
    r->median1_ms = median(med[1], clean);
    double gain = 100 * (1 - r->min1_ms / r->min0_ms);
    r->faster = r->min1_ms <= r->min0_ms * (1 - o->min_gain / 100) && r->median1_ms <= r->median0_ms;
    say(r, "%s: fastest %.4g -> %.4g ms (%+.1f%%, -%g%% needed), median %.4g -> %.4g ms, %d rounds",
        r->faster ? "faster" : "not faster", r->min0_ms, r->min1_ms, -gain, o->min_gain, r->median0_ms, r->median1_ms,
        clean);
    if (r->discarded) say(r, " (%d discarded: %s)", r->discarded, evid);
    return clean;
}

/* ---------------------------------------------------------- measuring */

typedef ts_measure_probe probe;

static bool read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t k = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[k] = 0;
    return k > 0;
}

/* Run delay summed over this process's threads, and how many of them are
 * running or runnable now (state R, the reader included).  A thread that
 * exited takes its delay along; differences are clamped at 0. */
static void read_tasks(double *wait_ms, double *slices, int *running)
{
    *wait_ms = -1;
    *slices = -1;
    *running = -1;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    double wait = 0, nslices = 0;
    int run = 0;
    bool any_wait = false, any_state = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[96], buf[512];
        unsigned long long on_cpu, delay, pcount;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", e->d_name);
        if (read_text(path, buf, sizeof buf) && sscanf(buf, "%llu %llu %llu", &on_cpu, &delay, &pcount) == 3) {
            wait += (double)delay * 1e-6;
            nslices += (double)pcount;
            any_wait = true;
        }
        snprintf(path, sizeof path, "/proc/self/task/%.20s/stat", e->d_name);
        const char *paren = read_text(path, buf, sizeof buf) ? strrchr(buf, ')') : NULL;
        if (paren && paren[1] == ' ' && paren[2]) {
            run += paren[2] == 'R';
            any_state = true;
        }
    }
    closedir(d);
    if (any_wait) *wait_ms = wait, *slices = nslices;
    if (any_state) *running = run;
}

static double read_steal_ms(void)
{
    char buf[256];
    unsigned long long v[8];
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0 || !read_text("/proc/stat", buf, sizeof buf) ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) != 8)
        return -1;
    return (double)v[7] * 1e3 / (double)hz;
}

void ts_measure_probe_take(ts_measure_probe *p)
{
    int own = 0;
    read_tasks(&p->wait_ms, &p->slices, &own);
    struct rusage ru;
    p->preempted = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_nivcsw : -1;
    char buf[128];
    int others = read_text("/proc/loadavg", buf, sizeof buf) ? ts_wait_others_runnable(buf) : -1;
    /* ts_wait_others_runnable discounts the reader only; discount all our
     * running threads (spinning OpenMP workers are runnable) */
    p->others = others >= 0 && own >= 1 ? (others + 1 - own > 0 ? others + 1 - own : 0) : -1;
    p->steal_ms = read_steal_ms();
    p->cpu_ms = ts_clock_cpu_ms();
    p->wall_ms = ts_clock_ms();
}

static double delta(double a, double b)
{
    return a < 0 || b < 0 ? -1 : b - a > 0 ? b - a : 0;
}

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
    s->med_ms = median(t, runs); /* sorts t */
    s->min_ms = t[0];
    ts_measure_sample_between(s, a, b);
    return TS_OK;
}

void ts_measure_sample_between(ts_measure_sample *s, const ts_measure_probe *a, const ts_measure_probe *b)
{
    s->wall_ms = b->wall_ms - a->wall_ms;
    s->cpu_ms = b->cpu_ms - a->cpu_ms;
    s->wait_ms = delta(a->wait_ms, b->wait_ms);
    s->slices = delta(a->slices, b->slices);
    s->preempted = delta(a->preempted, b->preempted);
    s->steal_ms = delta(a->steal_ms, b->steal_ms);
    s->others = a->others < 0 ? b->others : b->others < 0 ? a->others : a->others < b->others ? a->others : b->others;
    s->flags = 0;
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
    if (opts.min_rounds <= 0) opts.min_rounds = DEFAULT_MIN_ROUNDS;
    if (opts.max_rounds <= 0) opts.max_rounds = DEFAULT_MAX_ROUNDS;
    if (opts.max_rounds < opts.min_rounds) opts.max_rounds = opts.min_rounds;
    if (opts.max_rounds > MAX_ROUNDS) opts.max_rounds = MAX_ROUNDS;
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
    ts_measure_sample *s = calloc(2 * MAX_ROUNDS, sizeof *s);
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
    while (clean < opts.max_rounds && n + 2 <= 2 * MAX_ROUNDS) {
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
    if (r->busy && m.threads > 1 && !ts_wait_threads_sleep()) say(r, "; idle OpenMP threads spin");
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
