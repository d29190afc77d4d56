/* oneDNN MatMul with batched A and 2-D constant weights run as one 2-D
 * product (src/dnnl/dnnl_matmul.c, flatten_rows: [b.., M, K] x [K, N] as
 * [b..*M, K] x [K, N], weights in oneDNN's blocked 2-D layout), against
 * the reference interpreter at one and two threads: 3-D and 4-D A, ragged
 * N (not a multiple of the 64-column panels), with the fused bias,
 * residual Add and Relu (BERT's MatMul+Add+Add), and a runtime B (not
 * flattened: batched product).  Rows > 16 so that oneDNN, not vec.gemv,
 * takes the node; every case must be one step with nothing on a
 * reference kernel. */
#define XT_GLOBAL_GRAPH
#include "exec_check.h"

static uint64_t Rng = 4711;

TestSuite(matmul_flat, .fini = xt_done);

static void check(int steps, int fused)
{
    for (int t = 1; t <= 2; t++) {
        ts_plan_opts o = {.threads = t};
        ts_plan_stats st = xt_plan_stats(G, &o, 100 + (uint64_t)t, -1, 1, 1e-4, XT_TOL_MAX);
        cr_assert_eq(st.steps, steps, "threads %d: %d steps, expected %d", t, st.steps, steps);
        cr_assert_eq(st.fused_nodes, fused, "threads %d: %d fused, expected %d", t, st.fused_nodes, fused);
        cr_assert_eq(st.fallback_steps, 0);
        cr_assert_eq(st.ref_impls, 0);
    }
}

Test(matmul_flat, three_d_plain)
{
    graph(17);
    output(xt_node(G, "MatMul", INS(xt_input(G, NULL, "2x24x96"), xt_const_random(G, "96x130", -1, 1, &Rng)),
                   NOATTR));
    check(1, 0);
}

Test(matmul_flat, four_d_plain)
{
    graph(17);
    output(xt_node(G, "MatMul", INS(xt_input(G, NULL, "2x3x7x33"), xt_const_random(G, "33x64", -1, 1, &Rng)),
                   NOATTR));
    check(1, 0);
}

/* BERT's layer output: MatMul + bias + residual, then Relu; the residual
 * is a graph input (read, not overwritten) */
Test(matmul_flat, bias_residual_relu)
{
    graph(17);
    int x = xt_input(G, NULL, "1x40x96"), r = xt_input(G, NULL, "1x40x80");
    int y = xt_node(G, "MatMul", INS(x, xt_const_random(G, "96x80", -1, 1, &Rng)), NOATTR);
    y = xt_node(G, "Add", INS(y, xt_const_random(G, "80", -1, 1, &Rng)), NOATTR);
    y = xt_node(G, "Add", INS(y, r), NOATTR);
    output(xt_node(G, "Relu", INS(y), NOATTR));
    check(1, 3);
}

/* The residual is computed in the plan (dies at the Add: may be
 * accumulated onto in place) */
Test(matmul_flat, residual_from_the_plan)
{
    graph(17);
    int x = xt_input(G, NULL, "2x20x48");
    int h = xt_node(G, "Tanh", INS(x), NOATTR);
    int y = xt_node(G, "MatMul", INS(h, xt_const_random(G, "48x48", -1, 1, &Rng)), NOATTR);
    y = xt_node(G, "Add", INS(y, xt_const_random(G, "48", -1, 1, &Rng)), NOATTR);
    output(xt_node(G, "Add", INS(x, y), NOATTR));
    check(2, 2);
}

/* Both operands computed: a batched product, left 3-D */
Test(matmul_flat, runtime_b_batched)
{
    graph(17);
    output(xt_node(G, "MatMul", INS(xt_input(G, NULL, "3x20x16"), xt_input(G, NULL, "3x16x24")), NOATTR));
    check(1, 0);
}
