/* A Concat read only through Relus (NASNet-A's cell outputs) is written as
 * max(x, 0) by the vec.concat step, which absorbs the Relus
 * (src/vec/vec_movement.c): results equal the reference interpreter, no
 * Relu step remains; a Concat with another reader, one that is a graph
 * output, or a Relu that is a graph output keep their Relu step. */
#include <stdlib.h>
#include "exec_check.h"

static uint64_t rng = 9001;

static int concat(ts_graph *g, const int *ins, int n)
{
    return xt_node(g, "Concat", ins, n, ATTRS(ts_attr_int("axis", 1)));
}

static int relu(ts_graph *g, int x) { return xt_node(g, "Relu", INS(x), NOATTR); }

static int conv1x1(ts_graph *g, int x, int C, int F) { return xt_conv1x1(g, x, C, F, &rng); }

static int count(const xplan *p, const char *kernel, const char *op)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++)
        n += !strcmp(p->steps[i].k->name, kernel) && (!op || !strcmp(p->g->nodes[p->steps[i].node].op->name, op));
    return n;
}

/* Inputs in [-1, 1): half the elements are negative, so a missing Relu shows. */
static const xplan *check(ts_graph *g, ts_plan **plan)
{
    *plan = xt_plan_check(g, NULL, rng++, -1, 1, 1e-4, XT_TOL_MAX);
    return (const xplan *)*plan;
}

/* `convs`: inputs are 3x3 conv outputs (channels-last or blocked layouts),
 * else plain graph inputs; two Relu readers, each read by a 1x1 conv. */
static void fused(bool convs, int C)
{
    ts_graph *g = ts_graph_new("t", 17);
    char dims[32];
    snprintf(dims, sizeof dims, "1x%dx9x9", convs ? C : 8);
    int a = xt_input(g, "a", dims), b = xt_input(g, "b", dims);
    if (convs) {
        a = xt_conv3x3(g, a, C, &rng);
        b = xt_conv3x3(g, b, C, &rng);
    }
    int cc = concat(g, INS(a, b, a)), Ct = 3 * (convs ? C : 8);
    xt_output(g, conv1x1(g, relu(g, cc), Ct, 5));
    xt_output(g, conv1x1(g, relu(g, cc), Ct, 7));
    ts_plan *plan;
    const xplan *p = check(g, &plan);
    cr_expect_eq(count(p, "vec.concat", NULL), 1);
    cr_expect_eq(count(p, "vec.eltwise", "Relu"), 0, "a Relu step is left");
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(exec_concat_relu, plain_inputs) { fused(false, 0); }
Test(exec_concat_relu, conv_outputs) { fused(true, 16); }
Test(exec_concat_relu, conv_outputs_odd_channels) { fused(true, 11); }

/* kind 0: the Concat also feeds a Sigmoid; 1: the Concat is a graph output;
 * 2: the Relu is a graph output.  Each keeps a Relu step. */
static void kept(int kind)
{
    ts_graph *g = ts_graph_new("t", 17);
    int a = xt_input(g, "a", "1x4x5x5"), b = xt_input(g, "b", "1x6x5x5");
    int cc = concat(g, INS(a, b)), r = relu(g, cc);
    if (kind == 0) xt_output(g, xt_node(g, "Sigmoid", INS(cc), NOATTR));
    if (kind == 1) xt_output(g, cc);
    xt_output(g, kind == 2 ? r : conv1x1(g, r, 10, 3));
    ts_plan *plan;
    const xplan *p = check(g, &plan);
    cr_expect_eq(count(p, "vec.eltwise", "Relu"), 1, "kind %d", kind);
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(exec_concat_relu, another_reader_keeps_relu) { kept(0); }
Test(exec_concat_relu, concat_output_keeps_relu) { kept(1); }
Test(exec_concat_relu, relu_output_keeps_relu) { kept(2); }

/* A batch-1 channel concat is one output row; above 128 KiB it is copied in
 * byte ranges over the threads, ranges that start and end inside the
 * inputs' blocks (3, 37 and 64 channels of 64x64: blocks of 48 KiB, 592 KiB
 * and 1 MiB).  Through Relu readers (relu copy) and as a graph output
 * (memcpy), with 1 and 2 threads; inputs in [-1, 1), so a range copied
 * twice, skipped or shifted shows. */
static void pieces(bool through_relu, int threads)
{
    ts_graph *g = ts_graph_new("t", 17);
    int a = xt_input(g, "a", "1x3x64x64"), b = xt_input(g, "b", "1x37x64x64"), c = xt_input(g, "c", "1x64x64x64");
    int cc = concat(g, INS(a, b, c));
    if (through_relu) {
        xt_output(g, xt_node(g, "Sigmoid", INS(relu(g, cc)), NOATTR));
        xt_output(g, xt_node(g, "Sigmoid", INS(relu(g, cc)), NOATTR));
    } else {
        xt_output(g, cc);
    }
    ts_plan_opts o = {.threads = threads};
    ts_plan *plan = xt_plan_check(g, &o, rng++, -1, 1, 1e-6, XT_TOL_ELEM);
    cr_expect_eq(count((const xplan *)plan, "vec.eltwise", "Relu"), 0, "a Relu step is left");
    ts_plan_free(plan);
    ts_graph_free(g);
}

Test(exec_concat_relu, large_row_in_pieces_relu_1_thread) { pieces(true, 1); }
Test(exec_concat_relu, large_row_in_pieces_relu_2_threads) { pieces(true, 2); }
Test(exec_concat_relu, large_row_in_pieces_copy_2_threads) { pieces(false, 2); }
