/* vec.gemv stacking (src/vec/vec_gemv.c, stack_rows): MatMuls by the same
 * constant weights whose inputs exist when the first is lowered run as one
 * step, their rows gathered, multiplied in one pass over the weights and
 * scattered back (nasrnn: x0..x4 each times the same eight weights).
 * Checked against the reference interpreter at one and two threads; the
 * plan statistics tell what was stacked (one step, the others counted as
 * fused) and that the weights were packed once.  Covers: five one-row
 * products (the 5-row register block), mixed row counts and batch dims up
 * to the 16-row limit (6 + 6 + 4 blocks), more products than the limit
 * (two steps), a product whose input is computed later (not stacked), the
 * first product keeping its fused element-wise chain, no_fusion and small
 * weights (no stacking).
 *
 * lower_gemv.c stacks only weights of at least an eighth of the L2 the
 * machine reports, which roofline.c clamps to at most 8 MiB: the stacked
 * cases use weights of 1 MiB or more (K = 512, N >= 512), so they stack on
 * any machine (a 200 KiB weight did not on a VM reporting a 2 MiB L2). */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

static uint64_t Rng = 9001;

TestSuite(gemv_stack, .fini = xt_done);

static size_t packed_bytes(int64_t K, int64_t N) { return (size_t)((N + 63) / 64 * 64 * K) * sizeof(float); }

/* Both thread counts (and no_fusion when nf_steps > 0): outputs match the
 * reference; steps, fused nodes and weight bytes as expected. */
static void check(int steps, int fused, size_t weights, int nf_steps)
{
    for (int t = 1; t <= 2; t++) {
        ts_plan_opts o = {.threads = t};
        ts_plan_stats st = xt_plan_stats(G, &o, 31 + (uint64_t)t, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(st.steps, steps, "threads %d: %d steps, expected %d", t, st.steps, steps);
        cr_assert_eq(st.fused_nodes, fused, "threads %d: %d fused, expected %d", t, st.fused_nodes, fused);
        cr_assert_eq(st.fallback_steps, 0);
        cr_assert_eq(st.weight_bytes, weights, "threads %d: weight bytes %zu, expected %zu", t, st.weight_bytes,
                     weights);
    }
    if (nf_steps > 0) {
        ts_plan_opts o = {.threads = 1, .no_fusion = true};
        ts_plan_stats st = xt_plan_stats(G, &o, 5, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(st.steps, nf_steps, "no_fusion: %d steps, expected %d", st.steps, nf_steps);
    }
}

/* nasrnn's input side: five time steps, one weight; the results feed Adds
 * with a second product (as the cell does), so they are not graph outputs. */
Test(gemv_stack, five_steps_one_weight)
{
    graph(17);
    int w = xt_const_random(G, "512x512", -1, 1, &Rng), wh = xt_const_random(G, "512x512", -1, 1, &Rng);
    int h = xt_input(G, "h", "1x512");
    int hw = xt_node(G, "MatMul", INS(h, wh), NOATTR);
    for (int i = 0; i < 5; i++) {
        int x = xt_input(G, NULL, "1x512");
        output(xt_node(G, "Add", INS(xt_node(G, "MatMul", INS(x, w), NOATTR), hw), NOATTR));
    }
    /* h@wh (five readers: nothing fused after it), one stacked step for
     * the five products which also absorbs the first Add (its chain), and
     * the other four Adds as element-wise steps */
    check(1 + 1 + 4, 5, 2 * packed_bytes(512, 512), 11);
}

/* Row counts 1, 2x3 (batch dims), 4, 5: 16 rows, the limit; ragged N */
Test(gemv_stack, mixed_rows_up_to_limit)
{
    graph(17);
    int w = xt_const_random(G, "512x520", -1, 1, &Rng);
    const char *dims[] = {"1x512", "2x3x512", "4x512", "5x512"};
    for (int i = 0; i < 4; i++) output(xt_node(G, "MatMul", INS(xt_input(G, NULL, dims[i]), w), NOATTR));
    check(1, 3, packed_bytes(512, 520), 4);
}

/* Twenty one-row products: 16 in the first step, the last 4 in a second */
Test(gemv_stack, more_than_the_row_limit)
{
    graph(17);
    int w = xt_const_random(G, "512x512", -1, 1, &Rng);
    for (int i = 0; i < 20; i++) output(xt_node(G, "MatMul", INS(xt_input(G, NULL, "1x512"), w), NOATTR));
    check(2, 18, packed_bytes(512, 512), 20);
}

/* The first product keeps its fused chain (bias, Tanh); a product whose
 * input is computed by a later node is not stacked (its own step). */
Test(gemv_stack, chain_kept_and_late_input_not_stacked)
{
    graph(17);
    int w = xt_const_random(G, "512x512", -1, 1, &Rng), b = xt_const_random(G, "512", -1, 1, &Rng);
    int x0 = xt_input(G, NULL, "1x512"), x1 = xt_input(G, NULL, "3x512"), x2 = xt_input(G, NULL, "1x512");
    int y0 = xt_node(G, "MatMul", INS(x0, w), NOATTR);
    y0 = xt_node(G, "Tanh", INS(xt_node(G, "Add", INS(y0, b), NOATTR)), NOATTR);
    output(y0);
    output(xt_node(G, "MatMul", INS(x1, w), NOATTR));
    int r = xt_node(G, "Relu", INS(x2), NOATTR);
    output(xt_node(G, "MatMul", INS(r, w), NOATTR));
    /* steps: stacked (x0 with chain, x1), Relu, MatMul(r); fused: Add, Tanh, x1's MatMul */
    check(3, 3, packed_bytes(512, 512) + 512 * sizeof(float), 0);
}

/* Small weights (below XG_STACK_MIN) stay one step per product */
Test(gemv_stack, small_weights_not_stacked)
{
    graph(17);
    int w = xt_const_random(G, "64x96", -1, 1, &Rng);
    for (int i = 0; i < 3; i++) output(xt_node(G, "MatMul", INS(xt_input(G, NULL, "2x64"), w), NOATTR));
    check(3, 0, packed_bytes(64, 96), 0);
}

/* Outputs of G planned with o on inputs in (caller frees). */
static void run(const ts_plan_opts *o, ts_tensor **in, ts_tensor **out, int *steps)
{
    ts_error e = {0};
    ts_plan *p = NULL;
    cr_assert_eq(ts_plan_build(G, o, &p, &e), TS_OK, "%s", e.msg);
    for (int i = 0; i < G->noutputs; i++) out[i] = ts_tensor_new(TS_F32, &G->values[G->outputs[i]].shape, &e);
    cr_assert_eq(ts_plan_run(p, in, out, &e), TS_OK, "%s", e.msg);
    ts_plan_stats st;
    ts_plan_stats_get(p, &st);
    *steps = st.steps;
    ts_plan_free(p);
}

/* Stacking is a lowering: made at every graph level (none too), each
 * product's rows equal to the unstacked plan's (TSOPT_SKIP=gemv_stack)
 * within 1e-5 of the largest output: only a one-row product's summation
 * order differs (two accumulators alone, one in a block). */
Test(gemv_stack, a_lowering_at_every_level)
{
    graph(17);
    int w = xt_const_random(G, "512x512", -1, 1, &Rng);
    ts_tensor *in[5], *a[5], *b[5];
    ts_error e = {0};
    for (int i = 0; i < 5; i++) {
        output(xt_node(G, "MatMul", INS(xt_input(G, NULL, i == 2 ? "3x512" : "1x512"), w), NOATTR));
        in[i] = ts_tensor_new(TS_F32, &G->values[G->inputs[i]].shape, &e);
        ts_tensor_fill_random(in[i], &Rng, -1, 1);
    }
    int stacked, alone;
    run(&(ts_plan_opts){.threads = 1, .graph_opt = TS_GRAPH_OPT_NONE}, in, a, &stacked);
    run(&(ts_plan_opts){.threads = 1, .skip = "gemv_stack"}, in, b, &alone);
    cr_assert_eq(stacked, 1, "not stacked at level none: %d steps", stacked);
    cr_assert_eq(alone, 5);
    for (int i = 0; i < 5; i++) {
        const float *x = a[i]->data, *y = b[i]->data;
        double big = 1, worst = 0;
        for (int64_t k = 0; k < ts_tensor_numel(a[i]); k++) big = fmax(big, fabs(y[k]));
        for (int64_t k = 0; k < ts_tensor_numel(a[i]); k++) worst = fmax(worst, fabs((double)x[k] - y[k]));
        cr_assert_leq(worst, 1e-5 * big, "product %d: stacked differs by %g (largest %g)", i, worst, big);
        ts_tensor_unref(a[i]);
        ts_tensor_unref(b[i]);
        ts_tensor_unref(in[i]);
    }
}
