/* Unit tests of graph rewrites that build small float graphs by hand
 * (test_merge.c, test_passes_pool.c): random weights, one-output nodes, and
 * the check that a rewritten graph computes what its original does.
 * Header-only (static inline): each test binary keeps its own seeds. */
#ifndef TS_TEST_GRAPH_BUILD_H
#define TS_TEST_GRAPH_BUILD_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include "ops/op.h"
#include "tsopt.h"

/* A float32 tensor of the dims, uniform in [-1, 1) from *rng. */
static inline ts_tensor *gb_rand_tensor(int rank, const int64_t *dims, uint64_t *rng)
{
    ts_shape s = ts_shape_make(rank, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, NULL);
    cr_assert(t);
    ts_tensor_fill_random(t, rng, -1, 1);
    return t;
}

/* A constant of gb_rand_tensor's values; returns its value id. */
static inline int gb_weight(ts_graph *g, const char *name, int rank, const int64_t *dims, uint64_t *rng)
{
    ts_error e = {0};
    ts_tensor *t = gb_rand_tensor(rank, dims, rng);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static inline int gb_input(ts_graph *g, const char *name, int rank, const int64_t *dims)
{
    ts_error e = {0};
    ts_shape s = ts_shape_make(rank, dims);
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

/* A node with one output, named by the graph; returns the output's id. */
static inline int gb_node(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na)
{
    ts_error e = {0};
    int out = -1;
    cr_assert(ts_graph_add_node(g, op, NULL, in, nin, a, na, 1, NULL, &out, &e) >= 0, "%s: %s", op, e.msg);
    return out;
}

static inline void gb_output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

/* Live nodes of operator op. */
static inline int gb_count_op(const ts_graph *g, const char *op)
{
    int n = 0;
    for (int i = 0; i < g->nnodes; i++) n += !g->nodes[i].dead && !strcmp(g->nodes[i].op->name, op);
    return n;
}

/* A copy of g rewritten by pass (an opt/passes.h pass); *n gets its count. */
static inline ts_graph *gb_rewrite(const ts_graph *g, int (*pass)(ts_graph *, ts_error *), int *n)
{
    ts_error e = {0};
    ts_graph *r = ts_graph_copy(g);
    cr_assert_not_null(r);
    *n = pass(r, &e);
    cr_assert_geq(*n, 0, "%s", e.msg);
    return r;
}

/* How gb_assert_same runs the rewritten graph. */
enum { GB_REFERENCE = 1, GB_PLAN = 2 };

/* b (a rewrite of a) on the same random inputs (seed) as a: a run by the
 * reference interpreter, b by the reference interpreter (GB_REFERENCE)
 * and/or the runtime's plan (GB_PLAN: run twice, a run must not depend on
 * the previous one); every output element of b within atol + rtol |a|. */
static inline void gb_assert_same(const ts_graph *a, const ts_graph *b, uint64_t seed, int how, double atol,
                                  double rtol)
{
    enum { MAXIO = 8 };
    ts_error e = {0};
    uint64_t rng = seed;
    ts_tensor *in[MAXIO] = {0}, *oa[MAXIO] = {0}, *ob[MAXIO] = {0};
    cr_assert(a->ninputs <= MAXIO && a->noutputs <= MAXIO);
    cr_assert_eq(a->ninputs, b->ninputs);
    cr_assert_eq(a->noutputs, b->noutputs);
    for (int i = 0; i < a->ninputs; i++) {
        const ts_value *v = &a->values[a->inputs[i]];
        in[i] = gb_rand_tensor(v->shape.rank, v->shape.dims, &rng);
    }
    cr_assert_eq(ts_graph_run_reference(a, TS_DOMAIN_F32, in, oa, &e), TS_OK, "%s", e.msg);
    for (int by = GB_REFERENCE; by <= GB_PLAN; by <<= 1) {
        if (!(how & by)) continue;
        const char *what = by == GB_PLAN ? "plan" : "reference";
        if (by == GB_REFERENCE) {
            cr_assert_eq(ts_graph_run_reference(b, TS_DOMAIN_F32, in, ob, &e), TS_OK, "%s", e.msg);
        } else {
            ts_plan *p = NULL;
            ts_plan_opts o = {0};
            for (int i = 0; i < b->noutputs; i++) {
                const ts_value *v = &b->values[b->outputs[i]];
                ob[i] = ts_tensor_new(v->dtype, &v->shape, &e);
                cr_assert(ob[i], "%s", e.msg);
            }
            cr_assert_eq(ts_plan_build(b, &o, &p, &e), TS_OK, "%s", e.msg);
            for (int rep = 0; rep < 2; rep++) cr_assert_eq(ts_plan_run(p, in, ob, &e), TS_OK, "%s", e.msg);
            ts_plan_free(p);
        }
        for (int i = 0; i < a->noutputs; i++) {
            int64_t n = ts_tensor_numel(oa[i]);
            cr_assert_eq(n, ts_tensor_numel(ob[i]), "output %d (%s): sizes differ", i, what);
            for (int64_t k = 0; k < n; k++) {
                double x = ts_tensor_get_f64(oa[i], k), y = ts_tensor_get_f64(ob[i], k);
                cr_assert(fabs(x - y) <= atol + rtol * fabs(x), "output %d[%lld]: %g vs %g (%s)", i, (long long)k,
                          x, y, what);
            }
            ts_tensor_unref(ob[i]);
            ob[i] = NULL;
        }
    }
    for (int i = 0; i < a->noutputs; i++) ts_tensor_unref(oa[i]);
    for (int i = 0; i < a->ninputs; i++) ts_tensor_unref(in[i]);
}

/* The largest |a - b| over every output of a and b run by the reference
 * interpreter on the same single input: the measure by which a test's
 * planted wrong rewrite must be refuted. */
static inline double gb_max_diff(const ts_graph *a, const ts_graph *b, ts_tensor *in)
{
    enum { MAXIO = 8 };
    ts_error e = {0};
    ts_tensor *oa[MAXIO] = {0}, *ob[MAXIO] = {0};
    cr_assert(a->noutputs <= MAXIO && a->noutputs == b->noutputs);
    cr_assert_eq(ts_graph_run_reference(a, TS_DOMAIN_F32, &in, oa, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(b, TS_DOMAIN_F32, &in, ob, &e), TS_OK, "%s", e.msg);
    double worst = 0;
    for (int k = 0; k < a->noutputs; k++) {
        cr_assert_eq(ts_tensor_numel(oa[k]), ts_tensor_numel(ob[k]));
        for (int64_t i = 0; i < ts_tensor_numel(oa[k]); i++)
            worst = fmax(worst, fabs(ts_tensor_get_f64(oa[k], i) - ts_tensor_get_f64(ob[k], i)));
        ts_tensor_unref(oa[k]);
        ts_tensor_unref(ob[k]);
    }
    return worst;
}

/* gb_rewrite, and when the pass rewrote anything the copy checked against
 * g on the seed's inputs by the reference interpreter and the plan. */
static inline ts_graph *gb_rewrite_checked(const ts_graph *g, int (*pass)(ts_graph *, ts_error *), int *n,
                                           uint64_t seed)
{
    ts_graph *r = gb_rewrite(g, pass, n);
    if (*n) gb_assert_same(g, r, seed, GB_REFERENCE | GB_PLAN, 1e-5, 1e-4);
    return r;
}

/* g's single input set to in (float32, g's input shape) and run by the
 * reference interpreter: its first n output elements equal want within 1e-6
 * (the hand-computed values of a rewrite's test). */
static inline void gb_assert_values(const ts_graph *g, float *in, const float *want, int n)
{
    ts_error e = {0};
    ts_tensor *ti = ts_tensor_wrap(TS_F32, &g->values[g->inputs[0]].shape, in), *to = NULL;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &ti, &to, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < n; i++) cr_assert_float_eq(ts_tensor_get_f64(to, i), want[i], 1e-6, "element %d", i);
    ts_tensor_unref(ti);
    ts_tensor_unref(to);
}

#endif
