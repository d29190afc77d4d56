/* Tensor-family operators (data movement, shapes): hand-computed values on
 * small iota tensors, opset variants, the mod-p domain, and error messages. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "ops/op.h"

#define NV(...) ((const double[]){__VA_ARGS__}), (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define I64S(...) ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

static ts_shape shp(const char *dims)
{
    ts_shape s = {0};
    ts_error e = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &e), TS_OK, "%s", e.msg);
    return s;
}

static ts_tensor *vals(ts_dtype dt, const char *dims, const double *v, int n)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert_eq(ts_tensor_numel(t), n);
    for (int i = 0; i < n; i++) ts_tensor_set_f64(t, i, v[i]);
    return t;
}

static int input(ts_graph *g, const char *name, ts_dtype dt, const char *dims)
{
    ts_error e = {0};
    ts_shape s = shp(dims);
    int v = ts_graph_add_input(g, name, dt, &s, &e);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int cst(ts_graph *g, const char *name, ts_tensor *t)
{
    ts_error e = {0};
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    cr_assert(v >= 0, "%s", e.msg);
    return v;
}

static int cints(ts_graph *g, const char *name, const int64_t *v, int n)
{
    char dims[16];
    snprintf(dims, sizeof dims, "%d", n);
    ts_error e = {0};
    ts_shape s = n ? shp(dims) : ts_shape_make(1, (const int64_t[]){0});
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    for (int i = 0; i < n; i++) ((int64_t *)t->data)[i] = v[i];
    return cst(g, name, t);
}

static int cfloats(ts_graph *g, const char *name, const double *v, int n)
{
    char dims[16];
    snprintf(dims, sizeof dims, "%d", n);
    return cst(g, name, vals(TS_F32, dims, v, n));
}

/* Adds a node expected to succeed; its outputs become graph outputs. */
static void node(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na, int nout)
{
    ts_error e = {0};
    int outs[16];
    cr_assert(ts_graph_add_node(g, op, NULL, ins, nin, a, na, nout, NULL, outs, &e) >= 0, "%s", e.msg);
    for (int i = 0; i < nout; i++) cr_assert_eq(ts_graph_add_output(g, outs[i], &e), TS_OK);
}

/* Adds a node expected to fail; asserts the message contains `want`. */
static void node_fails(ts_graph *g, const char *op, const int *ins, int nin, const ts_attr *a, int na, int nout,
                       const char *want)
{
    ts_error e = {0};
    int outs[16];
    cr_assert_lt(ts_graph_add_node(g, op, "bad", ins, nin, a, na, nout, NULL, outs, &e), 0, "expected failure: %s", want);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    cr_assert(strstr(e.msg, "bad"), "message '%s' does not name the node", e.msg);
}

/* Runs g in domain dom on iota inputs; outputs into out[]. */
static void run(ts_graph *g, ts_domain_kind dom, ts_tensor **out)
{
    ts_error e = {0};
    ts_tensor *in[8] = {0};
    ts_dtype st = dom == TS_DOMAIN_F32 ? TS_F32 : dom == TS_DOMAIN_F64 ? TS_F64 : TS_MODP;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = ts_tensor_new(ts_dtype_is_float(v->dtype) ? st : v->dtype, &v->shape, &e);
        for (int64_t j = 0; j < ts_tensor_numel(in[i]); j++) ts_tensor_set_f64(in[i], j, (double)j);
    }
    ts_status s = ts_graph_run_reference(g, dom, in, out, &e);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
    cr_assert_eq(s, TS_OK, "%s", e.msg);
}

static void expect(ts_tensor *t, const char *dims, const double *v, int n)
{
    char a[160], b[160];
    ts_shape s = shp(dims);
    cr_assert(ts_shape_eq(&t->shape, &s), "shape %s, expected %s", ts_shape_str(&t->shape, a, sizeof a),
              ts_shape_str(&s, b, sizeof b));
    cr_assert_eq(ts_tensor_numel(t), n, "wrong element count in expectation");
    for (int i = 0; i < n; i++)
        cr_assert_float_eq(ts_tensor_get_f64(t, i), v[i], 1e-6, "element %d: %g, expected %g", i,
                           ts_tensor_get_f64(t, i), v[i]);
    ts_tensor_unref(t);
}

/* One-output graph: builds, runs in dom and checks. */
static void check1(ts_graph *g, ts_domain_kind dom, const char *dims, const double *v, int n)
{
    ts_tensor *out[1];
    ts_error e = {0};
    cr_assert_eq(ts_graph_validate(g, &e), TS_OK, "%s", e.msg);
    run(g, dom, out);
    expect(out[0], dims, v, n);
    ts_graph_free(g);
}

/* Runs and expects a kernel error containing want. */
static void run_fails(ts_graph *g, ts_domain_kind dom, const char *want)
{
    ts_error e = {0};
    ts_tensor *in[8] = {0}, *out[8] = {0};
    ts_dtype st = dom == TS_DOMAIN_F32 ? TS_F32 : dom == TS_DOMAIN_F64 ? TS_F64 : TS_MODP;
    for (int i = 0; i < g->ninputs; i++) {
        const ts_value *v = &g->values[g->inputs[i]];
        in[i] = ts_tensor_new(ts_dtype_is_float(v->dtype) ? st : v->dtype, &v->shape, &e);
        for (int64_t j = 0; j < ts_tensor_numel(in[i]); j++) ts_tensor_set_f64(in[i], j, (double)j + 5);
    }
    ts_status s = ts_graph_run_reference(g, dom, in, out, &e);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
    cr_assert_neq(s, TS_OK, "expected failure: %s", want);
    cr_assert(strstr(e.msg, want), "message '%s' lacks '%s'", e.msg, want);
    ts_graph_free(g);
}

/* ------------------------------------------------------------- Concat */

Test(concat, negative_axis)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x2"), cst(g, "y", vals(TS_F32, "2x1", NV(10, 11)))};
    node(g, "Concat", ins, 2, (ts_attr[]){ts_attr_int("axis", -1)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "2x3", NV(0, 1, 10, 2, 3, 11));
}

Test(concat, axis0_modp)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x2"), cst(g, "y", vals(TS_F32, "1x2", NV(10, 11)))};
    node(g, "Concat", ins, 2, (ts_attr[]){ts_attr_int("axis", 0)}, 1, 1);
    check1(g, TS_DOMAIN_MODP, "3x2", NV(0, 1, 2, 3, 10, 11));
}

Test(concat, errors)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x2"), input(g, "y", TS_F32, "3x3")};
    node_fails(g, "Concat", ins, 2, (ts_attr[]){ts_attr_int("axis", 0)}, 1, 1, "input 1 has shape 3x3, expected 2x2");
    node_fails(g, "Concat", ins, 2, (ts_attr[]){ts_attr_int("axis", 2)}, 1, 1, "axis 2 is out of range for rank 2");
    ts_graph_free(g);
}

/* -------------------------------------------------------------- Split */

static ts_tensor *run_outs[8];

Test(split, attribute_opset11)
{
    ts_graph *g = ts_graph_new("t", 11);
    int x = input(g, "x", TS_F32, "6");
    node(g, "Split", &x, 1, (ts_attr[]){ts_attr_ints("split", I64S(2, 4))}, 1, 2);
    run(g, TS_DOMAIN_F32, run_outs);
    expect(run_outs[0], "2", NV(0, 1));
    expect(run_outs[1], "4", NV(2, 3, 4, 5));
    ts_graph_free(g);
}

Test(split, input_opset13)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x4"), cints(g, "s", I64S(1, 3))};
    node(g, "Split", ins, 2, (ts_attr[]){ts_attr_int("axis", -1)}, 1, 2);
    run(g, TS_DOMAIN_MODP, run_outs);
    expect(run_outs[0], "2x1", NV(0, 4));
    expect(run_outs[1], "2x3", NV(1, 2, 3, 5, 6, 7));
    ts_graph_free(g);
}

Test(split, num_outputs_opset18)
{
    ts_graph *g = ts_graph_new("t", 18);
    int x = input(g, "x", TS_F32, "5");
    node(g, "Split", &x, 1, (ts_attr[]){ts_attr_int("num_outputs", 2)}, 1, 2);
    run(g, TS_DOMAIN_F64, run_outs);
    expect(run_outs[0], "3", NV(0, 1, 2));
    expect(run_outs[1], "2", NV(3, 4));
    ts_graph_free(g);
}

Test(split, equal_default)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "6");
    node(g, "Split", &x, 1, NULL, 0, 3);
    run(g, TS_DOMAIN_F32, run_outs);
    expect(run_outs[0], "2", NV(0, 1));
    expect(run_outs[1], "2", NV(2, 3));
    expect(run_outs[2], "2", NV(4, 5));
    ts_graph_free(g);
}

Test(split, errors)
{
    ts_graph *g = ts_graph_new("t", 11);
    int x = input(g, "x", TS_F32, "6");
    node_fails(g, "Split", &x, 1, (ts_attr[]){ts_attr_ints("split", I64S(2, 2))}, 1, 2,
               "split sizes sum to 4, expected 6");
    node_fails(g, "Split", &x, 1, NULL, 0, 4, "does not split evenly into 4 outputs");
    ts_graph_free(g);
    g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "6"), input(g, "s", TS_I64, "2")};
    node_fails(g, "Split", ins, 2, NULL, 0, 2, "must be a constant");
    ts_graph_free(g);
}

/* -------------------------------------------------------------- Slice */

Test(slice, attributes_opset9)
{
    ts_graph *g = ts_graph_new("t", 9);
    int x = input(g, "x", TS_F32, "3x4");
    ts_attr a[] = {ts_attr_ints("starts", I64S(1, 0)), ts_attr_ints("ends", I64S(3, -1)), ts_attr_ints("axes", I64S(0, 1))};
    node(g, "Slice", &x, 1, a, 3, 1);
    check1(g, TS_DOMAIN_F32, "2x3", NV(4, 5, 6, 8, 9, 10));
}

Test(slice, inputs_negative_step)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[5] = {input(g, "x", TS_F32, "3x4"), cints(g, "st", I64S(-1)), cints(g, "en", I64S(INT64_MIN)),
                  cints(g, "ax", I64S(1)), cints(g, "sp", I64S(-2))};
    node(g, "Slice", ins, 5, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "3x2", NV(3, 1, 7, 5, 11, 9));
}

Test(slice, full_reverse_and_clamp_modp)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[5] = {input(g, "x", TS_F32, "3x4"), cints(g, "st", I64S(INT64_MAX, 1)), cints(g, "en", I64S(-100, 1000)),
                  cints(g, "ax", I64S(0, -1)), cints(g, "sp", I64S(-1, 2))};
    node(g, "Slice", ins, 5, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "3x2", NV(9, 11, 5, 7, 1, 3));
}

Test(slice, step_and_empty)
{
    ts_graph *g = ts_graph_new("t", 10);
    int ins[5] = {input(g, "x", TS_F32, "3x4"), cints(g, "st", I64S(0)), cints(g, "en", I64S(INT64_MAX)), -1,
                  cints(g, "sp", I64S(2))};
    node(g, "Slice", ins, 5, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2x4", NV(0, 1, 2, 3, 8, 9, 10, 11));
    g = ts_graph_new("t", 13);
    int e[4] = {input(g, "x", TS_F32, "3x4"), cints(g, "st", I64S(5)), cints(g, "en", I64S(10)), cints(g, "ax", I64S(1))};
    node(g, "Slice", e, 4, NULL, 0, 1);
    ts_tensor *out[1];
    run(g, TS_DOMAIN_F32, out);
    cr_assert_eq(out[0]->shape.dims[1], 0);
    cr_assert_eq(out[0]->shape.dims[0], 3);
    ts_tensor_unref(out[0]);
    ts_graph_free(g);
}

Test(slice, errors)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[5] = {input(g, "x", TS_F32, "3x4"), cints(g, "st", I64S(0)), cints(g, "en", I64S(2)), cints(g, "ax", I64S(2)),
                  cints(g, "sp", I64S(0))};
    node_fails(g, "Slice", ins, 4, NULL, 0, 1, "axis 2 is out of range for rank 2");
    ins[3] = -1;
    node_fails(g, "Slice", ins, 5, NULL, 0, 1, "step 0 on axis 0");
    ts_graph_free(g);
}

/* ------------------------------------------- Reshape, Flatten, (Un)Squeeze */

Test(reshape, minus_one_and_zero)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "s", I64S(3, -1))};
    node(g, "Reshape", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "3x2", NV(0, 1, 2, 3, 4, 5));
    g = ts_graph_new("t", 13);
    int j[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "s", I64S(0, 1, -1))};
    node(g, "Reshape", j, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2x1x3", NV(0, 1, 2, 3, 4, 5));
}

Test(reshape, errors)
{
    ts_graph *g = ts_graph_new("t", 14);
    int ins[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "s", I64S(4, 2))};
    node_fails(g, "Reshape", ins, 2, NULL, 0, 1, "cannot reshape 2x3 (6 elements) to 4x2");
    ins[1] = cints(g, "z", I64S(0, 3));
    node_fails(g, "Reshape", ins, 2, (ts_attr[]){ts_attr_int("allowzero", 1)}, 1, 1,
               "cannot reshape 2x3 (6 elements) to 0x3");
    ins[1] = cints(g, "m", I64S(4, -1));
    node_fails(g, "Reshape", ins, 2, NULL, 0, 1, "cannot reshape 2x3 (6 elements) to 4x-1");
    ins[1] = cints(g, "mm", I64S(-1, -1));
    node_fails(g, "Reshape", ins, 2, NULL, 0, 1, "more than one -1");
    ins[1] = input(g, "dyn", TS_I64, "2");
    node_fails(g, "Reshape", ins, 2, NULL, 0, 1, "input 1 ('dyn') must be a constant");
    ts_graph_free(g);
}

Test(flatten, axes)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3x2");
    node(g, "Flatten", &x, 1, (ts_attr[]){ts_attr_int("axis", -1)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "6x2", NV(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "2x3");
    node(g, "Flatten", &x, 1, (ts_attr[]){ts_attr_int("axis", 0)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "1x6", NV(0, 1, 2, 3, 4, 5));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "2x3");
    node_fails(g, "Flatten", &x, 1, (ts_attr[]){ts_attr_int("axis", 3)}, 1, 1, "axis 3 is out of range");
    ts_graph_free(g);
}

Test(squeeze, attribute_input_and_all)
{
    ts_graph *g = ts_graph_new("t", 11);
    int x = input(g, "x", TS_F32, "1x3x1");
    node(g, "Squeeze", &x, 1, (ts_attr[]){ts_attr_ints("axes", I64S(0))}, 1, 1);
    check1(g, TS_DOMAIN_F32, "3x1", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "1x3x1"), cints(g, "a", I64S(-1))};
    node(g, "Squeeze", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "1x3", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "1x3x1");
    node(g, "Squeeze", &x, 1, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "3", NV(0, 1, 2));
}

Test(squeeze, non_one_dim)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "1x3x1"), cints(g, "a", I64S(1))};
    node_fails(g, "Squeeze", ins, 2, NULL, 0, 1, "cannot squeeze axis 1 of size 3");
    ts_graph_free(g);
}

Test(unsqueeze, attribute_and_input)
{
    ts_graph *g = ts_graph_new("t", 11);
    int x = input(g, "x", TS_F32, "3");
    node(g, "Unsqueeze", &x, 1, (ts_attr[]){ts_attr_ints("axes", I64S(0, -1))}, 1, 1);
    check1(g, TS_DOMAIN_F32, "1x3x1", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3"), cints(g, "a", I64S(1))};
    node(g, "Unsqueeze", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "3x1", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "3");
    node_fails(g, "Unsqueeze", &x, 1, NULL, 0, 1, "axes are required (second input)");
    ts_graph_free(g);
}

/* ---------------------------------------------------------- Transpose */

Test(transpose, default_and_perm)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3");
    node(g, "Transpose", &x, 1, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "3x2", NV(0, 3, 1, 4, 2, 5));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "2x2x3");
    node(g, "Transpose", &x, 1, (ts_attr[]){ts_attr_ints("perm", I64S(2, 0, 1))}, 1, 1);
    check1(g, TS_DOMAIN_MODP, "3x2x2", NV(0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11));
}

Test(transpose, bad_perm)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3");
    node_fails(g, "Transpose", &x, 1, (ts_attr[]){ts_attr_ints("perm", I64S(0, 0))}, 1, 1, "not a permutation");
    node_fails(g, "Transpose", &x, 1, (ts_attr[]){ts_attr_ints("perm", I64S(0))}, 1, 1, "perm has 1 entries, expected 2");
    ts_graph_free(g);
}

/* ------------------------------------------------------------- Gather */

Test(gather, axis0_negative_indices)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3x2"), cst(g, "i", vals(TS_I64, "2x2", NV(0, -1, 1, 0)))};
    node(g, "Gather", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2x2x2", NV(0, 1, 4, 5, 2, 3, 0, 1));
}

Test(gather, axis1_int32_modp)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3x2"), cst(g, "i", vals(TS_I32, "1", NV(1)))};
    node(g, "Gather", ins, 2, (ts_attr[]){ts_attr_int("axis", 1)}, 1, 1);
    check1(g, TS_DOMAIN_MODP, "3x1", NV(1, 3, 5));
}

Test(gather, scalar_index)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3x2"), cst(g, "i", vals(TS_I64, "", NV(2)))};
    node(g, "Gather", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2", NV(4, 5));
}

Test(gather, out_of_range)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3x2"), cst(g, "i", vals(TS_I64, "1", NV(3)))};
    node_fails(g, "Gather", ins, 2, NULL, 0, 1, "index 3 is out of range for axis 0 of size 3");
    ts_graph_free(g);
    g = ts_graph_new("t", 13);
    int dyn[2] = {input(g, "x", TS_F32, "3x2"), input(g, "i", TS_I64, "1")};
    node(g, "Gather", dyn, 2, NULL, 0, 1);
    run_fails(g, TS_DOMAIN_F32, "index 5 is out of range for axis 0 of size 3"); /* run_fails feeds j + 5 */
}

/* ---------------------------------------------- Shape, ConstantOfShape */

Test(shape, start_end)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3x4");
    node(g, "Shape", &x, 1, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "3", NV(2, 3, 4));
    g = ts_graph_new("t", 15);
    x = input(g, "x", TS_F32, "2x3x4");
    node(g, "Shape", &x, 1, (ts_attr[]){ts_attr_int("start", 1)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "2", NV(3, 4));
    g = ts_graph_new("t", 15);
    x = input(g, "x", TS_F32, "2x3x4");
    node(g, "Shape", &x, 1, (ts_attr[]){ts_attr_int("end", -1)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "2", NV(2, 3));
}

Test(constant_of_shape, default_and_values)
{
    ts_graph *g = ts_graph_new("t", 13);
    int s = cints(g, "s", I64S(2, 3));
    node(g, "ConstantOfShape", &s, 1, NULL, 0, 1);
    cr_assert_eq(g->values[g->outputs[0]].dtype, TS_F32);
    check1(g, TS_DOMAIN_F32, "2x3", NV(0, 0, 0, 0, 0, 0));

    g = ts_graph_new("t", 13);
    s = cints(g, "s", I64S(2));
    ts_tensor *v = vals(TS_I64, "1", NV(7));
    node(g, "ConstantOfShape", &s, 1, (ts_attr[]){ts_attr_tensor("value", v)}, 1, 1);
    ts_tensor_unref(v);
    cr_assert_eq(g->values[g->outputs[0]].dtype, TS_I64);
    check1(g, TS_DOMAIN_MODP, "2", NV(7, 7));

    g = ts_graph_new("t", 13);
    s = cints(g, "s", I64S(1, 2));
    v = vals(TS_F32, "1", NV(1.5));
    node(g, "ConstantOfShape", &s, 1, (ts_attr[]){ts_attr_tensor("value", v)}, 1, 1);
    ts_tensor_unref(v);
    check1(g, TS_DOMAIN_F64, "1x2", NV(1.5, 1.5));
}

Test(constant_of_shape, bad_value)
{
    ts_graph *g = ts_graph_new("t", 13);
    int s = cints(g, "s", I64S(2));
    ts_tensor *v = vals(TS_F32, "2", NV(1, 2));
    node_fails(g, "ConstantOfShape", &s, 1, (ts_attr[]){ts_attr_tensor("value", v)}, 1, 1,
               "expected a tensor of one element");
    ts_tensor_unref(v);
    int dyn = input(g, "d", TS_I64, "2");
    node_fails(g, "ConstantOfShape", &dyn, 1, NULL, 0, 1, "must be a constant");
    ts_graph_free(g);
}

/* --------------------------------------------------------------- Cast */

Test(cast, float_to_int_and_bool)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = cst(g, "x", vals(TS_F32, "3", NV(-1.5, 0, 2.7)));
    int y = input(g, "y", TS_F32, "1"); /* an input so the graph has one; unused */
    (void)y;
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 7)}, 1, 1);
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 9)}, 1, 1);
    run(g, TS_DOMAIN_F32, run_outs);
    cr_assert_eq(run_outs[0]->dtype, TS_I64);
    cr_assert_eq(run_outs[1]->dtype, TS_BOOL);
    expect(run_outs[0], "3", NV(-1, 0, 2));
    expect(run_outs[1], "3", NV(1, 0, 1));
    ts_graph_free(g);
}

Test(cast, int_conversions)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = cst(g, "x", vals(TS_I64, "3", NV(300, -2, 5)));
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 1)}, 1, 1);
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 3)}, 1, 1);
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 2)}, 1, 1);
    run(g, TS_DOMAIN_F64, run_outs);
    expect(run_outs[0], "3", NV(300, -2, 5));
    expect(run_outs[1], "3", NV(44, -2, 5)); /* int8 wraps */
    expect(run_outs[2], "3", NV(44, 254, 5));
    ts_graph_free(g);
}

Test(cast, modp_domain)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "3");
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 11)}, 1, 1);
    check1(g, TS_DOMAIN_MODP, "3", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "3");
    node(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 7)}, 1, 1);
    run_fails(g, TS_DOMAIN_MODP, "no meaning in the modp domain");
    g = ts_graph_new("t", 13);
    x = input(g, "x", TS_F32, "3");
    node_fails(g, "Cast", &x, 1, (ts_attr[]){ts_attr_int("to", 14)}, 1, 1, "element type 14 is not supported");
    ts_graph_free(g);
}

/* --------------------------------------------------- Identity, Dropout */

Test(identity, copy_and_dropout_mask)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x2");
    node(g, "Identity", &x, 1, NULL, 0, 1);
    int ins[2] = {x, cfloats(g, "ratio", NV(0.3))};
    node(g, "Dropout", ins, 2, NULL, 0, 2);
    run(g, TS_DOMAIN_MODP, run_outs);
    expect(run_outs[0], "2x2", NV(0, 1, 2, 3));
    expect(run_outs[1], "2x2", NV(0, 1, 2, 3));
    cr_assert_eq(run_outs[2]->dtype, TS_BOOL);
    expect(run_outs[2], "2x2", NV(1, 1, 1, 1));
    ts_graph_free(g);
}

/* Training mode with a non-zero ratio draws random numbers: refused, never
 * run as an identity (a silent wrong result); ratio 0 is the identity. */
Test(identity, dropout_training_mode)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x2");
    int t1[3] = {x, cfloats(g, "r", NV(0.3)), cst(g, "on", vals(TS_BOOL, "", NV(1)))};
    node_fails(g, "Dropout", t1, 3, NULL, 0, 1, "training_mode is true with ratio 0.3");
    int t2[3] = {x, -1, cst(g, "on2", vals(TS_BOOL, "", NV(1)))};
    node_fails(g, "Dropout", t2, 3, NULL, 0, 1, "training_mode is true with ratio 0.5");
    int t3[3] = {x, cfloats(g, "zero", NV(0)), cst(g, "on3", vals(TS_BOOL, "", NV(1)))};
    node(g, "Dropout", t3, 3, NULL, 0, 2);
    run(g, TS_DOMAIN_F32, run_outs);
    expect(run_outs[0], "2x2", NV(0, 1, 2, 3));
    expect(run_outs[1], "2x2", NV(1, 1, 1, 1));
    ts_graph_free(g);

    /* training_mode given at run time: the kernel refuses when it is true */
    g = ts_graph_new("t", 13);
    int t4[3] = {input(g, "x", TS_F32, "2x2"), cfloats(g, "r", NV(0.25)), input(g, "mode", TS_BOOL, "")};
    node(g, "Dropout", t4, 3, NULL, 0, 1);
    run_fails(g, TS_DOMAIN_F32, "training_mode is true with ratio 0.25");
}

/* --------------------------------------- Size, Trilu, GatherElements */

Test(size, element_count)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3");
    node(g, "Size", &x, 1, NULL, 0, 1);
    run(g, TS_DOMAIN_MODP, run_outs);
    cr_assert_eq(run_outs[0]->dtype, TS_I64);
    expect(run_outs[0], "", NV(6));
    ts_graph_free(g);
}

Test(trilu, upper_lower_offsets)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = input(g, "x", TS_F32, "3x3");
    int up[2] = {x, cst(g, "k1", vals(TS_I64, "", NV(1)))};
    node(g, "Trilu", up, 2, NULL, 0, 1);
    node(g, "Trilu", &x, 1, (ts_attr[]){ts_attr_int("upper", 0)}, 1, 1);
    int lo[2] = {x, cst(g, "km1", vals(TS_I64, "", NV(-1)))};
    node(g, "Trilu", lo, 2, (ts_attr[]){ts_attr_int("upper", 0)}, 1, 1);
    run(g, TS_DOMAIN_MODP, run_outs);
    expect(run_outs[0], "3x3", NV(0, 1, 2, 0, 0, 5, 0, 0, 0));
    expect(run_outs[1], "3x3", NV(0, 0, 0, 3, 4, 0, 6, 7, 8));
    expect(run_outs[2], "3x3", NV(0, 0, 0, 3, 0, 0, 6, 7, 0));
    ts_graph_free(g);
    g = ts_graph_new("t", 14);
    int v = input(g, "v", TS_F32, "3");
    node_fails(g, "Trilu", &v, 1, NULL, 0, 1, "has rank 1, expected at least 2");
    ts_graph_free(g);
}

Test(gather_elements, both_axes_and_negative_indices)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x2"); /* iota: [[0,1],[2,3]] */
    int a1[2] = {x, cst(g, "i1", vals(TS_I64, "2x2", NV(0, 0, 1, 0)))};
    node(g, "GatherElements", a1, 2, (ts_attr[]){ts_attr_int("axis", 1)}, 1, 1);
    int a0[2] = {x, cst(g, "i0", vals(TS_I32, "1x2", NV(1, 0)))};
    node(g, "GatherElements", a0, 2, NULL, 0, 1);
    int an[2] = {x, cst(g, "in", vals(TS_I64, "1x2", NV(-1, 0)))};
    node(g, "GatherElements", an, 2, (ts_attr[]){ts_attr_int("axis", -1)}, 1, 1);
    run(g, TS_DOMAIN_MODP, run_outs);
    expect(run_outs[0], "2x2", NV(0, 0, 3, 2));
    expect(run_outs[1], "1x2", NV(2, 1));
    expect(run_outs[2], "1x2", NV(1, 0));
    ts_graph_free(g);
    g = ts_graph_new("t", 13);
    int b[2] = {input(g, "x", TS_F32, "2x2"), cst(g, "i", vals(TS_I64, "1x1", NV(2)))};
    node(g, "GatherElements", b, 2, NULL, 0, 1);
    run_fails(g, TS_DOMAIN_F32, "index 2 is out of range for axis 0 of size 2");
}

/* -------------------------------- DepthToSpace, SpaceToDepth, EyeLike */

Test(depth_space, modes_and_round_trip)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "1x8x1x1"); /* iota */
    node(g, "DepthToSpace", &x, 1, (ts_attr[]){ts_attr_int("blocksize", 2)}, 1, 1);
    node(g, "DepthToSpace", &x, 1, (ts_attr[]){ts_attr_int("blocksize", 2), ts_attr_string("mode", "CRD")}, 2, 1);
    run(g, TS_DOMAIN_MODP, run_outs);
    expect(run_outs[0], "1x2x2x2", NV(0, 2, 4, 6, 1, 3, 5, 7));
    expect(run_outs[1], "1x2x2x2", NV(0, 1, 2, 3, 4, 5, 6, 7));
    ts_graph_free(g);
    g = ts_graph_new("t", 13);
    int s = input(g, "s", TS_F32, "1x2x2x2");
    node(g, "SpaceToDepth", &s, 1, (ts_attr[]){ts_attr_int("blocksize", 2)}, 1, 1);
    run(g, TS_DOMAIN_F32, run_outs);
    expect(run_outs[0], "1x8x1x1", NV(0, 4, 1, 5, 2, 6, 3, 7));
    node_fails(g, "DepthToSpace", &s, 1, (ts_attr[]){ts_attr_int("blocksize", 2)}, 1, 1,
               "channels 2 are not a multiple of blocksize^2 = 4");
    ts_graph_free(g);
}

Test(eyelike, diagonal_offset_and_dtype)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "2x3");
    node(g, "EyeLike", &x, 1, (ts_attr[]){ts_attr_int("k", 1)}, 1, 1);
    node(g, "EyeLike", &x, 1, (ts_attr[]){ts_attr_int("dtype", 7), ts_attr_int("k", -1)}, 2, 1);
    run(g, TS_DOMAIN_F32, run_outs);
    expect(run_outs[0], "2x3", NV(0, 1, 0, 0, 0, 1));
    cr_assert_eq(run_outs[1]->dtype, TS_I64);
    expect(run_outs[1], "2x3", NV(0, 0, 0, 1, 0, 0));
    ts_graph_free(g);
}

/* ---------------------------------------------------------------- Pad */

Test(pad, attribute_constant_opset2)
{
    ts_graph *g = ts_graph_new("t", 2);
    int x = input(g, "x", TS_F32, "2x3");
    ts_attr a[] = {ts_attr_ints("pads", I64S(1, 0, 0, 2)), ts_attr_float("value", 9)};
    node(g, "Pad", &x, 1, a, 2, 1);
    check1(g, TS_DOMAIN_MODP, "3x5", NV(9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 3, 4, 5, 9, 9));
}

Test(pad, reflect_and_edge_inputs)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "p", I64S(0, 2, 0, 1))};
    node(g, "Pad", ins, 2, (ts_attr[]){ts_attr_string("mode", "reflect")}, 1, 1);
    check1(g, TS_DOMAIN_F32, "2x6", NV(2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4));
    g = ts_graph_new("t", 13);
    int e[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "p", I64S(0, 2, 0, 1))};
    node(g, "Pad", e, 2, (ts_attr[]){ts_attr_string("mode", "edge")}, 1, 1);
    check1(g, TS_DOMAIN_F64, "2x6", NV(0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5));
}

Test(pad, negative_crop_constant_value)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[3] = {input(g, "x", TS_F32, "2x3"), cints(g, "p", I64S(0, -1, 0, 1)), cfloats(g, "v", NV(7))};
    node(g, "Pad", ins, 3, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2x3", NV(1, 2, 7, 4, 5, 7));
}

Test(pad, axes_opset18)
{
    ts_graph *g = ts_graph_new("t", 18);
    int ins[4] = {input(g, "x", TS_F32, "2x3"), cints(g, "p", I64S(1, 1)), -1, cints(g, "a", I64S(-1))};
    node(g, "Pad", ins, 4, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "2x5", NV(0, 0, 1, 2, 0, 0, 3, 4, 5, 0));
}

Test(pad, errors)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x3"), cints(g, "p", I64S(0, 3, 0, 0))};
    node_fails(g, "Pad", ins, 2, (ts_attr[]){ts_attr_string("mode", "reflect")}, 1, 1,
               "reflect pads on axis 1 must be smaller than its size 3");
    node_fails(g, "Pad", ins, 2, (ts_attr[]){ts_attr_string("mode", "wrap")}, 1, 1, "'wrap' is not supported");
    ins[1] = cints(g, "q", I64S(0, 1));
    node_fails(g, "Pad", ins, 2, NULL, 0, 1, "2 pads given, expected 4");
    ins[1] = cints(g, "c", I64S(0, -2, 0, -2));
    node_fails(g, "Pad", ins, 2, NULL, 0, 1, "crop more than the 3 elements of axis 1");
    ts_graph_free(g);
}

/* ------------------------------------------------------------- Resize */

/* 1x1x2x2 [[0,1],[2,3]] up to 4x4 by scales (opset 13). */
static ts_graph *resize_up(const char *mode, const char *coord, const char *nearest)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[3] = {input(g, "x", TS_F32, "1x1x2x2"), -1, cfloats(g, "s", NV(1, 1, 2, 2))};
    ts_attr a[3] = {ts_attr_string("mode", mode), ts_attr_string("coordinate_transformation_mode", coord),
                    ts_attr_string("nearest_mode", nearest)};
    node(g, "Resize", ins, 3, a, 3, 1);
    return g;
}

#define UP_FLOOR NV(0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3)
#define UP_CEIL NV(0, 1, 1, 1, 2, 3, 3, 3, 2, 3, 3, 3, 2, 3, 3, 3)

Test(resize, nearest_coordinate_modes)
{
    check1(resize_up("nearest", "half_pixel", "round_prefer_floor"), TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
    check1(resize_up("nearest", "pytorch_half_pixel", "round_prefer_ceil"), TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
    check1(resize_up("nearest", "asymmetric", "floor"), TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
    check1(resize_up("nearest", "asymmetric", "round_prefer_floor"), TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
    check1(resize_up("nearest", "asymmetric", "round_prefer_ceil"), TS_DOMAIN_F32, "1x1x4x4", UP_CEIL);
    check1(resize_up("nearest", "align_corners", "round_prefer_floor"), TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
    check1(resize_up("nearest", "tf_half_pixel_for_nn", "round_prefer_floor"), TS_DOMAIN_F32, "1x1x4x4", UP_CEIL);
    check1(resize_up("nearest", "tf_half_pixel_for_nn", "ceil"), TS_DOMAIN_F32, "1x1x4x4",
           NV(3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3) /* 1,1,2,2 clamped to 1 on both axes */);
    /* mod-p: the scales are residues there, recovered as output/input */
    check1(resize_up("nearest", "half_pixel", "round_prefer_floor"), TS_DOMAIN_MODP, "1x1x4x4", UP_FLOOR);
}

Test(resize, linear_coordinate_modes)
{
    /* iota data is linear in (row, col), so n-linear interpolation gives
     * 2*r + c at the clamped source coordinates r, c */
    check1(resize_up("linear", "half_pixel", "floor"), TS_DOMAIN_F32, "1x1x4x4",
           NV(0, .25, .75, 1, .5, .75, 1.25, 1.5, 1.5, 1.75, 2.25, 2.5, 2, 2.25, 2.75, 3));
    check1(resize_up("linear", "pytorch_half_pixel", "floor"), TS_DOMAIN_F64, "1x1x4x4",
           NV(0, .25, .75, 1, .5, .75, 1.25, 1.5, 1.5, 1.75, 2.25, 2.5, 2, 2.25, 2.75, 3));
    check1(resize_up("linear", "asymmetric", "floor"), TS_DOMAIN_F32, "1x1x4x4",
           NV(0, .5, 1, 1, 1, 1.5, 2, 2, 2, 2.5, 3, 3, 2, 2.5, 3, 3));
    double t = 1.0 / 3, u = 2.0 / 3;
    check1(resize_up("linear", "align_corners", "floor"), TS_DOMAIN_F32, "1x1x4x4",
           NV(0, t, u, 1, 2 * t, 3 * t, 4 * t, 5 * t, 2 * u, 2 * u + t, 2 * u + u, 2 * u + 1, 2, 2 + t, 2 + u, 3));
}

Test(resize, linear_refused_in_modp)
{
    run_fails(resize_up("linear", "half_pixel", "floor"), TS_DOMAIN_MODP, "linear interpolation has no kernel");
}

/* Cubic, A = -0.75, 1x4 iota up by 2 (asymmetric): at t = 0.5 the taps
 * weigh -0.09375, 0.59375, 0.59375, -0.09375; indices clamp to the edge
 * (o = 1: taps 0, 0, 1, 2) unless exclude_outside renormalizes without the
 * tap at -1 (0.40625 / 1.09375). */
static ts_graph *resize_cubic(int exclude)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[3] = {input(g, "x", TS_F32, "1x4"), -1, cfloats(g, "s", NV(1, 2))};
    ts_attr a[3] = {ts_attr_string("mode", "cubic"), ts_attr_string("coordinate_transformation_mode", "asymmetric"),
                    ts_attr_int("exclude_outside", exclude)};
    node(g, "Resize", ins, 3, a, 3, 1);
    return g;
}

Test(resize, cubic_edge_and_exclude_outside)
{
    check1(resize_cubic(0), TS_DOMAIN_F32, "1x8", NV(0, 0.40625, 1, 1.5, 2, 2.59375, 3, 3.09375));
    ts_tensor *out[1];
    ts_graph *g = resize_cubic(1);
    run(g, TS_DOMAIN_F64, out);
    cr_assert_float_eq(ts_tensor_get_f64(out[0], 1), 0.40625 / 1.09375, 1e-12);
    ts_tensor_unref(out[0]);
    ts_graph_free(g);
    run_fails(resize_cubic(0), TS_DOMAIN_MODP, "cubic interpolation has no kernel");
}

/* 1x1x4x4 iota (4r + c) down to 2x2 by sizes (opset 13: roi and scales absent). */
static ts_graph *resize_down(const char *mode, const char *nearest)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[4] = {input(g, "x", TS_F32, "1x1x4x4"), -1, -1, cints(g, "sz", I64S(1, 1, 2, 2))};
    ts_attr a[2] = {ts_attr_string("mode", mode), ts_attr_string("nearest_mode", nearest)};
    node(g, "Resize", ins, 4, a, 2, 1);
    return g;
}

Test(resize, downscale)
{
    /* half_pixel: source coordinate 2o + 0.5 -> 0.5 and 2.5 */
    check1(resize_down("linear", "floor"), TS_DOMAIN_F32, "1x1x2x2", NV(2.5, 4.5, 10.5, 12.5));
    check1(resize_down("nearest", "round_prefer_floor"), TS_DOMAIN_MODP, "1x1x2x2", NV(0, 2, 8, 10));
    check1(resize_down("nearest", "round_prefer_ceil"), TS_DOMAIN_F32, "1x1x2x2", NV(5, 7, 13, 15));
}

Test(resize, opset10_and_axes_opset18)
{
    ts_graph *g = ts_graph_new("t", 10);
    int ins[2] = {input(g, "x", TS_F32, "1x1x4x4"), cfloats(g, "s", NV(1, 1, 0.5, 0.5))};
    node(g, "Resize", ins, 2, NULL, 0, 1); /* asymmetric, ceil when downscaling: 0, 2 */
    check1(g, TS_DOMAIN_F32, "1x1x2x2", NV(0, 2, 8, 10));

    g = ts_graph_new("t", 18);
    int j[4] = {input(g, "x", TS_F32, "1x1x2x2"), -1, -1, cints(g, "sz", I64S(4, 6))};
    ts_attr a[3] = {ts_attr_ints("axes", I64S(2, 3)), ts_attr_string("keep_aspect_ratio_policy", "not_larger"),
                    ts_attr_string("coordinate_transformation_mode", "asymmetric")};
    node(g, "Resize", j, 4, a, 3, 1); /* one scale, min(4/2, 6/2) = 2: 4x4 */
    check1(g, TS_DOMAIN_F32, "1x1x4x4", UP_FLOOR);
}

/* tf_crop_and_resize of the 1x1x2x4 iota (4r + c) into sizes: the box
 * [0, 0.25] .. [1, 1.25] of rows x columns gives column coordinates
 * 0.25*3 + o*1*3/2 = 0.75, 2.25, 3.75 (past the last column 3: the
 * extrapolation value 10) and rows 0, 1; one output row samples the box's
 * middle, 0.5. */
static ts_graph *resize_crop(const char *mode, int64_t rows)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[4] = {input(g, "x", TS_F32, "1x1x2x4"), cfloats(g, "roi", NV(0, 0, 0, 0.25, 1, 1, 1, 1.25)), -1,
                  cints(g, "sz", I64S(1, 1, rows, 3))};
    ts_attr a[3] = {ts_attr_string("mode", mode), ts_attr_string("coordinate_transformation_mode", "tf_crop_and_resize"),
                    ts_attr_float("extrapolation_value", 10)};
    node(g, "Resize", ins, 4, a, 3, 1);
    return g;
}

Test(resize, tf_crop_and_resize)
{
    check1(resize_crop("linear", 2), TS_DOMAIN_F32, "1x1x2x3", NV(0.75, 2.25, 10, 4.75, 6.25, 10));
    check1(resize_crop("linear", 1), TS_DOMAIN_F64, "1x1x1x3", NV(2.75, 4.25, 10));
    check1(resize_crop("nearest", 2), TS_DOMAIN_F32, "1x1x2x3", NV(1, 2, 10, 5, 6, 10));
    /* cubic (A = -0.75) at 0.75: taps at columns -1, 0, 1, 2 weigh -0.03515625, 0.26171875,
     * 0.87890625, -0.10546875, the first clamped to column 0: 0.87890625 - 2 * 0.10546875;
     * at 2.25 the same weights reversed over columns 1, 2, 3, 3 (the last clamped) */
    check1(resize_crop("cubic", 2), TS_DOMAIN_F64, "1x1x2x3",
           NV(0.66796875, 2.33203125, 10, 4.66796875, 6.33203125, 10));
    run_fails(resize_crop("nearest", 2), TS_DOMAIN_MODP, "tf_crop_and_resize has no kernel in the modp domain");
}

Test(resize, unsupported)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[3] = {input(g, "x", TS_F32, "1x1x2x2"), -1, cfloats(g, "s", NV(1, 1, 2, 2))};
    node_fails(g, "Resize", ins, 3, (ts_attr[]){ts_attr_int("antialias", 1), ts_attr_string("mode", "cubic")}, 2, 1,
               "antialias=1 is not supported");
    node_fails(g, "Resize", ins, 3, (ts_attr[]){ts_attr_string("coordinate_transformation_mode", "tf_crop_and_resize")},
               1, 1, "tf_crop_and_resize needs input 1 (roi) as 8 floats");
    int both[4] = {ins[0], -1, ins[2], cints(g, "sz", I64S(1, 1, 4, 4))};
    node_fails(g, "Resize", both, 4, NULL, 0, 1, "exactly one of scales and sizes");
    int three[3] = {ins[0], -1, cfloats(g, "s3", NV(1, 2, 2))};
    node_fails(g, "Resize", three, 3, NULL, 0, 1, "3 scales given, expected 4");
    ts_graph_free(g);
}

Test(upsample, opset9_and_opset7)
{
    ts_graph *g = ts_graph_new("t", 9);
    int ins[2] = {input(g, "x", TS_F32, "1x1x2x2"), cfloats(g, "s", NV(1, 1, 2, 2))};
    node_fails(g, "Upsample", ins, 2, (ts_attr[]){ts_attr_string("mode", "cubic")}, 1, 1,
               "'cubic' needs Resize from opset 11");
    node(g, "Upsample", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "1x1x4x4", UP_FLOOR);

    g = ts_graph_new("t", 9);
    int j[2] = {input(g, "x", TS_F32, "1x1x2x2"), cfloats(g, "s", NV(1, 1, 2, 2))};
    node(g, "Upsample", j, 2, (ts_attr[]){ts_attr_string("mode", "linear")}, 1, 1);
    check1(g, TS_DOMAIN_F32, "1x1x4x4", NV(0, .5, 1, 1, 1, 1.5, 2, 2, 2, 2.5, 3, 3, 2, 2.5, 3, 3));

    g = ts_graph_new("t", 7);
    int x = input(g, "x", TS_F32, "1x1x2x2");
    node(g, "Upsample", &x, 1, (ts_attr[]){ts_attr_floats("scales", (const float[]){1, 1, 1, 2}, 4)}, 1, 1);
    check1(g, TS_DOMAIN_F32, "1x1x2x4", NV(0, 0, 1, 1, 2, 2, 3, 3));
}

/* ------------------------------------------------------ Expand, Tile */

Test(expand, bidirectional)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "3x1"), cints(g, "s", I64S(2, 1, 2))};
    node(g, "Expand", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_MODP, "2x3x2", NV(0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2));
    g = ts_graph_new("t", 13);
    int j[2] = {input(g, "x", TS_F32, "3x1"), cints(g, "s", I64S(1, 1))};
    node(g, "Expand", j, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "3x1", NV(0, 1, 2));
    g = ts_graph_new("t", 13);
    int k[2] = {input(g, "x", TS_F32, "3x1"), cints(g, "s", I64S(2, 2))};
    node_fails(g, "Expand", k, 2, NULL, 0, 1, "cannot expand 3x1 to 2x2");
    ts_graph_free(g);
}

Test(tile, repeats)
{
    ts_graph *g = ts_graph_new("t", 13);
    int ins[2] = {input(g, "x", TS_F32, "2x2"), cints(g, "r", I64S(1, 2))};
    node(g, "Tile", ins, 2, NULL, 0, 1);
    check1(g, TS_DOMAIN_F32, "2x4", NV(0, 1, 0, 1, 2, 3, 2, 3));
    g = ts_graph_new("t", 13);
    int j[2] = {input(g, "x", TS_F32, "2x2"), cints(g, "r", I64S(2))};
    node_fails(g, "Tile", j, 2, NULL, 0, 1, "1 repeats given, expected 2");
    ts_graph_free(g);
}

/* ------------------------------------------------- descriptors, export */

Test(descriptors, flags_and_emit_roundtrip)
{
    /* emit -> parse gives the same attribute bytes (the export must
     * re-import to the same structure) */
    ts_graph *g = ts_graph_new("t", 13);
    int x = input(g, "x", TS_F32, "1x1x2x2");
    int ins[3] = {x, -1, cfloats(g, "s", NV(1, 1, 2, 2))};
    ts_attr a[2] = {ts_attr_string("mode", "linear"), ts_attr_string("coordinate_transformation_mode", "align_corners")};
    node(g, "Resize", ins, 3, a, 2, 1);
    int c = cints(g, "cs", I64S(2));
    ts_tensor *v = vals(TS_I32, "1", NV(-4));
    node(g, "ConstantOfShape", &c, 1, (ts_attr[]){ts_attr_tensor("value", v)}, 1, 1);
    ts_tensor_unref(v);
    node(g, "Transpose", &x, 1, (ts_attr[]){ts_attr_ints("perm", I64S(3, 2, 1, 0))}, 1, 1);
    for (int i = 0; i < 3; i++) {
        const ts_op_desc *op = g->nodes[i].op;
        unsigned char before[2048];
        cr_assert_leq(op->attr_size, sizeof before);
        memcpy(before, g->nodes[i].attrs, op->attr_size);
        ts_attr em[16];
        ts_error e = {0};
        int k = op->emit(before, em, 16);
        cr_assert_gt(k, 0);
        int out[1];
        cr_assert_geq(ts_graph_add_node(g, op->name, NULL, g->nodes[i].inputs, g->nodes[i].ninputs, em, k, 1, NULL, out,
                                        &e),
                      0, "%s", e.msg);
        cr_assert_eq(memcmp(before, g->nodes[g->nnodes - 1].attrs, op->attr_size), 0, "%s attributes differ after emit",
                     op->name);
    }
    cr_assert(ts_op_find("Slice")->flags & TS_OP_MOVEMENT);
    cr_assert(ts_op_find("Shape")->flags & TS_OP_SHAPE);
    cr_assert_eq(ts_op_find("Transpose")->linear_inputs & 1, 1);
    cr_assert_eq(ts_op_find("Constant"), NULL);
    ts_graph_free(g);
}
