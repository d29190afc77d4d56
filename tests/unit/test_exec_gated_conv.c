/* A squeeze-excite block's Mul(x, gate) folded into the convolution after
 * it by the graph pass ts_fold_gate (src/opt/fold_gate.c: Conv(x, Mul(W,
 * gate))), lowered as one dnnl.conv_gated step (src/dnnl/dnnl_conv.c), the
 * gate scaling the packed weights' input channels each run.  The folded
 * graph against the original (the optimizer's check), its plan against the
 * reference interpreter on 1 and 2 threads: channel counts off the 16/32/48-wide
 * weight blocks, the gate from a real squeeze-excite computation (so it
 * changes with the input, run by run), the gate as either operand and as a
 * rank-3 tensor, a 3x3 stride-2 padded conv after it, a residual Add and a
 * SiLU after the conv; where it must decline (batch 2, weights larger than
 * a quarter of x, a gate that is not per channel, the Mul read twice);
 * hand-computed values. */
#include "exec_check.h"
#include "opt/check.h"
#include "opt/passes.h"
#include "tsopt.h"

static uint64_t rng = 9001;

#define I(...) (int64_t[]){__VA_ARGS__}

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

/* The gate of a squeeze-excite block over x (C channels): GlobalAveragePool
 * -> 1x1 conv to R -> Relu -> 1x1 conv to C -> Sigmoid. */
static int se_gate(ts_graph *g, int x, int C, int R)
{
    char w1[32], w2[32], b1[16], b2[16];
    snprintf(w1, sizeof w1, "%dx%dx1x1", R, C);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, R);
    snprintf(b1, sizeof b1, "%d", R);
    snprintf(b2, sizeof b2, "%d", C);
    int p = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, cst(g, w1, -1, 1), cst(g, b1, -0.5, 0.5)}, 3, NULL, 0);
    p = xt_node(g, "Relu", &p, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, cst(g, w2, -1, 1), cst(g, b2, -0.5, 0.5)}, 3, NULL, 0);
    return xt_node(g, "Sigmoid", &p, 1, NULL, 0);
}

/* g with ts_fold_gate applied (a copy), checked against g by the
 * optimizer's check; *folds: the pass's count. */
static ts_graph *fold(const ts_graph *g, int *folds)
{
    ts_error e = {0};
    ts_graph *f = ts_graph_copy(g);
    cr_assert_not_null(f);
    *folds = ts_fold_gate(f, &e);
    cr_assert_geq(*folds, 0, "%s", e.msg);
    double worst = 0;
    cr_assert_eq(ts_opt_check(g, f, rng++, &worst, &e), TS_OK, "%s", e.msg);
    cr_assert_leq(worst, 1, "the folded graph differs from the original (%g tolerances)", worst);
    return f;
}

/* Folds g, plans it on 1 and 2 threads against the reference; the number
 * of dnnl.conv_gated steps (the same on both, and as many as folds). */
static int check(const ts_graph *g)
{
    int got = -1, folds;
    ts_graph *f = fold(g, &folds);
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(f, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        int k = xt_steps_of(plan, "dnnl.conv_gated");
        cr_assert(got < 0 || k == got);
        got = k;
        ts_plan_free(plan);
    }
    cr_assert_eq(got, folds, "%d folds lowered as %d dnnl.conv_gated steps", folds, got);
    ts_graph_free(f);
    return got;
}

/* x: 1x1 conv (channels-last, as in the models) to C channels on an
 * HxW image, SiLU; the block's gate; Mul; projection 1x1 conv to F; a
 * residual Add when F == C0 (the block's input). */
static ts_graph *block(int C0, int C, int R, int F, const char *xdims, bool gate_first, bool rank3_gate)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w0[32], wp[32], bp[16];
    snprintf(w0, sizeof w0, "%dx%dx1x1", C, C0);
    snprintf(wp, sizeof wp, "%dx%dx1x1", F, C);
    snprintf(bp, sizeof bp, "%d", F);
    int in = xt_input(g, "x", xdims);
    int x = xt_node(g, "Conv", (int[]){in, cst(g, w0, -0.5, 0.5)}, 2, NULL, 0);
    int s = xt_node(g, "Sigmoid", &x, 1, NULL, 0);
    x = xt_node(g, "Mul", (int[]){x, s}, 2, NULL, 0);
    int gate = se_gate(g, x, C, R);
    if (rank3_gate) {
        int shape = xt_const_values(g, TS_I64, "3", (double[]){C, 1, 1}, 3);
        gate = xt_node(g, "Reshape", (int[]){gate, shape}, 2, NULL, 0);
    }
    int m = xt_node(g, "Mul", gate_first ? (int[]){gate, x} : (int[]){x, gate}, 2, NULL, 0);
    int y = xt_node(g, "Conv", (int[]){m, cst(g, wp, -0.5, 0.5), cst(g, bp, -0.5, 0.5)}, 3, NULL, 0);
    if (F == C0) y = xt_node(g, "Add", (int[]){y, in}, 2, NULL, 0);
    xt_output(g, y);
    return g;
}

/* 37 expanded channels (off every weight block), 13 -> 13 with the
 * residual Add (a sum post-op), odd image. */
Test(gated_conv, projection_with_residual)
{
    ts_graph *g = block(13, 37, 5, 13, "1x13x23x19", false, false);
    cr_assert_eq(check(g), 1);
    ts_graph_free(g);
}

/* The gate as the Mul's first operand, and as a C x 1 x 1 tensor; no
 * residual (F != C0). */
Test(gated_conv, gate_first_rank3)
{
    ts_graph *g = block(8, 50, 6, 21, "1x8x20x30", true, true);
    cr_assert_eq(check(g), 1);
    ts_graph_free(g);
}

/* A 3x3 stride-2 padded conv after the gate (any group-1 conv: the gate
 * is constant over the image, so it scales every tap of input channel i),
 * then SiLU (the conv's tail). */
Test(gated_conv, strided_3x3_then_silu)
{
    ts_graph *g = ts_graph_new("t", 17);
    int in = xt_input(g, "x", "1x6x41x37");
    int x = xt_node(g, "Conv", (int[]){in, cst(g, "19x6x1x1", -0.5, 0.5)}, 2, NULL, 0);
    int gate = se_gate(g, x, 19, 4);
    int m = xt_node(g, "Mul", (int[]){x, gate}, 2, NULL, 0);
    int y = xt_node(g, "Conv", (int[]){m, cst(g, "11x19x3x3", -0.3, 0.3)}, 2,
                    (ts_attr[]){ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 0, 2, 1), 4)}, 2);
    int s = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
    y = xt_node(g, "Mul", (int[]){y, s}, 2, NULL, 0);
    xt_output(g, y);
    cr_assert_eq(check(g), 1);
    ts_graph_free(g);
}

/* Declines: batch 2 (a gate per image), weights over a quarter of x (96 x
 * 64 weights, 64 x 8 x 8 activations), the Mul's result read twice. */
Test(gated_conv, declines)
{
    ts_graph *g = block(13, 37, 5, 13, "2x13x23x19", false, false);
    cr_assert_eq(check(g), 0);
    ts_graph_free(g);
    g = block(16, 64, 8, 96, "1x16x8x8", false, false);
    cr_assert_eq(check(g), 0);
    ts_graph_free(g);
    g = ts_graph_new("t", 17);
    int x = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x4x30x30"), cst(g, "24x4x1x1", -0.5, 0.5)}, 2, NULL, 0);
    int m = xt_node(g, "Mul", (int[]){x, se_gate(g, x, 24, 4)}, 2, NULL, 0);
    int y = xt_node(g, "Conv", (int[]){m, cst(g, "8x24x1x1", -0.5, 0.5)}, 2, NULL, 0);
    xt_output(g, y);
    xt_output(g, m);
    cr_assert_eq(check(g), 0);
    ts_graph_free(g);
}

/* Hand-computed, with a gate that follows the input: x = a everywhere (2
 * channels, 8x8, through a 1x1 conv with weights [1, 0; 0, 2]: channels a
 * and 2a), the gate Sigmoid of a 1x1 conv of the pool [a, 2a] with weights
 * [0, 0; 0, ln(3) / 2] and no bias: [1/2, sigmoid(a ln 3)], i.e. [1/2, 3/4]
 * for a = 1 and [1/2, 9/10] for a = 2; the projection's weights [1, 1] and
 * bias 0.25: a = 1: 1/2 + 2 * 3/4 + 0.25 = 2.25; a = 2: 1 + 4 * 9/10 + 0.25
 * = 4.85, at every pixel; then a = 1 again. */
Test(gated_conv, hand_computed)
{
    ts_graph *g = ts_graph_new("t", 17);
    int in = xt_input(g, "x", "1x2x8x8");
    int x = xt_node(g, "Conv", (int[]){in, xt_const_values(g, TS_F32, "2x2x1x1", (double[]){1, 0, 0, 2}, 4)}, 2,
                    NULL, 0);
    int p = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, xt_const_values(g, TS_F32, "2x2x1x1", (double[]){0, 0, 0, log(3.0) / 2}, 4)},
                2, NULL, 0);
    int gate = xt_node(g, "Sigmoid", &p, 1, NULL, 0);
    int m = xt_node(g, "Mul", (int[]){x, gate}, 2, NULL, 0);
    int y = xt_node(g, "Conv", (int[]){m, xt_const_values(g, TS_F32, "1x2x1x1", (double[]){1, 1}, 2),
                                       xt_const_values(g, TS_F32, "1", (double[]){0.25}, 1)},
                    3, NULL, 0);
    xt_output(g, y);
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_fold_gate(g, &e), 1, "%s", e.msg);
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(xt_steps_of(plan, "dnnl.conv_gated"), 1);
    ts_shape xs = xt_shape("1x2x8x8"), ys = xt_shape("1x1x8x8");
    ts_tensor *xt = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &ys, &e);
    const float a[] = {1, 2, 1}, want[] = {2.25f, 4.85f, 2.25f};
    for (int rep = 0; rep < 3; rep++) {
        for (int64_t i = 0; i < ts_tensor_numel(xt); i++) ((float *)xt->data)[i] = a[rep];
        cr_assert_eq(ts_plan_run(plan, &xt, &out, &e), TS_OK, "%s", e.msg);
        for (int64_t i = 0; i < 64; i++)
            cr_assert_float_eq(((float *)out->data)[i], want[rep], 1e-5, "a = %g, pixel %lld: %.9g", a[rep],
                               (long long)i, ((float *)out->data)[i]);
    }
    ts_tensor_unref(xt);
    ts_tensor_unref(out);
    ts_plan_free(plan);
    ts_graph_free(g);
}
