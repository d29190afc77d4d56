/* SiLU and sigmoid after a oneDNN convolution, applied by the step itself
 * (src/vec/vec_post.c, dnnl_conv.c): the passes against hand-computed
 * values (every length of the 16-wide vectors' tail, special values), then
 * convolutions with SiLU / sigmoid against the reference interpreter on
 * shapes that are not multiples of the vector width, stride 2, padding, a
 * residual before and after the activation, on 1 and 2 threads. */
#include <math.h>
#include <stdlib.h>
#include "dnnl/dnnl_conv.h"
#include "vec/vec_post.h"
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

/* x * sigmoid(a x), and sigmoid(x), in double. */
static double silu_d(double x, double a) { return x / (1.0 + exp(-a * x)); }
static double sig_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Hand-computed: 1 / (1 + e^-1) = 0.7310585786300049,
 * 1 / (1 + e^-2) = 0.8807970779778823, 1 / (1 + e^2) = 0.11920292202211755,
 * 1 / (1 + e^-10) = 0.9999546021312976. */
Test(post_tail, swish_hand_computed)
{
    const float x[] = {0, 1, -1, 2, -2, 10, 100, -100};
    const double want[] = {0, 0.7310585786300049, -0.2689414213699951, 1.7615941559557649, -0.2384058440442351,
                           9.999546021312976, 100, 0};
    for (int n = 1; n <= 8; n++) {
        float a[8];
        memcpy(a, x, sizeof a);
        xv_swish_run(a, n, 1.0f);
        for (int i = 0; i < n; i++) cr_assert_float_eq(a[i], want[i], 1e-6 * (1 + fabs(want[i])), "x = %g", x[i]);
        for (int i = n; i < 8; i++) cr_assert_eq(a[i], x[i], "element %d past n = %d written", i, n);
    }
    float b[2] = {1, -1};
    xv_swish_run(b, 2, 2.0f); /* x * sigmoid(2x) */
    cr_assert_float_eq(b[0], 0.8807970779778823, 1e-6);
    cr_assert_float_eq(b[1], -0.11920292202211755, 1e-6);
}

Test(post_tail, logistic_hand_computed)
{
    float a[] = {0, 1, -1, 2, -2, 40, -40, -100, NAN};
    xv_logistic_run(a, 9);
    const double want[] = {0.5, 0.7310585786300049, 0.2689414213699951, 0.8807970779778823, 0.11920292202211755, 1,
                           4.248354255291589e-18};
    for (int i = 0; i < 7; i++) cr_assert(fabs(a[i] - want[i]) <= 1e-6 * want[i], "i %d: %.9g vs %.9g", i, a[i], want[i]);
    cr_assert(a[7] >= 0 && a[7] < 1e-30, "sigmoid(-100) = %g", a[7]);
    cr_assert(isnan(a[8]), "NaN stays NaN");
}

/* Every length from 0 to 70 (whole vectors, the masked tail) and values
 * over [-30, 30] in steps that are not multiples of anything: relative
 * error at most 1e-6 against double, nothing outside [0, n) written;
 * special values: +inf, NaN. */
Test(post_tail, swish_and_logistic_lengths)
{
    float buf[72], ref[72];
    for (int n = 0; n <= 70; n++) {
        for (int i = 0; i < 72; i++) buf[i] = ref[i] = (float)(-30.0 + 60.0 * ((i * 37 + n * 11) % 72) / 71.0);
        float keep = buf[n], keep2 = buf[n + 1];
        xv_swish_run(buf, n, 1.0f);
        for (int i = 0; i < n; i++) {
            double w = silu_d(ref[i], 1.0);
            cr_assert(fabs(buf[i] - w) <= 1e-6 * fabs(w) + 1e-30, "n %d, x %.9g: %.9g vs %.9g", n, ref[i], buf[i], w);
        }
        cr_assert(buf[n] == keep && buf[n + 1] == keep2);
        memcpy(buf, ref, sizeof buf);
        xv_logistic_run(buf, n);
        for (int i = 0; i < n; i++) {
            double w = sig_d(ref[i]);
            cr_assert(fabs(buf[i] - w) <= 1e-6 * w, "n %d, x %.9g: %.9g vs %.9g", n, ref[i], buf[i], w);
        }
        cr_assert(buf[n] == keep && buf[n + 1] == keep2);
    }
    float s[4] = {INFINITY, NAN, -INFINITY, 88.0f};
    xv_swish_run(s, 4, 1.0f);
    cr_assert(isinf(s[0]) && s[0] > 0);
    cr_assert(isnan(s[1]));
    cr_assert(isnan(s[2]), "-inf * sigmoid(-inf) is -inf * 0, as the unfused graph computes");
    cr_assert_float_eq(s[3], 88.0f, 1e-5);
    float l[3] = {INFINITY, -INFINITY, NAN};
    xv_logistic_run(l, 3);
    cr_assert(l[0] == 1.0f && l[1] == 0.0f && isnan(l[2]));
}

/* The tail is taken from the first SiLU / sigmoid on, only when every
 * post-op after it is an activation. */
Test(post_tail, split_rule)
{
    xd_po tail[XD_MAX_FUSE];
    int nt = -1;
    xd_fuse f = {.npo = 2};
    f.po[0] = (xd_po){.kind = XD_PO_SUM};
    f.po[1] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_swish, .alpha = 1};
    cr_assert(xv_post_tail_split(&f, tail, &nt));
    cr_assert(f.npo == 1 && nt == 1 && tail[0].alg == dnnl_eltwise_swish);
    f = (xd_fuse){.npo = 2};
    f.po[0] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_swish, .alpha = 1};
    f.po[1] = (xd_po){.kind = XD_PO_SUM};
    cr_assert(!xv_post_tail_split(&f, tail, &nt), "a residual after the SiLU stays in oneDNN");
    cr_assert_eq(f.npo, 2);
    f = (xd_fuse){.npo = 1};
    f.po[0] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_relu};
    cr_assert(!xv_post_tail_split(&f, tail, &nt), "ReLU: oneDNN's post-op is free");
    f = (xd_fuse){.npo = 3};
    f.po[0] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_relu};
    f.po[1] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_logistic};
    f.po[2] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_linear, .alpha = 2, .beta = 1};
    cr_assert(xv_post_tail_split(&f, tail, &nt));
    cr_assert(f.npo == 1 && nt == 2);
    cr_assert(!xv_post_keeps_zero(tail, nt), "sigmoid(0) = 1/2");
    cr_assert(xv_post_keeps_zero(&(xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_swish, .alpha = 1}, 1));
}

/* Steps of the plan run by dnnl.conv with a tail, and their activations. */
static int tails_of(const ts_plan *plan, int *nact)
{
    const xplan *p = (const xplan *)plan;
    int k = 0;
    *nact = 0;
    for (int i = 0; i < p->nsteps; i++) {
        int t = xd_conv_post_tail(&p->steps[i]);
        k += t > 0;
        *nact += t;
    }
    return k;
}

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

static int silu(ts_graph *g, int y)
{
    int s = xt_node(g, "Sigmoid", &y, 1, NULL, 0);
    return xt_node(g, "Mul", (int[]){y, s}, 2, NULL, 0);
}

/* Plans g on 1 and 2 threads against the reference; returns the steps
 * with a tail (the same on both). */
static int check(ts_graph *g, int *nact)
{
    int got = -1;
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        int k = tails_of(plan, nact);
        cr_assert(got < 0 || k == got, "threads %d: %d steps with a tail, %d before", threads, k, got);
        got = k;
        ts_plan_free(plan);
    }
    return got;
}

/* 1x1 conv 13 -> 29 channels (neither a multiple of 16) on an odd image,
 * SiLU; then depthwise 3x3 stride 1 pad 1, SiLU; then depthwise 5x5
 * stride 2 pads 2 with BatchNormalization folded, SiLU: the blocks of an
 * EfficientNet.  Every conv step applies its SiLU itself. */
Test(post_tail, conv_silu_blocks)
{
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x13x19x23"), cst(g, "29x13x1x1", -0.5, 0.5),
                                       cst(g, "29", -0.5, 0.5)},
                    3, NULL, 0);
    y = silu(g, y);
    y = xt_node(g, "Conv", (int[]){y, cst(g, "29x1x3x3", -0.5, 0.5), cst(g, "29", -0.5, 0.5)}, 3,
                (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4), ts_attr_int("group", 29)}, 2);
    y = silu(g, y);
    y = xt_node(g, "Conv", (int[]){y, cst(g, "29x1x5x5", -0.5, 0.5)}, 2,
                (ts_attr[]){ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(2, 2, 2, 2), 4),
                            ts_attr_int("group", 29)},
                3);
    y = xt_node(g, "BatchNormalization",
                (int[]){y, cst(g, "29", 0.5, 1.5), cst(g, "29", -1, 1), cst(g, "29", -1, 1), cst(g, "29", 0.5, 2)}, 5,
                NULL, 0);
    y = silu(g, y);
    xt_output(g, y);
    cr_assert_eq(ts_graph_opt_apply(g, TS_GRAPH_OPT_BASIC, &(ts_error){0}), 1); /* the BatchNormalization into the conv */
    int nact;
    cr_assert_eq(check(g, &nact), 3);
    cr_assert_eq(nact, 3);
    ts_graph_free(g);
}

/* Residual Add before the SiLU: oneDNN's sum post-op, then the tail.
 * Residual Add after it: all stays in oneDNN (the tail would have to add
 * the residual). */
Test(post_tail, residual_before_and_after)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "1x24x15x17");
    int a = xt_node(g, "Conv", (int[]){x, cst(g, "24x24x3x3", -0.3, 0.3)}, 2,
                    (ts_attr[]){ts_attr_ints("pads", I(1, 1, 1, 1), 4)}, 1);
    a = xt_node(g, "Add", (int[]){a, x}, 2, NULL, 0);
    a = silu(g, a);
    int b = xt_node(g, "Conv", (int[]){a, cst(g, "24x24x1x1", -0.3, 0.3)}, 2, NULL, 0);
    b = silu(g, b);
    b = xt_node(g, "Add", (int[]){b, a}, 2, NULL, 0);
    xt_output(g, b);
    int nact;
    cr_assert_eq(check(g, &nact), 1, "only the first conv: its SiLU is the last post-op");
    ts_graph_free(g);
}

/* Sigmoid alone after a conv of 10 channels (a blocked layout would pad
 * them to 16, and sigmoid(0) is not 0: then oneDNN keeps it), and ReLU
 * then SiLU (ReLU stays a oneDNN post-op, the SiLU is the tail). */
Test(post_tail, sigmoid_and_relu_then_silu)
{
    ts_graph *g = ts_graph_new("t", 17);
    int x = xt_input(g, "x", "2x6x11x9");
    int a = xt_node(g, "Conv", (int[]){x, cst(g, "10x6x3x3", -0.5, 0.5), cst(g, "10", -1, 1)}, 3,
                    (ts_attr[]){ts_attr_ints("pads", I(0, 1, 2, 1), 4)}, 1);
    a = xt_node(g, "Sigmoid", &a, 1, NULL, 0);
    int b = xt_node(g, "Conv", (int[]){a, cst(g, "7x10x1x1", -0.5, 0.5)}, 2, NULL, 0);
    b = xt_node(g, "Relu", &b, 1, NULL, 0);
    b = silu(g, b);
    xt_output(g, b);
    int nact;
    int k = check(g, &nact);
    cr_assert(k >= 1 && k <= 2, "%d", k);
    ts_graph_free(g);
}

/* Large enough for the pass to run on two threads (393216 elements);
 * with TSOPT_SKIP=post_tail oneDNN computes the SiLU (the A/B switch), and
 * both match the reference. */
Test(post_tail, parallel_pass_and_switch)
{
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x8x128x96"), cst(g, "32x8x1x1", -0.5, 0.5)}, 2, NULL, 0);
    y = silu(g, y);
    y = xt_node(g, "Conv", (int[]){y, cst(g, "5x32x1x1", -0.5, 0.5)}, 2, NULL, 0);
    xt_output(g, y);
    int nact;
    cr_assert_eq(check(g, &nact), 1);
    setenv("TSOPT_SKIP", "post_tail", 1);
    cr_assert_eq(check(g, &nact), 0);
    unsetenv("TSOPT_SKIP");
    ts_graph_free(g);
}

/* Hand-computed through the whole runtime: a 1x1 conv of one channel with
 * weight 2 and bias 0.5 gives y = 2x + 0.5, then SiLU:
 * x = -1: y = -1.5, -1.5 / (1 + e^1.5) = -0.2736382724;
 * x = 0: y = 0.5, 0.5 / (1 + e^-0.5) = 0.3112296643;
 * x = 1: y = 2.5, 2.5 / (1 + e^-2.5) = 2.3103545489. */
Test(post_tail, hand_computed_conv_silu)
{
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", "1x1x1x3"), xt_const_values(g, TS_F32, "1x1x1x1", (double[]){2}, 1),
                                       xt_const_values(g, TS_F32, "1", (double[]){0.5}, 1)},
                    3, NULL, 0);
    xt_output(g, silu(g, y));
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    int nact;
    cr_assert_eq(tails_of(plan, &nact), 1);
    ts_shape xs = xt_shape("1x1x1x3");
    ts_tensor *x = ts_tensor_new(TS_F32, &xs, &e), *out = ts_tensor_new(TS_F32, &xs, &e);
    float *xd = x->data;
    xd[0] = -1, xd[1] = 0, xd[2] = 1;
    cr_assert_eq(ts_plan_run(plan, &x, &out, &e), TS_OK, "%s", e.msg);
    const float *od = out->data;
    cr_assert_float_eq(od[0], -0.2736382724, 1e-6);
    cr_assert_float_eq(od[1], 0.3112296643, 1e-6);
    cr_assert_float_eq(od[2], 2.3103545489, 1e-6);
    ts_tensor_unref(x);
    ts_tensor_unref(out);
    ts_plan_free(plan);
    ts_graph_free(g);
}
