/* oneDNN kernels (src/dnnl/dnnl_*.c): each small graph runs through
 * ts_plan_build/ts_plan_run and must equal the reference interpreter within
 * 1e-4 relative; plan statistics show that fusion and layouts happened. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 12345;

/* Random constant in [lo, hi). */
static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

/* Runs g (its last value is the output) by plan and by reference on random
 * inputs; returns the plan's stats. */
static ts_plan_stats check(ts_graph *g, const ts_plan_opts *o)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, g->nvalues - 1, &e), TS_OK, "%s", e.msg);
    return xt_plan_stats(g, o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
}

/* Conv with the given attributes; X dims, W dims, bias or not. */
static ts_plan_stats conv_case(const char *x, const char *w, bool bias, const ts_attr *at, int na, const char *op)
{
    ts_graph *g = ts_graph_new("t", 17);
    int ins[3] = {xt_input(g, "x", x), cst(g, w, -1, 1), -1};
    if (bias) {
        ts_shape ws = xt_shape(w);
        char b[32];
        snprintf(b, sizeof b, "%lld",
                 (long long)(strcmp(op, "Conv") ? ws.dims[1] * (na && !strcmp(at[na - 1].name, "group") ? at[na - 1].i : 1)
                                                : ws.dims[0]));
        ins[2] = cst(g, b, -1, 1);
    }
    xt_node(g, op, ins, bias ? 3 : 2, at, na);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0, "the oneDNN kernel declined");
    ts_graph_free(g);
    return st;
}

#define I(...) ((const int64_t[]){__VA_ARGS__})

Test(exec_dnnl, conv2d_basic) { conv_case("1x16x10x10", "32x16x3x3", true, NULL, 0, "Conv"); }

Test(exec_dnnl, conv2d_stride_asym_pads_dilation)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 1), 2), ts_attr_ints("pads", I(0, 1, 2, 0), 4),
                    ts_attr_ints("dilations", I(2, 1), 2)};
    conv_case("2x8x13x11", "16x8x3x3", true, at, 3, "Conv");
}

Test(exec_dnnl, conv2d_first_layer_3_channels)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(3, 3, 3, 3), 4)};
    conv_case("1x3x32x32", "64x3x7x7", false, at, 2, "Conv");
}

Test(exec_dnnl, conv_auto_pad_same)
{
    ts_attr at[] = {ts_attr_string("auto_pad", "SAME_UPPER"), ts_attr_ints("strides", I(2, 2), 2)};
    conv_case("1x16x9x9", "16x16x4x4", false, at, 2, "Conv");
}

Test(exec_dnnl, conv1d) { conv_case("1x4x20", "6x4x5", true, (ts_attr[]){ts_attr_ints("pads", I(2, 1), 2)}, 1, "Conv"); }

Test(exec_dnnl, conv3d)
{
    ts_attr at[] = {ts_attr_ints("pads", I(1, 1, 1, 1, 1, 1), 6)};
    conv_case("1x4x6x7x8", "8x4x3x3x3", true, at, 1, "Conv");
}

Test(exec_dnnl, conv_group) { conv_case("1x32x8x8", "64x8x3x3", true, (ts_attr[]){ts_attr_int("group", 4)}, 1, "Conv"); }

Test(exec_dnnl, conv_depthwise)
{
    ts_attr at[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4), ts_attr_int("group", 32)};
    conv_case("1x32x12x12", "32x1x3x3", true, at, 2, "Conv");
}

Test(exec_dnnl, deconv_output_padding)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4),
                    ts_attr_ints("output_padding", I(1, 1), 2)};
    conv_case("1x16x7x7", "16x8x3x3", true, at, 3, "ConvTranspose");
}

Test(exec_dnnl, deconv_group)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_int("group", 2)};
    conv_case("1x8x5x5", "8x3x4x4", true, at, 2, "ConvTranspose");
}

/* conv -> BatchNormalization -> Relu: one step (the BatchNormalization
 * folded into the weights by the graph pass, level basic; the Relu a
 * post-op). */
Test(exec_dnnl, conv_bn_relu_fused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x16x8x8"), cst(g, "32x16x3x3", -1, 1)}, 2,
                 (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4)}, 1);
    int bn = xt_node(g, "BatchNormalization",
                  (int[]){c, cst(g, "32", 0.5, 1.5), cst(g, "32", -1, 1), cst(g, "32", -1, 1), cst(g, "32", 0.5, 2)}, 5,
                  NULL, 0);
    xt_node(g, "Relu", &bn, 1, NULL, 0);
    cr_assert_eq(ts_graph_opt_apply(g, TS_GRAPH_OPT_BASIC, &(ts_error){0}), 1);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fused_nodes, 1);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

/* SiLU after a conv, as PyTorch exports it (Sigmoid, then Mul of the conv's
 * output and the sigmoid, in either order): one step with oneDNN's swish
 * post-op; not when the sigmoid is also used elsewhere. */
static void swish_case(bool swap, bool sigmoid_used_twice)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x16x8x8"), cst(g, "24x16x3x3", -1, 1)}, 2,
                    (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4)}, 1);
    int s = xt_node(g, "Sigmoid", &c, 1, NULL, 0);
    int m = xt_node(g, "Mul", swap ? (int[]){s, c} : (int[]){c, s}, 2, NULL, 0);
    if (sigmoid_used_twice) xt_node(g, "Add", (int[]){m, s}, 2, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    if (!sigmoid_used_twice) cr_assert_eq(st.fused_nodes, 2);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

Test(exec_dnnl, conv_silu_fused) { swish_case(false, false); }
Test(exec_dnnl, conv_silu_fused_swapped) { swish_case(true, false); }
Test(exec_dnnl, conv_silu_sigmoid_shared) { swish_case(false, true); }

/* An activation after another on a conv's result, fused in the graph's
 * order, except a second post-op of the same oneDNN algorithm with other
 * parameters (its own step): oneDNN 2.6 gives it the first one's alpha and
 * beta (fuzzer, seed 3 step 144: Conv -> HardSigmoid (linear, clip 0..1) ->
 * Clip(0.25, 0.5) gave the HardSigmoid's value where the Clip makes it 0.5). */
static void two_activations_case(const char *first, float alpha1, const char *then, float alpha2, int fused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x8x7x8"), cst(g, "6x8x3x3", -1, 1)}, 2,
                    (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4)}, 1);
    ts_attr a1[] = {ts_attr_float("alpha", alpha1)}, a2[] = {ts_attr_float("alpha", alpha2)};
    int a = xt_node(g, first, &c, 1, a1, alpha1 ? 1 : 0);
    if (!strcmp(then, "Clip"))
        xt_node(g, "Clip", (int[]){a, xt_const_values(g, TS_F32, "", (double[]){0.25}, 1),
                                   xt_const_values(g, TS_F32, "", (double[]){0.5}, 1)}, 3, NULL, 0);
    else
        xt_node(g, then, &a, 1, a2, alpha2 ? 1 : 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fused_nodes, fused);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

Test(exec_dnnl, conv_hardsigmoid_clip) { two_activations_case("HardSigmoid", 0, "Clip", 0, 1); }
Test(exec_dnnl, conv_leakyrelu_leakyrelu) { two_activations_case("LeakyRelu", 0.1f, "LeakyRelu", 0.5f, 1); }
Test(exec_dnnl, conv_sigmoid_clip) { two_activations_case("Sigmoid", 0, "Clip", 0, 2); }
Test(exec_dnnl, conv_relu_clip) { two_activations_case("Relu", 0, "Clip", 0, 2); }
Test(exec_dnnl, conv_hardsigmoid_tanh) { two_activations_case("HardSigmoid", 0, "Tanh", 0, 2); }

/* ResNet block tail: conv(conv(x)) + x -> Relu, with x produced by a conv
 * too: the residual Add and Relu fuse; tensors stay blocked between the
 * convolutions (one reorder: the blocked result into the plain output). */
Test(exec_dnnl, residual_and_blocked_chain)
{
    ts_graph *g = ts_graph_new("t", 17);
    ts_attr pad[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    int x = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x32x10x10"), cst(g, "32x32x3x3", -0.2, 0.2)}, 2, pad, 1);
    int a = xt_node(g, "Conv", (int[]){x, cst(g, "32x32x3x3", -0.2, 0.2), cst(g, "32", -1, 1)}, 3, pad, 1);
    a = xt_node(g, "Relu", &a, 1, NULL, 0);
    int b = xt_node(g, "Conv", (int[]){a, cst(g, "32x32x1x1", -0.2, 0.2)}, 2, NULL, 0);
    int s = xt_node(g, "Add", (int[]){b, x}, 2, NULL, 0);
    xt_node(g, "Relu", &s, 1, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fused_nodes, 3, "relu, add, relu fused: got %d", st.fused_nodes);
    cr_assert_eq(st.fallback_steps, 0);
    /* x enters plain (converted inside the first step); oneDNN has only its
     * reference kernel for a blocked src into a plain dst with a sum, so the
     * last conv writes blocked and one reorder fills the plain output */
    cr_assert_eq(st.reorders, 1, "got %d reorders", st.reorders);
    cr_assert_eq(st.ref_impls, 0, "got %d oneDNN reference implementations", st.ref_impls);
    ts_plan_opts plain = {.plain_layout = true};
    ts_graph *g2 = ts_graph_copy(g);
    g2->noutputs = 0;
    st = check(g2, &plain);
    cr_assert_eq(st.reorders, 0);
    ts_graph_free(g2);
    ts_graph_free(g);
}

/* ResNeXt middle: a grouped 3x3 conv with 4 channels per group reading what
 * a 1x1 conv left (which may be NHWC): oneDNN's jit kernels want their own
 * blocked layout, and the reference one (100x slower) must not be chosen. */
Test(exec_dnnl, grouped_after_1x1_not_ref)
{
    ts_graph *g = ts_graph_new("t", 17);
    int a = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x64x14x14"), cst(g, "128x64x1x1", -0.2, 0.2)}, 2, NULL, 0);
    a = xt_node(g, "Relu", &a, 1, NULL, 0);
    ts_attr at[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4), ts_attr_int("group", 32)};
    a = xt_node(g, "Conv", (int[]){a, cst(g, "128x4x3x3", -0.5, 0.5), cst(g, "128", -1, 1)}, 3, at, 2);
    a = xt_node(g, "Relu", &a, 1, NULL, 0);
    xt_node(g, "Conv", (int[]){a, cst(g, "64x128x1x1", -0.2, 0.2)}, 2, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.ref_impls, 0, "got %d oneDNN reference implementations", st.ref_impls);
    ts_graph_free(g);
}

/* DCGAN tail: a ConvTranspose writing the graph output from the previous
 * ConvTranspose's blocked result.  A plain dst there has only oneDNN's
 * reference kernel: the output is written blocked and reordered instead. */
Test(exec_dnnl, deconv_output_after_deconv_not_ref)
{
    ts_graph *g = ts_graph_new("t", 17);
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    int a = xt_node(g, "ConvTranspose", (int[]){xt_input(g, "x", "1x64x8x8"), cst(g, "64x32x4x4", -0.2, 0.2)}, 2, at, 2);
    a = xt_node(g, "Relu", &a, 1, NULL, 0);
    a = xt_node(g, "ConvTranspose", (int[]){a, cst(g, "32x3x4x4", -0.2, 0.2), cst(g, "3", -1, 1)}, 3, at, 2);
    xt_node(g, "Tanh", &a, 1, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.ref_impls, 0, "got %d oneDNN reference implementations", st.ref_impls);
    ts_graph_free(g);
}

/* A blocked conv output read by a plain kernel (Softmax over channels). */
Test(exec_dnnl, blocked_then_plain_consumer)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x16x6x6"), cst(g, "16x16x3x3", -1, 1)}, 2, NULL, 0);
    int c2 = xt_node(g, "Conv", (int[]){c, cst(g, "16x16x1x1", -1, 1)}, 2, NULL, 0);
    xt_node(g, "Sigmoid", &c2, 1, NULL, 0);
    int f = xt_node(g, "Flatten", (int[]){g->nvalues - 1}, 1, NULL, 0);
    xt_node(g, "Softmax", &f, 1, NULL, 0);
    check(g, NULL);
    ts_graph_free(g);
}

static void mm_case(const char *a, const char *b, bool bconst)
{
    ts_graph *g = ts_graph_new("t", 17);
    int ins[2] = {xt_input(g, "a", a), bconst ? cst(g, b, -1, 1) : xt_input(g, "b", b)};
    xt_node(g, "MatMul", ins, 2, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

Test(exec_dnnl, matmul_2d_const) { mm_case("7x33", "33x20", true); }
Test(exec_dnnl, matmul_batched_broadcast) { mm_case("3x1x5x6", "4x6x7", false); }
Test(exec_dnnl, matmul_batched_const_weights) { mm_case("2x3x5x6", "6x7", true); }
Test(exec_dnnl, matmul_vectors) { mm_case("6", "2x6x3", false); }

/* MatMul + bias Add + residual Add + Relu: one step. */
Test(exec_dnnl, matmul_bias_residual_relu)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x8x16");
    int m = xt_node(g, "MatMul", (int[]){x, cst(g, "16x16", -1, 1)}, 2, NULL, 0);
    m = xt_node(g, "Add", (int[]){m, cst(g, "16", -1, 1)}, 2, NULL, 0);
    m = xt_node(g, "Add", (int[]){x, m}, 2, NULL, 0);
    xt_node(g, "Relu", &m, 1, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fused_nodes, 3);
    ts_graph_free(g);
}

static void gemm_case(int ta, int tb, double alpha, double beta, const char *c, bool bconst)
{
    ts_graph *g = ts_graph_new("t", 17);
    ts_attr at[] = {ts_attr_int("transA", ta), ts_attr_int("transB", tb), ts_attr_float("alpha", alpha),
                    ts_attr_float("beta", beta)};
    int ins[3] = {xt_input(g, "a", ta ? "9x5" : "5x9"), bconst ? cst(g, tb ? "11x9" : "9x11", -1, 1) : xt_input(g, "b", tb ? "11x9" : "9x11"),
                  c ? cst(g, c, -1, 1) : -1};
    xt_node(g, "Gemm", ins, c ? 3 : 2, at, 4);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}

Test(exec_dnnl, gemm_plain) { gemm_case(0, 0, 1, 1, "11", true); }
Test(exec_dnnl, gemm_trans_alpha_beta) { gemm_case(1, 1, 0.5, 2.0, "1x11", true); }
Test(exec_dnnl, gemm_transB_scalar_c) { gemm_case(0, 1, 1.5, 0.25, "1", true); }
Test(exec_dnnl, gemm_runtime_b_alpha) { gemm_case(1, 0, 2.0, 1.0, NULL, false); }

/* Fusion stops at a value with two consumers. */
Test(exec_dnnl, no_fusion_across_shared_value)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x8x6x6"), cst(g, "8x8x3x3", -1, 1)}, 2, NULL, 0);
    int r = xt_node(g, "Relu", &c, 1, NULL, 0);
    xt_node(g, "Add", (int[]){r, c}, 2, NULL, 0);
    check(g, NULL);
    ts_graph_free(g);
}

/* conv -> MaxPool -> conv -> GlobalAveragePool: pools on the blocked layout. */
Test(exec_dnnl, pools_keep_blocked)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x16x12x12"), cst(g, "16x16x3x3", -1, 1)}, 2, NULL, 0);
    ts_attr mp[] = {ts_attr_ints("kernel_shape", I(3, 3), 2), ts_attr_ints("strides", I(2, 2), 2),
                    ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    int m = xt_node(g, "MaxPool", &c, 1, mp, 3);
    int c2 = xt_node(g, "Conv", (int[]){m, cst(g, "32x16x1x1", -1, 1)}, 2, NULL, 0);
    xt_node(g, "GlobalAveragePool", &c2, 1, NULL, 0);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    cr_assert_eq(st.reorders, 0, "got %d", st.reorders);
    ts_graph_free(g);
}

Test(exec_dnnl, avgpool_pads_ceil)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x5x9x8");
    ts_attr ap[] = {ts_attr_ints("kernel_shape", I(3, 2), 2), ts_attr_ints("strides", I(2, 2), 2),
                    ts_attr_ints("pads", I(1, 0, 0, 1), 4), ts_attr_int("ceil_mode", 1)};
    xt_node(g, "AveragePool", &x, 1, ap, 4);
    ts_plan_stats st = check(g, NULL);
    cr_assert_eq(st.fallback_steps, 0);
    ts_graph_free(g);
}
