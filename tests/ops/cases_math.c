/* Single-op ORT cases for the math family (see opcase.h): each unary op,
 * the parameterized activations, broadcasting binary ops, variadic Max/Min,
 * reductions in their attribute and input forms, Softmax before and after
 * opset 13, Clip in both forms, Where and integer paths. */
#include "opcase.h"

/* (count, values) for oc_const_i64 */
#define I64S(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}

static int const_bool(ts_graph *g, const char *name, const char *dims, const uint8_t *vals)
{
    ts_error e = {0};
    ts_shape s = oc_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_BOOL, &s, &e);
    oc_check(t != NULL, &e);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ((uint8_t *)t->data)[i] = vals[i];
    int v = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    oc_check(v >= 0, &e);
    return v;
}

/* ------------------------------------------------------------- unary */

#define UNARY(FN, OP, OPSET, DIMS)                                                                 \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        int x = oc_input(g, "x", TS_F32, DIMS);                                                    \
        return oc_node(g, OP, &x, 1, NULL, 0, 1);                                                  \
    }

UNARY(relu, "Relu", 13, "2x3x4")
UNARY(neg, "Neg", 13, "2x3x4")
UNARY(abs_, "Abs", 13, "2x3x4")
UNARY(sqrt_, "Sqrt", 13, "2x3x4")
UNARY(exp_, "Exp", 13, "2x3x4")
UNARY(log_, "Log", 13, "2x3x4")
UNARY(reciprocal, "Reciprocal", 13, "2x3x4")
UNARY(erf_, "Erf", 13, "2x3x4")
UNARY(sigmoid, "Sigmoid", 13, "2x3x4")
UNARY(tanh_, "Tanh", 13, "2x3x4")
UNARY(hardswish, "HardSwish", 14, "2x3x4")
UNARY(relu_opset9, "Relu", 9, "5")
UNARY(leakyrelu_default, "LeakyRelu", 13, "2x3x4")
UNARY(hardsigmoid_default, "HardSigmoid", 13, "2x3x4")
UNARY(softmax_11_default, "Softmax", 11, "2x3x4")
UNARY(softmax_13_default, "Softmax", 13, "2x3x4")

/* One float input with one attribute list. */
#define WITH_ATTRS(FN, OP, OPSET, DIMS, ...)                                                       \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        int x = oc_input(g, "x", TS_F32, DIMS);                                                    \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, OP, &x, 1, a, (int)(sizeof a / sizeof *a), 1);                           \
    }

WITH_ATTRS(leakyrelu_alpha, "LeakyRelu", 13, "2x3x4", ts_attr_float("alpha", 0.2))
WITH_ATTRS(gelu_erf, "Gelu", 20, "2x3x4", ts_attr_string("approximate", "none"))
WITH_ATTRS(gelu_tanh, "Gelu", 20, "2x3x4", ts_attr_string("approximate", "tanh"))
WITH_ATTRS(hardsigmoid_ab, "HardSigmoid", 13, "2x3x4", ts_attr_float("alpha", 0.4), ts_attr_float("beta", 0.3))
WITH_ATTRS(clip_9_both, "Clip", 9, "2x3x4", ts_attr_float("min", -0.5), ts_attr_float("max", 0.5))
WITH_ATTRS(clip_9_max, "Clip", 9, "2x3x4", ts_attr_float("max", 0.25))
WITH_ATTRS(softmax_11_axis1, "Softmax", 11, "2x3x4", ts_attr_int("axis", 1))
WITH_ATTRS(softmax_11_axis0, "Softmax", 11, "2x3x4", ts_attr_int("axis", 0))
WITH_ATTRS(softmax_11_axis_neg1, "Softmax", 11, "2x3x4", ts_attr_int("axis", -1))
WITH_ATTRS(softmax_13_axis1, "Softmax", 13, "2x3x4", ts_attr_int("axis", 1))
WITH_ATTRS(softmax_13_axis0, "Softmax", 13, "2x3x4", ts_attr_int("axis", 0))
WITH_ATTRS(logsoftmax_11_axis1, "LogSoftmax", 11, "2x3x4", ts_attr_int("axis", 1))
WITH_ATTRS(logsoftmax_13_axis1, "LogSoftmax", 13, "2x3x4", ts_attr_int("axis", 1))
WITH_ATTRS(reducesum_11_axes, "ReduceSum", 11, "2x3x4", ts_attr_ints("axes", OC_INTS(1)))
WITH_ATTRS(reducesum_11_axes_nokeep, "ReduceSum", 11, "2x3x4", ts_attr_ints("axes", OC_INTS(0, -1)),
           ts_attr_int("keepdims", 0))
WITH_ATTRS(reducesum_13_all_nokeep, "ReduceSum", 13, "2x3x4", ts_attr_int("keepdims", 0))
WITH_ATTRS(reducemean_11_axes, "ReduceMean", 11, "2x3x4", ts_attr_ints("axes", OC_INTS(2)))
WITH_ATTRS(reducemean_13_negaxes_nokeep, "ReduceMean", 13, "2x3x4", ts_attr_ints("axes", OC_INTS(-2, 0)),
           ts_attr_int("keepdims", 0))
WITH_ATTRS(reducemean_13_all, "ReduceMean", 13, "2x3x4", ts_attr_int("keepdims", 1))
WITH_ATTRS(reducemax_11_axes, "ReduceMax", 11, "2x3x4", ts_attr_ints("axes", OC_INTS(1)))
WITH_ATTRS(reducemax_13_all_nokeep, "ReduceMax", 13, "2x3x4", ts_attr_int("keepdims", 0))
WITH_ATTRS(reducemax_18_noaxes, "ReduceMax", 18, "2x3x4", ts_attr_int("keepdims", 1))

/* --------------------------------------------- reductions, axes input */

#define REDUCE_INPUT(FN, OP, OPSET, KEEP, ...)                                                     \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), oc_const_i64(g, "axes", I64S(__VA_ARGS__))}; \
        const ts_attr a[] = {ts_attr_int("keepdims", KEEP)};                                       \
        return oc_node(g, OP, in, 2, a, 1, 1);                                                     \
    }

REDUCE_INPUT(reducesum_13_input, "ReduceSum", 13, 1, 1)
REDUCE_INPUT(reducesum_13_input_nokeep, "ReduceSum", 13, 0, 2, 0)
REDUCE_INPUT(reducemean_18_input, "ReduceMean", 18, 1, -1)
REDUCE_INPUT(reducemean_18_input_nokeep, "ReduceMean", 18, 0, 1)
REDUCE_INPUT(reducemax_18_input, "ReduceMax", 18, 1, 0, 2)
REDUCE_INPUT(reducemax_18_input_nokeep, "ReduceMax", 18, 0, -2)

static ts_graph *reducesum_13_noop_empty(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), oc_const_i64(g, "axes", 0, NULL)};
    const ts_attr a[] = {ts_attr_int("noop_with_empty_axes", 1)};
    return oc_node(g, "ReduceSum", in, 2, a, 1, 1);
}

/* -------------------------------------------------------------- binary */

/* a: input of shape DA; b: input of shape DB. */
#define BINARY(FN, OP, DA, DB)                                                                     \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(17);                                                                \
        int in[2] = {oc_input(g, "a", TS_F32, DA), oc_input(g, "b", TS_F32, DB)};                  \
        return oc_node(g, OP, in, 2, NULL, 0, 1);                                                  \
    }

BINARY(add_same, "Add", "2x3x4", "2x3x4")
BINARY(add_bcast_row, "Add", "2x3x4", "4")
BINARY(sub_scalar, "Sub", "2x3x4", "")
BINARY(sub_scalar_first, "Sub", "", "3x4")
BINARY(mul_both_bcast, "Mul", "2x1x4", "3x1")
BINARY(max_2, "Max", "2x3", "3")
BINARY(min_2, "Min", "3x1", "1x4")
BINARY(pow_same, "Pow", "2x3", "2x3")
BINARY(equal_self_shape, "Equal", "2x3", "3")

/* Divisor is a constant away from zero; the dividend an input. */
static ts_graph *div_bcast(void)
{
    ts_graph *g = oc_graph(17);
    int in[2] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_const_f32(g, "b", "3x1", NULL, 0.5, 2)};
    return oc_node(g, "Div", in, 2, NULL, 0, 1);
}

static ts_graph *div_scalar_first(void)
{
    ts_graph *g = oc_graph(17);
    int in[2] = {oc_const_f32(g, "a", "", (const float[]){3}, 0, 0), oc_input(g, "b", TS_F32, "2x3")};
    return oc_node(g, "Div", in, 2, NULL, 0, 1);
}

static ts_graph *pow_const_exp(void)
{
    ts_graph *g = oc_graph(17);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), oc_const_f32(g, "e", "4", (const float[]){2, 0.5f, 3, -1}, 0, 0)};
    return oc_node(g, "Pow", in, 2, NULL, 0, 1);
}

#define VARIADIC3(FN, OP)                                                                          \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(13);                                                                \
        int in[3] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_input(g, "b", TS_F32, "3x1"),           \
                     oc_input(g, "c", TS_F32, "4")};                                               \
        return oc_node(g, OP, in, 3, NULL, 0, 1);                                                  \
    }
VARIADIC3(max_3, "Max")
VARIADIC3(min_3, "Min")

/* ------------------------------------------------------- int64 paths */

#define INT_BINARY(FN, OP, ...)                                                                    \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(13);                                                                \
        int in[2] = {oc_const_i64(g, "a", I64S(7, -7, 6, 0)), oc_const_i64(g, "b", I64S(__VA_ARGS__))}; \
        return oc_node(g, OP, in, 2, NULL, 0, 1);                                                  \
    }
INT_BINARY(equal_int64, "Equal", 7, 2, 6, 1)
INT_BINARY(add_int64, "Add", 1, 2, 3, 4)
INT_BINARY(mul_int64, "Mul", -1, 2, 3, 4)
INT_BINARY(div_int64, "Div", 2, 2, 4, 3)
INT_BINARY(max_int64, "Max", 7, 2, 9, -1)

/* ----------------------------------------------------- Clip, inputs */

static ts_graph *clip_13(int has_min, int has_max)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {oc_input(g, "x", TS_F32, "2x3x4"), -1, -1};
    if (has_min) in[1] = oc_const_f32(g, "lo", "", (const float[]){-0.3f}, 0, 0);
    if (has_max) in[2] = oc_const_f32(g, "hi", "", (const float[]){0.6f}, 0, 0);
    return oc_node(g, "Clip", in, has_max ? 3 : has_min ? 2 : 1, NULL, 0, 1);
}
static ts_graph *clip_13_both(void) { return clip_13(1, 1); }
static ts_graph *clip_13_min(void) { return clip_13(1, 0); }
static ts_graph *clip_13_max(void) { return clip_13(0, 1); }
static ts_graph *clip_13_none(void) { return clip_13(0, 0); }

/* ---------------------------------------------------- PRelu, Where */

static ts_graph *prelu_channel(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4x4"), oc_const_f32(g, "slope", "3x1x1", NULL, 0, 0.5)};
    return oc_node(g, "PRelu", in, 2, NULL, 0, 1);
}

static ts_graph *prelu_same_shape(void)
{
    ts_graph *g = oc_graph(9);
    int in[2] = {oc_input(g, "x", TS_F32, "3x4"), oc_input(g, "slope", TS_F32, "3x4")};
    return oc_node(g, "PRelu", in, 2, NULL, 0, 1);
}

static ts_graph *where_bcast(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {const_bool(g, "cond", "2x1x4", (const uint8_t[]){1, 0, 0, 1, 0, 1, 1, 0}),
                 oc_input(g, "x", TS_F32, "3x1"), oc_input(g, "y", TS_F32, "")};
    return oc_node(g, "Where", in, 3, NULL, 0, 1);
}

static ts_graph *where_int64(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {const_bool(g, "cond", "3", (const uint8_t[]){1, 0, 1}), oc_const_i64(g, "x", I64S(1, 2, 3)),
                 oc_const_i64(g, "y", I64S(-5))};
    return oc_node(g, "Where", in, 3, NULL, 0, 1);
}

static ts_graph *not_bool(void)
{
    ts_graph *g = oc_graph(13);
    int c = const_bool(g, "c", "4", (const uint8_t[]){1, 0, 0, 1});
    return oc_node(g, "Not", &c, 1, NULL, 0, 1);
}

/* ------------------------------------ operators added for the ONNX suite */

/* pointer, count: ts_attr_ints's order (I64S is oc_const_i64's) */
#define AXES(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

UNARY(sin_, "Sin", 13, "2x3x4")
UNARY(cos_, "Cos", 13, "2x3x4")
UNARY(tan_, "Tan", 13, "2x3x4")
UNARY(asin_, "Asin", 13, "2x3x4")
UNARY(acos_, "Acos", 13, "2x3x4")
UNARY(atan_, "Atan", 13, "2x3x4")
UNARY(sinh_, "Sinh", 13, "2x3x4")
UNARY(cosh_, "Cosh", 13, "2x3x4")
UNARY(asinh_, "Asinh", 13, "2x3x4")
UNARY(acosh_, "Acosh", 13, "2x3x4")
UNARY(atanh_, "Atanh", 13, "2x3x4")
UNARY(ceil_, "Ceil", 13, "2x3x4")
UNARY(floor_, "Floor", 13, "2x3x4")
UNARY(round_, "Round", 13, "2x3x4")
UNARY(sign_, "Sign", 13, "2x3x4")
UNARY(softsign_, "Softsign", 13, "2x3x4")
UNARY(softplus_, "Softplus", 13, "2x3x4")
UNARY(isnan_, "IsNaN", 13, "2x3x4")
UNARY(isinf_, "IsInf", 13, "2x3x4")
UNARY(selu_default, "Selu", 13, "2x3x4")
UNARY(hardmax_13, "Hardmax", 13, "2x3x4")
UNARY(hardmax_11, "Hardmax", 11, "2x3x4")
WITH_ATTRS(elu_alpha, "Elu", 13, "2x3x4", ts_attr_float("alpha", 0.5))
WITH_ATTRS(celu_alpha, "Celu", 13, "2x3x4", ts_attr_float("alpha", 2))
WITH_ATTRS(thresholdedrelu, "ThresholdedRelu", 13, "2x3x4", ts_attr_float("alpha", 0.3))
WITH_ATTRS(shrink_, "Shrink", 13, "2x3x4", ts_attr_float("lambd", 0.4), ts_attr_float("bias", 0.1))
WITH_ATTRS(argmax_axis1, "ArgMax", 13, "2x3x4", ts_attr_int("axis", 1))
WITH_ATTRS(argmin_last_nokeep, "ArgMin", 13, "2x3x4", ts_attr_int("axis", -1), ts_attr_int("keepdims", 0),
           ts_attr_int("select_last_index", 1))
WITH_ATTRS(reducemin_13, "ReduceMin", 13, "2x3x4", ts_attr_ints("axes", AXES(1)))
WITH_ATTRS(reduceprod_13, "ReduceProd", 13, "2x3x4", ts_attr_ints("axes", AXES(0, 2)))
WITH_ATTRS(reducel1_13, "ReduceL1", 13, "2x3x4", ts_attr_int("keepdims", 0))
WITH_ATTRS(reducel2_13, "ReduceL2", 13, "2x3x4", ts_attr_ints("axes", AXES(-1)))
WITH_ATTRS(reducelogsumexp_13, "ReduceLogSumExp", 13, "2x3x4", ts_attr_ints("axes", AXES(1)))
WITH_ATTRS(reducesumsquare_13, "ReduceSumSquare", 13, "2x3x4", ts_attr_ints("axes", AXES(2)))
REDUCE_INPUT(reducel2_18_input, "ReduceL2", 18, 0, 1)
REDUCE_INPUT(reducemin_18_input, "ReduceMin", 18, 1, -1)
BINARY(greater_bcast, "Greater", "2x3x4", "4")
BINARY(less_bcast, "Less", "2x3x4", "3x1")
BINARY(greater_or_equal, "GreaterOrEqual", "2x3", "2x3")
BINARY(less_or_equal, "LessOrEqual", "2x3", "")
BINARY(sum_2, "Sum", "2x3", "3")
BINARY(mean_2, "Mean", "2x1", "1x3")

/* Log of a sum of positive values: the input range is shifted up. */
WITH_ATTRS(reducelogsum_13, "ReduceLogSum", 13, "2x3x4", ts_attr_ints("axes", AXES(1)))

static ts_graph *mod_fmod(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_const_f32(g, "b", "4", NULL, 0.3, 1)};
    const ts_attr a[] = {ts_attr_int("fmod", 1)};
    return oc_node(g, "Mod", in, 2, a, 1, 1);
}

/* Mod by a scalar (the fast runtime's immediate form), and a scalar
 * dividend by an input kept away from 0 by the case's range */
static ts_graph *mod_fmod_scalar(void)
{
    ts_graph *g = oc_graph(13);
    const float two_half = -2.5f;
    int in[2] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_const_f32(g, "b", "", &two_half, 0, 0)};
    const ts_attr a[] = {ts_attr_int("fmod", 1)};
    return oc_node(g, "Mod", in, 2, a, 1, 1);
}

static ts_graph *mod_fmod_dividend(void)
{
    ts_graph *g = oc_graph(13);
    const float seven = 7.5f;
    int in[2] = {oc_const_f32(g, "a", "", &seven, 0, 0), oc_input(g, "b", TS_F32, "3x4")};
    const ts_attr a[] = {ts_attr_int("fmod", 1)};
    return oc_node(g, "Mod", in, 2, a, 1, 1);
}

static ts_graph *cumsum_reverse_exclusive(void)
{
    ts_graph *g = oc_graph(14);
    int64_t ax = 1;
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), oc_const_i64(g, "axis", 1, &ax)};
    const ts_attr a[] = {ts_attr_int("exclusive", 1), ts_attr_int("reverse", 1)};
    return oc_node(g, "CumSum", in, 2, a, 2, 1);
}

static ts_graph *softmax_ce_loss_weighted(void)
{
    ts_graph *g = oc_graph(13);
    int64_t t[6] = {0, 2, 1, 1, 0, 2};
    ts_error e = {0};
    ts_shape ts = oc_shape("2x3");
    ts_tensor *tt = ts_tensor_new(TS_I64, &ts, &e);
    oc_check(tt != NULL, &e);
    for (int i = 0; i < 6; i++) ((int64_t *)tt->data)[i] = t[i];
    int tv = ts_graph_add_constant(g, "labels", tt, &e);
    ts_tensor_unref(tt);
    oc_check(tv >= 0, &e);
    int in[3] = {oc_input(g, "scores", TS_F32, "2x3x3"), tv, oc_const_f32(g, "w", "3", NULL, 0.5, 2)};
    return oc_node(g, "SoftmaxCrossEntropyLoss", in, 3, NULL, 0, 1);
}

const opcase opcases_math[] = {
    {"relu", relu, 0, 0, 0, 0},
    {"relu_opset9", relu_opset9, 0, 0, 0, 0},
    {"neg", neg, 0, 0, 0, 0},
    {"abs", abs_, 0, 0, 0, 0},
    {"sqrt", sqrt_, 0.01, 4, 0, 0},
    {"exp", exp_, -3, 3, 0, 0},
    {"log", log_, 0.05, 4, 0, 0},
    {"reciprocal", reciprocal, 0.5, 2, 0, 0},
    {"erf", erf_, -2, 2, 0, 0},
    {"sigmoid", sigmoid, -5, 5, 0, 0},
    {"tanh", tanh_, -3, 3, 0, 0},
    {"hardswish", hardswish, -5, 5, 0, 0},
    {"leakyrelu_default", leakyrelu_default, 0, 0, 0, 0},
    {"leakyrelu_alpha", leakyrelu_alpha, 0, 0, 0, 0},
    {"gelu_erf", gelu_erf, -4, 4, 0, 0},
    {"gelu_tanh", gelu_tanh, -4, 4, 0, 0},
    {"hardsigmoid_default", hardsigmoid_default, -4, 4, 0, 0},
    {"hardsigmoid_ab", hardsigmoid_ab, -4, 4, 0, 0},
    {"prelu_channel", prelu_channel, 0, 0, 0, 0},
    {"prelu_same_shape", prelu_same_shape, 0, 0, 0, 0},
    {"clip_9_both", clip_9_both, 0, 0, 0, 0},
    {"clip_9_max", clip_9_max, 0, 0, 0, 0},
    {"clip_13_both", clip_13_both, 0, 0, 0, 0},
    {"clip_13_min", clip_13_min, 0, 0, 0, 0},
    {"clip_13_max", clip_13_max, 0, 0, 0, 0},
    {"clip_13_none", clip_13_none, 0, 0, 0, 0},
    {"softmax_11_default", softmax_11_default, -3, 3, 0, 0},
    {"softmax_11_axis1", softmax_11_axis1, -3, 3, 0, 0},
    {"softmax_11_axis0", softmax_11_axis0, -3, 3, 0, 0},
    {"softmax_11_axis_neg1", softmax_11_axis_neg1, -3, 3, 0, 0},
    {"softmax_13_default", softmax_13_default, -3, 3, 0, 0},
    {"softmax_13_axis1", softmax_13_axis1, -3, 3, 0, 0},
    {"softmax_13_axis0", softmax_13_axis0, -3, 3, 0, 0},
    {"logsoftmax_11_axis1", logsoftmax_11_axis1, -3, 3, 0, 0},
    {"logsoftmax_13_axis1", logsoftmax_13_axis1, -3, 3, 0, 0},
    {"add_same", add_same, 0, 0, 0, 0},
    {"add_bcast_row", add_bcast_row, 0, 0, 0, 0},
    {"sub_scalar", sub_scalar, 0, 0, 0, 0},
    {"sub_scalar_first", sub_scalar_first, 0, 0, 0, 0},
    {"mul_both_bcast", mul_both_bcast, 0, 0, 0, 0},
    {"div_bcast", div_bcast, 0, 0, 0, 0},
    {"div_scalar_first", div_scalar_first, 0.5, 2, 0, 0},
    {"pow_same", pow_same, 0.1, 2, 0, 0},
    {"pow_const_exp", pow_const_exp, 0.1, 2, 0, 0},
    {"max_2", max_2, 0, 0, 0, 0},
    {"min_2", min_2, 0, 0, 0, 0},
    {"max_3", max_3, 0, 0, 0, 0},
    {"min_3", min_3, 0, 0, 0, 0},
    {"equal_self_shape", equal_self_shape, 0, 0, 0, 0},
    {"equal_int64", equal_int64, 0, 0, 0, 0},
    {"add_int64", add_int64, 0, 0, 0, 0},
    {"mul_int64", mul_int64, 0, 0, 0, 0},
    {"div_int64", div_int64, 0, 0, 0, 0},
    {"max_int64", max_int64, 0, 0, 0, 0},
    {"where_bcast", where_bcast, 0, 0, 0, 0},
    {"where_int64", where_int64, 0, 0, 0, 0},
    {"not_bool", not_bool, 0, 0, 0, 0},
    {"reducesum_11_axes", reducesum_11_axes, 0, 0, 0, 0},
    {"reducesum_11_axes_nokeep", reducesum_11_axes_nokeep, 0, 0, 0, 0},
    {"reducesum_13_all_nokeep", reducesum_13_all_nokeep, 0, 0, 0, 0},
    {"reducesum_13_input", reducesum_13_input, 0, 0, 0, 0},
    {"reducesum_13_input_nokeep", reducesum_13_input_nokeep, 0, 0, 0, 0},
    {"reducesum_13_noop_empty", reducesum_13_noop_empty, 0, 0, 0, 0},
    {"reducemean_11_axes", reducemean_11_axes, 0, 0, 0, 0},
    {"reducemean_13_negaxes_nokeep", reducemean_13_negaxes_nokeep, 0, 0, 0, 0},
    {"reducemean_13_all", reducemean_13_all, 0, 0, 0, 0},
    {"reducemean_18_input", reducemean_18_input, 0, 0, 0, 0},
    {"reducemean_18_input_nokeep", reducemean_18_input_nokeep, 0, 0, 0, 0},
    {"reducemax_11_axes", reducemax_11_axes, 0, 0, 0, 0},
    {"reducemax_13_all_nokeep", reducemax_13_all_nokeep, 0, 0, 0, 0},
    {"reducemax_18_noaxes", reducemax_18_noaxes, 0, 0, 0, 0},
    {"reducemax_18_input", reducemax_18_input, 0, 0, 0, 0},
    {"reducemax_18_input_nokeep", reducemax_18_input_nokeep, 0, 0, 0, 0},
    {"sin", sin_, -3, 3, 0, 0},
    {"cos", cos_, -3, 3, 0, 0},
    {"tan", tan_, -1, 1, 0, 0},
    {"asin", asin_, -0.9, 0.9, 0, 0},
    {"acos", acos_, -0.9, 0.9, 0, 0},
    {"atan", atan_, -3, 3, 0, 0},
    {"sinh", sinh_, -2, 2, 0, 0},
    {"cosh", cosh_, -2, 2, 0, 0},
    {"asinh", asinh_, -3, 3, 0, 0},
    {"acosh", acosh_, 1.1, 4, 0, 0},
    {"atanh", atanh_, -0.9, 0.9, 0, 0},
    {"ceil", ceil_, -3, 3, 0, 0},
    {"floor", floor_, -3, 3, 0, 0},
    {"round", round_, -3, 3, 0, 0},
    {"sign", sign_, 0, 0, 0, 0},
    {"softsign", softsign_, -3, 3, 0, 0},
    {"softplus", softplus_, -3, 3, 0, 0},
    {"isnan", isnan_, 0, 0, 0, 0},
    {"isinf", isinf_, 0, 0, 0, 0},
    {"selu_default", selu_default, -3, 3, 0, 0},
    {"hardmax_13", hardmax_13, 0, 0, 0, 0},
    {"hardmax_11", hardmax_11, 0, 0, 0, 0},
    {"elu_alpha", elu_alpha, -3, 3, 0, 0},
    {"celu_alpha", celu_alpha, -3, 3, 0, 0},
    {"thresholdedrelu", thresholdedrelu, 0, 0, 0, 0},
    {"shrink", shrink_, 0, 0, 0, 0},
    {"argmax_axis1", argmax_axis1, 0, 0, 0, 0},
    {"argmin_last_nokeep", argmin_last_nokeep, 0, 0, 0, 0},
    {"reducemin_13", reducemin_13, 0, 0, 0, 0},
    {"reduceprod_13", reduceprod_13, 0, 0, 0, 0},
    {"reducel1_13", reducel1_13, 0, 0, 0, 0},
    {"reducel2_13", reducel2_13, 0, 0, 0, 0},
    {"reducelogsumexp_13", reducelogsumexp_13, -3, 3, 0, 0},
    {"reducesumsquare_13", reducesumsquare_13, 0, 0, 0, 0},
    {"reducelogsum_13", reducelogsum_13, 0.1, 2, 0, 0},
    {"reducel2_18_input", reducel2_18_input, 0, 0, 0, 0},
    {"reducemin_18_input", reducemin_18_input, 0, 0, 0, 0},
    {"greater_bcast", greater_bcast, 0, 0, 0, 0},
    {"less_bcast", less_bcast, 0, 0, 0, 0},
    {"greater_or_equal", greater_or_equal, 0, 0, 0, 0},
    {"less_or_equal", less_or_equal, 0, 0, 0, 0},
    {"sum_2", sum_2, 0, 0, 0, 0},
    {"mean_2", mean_2, 0, 0, 0, 0},
    {"mod_fmod", mod_fmod, 0, 0, 0, 0},
    {"mod_fmod_scalar", mod_fmod_scalar, -9, 9, 0, 0},
    {"mod_fmod_dividend", mod_fmod_dividend, 0.5, 4, 0, 0},
    {"cumsum_reverse_exclusive", cumsum_reverse_exclusive, 0, 0, 0, 0},
    {"softmax_ce_loss_weighted", softmax_ce_loss_weighted, 0, 0, 0, 0},
    {0},
};
