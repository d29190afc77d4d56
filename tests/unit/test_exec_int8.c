/* Quantized models' kernels and the QDQ fusion pass:
 * - dnnl_int8.c (QLinearConv, QLinearMatMul, MatMulInteger on oneDNN's
 *   int8 primitives) and vec_quant.c (Q, DQ, DynamicQuantizeLinear)
 *   against the reference kernels, within one output quantization step, the
 *   steps asserted to run on those kernels (no fallback);
 * - hand-computed values: a QLinearMatMul of two u8 activations (B read
 *   as s8 with its zero point less 128), a 1x1 QLinearConv whose products
 *   land on .5 (rounding half to even);
 * - opt/fuse_qdq.c: a QDQ graph and its fused form within one step, and the
 *   rewrites the pass must refuse (a Relu before a Q whose zero point is not
 *   the type's minimum, a bias whose scale is not x_scale * w_scale), and
 *   the fused forms a pass without those conditions would write, refuted. */
#include "exec_check.h"
#include "exec/roofline.h"
#include "opt/passes.h"
#include "tsopt.h"

static uint64_t rng = 2929;

static int scalar(ts_graph *g, ts_dtype dt, double v) { return xt_const_values(g, dt, "", &v, 1); }

/* A constant of dtype dt with random integers in [lo, hi]. */
static int rand_ints(ts_graph *g, ts_dtype dt, const char *dims, int lo, int hi)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *f = ts_tensor_new(TS_F32, &s, &e), *t = ts_tensor_new(dt, &s, &e);
    cr_assert(f && t, "%s", e.msg);
    ts_tensor_fill_random(f, &rng, lo, hi + 1);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ts_tensor_set_f64(t, i, fmin(floor(ts_tensor_get_f64(f, i)), hi));
    ts_tensor_unref(f);
    return xt_const(g, t);
}

static int q(ts_graph *g, int x, double s, int zp, ts_dtype t)
{
    return xt_node(g, "QuantizeLinear", INS(x, scalar(g, TS_F32, s), scalar(g, t, zp)), NOATTR);
}

static int dq(ts_graph *g, int x, double s, int zp, ts_dtype t)
{
    return xt_node(g, "DequantizeLinear", INS(x, scalar(g, TS_F32, s), scalar(g, t, zp)), NOATTR);
}

/* Plans g and checks it against the reference within `tol` (one output
 * step); returns the plan's steps of `kernel`, none falling back. */
static int check(ts_graph *g, double tol, const char *kernel)
{
    ts_plan *p = xt_plan_check(g, NULL, 11, -2, 2, tol * 1.001, XT_TOL_ELEM);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    cr_expect_eq(st.fallback_steps, 0, "fallback steps: %d", st.fallback_steps);
    int k = xt_steps_of(p, kernel);
    ts_plan_free(p);
    return k;
}

/* x -> Q -> QLinearConv (per-channel weights) -> DQ; y_scale 0.05. */
static ts_graph *qconv_graph(int C, int M, int group, int stride, ts_dtype xt, bool bias)
{
    ts_graph *g = ts_graph_new("qconv", 13);
    char xd[32], wd[32], md[16];
    snprintf(xd, sizeof xd, "2x%dx9x11", C);
    snprintf(wd, sizeof wd, "%dx%dx3x3", M, C / group);
    snprintf(md, sizeof md, "%d", M);
    int zp = xt == TS_U8 ? 100 : -5;
    int xq = q(g, xt_input(g, "x", xd), 0.02, zp, xt);
    int in[9] = {xq, scalar(g, TS_F32, 0.02), scalar(g, xt, zp), rand_ints(g, TS_I8, wd, -127, 127),
                 xt_const_random(g, md, 0.001, 0.01, &rng), rand_ints(g, TS_I8, md, 0, 0), scalar(g, TS_F32, 0.05),
                 scalar(g, TS_U8, 7), bias ? rand_ints(g, TS_I32, md, -3000, 3000) : -1};
    int y = xt_node(g, "QLinearConv", in, bias ? 9 : 8,
                    ATTRS(ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4),
                          ts_attr_ints("strides", (int64_t[]){stride, stride}, 2), ts_attr_int("group", group)));
    xt_output(g, dq(g, y, 0.05, 7, TS_U8));
    return g;
}

Test(int8, qlinear_conv_on_dnnl)
{
    const struct {
        int C, M, group, stride;
        ts_dtype xt;
        bool bias;
    } cases[] = {{8, 16, 1, 1, TS_U8, true}, {8, 16, 1, 2, TS_I8, true}, {3, 16, 1, 2, TS_U8, false},
                 {16, 16, 16, 2, TS_U8, true}, {32, 64, 1, 1, TS_U8, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ts_graph *g = qconv_graph(cases[i].C, cases[i].M, cases[i].group, cases[i].stride, cases[i].xt, cases[i].bias);
        cr_expect_eq(check(g, 0.05, "dnnl.qconv"), 1, "case %zu: not on dnnl.qconv", i);
        ts_graph_free(g);
    }
}

/* The roofline (tsopt profile's MFLOP) counts an 8-bit product as its float
 * form: 2 * output elements * reduction length, not one per output element. */
Test(int8, products_counted_as_their_float_forms)
{
    ts_graph *g = qconv_graph(8, 16, 1, 1, TS_U8, true);
    int found = 0;
    for (int n = 0; n < g->nnodes; n++) {
        if (strcmp(g->nodes[n].op->name, "QLinearConv")) continue;
        found++;
        cr_assert_float_eq(xroof_node_flops(g, n), 2.0 * (2 * 16 * 9 * 11) * (8 * 9), 1e-6, "%g", xroof_node_flops(g, n));
    }
    cr_assert_eq(found, 1);
    ts_graph_free(g);
    g = ts_graph_new("mmi", 13);
    int a = rand_ints(g, TS_U8, "2x5x16", 0, 255), b = rand_ints(g, TS_I8, "16x7", -127, 127);
    int y = xt_node(g, "MatMulInteger", INS(a, b), NOATTR);
    xt_output(g, y);
    cr_assert_float_eq(xroof_node_flops(g, g->values[y].producer), 2.0 * (2 * 5 * 7) * 16, 1e-6);
    ts_graph_free(g);
}

/* a [2, 5, 16] x B -> Q(y): B constant per-column int8, or a second u8 activation. */
Test(int8, qlinear_matmul_on_dnnl)
{
    for (int act = 0; act < 2; act++) {
        ts_graph *g = ts_graph_new("qmm", 13);
        int aq = q(g, xt_input(g, "a", "2x5x16"), 0.02, 120, TS_U8);
        int in[8] = {aq, scalar(g, TS_F32, 0.02), scalar(g, TS_U8, 120), -1, -1, -1, scalar(g, TS_F32, 0.03),
                     scalar(g, TS_U8, 128)};
        if (act) {
            in[3] = q(g, xt_input(g, "b", "2x16x7"), 0.015, 131, TS_U8);
            in[4] = scalar(g, TS_F32, 0.015), in[5] = scalar(g, TS_U8, 131);
        } else {
            in[3] = rand_ints(g, TS_I8, "16x7", -127, 127);
            in[4] = xt_const_random(g, "7", 0.001, 0.01, &rng), in[5] = rand_ints(g, TS_I8, "7", 0, 0);
        }
        xt_output(g, dq(g, xt_node(g, "QLinearMatMul", in, 8, NOATTR), 0.03, 128, TS_U8));
        cr_expect_eq(check(g, 0.03, "dnnl.qmatmul"), 1, "%s B: not on dnnl.qmatmul", act ? "activation" : "constant");
        ts_graph_free(g);
    }
}

/* quantize_dynamic's form: DynamicQuantizeLinear -> MatMulInteger (A's zero
 * point computed per run) -> Cast -> Mul by x_scale * w_scale [-> Add bias
 * [-> Relu]]: one dnnl.matmul_integer step, the chain its post-ops (the
 * scale a run-time operand), equal to the reference bit for bit (the same
 * float32 roundings); skipping int8.dyn_chain gives the unfused steps. */
Test(int8, dynamic_matmul_integer)
{
    for (int k = 0; k < 4; k++) {
        ts_graph *g = ts_graph_new("dyn", 13);
        int x = xt_input(g, "x", k == 3 ? "2x6x32" : "6x32"), dql[3], zero = -1;
        ts_error e = {0};
        cr_assert_geq(ts_graph_add_node(g, "DynamicQuantizeLinear", "dql", &x, 1, NULL, 0, 3, NULL, dql, &e), 0, "%s", e.msg);
        int w = rand_ints(g, TS_I8, "32x24", -127, 127);
        zero = scalar(g, TS_I8, 0);
        int mi = xt_node(g, "MatMulInteger", INS(dql[0], w, dql[2], zero), NOATTR);
        int f = xt_node(g, "Cast", INS(mi), ATTRS(ts_attr_int("to", 1)));
        int s = xt_node(g, "Mul", INS(dql[1], scalar(g, TS_F32, 0.004)), NOATTR);
        int y = xt_node(g, "Mul", INS(f, s), NOATTR);
        if (k >= 1) y = xt_node(g, "Add", INS(xt_const_random(g, "24", -1, 1, &rng), y), NOATTR);
        if (k >= 2) y = xt_node(g, "Relu", INS(y), NOATTR);
        xt_output(g, y);
        ts_plan *p = xt_plan_check(g, NULL, 5, -3, 3, 0, XT_TOL_ELEM);
        cr_expect_eq(xt_steps_of(p, "dnnl.matmul_integer"), 1, "case %d", k);
        cr_expect_eq(xt_steps_of(p, "vec.dynamic_quantize"), 1);
        cr_expect_eq(xt_steps_of(p, "vec.cast_i32") + xt_steps_of(p, "vec.eltwise"), 1, "case %d: the scale product only", k);
        ts_plan_free(p);
        ts_plan_opts o = {.skip = "int8.dyn_chain"};
        p = xt_plan_check(g, &o, 5, -3, 3, 0, XT_TOL_ELEM);
        cr_expect_eq(xt_steps_of(p, "vec.cast_i32"), 1, "case %d: skipped, the Cast runs alone", k);
        ts_plan_free(p);
        ts_graph_free(g);
    }
}

/* Runs g (uint8 inputs in[]) on the fast runtime; output 0's bytes to out. */
static void run_u8(ts_graph *g, ts_tensor **in, uint8_t *out, int64_t n, const char *kernel)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    ts_plan_opts o = {0};
    cr_assert_eq(ts_plan_build(g, &o, &p, &e), TS_OK, "%s", e.msg);
    cr_expect_eq(xt_steps_of(p, kernel), 1, "not on %s", kernel);
    ts_tensor *y = ts_tensor_new(TS_U8, &g->values[g->outputs[0]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_tensor_numel(y), n);
    memcpy(out, y->data, (size_t)n);
    ts_tensor_unref(y);
    ts_plan_free(p);
}

static ts_tensor *u8_tensor(const char *dims, const uint8_t *v)
{
    ts_error e = {0};
    ts_shape s = xt_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_U8, &s, &e);
    memcpy(t->data, v, (size_t)ts_tensor_numel(t));
    return t;
}

/* y = round((a - 113)(b - 114) x 0.0066 x 0.00705 / 0.0107) + 118, the
 * integer sums by hand: row 0 (95, 123, -113, 125) . columns gives 17 776,
 * -57 634, 76 018 (x 0.0043486 -> 77.3, -250.6, 330.6 -> 77, -251, 331)... */
Test(int8, qlinear_matmul_hand_computed)
{
    ts_graph *g = ts_graph_new("qmm", 13);
    ts_error e = {0};
    ts_shape sa = xt_shape("2x4"), sb = xt_shape("4x3");
    int a = ts_graph_add_input(g, "a", TS_U8, &sa, &e), b = ts_graph_add_input(g, "b", TS_U8, &sb, &e);
    int y = xt_node(g, "QLinearMatMul",
                    INS(a, scalar(g, TS_F32, 0.0066), scalar(g, TS_U8, 113), b, scalar(g, TS_F32, 0.00705),
                        scalar(g, TS_U8, 114), scalar(g, TS_F32, 0.0107), scalar(g, TS_U8, 118)),
                    NOATTR);
    xt_output(g, y);
    ts_tensor *in[2] = {u8_tensor("2x4", (const uint8_t[]){208, 236, 0, 238, 3, 214, 255, 29}),
                        u8_tensor("4x3", (const uint8_t[]){152, 51, 244, 60, 26, 255, 0, 127, 246, 90, 80, 235})};
    uint8_t got[6];
    int64_t acc[6];
    const double scale = (double)(0.0066f * 0.00705f / 0.0107f);
    run_u8(g, in, got, 6, "dnnl.qmatmul");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            acc[i * 3 + j] = 0;
            for (int k = 0; k < 4; k++)
                acc[i * 3 + j] += ((int64_t)((uint8_t *)in[0]->data)[i * 4 + k] - 113) * (((uint8_t *)in[1]->data)[k * 3 + j] - 114);
        }
    /* what the sums give (the test's own arithmetic, checked once against numpy) */
    const uint8_t want[6] = {148, 20, 248, 14, 130, 155};
    for (int i = 0; i < 6; i++) {
        double v = nearbyint((double)acc[i] * scale) + 118;
        cr_expect_eq(want[i], (uint8_t)fmin(fmax(v, 0), 255), "y[%d]: the sums give %g", i, v);
        cr_expect_eq(got[i], want[i], "y[%d] = %d, want %d", i, got[i], want[i]);
    }
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
    ts_graph_free(g);
}

/* Channel c of x holds 10 + 10 (c % 4) (zero point 10), output channel m
 * reads channel m with weight 2, bias 3, scale 1 x 0.5 / 1: (0, 20, 40, 60)
 * + 3 -> 1.5, 11.5, 21.5, 31.5 -> half to even 2, 12, 22, 32, plus y's
 * zero point 4.  (An even zero point: oneDNN adds it before rounding, so
 * at an exact tie an odd one would land a step off ONNX's value.) */
Test(int8, qlinear_conv_hand_computed)
{
    ts_graph *g = ts_graph_new("qconv", 13);
    ts_error e = {0};
    ts_shape sx = xt_shape("1x16x2x2");
    int x = ts_graph_add_input(g, "x", TS_U8, &sx, &e);
    double w[256] = {0}, b = 3;
    for (int m = 0; m < 16; m++) w[m * 16 + m] = 2;
    int y = xt_node(g, "QLinearConv",
                    INS(x, scalar(g, TS_F32, 1), scalar(g, TS_U8, 10), xt_const_values(g, TS_I8, "16x16x1x1", w, 256),
                        scalar(g, TS_F32, 0.5), scalar(g, TS_I8, 0), scalar(g, TS_F32, 1), scalar(g, TS_U8, 4),
                        xt_const_values(g, TS_I32, "16", &b, 1)),
                    NOATTR);
    xt_output(g, y);
    uint8_t xv[64], got[64];
    for (int i = 0; i < 64; i++) xv[i] = (uint8_t)(10 + 10 * ((i / 4) % 4));
    ts_tensor *in = u8_tensor("1x16x2x2", xv);
    const uint8_t want[4] = {6, 16, 26, 36};
    run_u8(g, &in, got, 64, "dnnl.qconv");
    for (int i = 0; i < 64; i++) cr_expect_eq(got[i], want[(i / 4) % 4], "y[%d] = %d, want %d", i, got[i], want[(i / 4) % 4]);
    ts_tensor_unref(in);
    ts_graph_free(g);
}

/* ---------------------------------------------------------- fuse_qdq */

/* x -> Q/DQ -> Conv(DQ(w), DQ(b)) [-> Relu] -> Q(ys, yz) -> DQ, as
 * quantize_qdq.py writes; bias_scale_off scales the bias scale off x*w. */
static ts_graph *qdq_conv_graph(bool relu, int yz, double bias_scale_off)
{
    ts_graph *g = ts_graph_new("qdq", 13);
    int x = dq(g, q(g, xt_input(g, "x", "1x8x10x10"), 0.02, 100, TS_U8), 0.02, 100, TS_U8);
    double ws[16];
    for (int i = 0; i < 16; i++) ws[i] = 0.002 + 0.0005 * i;
    int wsv = xt_const_values(g, TS_F32, "16", ws, 16);
    int w = xt_node(g, "DequantizeLinear", INS(rand_ints(g, TS_I8, "16x8x3x3", -127, 127), wsv, rand_ints(g, TS_I8, "16", 0, 0)),
                    ATTRS(ts_attr_int("axis", 0)));
    double bs[16];
    for (int i = 0; i < 16; i++) bs[i] = 0.02 * ws[i] * bias_scale_off;
    int b = xt_node(g, "DequantizeLinear",
                    INS(rand_ints(g, TS_I32, "16", -2000, 2000), xt_const_values(g, TS_F32, "16", bs, 16),
                        rand_ints(g, TS_I32, "16", 0, 0)),
                    ATTRS(ts_attr_int("axis", 0)));
    int y = xt_node(g, "Conv", INS(x, w, b), ATTRS(ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)));
    if (relu) y = xt_node(g, "Relu", INS(y), NOATTR);
    xt_output(g, dq(g, q(g, y, 0.04, yz, TS_U8), 0.04, yz, TS_U8));
    return g;
}

static int count_op(const ts_graph *g, const char *op)
{
    int k = 0;
    for (int n = 0; n < g->nnodes; n++) k += !g->nodes[n].dead && !strcmp(g->nodes[n].op->name, op);
    return k;
}

/* a's and b's outputs, both by the reference interpreter on one seeded
 * input in [-2, 2] (the caller unrefs them). */
static void reference_both(const ts_graph *a, const ts_graph *b, ts_tensor **ya, ts_tensor **yb)
{
    ts_error e = {0};
    ts_tensor *in = ts_tensor_new(TS_F32, &a->values[a->inputs[0]].shape, &e);
    uint64_t r = 77;
    ts_tensor_fill_random(in, &r, -2, 2);
    cr_assert_eq(ts_graph_run_reference(a, TS_DOMAIN_F32, &in, ya, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(b, TS_DOMAIN_F32, &in, yb, &e), TS_OK, "%s", e.msg);
    ts_tensor_unref(in);
}

/* The fused graph and the QDQ graph on the same inputs, both by the
 * reference interpreter: within one step (0.04) everywhere. */
static void expect_within_step(const ts_graph *a, const ts_graph *b, double step)
{
    ts_tensor *ya = NULL, *yb = NULL;
    reference_both(a, b, &ya, &yb);
    int64_t differ = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ya); i++) {
        double d = fabs(((float *)ya->data)[i] - ((float *)yb->data)[i]);
        cr_assert_leq(d, step * 1.001, "[%lld] differs by %g", (long long)i, d);
        differ += d > 0;
    }
    cr_expect_leq(differ, ts_tensor_numel(ya) / 50, "%lld of %lld elements a step apart", (long long)differ,
                  (long long)ts_tensor_numel(ya));
    ts_tensor_unref(ya);
    ts_tensor_unref(yb);
}

Test(int8, fuse_qdq_conv)
{
    for (int relu = 0; relu < 2; relu++) {
        ts_graph *g = qdq_conv_graph(relu, relu ? 0 : 60, 1.0), *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), 1, "relu %d: %s", relu, e.msg);
        cr_expect_eq(count_op(f, "QLinearConv"), 1);
        cr_expect_eq(count_op(f, "Conv") + count_op(f, "Relu"), 0);
        expect_within_step(g, f, 0.04);
        /* and the fused graph runs on the int8 kernel */
        cr_expect_eq(check(f, 0.04, "dnnl.qconv"), 1);
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

Test(int8, fuse_qdq_refuses)
{
    ts_error e = {0};
    /* Relu before a Q with zero point 60: Q(relu(v)) clamps at 60, QLinearConv would not */
    ts_graph *g = qdq_conv_graph(true, 60, 1.0);
    cr_expect_eq(ts_fuse_qdq(g, &e), 0, "fused a Relu the zero point does not make");
    ts_graph_free(g);
    /* a bias scale 1% off x_scale * w_scale: the int32 bias would be added at the wrong scale */
    g = qdq_conv_graph(false, 60, 1.01);
    cr_expect_eq(ts_fuse_qdq(g, &e), 0, "fused a bias of another scale");
    ts_graph_free(g);
}

/* The largest difference of a's and b's outputs, both by the reference
 * interpreter on one input, in units of `step`. */
static double steps_apart(const ts_graph *a, const ts_graph *b, double step)
{
    ts_tensor *ya = NULL, *yb = NULL;
    reference_both(a, b, &ya, &yb);
    double worst = 0;
    for (int64_t i = 0; i < ts_tensor_numel(ya); i++)
        worst = fmax(worst, fabs(((float *)ya->data)[i] - ((float *)yb->data)[i]) / step);
    ts_tensor_unref(ya);
    ts_tensor_unref(yb);
    return worst;
}

/* The planted wrong variants of fuse_qdq, one per condition the pass
 * checks, are refuted by the comparison fuse_qdq_conv makes (within one
 * output step of the QDQ graph): the QDQ graph's fused form as a pass
 * without the condition would write it, built from the same integers
 * (rng restored) with the condition's difference left out:
 *   - a Relu before a Q of zero point 60 dropped (as if the Q's clamp at
 *     its zero point made it): the negative half lands below 60;
 *   - a bias at twice x_scale * w_scale requantized as if at x_scale *
 *     w_scale: the bias halved.
 * Each is more than one step from the QDQ graph, and the pass refuses both
 * graphs (fuse_qdq_refuses). */
Test(int8, fuse_qdq_wrong_variants_refuted)
{
    for (int plant = 0; plant < 2; plant++) {
        const uint64_t seed = rng;
        ts_graph *g = plant ? qdq_conv_graph(false, 60, 2.0) : qdq_conv_graph(true, 60, 1.0);
        rng = seed;
        ts_graph *bad = qdq_conv_graph(false, 60, 1.0), *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), 0, "plant %d: the pass fused the graph: %s", plant, e.msg);
        cr_assert_eq(ts_fuse_qdq(bad, &e), 1, "plant %d: %s", plant, e.msg);
        cr_expect_eq(count_op(bad, "QLinearConv"), 1);
        double d = steps_apart(g, bad, 0.04);
        cr_log_info("fuse_qdq plant %d: %.1f steps from the QDQ graph", plant, d);
        cr_expect_gt(d, 1.001, "plant %d: the wrong fusion is within one step (%.3g)", plant, d);
        /* the same integers, the condition kept: the right fusion passes */
        rng = seed;
        ts_graph *g2 = qdq_conv_graph(false, 60, 1.0), *f2 = ts_graph_copy(g2);
        cr_assert_eq(ts_fuse_qdq(f2, &e), 1, "%s", e.msg);
        cr_expect_leq(steps_apart(g2, f2, 0.04), 1.001);
        ts_graph_free(g2);
        ts_graph_free(f2);
        ts_graph_free(bad);
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

/* DQ -> MatMul(DQ(const per-column weights)) -> Q and Gemm -> Q (a 1x1 QLinearConv). */
Test(int8, fuse_qdq_matmul_gemm)
{
    for (int gemm = 0; gemm < 2; gemm++) {
        ts_graph *g = ts_graph_new("qdq", 13);
        int x = dq(g, q(g, xt_input(g, "x", gemm ? "3x32" : "2x5x32"), 0.02, 128, TS_U8), 0.02, 128, TS_U8);
        double ws[20];
        for (int i = 0; i < 20; i++) ws[i] = 0.001 + 0.0003 * i;
        int w = xt_node(g, "DequantizeLinear",
                        INS(rand_ints(g, TS_I8, gemm ? "20x32" : "32x20", -127, 127), xt_const_values(g, TS_F32, "20", ws, 20),
                            rand_ints(g, TS_I8, "20", 0, 0)),
                        ATTRS(ts_attr_int("axis", gemm ? 0 : 1)));
        int y = gemm ? xt_node(g, "Gemm", INS(x, w), ATTRS(ts_attr_int("transB", 1))) : xt_node(g, "MatMul", INS(x, w), NOATTR);
        xt_output(g, dq(g, q(g, y, 0.01, 128, TS_U8), 0.01, 128, TS_U8));
        ts_graph *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), 1, "%s", e.msg);
        cr_expect_eq(count_op(f, gemm ? "QLinearConv" : "QLinearMatMul"), 1);
        expect_within_step(g, f, 0.01);
        cr_expect_eq(check(f, 0.01, gemm ? "dnnl.qconv" : "dnnl.qmatmul"), 1);
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

/* ------------------------------------ 8-bit element-wise (vec_qlinear.c) */

/* y = round(((a - 100) 0.5 + (b - 20) 0.25) / 1) + 50: (0 + 0, .5 + .5,
 * -50 + 58.75, 77.5 - 5, -50 - 5) = 0, 1, 8.75, 72.5, -55 -> 0, 1, 9, 72
 * (half to even), -55 -> 50, 51, 59, 122, and 0 (saturated). */
Test(int8, qlinear_add_hand_computed)
{
    ts_graph *g = ts_graph_new("qadd", 13);
    ts_error e = {0};
    ts_shape s = xt_shape("5");
    int a = ts_graph_add_input(g, "a", TS_U8, &s, &e), b = ts_graph_add_input(g, "b", TS_U8, &s, &e);
    xt_output(g, xt_node(g, "tsopt.QLinearAdd",
                         INS(a, scalar(g, TS_F32, 0.5), scalar(g, TS_U8, 100), b, scalar(g, TS_F32, 0.25),
                             scalar(g, TS_U8, 20), scalar(g, TS_F32, 1), scalar(g, TS_U8, 50)),
                         NOATTR));
    ts_tensor *in[2] = {u8_tensor("5", (const uint8_t[]){100, 101, 0, 255, 0}),
                        u8_tensor("5", (const uint8_t[]){20, 22, 255, 0, 0})};
    const uint8_t want[5] = {50, 51, 59, 122, 0};
    uint8_t got[5];
    run_u8(g, in, got, 5, "vec.qadd");
    for (int i = 0; i < 5; i++) cr_expect_eq(got[i], want[i], "y[%d] = %d, want %d", i, got[i], want[i]);
    ts_tensor *ref = NULL;
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, &ref, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < 5; i++) cr_expect_eq(((uint8_t *)ref->data)[i], want[i], "reference y[%d]", i);
    ts_tensor_unref(ref);
    ts_tensor_unref(in[0]);
    ts_tensor_unref(in[1]);
    ts_graph_free(g);
}

/* 200 elements through the table t[i] = 255 - i: the vector path's full
 * 64-byte blocks and its masked tail. */
Test(int8, qlinear_lookup_hand_computed)
{
    ts_graph *g = ts_graph_new("qlut", 13);
    ts_error e = {0};
    ts_shape s = xt_shape("200");
    double t[256];
    for (int i = 0; i < 256; i++) t[i] = 255 - i;
    int x = ts_graph_add_input(g, "x", TS_U8, &s, &e);
    xt_output(g, xt_node(g, "tsopt.QLinearLookup", INS(x, xt_const_values(g, TS_U8, "256", t, 256)), NOATTR));
    uint8_t xv[200], got[200];
    for (int i = 0; i < 200; i++) xv[i] = (uint8_t)(i * 37 + 11);
    ts_tensor *in = u8_tensor("200", xv);
    run_u8(g, &in, got, 200, "vec.qlookup");
    for (int i = 0; i < 200; i++) cr_expect_eq(got[i], 255 - xv[i], "y[%d] = %d, want %d", i, got[i], 255 - xv[i]);
    ts_tensor_unref(in);
    ts_graph_free(g);
}

/* Two QLinearConv outputs (channels-last in oneDNN's layout) -> DQ -> Add
 * -> Q -> DQ -> act -> Q -> DQ: fuse_qdq makes QLinearAdd and
 * QLinearLookup, which give the QDQ graph's values exactly (the reference
 * interpreter on both), and the plan runs them on vec.qadd / vec.qlookup in
 * the convolutions' layout (no reorder but the output's), equal to the
 * reference.  uint8 and int8 activations; HardSwish, HardSigmoid,
 * LeakyRelu and a Relu before a zero point other than the minimum (with
 * it, the add's second operand is the plain input: both read plain). */
Test(int8, fuse_qdq_add_and_activation)
{
    const char *acts[] = {"HardSwish", "HardSigmoid", "LeakyRelu", "Relu"};
    for (int k = 0; k < 8; k++) {
        ts_dtype t = k & 1 ? TS_I8 : TS_U8;
        int zp = t == TS_I8 ? -3 : 125;
        ts_graph *g = ts_graph_new("qdq_add", 13);
        int xq = q(g, xt_input(g, "x", "2x16x9x9"), 0.02, zp, t), branch[2];
        for (int j = 0; j < 2; j++) {
            double ys = j ? 0.05 : 0.04;
            if (j && k >= 6) { /* the second operand x itself: plain, the other oneDNN's layout */
                branch[j] = dq(g, xq, 0.02, zp, t);
                continue;
            }
            int in[8] = {xq, scalar(g, TS_F32, 0.02), scalar(g, t, zp), rand_ints(g, TS_I8, "16x16x3x3", -127, 127),
                         xt_const_random(g, "16", 0.001, 0.004, &rng), rand_ints(g, TS_I8, "16", 0, 0),
                         scalar(g, TS_F32, ys), scalar(g, t, zp)};
            int c = xt_node(g, "QLinearConv", in, 8, ATTRS(ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4)));
            branch[j] = dq(g, c, ys, zp, t);
        }
        int sum = dq(g, q(g, xt_node(g, "Add", INS(branch[0], branch[1]), NOATTR), 0.06, zp, t), 0.06, zp, t);
        int act = xt_node(g, acts[k / 2], INS(sum), NOATTR);
        xt_output(g, dq(g, q(g, act, 0.03, zp + 7, t), 0.03, zp + 7, t));
        ts_graph *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), 2, "%s: %s", acts[k / 2], e.msg);
        cr_expect_eq(count_op(f, "tsopt.QLinearAdd"), 1);
        cr_expect_eq(count_op(f, "tsopt.QLinearLookup"), 1);
        cr_expect_eq(count_op(f, "Add") + count_op(f, acts[k / 2]), 0);
        expect_within_step(g, f, 0); /* exact */
        ts_plan *p = xt_plan_check(f, NULL, 11, -2, 2, 0, XT_TOL_ELEM);
        cr_expect_eq(xt_steps_of(p, "vec.qadd"), 1, "%s", acts[k / 2]);
        cr_expect_eq(xt_steps_of(p, "vec.qlookup"), 1, "%s", acts[k / 2]);
        ts_plan_stats st;
        ts_plan_stats_get(p, &st);
        cr_expect_leq(st.reorders, k >= 6 ? 2 : 1, "%s: %d reorders", acts[k / 2], st.reorders);
        ts_plan_free(p);
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

/* x [1, 2, 2, 2] u8 (zero point 10, scale 0.5), channel 0 (10, 12, 13, 41),
 * channel 1 (0, 10, 20, 30): GlobalAveragePool sums (x - 10) = 0 + 2 + 3 +
 * 31 = 36 and -10 + 0 + 10 + 20 = 20, means 36 x 0.5 / 4 = 4.5 and 2.5, / y
 * scale 1 -> 4 and 2 (half to even), + y's zero point 3 -> 7, 5.
 * QLinearChannelMul by gates (0.5, 3) / y scale 2, zero point 100:
 * channel 0 (0, 1, 1.5, 15.5) x 0.5 / 2 = 0, .25, .375, 3.875 -> 100, 100,
 * 100, 104; channel 1 (-5, 0, 5, 10) x 3 / 2 = -7.5, 0, 7.5, 15 -> 92, 100,
 * 108, 115 (half to even: -8, 8). */
Test(int8, qlinear_gap_and_channel_mul_hand_computed)
{
    const uint8_t xv[8] = {10, 12, 13, 41, 0, 10, 20, 30};
    for (int k = 0; k < 2; k++) {
        ts_graph *g = ts_graph_new("qse", 13);
        ts_error e = {0};
        ts_shape s = xt_shape("1x2x2x2");
        int x = ts_graph_add_input(g, "x", TS_U8, &s, &e), y;
        if (k == 0) {
            y = xt_node(g, "tsopt.QLinearGlobalAveragePool",
                        INS(x, scalar(g, TS_F32, 0.5), scalar(g, TS_U8, 10), scalar(g, TS_F32, 1), scalar(g, TS_U8, 3)),
                        NOATTR);
        } else {
            double gate[2] = {0.5, 3};
            y = xt_node(g, "tsopt.QLinearChannelMul",
                        INS(x, scalar(g, TS_F32, 0.5), scalar(g, TS_U8, 10), xt_const_values(g, TS_F32, "1x2x1x1", gate, 2),
                            scalar(g, TS_F32, 2), scalar(g, TS_U8, 100)),
                        NOATTR);
        }
        xt_output(g, y);
        ts_tensor *in = u8_tensor("1x2x2x2", xv), *ref = NULL;
        const uint8_t want_gap[2] = {7, 5}, want_mul[8] = {100, 100, 100, 104, 92, 100, 108, 115};
        const uint8_t *want = k ? want_mul : want_gap;
        int n = k ? 8 : 2;
        uint8_t got[8];
        run_u8(g, &in, got, n, k ? "vec.qchannel_mul" : "vec.qgap");
        cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &in, &ref, &e), TS_OK, "%s", e.msg);
        for (int i = 0; i < n; i++) {
            cr_expect_eq(got[i], want[i], "%d: y[%d] = %d, want %d", k, i, got[i], want[i]);
            cr_expect_eq(((uint8_t *)ref->data)[i], want[i], "%d: reference y[%d]", k, i);
        }
        ts_tensor_unref(ref);
        ts_tensor_unref(in);
        ts_graph_free(g);
    }
}

/* MobileNetV3's squeeze-excite in QDQ form after an int8 conv (oneDNN's
 * channels-last u8): DQ(c) -> GlobalAveragePool -> Q -> DQ -> HardSigmoid
 * (float gate) -> Mul(DQ(c)) -> Q -> DQ.  fuse_qdq makes
 * QLinearGlobalAveragePool and QLinearChannelMul (the DQ of c then dead):
 * within one step of the QDQ graph (the mean's rounding), and the plan runs
 * them on vec.qgap / vec.qchannel_mul equal to the reference; u8 and s8,
 * a gate per image (batch 2) and the batch-1 form. */
Test(int8, fuse_qdq_squeeze_excite)
{
    for (int k = 0; k < 2; k++) {
        ts_dtype t = k ? TS_I8 : TS_U8;
        int zp = k ? 2 : 120;
        ts_graph *g = ts_graph_new("qdq_se", 13);
        int xq = q(g, xt_input(g, "x", k ? "1x16x7x7" : "2x16x7x7"), 0.02, zp, t);
        int in[8] = {xq, scalar(g, TS_F32, 0.02), scalar(g, t, zp), rand_ints(g, TS_I8, "16x16x3x3", -127, 127),
                     xt_const_random(g, "16", 0.001, 0.004, &rng), rand_ints(g, TS_I8, "16", 0, 0), scalar(g, TS_F32, 0.05),
                     scalar(g, t, zp)};
        int c = dq(g, xt_node(g, "QLinearConv", in, 8, ATTRS(ts_attr_ints("pads", (int64_t[]){1, 1, 1, 1}, 4))), 0.05, zp, t);
        int m = dq(g, q(g, xt_node(g, "GlobalAveragePool", INS(c), NOATTR), 0.01, zp, t), 0.01, zp, t);
        int gate = xt_node(g, "HardSigmoid", INS(m), NOATTR);
        xt_output(g, dq(g, q(g, xt_node(g, "Mul", INS(gate, c), NOATTR), 0.03, zp, t), 0.03, zp, t));
        ts_graph *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), 2, "%s", e.msg);
        cr_expect_eq(count_op(f, "tsopt.QLinearGlobalAveragePool"), 1);
        cr_expect_eq(count_op(f, "tsopt.QLinearChannelMul"), 1);
        cr_expect_eq(count_op(f, "GlobalAveragePool") + count_op(f, "Mul"), 0);
        cr_expect_eq(count_op(f, "DequantizeLinear"), 2, "the gate's and the output's DQ remain");
        expect_within_step(g, f, 0.03);
        ts_plan *p = xt_plan_check(f, NULL, 11, -2, 2, 0, XT_TOL_ELEM);
        cr_expect_eq(xt_steps_of(p, "vec.qgap"), 1);
        cr_expect_eq(xt_steps_of(p, "vec.qchannel_mul"), 1);
        ts_plan_free(p);
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

/* MatMulInteger u8 [4, 16] x constant s8 [16, 8] with zero points 7 and 3
 * (the fuzzer's seed shape): oneDNN's int8 matmul with both zero points,
 * the int32 sums equal to the reference's. */
Test(int8, matmul_integer_weight_zero_point)
{
    ts_graph *g = ts_graph_new("mmi", 13);
    ts_error e = {0};
    ts_shape s = xt_shape("4x16");
    int a = ts_graph_add_input(g, "a", TS_U8, &s, &e);
    xt_output(g, xt_node(g, "MatMulInteger", INS(a, rand_ints(g, TS_I8, "16x8", -128, 127), scalar(g, TS_U8, 7), scalar(g, TS_I8, 3)),
                         NOATTR));
    uint8_t av[64];
    for (int i = 0; i < 64; i++) av[i] = (uint8_t)(i * 53 + 9);
    ts_tensor *in = u8_tensor("4x16", av), *ref = NULL, *y = ts_tensor_new(TS_I32, &g->values[g->outputs[0]].shape, &e);
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, &(ts_plan_opts){0}, &p, &e), TS_OK, "%s", e.msg);
    cr_expect_eq(xt_steps_of(p, "dnnl.matmul_integer"), 1);
    cr_assert_eq(ts_plan_run(p, &in, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &in, &ref, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < 32; i++)
        cr_expect_eq(((int32_t *)y->data)[i], ((int32_t *)ref->data)[i], "y[%d] = %d, want %d", i, ((int32_t *)y->data)[i],
                     ((int32_t *)ref->data)[i]);
    ts_plan_free(p);
    ts_tensor_unref(y);
    ts_tensor_unref(ref);
    ts_tensor_unref(in);
    ts_graph_free(g);
}

/* DynamicQuantizeLinear over 90 000 elements (three pieces split over the
 * threads for min/max and for quantizing; the minimum in the first, the
 * maximum in the second): y, scale and zero point equal to the reference's. */
Test(int8, dynamic_quantize_split)
{
    ts_graph *g = ts_graph_new("dql", 13);
    int x = xt_input(g, "x", "300x300"), dql[3];
    ts_error e = {0};
    cr_assert_geq(ts_graph_add_node(g, "DynamicQuantizeLinear", "dql", &x, 1, NULL, 0, 3, NULL, dql, &e), 0, "%s", e.msg);
    for (int i = 0; i < 3; i++) xt_output(g, dql[i]);
    ts_tensor *in = ts_tensor_new(TS_F32, &g->values[x].shape, &e), *ref[3] = {0}, *y[3];
    uint64_t r = 8;
    ts_tensor_fill_random(in, &r, -3, 5);
    ((float *)in->data)[5] = -7.5f, ((float *)in->data)[40000] = 9.25f; /* the extremes in the first two pieces */
    for (int i = 0; i < 3; i++) y[i] = ts_tensor_new(g->values[dql[i]].dtype, &g->values[dql[i]].shape, &e);
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, &(ts_plan_opts){.threads = 2}, &p, &e), TS_OK, "%s", e.msg);
    cr_expect_eq(xt_steps_of(p, "vec.dynamic_quantize"), 1);
    cr_assert_eq(ts_plan_run(p, &in, y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &in, ref, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(y[i]->nbytes, ref[i]->nbytes);
        cr_expect(!memcmp(y[i]->data, ref[i]->data, y[i]->nbytes), "output %d differs from the reference", i);
        ts_tensor_unref(y[i]);
        ts_tensor_unref(ref[i]);
    }
    ts_plan_free(p);
    ts_tensor_unref(in);
    ts_graph_free(g);
}

/* Q(Concat(DQ(a), DQ(b))) with one scale and zero point throughout: Concat
 * of the 8-bit tensors, exact (and on vec.concat); another scale on b is
 * refused (a QLinearConcat would requantize). */
Test(int8, fuse_qdq_concat)
{
    for (int other = 0; other < 2; other++) {
        ts_graph *g = ts_graph_new("qdq_concat", 13);
        int a = dq(g, q(g, xt_input(g, "a", "2x3x5x5"), 0.03, 128, TS_U8), 0.03, 128, TS_U8);
        double bs = other ? 0.04 : 0.03;
        int b = dq(g, q(g, xt_input(g, "b", "2x4x5x5"), bs, 128, TS_U8), bs, 128, TS_U8);
        int c = xt_node(g, "Concat", INS(a, b), ATTRS(ts_attr_int("axis", 1)));
        xt_output(g, dq(g, q(g, c, 0.03, 128, TS_U8), 0.03, 128, TS_U8));
        ts_graph *f = ts_graph_copy(g);
        ts_error e = {0};
        cr_assert_eq(ts_fuse_qdq(f, &e), other ? 0 : 1, "%s", e.msg);
        if (!other) {
            cr_expect_eq(count_op(f, "DequantizeLinear"), 1, "only the output's DQ remains");
            ts_plan *p = xt_plan_check(f, NULL, 3, -4, 4, 0, XT_TOL_ELEM);
            cr_expect_eq(xt_steps_of(p, "vec.concat"), 1);
            ts_plan_free(p);
            /* exact against the QDQ graph: both on the reference, two inputs */
            ts_tensor *in[2], *ya = NULL, *yb = NULL;
            uint64_t r = 5;
            for (int i = 0; i < 2; i++) {
                in[i] = ts_tensor_new(TS_F32, &g->values[g->inputs[i]].shape, &e);
                ts_tensor_fill_random(in[i], &r, -4, 4);
            }
            cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, &ya, &e), TS_OK, "%s", e.msg);
            cr_assert_eq(ts_graph_run_reference(f, TS_DOMAIN_F32, in, &yb, &e), TS_OK, "%s", e.msg);
            cr_expect(!memcmp(ya->data, yb->data, ya->nbytes), "the fused Concat differs from the QDQ graph");
            for (int i = 0; i < 2; i++) ts_tensor_unref(in[i]);
            ts_tensor_unref(ya);
            ts_tensor_unref(yb);
        }
        ts_graph_free(f);
        ts_graph_free(g);
    }
}

/* QuantizeLinear to u8 on values next to every .5 of x / s (k + 0.5) * s
 * moved by 0 to 6 ulp either way, and far outside the range: equal to the
 * reference's float32 division (vec_quant.c multiplies by 1 / s and divides
 * only blocks near a .5; without that fallback 27 of 48 600 such values
 * rounded the other way, standalone). */
Test(int8, quantize_near_half_steps)
{
    const float s = 0.0274f;
    const int64_t n = 2 * 300 * 13 + 4;
    char dims[16];
    snprintf(dims, sizeof dims, "%lld", (long long)n);
    ts_graph *g = ts_graph_new("q", 13);
    xt_output(g, q(g, xt_input(g, "x", dims), s, 128, TS_U8));
    ts_error e = {0};
    ts_tensor *in = ts_tensor_new(TS_F32, &g->values[g->inputs[0]].shape, &e), *ref = NULL, *y;
    float *x = in->data;
    int64_t i = 0;
    for (int k = -300; k < 300; k++)
        for (int d = -6; d <= 6; d++) {
            float v = (k + 0.5f) * s;
            for (int m = 0; m < (d < 0 ? -d : d); m++) v = nextafterf(v, d < 0 ? -INFINITY : INFINITY);
            x[i++] = v;
        }
    x[i++] = 1e30f, x[i++] = -1e30f, x[i++] = 0.0f, x[i++] = 600 * s;
    cr_assert_eq(i, n);
    y = ts_tensor_new(TS_U8, &g->values[g->outputs[0]].shape, &e);
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
    cr_expect_eq(xt_steps_of(p, "vec.quantize"), 1);
    cr_assert_eq(ts_plan_run(p, &in, &y, &e), TS_OK, "%s", e.msg);
    cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, &in, &ref, &e), TS_OK, "%s", e.msg);
    for (int64_t j = 0; j < n; j++)
        cr_expect_eq(((uint8_t *)y->data)[j], ((uint8_t *)ref->data)[j], "x %.9g: %d, reference %d", (double)x[j],
                     ((uint8_t *)y->data)[j], ((uint8_t *)ref->data)[j]);
    ts_tensor_unref(y);
    ts_tensor_unref(ref);
    ts_plan_free(p);
    ts_tensor_unref(in);
    ts_graph_free(g);
}

/* QLinearAdd on every pair of 8-bit operands (u8 and s8, into u8 and s8)
 * with scales whose real quotient (a - az) 0.5 + (b - bz) 0.75 is a .5 for
 * a quarter of the pairs: equal to the reference's division (vec_qlinear.c
 * multiplies by 1 / y_scale and divides only blocks near a .5; fails with
 * that fallback window set to 0). */
Test(int8, qlinear_add_all_pairs_near_half)
{
    for (int k = 0; k < 4; k++) {
        ts_dtype xt = k & 1 ? TS_I8 : TS_U8, yt = k & 2 ? TS_I8 : TS_U8;
        ts_graph *g = ts_graph_new("qadd", 13);
        ts_error e = {0};
        ts_shape s = xt_shape("65536");
        int a = ts_graph_add_input(g, "a", xt, &s, &e), b = ts_graph_add_input(g, "b", xt, &s, &e);
        xt_output(g, xt_node(g, "tsopt.QLinearAdd",
                             INS(a, scalar(g, TS_F32, 0.02), scalar(g, xt, xt == TS_U8 ? 131 : 3), b,
                                 scalar(g, TS_F32, 0.03), scalar(g, xt, xt == TS_U8 ? 120 : -7),
                                 scalar(g, TS_F32, 0.04), scalar(g, yt, yt == TS_U8 ? 128 : 0)),
                             NOATTR));
        ts_tensor *in[2] = {ts_tensor_new(xt, &s, &e), ts_tensor_new(xt, &s, &e)}, *ref = NULL,
                  *y = ts_tensor_new(yt, &s, &e);
        for (int i = 0; i < 65536; i++) ((uint8_t *)in[0]->data)[i] = (uint8_t)i, ((uint8_t *)in[1]->data)[i] = (uint8_t)(i >> 8);
        ts_plan *p = NULL;
        cr_assert_eq(ts_plan_build(g, NULL, &p, &e), TS_OK, "%s", e.msg);
        cr_expect_eq(xt_steps_of(p, "vec.qadd"), 1);
        cr_assert_eq(ts_plan_run(p, in, &y, &e), TS_OK, "%s", e.msg);
        cr_assert_eq(ts_graph_run_reference(g, TS_DOMAIN_F32, in, &ref, &e), TS_OK, "%s", e.msg);
        int bad = 0;
        for (int i = 0; i < 65536; i++) bad += ((uint8_t *)y->data)[i] != ((uint8_t *)ref->data)[i];
        cr_expect_eq(bad, 0, "case %d: %d of 65536 differ from the reference", k, bad);
        ts_tensor_unref(y);
        ts_tensor_unref(ref);
        ts_tensor_unref(in[0]);
        ts_tensor_unref(in[1]);
        ts_plan_free(p);
        ts_graph_free(g);
    }
}
