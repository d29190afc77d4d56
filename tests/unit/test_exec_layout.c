/* Pad and standalone BatchNormalization kernels (vec_pad.c,
 * vec_batchnorm.c), and the kernels that work on a convolution's dense
 * permuted (channels-last) output in place (vec_layout.h: element-wise
 * chains, Concat, Slice, Pad, BatchNormalization), through
 * ts_plan_build/run against the reference interpreter.  The plan
 * statistics show that no node fell back to the reference kernel. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

TestSuite(layout, .fini = xt_done);

/* Random float32 constant in [lo, hi) (weights, BN parameters). */
static int rnd(const char *dims, double lo, double hi)
{
    static uint64_t rng = 777;
    return xt_const_random(G, dims, lo, hi, &rng);
}

/* Runs G on random inputs with the reference interpreter and with plans
 * at one and two threads; every output within tol + tol|ref|, and no
 * reference steps when fallback is 0. */
static void compare(double tol, int fallback)
{
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan_stats st = xt_plan_stats(G, &o, 12345, -1, 1, tol, XT_TOL_ELEM);
        if (fallback >= 0)
            cr_assert_eq(st.fallback_steps, fallback, "threads %d: %d reference steps, expected %d", threads,
                         st.fallback_steps, fallback);
    }
}

static int pad11(int x, const char *mode, int pads)
{
    return op("Pad", INS(x, pads), ATTRS(ts_attr_string("mode", mode)));
}

/* ----------------------------------------------------------------- Pad */

Test(layout, pad_modes_ranks_negative)
{
    static const char *const modes[] = {"constant", "reflect", "edge"};
    graph(13);
    int x1 = input("7"), x2 = input("5x6"), x3 = input("3x4x5"), x4 = input("2x3x5x6"), x5 = input("2x2x3x4x5");
    for (int m = 0; m < 3; m++) {
        output(pad11(x1, modes[m], I64("2", 2, 3)));
        output(pad11(x2, modes[m], I64("4", 1, 0, 2, 4)));
        output(pad11(x2, modes[m], I64("4", -2, 1, 3, -4))); /* crop one side, pad the other */
        output(pad11(x3, modes[m], I64("6", 0, 2, -1, 1, 0, 3)));
        output(pad11(x4, modes[m], I64("8", 0, 0, 1, 2, 0, 0, 2, 1))); /* NCHW spatial */
        output(pad11(x4, modes[m], I64("8", 1, -1, 0, 0, 0, 2, 0, -3)));
        output(pad11(x5, modes[m], I64("10", 0, 1, 1, 2, 3, 1, 0, 2, 1, 3)));
    }
    compare(0, 0);
}

Test(layout, pad_constant_value_and_axes)
{
    graph(18);
    int x = input("3x4x5");
    output(op("Pad", INS(x, I64("6", 1, 2, 0, 0, 1, 3), F32("", 2.5)), NOATTR));
    output(op("Pad", INS(x, I64("4", 2, -1, 1, 3), F32("", -1), I64("2", -1, 0)), NOATTR)); /* axes 2 and 0 */
    output(op("Pad", INS(x, I64("2", 1, 2), -1, I64("1", 1)), ATTRS(ts_attr_string("mode", "reflect"))));
    compare(0, 0);
}

Test(layout, pad_opset2_attributes)
{
    graph(2);
    int x = input("2x3x4");
    output(op("Pad", INS(x), ATTRS(ts_attr_ints("pads", (const int64_t[]){0, 1, 2, 1, -1, 3}, 6),
                                   ts_attr_float("value", 0.75))));
    output(op("Pad", INS(x), ATTRS(ts_attr_ints("pads", (const int64_t[]){1, 2, 0, 0, 1, 3}, 6),
                                   ts_attr_string("mode", "edge"))));
    output(op("Pad", INS(x), ATTRS(ts_attr_ints("pads", (const int64_t[]){0, 2, 1, 1, 1, 2}, 6),
                                   ts_attr_string("mode", "reflect"))));
    compare(0, 0);
}

/* ---------------------------------------------------- channels-last */

static int conv1x1(int x, int cin, int cout)
{
    char w[32];
    snprintf(w, sizeof w, "%dx%dx1x1", cout, cin);
    return op("Conv", INS(x, rnd(w, -0.5, 0.5)), NOATTR);
}

static int bn(int x, int c)
{
    char d[16];
    snprintf(d, sizeof d, "%d", c);
    return op("BatchNormalization", INS(x, rnd(d, 0.5, 1.5), rnd(d, -1, 1), rnd(d, -1, 1), rnd(d, 0.5, 2)),
              ATTRS(ts_attr_float("epsilon", 1e-3)));
}

/* NASNet's patterns on conv outputs: Relu, Add of two convs, Concat, the
 * shifted Pad + Slice, BatchNormalization after Concat, and convs reading
 * the results; plus mixed layouts (a conv output with a graph input). */
Test(layout, conv_output_consumers)
{
    graph(17);
    int x = input("1x8x9x11"), other = input("1x16x9x11");
    int a = conv1x1(x, 8, 16), b = conv1x1(x, 8, 16);
    int r = op("Relu", INS(a), NOATTR);
    int s = op("Add", INS(r, b), NOATTR);
    int cat = op("Concat", INS(s, a, b), ATTRS(ts_attr_int("axis", 1)));
    int n1 = bn(cat, 48);
    int pd = op("Pad", INS(n1, I64("8", 0, 0, 1, 0, 0, 0, 0, 1)), NOATTR);
    int sl = op("Slice", INS(pd, I64("2", 1, 1), I64("2", 1000000, 1000000), I64("2", 2, 3)), NOATTR);
    int refl = op("Pad", INS(sl, I64("8", 0, 0, 2, 1, 0, 0, 1, 2)), ATTRS(ts_attr_string("mode", "reflect")));
    int y = conv1x1(refl, 48, 8);
    output(y);
    output(op("Add", INS(conv1x1(sl, 48, 16), other), NOATTR)); /* blocked + plain */
    output(op("Slice", INS(cat, I64("1", 5), I64("1", 40), I64("1", 1)), NOATTR)); /* channel slice as output */
    output(bn(conv1x1(x, 8, 5), 5)); /* fused into the conv */
    compare(1e-4, 0);
}

Test(layout, batchnorm_standalone_plain)
{
    graph(15);
    int x4 = input("2x6x5x7"), x2 = input("3x6"), x3 = input("2x6x9");
    output(bn(x4, 6));
    output(bn(x2, 6));
    output(op("Relu", INS(bn(x3, 6)), NOATTR));
    compare(1e-5, 0);
}

/* ------------------------------------------- common subexpressions */

static int plan_steps(void)
{
    ts_plan *plan = NULL;
    ts_plan_stats st;
    cr_assert_eq(ts_plan_build(G, NULL, &plan, &E), TS_OK, "%s", E.msg);
    ts_plan_stats_get(plan, &st);
    ts_plan_free(plan);
    return st.steps;
}

/* NASNet's per-branch Relu of a shared input: after --graph-opt basic's
 * common-subexpression pass the second Relu reuses the first's result (no
 * step), a duplicate that is a graph output or with other attributes does
 * not: as many steps as the same graph written with the Relu shared.  The
 * plan alone lowers the nodes as written. */
static void dup_graph(bool dup)
{
    graph(17);
    int x = input("1x8x6x7");
    int c = conv1x1(x, 8, 8);
    int r1 = op("Relu", INS(c), NOATTR), r2 = dup ? op("Relu", INS(c), NOATTR) : r1;
    int r3 = op("Relu", INS(c), NOATTR);
    output(conv1x1(r1, 8, 4));
    output(conv1x1(r2, 8, 4));
    output(r3);
    output(op("LeakyRelu", INS(c), ATTRS(ts_attr_float("alpha", 0.5))));
    output(op("LeakyRelu", INS(c), ATTRS(ts_attr_float("alpha", 0.25))));
}

Test(layout, duplicate_elementwise_reused)
{
    dup_graph(false);
    int shared = plan_steps();
    xt_done();
    dup_graph(true);
    compare(1e-4, 0);
    /* the plan itself no longer merges duplicates: the graph level does */
    cr_assert_eq(plan_steps(), shared + 1, "%d steps planned as written, %d with the Relu shared", plan_steps(), shared);
    cr_assert_eq(ts_graph_opt_apply(G, TS_GRAPH_OPT_BASIC, &E), 1, "%s", E.msg);
    compare(1e-4, 0);
    cr_assert_eq(plan_steps(), shared, "%d steps after --graph-opt basic, %d with the Relu shared", plan_steps(), shared);
}

/* ---------------------------------- broadcast operands on conv outputs */

static int plan_reorders(void)
{
    ts_plan *plan = NULL;
    ts_plan_stats st;
    cr_assert_eq(ts_plan_build(G, NULL, &plan, &E), TS_OK, "%s", E.msg);
    ts_plan_stats_get(plan, &st);
    ts_plan_free(plan);
    return st.reorders;
}

/* A squeeze-excite block: the conv's output scaled by a per-channel
 * N x C x 1 x 1 sigmoid (and by a constant C x 1 x 1, operands swapped),
 * then a conv.  The scaling runs on the conv's channels-last output, the
 * small operand read plain: no conversion of the big tensor to plain and
 * back. */
Test(layout, broadcast_scale_keeps_layout)
{
    graph(17);
    int x = input("1x16x9x11");
    int c = conv1x1(x, 16, 16);
    int pooled = op("GlobalAveragePool", INS(c), NOATTR);
    int sc = op("Sigmoid", INS(conv1x1(pooled, 16, 16)), NOATTR);
    int m = op("Mul", INS(c, sc), NOATTR);
    int m2 = op("Mul", INS(rnd("16x1x1", 0.5, 1.5), m), NOATTR);
    output(conv1x1(m2, 16, 8));
    compare(1e-4, 0);
    /* one conversion left: the small scale to plain (2 when the big
     * tensor also went to plain and back) */
    cr_assert_eq(plan_reorders(), 1, "%d layout conversions", plan_reorders());
}

/* vec.reduce on a conv's channels-last result (a global mean before the
 * classifier): read as it lies, no conversion to plain, when the kept dims
 * come in logical order in memory; a reduction that would leave them
 * permuted (over H alone: W before C) converts first. */
Test(layout, reduce_reads_channels_last)
{
    graph(17);
    int x = input("1x8x9x11");
    int c = conv1x1(x, 8, 24);
    output(op("ReduceMean", INS(c), ATTRS(ts_attr_ints("axes", (const int64_t[]){2, 3}, 2), ts_attr_int("keepdims", 0))));
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(G, &o, 99, -1, 1, 1e-5, XT_TOL_ELEM);
        const xplan *p = (const xplan *)plan;
        int order[TS_MAX_RANK];
        bool cl = xbuf_dense_order(&p->bufs[p->value_buf[c]], order) && !xbuf_order_plain(order, 4);
        if (__builtin_cpu_supports("avx512f")) cr_assert(cl, "the conv wrote no channels-last result: nothing tested");
        if (cl) cr_assert_eq(xt_steps_of(plan, "reorder"), 0);
        cr_assert_eq(xt_steps_of(plan, "vec.reduce"), 1);
        ts_plan_free(plan);
    }
    output(op("ReduceMean", INS(c), ATTRS(ts_attr_ints("axes", (const int64_t[]){2, 3}, 2)))); /* keepdims */
    output(op("ReduceMax", INS(c), ATTRS(ts_attr_ints("axes", (const int64_t[]){1}, 1))));    /* over C */
    output(op("ReduceSum", INS(c, I64("1", 2)), NOATTR)); /* over H: converted */
    compare(1e-5, 0);
}

/* A global mean of 16-channel blocks: a depthwise net whose convs run in
 * oneDNN's aBcd16b (conv.stem_blocks) ends in ReduceMean over H and W
 * (MNASNet's head) or GlobalAveragePool (MobileNetV2's); vec.reduce reads
 * the blocks as they lie, no conversion, when the channels are a multiple
 * of 16 (32 here, batch 2); 24 channels (padded blocks) convert first
 * (ReduceMean), or the GlobalAveragePool before a Flatten (squeezenet1_1's
 * head) writes each block's channels below C plain, no conversion either.
 * Against the reference, 1 and 2 threads. */
static void reduce_blocks(int C, bool direct, bool gap)
{
    char w[32];
    snprintf(w, sizeof w, "%dx1x3x3", C);
    int x = input("2x3x9x11");
    int c = conv1x1(x, 3, C);
    c = op("Conv", INS(c, rnd(w, -0.5, 0.5)),
           ATTRS(ts_attr_int("group", C), ts_attr_ints("pads", (const int64_t[]){1, 1, 1, 1}, 4)));
    if (gap) /* GlobalAveragePool, as mobilenet_v2's head; Flatten reads its plain result */
        output(op("Flatten", INS(op("GlobalAveragePool", INS(c), NOATTR)), NOATTR));
    else
        output(op("ReduceMean", INS(c),
                  ATTRS(ts_attr_ints("axes", (const int64_t[]){2, 3}, 2), ts_attr_int("keepdims", 0))));
    for (int threads = 1; threads <= 2; threads++) {
        ts_plan_opts o = {.threads = threads};
        ts_plan *plan = xt_plan_check(G, &o, 99, -1, 1, 1e-5, XT_TOL_ELEM);
        const xplan *p = (const xplan *)plan;
        bool blocks = xbuf_is_blocks16(&p->bufs[p->value_buf[c]]);
        bool padded = !blocks && xbuf_is_blocks16_padded(&p->bufs[p->value_buf[c]]);
        cr_assert_eq(xt_steps_of(plan, "vec.reduce"), !gap || blocks || padded); /* else dnnl.pool */
        if (__builtin_cpu_supports("avx512f") && (direct || gap))
            cr_assert(direct ? blocks : padded, "the depthwise conv wrote no 16-channel blocks: nothing tested");
        if (blocks || (gap && padded)) cr_assert_eq(xt_steps_of(plan, "reorder"), 0);
        if (!direct) cr_assert(!blocks);
        ts_plan_free(plan);
    }
}

Test(layout, reduce_reads_blocks16)
{
    graph(17);
    reduce_blocks(32, true, false);
}

Test(layout, global_avgpool_reads_blocks16)
{
    graph(17);
    reduce_blocks(32, true, true);
}

Test(layout, reduce_padded_blocks_converts)
{
    graph(17);
    reduce_blocks(24, false, false);
}

Test(layout, global_avgpool_padded_blocks_reads_blocks)
{
    graph(17);
    reduce_blocks(24, false, true);
}
