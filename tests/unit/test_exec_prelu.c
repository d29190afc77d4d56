/* PRelu after a Conv / ConvTranspose / MatMul (lower_post.c,
 * prelu_uniform_slope): a constant, finite slope with one value (scalar,
 * [1], rank 0, [C,1,1] all equal, negative) fuses as the relu post-op with
 * that alpha (fused_nodes counts it); a NaN/infinite slope or one that
 * varies per channel stays its own step.  Every case equals the reference
 * interpreter (1e-4), on channel counts that are not multiples of 16. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 777;

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }
static int cval(ts_graph *g, const char *dims, double v) { return xt_const_values(g, TS_F32, dims, &v, 1); }

#define I(...) ((const int64_t[]){__VA_ARGS__})

static ts_plan_stats check(ts_graph *g)
{
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, g->nvalues - 1, &e), TS_OK, "%s", e.msg);
    ts_plan_stats st = xt_plan_stats(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    ts_graph_free(g);
    return st;
}

/* 3x3 conv with bias to 13 channels, then PRelu with slope s. */
static int conv13(ts_graph *g)
{
    return xt_node(g, "Conv", (int[]){xt_input(g, "x", "2x5x9x7"), cst(g, "13x5x3x3", -1, 1), cst(g, "13", -1, 1)},
                   3, (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4)}, 1);
}

static ts_plan_stats conv_prelu(const char *sdims, double lo, double hi, bool uniform)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = conv13(g);
    int s = uniform ? cval(g, sdims, lo) : cst(g, sdims, lo, hi);
    xt_node(g, "PRelu", (int[]){c, s}, 2, NULL, 0);
    return check(g);
}

Test(exec_prelu, conv_scalar_slope_fused) { cr_assert_eq(conv_prelu("1", 0.25, 0, true).fused_nodes, 1); }
Test(exec_prelu, conv_rank0_negative_slope_fused) { cr_assert_eq(conv_prelu("", -0.5, 0, true).fused_nodes, 1); }
Test(exec_prelu, conv_equal_per_channel_slope_fused)
{
    cr_assert_eq(conv_prelu("13x1x1", 0.2, 0, true).fused_nodes, 1);
}
/* A NaN slope would turn x = 0 into NaN as a post-op (alpha * 0; also an
 * infinite one, not tested: exec_check.h counts inf vs inf as a mismatch):
 * it stays a step of its own, still matching the reference. */
Test(exec_prelu, conv_nan_slope_not_fused) { cr_assert_eq(conv_prelu("1x1", NAN, 0, true).fused_nodes, 0); }

/* Per-channel slopes that differ: correct, and not taken for a scalar. */
Test(exec_prelu, conv_per_channel_slope_not_fused)
{
    ts_plan_stats st = conv_prelu("13x1x1", 0.1, 0.4, false);
    cr_assert_eq(st.fused_nodes, 0);
    cr_assert_eq(st.fallback_steps, 0);
}

/* Slope broadcast along the last axis only (shape [7]): not per channel. */
Test(exec_prelu, conv_width_slope_correct) { cr_assert_eq(conv_prelu("7", -0.5, 0.5, false).fused_nodes, 0); }

/* BatchNorm folded into the conv (graph pass, level basic), then the PRelu
 * as a post-op: one step. */
Test(exec_prelu, conv_bn_prelu_fused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = conv13(g);
    int bn = xt_node(
        g, "BatchNormalization",
        (int[]){c, cst(g, "13", 0.5, 1.5), cst(g, "13", -1, 1), cst(g, "13", -1, 1), cst(g, "13", 0.5, 2)}, 5, NULL,
        0);
    xt_node(g, "PRelu", (int[]){bn, cval(g, "13x1x1", 0.3)}, 2, NULL, 0);
    cr_assert_eq(ts_graph_opt_apply(g, TS_GRAPH_OPT_BASIC, &(ts_error){0}), 1);
    cr_assert_eq(check(g).fused_nodes, 1);
}

/* The slope is the data input: never a post-op. */
Test(exec_prelu, conv_output_as_slope_not_fused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int c = conv13(g);
    xt_node(g, "PRelu", (int[]){xt_input(g, "y", "2x13x9x7"), c}, 2, NULL, 0);
    cr_assert_eq(check(g).fused_nodes, 0);
}

Test(exec_prelu, deconv_scalar_slope_fused)
{
    ts_graph *g = ts_graph_new("t", 17);
    int d = xt_node(g, "ConvTranspose", (int[]){xt_input(g, "x", "1x6x5x5"), cst(g, "6x11x3x3", -1, 1)}, 2,
                    (ts_attr[]){ts_attr_ints("strides", I(2, 2), 2)}, 1);
    xt_node(g, "PRelu", (int[]){d, cval(g, "1", 0.1)}, 2, NULL, 0);
    cr_assert_eq(check(g).fused_nodes, 1);
}

Test(exec_prelu, matmul_slope_fused_and_per_column)
{
    for (int uniform = 0; uniform < 2; uniform++) {
        ts_graph *g = ts_graph_new("t", 17);
        int m = xt_node(g, "MatMul", (int[]){xt_input(g, "x", "4x40x17"), cst(g, "17x19", -1, 1)}, 2, NULL, 0);
        xt_node(g, "PRelu", (int[]){m, uniform ? cval(g, "19", 0.25) : cst(g, "19", 0.1, 0.4)}, 2, NULL, 0);
        cr_assert_eq(check(g).fused_nodes, uniform);
    }
}
