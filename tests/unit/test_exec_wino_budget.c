/* Winograd's memory cap (src/dnnl/dnnl_conv.c, wino_budget_ok): a 3x3
 * stride-1 conv runs on Winograd only while the plan's Winograd extras
 * (transformed weights beyond the direct ones plus the scratchpad written)
 * stay within 1.1x the model's Conv weights + 16 MiB (what ONNX Runtime
 * holds beyond tsopt: it keeps each weight twice).  Either way the result equals the
 * reference interpreter; channel counts are not multiples of 16 (Winograd
 * pads them to its blocks). */
#include "dnnl/dnnl_conv.h"
#include "exec_check.h"

static uint64_t rng = 977;

static int conv(ts_graph *g, int x, int C, int F, int k, int s)
{
    char w[64], b[16];
    snprintf(w, sizeof w, "%dx%dx%dx%d", F, C, k, k);
    snprintf(b, sizeof b, "%d", F);
    int p = k / 2;
    ts_attr at[] = {ts_attr_ints("pads", (int64_t[]){p, p, p, p}, 4), ts_attr_ints("strides", (int64_t[]){s, s}, 2)};
    int y = xt_node(g, "Conv", (int[]){x, xt_const_random(g, w, -0.05, 0.05, &rng),
                                       xt_const_random(g, b, -0.5, 0.5, &rng)},
                    3, at, 2);
    return xt_node(g, "Relu", &y, 1, NULL, 0);
}

/* A wide 3x3 conv (1030 -> 260 channels, 16x16: Winograd's weights 4.2x the
 * direct ones, 9.6 MB) followed by a conv of `big` output channels, kernel k,
 * stride 2 (not a Winograd candidate).
 * Returns how many conv steps run on Winograd and their extras. */
static int wino_steps(int big, int k, size_t *extra, size_t *conv_w)
{
    ts_graph *g = ts_graph_new("t", 17);
    int y = conv(g, xt_input(g, "x", "1x1030x16x16"), 1030, 260, 3, 1);
    conv(g, y, 260, big, k, 2);
    ts_error e = {0};
    cr_assert_eq(ts_graph_add_output(g, g->nvalues - 1, &e), TS_OK, "%s", e.msg);
    *conv_w = 4 * ((size_t)260 * 1030 * 9 + (size_t)big * 260 * k * k);
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    const xplan *p = (const xplan *)plan;
    int n = 0;
    *extra = 0;
    for (int i = 0; i < p->nsteps; i++) {
        size_t x = 0;
        if (xd_conv_is_winograd(&p->steps[i], &x)) n++, *extra += x;
    }
    ts_plan_free(plan);
    ts_graph_free(g);
    return n;
}

/* Alone the wide conv's Winograd extras (31 MB of weights, ~9 MB of
 * scratch) exceed 1.1x the model's Conv weights (9.6 MB) + 16 MiB: direct. */
Test(wino_budget, over_budget_stays_direct)
{
    size_t extra, conv_w;
    cr_assert_eq(wino_steps(16, 1, &extra, &conv_w), 0);
}

/* Beside a 3x3 stride-2 conv with 18.7 MB of weights the same layer fits:
 * Winograd, and its extras are within the budget. */
Test(wino_budget, within_budget_runs_winograd)
{
    size_t extra, conv_w;
    cr_assert_eq(wino_steps(2000, 3, &extra, &conv_w), 1);
    cr_assert_gt(extra, (size_t)30 << 20, "extras %zu: transformed weights not counted", extra);
    cr_assert_leq(extra, conv_w + conv_w / 10 + ((size_t)16 << 20), "extras %zu over 1.1x the conv weights %zu + 16 MiB", extra, conv_w);
}
