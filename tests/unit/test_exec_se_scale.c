/* vec.se with the block's Mul (src/vec/vec_se.c): the squeeze-excite
 * step also writes x * gate where the graph pass ts_fold_gate did not move
 * the gate onto the next conv's weights (then dnnl.conv_gated lowers that).
 * Against the reference interpreter on 1 and
 * 2 threads: channels-last and plain inputs, channel counts off the vector
 * width, a tensor large enough for the two-thread split, the gate as
 * either operand; the se_scale skip switch; hand-computed values. */
#include <stdlib.h>
#include "exec_check.h"
#include "opt/passes.h"
#include "tsopt.h"

static uint64_t rng = 5151;

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

/* x (from a 1x1 conv when cl, else the graph input, plain) -> squeeze-
 * excite gate (R) -> Mul -> 1x1 conv to F.  Returns the graph. */
static ts_graph *se_block(const char *xdims, int C0, int C, int R, int F, bool cl, bool gate_first)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w0[32], w1[32], w2[32], b1[16], b2[16], wp[32];
    snprintf(w0, sizeof w0, "%dx%dx1x1", C, C0);
    snprintf(w1, sizeof w1, "%dx%dx1x1", R, C);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, R);
    snprintf(b1, sizeof b1, "%d", R);
    snprintf(b2, sizeof b2, "%d", C);
    snprintf(wp, sizeof wp, "%dx%dx1x1", F, C);
    int x = xt_input(g, "x", xdims);
    if (cl) x = xt_node(g, "Conv", (int[]){x, cst(g, w0, -0.5, 0.5)}, 2, NULL, 0);
    int p = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, cst(g, w1, -1, 1), cst(g, b1, -0.5, 0.5)}, 3, NULL, 0);
    int s = xt_node(g, "Sigmoid", &p, 1, NULL, 0);
    p = xt_node(g, "Mul", (int[]){p, s}, 2, NULL, 0); /* SiLU, as EfficientNet */
    p = xt_node(g, "Conv", (int[]){p, cst(g, w2, -1, 1), cst(g, b2, -0.5, 0.5)}, 3, NULL, 0);
    p = xt_node(g, "Sigmoid", &p, 1, NULL, 0);
    int m = xt_node(g, "Mul", gate_first ? (int[]){p, x} : (int[]){x, p}, 2, NULL, 0);
    xt_output(g, xt_node(g, "Conv", (int[]){m, cst(g, wp, -0.5, 0.5)}, 2, NULL, 0));
    return g;
}

/* Plans on 1 and 2 threads against the reference; returns the number of
 * vec.eltwise steps (the Mul, when it stays a step); one vec.se each. */
static int check(const ts_graph *g)
{
    int got = -1;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(xt_steps_of(plan, "vec.se"), 1);
        int k = xt_steps_of(plan, "vec.eltwise");
        cr_assert(got < 0 || k == got);
        got = k;
        ts_plan_free(plan);
    }
    return got;
}

/* 7x7, 43 channels channels-last, the projection's weights (43 x 90) over
 * a quarter of x: the Mul is vec.se's. */
Test(se_scale, channels_last_late_block)
{
    ts_graph *g = se_block("1x8x7x7", 8, 43, 5, 90, true, false);
    cr_assert_eq(check(g), 0);
    ts_graph_free(g);
}

/* Plain input (the graph's), gate first, batch 2 (the gated conv takes
 * batch 1 only). */
Test(se_scale, plain_batch2_gate_first)
{
    ts_graph *g = se_block("2x21x9x11", 21, 21, 3, 7, false, true);
    cr_assert_eq(check(g), 0);
    ts_graph_free(g);
}

/* 64 x 48 x 48 = 147456 elements: pooled and scaled on two threads, each
 * its half of the pixels; the projection (64 -> 640) is over a quarter of
 * x, so vec.se keeps the Mul; with TSOPT_SKIP=se_scale it is a step. */
Test(se_scale, two_thread_split_and_switch)
{
    ts_graph *g = se_block("1x16x48x48", 16, 64, 8, 640, true, false);
    cr_assert_eq(check(g), 0);
    setenv("TSOPT_SKIP", "se_scale", 1);
    cr_assert_eq(check(g), 1);
    unsetenv("TSOPT_SKIP");
    ts_graph_free(g);
}

/* A projection small enough to fold the gate (16 -> 8 at 48x48): after
 * ts_fold_gate the Mul scales the weights, lowered by dnnl.conv_gated, and
 * vec.se writes the gate. */
Test(se_scale, left_to_the_gated_conv)
{
    ts_graph *g = se_block("1x16x48x48", 16, 16, 4, 8, true, false);
    ts_error e = {0};
    cr_assert_eq(ts_fold_gate(g, &e), 1, "%s", e.msg);
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(xt_steps_of(plan, "dnnl.conv_gated"), 1);
        cr_assert_eq(xt_steps_of(plan, "vec.se"), 1);
        cr_assert_eq(xt_steps_of(plan, "vec.eltwise"), 0);
        ts_plan_free(plan);
    }
    ts_graph_free(g);
}

/* Hand-computed: x has channel 0 = 1 and channel 1 = 2 everywhere (plain
 * 1x2x3x3); pool [1, 2]; conv1 weights [1, 1], bias 0: 3; Relu 3; conv2
 * weights [0, 0], bias [0, ln 3]; Sigmoid: gate [1/2, 3/4]; Mul: 1/2 and
 * 3/2; then Relu (so the Mul is no graph output). */
Test(se_scale, hand_computed)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x2x3x3");
    int p = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, xt_const_values(g, TS_F32, "1x2x1x1", (double[]){1, 1}, 2),
                                   xt_const_values(g, TS_F32, "1", (double[]){0}, 1)},
                3, NULL, 0);
    p = xt_node(g, "Relu", &p, 1, NULL, 0);
    p = xt_node(g, "Conv", (int[]){p, xt_const_values(g, TS_F32, "2x1x1x1", (double[]){0, 0}, 2),
                                   xt_const_values(g, TS_F32, "2", (double[]){0, log(3.0)}, 2)},
                3, NULL, 0);
    p = xt_node(g, "Sigmoid", &p, 1, NULL, 0);
    int m = xt_node(g, "Mul", (int[]){x, p}, 2, NULL, 0);
    xt_output(g, xt_node(g, "Relu", &m, 1, NULL, 0));
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(xt_steps_of(plan, "vec.se"), 1);
    cr_assert_eq(xt_steps_of(plan, "vec.eltwise"), 1, "the Relu only: the Mul is vec.se's");
    ts_shape xs = xt_shape("1x2x3x3");
    ts_tensor *xt = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &xs, &e);
    float *xd = xt->data;
    for (int i = 0; i < 18; i++) xd[i] = i < 9 ? 1.0f : 2.0f;
    cr_assert_eq(ts_plan_run(plan, &xt, &out, &e), TS_OK, "%s", e.msg);
    const float *od = out->data;
    for (int i = 0; i < 18; i++) cr_assert_float_eq(od[i], i < 9 ? 0.5f : 1.5f, 1e-6, "element %d: %.9g", i, od[i]);
    ts_tensor_unref(xt);
    ts_tensor_unref(out);
    ts_plan_free(plan);
    ts_graph_free(g);
}
