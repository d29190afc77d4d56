/* The matmul atom: MatMul with a 2-D right operand, optionally followed by
 * an Add of a constant bias vector (one fused matmul for the runtime, so
 * rules apply across the bias).  A rank-3 left operand is a batch of row
 * blocks, read as one matrix (apply.h).  Row in atom.c. */
#include "rules/atom.h"

bool ts_atom_matmul_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    int bias = -1, add = ts_rmatch_producer(s, v, &ts_op_add), p = -1;
    if (add >= 0) {
        const ts_node *a = &g->nodes[add];
        int mm = ts_rmatch_producer(s, a->inputs[0], &ts_op_matmul);
        int b = a->inputs[1];
        if (mm < 0 || !g->values[b].constant || ts_rvshape(g, b)->rank != 1 ||
            !ts_shape_eq(ts_rvshape(g, a->inputs[0]), ts_rvshape(g, v)) || !ts_rmatch_only_use(s, a->inputs[0], add))
            return false;
        p = mm;
        bias = b;
        if (!ts_rmatch_node(s, add)) return false;
    } else {
        p = ts_rmatch_producer(s, v, &ts_op_matmul);
    }
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    int ra = ts_rvshape(g, n->inputs[0])->rank, rb = ts_rvshape(g, n->inputs[1])->rank;
    if (rb != 2 || (ra != 2 && ra != 3)) return false;
    if (!ts_rmatch_node(s, p) || !ts_rmatch_arg(s, e->arg[0], n->inputs[0]) ||
        !ts_rmatch_arg(s, e->arg[1], n->inputs[1]))
        return false;
    return ts_rmatch_bias(s, e->arg[1], bias);
}

int ts_atom_matmul_roots(const ts_rexpr *e, const ts_op_desc **out)
{
    (void)e;
    out[0] = &ts_op_matmul;
    out[1] = &ts_op_add; /* the bias */
    return 2;
}

int ts_atom_matmul_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    int ra = ts_rvshape(b->g, x[0])->rank;
    if (ts_rvshape(b->g, x[1])->rank != 2 || (ra != 2 && (b->theory || ra != 3))) return -1;
    int y = ts_rbuild_node1(b, &ts_op_matmul, x, 2, NULL, 0);
    if (y < 0 || b->bias < 0) return y;
    int ins[2] = {y, b->bias};
    return ts_rbuild_node1(b, &ts_op_add, ins, 2, NULL, 0);
}

/* Rows come from the left operand, columns from the right one. */
int64_t ts_atom_matmul_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    if (axis > 1) return -1;
    return ts_rexpr_split_point(e->arg[axis], axis, shape_of, ctx);
}
