/* tsopt bench's timed runs in rounds (bench.h): each round of about
 * BENCH_ROUND_MS is bracketed by the disturbance evidence of measure/rounds.c
 * (run delay, CPU share, other runnable tasks, steal, collapse), judged by
 * ts_measure_judge_runs; the runs of undisturbed rounds give the quiet
 * median.  Shared by the one-model bench and --against, so that both read
 * a round the same way. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "cli/bench.h"
#include "util/clock.h"

bool bench_runs_init(bench_runs *b, long cap)
{
    *b = (bench_runs){.cap = cap > 0 ? cap : 1, .rcap = 16};
    b->t = calloc((size_t)b->cap, sizeof *b->t);
    b->rs = calloc((size_t)b->rcap, sizeof *b->rs);
    b->rfirst = calloc((size_t)b->rcap + 1, sizeof *b->rfirst);
    return b->t && b->rs && b->rfirst;
}

void bench_runs_free(bench_runs *b)
{
    free(b->t);
    free(b->rs);
    free(b->rfirst);
    *b = (bench_runs){0};
}

void bench_round_open(bench_runs *b)
{
    b->rfirst[b->nround] = b->n;
    b->round_ms = 0;
    ts_measure_probe_take(&b->pa);
}

double bench_round_ms(const bench_runs *b)
{
    return b->round_ms;
}

bool bench_runs_add(bench_runs *b, double ms)
{
    if (b->n == b->cap) {
        double *t = realloc(b->t, sizeof *t * (size_t)(b->cap * 2));
        if (!t) return false;
        b->t = t;
        b->cap *= 2;
    }
    b->t[b->n++] = ms;
    b->total_ms += ms;
    b->round_ms += ms;
    return true;
}

bool bench_round_close(bench_runs *b)
{
    ts_measure_probe pb;
    ts_measure_probe_take(&pb);
    if (b->nround + 1 >= b->rcap) {
        long c = b->rcap * 2;
        ts_measure_sample *r = realloc(b->rs, sizeof *r * (size_t)c);
        if (!r) return false;
        b->rs = r;
        long *f = realloc(b->rfirst, sizeof *f * (size_t)(c + 1));
        if (!f) return false;
        b->rfirst = f;
        b->rcap = c;
    }
    ts_measure_sample *x = &b->rs[b->nround];
    *x = (ts_measure_sample){0};
    ts_measure_sample_between(x, &b->pa, &pb);
    long first = b->rfirst[b->nround], k = b->n - first;
    if (k > 0) {
        double *c = malloc(sizeof *c * (size_t)k);
        if (!c) return false;
        memcpy(c, b->t + first, sizeof *c * (size_t)k);
        x->med_ms = ts_median(c, k);
        x->min_ms = c[0];
        free(c);
    }
    b->rfirst[++b->nround] = b->n;
    return true;
}

void bench_runs_judge(bench_runs *b, int threads)
{
    ts_measure_machine m = {.threads = threads, .cores = omp_get_num_procs()};
    ts_measure_judge_runs(b->rs, b->nround > 1 << 30 ? 1 << 30 : (int)b->nround, &m);
}

bool bench_runs_quiet(bench_runs *b, int threads, quiet_stats *q)
{
    bench_runs_judge(b, threads);
    return bench_runs_collect(b, q);
}

bool bench_runs_collect(const bench_runs *b, quiet_stats *q)
{
    int nr = b->nround > 1 << 30 ? 1 << 30 : (int)b->nround;
    double *c = malloc(sizeof *c * (size_t)(b->n > 0 ? b->n : 1));
    if (!c) return false;
    *q = (quiet_stats){.rounds = nr, .median_ms = NAN, .min_ms = NAN};
    for (int r = 0; r < nr; r++) {
        if (b->rs[r].flags) {
            q->disturbed++;
            q->reasons |= b->rs[r].flags;
            continue;
        }
        for (long i = b->rfirst[r]; i < b->rfirst[r + 1]; i++) c[q->runs++] = b->t[i];
    }
    if (q->runs) {
        q->median_ms = ts_median(c, q->runs);
        q->min_ms = c[0];
    }
    free(c);
    return true;
}

ts_status bench_run_timed(ts_plan *p, ts_tensor *const *in, ts_tensor *const *out, double *ms, ts_error *err)
{
    double s = ts_clock_ms();
    ts_status st = ts_plan_run(p, in, out, err);
    *ms = ts_clock_ms() - s;
    return st;
}

bool bench_io_new(const ts_graph *g, ts_tensor **in, ts_tensor **out, uint64_t *rng)
{
    ts_error err = {0};
    for (int i = 0; in && i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, &err))) return cli_error_from(CLI_FAIL, &err), false;
        cli_fill_random_input(in[i], rng);
    }
    for (int i = 0; out && i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, &err))) return cli_error_from(CLI_FAIL, &err), false;
    }
    return true;
}
