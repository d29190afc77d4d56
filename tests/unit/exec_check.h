/* Shared helpers of the fast-runtime unit tests (test_exec_*.c): build a
 * small graph, then run it by a plan and by the reference interpreter on
 * the same random inputs and compare every output.  Header-only (static
 * inline): each test binary is its own translation unit and keeps its own
 * random seeds. */
#ifndef TS_TESTS_EXEC_CHECK_H
#define TS_TESTS_EXEC_CHECK_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "exec/exec.h"
#include "tsopt.h"

/* "2x3x4"; "" is a scalar */
static inline ts_shape xt_shape(const char *dims)
{
    ts_shape s = {0};
    ts_error e = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    return s;
}

/* A float32 graph input (name NULL: "x<id>"). */
static inline int xt_input(ts_graph *g, const char *name, const char *dims)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    char buf[32];
    if (!name) snprintf(buf, sizeof buf, "x%d", g->nvalues), name = buf;
    int v = ts_graph_add_input(g, name, TS_F32, &s, &e);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

/* Adds t as a constant (named "c<id>") and drops the caller's reference. */
static inline int xt_const(ts_graph *g, ts_tensor *t)
{
    ts_error e = {0};
    char name[32];
    snprintf(name, sizeof name, "c%d", g->nvalues);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert_geq(v, 0, "%s", e.msg);
    return v;
}

/* Constant of the given dims, uniform random in [lo, hi). */
static inline int xt_const_random(ts_graph *g, const char *dims, double lo, double hi, uint64_t *rng)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    cr_assert_not_null(t, "%s", e.msg);
    ts_tensor_fill_random(t, rng, lo, hi);
    return xt_const(g, t);
}

/* Constant of dtype dt holding v[0..n-1]; a single value fills it. */
static inline int xt_const_values(ts_graph *g, ts_dtype dt, const char *dims, const double *v, int n)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert(n == 1 || ts_tensor_numel(t) == n, "constant %s: %d values", dims, n);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, v[n == 1 ? 0 : i]);
    return xt_const(g, t);
}

/* Argument lists: f(INS(a, b), ATTRS(ts_attr_int("axis", 1))) or NOATTR;
 * NV counts doubles. */
#define INS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define ATTRS(...) (const ts_attr[]){__VA_ARGS__}, (int)(sizeof((ts_attr[]){__VA_ARGS__}) / sizeof(ts_attr))
#define NOATTR NULL, 0
#define NV(...) (int)(sizeof((double[]){__VA_ARGS__}) / sizeof(double))

/* One-output node; returns its output value. */
static inline int xt_node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *at, int na)
{
    ts_error e = {0};
    int out;
    cr_assert_geq(ts_graph_add_node(g, op, NULL, ins, nin, at, na, 1, NULL, &out, &e), 0, "%s: %s", op, e.msg);
    return out;
}

/* Every memory-plan invariant: arena buffers whose lifetimes overlap do
 * not overlap in memory; each lies inside the arena, 64-byte aligned;
 * aliases point at buffers that exist.  Returns the plan's internals. */
static inline const xplan *xt_check_memplan(const ts_plan *plan)
{
    const xplan *p = (const xplan *)plan;
    for (int a = 0; a < p->nbufs; a++) {
        const xbuf *x = &p->bufs[a];
        if (x->kind == XB_ALIAS) cr_assert(x->alias_of >= 0 && x->alias_of < p->nbufs);
        if (x->kind != XB_ARENA || x->first_step < 0 || !x->bytes) continue;
        cr_assert(x->offset % 64 == 0, "buffer %d offset %lld not 64-aligned", a, (long long)x->offset);
        cr_assert((size_t)x->offset + x->bytes <= p->arena_bytes, "buffer %d past the arena", a);
        for (int b = a + 1; b < p->nbufs; b++) {
            const xbuf *y = &p->bufs[b];
            if (y->kind != XB_ARENA || y->first_step < 0 || !y->bytes) continue;
            bool live = x->first_step <= y->last_step && y->first_step <= x->last_step;
            bool mem = x->offset < y->offset + (int64_t)y->bytes && y->offset < x->offset + (int64_t)x->bytes;
            cr_assert(!(live && mem), "buffers %d [%d,%d]@%lld and %d [%d,%d]@%lld overlap", a, x->first_step,
                      x->last_step, (long long)x->offset, b, y->first_step, y->last_step, (long long)y->offset);
        }
    }
    return p;
}

static inline void xt_output(ts_graph *g, int v)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, v, &e), TS_OK, "%s", e.msg);
}

/* 3x3 convolution (pads 1) C -> C with a bias, weights in [-0.1, 0.1). */
static inline int xt_conv3x3(ts_graph *g, int x, int C, uint64_t *rng)
{
    char w[64], b[16];
    snprintf(w, sizeof w, "%dx%dx3x3", C, C);
    snprintf(b, sizeof b, "%d", C);
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
    int ins[] = {x, xt_const_random(g, w, -0.1, 0.1, rng), xt_const_random(g, b, -0.5, 0.5, rng)};
    return xt_node(g, "Conv", ins, 3, at, 1);
}

/* xt_conv3x3 followed by a Relu. */
static inline int xt_conv3x3_relu(ts_graph *g, int x, int C, uint64_t *rng)
{
    int y = xt_conv3x3(g, x, C, rng);
    return xt_node(g, "Relu", &y, 1, NULL, 0);
}

/* 1x1 convolution C -> F without bias, weights in [-0.3, 0.3). */
static inline int xt_conv1x1(ts_graph *g, int x, int C, int F, uint64_t *rng)
{
    char w[64];
    snprintf(w, sizeof w, "%dx%dx1x1", F, C);
    int ins[] = {x, xt_const_random(g, w, -0.3, 0.3, rng)};
    return xt_node(g, "Conv", ins, 2, NULL, 0);
}

/* How outputs are compared: |plan - ref| <= tol + tol |ref| per element
 * (XT_TOL_ELEM), or <= tol * max(1, max |ref|) (XT_TOL_MAX: sums of many
 * products, where small elements carry the largest one's rounding). */
typedef enum { XT_TOL_ELEM, XT_TOL_MAX } xt_tol;

/* Plans g with options o, checks its memory plan, and runs it twice (the
 * second run must not depend on state the first left; outputs filled with
 * garbage before each, so an element the plan forgets to write shows) on
 * inputs drawn from seed in [lo, hi), against the reference interpreter on
 * the same inputs.  Returns the plan for inspection (caller frees). */
static inline ts_plan *xt_plan_check(const ts_graph *g, const ts_plan_opts *o, uint64_t seed, double lo, double hi,
                                     double tol, xt_tol mode)
{
    enum { MAXIO = 32 };
    ts_error e = {0};
    ts_tensor *in[MAXIO] = {0}, *ref[MAXIO] = {0}, *got[MAXIO] = {0};
    cr_assert(g->ninputs <= MAXIO && g->noutputs <= MAXIO);
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    uint64_t rng = seed;
    for (int i = 0; i < g->ninputs; i++) {
        in[i] = ts_tensor_new(TS_F32, &g->values[g->inputs[i]].shape, &e);
        cr_assert_not_null(in[i], "%s", e.msg);
        ts_tensor_fill_random(in[i], &rng, lo, hi);
    }
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, ref, &e), TS_OK, "%s", e.msg);
    ts_plan *plan = NULL;
    ts_plan_opts def = {0};
    cr_assert_eq(ts_plan_build(g, o ? o : &def, &plan, &e), TS_OK, "%s", e.msg);
    xt_check_memplan(plan);
    for (int i = 0; i < g->noutputs; i++) got[i] = ts_tensor_new(TS_F32, &g->values[g->outputs[i]].shape, &e);
    int threads = o ? o->threads : 0;
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < g->noutputs; i++) memset(got[i]->data, 0x7f, got[i]->nbytes);
        cr_assert_eq(ts_plan_run(plan, in, got, &e), TS_OK, "%s", e.msg);
        for (int i = 0; i < g->noutputs; i++) {
            cr_assert(ts_shape_eq(&ref[i]->shape, &got[i]->shape), "output %d: shapes differ", i);
            const float *a = ref[i]->data, *b = got[i]->data;
            int64_t n = ts_tensor_numel(ref[i]);
            double maxref = 1;
            if (mode == XT_TOL_MAX)
                for (int64_t k = 0; k < n; k++) maxref = fmax(maxref, fabs(a[k]));
            for (int64_t k = 0; k < n; k++) {
                double bound = mode == XT_TOL_MAX ? tol * maxref : tol + tol * fabs(a[k]);
                cr_assert(a[k] == b[k] || fabs((double)a[k] - b[k]) <= bound || (isnan(a[k]) && isnan(b[k])),
                          "threads %d, run %d, output %d [%lld]: plan %.9g, reference %.9g", threads, rep, i,
                          (long long)k, b[k], a[k]);
            }
        }
    }
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
    for (int i = 0; i < g->noutputs; i++) {
        ts_tensor_unref(ref[i]);
        ts_tensor_unref(got[i]);
    }
    return plan;
}

/* xt_plan_check, returning only the plan's statistics. */
static inline ts_plan_stats xt_plan_stats(const ts_graph *g, const ts_plan_opts *o, uint64_t seed, double lo,
                                          double hi, double tol, xt_tol mode)
{
    ts_plan *p = xt_plan_check(g, o, seed, lo, hi, tol, mode);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    ts_plan_free(p);
    return st;
}

/* Steps of the plan run by kernel `name`. */
static inline int xt_steps_of(const ts_plan *plan, const char *name)
{
    const xplan *p = (const xplan *)plan;
    int k = 0;
    for (int i = 0; i < p->nsteps; i++) k += !strcmp(p->steps[i].k->name, name);
    return k;
}

/* xt_plan_check of g on 1 and then 2 threads (inputs in [-1, 1), within
 * 1e-4 of the largest reference value; seeds *seed, *seed + 1, advanced),
 * giving the steps kernel `name` runs, which must be as many on both. */
static inline int xt_kernel_steps_1_2(const ts_graph *g, const char *name, uint64_t *seed)
{
    int got = -1;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(g, &o, (*seed)++, -1, 1, 1e-4, XT_TOL_MAX);
        int k = xt_steps_of(plan, name);
        cr_assert(got < 0 || k == got, "%s: %d steps on 1 thread, %d on 2", name, got, k);
        got = k;
        ts_plan_free(plan);
    }
    return got;
}

/* The one-graph-per-test style (define XT_GLOBAL_GRAPH before the include):
 * graph(opset) starts G, the suite's .fini = xt_done frees it, and
 * input/op/output/F32/I64 build it. */
#ifdef XT_GLOBAL_GRAPH
static ts_graph *G;
static ts_error E;

static inline void xt_done(void)
{
    ts_graph_free(G);
    G = NULL;
}

static inline void graph(int opset)
{
    ts_graph_free(G);
    G = ts_graph_new("t", opset);
    memset(&E, 0, sizeof E);
}

static inline int input(const char *dims) { return xt_input(G, NULL, dims); }

static inline int op(const char *name, const int *ins, int nin, const ts_attr *at, int nat)
{
    return xt_node(G, name, ins, nin, at, nat);
}

static inline void output(int v) { cr_assert_eq(ts_graph_add_output(G, v, &E), TS_OK, "%s", E.msg); }

/* n values; a single value fills the whole tensor */
#define F32(dims, ...) xt_const_values(G, TS_F32, dims, (const double[]){__VA_ARGS__}, NV(__VA_ARGS__))
#define I64(dims, ...) xt_const_values(G, TS_I64, dims, (const double[]){__VA_ARGS__}, NV(__VA_ARGS__))
#endif

#endif
