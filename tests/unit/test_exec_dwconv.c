/* vec.dwconv (src/vec/vec_depthwise.c): strided depthwise convolutions
 * from a large channels-last input, with the activations after them.  A
 * 1x1 conv in front makes the input channels-last (oneDNN's layout), as in
 * the mobile nets; every case runs on 1 and 2 threads against the
 * reference interpreter, on shapes that reach every path of the kernel:
 * channel counts with a tail past the 16- and 8-wide vectors, odd and
 * non-square images, padding, dilation, unequal strides, batch 2. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 777;

#define I(...) (int64_t[]){__VA_ARGS__}

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

typedef enum { ACT_NONE, ACT_SILU, ACT_BN_CLIP, ACT_HARDSWISH, ACT_RELU } act_kind;

/* x (N x C0 x H x W) -> 1x1 conv to C -> depthwise KxK conv (attrs) -> act -> output.
 * Returns the number of vec.dwconv steps, after checking both thread counts. */
static int dw_case(const char *x, int C0, int C, int K, const ts_attr *at, int na, act_kind act)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w1[32], w2[32], wd[32], b[16];
    snprintf(w1, sizeof w1, "%dx%dx1x1", C, C0);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, C);
    snprintf(wd, sizeof wd, "%dx1x%dx%d", C, K, K);
    snprintf(b, sizeof b, "%d", C);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", x), cst(g, w1, -0.5, 0.5)}, 2, NULL, 0);
    ts_attr all[8];
    memcpy(all, at, sizeof *at * (size_t)na);
    all[na] = ts_attr_int("group", C);
    y = xt_node(g, "Conv", (int[]){y, cst(g, wd, -0.5, 0.5), cst(g, b, -0.5, 0.5)}, 3, all, na + 1);
    if (act == ACT_SILU) {
        int s = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
        y = xt_node(g, "Mul", (int[]){s, y}, 2, NULL, 0);
    } else if (act == ACT_BN_CLIP) {
        y = xt_node(g, "BatchNormalization",
                    (int[]){y, cst(g, b, 0.5, 1.5), cst(g, b, -1, 1), cst(g, b, -1, 1), cst(g, b, 0.5, 2)}, 5, NULL, 0);
        y = xt_node(g, "Clip", (int[]){y, xt_const_values(g, TS_F32, "", (double[]){0}, 1),
                                       xt_const_values(g, TS_F32, "", (double[]){6}, 1)},
                    3, NULL, 0);
    } else if (act == ACT_HARDSWISH) {
        y = xt_node(g, "HardSwish", &y, 1, NULL, 0);
    } else if (act == ACT_RELU) {
        y = xt_node(g, "Relu", &y, 1, NULL, 0);
    }
    /* a consumer that keeps the result channels-last, as the next block's 1x1 conv does */
    y = xt_node(g, "Conv", (int[]){y, cst(g, w2, -0.5, 0.5)}, 2, NULL, 0);
    xt_output(g, y);
    /* these graphs are whole depthwise nets of ops that read oneDNN's
     * blocks, which run in 16-channel blocks on oneDNN's jit_dw
     * (conv.stem_blocks, dnnl_conv.c): skipped here, the input stays
     * channels-last, as in a net with squeeze-excite or SiLU blocks */
    int got = -1;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads, .skip = "conv.stem_blocks"};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        int k = xt_steps_of(plan, "vec.dwconv");
        cr_assert(got < 0 || k == got, "vec.dwconv: %d steps on 1 thread, %d on 2", got, k);
        got = k;
        ts_plan_free(plan);
    }
    ts_graph_free(g);
    return got;
}

/* 43 channels: two 16-wide vectors, one 8-wide, 3 one by one; 115x115 is
 * odd (the last output column's taps pass the right edge); SiLU fused. */
Test(exec_dwconv, s2_silu_channel_tail)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(dw_case("1x5x115x115", 5, 43, 3, at, 2, ACT_SILU), 1);
}

/* 5x5, pads 2, BatchNormalization folded, ReLU6 (Clip); non-square image. */
Test(exec_dwconv, s2_5x5_bn_relu6)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(2, 2, 2, 2), 4)};
    cr_assert_eq(dw_case("1x7x104x131", 7, 40, 5, at, 2, ACT_BN_CLIP), 1);
}

/* Unequal strides, dilation 2, asymmetric pads, batch 2, HardSwish. */
Test(exec_dwconv, strides_2x3_dilated_batch2_hardswish)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 3), 2), ts_attr_ints("pads", I(0, 2, 2, 1), 4),
                    ts_attr_ints("dilations", I(2, 2), 2)};
    cr_assert_eq(dw_case("2x3x80x90", 3, 56, 3, at, 3, ACT_HARDSWISH), 1);
}

/* No activation after it; 24 channels (16 + 8). */
Test(exec_dwconv, s2_plain)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(dw_case("1x4x150x150", 4, 24, 3, at, 2, ACT_NONE), 1);
}

/* Left to oneDNN: stride 1 (its kernel is faster there), a strided conv
 * whose input is small (under 2 MiB), and one of more than 64 channels
 * (oneDNN splits those between threads). */
Test(exec_dwconv, declines_stride1_and_small_inputs)
{
    ts_attr s1[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(dw_case("1x5x115x115", 5, 43, 3, s1, 1, ACT_SILU), 0);
    ts_attr s2[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(dw_case("1x5x56x56", 5, 43, 3, s2, 2, ACT_RELU), 0);
    cr_assert_eq(dw_case("1x5x112x112", 5, 72, 3, s2, 2, ACT_RELU), 0);
}

/* Hand-computed (24 channels at 160x160: 2.4 MB, over the kernel's 2 MiB
 * minimum): x = 1 everywhere, the 1x1 conv gives channel c the value
 * c + 1, the depthwise 3x3 weights are 1, bias -(c + 1) * 5, stride 2, pads
 * 1, then Relu.  Output (i, j) sums the taps inside the image: 4 at the
 * top-left corner, 6 along the top and left edges, 9 inside (the image is
 * even-sized, so no output sees the bottom/right padding), times c + 1,
 * less 5 (c + 1): corner -> 0 (Relu of -1 (c + 1)), edge -> (c + 1), inside
 * -> 4 (c + 1). */
Test(exec_dwconv, hand_computed)
{
    enum { C = 24 };
    ts_graph *g = ts_graph_new("t", 17);
    double w1[C], wd[C * 9], bd[C];
    for (int c = 0; c < C; c++) {
        w1[c] = c + 1;
        bd[c] = -5.0 * (c + 1);
    }
    for (int k = 0; k < C * 9; k++) wd[k] = 1;
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x1x160x160"), xt_const_values(g, TS_F32, "24x1x1x1", w1, C)},
                    2, NULL, 0);
    y = xt_node(g, "Conv",
                (int[]){y, xt_const_values(g, TS_F32, "24x1x3x3", wd, C * 9), xt_const_values(g, TS_F32, "24", bd, C)},
                3,
                (ts_attr[]){ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4),
                            ts_attr_int("group", C)},
                3);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    /* keeps it channels-last: an identity 1x1 conv */
    double eye[C * C] = {0};
    for (int c = 0; c < C; c++) eye[c * C + c] = 1;
    y = xt_node(g, "Conv", (int[]){y, xt_const_values(g, TS_F32, "24x24x1x1", eye, C * C)}, 2, NULL, 0);
    xt_output(g, y);
    ts_error e = {0};
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan *plan = NULL;
        ts_plan_opts o = {.threads = threads, .skip = "conv.stem_blocks"}; /* channels-last, as in dw_case */
        cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(xt_steps_of(plan, "vec.dwconv"), 1);
        ts_shape xs = xt_shape("1x1x160x160"), ys = xt_shape("1x24x80x80");
        ts_tensor *x = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &ys, &e);
        for (int64_t i = 0; i < ts_tensor_numel(x); i++) ((float *)x->data)[i] = 1;
        cr_assert_eq(ts_plan_run(plan, &x, &out, &e), TS_OK, "%s", e.msg);
        const float *o4 = out->data;
        for (int c = 0; c < C; c++) {
            const float *p = o4 + (int64_t)c * 80 * 80;
            cr_assert_float_eq(p[0], 0.0f, 1e-4, "corner, channel %d", c);
            cr_assert_float_eq(p[5], (float)(c + 1), 1e-4, "top edge, channel %d", c);
            cr_assert_float_eq(p[5 * 80], (float)(c + 1), 1e-4, "left edge, channel %d", c);
            cr_assert_float_eq(p[79 * 80 + 79], 4.0f * (c + 1), 1e-4, "bottom right, channel %d", c);
            cr_assert_float_eq(p[40 * 80 + 33], 4.0f * (c + 1), 1e-4, "inside, channel %d", c);
        }
        ts_tensor_unref(x);
        ts_tensor_unref(out);
        ts_plan_free(plan);
    }
    ts_graph_free(g);
}
