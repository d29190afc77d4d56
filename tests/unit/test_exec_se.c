/* vec.se (src/vec/vec_se.c): the squeeze-excite gate (GlobalAveragePool,
 * 1x1 conv, activation, 1x1 conv, gate activation) as one step, as the
 * exporters write EfficientNet's (SiLU, Sigmoid) and MobileNet-v3's (Relu,
 * HardSigmoid) blocks, on channels-last input (after a conv) and plain input
 * (a graph input), batch 1 and 2, channel counts that are no multiple of the
 * vector width; 1 and 2 threads against the reference interpreter, and one
 * case by hand. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 4242;

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

typedef enum { SE_SILU_SIGMOID, SE_RELU_HARDSIGMOID, SE_RELU_NO_GATE } se_kind;

/* x -> [1x1 conv C0 -> C when C0 > 0] -> block value b; b * gate(b) -> output.
 * Returns the number of vec.se steps (the same on 1 and 2 threads). */
static int se_case(const char *x, int C0, int C, int R, se_kind kind)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w0[32], w1[32], w2[32], b1[16], b2[16];
    snprintf(w0, sizeof w0, "%dx%dx1x1", C, C0);
    snprintf(w1, sizeof w1, "%dx%dx1x1", R, C);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, R);
    snprintf(b1, sizeof b1, "%d", R);
    snprintf(b2, sizeof b2, "%d", C);
    int b = xt_input(g, "x", x);
    if (C0 > 0) b = xt_node(g, "Conv", (int[]){b, cst(g, w0, -0.5, 0.5)}, 2, NULL, 0);
    int y = xt_node(g, "GlobalAveragePool", &b, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, cst(g, w1, -1, 1), cst(g, b1, -0.5, 0.5)}, 3, NULL, 0);
    if (kind == SE_SILU_SIGMOID) {
        int s = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
        y = xt_node(g, "Mul", (int[]){y, s}, 2, NULL, 0);
    } else {
        y = xt_node(g, "Relu", &y, 1, NULL, 0);
    }
    y = xt_node(g, "Conv", (int[]){y, cst(g, w2, -1, 1), cst(g, b2, -0.5, 0.5)}, 3, NULL, 0);
    if (kind == SE_SILU_SIGMOID)
        y = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
    else if (kind == SE_RELU_HARDSIGMOID)
        y = xt_node(g, "HardSigmoid", &y, 1,
                    (ts_attr[]){ts_attr_float("alpha", 1.0f / 6), ts_attr_float("beta", 0.5f)}, 2);
    y = xt_node(g, "Mul", (int[]){b, y}, 2, NULL, 0);
    xt_output(g, y);
    int got = xt_kernel_steps_1_2(g, "vec.se", &rng);
    ts_graph_free(g);
    return got;
}

/* EfficientNet's block: SiLU inside, Sigmoid gate; channels-last input. */
Test(exec_se, silu_sigmoid_channels_last) { cr_assert_eq(se_case("1x5x17x19", 5, 40, 10, SE_SILU_SIGMOID), 1); }

/* MobileNet-v3's: Relu inside, HardSigmoid gate; 72 -> 18 channels. */
Test(exec_se, relu_hardsigmoid_channels_last) { cr_assert_eq(se_case("1x6x14x14", 6, 72, 18, SE_RELU_HARDSIGMOID), 1); }

/* A plain (NCHW) input, batch 2, 37 -> 5 channels. */
Test(exec_se, plain_input_batch2) { cr_assert_eq(se_case("2x37x9x11", 0, 37, 5, SE_SILU_SIGMOID), 1); }

/* Large enough that the pool splits between threads, both layouts. */
Test(exec_se, parallel_pool)
{
    cr_assert_eq(se_case("1x8x56x56", 8, 48, 12, SE_SILU_SIGMOID), 1);
    cr_assert_eq(se_case("1x48x56x57", 0, 48, 12, SE_RELU_HARDSIGMOID), 1);
}

/* Wide enough (2 x 1024 x 512 multiply-adds) that the two products split
 * between threads whether they spin or sleep; 1000 channels: the second
 * product's ranges of 16 channels end in a partial one. */
Test(exec_se, parallel_gate)
{
    cr_assert_eq(se_case("1x1024x3x3", 0, 1024, 512, SE_RELU_HARDSIGMOID), 1);
    cr_assert_eq(se_case("1x1000x2x3", 0, 1000, 520, SE_SILU_SIGMOID), 1);
}

/* No squashing activation after the second conv: not a gate, left alone;
 * and a classifier head (pool -> Flatten) is no SE block either. */
Test(exec_se, declines_non_gates)
{
    cr_assert_eq(se_case("1x5x8x8", 5, 16, 4, SE_RELU_NO_GATE), 0);
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_node(g, "GlobalAveragePool", (int[]){xt_input(g, "x", "1x16x7x7")}, 1, NULL, 0);
    y = xt_node(g, "Flatten", &y, 1, NULL, 0);
    xt_output(g, y);
    ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    cr_assert_eq(xt_steps_of(plan, "vec.se"), 0);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* By hand: channel c of x holds c + 1 everywhere (4 channels, 3x5), so the
 * pool gives c + 1; conv1 (2 x 4 ones, no bias) gives 10 twice, Relu keeps
 * it; conv2 weight (c - 1.5) / 20 for both inputs, bias 0, gives c - 1.5;
 * the gate is sigmoid(c - 1.5) and the output (c + 1) sigmoid(c - 1.5):
 * 0.18242552, 0.75508134, 1.86737799, 3.27029792. */
Test(exec_se, hand_computed)
{
    ts_graph *g = ts_graph_new("t", 17);
    double w2[8];
    for (int c = 0; c < 4; c++) w2[2 * c] = w2[2 * c + 1] = (c - 1.5) / 20;
    int x = xt_input(g, "x", "1x4x3x5");
    int y = xt_node(g, "GlobalAveragePool", &x, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, xt_const_values(g, TS_F32, "2x4x1x1", (double[]){1}, 1)}, 2, NULL, 0);
    y = xt_node(g, "Relu", &y, 1, NULL, 0);
    y = xt_node(g, "Conv", (int[]){y, xt_const_values(g, TS_F32, "4x2x1x1", w2, 8)}, 2, NULL, 0);
    y = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
    y = xt_node(g, "Mul", (int[]){x, y}, 2, NULL, 0);
    xt_output(g, y);
    const float want[4] = {0.18242552f, 0.75508134f, 1.86737799f, 3.27029792f};
    ts_error e = {0};
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan *plan = NULL;
        ts_plan_opts o = {.threads = threads};
        cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(xt_steps_of(plan, "vec.se"), 1);
        ts_shape s = xt_shape("1x4x3x5");
        ts_tensor *in = ts_tensor_new(TS_F32, &s, &e), *out = ts_tensor_new(TS_F32, &s, &e);
        for (int64_t i = 0; i < 60; i++) ((float *)in->data)[i] = (float)(i / 15 + 1);
        cr_assert_eq(ts_plan_run(plan, &in, &out, &e), TS_OK, "%s", e.msg);
        for (int64_t i = 0; i < 60; i++)
            cr_assert_float_eq(((float *)out->data)[i], want[i / 15], 1e-5, "element %lld", (long long)i);
        ts_tensor_unref(in);
        ts_tensor_unref(out);
        ts_plan_free(plan);
    }
    ts_graph_free(g);
}
