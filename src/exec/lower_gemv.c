/* vec.gemv's group, formed by the lowering stage (issue 27 §3): the
 * products stacked with node n's and the element-wise chain after it.
 *
 * Stacking: other MatMuls by the same constant weights whose inputs exist
 * now (nasrnn multiplies each of x0..x4 by the same eight weights, all
 * ready at the start) join n's step as extra rows, so the weights are
 * streamed once for all of them instead of once per product (measured in
 * docs/runtime.md).  Their results are computed early (they live a little
 * longer).  A lowering, not a rewrite (TSOPT_SKIP=gemv_stack turns it
 * off): each product is computed as its node says, row by row from its own
 * input and the one weight (no Concat or Split, the outputs are the nodes'
 * own values); what changes is only the summation order of a one-row
 * product (two accumulators when alone, one within a stacked block),
 * within 1e-5 of the largest output (test_lowering, test_exec_gemv_stack).
 * The graph rewrite of the same idea, with Concat and Split, is the
 * optimizer's ts_merge_shared_weights.
 *
 * The chain: the sole-reader element-wise nodes after n's product, lowered
 * with the product as the program's running result (lower_chain.c, without
 * half plans' roundings); the kernel applies it while the result is in
 * cache. */
#include <stdlib.h>
#include "exec/roofline.h"
#include "vec/vec.h"
#include "vec/vec_eltwise.h"
#include "ops/list.h"

/* Products are stacked only from weights of an eighth of a core's L2 (128
 * KiB with 1 MiB): the gain is the passes over the weights saved, which
 * come from memory for nasrnn's 1 MiB matrices; a smaller weight stays in
 * cache between separate steps. */
#define XG_STACK_L2_DIV 8

/* Rows of a product reading value a (its leading dims) when its last dim
 * is K, else 0. */
static int64_t product_rows(const ts_shape *a, int64_t K)
{
    if (a->rank < 1 || a->dims[a->rank - 1] != K) return 0;
    int64_t rows = 1;
    for (int i = 0; i < a->rank - 1; i++) rows *= a->dims[i];
    return rows;
}

/* Rows of node m's product when m is a MatMul by the same weights value as
 * node n (K x N) that could run now; 0 otherwise. */
static int64_t stack_rows(const xplan *p, int n, int m, int64_t K)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n], *o = &g->nodes[m];
    if (m == n || o->dead || p->claimed[m] || o->op != nd->op || o->ninputs != 2 || o->noutputs != 1 ||
        o->inputs[1] != nd->inputs[1] || !xv_all_f32(p, m) || !xplan_inputs_ready(p, m, -1))
        return 0;
    return product_rows(&g->values[o->inputs[0]].shape, K);
}

/* The MatMuls stacked with n's product (constant 2-D weights of at least
 * an eighth of L2, rows within XGROUP_GEMV_ROWS), appended to gr. */
static void stack(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (nd->op != &ts_op_matmul || nd->ninputs != 2 || xplan_skips(p, "gemv_stack")) return;
    const ts_tensor *B = xplan_const(p, nd->inputs[1]);
    if (!B || B->shape.rank != 2) return;
    const int64_t K = B->shape.dims[0], N = B->shape.dims[1];
    int64_t rows = product_rows(&g->values[nd->inputs[0]].shape, K);
    if (rows < 1 || rows > XGROUP_GEMV_ROWS || K * N * (int64_t)sizeof(float) < xroof_caches_get().l2 / XG_STACK_L2_DIV)
        return;
    for (int m = 0; m < g->nnodes && gr->nnodes < XGROUP_MAX; m++) {
        int64_t r = stack_rows(p, n, m, K);
        if (r < 1 || rows + r > XGROUP_GEMV_ROWS) continue;
        rows += r;
        gr->gemv_stack[gr->gemv_nstack++] = m;
        gr->nodes[gr->nnodes++] = m;
    }
}

bool xgroup_gemv(const xplan *p, int n, xgroup *gr)
{
    const ts_node *nd = &p->g->nodes[n];
    if (nd->noutputs != 1) return false;
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = nd->outputs[0];
    if (p->opts.no_fusion) return true;
    stack(p, n, gr);
    if (!(gr->gemv_chain = calloc(1, sizeof *gr->gemv_chain))) return false;
    gr->y = xgroup_chain_after(p, gr->y, gr, gr->gemv_chain, false);
    return true;
}
