/* The final check: the optimized graph against the original, both run by
 * the fast runtime on the same seeded random inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "opt/check.h"

/* Runs g with the fast runtime on inputs; outputs allocated here. */
static ts_status run_plan(const ts_graph *g, ts_tensor **in, ts_tensor **out, ts_error *err)
{
    ts_plan *p = NULL;
    ts_plan_opts o = {0};
    for (int i = 0; i < g->noutputs; i++) {
        const ts_value *v = &g->values[g->outputs[i]];
        if (!(out[i] = ts_tensor_new(v->dtype, &v->shape, err))) return err->code;
    }
    ts_status st = ts_plan_build(g, &o, &p, err);
    if (!st) st = ts_plan_run(p, in, out, err);
    ts_plan_free(p);
    return st;
}

/* Largest |a-b| / (atol * scale + rtol * |a|) over all outputs: <= 1 passes.
 * atol is scaled by the output's largest magnitude (at least 1) so that
 * outputs of any size are judged alike. */
static double compare(const ts_graph *g, ts_tensor **a, ts_tensor **b)
{
    double worst = 0;
    for (int i = 0; i < g->noutputs; i++) {
        if (!ts_dtype_is_float(a[i]->dtype)) {
            if (a[i]->nbytes != b[i]->nbytes || memcmp(a[i]->data, b[i]->data, a[i]->nbytes)) return INFINITY;
            continue;
        }
        int64_t n = ts_tensor_numel(a[i]);
        if (n != ts_tensor_numel(b[i])) return INFINITY;
        double scale = 1.0;
        for (int64_t k = 0; k < n; k++) scale = fmax(scale, fabs(ts_tensor_get_f64(a[i], k)));
        for (int64_t k = 0; k < n; k++) {
            double x = ts_tensor_get_f64(a[i], k), y = ts_tensor_get_f64(b[i], k);
            double e = fabs(x - y) / (1e-4 * scale + 1e-3 * fabs(x));
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
    }
    return worst;
}

ts_status ts_opt_check(const ts_graph *g0, const ts_graph *g1, uint64_t seed, double *worst, ts_error *err)
{
    int nin = g0->ninputs, nout = g0->noutputs;
    if (g1->ninputs != nin || g1->noutputs != nout)
        return ts_error_set(err, TS_ERR_INVALID, "optimized graph has different inputs/outputs");
    ts_tensor **in = calloc((size_t)nin + 1, sizeof *in), **o0 = calloc((size_t)nout + 1, sizeof *o0),
              **o1 = calloc((size_t)nout + 1, sizeof *o1);
    ts_status st = TS_OK;
    if (!in || !o0 || !o1) st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < nin && !st; i++) {
        const ts_value *v = &g0->values[g0->inputs[i]];
        if (!(in[i] = ts_tensor_new(v->dtype, &v->shape, err))) st = err->code;
        else if (ts_dtype_is_float(v->dtype))
            ts_tensor_fill_random(in[i], &rng, -1, 1);
    }
    if (!st) st = run_plan(g0, in, o0, err);
    if (!st) st = run_plan(g1, in, o1, err);
    if (!st) *worst = compare(g0, o0, o1);
    for (int i = 0; in && i < nin; i++) ts_tensor_unref(in[i]);
    for (int i = 0; o0 && o1 && i < nout; i++) {
        ts_tensor_unref(o0[i]);
        ts_tensor_unref(o1[i]);
    }
    free(in);
    free(o0);
    free(o1);
    return st;
}
