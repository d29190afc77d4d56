/* conv1x1 -> [zero Pad] -> AveragePool(k, stride k) computed pool first:
 * the graph pass ts_pool_before_conv (src/opt/passes.c, level basic)
 * writes AveragePool -> Conv, which the runtime lowers as the two steps it
 * is (dnnl.pool, dnnl.conv).  The rewritten graph against the original
 * (the optimizer's check) and its plan against the reference interpreter,
 * a hand-computed case, and the graphs the pass must leave alone (stride,
 * pool pads, a second reader, a pool that does not tile the input,
 * overlapping windows, a Pad of the same shape that shifts the image). */
#include "exec_check.h"
#include "ops/list.h"
#include "opt/check.h"
#include "opt/passes.h"

static uint64_t rng = 777;

static int conv1x1_bias(ts_graph *g, int x, int C, int F, const ts_attr *at, int na)
{
    char w[48], b[16];
    snprintf(w, sizeof w, "%dx%dx1x1", F, C);
    snprintf(b, sizeof b, "%d", F);
    int ins[] = {x, xt_const_random(g, w, -0.3, 0.3, &rng), xt_const_random(g, b, -0.5, 0.5, &rng)};
    return xt_node(g, "Conv", ins, 3, at, na);
}

static int zero_pad(ts_graph *g, int x)
{
    double z[8] = {0};
    int ins[] = {x, xt_const_values(g, TS_I64, "8", z, 8)};
    return xt_node(g, "Pad", ins, 2, NULL, 0);
}

static int avgpool(ts_graph *g, int x, int k, int s, int pad)
{
    ts_attr at[] = {ts_attr_ints("kernel_shape", (int64_t[]){k, k}, 2), ts_attr_ints("strides", (int64_t[]){s, s}, 2),
                    ts_attr_ints("pads", (int64_t[]){pad, pad, pad, pad}, 4)};
    return xt_node(g, "AveragePool", &x, 1, at, 3);
}

static int count_steps(const ts_plan *plan, const char *kernel) { return xt_steps_of(plan, kernel); }

/* ts_pool_before_conv on a copy of g, checked against g; its count. */
static int pool_first(ts_graph **g)
{
    ts_error e = {0};
    ts_graph *f = ts_graph_copy(*g);
    cr_assert_not_null(f);
    int n = ts_pool_before_conv(f, &e);
    cr_assert_geq(n, 0, "%s", e.msg);
    double worst = 0;
    cr_assert_eq(ts_opt_check(*g, f, rng++, &worst, &e), TS_OK, "%s", e.msg);
    cr_assert_leq(worst, 1, "pool first changed the outputs (%g tolerances)", worst);
    ts_graph_free(*g);
    *g = f;
    return n;
}

/* BN -> Relu -> conv1x1 -> Pad(0) -> AvgPool 2x2 (DenseNet's transition),
 * and the same with a 3x3 pool and no Pad. */
Test(pool_first, transition_equals_reference)
{
    for (int v = 0; v < 2; v++) {
        ts_graph *g = ts_graph_new("transition", 17);
        int k = v ? 3 : 2, hw = v ? 12 : 28;
        char dims[32];
        snprintf(dims, sizeof dims, "1x64x%dx%d", hw, hw);
        int x = xt_input(g, "x", dims);
        int h = xt_node(g, "Relu", (int[]){xt_conv3x3(g, x, 64, &rng)}, 1, NULL, 0);
        int c = conv1x1_bias(g, h, 64, 32, NULL, 0);
        xt_output(g, xt_node(g, "Relu", (int[]){avgpool(g, v ? c : zero_pad(g, c), k, k, 0)}, 1, NULL, 0));
        cr_assert_eq(pool_first(&g), 1, "pool %d: not run pool first", k);
        ts_plan *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(count_steps(plan, "dnnl.pool"), 1);
        cr_assert_eq(count_steps(plan, "vec.pad"), 0);
        const xplan *xp = (const xplan *)plan; /* the 1x1 conv (the last step but the Relu) after the pool */
        int pool = -1, conv1 = -1;
        for (int i = 0; i < xp->nsteps; i++) {
            if (!strcmp(xp->steps[i].k->name, "dnnl.pool")) pool = i;
            if (xp->g->nodes[xp->steps[i].node].op == &ts_op_conv) conv1 = i;
        }
        cr_assert_lt(pool, conv1, "the pool (step %d) does not run before the 1x1 conv (step %d)", pool, conv1);
        ts_plan_free(plan);
        ts_graph_free(g);
    }
}

/* x = [1 2; 3 4], w = 2, b = 1: conv [3 5; 7 9], average 6 = 2 * 2.5 + 1. */
Test(pool_first, hand_computed)
{
    ts_graph *g = ts_graph_new("tiny", 17);
    int x = xt_input(g, "x", "1x1x2x2");
    int ins[] = {x, xt_const_values(g, TS_F32, "1x1x1x1", (double[]){2}, 1),
                 xt_const_values(g, TS_F32, "1", (double[]){1}, 1)};
    int c = xt_node(g, "Conv", ins, 3, NULL, 0);
    int y = avgpool(g, c, 2, 2, 0);
    xt_output(g, xt_node(g, "Relu", &y, 1, NULL, 0));
    ts_error e = {0};
    ts_plan *plan = NULL;
    ts_plan_opts o = {.threads = 1};
    cr_assert_eq(pool_first(&g), 1);
    cr_assert_eq(ts_plan_build(g, &o, &plan, &e), TS_OK, "%s", e.msg);
    ts_shape s = xt_shape("1x1x2x2"), so = xt_shape("1x1x1x1");
    ts_tensor *in = ts_tensor_new(TS_F32, &s, &e), *out = ts_tensor_new(TS_F32, &so, &e);
    for (int k = 0; k < 4; k++) ((float *)in->data)[k] = (float)(k + 1);
    cr_assert_eq(ts_plan_run(plan, &in, &out, &e), TS_OK, "%s", e.msg);
    cr_assert_float_eq(((float *)out->data)[0], 6.0f, 1e-6);
    ts_tensor_unref(in);
    ts_tensor_unref(out);
    ts_plan_free(plan);
    ts_graph_free(g);
}

/* Cases that must run as conv then pool, still equal to the reference. */
Test(pool_first, declines)
{
    for (int v = 0; v < 6; v++) {
        ts_graph *g = ts_graph_new("declines", 17);
        int x = xt_input(g, "x", v == 3 ? "1x16x9x9" : "1x16x8x8");
        ts_attr s2[] = {ts_attr_ints("strides", (int64_t[]){2, 2}, 2)};
        int c = conv1x1_bias(g, x, 16, 16, v == 0 ? s2 : NULL, v == 0);
        int y;
        switch (v) {
        case 0: y = avgpool(g, c, 2, 2, 0); break; /* conv stride 2 */
        case 1: y = avgpool(g, c, 2, 2, 1); break; /* pool pads */
        case 2:                                    /* the conv result has a second reader */
            y = avgpool(g, c, 2, 2, 0);
            xt_output(g, c);
            break;
        case 3: y = avgpool(g, c, 2, 2, 0); break; /* 9x9: tiles do not cover the input */
        case 4: y = avgpool(g, c, 2, 1, 0); break; /* overlapping windows (stride 1) */
        default: {                                 /* Pad 1 row on top, -1 at the bottom: the same shape, shifted */
            const double shift[8] = {0, 0, 1, 0, 0, 0, -1, 0};
            int ins[] = {c, xt_const_values(g, TS_I64, "8", shift, 8)};
            y = avgpool(g, xt_node(g, "Pad", ins, 2, NULL, 0), 2, 2, 0);
            break;
        }
        }
        xt_output(g, y);
        cr_assert_eq(pool_first(&g), 0, "case %d ran pool first", v);
        ts_plan_free(xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX));
        ts_graph_free(g);
    }
}
