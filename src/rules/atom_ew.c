/* Atoms of element-wise arithmetic and data movement: ewadd, ewmul (Add,
 * Mul on equal shapes), smul (Mul by a scalar), relu (Relu), transpose
 * (2-D Transpose).  Rows in atom.c. */
#include "ops/attrs.h"
#include "rules/atom.h"

/* Both inputs and the output of a binary node have one shape. */
static bool same_shapes2(const ts_graph *g, const ts_node *n)
{
    return n->ninputs == 2 && n->inputs[0] >= 0 && n->inputs[1] >= 0 &&
           ts_shape_eq(ts_rvshape(g, n->inputs[0]), ts_rvshape(g, n->inputs[1])) &&
           ts_shape_eq(ts_rvshape(g, n->inputs[0]), ts_rvshape(g, n->outputs[0]));
}

bool ts_atom_ew_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    int p = ts_rmatch_producer(s, v, ts_rop_table[e->op].op);
    if (p < 0 || !same_shapes2(s->g, &s->g->nodes[p])) return false;
    const ts_node *n = &s->g->nodes[p];
    return ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], n->inputs[0]) &&
           ts_rmatch_arg(s, e->arg[1], n->inputs[1]);
}

int ts_atom_ew_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)p;
    if (!ts_shape_eq(ts_rvshape(b->g, x[0]), ts_rvshape(b->g, x[1]))) return -1;
    return ts_rbuild_node1(b, ts_rop_table[op].op, x, 2, NULL, 0);
}

/* A split point of either operand (element-wise: every axis carries over). */
int64_t ts_atom_ew_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    int64_t p = ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx);
    return p >= 0 ? p : ts_rexpr_split_point(e->arg[1], axis, shape_of, ctx);
}

int64_t ts_atom_keep_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    return axis <= 1 ? ts_rexpr_split_point(e->arg[0], axis, shape_of, ctx) : -1;
}

bool ts_atom_smul_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    const ts_graph *g = s->g;
    int p = ts_rmatch_producer(s, v, &ts_op_mul);
    if (p < 0) return false;
    const ts_node *n = &g->nodes[p];
    if (ts_shape_numel(ts_rvshape(g, n->inputs[1])) != 1 || !ts_shape_eq(ts_rvshape(g, n->inputs[0]), ts_rvshape(g, v)))
        return false;
    return ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], n->inputs[0]) &&
           ts_rmatch_arg(s, e->arg[1], n->inputs[1]);
}

int ts_atom_smul_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    const ts_shape *s = ts_rvshape(b->g, x[1]);
    /* the theory's scalar has rank 0; a model's is any one-element tensor */
    if (b->theory ? s->rank != 0 : ts_shape_numel(s) != 1) return -1;
    return ts_rbuild_node1(b, &ts_op_mul, x, 2, NULL, 0);
}

bool ts_atom_relu_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    int p = ts_rmatch_producer(s, v, &ts_op_relu);
    return p >= 0 && ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], s->g->nodes[p].inputs[0]);
}

int ts_atom_relu_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    return ts_rbuild_node1(b, &ts_op_relu, x, 1, NULL, 0);
}

bool ts_atom_transpose_match(ts_rmatch *s, const ts_rexpr *e, int v)
{
    int p = ts_rmatch_producer(s, v, &ts_op_transpose);
    if (p < 0 || ts_rvshape(s->g, v)->rank != 2) return false;
    /* no perm reverses the axes: [1, 0] at rank 2 */
    const ts_transpose_attrs *a = s->g->nodes[p].attrs;
    if (a->nperm >= 0 && (a->nperm != 2 || a->perm[0] != 1 || a->perm[1] != 0)) return false;
    return ts_rmatch_node(s, p) && ts_rmatch_arg(s, e->arg[0], s->g->nodes[p].inputs[0]);
}

int ts_atom_transpose_build(ts_rbuild *b, ts_rop op, const ts_rparams *p, const int *x)
{
    (void)op, (void)p;
    if (ts_rvshape(b->g, x[0])->rank != 2) return -1;
    int64_t perm[2] = {1, 0};
    ts_attr a = ts_attr_ints("perm", perm, 2);
    return ts_rbuild_node1(b, &ts_op_transpose, x, 1, &a, 1);
}

int64_t ts_atom_transpose_split(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    return axis <= 1 ? ts_rexpr_split_point(e->arg[0], 1 - axis, shape_of, ctx) : -1;
}
