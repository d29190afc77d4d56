/* Single-operator test cases.  Each case builds a one-op graph through the
 * public builder API; the `opcases` driver exports it to ONNX, runs the
 * reference interpreter on seeded random inputs, and the ORT script runs the
 * exported model on the same inputs and compares. */
#ifndef TS_TESTS_OPCASE_H
#define TS_TESTS_OPCASE_H

#include <stdio.h>
#include <stdlib.h>
#include "tsopt.h"

typedef struct opcase {
    const char *name;          /* unique, [a-z0-9_] */
    ts_graph *(*build)(void);  /* NULL-terminated tables end with {0} */
    double lo, hi;             /* float input range; both 0 means [-1, 1) */
    double rtol, atol;         /* 0 means the defaults 1e-4 / 1e-5 */
} opcase;

extern const opcase opcases_nn[], opcases_math[], opcases_tensor[];

/* ---- builder helpers: abort on error, since a broken case is a test bug */

static inline void oc_check(int ok, const ts_error *e)
{
    if (!ok) {
        fprintf(stderr, "opcase build failed: %s\n", e->msg);
        exit(2);
    }
}

static inline ts_shape oc_shape(const char *dims)
{
    ts_shape s;
    ts_error e = {0};
    if (!*dims) { /* "" is a scalar */
        s.rank = 0;
        return s;
    }
    oc_check(ts_shape_parse(dims, &s, &e) == TS_OK, &e);
    return s;
}

static inline ts_graph *oc_graph(int opset) { return ts_graph_new("opcase", opset ? opset : 17); }

static inline int oc_input(ts_graph *g, const char *name, ts_dtype dt, const char *dims)
{
    ts_error e = {0};
    ts_shape s = oc_shape(dims);
    int v = ts_graph_add_input(g, name, dt, &s, &e);
    oc_check(v >= 0, &e);
    return v;
}

/* Constant int64 vector (shapes, axes, indices). */
static inline int oc_const_i64(ts_graph *g, const char *name, int n, const int64_t *vals)
{
    ts_error e = {0};
    int64_t d = n;
    ts_shape s = ts_shape_make(1, &d);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    oc_check(t != NULL, &e);
    for (int i = 0; i < n; i++) ((int64_t *)t->data)[i] = vals[i];
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    oc_check(v >= 0, &e);
    return v;
}

/* Constant float tensor: given values, or seeded random in [lo, hi) when vals is NULL. */
static inline int oc_const_f32(ts_graph *g, const char *name, const char *dims, const float *vals, double lo,
                               double hi)
{
    ts_error e = {0};
    ts_shape s = oc_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, &e);
    oc_check(t != NULL, &e);
    uint64_t seed = 0x5eed;
    for (const char *p = name; *p; p++) seed = seed * 31 + (unsigned char)*p;
    if (vals)
        for (int64_t i = 0; i < ts_tensor_numel(t); i++) ((float *)t->data)[i] = vals[i];
    else
        ts_tensor_fill_random(t, &seed, lo, hi);
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    oc_check(v >= 0, &e);
    return v;
}

/* Adds the node and makes all its outputs graph outputs. Returns the graph. */
static inline ts_graph *oc_node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *attrs,
                                int nattrs, int nout)
{
    ts_error e = {0};
    int outs[16];
    oc_check(ts_graph_add_node(g, op, NULL, ins, nin, attrs, nattrs, nout, NULL, outs, &e) >= 0, &e);
    for (int i = 0; i < nout; i++) oc_check(ts_graph_add_output(g, outs[i], &e) == TS_OK, &e);
    return g;
}

#define OC_INTS(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

#endif
