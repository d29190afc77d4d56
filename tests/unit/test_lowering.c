/* Each lowering fusion against the unfused steps (issue 27: "each lowering
 * fusion has a test bit-identical to the unfused steps or within its
 * stated tolerance").  A lowering fusion is a plan step that computes
 * several adjacent nodes as written (src/exec/; docs/runtime.md, "The
 * lowering's contract").  Per fusion: a small graph where it fires; the
 * plan with it (the step's kernel present, nodes fused) and the plan with
 * one step per node (ts_plan_opts.no_fusion: each node its own kernel),
 * run on the same inputs; the outputs equal bit for bit (tolerance 0) or
 * within the fusion's stated tolerance, relative to the largest output.
 * The planted wrong variants, refuted: each fused step's result moved off
 * (each_fusion_wrong_step_caught), and near misses, graphs one condition
 * away from a group, that the lowering must not take into one
 * (near_misses_not_fused).
 *
 * The tolerances, and why they are not 0:
 *   - 0: the fused step makes the same float32 operations in the same
 *     order (oneDNN's post-ops: the activation or the residual sum applied
 *     to the accumulated value as the next step would; element-wise
 *     programs; a bias added after the product);
 *   - 2^-20 (about 1e-6): a reduction summed in another order, a quotient
 *     taken as the product with a reciprocal (vec.layernorm.ops: the mean
 *     and variance over at most a few hundred elements; vec.se: the pooled
 *     mean and the 1x1 convolutions as dot products of their own order);
 *   - 1e-5: vec.attention, the scores as dot products in another order
 *     than oneDNN's matmul and the softmax as vec.softmax's (a few ulp
 *     each; vec_attention.c); vec.gemv's stacked products (lower_gemv.c),
 *     a one-row product summed with one accumulator instead of two;
 *   - dnnl.conv_gated: the scaled weights W * gate rounded once, then the
 *     convolution as oneDNN orders it, against the unfused Mul and a
 *     convolution with run-time weights (the reference kernel's order):
 *     2^-20 as well. */
#include <stdlib.h>
#include "exec_check.h"
#include "exec/plan_internal.h"
#include "ops/list.h"

static uint64_t Rng = 4242;

typedef struct fusion {
    const char *kernel; /* the fused step's kernel (one step of it at least) */
    ts_graph *(*build)(void);
    int fused;  /* nodes the fused plan takes into other nodes' steps, at least */
    double tol; /* |fused - unfused| <= tol * max(1, max |unfused|); 0: bit for bit */
    int variant; /* the choice of the lowering's group the kernel's steps took (xgroup_form) */
} fusion;

static ts_graph *eltwise_chain(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "3x37"), y = xt_input(g, "y", "3x37");
    int a = xt_node(g, "Add", INS(x, y), NOATTR);
    int m = xt_node(g, "Mul", INS(a, xt_const_random(g, "37", -2, 2, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Tanh", INS(xt_node(g, "Relu", INS(m), NOATTR)), NOATTR));
    return g;
}

/* GELU as exporters spell it, x * 0.5 * (1 + erf(x / sqrt 2)): x read by
 * the first and the fourth node (an external of the chain twice), then a
 * Relu; the chain's five nodes and the Relu one vec.eltwise program. */
static ts_graph *gelu_chain(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "4x9x33");
    int d = xt_node(g, "Div", INS(x, xt_const_values(g, TS_F32, "", (const double[]){1.4142135381698608}, 1)), NOATTR);
    int e = xt_node(g, "Add", INS(xt_node(g, "Erf", INS(d), NOATTR), xt_const_values(g, TS_F32, "", (const double[]){1}, 1)),
                    NOATTR);
    int m = xt_node(g, "Mul", INS(x, e), NOATTR);
    m = xt_node(g, "Mul", INS(m, xt_const_values(g, TS_F32, "", (const double[]){0.5}, 1)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(m), NOATTR));
    return g;
}

static ts_graph *conv_relu(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    xt_output(g, xt_conv3x3_relu(g, xt_input(g, "x", "1x16x12x12"), 16, &Rng));
    return g;
}

/* Conv + residual Add (oneDNN's sum post-op) + Relu. */
static ts_graph *conv_residual(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x12x12");
    int y = xt_node(g, "Add", INS(xt_conv3x3(g, x, 16, &Rng), x), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* MatMul by a constant + a bias Add (bias_add) + Relu: few rows go to
 * vec.gemv, more to oneDNN. */
static ts_graph *matmul_bias(const char *xdims)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", xdims);
    int y = xt_node(g, "MatMul", INS(x, xt_const_random(g, "24x19", -0.3, 0.3, &Rng)), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "19", -0.5, 0.5, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}
static ts_graph *gemv_bias(void) { return matmul_bias("5x24"); }
static ts_graph *gemm_bias(void) { return matmul_bias("3x64x24"); }

/* LayerNorm written out (opset < 17): ReduceMean, Sub, Pow, ReduceMean,
 * Add eps, Sqrt, Div, Mul gamma, Add beta, over x's axis `axis`. */
static ts_graph *layernorm_ops(const char *xdims, int64_t axis, const char *pdims)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", xdims);
    ts_attr at[] = {ts_attr_ints("axes", &axis, 1)};
    int m = xt_node(g, "ReduceMean", INS(x), at, 1);
    int d = xt_node(g, "Sub", INS(x, m), NOATTR);
    int s = xt_node(g, "Pow", INS(d, xt_const_values(g, TS_F32, "", (const double[]){2}, 1)), NOATTR);
    int v = xt_node(g, "ReduceMean", INS(s), at, 1);
    int e = xt_node(g, "Add", INS(v, xt_const_values(g, TS_F32, "", (const double[]){1e-5}, 1)), NOATTR);
    int y = xt_node(g, "Div", INS(d, xt_node(g, "Sqrt", INS(e), NOATTR)), NOATTR);
    y = xt_node(g, "Mul", INS(y, xt_const_random(g, pdims, 0.5, 1.5, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Add", INS(y, xt_const_random(g, pdims, -1, 1, &Rng)), NOATTR));
    return g;
}
static ts_graph *layernorm_rows(void) { return layernorm_ops("2x7x96", -1, "96"); }
static ts_graph *layernorm_channels(void) { return layernorm_ops("2x24x9x31", 1, "24x1x1"); }

/* x -> GlobalAveragePool -> 1x1 conv (bias) -> Relu -> 1x1 conv (bias)
 * -> Sigmoid -> Mul(x, gate): the squeeze-excite block (the gate's five
 * nodes one vec.se step; the Mul its own step here). */
static ts_graph *se_block(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x32x14x14");
    int s = xt_node(g, "GlobalAveragePool", INS(x), NOATTR);
    s = xt_node(g, "Conv", INS(s, xt_const_random(g, "8x32x1x1", -0.3, 0.3, &Rng), xt_const_random(g, "8", -0.1, 0.1, &Rng)),
                NOATTR);
    s = xt_node(g, "Relu", INS(s), NOATTR);
    s = xt_node(g, "Conv", INS(s, xt_const_random(g, "32x8x1x1", -0.3, 0.3, &Rng), xt_const_random(g, "32", -0.1, 0.1, &Rng)),
                NOATTR);
    s = xt_node(g, "Sigmoid", INS(s), NOATTR);
    xt_output(g, xt_node(g, "Mul", INS(x, s), NOATTR));
    return g;
}

/* ts_fold_gate's form: Conv(x, Mul(W, gate)), gate one value per input
 * channel (an input here). */
static ts_graph *conv_gated(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x20x20"), gate = xt_input(g, "gate", "1x16x1x1");
    int w = xt_node(g, "Mul", INS(xt_const_random(g, "24x16x3x3", -0.3, 0.3, &Rng), gate), NOATTR);
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
    xt_output(g, xt_node(g, "Conv", INS(x, w), at, 1));
    return g;
}

/* Conv -> SiLU as exporters write it (Sigmoid, Mul) or -> Gelu (opset 20). */
static ts_graph *conv_act(bool gelu)
{
    ts_graph *g = ts_graph_new("t", 20);
    int y = xt_conv3x3(g, xt_input(g, "x", "1x16x12x12"), 16, &Rng);
    xt_output(g, gelu ? xt_node(g, "Gelu", INS(y), NOATTR)
                      : xt_node(g, "Mul", INS(y, xt_node(g, "Sigmoid", INS(y), NOATTR)), NOATTR));
    return g;
}
static ts_graph *conv_silu(void) { return conv_act(false); }
static ts_graph *conv_gelu(void) { return conv_act(true); }

/* ShuffleNet's block end: Concat -> Reshape [N, 2, C/2, H, W] ->
 * Transpose [0, 2, 1, 3, 4] -> Reshape [N, C, H, W]. */
static ts_graph *channel_shuffle(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int a = xt_input(g, "a", "1x8x5x6"), b = xt_input(g, "b", "1x8x5x6");
    int c = xt_node(g, "Concat", INS(a, b), ATTRS(ts_attr_int("axis", 1)));
    int r = xt_node(g, "Reshape", INS(c, xt_const_values(g, TS_I64, "5", (const double[]){1, 2, 8, 5, 6}, 5)), NOATTR);
    int t = xt_node(g, "Transpose", INS(r), ATTRS(ts_attr_ints("perm", (int64_t[]){0, 2, 1, 3, 4}, 5)));
    xt_output(g, xt_node(g, "Reshape", INS(t, xt_const_values(g, TS_I64, "4", (const double[]){1, 16, 5, 6}, 4)), NOATTR));
    return g;
}

/* Inference BatchNormalization (nothing before it to fold into) -> Relu. */
static ts_graph *batchnorm_relu(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "2x12x7x9");
    int y = xt_node(g, "BatchNormalization",
                    INS(x, xt_const_random(g, "12", 0.5, 1.5, &Rng), xt_const_random(g, "12", -1, 1, &Rng),
                        xt_const_random(g, "12", -1, 1, &Rng), xt_const_random(g, "12", 0.5, 2, &Rng)),
                    NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* The post-op tails the lowering stage hands a convolution or product
 * (lower_post.c), and its shorter choices when the kernel declines. */
#define I(...) ((const int64_t[]){__VA_ARGS__})

/* Conv -> Add of a per-channel constant (into the bias) -> Relu. */
static ts_graph *conv_bias_add(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_conv3x3(g, xt_input(g, "x", "1x16x12x12"), 16, &Rng);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "16x1x1", -0.5, 0.5, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* A 1x1 conv (channels-last for it) -> depthwise 3x3 stride 2 (2.4 MB in:
 * vec.dwconv) -> bias Add -> HardSwish -> a 1x1 conv. */
static ts_graph *dwconv_tail(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_conv1x1(g, xt_input(g, "x", "1x4x160x160"), 4, 24, &Rng);
    y = xt_node(g, "Conv", INS(y, xt_const_random(g, "24x1x3x3", -0.5, 0.5, &Rng)),
                ATTRS(ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4),
                      ts_attr_int("group", 24)));
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "24x1x1", -0.5, 0.5, &Rng)), NOATTR);
    y = xt_node(g, "HardSwish", INS(y), NOATTR);
    xt_output(g, xt_conv1x1(g, y, 24, 24, &Rng));
    return g;
}

/* A 1x1 conv (channels-last for it) -> grouped 3x3 conv, 4 channels per
 * group (vec.gconv) -> bias Add -> Relu -> a 1x1 conv. */
static ts_graph *gconv_tail(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_conv1x1(g, xt_input(g, "x", "1x4x29x29"), 4, 32, &Rng);
    y = xt_node(g, "Conv", INS(y, xt_const_random(g, "32x4x3x3", -0.5, 0.5, &Rng)),
                ATTRS(ts_attr_ints("pads", I(1, 1, 1, 1), 4), ts_attr_int("group", 8)));
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "32x1x1", -0.5, 0.5, &Rng)), NOATTR);
    y = xt_node(g, "Relu", INS(y), NOATTR);
    xt_output(g, xt_conv1x1(g, y, 32, 32, &Rng));
    return g;
}

/* ConvTranspose (deconv.gemm) -> bias Add -> residual Add: vec_post.c has
 * no residual sum, so deconv.gemm declines the whole tail and takes the
 * bias alone (the stage's second choice); the residual Add is a step. */
static ts_graph *deconv_bias_residual(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x5x6"), r = xt_input(g, "r", "1x24x7x8");
    int y = xt_node(g, "ConvTranspose", INS(x, xt_const_random(g, "16x24x3x3", -0.5, 0.5, &Rng)), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "24x1x1", -0.5, 0.5, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Add", INS(y, r), NOATTR));
    return g;
}

/* MatMul of two run-time values -> Add of a per-column constant -> Relu:
 * a column scale needs constant weights, so dnnl.matmul declines the tail
 * and its affine fold and takes the product alone (the third choice). */
static ts_graph *matmul_runtime_bias(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_node(g, "MatMul", INS(xt_input(g, "a", "3x64x24"), xt_input(g, "b", "3x24x19")), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "19", -0.5, 0.5, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* quantize_dynamic's form: DynamicQuantizeLinear -> MatMulInteger (A's
 * zero point per run) -> Cast -> Mul by x_scale * w_scale -> Add bias ->
 * Relu: the requantization after the int8 product (lower_group.c's
 * requant_chain) as dnnl.matmul_integer's post-ops, the same float32
 * roundings as the unfused Cast, Mul, Add, Relu. */
static ts_graph *matmul_integer_requant(void)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "2x6x32"), dql[3];
    ts_error e = {0};
    cr_assert_geq(ts_graph_add_node(g, "DynamicQuantizeLinear", "dql", &x, 1, NULL, 0, 3, NULL, dql, &e), 0, "%s", e.msg);
    ts_shape ws = xt_shape("32x24");
    ts_tensor *wf = ts_tensor_new(TS_F32, &ws, &e), *wt = ts_tensor_new(TS_I8, &ws, &e);
    cr_assert(wf && wt, "%s", e.msg);
    ts_tensor_fill_random(wf, &Rng, -127, 128);
    for (int64_t i = 0; i < ts_tensor_numel(wt); i++) ts_tensor_set_f64(wt, i, fmin(floor(ts_tensor_get_f64(wf, i)), 127));
    ts_tensor_unref(wf);
    int w = xt_const(g, wt);
    int y = xt_node(g, "MatMulInteger", INS(dql[0], w, dql[2], xt_const_values(g, TS_I8, "", (const double[]){0}, 1)),
                    NOATTR);
    y = xt_node(g, "Cast", INS(y), ATTRS(ts_attr_int("to", 1)));
    int s = xt_node(g, "Mul", INS(dql[1], xt_const_values(g, TS_F32, "", (const double[]){0.004}, 1)), NOATTR);
    y = xt_node(g, "Mul", INS(y, s), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "24", -1, 1, &Rng)), NOATTR);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* A decoder's self-attention for two new tokens over a cache of 7 keys:
 * Transpose(K) -> MatMul(Q, Kt) -> Mul 0.25 -> Where(causal mask, -inf,
 * S) -> Softmax -> MatMul(P, V), one vec.attention step
 * (lower_attention.c). */
static ts_graph *attention(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int q = xt_input(g, "q", "1x3x2x16"), k = xt_input(g, "k", "1x3x7x16"), v = xt_input(g, "v", "1x3x7x16");
    int s = xt_node(g, "MatMul", INS(q, xt_node(g, "Transpose", INS(k), ATTRS(ts_attr_ints("perm", I(0, 1, 3, 2), 4)))),
                    NOATTR);
    s = xt_node(g, "Mul", INS(s, xt_const_values(g, TS_F32, "", (const double[]){0.25}, 1)), NOATTR);
    double m[2 * 7];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 7; j++) m[i * 7 + j] = j > 5 + i;
    int mask = xt_const_values(g, TS_BOOL, "2x7", m, 14);
    s = xt_node(g, "Where", INS(mask, xt_const_values(g, TS_F32, "", (const double[]){-INFINITY}, 1), s), NOATTR);
    s = xt_node(g, "Softmax", INS(s), ATTRS(ts_attr_int("axis", -1)));
    xt_output(g, xt_node(g, "MatMul", INS(s, v), NOATTR));
    return g;
}

/* Three one-row products by one 512x512 weight (1 MiB: an eighth of the
 * largest L2 roofline.c believes, 8 MiB, so stacked on any machine), the
 * first with Tanh after it, summed: the
 * first product's step stacks the other two (lower_gemv.c) and runs the
 * Tanh on its result; the Adds read the stacked outputs. */
static ts_graph *gemv_stack(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int w = xt_const_random(g, "512x512", -0.1, 0.1, &Rng), y = -1;
    for (int i = 0; i < 3; i++) {
        char name[4] = {'x', (char)('0' + i), 0};
        int m = xt_node(g, "MatMul", INS(xt_input(g, name, "1x512"), w), NOATTR);
        y = i ? xt_node(g, "Add", INS(y, m), NOATTR) : xt_node(g, "Tanh", INS(m), NOATTR);
    }
    xt_output(g, y);
    return g;
}

/* A Concat read only by two Relus (NASNet-A's cell outputs): vec.concat
 * writes max(x, 0) once, both Relus' values (lower_concat.c). */
static ts_graph *concat_relus(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int a = xt_input(g, "a", "1x8x5x5"), b = xt_input(g, "b", "1x8x5x5");
    int c = xt_node(g, "Concat", INS(a, b, a), ATTRS(ts_attr_int("axis", 1)));
    xt_output(g, xt_node(g, "Add", INS(xt_node(g, "Relu", INS(c), NOATTR), xt_node(g, "Relu", INS(c), NOATTR)), NOATTR));
    return g;
}

/* A dense block (DenseNet): Concat(x, y1), Concat(x, y1, y2), one buffer
 * whose prefixes the two members are (lower_concat.c); the convs' outputs
 * written into their slices where their layouts allow. */
static ts_graph *dense_block(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x6x6"), y1 = xt_conv3x3(g, x, 16, &Rng);
    int c1 = xt_node(g, "Concat", INS(x, y1), ATTRS(ts_attr_int("axis", 1)));
    int c2 = xt_node(g, "Concat", INS(x, y1, xt_conv1x1(g, c1, 32, 16, &Rng)), ATTRS(ts_attr_int("axis", 1)));
    xt_output(g, xt_conv1x1(g, c2, 48, 8, &Rng));
    return g;
}

/* Longformer's band: MatMul(Gather(K, idx, axis -2), Q) with Q of shape
 * qshape; the MatMul's output. */
static int band_matmul(ts_graph *g, const char *qshape)
{
    int k = xt_input(g, "k", "1x2x12x8"), q = xt_input(g, "q", qshape);
    double ix[12 * 3];
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 3; j++) ix[i * 3 + j] = (i + 2 * (j - 1) + 12) % 12 - (j == 2 ? 12 : 0);
    int gb = xt_node(g, "Gather", INS(k, xt_const_values(g, TS_I64, "12x3", ix, 36)), ATTRS(ts_attr_int("axis", -2)));
    return xt_node(g, "MatMul", INS(gb, q), NOATTR);
}

/* The band read through the index with one column on the other side, the
 * Gather deferred (lower_band.c). */
static ts_graph *band_scores(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    xt_output(g, band_matmul(g, "1x2x12x8x1"));
    return g;
}

static const fusion fusions[] = {
    {"vec.eltwise", eltwise_chain, 3, 0, 0},
    {"vec.eltwise", gelu_chain, 5, 0, 0},
    {"dnnl.conv", conv_relu, 1, 0, 0},
    {"dnnl.conv", conv_residual, 2, 0, 0},
    {"vec.gemv", gemv_bias, 2, 0, 0},
    {"dnnl.matmul", gemm_bias, 2, 0, 0},
    {"vec.layernorm.ops", layernorm_rows, 8, 0x1p-20, 0},
    {"vec.layernorm.ops", layernorm_channels, 8, 0x1p-20, 0},
    {"vec.se", se_block, 4, 0x1p-20, 0},
    {"dnnl.conv_gated", conv_gated, 1, 0x1p-20, 0},
    {"dnnl.conv", conv_silu, 2, 0x1p-20, 0},
    {"dnnl.conv", conv_gelu, 1, 0x1p-20, 0},
    {"vec.shuffle", channel_shuffle, 3, 0, 0},
    {"vec.batchnorm", batchnorm_relu, 1, 0, 0},
    /* the bias summed with the Add's constant first: one rounding */
    {"dnnl.conv", conv_bias_add, 2, 0x1p-20, 0},
    {"vec.dwconv", dwconv_tail, 2, 0x1p-20, 0},
    /* the grouped sums in another order than oneDNN's (rotated accumulators) */
    {"vec.gconv", gconv_tail, 2, 1e-5, 0},
    {"deconv.gemm", deconv_bias_residual, 1, 0x1p-20, 1},
    {"dnnl.matmul", matmul_runtime_bias, 0, 0, 2},
    {"dnnl.matmul_integer", matmul_integer_requant, 4, 0, 0},
    {"vec.attention", attention, 5, 1e-5, 0},
    /* a one-row product's sum with one accumulator instead of two (vec_gemv.c) */
    {"vec.gemv", gemv_stack, 3, 1e-5, 0},
    {"vec.concat", concat_relus, 2, 0, 0},
    {"dnnl.dense_concat", dense_block, 0, 0, 0},
    /* a dot product of 8 in vec_band.c's order against the matmul's */
    {"vec.band", band_scores, 0, 0x1p-20, 0},
};

/* The planted wrong fused step: the kernel of every step of `kernel` in a
 * built plan replaced by one that runs it and then moves each float32
 * element of its first output by 2^-10 (1 + |y|), far above every stated
 * tolerance; the comparison must refuse the plan (each_fusion_wrong_step_
 * caught). */
static const xkernel *Real;
static int64_t Perturb_elems;
static void perturbed_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    Real->run(s, in, out, scratch);
    float *y = out[0];
    for (int64_t i = 0; i < Perturb_elems; i++) y[i] += 0x1p-10f * (1 + fabsf(y[i]));
}
static xkernel Perturbed;

static int plant_wrong_steps(ts_plan *plan, const char *kernel)
{
    xplan *p = (xplan *)plan;
    int planted = 0;
    for (int i = 0; i < p->nsteps; i++) {
        xstep *s = &p->steps[i];
        if (strcmp(s->k->name, kernel) || s->nout < 1 || s->out[0] < 0) continue;
        const xbuf *b = &p->bufs[s->out[0]];
        cr_assert_eq(b->dtype, TS_F32, "%s: step %d writes %s", kernel, i, ts_dtype_name(b->dtype));
        cr_assert(!Real || Real == s->k);
        Real = s->k;
        Perturbed = *s->k;
        Perturbed.run = perturbed_run;
        Perturb_elems = ts_shape_numel(&b->shape);
        s->k = &Perturbed;
        planted++;
    }
    return planted;
}

/* Runs g planned with o on inputs in [-1, 1) (one seed for every plan);
 * the output, the plan's statistics and its steps of `kernel` (their
 * result moved off when `wrong`). */
static void run(const ts_graph *g, const ts_plan_opts *o, ts_tensor **out, ts_plan_stats *st, const char *kernel,
                int *kernel_steps, int *variant, bool wrong)
{
    ts_error e = {0};
    ts_tensor *in[4] = {0};
    uint64_t rng = 99;
    for (int i = 0; i < g->ninputs; i++) {
        in[i] = ts_tensor_new(TS_F32, &g->values[g->inputs[i]].shape, &e);
        ts_tensor_fill_random(in[i], &rng, -1, 1);
    }
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, o, &p, &e), TS_OK, "%s", e.msg);
    xt_check_memplan(p);
    ts_plan_stats_get(p, st);
    *kernel_steps = xt_steps_of(p, kernel);
    *variant = -1;
    for (int i = 0; i < ((const xplan *)p)->nsteps; i++)
        if (!strcmp(((const xplan *)p)->steps[i].k->name, kernel)) *variant = ((const xplan *)p)->steps[i].variant;
    if (!o->no_fusion && !*kernel_steps)
        for (int i = 0; i < ((const xplan *)p)->nsteps; i++)
            cr_log_error("step %d: %s", i, ((const xplan *)p)->steps[i].k->name);
    Real = NULL;
    if (wrong) cr_assert_geq(plant_wrong_steps(p, kernel), 1);
    out[0] = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    ts_plan_free(p);
    for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
}

/* The largest |a - b| (a fused, b unfused) and, in *at, its index; *big:
 * max(1, max |b|), the scale of the tolerances. */
static double difference(const ts_tensor *a, const ts_tensor *b, double *big, int64_t *at)
{
    const float *x = a->data, *y = b->data;
    double worst = 0;
    *big = 1;
    *at = 0;
    for (int64_t i = 0; i < ts_tensor_numel(b); i++) *big = fmax(*big, fabs(y[i]));
    for (int64_t i = 0; i < ts_tensor_numel(b); i++) {
        double d = fabs((double)x[i] - y[i]);
        if (d > worst || d != d) worst = d, *at = i;
    }
    return worst;
}

/* Fused (its result moved off when `wrong`) against unfused at 1 and 2
 * threads: the largest difference over the tolerance's scale, checked
 * against the case's expectations. */
static double against_unfused(const fusion *fu, size_t f, const ts_graph *g, bool wrong)
{
    double least = INFINITY;
    /* vec.dwconv reads channels-last: a depthwise net of these ops otherwise
     * runs in 16-channel blocks on AVX-512 (conv.stem_blocks, net_blocks.c),
     * where oneDNN's depthwise kernel serves it */
    const char *skip = !strcmp(fu->kernel, "vec.dwconv") ? "conv.stem_blocks" : NULL;
    for (int threads = 1; threads <= 2; threads++) {
        ts_tensor *a = NULL, *b = NULL;
        ts_plan_stats sa, sb;
        int ka, kb, va, vb;
        run(g, &(ts_plan_opts){.threads = threads, .skip = skip}, &a, &sa, fu->kernel, &ka, &va, wrong);
        run(g, &(ts_plan_opts){.threads = threads, .no_fusion = true, .skip = skip}, &b, &sb, fu->kernel, &kb, &vb,
            false);
        cr_assert_eq(va, fu->variant, "%s (case %zu): the step took choice %d of its group, not %d", fu->kernel, f, va,
                     fu->variant);
        cr_assert(ka >= 1 && sa.fused_nodes >= fu->fused, "%s (case %zu): %d steps, %d nodes fused", fu->kernel, f, ka,
                  sa.fused_nodes);
        cr_assert_eq(sb.fused_nodes, 0, "%s (case %zu): the unfused plan fused %d", fu->kernel, f, sb.fused_nodes);
        double big;
        int64_t at;
        double worst = difference(a, b, &big, &at);
        if (!wrong)
            cr_assert(worst <= fu->tol * big, "%s (case %zu, %d threads) [%lld]: fused %.9g, unfused %.9g (tolerance %g)",
                      fu->kernel, f, threads, (long long)at, ((float *)a->data)[at], ((float *)b->data)[at],
                      fu->tol * big);
        cr_log_info("%s (case %zu, %d threads%s): largest difference %.3g of %.3g", fu->kernel, f, threads,
                    wrong ? ", planted wrong step" : "", worst, big);
        least = fmin(least, worst / big);
        ts_tensor_unref(a);
        ts_tensor_unref(b);
    }
    return least;
}

Test(lowering, each_fusion_against_the_unfused_steps)
{
    for (size_t f = 0; f < sizeof fusions / sizeof *fusions; f++) {
        ts_graph *g = fusions[f].build();
        against_unfused(&fusions[f], f, g, false);
        ts_graph_free(g);
    }
}

/* The comparison above refutes a wrong fused step of every fusion: its
 * result off by 2^-10 relative (a wrong variant of the fused kernel, as a
 * step that drops a bias or rounds to half would be) lies outside the
 * fusion's tolerance at 1 and at 2 threads, so the equality is not
 * vacuous (the step's result reaches the output and the tolerance is
 * tighter than the error). */
Test(lowering, each_fusion_wrong_step_caught)
{
    for (size_t f = 0; f < sizeof fusions / sizeof *fusions; f++) {
        ts_graph *g = fusions[f].build();
        double least = against_unfused(&fusions[f], f, g, true);
        cr_assert_gt(least, fusions[f].tol, "%s (case %zu): the planted wrong step passed (difference %.3g, tolerance %g)",
                     fusions[f].kernel, f, least, fusions[f].tol);
        ts_graph_free(g);
    }
}

/* ---- near misses: graphs one condition away from a fusion, which the
 * lowering stage must not form (the planted wrong variant of each group's
 * detection).  Per case: the node `Miss` that a wrong detection would take
 * into a step of `kernel` must not be in one (unless, with own_step, it
 * heads a step of its own), and the plan equals the unfused steps within
 * the fusion's tolerance, so a detection that took it would be refuted by
 * its result as well.  Shown failing with each condition removed from
 * src/exec (docs/rules.md names the plants). */

static int Miss; /* the node a wrong group would take */

static int producer(const ts_graph *g, int v) { return g->values[v].producer; }

/* A residual Add whose other operand broadcasts (1x16x1x1): no sum post-op
 * (it adds a tensor of the destination's shape; lower_post.c try_residual,
 * and dnnl.conv's residual reorder refuses such a source too). */
static ts_graph *residual_broadcast(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x12x12"), r = xt_input(g, "r", "1x16x1x1");
    int y = xt_node(g, "Add", INS(xt_conv3x3(g, x, 16, &Rng), r), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* Sub(conv, x) in a residual's place: not the sum post-op (conv + x). */
static ts_graph *residual_sub(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x12x12");
    int y = xt_node(g, "Sub", INS(xt_conv3x3(g, x, 16, &Rng), x), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* A residual Add whose other operand is made after the conv (Neg of
 * another input, lowered later): the sum post-op would read it before it
 * is written. */
static ts_graph *residual_not_ready(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x12x12"), z = xt_input(g, "z", "1x16x12x12");
    int c = xt_conv3x3(g, x, 16, &Rng);
    int y = xt_node(g, "Add", INS(c, xt_node(g, "Neg", INS(z), NOATTR)), NOATTR);
    Miss = producer(g, y);
    xt_output(g, y);
    return g;
}

/* Conv -> LeakyRelu 0.1 -> LeakyRelu 0.5: oneDNN's jit kernels run a
 * second post-op of one algorithm with the first one's alpha, so the
 * second stays a step (lower_post.c alg_conflicts). */
static ts_graph *conv_two_leaky(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_conv3x3(g, xt_input(g, "x", "1x16x12x12"), 16, &Rng);
    y = xt_node(g, "LeakyRelu", INS(y), ATTRS(ts_attr_float("alpha", 0.1f)));
    y = xt_node(g, "LeakyRelu", INS(y), ATTRS(ts_attr_float("alpha", 0.5f)));
    Miss = producer(g, y);
    xt_output(g, y);
    return g;
}

/* Conv -> Add of a constant varying along the width (1x16x1x12), not per
 * channel: no bias fold. */
static ts_graph *conv_add_along_width(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_conv3x3(g, xt_input(g, "x", "1x16x12x12"), 16, &Rng);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "1x16x1x12", -0.5, 0.5, &Rng)), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* Two one-row products by two weights of one shape (512x512, stackable
 * sizes on any machine): not stacked (lower_gemv.c: the same weights value). */
static ts_graph *gemv_two_weights(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int a = xt_node(g, "MatMul", INS(xt_input(g, "x0", "1x512"), xt_const_random(g, "512x512", -0.1, 0.1, &Rng)), NOATTR);
    int b = xt_node(g, "MatMul", INS(xt_input(g, "x1", "1x512"), xt_const_random(g, "512x512", -0.1, 0.1, &Rng)), NOATTR);
    Miss = producer(g, b);
    xt_output(g, xt_node(g, "Add", INS(a, b), NOATTR));
    return g;
}

/* A product by the same (square) weights whose input is made from the
 * first product (Tanh of it): not ready when the first is lowered, not
 * stacked (lower_gemv.c: inputs ready). */
static ts_graph *gemv_late_input(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int w = xt_const_random(g, "512x512", -0.1, 0.1, &Rng);
    int a = xt_node(g, "MatMul", INS(xt_input(g, "x0", "1x512"), w), NOATTR);
    int b = xt_node(g, "MatMul", INS(xt_node(g, "Tanh", INS(a), NOATTR), w), NOATTR);
    Miss = producer(g, b);
    xt_output(g, b);
    return g;
}

/* The squeeze-excite gate multiplying another tensor z of x's shape: the
 * Mul is not vec.se's x * gate (lower_post.c se_group). */
static ts_graph *se_gate_on_other(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x32x14x14"), z = xt_input(g, "z", "1x32x14x14");
    int s = xt_node(g, "GlobalAveragePool", INS(x), NOATTR);
    s = xt_node(g, "Conv", INS(s, xt_const_random(g, "8x32x1x1", -0.3, 0.3, &Rng), xt_const_random(g, "8", -0.1, 0.1, &Rng)),
                NOATTR);
    s = xt_node(g, "Relu", INS(s), NOATTR);
    s = xt_node(g, "Conv", INS(s, xt_const_random(g, "32x8x1x1", -0.3, 0.3, &Rng), xt_const_random(g, "32", -0.1, 0.1, &Rng)),
                NOATTR);
    s = xt_node(g, "Sigmoid", INS(s), NOATTR);
    int y = xt_node(g, "Mul", INS(z, s), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Neg", INS(y), NOATTR)); /* vec.se takes no Mul writing a graph output */
    return g;
}

/* Mul(W, gate) with the gate one value per output channel (16x1x1x1 on
 * 16x16x3x3 weights: as many values as input channels, along the wrong
 * axis): not a gate on the conv's input (lower_post.c gate_folds). */
static ts_graph *gate_per_output_channel(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "1x16x20x20"), gate = xt_input(g, "gate", "16x1x1x1");
    int w = xt_node(g, "Mul", INS(xt_const_random(g, "16x16x3x3", -0.3, 0.3, &Rng), gate), NOATTR);
    Miss = producer(g, w);
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)};
    xt_output(g, xt_node(g, "Conv", INS(x, w), at, 1));
    return g;
}

/* LayerNorm's spelling with Pow(d, 3) for the variance: not
 * vec.layernorm.ops (lower_group.c: the exponent 2). */
static ts_graph *layernorm_cube(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "2x7x96");
    int64_t axis = -1;
    ts_attr at[] = {ts_attr_ints("axes", &axis, 1)};
    int m = xt_node(g, "ReduceMean", INS(x), at, 1);
    int d = xt_node(g, "Sub", INS(x, m), NOATTR);
    int s = xt_node(g, "Pow", INS(d, xt_const_values(g, TS_F32, "", (const double[]){3}, 1)), NOATTR);
    Miss = producer(g, s);
    int v = xt_node(g, "ReduceMean", INS(s), at, 1);
    int e = xt_node(g, "Add", INS(v, xt_const_values(g, TS_F32, "", (const double[]){1}, 1)), NOATTR);
    xt_output(g, xt_node(g, "Div", INS(d, xt_node(g, "Sqrt", INS(e), NOATTR)), NOATTR)); /* 1 + mean d^3 > 0 here */
    return g;
}

/* The int8 product's requantization by a per-row scale (2x6x1): not one
 * scale, so not dnnl.matmul_integer's output scale (lower_group.c
 * requant_chain). */
static ts_graph *requant_per_row(void)
{
    ts_graph *g = ts_graph_new("t", 13);
    int x = xt_input(g, "x", "2x6x32"), dql[3];
    ts_error e = {0};
    cr_assert_geq(ts_graph_add_node(g, "DynamicQuantizeLinear", "dql", &x, 1, NULL, 0, 3, NULL, dql, &e), 0, "%s", e.msg);
    ts_shape ws = xt_shape("32x24");
    ts_tensor *wt = ts_tensor_new(TS_I8, &ws, &e);
    cr_assert(wt, "%s", e.msg);
    for (int64_t i = 0; i < ts_tensor_numel(wt); i++) ts_tensor_set_f64(wt, i, (double)((i * 37) % 255) - 127);
    int y = xt_node(g, "MatMulInteger", INS(dql[0], xt_const(g, wt), dql[2], xt_const_values(g, TS_I8, "", (const double[]){0}, 1)),
                    NOATTR);
    y = xt_node(g, "Cast", INS(y), ATTRS(ts_attr_int("to", 1)));
    int s = xt_node(g, "Mul", INS(dql[1], xt_const_random(g, "2x6x1", 0.001, 0.01, &Rng)), NOATTR);
    y = xt_node(g, "Mul", INS(y, s), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* Attention's Softmax over the queries (axis -2), not the keys:
 * not vec.attention (lower_attention.c: the last axis). */
static ts_graph *attention_query_softmax(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int q = xt_input(g, "q", "1x3x2x16"), k = xt_input(g, "k", "1x3x7x16"), v = xt_input(g, "v", "1x3x7x16");
    int s = xt_node(g, "MatMul", INS(q, xt_node(g, "Transpose", INS(k), ATTRS(ts_attr_ints("perm", I(0, 1, 3, 2), 4)))),
                    NOATTR);
    s = xt_node(g, "Mul", INS(s, xt_const_values(g, TS_F32, "", (const double[]){0.25}, 1)), NOATTR);
    s = xt_node(g, "Softmax", INS(s), ATTRS(ts_attr_int("axis", -2)));
    Miss = producer(g, s);
    xt_output(g, xt_node(g, "MatMul", INS(s, v), NOATTR));
    return g;
}

/* ShuffleNet's block end with the Transpose's permutation [0, 1, 2, 4, 3]
 * (not the shuffle): not vec.shuffle. */
static ts_graph *shuffle_other_perm(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int a = xt_input(g, "a", "1x8x5x6"), b = xt_input(g, "b", "1x8x5x6");
    int c = xt_node(g, "Concat", INS(a, b), ATTRS(ts_attr_int("axis", 1)));
    int r = xt_node(g, "Reshape", INS(c, xt_const_values(g, TS_I64, "5", (const double[]){1, 2, 8, 5, 6}, 5)), NOATTR);
    int t = xt_node(g, "Transpose", INS(r), ATTRS(ts_attr_ints("perm", (int64_t[]){0, 1, 2, 4, 3}, 5)));
    Miss = producer(g, t);
    xt_output(g, xt_node(g, "Reshape", INS(t, xt_const_values(g, TS_I64, "4", (const double[]){1, 16, 5, 6}, 4)), NOATTR));
    return g;
}

/* A Concat read by a Relu and by a Neg: the Relu's value is not the
 * Concat's max(x, 0) alone (lower_concat.c: Relus the only readers). */
static ts_graph *concat_other_reader(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int a = xt_input(g, "a", "1x8x5x5"), b = xt_input(g, "b", "1x8x5x5");
    int c = xt_node(g, "Concat", INS(a, b), ATTRS(ts_attr_int("axis", 1)));
    int r = xt_node(g, "Relu", INS(c), NOATTR);
    Miss = producer(g, r);
    xt_output(g, xt_node(g, "Add", INS(r, xt_node(g, "Neg", INS(c), NOATTR)), NOATTR));
    return g;
}

/* An element-wise chain x -> Relu -> Add(y) growing 3x37 to 4x3x37 ->
 * Tanh: the Add does not join the Relu's chain (lower_chain.c: the
 * chain's shape); it may start its own. */
static ts_graph *chain_growth(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "3x37"), y = xt_input(g, "y", "4x3x37");
    int a = xt_node(g, "Add", INS(xt_node(g, "Relu", INS(x), NOATTR), y), NOATTR);
    Miss = producer(g, a);
    xt_output(g, xt_node(g, "Tanh", INS(a), NOATTR));
    return g;
}

/* BatchNormalization -> LeakyRelu (not a Relu): not vec.batchnorm's
 * (lower_group.c batchnorm_relu). */
static ts_graph *batchnorm_leaky(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "2x12x7x9");
    int y = xt_node(g, "BatchNormalization",
                    INS(x, xt_const_random(g, "12", 0.5, 1.5, &Rng), xt_const_random(g, "12", -1, 1, &Rng),
                        xt_const_random(g, "12", -1, 1, &Rng), xt_const_random(g, "12", 0.5, 2, &Rng)),
                    NOATTR);
    y = xt_node(g, "LeakyRelu", INS(y), ATTRS(ts_attr_float("alpha", 0.2f)));
    Miss = producer(g, y);
    xt_output(g, y);
    return g;
}

/* MatMul -> Add of a constant per row (64x1), not per column: no bias
 * fold (lower_post.c per_channel, along the product's last axis). */
static ts_graph *matmul_add_per_row(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = xt_node(g, "MatMul", INS(xt_input(g, "x", "3x64x24"), xt_const_random(g, "24x19", -0.3, 0.3, &Rng)), NOATTR);
    y = xt_node(g, "Add", INS(y, xt_const_random(g, "64x1", -0.5, 0.5, &Rng)), NOATTR);
    Miss = producer(g, y);
    xt_output(g, xt_node(g, "Relu", INS(y), NOATTR));
    return g;
}

/* Longformer's band read by a MatMul with two columns on the other side
 * (1x2x12x8x2): vec.band computes one (lower_band.c: the other operand's
 * last dim 1), so neither the MatMul nor the Gather is its. */
static ts_graph *band_two_columns(void)
{
    ts_graph *g = ts_graph_new("t", 14);
    int y = band_matmul(g, "1x2x12x8x2");
    Miss = producer(g, y);
    xt_output(g, y);
    return g;
}

typedef struct near_miss {
    const char *kernel; /* the fusion it nearly is */
    ts_graph *(*build)(void);
    double tol;    /* the fusion's tolerance (the other kernels' differences) */
    bool own_step; /* Miss may head its own step of `kernel` (a product not stacked) */
} near_miss;

static const near_miss near_misses[] = {
    {"dnnl.conv", residual_broadcast, 0, false},
    {"dnnl.conv", residual_sub, 0, false},
    {"dnnl.conv", residual_not_ready, 0, false},
    {"dnnl.conv", conv_two_leaky, 0, false},
    {"dnnl.conv", conv_add_along_width, 0, false},
    {"dnnl.matmul", matmul_add_per_row, 0, false},
    {"vec.eltwise", chain_growth, 0, true},
    {"vec.batchnorm", batchnorm_leaky, 0, false},
    {"vec.gemv", gemv_two_weights, 1e-5, true},
    {"vec.gemv", gemv_late_input, 1e-5, true},
    {"vec.se", se_gate_on_other, 0x1p-20, false},
    {"dnnl.conv_gated", gate_per_output_channel, 0x1p-20, false},
    {"vec.layernorm.ops", layernorm_cube, 0x1p-20, false},
    {"dnnl.matmul_integer", requant_per_row, 0, false},
    {"vec.attention", attention_query_softmax, 1e-5, false},
    {"vec.concat", concat_other_reader, 0, false},
    {"vec.shuffle", shuffle_other_perm, 0, false},
    {"vec.band", band_two_columns, 0x1p-20, false},
};

Test(lowering, near_misses_not_fused)
{
    for (size_t f = 0; f < sizeof near_misses / sizeof *near_misses; f++) {
        const near_miss *nm = &near_misses[f];
        Miss = -1;
        ts_graph *g = nm->build();
        cr_assert_geq(Miss, 0);
        for (int threads = 1; threads <= 2; threads++) {
            ts_error e = {0};
            ts_tensor *in[4] = {0}, *out[2] = {0};
            const char *taken = NULL;
            uint64_t rng = 99;
            for (int i = 0; i < g->ninputs; i++) {
                in[i] = ts_tensor_new(TS_F32, &g->values[g->inputs[i]].shape, &e);
                ts_tensor_fill_random(in[i], &rng, -1, 1);
            }
            for (int u = 0; u < 2; u++) {
                ts_plan *plan = NULL;
                cr_assert_eq(ts_plan_build(g, &(ts_plan_opts){.threads = threads, .no_fusion = u}, &plan, &e), TS_OK,
                             "%s", e.msg);
                const xplan *p = (const xplan *)plan;
                bool heads = false;
                for (int i = 0; i < p->nsteps; i++) heads |= p->steps[i].node == Miss;
                const xkernel *by = p->claimed_by[Miss];
                if (!u && by && !strcmp(by->name, nm->kernel) && !(nm->own_step && heads)) taken = by->name;
                out[u] = ts_tensor_new(TS_F32, &g->values[g->outputs[0]].shape, &e);
                cr_assert_eq(ts_plan_run(plan, in, &out[u], &e), TS_OK, "%s", e.msg);
                ts_plan_free(plan);
            }
            double big;
            int64_t at;
            double worst = difference(out[0], out[1], &big, &at);
            cr_expect(!taken && worst <= nm->tol * big,
                      "%s (near miss %zu, %d threads): node %d (%s) %s a step of %s; [%lld] %.9g, unfused %.9g "
                      "(difference %.3g, tolerance %.3g)",
                      nm->kernel, f, threads, Miss, g->nodes[Miss].op->name, taken ? "taken into" : "not in",
                      nm->kernel, (long long)at, ((float *)out[0]->data)[at], ((float *)out[1]->data)[at], worst,
                      nm->tol * big);
            for (int i = 0; i < 2; i++) ts_tensor_unref(out[i]);
            for (int i = 0; i < g->ninputs; i++) ts_tensor_unref(in[i]);
        }
        ts_graph_free(g);
    }
}

/* ---- kernels read only the nodes they are handed (issue 27 must-show:
 * "fails when a kernel reads a graph node other than its own, outside the
 * lowering stage").  A kernel reads nodes through xplan_node; with the step
 * check on, plan.c refuses a step whose kernel read a node that is neither
 * the one it lowers nor one of the group the lowering stage handed it.
 * tests/cli/kernel_nodes.sh keeps direct graph walks out of the kernel
 * files that are so served. */

static int Other = -1; /* the node the planted kernel reads */

static ts_status own_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)xplan_node(p, n);
    if (xstep_alloc(s, 1, 1, err)) return err->code;
    s->in[0] = xplan_value_buf(p, p->g->nodes[n].inputs[0]);
    s->out[0] = xplan_value_buf(p, p->g->nodes[n].outputs[0]);
    return TS_OK;
}

static ts_status planted_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)xplan_node(p, Other); /* e.g. to see whether its consumer is a Relu */
    return own_build(p, n, s, err);
}

static const xkernel own = {"test.own", own_build, NULL, NULL}, planted = {"test.planted", planted_build, NULL, NULL};

Test(lowering, kernel_reading_another_node_refused)
{
    cr_assert(setenv("TSOPT_CHECK_STEPS", "1", 1) == 0);
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "4x8");
    xt_output(g, xt_node(g, "Neg", INS(xt_node(g, "Relu", INS(x), NOATTR)), NOATTR));
    int relu = g->values[g->nodes[1].inputs[0]].producer, neg = 1;
    cr_assert_eq(g->nodes[neg].op, &ts_op_neg);
    Other = relu;
    ts_error e = {0};
    const xkernel *k[2] = {&own, &planted};
    for (int i = 0; i < 2; i++) {
        xplan *p = calloc(1, sizeof *p);
        p->g = p->built_g = g;
        cr_assert_eq(xplan_init(p, &e), TS_OK, "%s", e.msg);
        xstep s = {.k = k[i], .node = neg};
        ts_status st = xplan_build_step(p, k[i], neg, 0, &s, &e);
        if (i == 0) {
            cr_assert_eq(st, TS_OK, "%s", e.msg);
        } else {
            cr_assert_eq(st, TS_ERR_INVALID, "the planted read of node %d passed", relu);
            cr_assert(strstr(e.msg, "kernel test.planted of node") && strstr(e.msg, "reads node"), "%s", e.msg);
        }
        xstep_clear(&s);
        ts_plan_free((ts_plan *)p);
    }
    ts_graph_free(g);
}

/* ---- a kernel declines only on the plan as it found it (issue 27 §3: the
 * per-candidate undo in plan.c is gone).  A kernel decides everything it
 * may decline on before it makes a buffer or a step; xplan_build_step fails
 * the plan, naming the kernel, on a decline that left buffers or steps
 * behind.  Planted: one declining after making its output's buffer, one
 * after inserting a step; the one declining first passes through as a
 * decline (the next candidate is tried). */

static ts_status decline_first_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)p, (void)n, (void)s, (void)err;
    return TS_ERR_UNSUPPORTED;
}

static ts_status buffer_then_decline_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)s, (void)err;
    (void)xplan_value_buf(p, xplan_node(p, n)->outputs[0]); /* e.g. to look at the layout it would get */
    return TS_ERR_UNSUPPORTED;
}

static ts_status step_then_decline_build(xplan *p, int n, xstep *s, ts_error *err)
{
    xstep t = {.k = &own, .node = n};
    if (own_build(p, n, &t, err) || xplan_push_step(p, &t, err)) return err->code;
    (void)s;
    return TS_ERR_UNSUPPORTED;
}

Test(lowering, kernel_declining_after_touching_the_plan_refused)
{
    ts_graph *g = ts_graph_new("t", 14);
    int x = xt_input(g, "x", "4x8");
    xt_output(g, xt_node(g, "Neg", INS(xt_node(g, "Relu", INS(x), NOATTR)), NOATTR));
    const int relu = 0;
    cr_assert_eq(g->nodes[relu].op, &ts_op_relu);
    static const xkernel first = {"test.decline_first", decline_first_build, NULL, NULL},
                         buffer = {"test.buffer_then_decline", buffer_then_decline_build, NULL, NULL},
                         step = {"test.step_then_decline", step_then_decline_build, NULL, NULL};
    const xkernel *k[3] = {&first, &buffer, &step};
    const char *made[3] = {NULL, "(0 steps, 1 buffers made)", "(1 steps, 2 buffers made)"};
    for (int i = 0; i < 3; i++) {
        ts_error e = {0};
        xplan *p = calloc(1, sizeof *p);
        p->g = p->built_g = g;
        cr_assert_eq(xplan_init(p, &e), TS_OK, "%s", e.msg);
        xstep s = {.k = k[i], .node = relu};
        ts_status st = xplan_build_step(p, k[i], relu, 0, &s, &e);
        if (i == 0) {
            cr_assert_eq(st, TS_ERR_UNSUPPORTED, "a clean decline is a decline: %d %s", st, e.msg);
            cr_assert_eq(p->nsteps, 0);
            cr_assert_eq(p->nbufs, 0);
        } else {
            cr_assert_eq(st, TS_ERR_INVALID, "kernel %s declined after touching the plan and passed", k[i]->name);
            cr_assert(strstr(e.msg, k[i]->name) && strstr(e.msg, "declined after changing the plan") &&
                          strstr(e.msg, made[i]),
                      "%s", e.msg);
        }
        xstep_clear(&s);
        ts_plan_free((ts_plan *)p);
    }
    ts_graph_free(g);
}
