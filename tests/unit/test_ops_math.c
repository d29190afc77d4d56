/* Math family operators (binary.c, unary.c, activation.c, softmax.c,
 * reduce.c, where.c) against hand-computed values, in the float and mod-p
 * domains, plus the error messages of bad shapes, types and axes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tsopt.h"
#include "ops/op.h" /* descriptor flags */

#define P 2147483647.0

static ts_graph *G;
static ts_error E;
static ts_tensor *OUT[16];
static int NOUT;

static void done(void)
{
    for (int i = 0; i < NOUT; i++) ts_tensor_unref(OUT[i]);
    NOUT = 0;
    ts_graph_free(G);
    G = NULL;
}

TestSuite(math, .fini = done);

static void graph(int opset)
{
    G = ts_graph_new("t", opset);
    memset(&E, 0, sizeof E);
}

static ts_shape shp(const char *dims)
{
    ts_shape s = {0};
    if (*dims) cr_assert_eq(ts_shape_parse(dims, &s, &E), TS_OK, "%s", E.msg);
    return s;
}

static int cst(ts_dtype dt, const char *dims, const double *v)
{
    char name[32];
    ts_shape s = shp(dims);
    ts_tensor *t = ts_tensor_new(dt, &s, &E);
    cr_assert(t, "%s", E.msg);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, v[i]);
    snprintf(name, sizeof name, "c%d", G->nvalues);
    int id = ts_graph_add_constant(G, name, t, &E);
    ts_tensor_unref(t);
    cr_assert(id >= 0, "%s", E.msg);
    return id;
}
#define F32(dims, ...) cst(TS_F32, dims, (const double[]){__VA_ARGS__})
#define I64(dims, ...) cst(TS_I64, dims, (const double[]){__VA_ARGS__})
#define BOOL(dims, ...) cst(TS_BOOL, dims, (const double[]){__VA_ARGS__})

#define INS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define ATTRS(...) (const ts_attr[]){__VA_ARGS__}, (int)(sizeof((ts_attr[]){__VA_ARGS__}) / sizeof(ts_attr))
#define NOATTR NULL, 0

/* Adds a node and makes its output a graph output; returns the output's index. */
static int node(const char *op, const int *ins, int nin, const ts_attr *at, int nat)
{
    int out;
    cr_assert(ts_graph_add_node(G, op, NULL, ins, nin, at, nat, 1, NULL, &out, &E) >= 0, "%s", E.msg);
    cr_assert_eq(ts_graph_add_output(G, out, &E), TS_OK);
    return G->noutputs - 1;
}

/* Expects the node to be rejected; returns the message. */
static const char *node_err(const char *op, const int *ins, int nin, const ts_attr *at, int nat)
{
    int out;
    memset(&E, 0, sizeof E);
    cr_assert(ts_graph_add_node(G, op, NULL, ins, nin, at, nat, 1, NULL, &out, &E) < 0, "%s accepted", op);
    cr_assert_neq(E.code, TS_OK);
    return E.msg;
}

static void run(ts_domain_kind d)
{
    cr_assert_eq(ts_graph_validate(G, &E), TS_OK, "%s", E.msg);
    cr_assert_eq(ts_graph_run_reference(G, d, NULL, OUT, &E), TS_OK, "%s", E.msg);
    NOUT = G->noutputs;
}

static void expect(int o, ts_dtype dt, const char *dims, const double *v)
{
    const ts_tensor *t = OUT[o];
    ts_shape s = shp(dims);
    char a[160], b[160];
    cr_assert_eq(t->dtype, dt, "output %d: dtype %s, expected %s", o, ts_dtype_name(t->dtype), ts_dtype_name(dt));
    cr_assert(ts_shape_eq(&t->shape, &s), "output %d: shape %s, expected %s", o, ts_shape_str(&t->shape, a, sizeof a),
              ts_shape_str(&s, b, sizeof b));
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) {
        double got = dt == TS_MODP ? (double)ts_tensor_get_i64(t, i) : ts_tensor_get_f64(t, i);
        double tol = ts_dtype_is_float(dt) ? 1e-6 + 1e-6 * fabs(v[i]) : 0;
        cr_assert(fabs(got - v[i]) <= tol || (isnan(v[i]) && isnan(got)), "output %d [%lld]: %.9g, expected %.9g",
                  o, (long long)i, got, v[i]);
    }
}
#define EXPECT(o, dt, dims, ...) expect(o, dt, dims, (const double[]){__VA_ARGS__})

/* ------------------------------------------------------------- binary */

Test(math, add_sub_mul_broadcast)
{
    graph(17);
    int a = F32("2x3", 1, 2, 3, 4, 5, 6), row = F32("3", 10, 20, 30), s = F32("", 2);
    int col = F32("2x1", 1, 2), r3 = F32("1x3", 1, 2, 3), deep = F32("2x1x1", 1, -1);
    node("Add", INS(a, row), NOATTR);
    node("Sub", INS(a, s), NOATTR);  /* scalar operand */
    node("Sub", INS(s, a), NOATTR);  /* scalar first */
    node("Mul", INS(col, r3), NOATTR); /* both sides broadcast */
    node("Mul", INS(deep, a), NOATTR); /* rank 3 with rank 2 */
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x3", 11, 22, 33, 14, 25, 36);
    EXPECT(1, TS_F32, "2x3", -1, 0, 1, 2, 3, 4);
    EXPECT(2, TS_F32, "2x3", 1, 0, -1, -2, -3, -4);
    EXPECT(3, TS_F32, "2x3", 1, 2, 3, 2, 4, 6);
    EXPECT(4, TS_F32, "2x2x3", 1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6);
}

Test(math, add_f64_domain)
{
    graph(17);
    node("Add", INS(F32("2", 0.5, 1e-9), F32("", 1)), NOATTR);
    run(TS_DOMAIN_F64);
    EXPECT(0, TS_F64, "2", 1.5, 1 + (double)1e-9f);
}

Test(math, div_pow)
{
    graph(17);
    int a = F32("4", 1, 2, 3, 4);
    node("Div", INS(a, F32("", 2)), NOATTR);
    node("Div", INS(F32("", 1), a), NOATTR);
    node("Pow", INS(a, F32("1", 2)), NOATTR);
    node("Pow", INS(F32("2", 2, 3), I64("", 3)), NOATTR); /* exponent of another type (opset 12+) */
    node("Pow", INS(F32("2", 4, 9), F32("", 0.5)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "4", 0.5, 1, 1.5, 2);
    EXPECT(1, TS_F32, "4", 1, 0.5, 1.0 / 3, 0.25);
    EXPECT(2, TS_F32, "4", 1, 4, 9, 16);
    EXPECT(3, TS_F32, "2", 8, 27);
    EXPECT(4, TS_F32, "2", 2, 3);
}

Test(math, max_min_variadic)
{
    graph(17);
    int a = F32("2x2", 1, 5, 3, -1), b = F32("2", 2, 0), c = F32("1", 1.5);
    node("Max", INS(a, b, c), NOATTR);
    node("Min", INS(a, b, c), NOATTR);
    node("Max", INS(b), NOATTR);         /* one input: a copy */
    node("Min", INS(c, a), NOATTR);      /* first operand is the one broadcast */
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x2", 2, 5, 3, 1.5);
    EXPECT(1, TS_F32, "2x2", 1, 0, 1.5, -1);
    EXPECT(2, TS_F32, "2", 2, 0);
    EXPECT(3, TS_F32, "2x2", 1, 1.5, 1.5, -1);
}

Test(math, int64_paths)
{
    graph(17);
    int a = I64("3", 7, -7, 6), b = I64("", 2), c = I64("3", 1, 9, 6);
    node("Add", INS(a, b), NOATTR);
    node("Sub", INS(a, c), NOATTR);
    node("Mul", INS(a, b), NOATTR);
    node("Div", INS(a, b), NOATTR); /* truncates toward zero */
    node("Max", INS(a, c, b), NOATTR);
    node("Min", INS(a, c), NOATTR);
    node("Equal", INS(a, c), NOATTR);
    node("Where", INS(BOOL("3", 1, 0, 1), a, c), NOATTR);
    node("Pow", INS(c, b), NOATTR);
    node("Neg", INS(a), NOATTR);
    node("Abs", INS(a), NOATTR);
    node("Relu", INS(a), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_I64, "3", 9, -5, 8);
    EXPECT(1, TS_I64, "3", 6, -16, 0);
    EXPECT(2, TS_I64, "3", 14, -14, 12);
    EXPECT(3, TS_I64, "3", 3, -3, 3);
    EXPECT(4, TS_I64, "3", 7, 9, 6);
    EXPECT(5, TS_I64, "3", 1, -7, 6);
    EXPECT(6, TS_BOOL, "3", 0, 0, 1);
    EXPECT(7, TS_I64, "3", 7, 9, 6);
    EXPECT(8, TS_I64, "3", 1, 81, 36);
    EXPECT(9, TS_I64, "3", -7, 7, -6);
    EXPECT(10, TS_I64, "3", 7, 7, 6);
    EXPECT(11, TS_I64, "3", 7, 0, 6);
}

Test(math, int64_division_by_zero_fails)
{
    graph(17);
    node("Div", INS(I64("2", 4, 5), I64("2", 2, 0)), NOATTR);
    cr_assert_neq(ts_graph_run_reference(G, TS_DOMAIN_F32, NULL, OUT, &E), TS_OK);
    cr_assert(strstr(E.msg, "integer division by zero"), "%s", E.msg);
    cr_assert(strstr(E.msg, "(Div)"), "%s", E.msg);
}

Test(math, equal)
{
    graph(17);
    node("Equal", INS(I64("3", 1, 2, 3), I64("", 2)), NOATTR);
    node("Equal", INS(F32("2x1", 1, 2), F32("2", 1, 3)), NOATTR);
    node("Equal", INS(BOOL("2", 1, 0), BOOL("2", 1, 1)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_BOOL, "3", 0, 1, 0);
    EXPECT(1, TS_BOOL, "2x2", 1, 0, 0, 0);
    EXPECT(2, TS_BOOL, "2", 1, 0);
}

Test(math, where_three_way_broadcast)
{
    graph(17);
    int cond = BOOL("2x1", 1, 0), x = F32("3", 1, 2, 3), y = F32("", -1);
    node("Where", INS(cond, x, y), NOATTR);
    node("Where", INS(BOOL("", 0), x, y), NOATTR);
    node("Not", INS(cond), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x3", 1, 2, 3, -1, -1, -1);
    EXPECT(1, TS_F32, "3", -1, -1, -1);
    EXPECT(2, TS_BOOL, "2x1", 0, 1);
}

/* -------------------------------------------------------------- unary */

Test(math, unary_values)
{
    graph(17);
    node("Relu", INS(F32("3", -1, 0, 2)), NOATTR);
    node("Neg", INS(F32("2", -1, 2)), NOATTR);
    node("Abs", INS(F32("2", -1.5, 2)), NOATTR);
    node("Sqrt", INS(F32("2", 4, 9)), NOATTR);
    node("Exp", INS(F32("2", 0, 1)), NOATTR);
    node("Log", INS(F32("2", 1, 0.5)), NOATTR);
    node("Reciprocal", INS(F32("2", 2, -4)), NOATTR);
    node("Erf", INS(F32("3", 0, 1, -0.5)), NOATTR);
    node("Sigmoid", INS(F32("3", 0, 2, -2)), NOATTR);
    node("Tanh", INS(F32("2", 0, 1)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "3", 0, 0, 2);
    EXPECT(1, TS_F32, "2", 1, -2);
    EXPECT(2, TS_F32, "2", 1.5, 2);
    EXPECT(3, TS_F32, "2", 2, 3);
    EXPECT(4, TS_F32, "2", 1, 2.718281828);
    EXPECT(5, TS_F32, "2", 0, -0.693147181);
    EXPECT(6, TS_F32, "2", 0.5, -0.25);
    EXPECT(7, TS_F32, "3", 0, 0.842700793, -0.520499878);
    EXPECT(8, TS_F32, "3", 0.5, 0.880797078, 0.119202922);
    EXPECT(9, TS_F32, "2", 0, 0.761594156);
}

Test(math, float_only_unary_rejects_int)
{
    graph(17);
    const char *m = node_err("Sqrt", INS(I64("1", 4)), NOATTR);
    cr_assert(strstr(m, "expected a float type"), "%s", m);
    m = node_err("Not", INS(F32("1", 1)), NOATTR);
    cr_assert(strstr(m, "expected bool"), "%s", m);
}

/* -------------------------------------------------------- activations */

Test(math, leaky_hardsigmoid_hardswish)
{
    graph(17);
    node("LeakyRelu", INS(F32("2", -2, 3)), ATTRS(ts_attr_float("alpha", 0.1)));
    node("LeakyRelu", INS(F32("1", -1)), NOATTR); /* alpha defaults to 0.01 */
    node("HardSigmoid", INS(F32("4", 0, 5, -5, 1)), NOATTR);
    node("HardSigmoid", INS(F32("2", 1, -1)), ATTRS(ts_attr_float("alpha", 0.5), ts_attr_float("beta", 0.25)));
    node("HardSwish", INS(F32("4", -4, 0, 1, 4)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", -0.2, 3);
    EXPECT(1, TS_F32, "1", -0.01);
    EXPECT(2, TS_F32, "4", 0.5, 1, 0, 0.7);
    EXPECT(3, TS_F32, "2", 0.75, 0);
    EXPECT(4, TS_F32, "4", 0, 0, 2.0 / 3, 4);
}

/* Gelu (opset 20), both forms; values from 0.5 x (1 + erf(x / sqrt 2))
 * and 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in Python's math. */
Test(math, gelu_erf_and_tanh)
{
    graph(20);
    int x = F32("5", -3, -1, 0, 0.5, 2);
    node("Gelu", INS(x), NOATTR);
    node("Gelu", INS(x), ATTRS(ts_attr_string("approximate", "none")));
    node("Gelu", INS(x), ATTRS(ts_attr_string("approximate", "tanh")));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "5", -0.0040496941, -0.15865525, 0, 0.34573123, 1.9544997);
    EXPECT(1, TS_F32, "5", -0.0040496941, -0.15865525, 0, 0.34573123, 1.9544997);
    EXPECT(2, TS_F32, "5", -0.0036373921, -0.15880801, 0, 0.34571401, 1.9545977);
    const char *m = node_err("Gelu", INS(x), ATTRS(ts_attr_string("approximate", "fast")));
    cr_assert(strstr(m, "approximate") && strstr(m, "'fast'"), "%s", m);
    m = node_err("Gelu", INS(I64("1", 4)), NOATTR);
    cr_assert(strstr(m, "expected a float type"), "%s", m);
}

Test(math, prelu_per_channel)
{
    graph(17);
    int x = F32("1x2x2", -1, 2, -3, 4);
    node("PRelu", INS(x, F32("2x1", 0.5, 0.25)), NOATTR);
    node("PRelu", INS(x, F32("", 2)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "1x2x2", -0.5, 2, -0.75, 4);
    EXPECT(1, TS_F32, "1x2x2", -2, 2, -6, 4);
}

Test(math, prelu_slope_must_broadcast_to_input)
{
    graph(17);
    const char *m = node_err("PRelu", INS(F32("1x2x2", 1, 2, 3, 4), F32("3", 1, 1, 1)), NOATTR);
    cr_assert(strstr(m, "slope shape 3 does not broadcast to input shape 1x2x2"), "%s", m);
    /* broadcasting the other way (slope larger than x) is not allowed either */
    m = node_err("PRelu", INS(F32("2", 1, 2), F32("2x2", 1, 1, 1, 1)), NOATTR);
    cr_assert(strstr(m, "does not broadcast"), "%s", m);
}

Test(math, clip_attribute_form)
{
    graph(6);
    int x = F32("3", -2, 0.5, 3);
    node("Clip", INS(x), ATTRS(ts_attr_float("min", -1), ts_attr_float("max", 1)));
    node("Clip", INS(x), ATTRS(ts_attr_float("max", 0))); /* min absent: no lower bound */
    node("Clip", INS(x), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "3", -1, 0.5, 1);
    EXPECT(1, TS_F32, "3", -2, 0, 0);
    EXPECT(2, TS_F32, "3", -2, 0.5, 3);
}

Test(math, clip_attribute_form_opset10)
{
    graph(10);
    node("Clip", INS(F32("3", -2, 0.5, 3)), ATTRS(ts_attr_float("min", 0)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "3", 0, 0.5, 3);
    const char *m = node_err("Clip", INS(F32("1", 1), F32("", 0)), NOATTR);
    cr_assert(strstr(m, "before opset 11"), "%s", m);
}

Test(math, clip_input_form)
{
    graph(12);
    int x = F32("3", -2, 0.5, 3);
    node("Clip", INS(x, -1, F32("", 1)), NOATTR); /* min absent */
    node("Clip", INS(x, F32("", 0)), NOATTR);      /* max absent */
    node("Clip", INS(x, F32("", -1), F32("", 2)), NOATTR);
    node("Clip", INS(I64("3", -5, 1, 9), I64("", 0), I64("", 4)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "3", -2, 0.5, 1);
    EXPECT(1, TS_F32, "3", 0, 0.5, 3);
    EXPECT(2, TS_F32, "3", -1, 0.5, 2);
    EXPECT(3, TS_I64, "3", 0, 1, 4);
    /* the attribute form is gone from opset 11: refused rather than ignored */
    const char *m = node_err("Clip", INS(x), ATTRS(ts_attr_float("min", 0)));
    cr_assert(strstr(m, "attribute 'min': not allowed from opset 11"), "%s", m);
}

Test(math, clip_bounds_must_be_scalars)
{
    graph(13);
    int x = F32("3", -2, 0.5, 3);
    const char *m = node_err("Clip", INS(x, F32("2", 0, 1)), NOATTR);
    cr_assert(strstr(m, "min ('c1') must be a scalar, got shape 2"), "%s", m);
    m = node_err("Clip", INS(x, -1, F32("2x1", 0, 1)), NOATTR);
    cr_assert(strstr(m, "max ('c2') must be a scalar"), "%s", m);
    m = node_err("Clip", INS(x, I64("", 0)), NOATTR);
    cr_assert(strstr(m, "has type int64, expected float32"), "%s", m);
}

/* ------------------------------------------------------------ softmax */

/* x[b][c][w] = log(c+1) on 2x3x4: exponentials 1, 2, 3 along axis 1. */
static int softmax_input(void)
{
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = log((double)(i / 4 % 3) + 1);
    return cst(TS_F32, "2x3x4", v);
}

static void expect_by_c(int o, const double by_c[3])
{
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = by_c[i / 4 % 3];
    expect(o, TS_F32, "2x3x4", v);
}

Test(math, softmax_opset11_flattens_trailing_block)
{
    graph(11);
    int x = softmax_input();
    node("Softmax", INS(x), ATTRS(ts_attr_int("axis", 1)));
    node("Softmax", INS(x), NOATTR); /* default axis 1 before opset 13 */
    node("Softmax", INS(x), ATTRS(ts_attr_int("axis", -1)));
    node("LogSoftmax", INS(x), ATTRS(ts_attr_int("axis", 1)));
    run(TS_DOMAIN_F32);
    /* one softmax over the 12 elements of each batch: sum of exp = 4*(1+2+3) */
    expect_by_c(0, (const double[]){1.0 / 24, 2.0 / 24, 3.0 / 24});
    expect_by_c(1, (const double[]){1.0 / 24, 2.0 / 24, 3.0 / 24});
    expect_by_c(2, (const double[]){0.25, 0.25, 0.25}); /* last axis: the rows are constant */
    expect_by_c(3, (const double[]){log(1.0 / 24), log(2.0 / 24), log(3.0 / 24)});
}

Test(math, softmax_opset13_single_axis)
{
    graph(13);
    int x = softmax_input();
    node("Softmax", INS(x), ATTRS(ts_attr_int("axis", 1)));
    node("Softmax", INS(x), NOATTR); /* default axis -1 from opset 13 */
    node("Softmax", INS(x), ATTRS(ts_attr_int("axis", -2)));
    node("LogSoftmax", INS(x), ATTRS(ts_attr_int("axis", 1)));
    node("Softmax", INS(x), ATTRS(ts_attr_int("axis", 0))); /* batches are equal */
    run(TS_DOMAIN_F32);
    expect_by_c(0, (const double[]){1.0 / 6, 2.0 / 6, 3.0 / 6});
    expect_by_c(1, (const double[]){0.25, 0.25, 0.25});
    expect_by_c(2, (const double[]){1.0 / 6, 2.0 / 6, 3.0 / 6});
    expect_by_c(3, (const double[]){log(1.0 / 6), log(2.0 / 6), log(3.0 / 6)});
    expect_by_c(4, (const double[]){0.5, 0.5, 0.5});
}

Test(math, softmax_axis_out_of_range)
{
    graph(13);
    int x = softmax_input();
    const char *m = node_err("Softmax", INS(x), ATTRS(ts_attr_int("axis", 3)));
    cr_assert(strstr(m, "axis 3 is out of range for rank 3 (expected -3 to 2)"), "%s", m);
    m = node_err("LogSoftmax", INS(x), ATTRS(ts_attr_int("axis", -4)));
    cr_assert(strstr(m, "axis -4 is out of range"), "%s", m);
}

/* --------------------------------------------------------- reductions */

#define X23 F32("2x3", 1, 2, 3, 4, 5, 6)

Test(math, reduce_attribute_axes)
{
    graph(11);
    int x = X23;
    node("ReduceSum", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1)));
    node("ReduceSum", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){-2}, 1), ts_attr_int("keepdims", 0)));
    node("ReduceSum", INS(x), NOATTR); /* all axes */
    node("ReduceSum", INS(x), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceMean", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1)));
    node("ReduceMean", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){0, 1}, 2), ts_attr_int("keepdims", 0)));
    node("ReduceMax", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){0}, 1)));
    node("ReduceMax", INS(F32("2x2", -3, -1, -4, -2)), ATTRS(ts_attr_int("keepdims", 0)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x1", 6, 15);
    EXPECT(1, TS_F32, "3", 5, 7, 9);
    EXPECT(2, TS_F32, "1x1", 21);
    EXPECT(3, TS_F32, "", 21);
    EXPECT(4, TS_F32, "2x1", 2, 5);
    EXPECT(5, TS_F32, "", 3.5);
    EXPECT(6, TS_F32, "1x3", 4, 5, 6);
    EXPECT(7, TS_F32, "", -1);
}

Test(math, reduce_axes_input)
{
    graph(18);
    int x = X23;
    node("ReduceSum", INS(x, I64("1", 0)), NOATTR);
    node("ReduceMean", INS(x, I64("1", -1)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceMax", INS(x, I64("1", 0)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceSum", INS(x, I64("0", 0)), NOATTR);     /* empty axes: all */
    node("ReduceMean", INS(x, -1), NOATTR);             /* absent axes: all */
    node("ReduceSum", INS(x, I64("0", 0)), ATTRS(ts_attr_int("noop_with_empty_axes", 1)));
    node("ReduceMax", INS(x), ATTRS(ts_attr_int("noop_with_empty_axes", 1)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "1x3", 5, 7, 9);
    EXPECT(1, TS_F32, "2", 2, 5);
    EXPECT(2, TS_F32, "3", 4, 5, 6);
    EXPECT(3, TS_F32, "1x1", 21);
    EXPECT(4, TS_F32, "1x1", 3.5);
    EXPECT(5, TS_F32, "2x3", 1, 2, 3, 4, 5, 6);
    EXPECT(6, TS_F32, "2x3", 1, 2, 3, 4, 5, 6);
}

Test(math, reducesum_axes_input_opset13)
{
    graph(13);
    int x = X23;
    node("ReduceSum", INS(x, I64("1", 1)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceSum", INS(I64("2x2", 1, 2, 3, 4), I64("1", 0)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", 6, 15);
    EXPECT(1, TS_I64, "1x2", 4, 6);
    /* ReduceMean takes axes as an input only from opset 18 */
    const char *m = node_err("ReduceMean", INS(x, I64("1", 0)), NOATTR);
    cr_assert(strstr(m, "axes as an input needs opset 18 or later"), "%s", m);
}

Test(math, reduce_rank3_middle_axis)
{
    graph(11);
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    int x = cst(TS_F32, "2x3x4", v);
    node("ReduceSum", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1), ts_attr_int("keepdims", 0)));
    node("ReduceMax", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){0, 2}, 2)));
    run(TS_DOMAIN_F32);
    /* sum over c of (12b + 4c + w) = 36b + 12 + 3w */
    EXPECT(0, TS_F32, "2x4", 12, 15, 18, 21, 48, 51, 54, 57);
    EXPECT(1, TS_F32, "1x3x1", 15, 19, 23);
}

Test(math, reduce_bad_axes)
{
    graph(11);
    int x = X23;
    const char *m = node_err("ReduceSum", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){2}, 1)));
    cr_assert(strstr(m, "axis 2 is out of range for rank 2 (expected -2 to 1)"), "%s", m);
    m = node_err("ReduceMax", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1, -1}, 2)));
    cr_assert(strstr(m, "axis -1 is listed twice"), "%s", m);
    m = node_err("ReduceSum", INS(x, I64("1", 0)), NOATTR);
    cr_assert(strstr(m, "axes as an input needs opset 13 or later"), "%s", m);
    m = node_err("ReduceMean", INS(x), ATTRS(ts_attr_int("keepdims", 2)));
    cr_assert(strstr(m, "attribute 'keepdims': expected 0 or 1"), "%s", m);
    done();
    graph(13); /* axes moved to an input in opset 13 for ReduceSum only */
    m = node_err("ReduceSum", INS(X23), ATTRS(ts_attr_ints("axes", (int64_t[]){0}, 1)));
    cr_assert(strstr(m, "attribute 'axes': not allowed from opset 13; axes are the second input"), "%s", m);
    node("ReduceMax", INS(X23), ATTRS(ts_attr_ints("axes", (int64_t[]){0}, 1)));
    done();
    graph(18);
    m = node_err("ReduceMean", INS(X23), ATTRS(ts_attr_ints("axes", (int64_t[]){0}, 1)));
    cr_assert(strstr(m, "node 'ReduceMean_0' (ReduceMean): attribute 'axes': not allowed from opset 18"), "%s", m);
}

Test(math, reduce_axes_input_must_be_constant)
{
    graph(18);
    ts_shape s = shp("1");
    int ax = ts_graph_add_input(G, "axes", TS_I64, &s, &E);
    cr_assert(ax >= 0);
    const char *m = node_err("ReduceSum", INS(X23, ax), NOATTR);
    cr_assert(strstr(m, "must be a constant"), "%s", m);
}

/* -------------------------------------------------------- mod-p domain */

Test(math, modp_exact_ops)
{
    graph(17);
    int a = F32("2", 1, 2), b = F32("2", -3, 5), big = F32("2", 1048576, 3);
    node("Add", INS(a, b), NOATTR);
    node("Sub", INS(a, b), NOATTR);
    node("Mul", INS(big, big), NOATTR); /* 2^40 = 2^31 * 2^9 = 2^9 (mod 2^31-1) */
    node("Neg", INS(b), NOATTR);
    node("Where", INS(BOOL("2", 0, 1), a, b), NOATTR);
    node("Equal", INS(I64("2", 4, 5), I64("2", 4, 4)), NOATTR); /* integer tensors stay integers */
    node("Add", INS(I64("1", 5), I64("1", -7)), NOATTR);
    run(TS_DOMAIN_MODP);
    EXPECT(0, TS_MODP, "2", P - 2, 7);
    EXPECT(1, TS_MODP, "2", 4, P - 3);
    EXPECT(2, TS_MODP, "2", 512, 9);
    EXPECT(3, TS_MODP, "2", 3, P - 5);
    EXPECT(4, TS_MODP, "2", P - 3, 2);
    EXPECT(5, TS_BOOL, "2", 1, 0);
    EXPECT(6, TS_I64, "1", -2);
}

Test(math, modp_relu_is_x_times_x_plus_1_plus_1)
{
    graph(17);
    node("Relu", INS(F32("4", 3, -1, 0, -2)), NOATTR);
    run(TS_DOMAIN_MODP);
    /* x(x+1)+1: 3*4+1, (-1)*0+1, 0+1, (-2)(-1)+1 */
    EXPECT(0, TS_MODP, "4", 13, 1, 1, 3);
}

Test(math, modp_reductions)
{
    graph(18);
    node("ReduceMean", INS(F32("2", 1, 2)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceSum", INS(F32("2x2", 1, 2, -3, 4), I64("1", 1)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceMean", INS(F32("3", 1, 2, 6)), ATTRS(ts_attr_int("keepdims", 0)));
    run(TS_DOMAIN_MODP);
    /* (1+2) * inv(2) = 3 * (p+1)/2 = (p+3)/2 (mod p): twice it is 3 */
    EXPECT(0, TS_MODP, "", (P + 3) / 2);
    EXPECT(1, TS_MODP, "2", 3, 1);
    EXPECT(2, TS_MODP, "", 3); /* 9 * inv(3) = 3 exactly */
}

Test(math, modp_refuses_float_only_ops)
{
    static const char *const ops[] = {"Sigmoid", "Exp", "Tanh", "Abs", "HardSwish"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        graph(17);
        node(ops[i], INS(F32("2", 1, 2)), NOATTR);
        cr_assert_neq(ts_graph_run_reference(G, TS_DOMAIN_MODP, NULL, OUT, &E), TS_OK, "%s ran in modp", ops[i]);
        cr_assert(strstr(E.msg, "has no kernel in the modp domain"), "%s", E.msg);
        cr_assert(strstr(E.msg, ops[i]), "%s", E.msg);
        done();
    }
    graph(17);
    node("Div", INS(F32("1", 1), F32("1", 2)), NOATTR);
    cr_assert_neq(ts_graph_run_reference(G, TS_DOMAIN_MODP, NULL, OUT, &E), TS_OK);
    cr_assert(strstr(E.msg, "node 'Div_0' (Div): operator has no kernel in the modp domain"), "%s", E.msg);
}

Test(math, modp_float_equal_refused_by_kernel)
{
    graph(17);
    node("Equal", INS(F32("1", 1), F32("1", 1)), NOATTR);
    cr_assert_neq(ts_graph_run_reference(G, TS_DOMAIN_MODP, NULL, OUT, &E), TS_OK);
    cr_assert(strstr(E.msg, "no kernel in the modp domain"), "%s", E.msg);
}

/* -------------------------------------------------------------- errors */

Test(math, binary_errors)
{
    graph(17);
    int a = F32("2x3", 1, 2, 3, 4, 5, 6);
    const char *m = node_err("Add", INS(a, F32("4", 1, 2, 3, 4)), NOATTR);
    cr_assert(strstr(m, "(Add): shapes 2x3 and 4 do not broadcast"), "%s", m);
    m = node_err("Mul", INS(a, I64("", 2)), NOATTR);
    cr_assert(strstr(m, "input types differ (float32 vs int64)"), "%s", m);
    m = node_err("Max", INS(a, F32("3", 1, 2, 3), F32("2", 1, 2)), NOATTR);
    cr_assert(strstr(m, "shapes 2x3 and 2 do not broadcast"), "%s", m);
    m = node_err("Where", INS(F32("1", 1), a, a), NOATTR);
    cr_assert(strstr(m, "condition ('c5') has type float32, expected bool"), "%s", m);
    m = node_err("Where", INS(BOOL("4", 1, 1, 0, 0), a, a), NOATTR);
    cr_assert(strstr(m, "shapes 4, 2x3 and 2x3 do not broadcast"), "%s", m);
    m = node_err("Add", INS(BOOL("1", 1), BOOL("1", 1)), NOATTR);
    cr_assert(strstr(m, "has type bool, expected a number type"), "%s", m);
}

Test(math, descriptor_flags)
{
    /* spot checks that the optimizers' algebra is declared */
    graph(17);
    int a = F32("2", 1, 2);
    node("Neg", INS(a), NOATTR);
    node("Mul", INS(a, a), NOATTR);
    node("ReduceSum", INS(a), NOATTR);
    node("Sigmoid", INS(a), NOATTR);
    node("Relu", INS(a), NOATTR);
    cr_assert_eq(G->nodes[0].op->linear_inputs, 0x1u);
    cr_assert_eq(G->nodes[1].op->linear_inputs, 0x3u);
    cr_assert_eq(G->nodes[2].op->linear_inputs, 0x1u);
    cr_assert(G->nodes[3].op->flags & TS_OP_ELEMENTWISE);
    cr_assert_not(G->nodes[3].op->flags & TS_OP_EXACT);
    cr_assert(G->nodes[4].op->flags & TS_OP_EXACT);
}

/* ------------------------------------- operators of the ONNX backend suite */

Test(math, more_reductions)
{
    graph(13);
    int x = X23;
    node("ReduceMin", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1)));
    node("ReduceProd", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){0}, 1), ts_attr_int("keepdims", 0)));
    node("ReduceL1", INS(F32("2x2", -1, 2, 3, -4)), NOATTR);
    node("ReduceL2", INS(F32("2", 3, 4)), NOATTR);
    node("ReduceLogSum", INS(x), ATTRS(ts_attr_int("keepdims", 0)));
    /* shifted by the max: exp(1000) would overflow */
    node("ReduceLogSumExp", INS(F32("2", 1000, 1000)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceSumSquare", INS(x), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1)));
    node("ReduceMin", INS(I64("3", 5, -2, 7)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceMin", INS(F32("3", 1, NAN, -1)), ATTRS(ts_attr_int("keepdims", 0)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x1", 1, 4);
    EXPECT(1, TS_F32, "3", 4, 10, 18);
    EXPECT(2, TS_F32, "1x1", 10);
    EXPECT(3, TS_F32, "1", 5);
    EXPECT(4, TS_F32, "", 3.044522438);
    EXPECT(5, TS_F32, "", 1000.693147);
    EXPECT(6, TS_F32, "2x1", 14, 77);
    EXPECT(7, TS_I64, "", -2);
    EXPECT(8, TS_F32, "", NAN);
}

Test(math, more_reductions_axes_input_opset18)
{
    graph(18);
    node("ReduceL2", INS(X23, I64("1", 1)), ATTRS(ts_attr_int("keepdims", 0)));
    node("ReduceProd", INS(X23, I64("0")), ATTRS(ts_attr_int("noop_with_empty_axes", 1)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", 3.741657387, 8.774964387);
    EXPECT(1, TS_F32, "2x3", 1, 2, 3, 4, 5, 6);
    cr_assert(strstr(node_err("ReduceMin", INS(X23), ATTRS(ts_attr_ints("axes", (int64_t[]){1}, 1))),
                     "not allowed from opset 18"));
}

Test(math, trig_hyperbolic)
{
    graph(13);
    node("Sin", INS(F32("2", 0, 1.5707963267948966)), NOATTR);
    node("Cos", INS(F32("1", 0)), NOATTR);
    node("Tan", INS(F32("1", 0.7853981633974483)), NOATTR);
    node("Asin", INS(F32("1", 1)), NOATTR);
    node("Acos", INS(F32("1", 1)), NOATTR);
    node("Atan", INS(F32("1", 1)), NOATTR);
    node("Sinh", INS(F32("1", 1)), NOATTR);
    node("Cosh", INS(F32("1", 1)), NOATTR);
    node("Asinh", INS(F32("1", 1)), NOATTR);
    node("Acosh", INS(F32("1", 1)), NOATTR);
    node("Atanh", INS(F32("1", 0.5)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", 0, 1);
    EXPECT(1, TS_F32, "1", 1);
    EXPECT(2, TS_F32, "1", 1);
    EXPECT(3, TS_F32, "1", 1.570796327);
    EXPECT(4, TS_F32, "1", 0);
    EXPECT(5, TS_F32, "1", 0.785398163);
    EXPECT(6, TS_F32, "1", 1.175201194);
    EXPECT(7, TS_F32, "1", 1.543080635);
    EXPECT(8, TS_F32, "1", 0.881373587);
    EXPECT(9, TS_F32, "1", 0);
    EXPECT(10, TS_F32, "1", 0.549306144);
    cr_assert(strstr(node_err("Sin", INS(I64("1", 1)), NOATTR), "expected a float type"));
}

Test(math, rounding_sign_softplus_isnan)
{
    graph(13);
    node("Ceil", INS(F32("2", -1.5, 1.2)), NOATTR);
    node("Floor", INS(F32("2", -1.5, 1.2)), NOATTR);
    node("Round", INS(F32("4", 0.5, 1.5, 2.5, -0.5)), NOATTR); /* half to even */
    node("Sign", INS(F32("3", -2, 0, 3)), NOATTR);
    node("Sign", INS(I64("3", -5, 0, 7)), NOATTR);
    node("Softsign", INS(F32("2", 1, -3)), NOATTR);
    node("Softplus", INS(F32("2", 0, 100)), NOATTR);
    node("IsNaN", INS(F32("2", NAN, 1)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", -1, 2);
    EXPECT(1, TS_F32, "2", -2, 1);
    EXPECT(2, TS_F32, "4", 0, 2, 2, 0);
    EXPECT(3, TS_F32, "3", -1, 0, 1);
    EXPECT(4, TS_I64, "3", -1, 0, 1);
    EXPECT(5, TS_F32, "2", 0.5, -0.75);
    EXPECT(6, TS_F32, "2", 0.693147181, 100);
    EXPECT(7, TS_BOOL, "2", 1, 0);
}

Test(math, elu_selu_celu_thresholded_shrink)
{
    graph(13);
    node("Elu", INS(F32("2", -1, 2)), NOATTR);
    node("Selu", INS(F32("2", -1, 2)), NOATTR);
    node("Celu", INS(F32("2", -2, 3)), ATTRS(ts_attr_float("alpha", 2)));
    node("ThresholdedRelu", INS(F32("3", 0.5, 1, 2)), NOATTR);
    node("Shrink", INS(F32("3", -2, 0, 2)), ATTRS(ts_attr_float("lambd", 1.5), ts_attr_float("bias", 0.5)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", -0.632120559, 2);
    EXPECT(1, TS_F32, "2", -1.111330737, 2.101401974);
    EXPECT(2, TS_F32, "2", -1.264241118, 3);
    EXPECT(3, TS_F32, "3", 0, 0, 2);
    EXPECT(4, TS_F32, "3", -1.5, 0, 1.5);
}

Test(math, comparisons_logic_mod)
{
    graph(16);
    int x = F32("3", 1, 2, 3), two = F32("", 2);
    node("Greater", INS(x, two), NOATTR);
    node("LessOrEqual", INS(x, two), NOATTR);
    node("GreaterOrEqual", INS(I64("3", 1, 2, 3), I64("1", 2)), NOATTR);
    node("Less", INS(F32("2", NAN, 0), F32("2", 1, 1)), NOATTR); /* NaN compares false */
    int p = BOOL("4", 0, 0, 1, 1), q = BOOL("4", 0, 1, 0, 1);
    node("And", INS(p, q), NOATTR);
    node("Or", INS(p, q), NOATTR);
    node("Xor", INS(p, q), NOATTR);
    int a = I64("3", -4, 7, 5), b = I64("3", 3, -3, 3);
    node("Mod", INS(a, b), NOATTR);                               /* the divisor's sign */
    node("Mod", INS(a, b), ATTRS(ts_attr_int("fmod", 1)));        /* the dividend's */
    node("Mod", INS(F32("2", -4.5, 7.5), F32("", 2)), ATTRS(ts_attr_int("fmod", 1)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_BOOL, "3", 0, 0, 1);
    EXPECT(1, TS_BOOL, "3", 1, 1, 0);
    EXPECT(2, TS_BOOL, "3", 0, 1, 1);
    EXPECT(3, TS_BOOL, "2", 0, 1);
    EXPECT(4, TS_BOOL, "4", 0, 0, 0, 1);
    EXPECT(5, TS_BOOL, "4", 0, 1, 1, 1);
    EXPECT(6, TS_BOOL, "4", 0, 1, 1, 0);
    EXPECT(7, TS_I64, "3", 2, -2, 2);
    EXPECT(8, TS_I64, "3", -1, 1, 2);
    EXPECT(9, TS_F32, "2", -0.5, 1.5);
    cr_assert(strstr(node_err("Mod", INS(x, two), NOATTR), "fmod must be 1 for float inputs"));
    cr_assert(strstr(node_err("And", INS(x, two), NOATTR), "expected bool"));
}

Test(math, argmax_argmin)
{
    graph(13);
    int x = F32("2x3", 1, 5, 5, 7, 2, 7);
    node("ArgMax", INS(x), ATTRS(ts_attr_int("axis", 1)));
    node("ArgMax", INS(x), ATTRS(ts_attr_int("axis", -1), ts_attr_int("select_last_index", 1)));
    node("ArgMin", INS(x), ATTRS(ts_attr_int("keepdims", 0)));
    node("ArgMin", INS(I64("4", 3, -1, 4, -1)), ATTRS(ts_attr_int("select_last_index", 1)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_I64, "2x1", 1, 0);
    EXPECT(1, TS_I64, "2x1", 2, 2);
    EXPECT(2, TS_I64, "3", 0, 1, 0);
    EXPECT(3, TS_I64, "1", 3);
    cr_assert(strstr(node_err("ArgMax", INS(x), ATTRS(ts_attr_int("axis", 2))), "axis 2 is out of range"));
}

Test(math, nll_and_softmax_cross_entropy_loss)
{
    graph(13);
    int x = F32("2x3", -1, -2, -3, -4, -5, -6), t = I64("2", 2, 0), w = F32("3", 1, 2, 3);
    node("NegativeLogLikelihoodLoss", INS(x, t), ATTRS(ts_attr_string("reduction", "none")));
    node("NegativeLogLikelihoodLoss", INS(x, t), ATTRS(ts_attr_string("reduction", "sum")));
    node("NegativeLogLikelihoodLoss", INS(x, t), NOATTR);
    node("NegativeLogLikelihoodLoss", INS(x, t, w), NOATTR);                     /* (9 + 4) / (3 + 1) */
    node("NegativeLogLikelihoodLoss", INS(x, t), ATTRS(ts_attr_int("ignore_index", 0))); /* 3 / 1 */
    node("SoftmaxCrossEntropyLoss", INS(F32("1x2", 0, 0), I64("1", 1)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", 3, 4);
    EXPECT(1, TS_F32, "", 7);
    EXPECT(2, TS_F32, "", 3.5);
    EXPECT(3, TS_F32, "", 3.25);
    EXPECT(4, TS_F32, "", 3);
    EXPECT(5, TS_F32, "", 0.693147181);
    cr_assert(strstr(node_err("NegativeLogLikelihoodLoss", INS(x, I64("3", 0, 0, 0)), NOATTR),
                     "does not match input shape"));
    cr_assert(strstr(node_err("NegativeLogLikelihoodLoss", INS(x, t), ATTRS(ts_attr_string("reduction", "avg"))),
                     "expected none, sum or mean"));
}

Test(math, softmax_cross_entropy_log_prob_output)
{
    graph(13);
    int out[2];
    int ins[2] = {F32("1x2x1", 0, 0), I64("1x1", 0)};
    cr_assert(ts_graph_add_node(G, "SoftmaxCrossEntropyLoss", NULL, ins, 2, NULL, 0, 2, NULL, out, &E) >= 0, "%s",
              E.msg);
    cr_assert_eq(ts_graph_add_output(G, out[0], &E), TS_OK);
    cr_assert_eq(ts_graph_add_output(G, out[1], &E), TS_OK);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "", 0.693147181);
    EXPECT(1, TS_F32, "1x2x1", -0.693147181, -0.693147181);
}

/* LayerNormalization's optional outputs (an nn-family operator, tested here
 * for this file's multi-output harness): Mean and InvStdDev per row. */
Test(math, layernorm_mean_invstddev_outputs)
{
    graph(17);
    int out[3];
    int ins[2] = {F32("2x3", 1, 2, 3, 4, 6, 8), F32("3", 1, 1, 1)};
    cr_assert(ts_graph_add_node(G, "LayerNormalization", NULL, ins, 2, NULL, 0, 3, NULL, out, &E) >= 0, "%s", E.msg);
    for (int i = 0; i < 3; i++) cr_assert_eq(ts_graph_add_output(G, out[i], &E), TS_OK);
    run(TS_DOMAIN_F64);
    EXPECT(0, TS_F64, "2x3", -1.224735686, 0, 1.224735686, -1.224742575, 0, 1.224742575);
    EXPECT(1, TS_F64, "2x1", 2, 6);
    EXPECT(2, TS_F64, "2x1", 1.224735686, 0.612371288);
}

Test(math, sum_mean_variadic)
{
    graph(13);
    node("Sum", INS(F32("2", 1, 2), F32("1", 10), F32("2", 100, 200)), NOATTR);
    node("Mean", INS(F32("2", 1, 2), F32("2", 3, 4)), NOATTR);
    node("Sum", INS(I64("2", 1, 2), I64("2", 3, 4)), NOATTR);
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2", 111, 212);
    EXPECT(1, TS_F32, "2", 2, 3);
    EXPECT(2, TS_I64, "2", 4, 6);
}

Test(math, sum_mean_exact_domain)
{
    graph(13);
    node("Mean", INS(F32("1", 1), F32("1", 2)), NOATTR); /* 3 * inverse of 2 mod p */
    run(TS_DOMAIN_MODP);
    EXPECT(0, TS_MODP, "1", 1073741825);
}

Test(math, hardmax_cumsum_isinf)
{
    graph(13);
    node("Hardmax", INS(F32("2x3", 1, 3, 3, 2, 0, 1)), NOATTR); /* first maximum wins */
    int x = F32("3", 1, 2, 3), ax = I64("", 0);
    node("CumSum", INS(x, ax), NOATTR);
    node("CumSum", INS(x, ax), ATTRS(ts_attr_int("exclusive", 1)));
    node("CumSum", INS(x, ax), ATTRS(ts_attr_int("reverse", 1)));
    node("CumSum", INS(x, ax), ATTRS(ts_attr_int("exclusive", 1), ts_attr_int("reverse", 1)));
    node("CumSum", INS(I64("2x2", 1, 2, 3, 4), I64("", -1)), NOATTR);
    int v = F32("4", INFINITY, -INFINITY, 1, NAN);
    node("IsInf", INS(v), NOATTR);
    node("IsInf", INS(v), ATTRS(ts_attr_int("detect_negative", 0)));
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "2x3", 0, 1, 0, 1, 0, 0);
    EXPECT(1, TS_F32, "3", 1, 3, 6);
    EXPECT(2, TS_F32, "3", 0, 1, 3);
    EXPECT(3, TS_F32, "3", 6, 5, 3);
    EXPECT(4, TS_F32, "3", 5, 3, 0);
    EXPECT(5, TS_I64, "2x2", 1, 3, 3, 7);
    EXPECT(6, TS_BOOL, "4", 1, 1, 0, 0);
    EXPECT(7, TS_BOOL, "4", 1, 0, 0, 0);
}

Test(math, hardmax_opset11_flattens_tail)
{
    graph(11);
    node("Hardmax", INS(F32("1x2x2", 1, 2, 4, 3)), NOATTR); /* axis 1: rows of 4 */
    run(TS_DOMAIN_F32);
    EXPECT(0, TS_F32, "1x2x2", 0, 0, 1, 0);
}
