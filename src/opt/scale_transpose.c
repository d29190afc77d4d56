/* A per-channel constant Mul moved before the Transpose it reads
 * (passes.h, ts_scale_before_transpose):
 *
 *     Mul(Transpose(x, perm), c)  ->  Transpose(Mul(x, c'), perm)
 *
 * c a constant with at most one dimension other than 1 (a scale per
 * channel, or a scalar); c' holds the same values with that dimension at
 * the axis of x the Transpose moves to it (perm[i] for c's axis i, c
 * aligned to the right as broadcasting aligns it).
 *
 * Why it is exact: a Transpose only moves elements; output element y[j]
 * of the original is x[perm(j)] * c[j_i] and of the rewrite
 * x[perm(j)] * c'[perm(j)_{perm[i]}] = x[perm(j)] * c[j_i], the same
 * product of the same two floats, bit for bit.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ConvNeXt's
 * layer scale multiplies the block's result after the permute back to
 * channels-first, a full pass over the tensor that ORT runs alone (its
 * MatMulScaleFusion takes only scalars, and the Transpose stands between
 * the scale and the MatMul + bias Add).  Moved before the Transpose it is
 * a per-channel scale right after MatMul + Add, which fold_affine
 * (ts_fold_affine, run by the driver after this pass) folds into the
 * weights and the bias: convnext_tiny's 18 layer-scale Muls go (ORT's
 * optimized graph: Mul 18 -> 0; its file by hand, 1 thread, CPU time per
 * run, 9 alternating rounds of 3: x1.058 against the file written without
 * it, all rounds won; 12-07, loaded Intel Xeon).  Whether it pays is the
 * target's cost to decide (a costed pass; driver.c folds after it). */
#include "ir/ir.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

/* 1: the Mul at node k moved before its Transpose; 0: not a candidate; -1: error. */
static int move_at(ts_graph *g, int k, ts_error *err)
{
    const ts_node *m = &g->nodes[k];
    if (m->dead || m->op != &ts_op_mul || m->ninputs != 2 || m->noutputs != 1 || m->inputs[0] < 0 ||
        m->inputs[1] < 0)
        return 0;
    int ci = g->values[m->inputs[1]].constant ? 1 : g->values[m->inputs[0]].constant ? 0 : -1;
    if (ci < 0) return 0;
    int y = m->inputs[1 - ci], cv = m->inputs[ci], tk = g->values[y].producer;
    if (tk < 0 || g->values[y].constant) return 0;
    const ts_node *t = &g->nodes[tk];
    if (t->dead || t->op != &ts_op_transpose || t->noutputs != 1 || ts_graph_is_output(g, y)) return 0;
    for (int n = 0; n < g->nnodes; n++) /* the Mul the Transpose's only reader */
        for (int j = 0; n != k && !g->nodes[n].dead && j < g->nodes[n].ninputs; j++)
            if (g->nodes[n].inputs[j] == y) return 0;
    const ts_value *yv = &g->values[y], *c = &g->values[cv];
    int r = yv->shape.rank, cr = c->shape.rank;
    if (c->dtype != yv->dtype || cr > r || g->values[m->outputs[0]].shape.rank != r) return 0;
    for (int d = 0; d < r; d++) /* the Mul's output is y's shape: c broadcasts into it */
        if (g->values[m->outputs[0]].shape.dims[d] != yv->shape.dims[d]) return 0;
    int axis = -1; /* c's one dimension other than 1, as an axis of y */
    for (int d = 0; d < cr; d++) {
        if (c->shape.dims[d] == 1) continue;
        if (axis >= 0) return 0;
        axis = d + r - cr;
    }
    const ts_transpose_attrs *p = t->attrs;
    int64_t perm[TS_MAX_RANK];
    for (int d = 0; d < r; d++) perm[d] = p->nperm < 0 ? r - 1 - d : p->perm[d];
    int64_t dims[TS_MAX_RANK];
    for (int d = 0; d < r; d++) dims[d] = 1;
    if (axis >= 0) dims[perm[axis]] = c->shape.dims[axis - (r - cr)];
    ts_shape s = ts_shape_make(r, dims);
    ts_tensor *nc = ts_tensor_new(c->dtype, &s, err);
    if (!nc) return -1;
    for (int64_t i = 0; i < ts_tensor_numel(nc); i++) ts_tensor_set_f64(nc, i, ts_tensor_get_f64(c->constant, i));
    char name[64];
    int ncv = ts_graph_add_constant(g, ts_graph_fresh_name(g, "scale_first", name, sizeof name), nc, err);
    ts_tensor_unref(nc);
    if (ncv < 0) return -1;
    int x = g->nodes[tk].inputs[0], in[2] = {x, ncv}, sc = -1, out = -1;
    if (ts_graph_add_node(g, "Mul", ts_graph_fresh_name(g, "scale_first_mul", name, sizeof name), in, 2, NULL, 0, 1,
                          NULL, &sc, err) < 0)
        return -1;
    int nt = g->nnodes;
    const ts_transpose_attrs *pa = g->nodes[tk].attrs;
    if (ts_graph_add_node_parsed(g, &ts_op_transpose, ts_graph_fresh_name(g, "scale_first_t", name, sizeof name),
                                 &sc, 1, pa, 1, NULL, &out, err) < 0)
        return -1;
    ts_opt_take_value(g, nt, g->nodes[k].outputs[0]); /* the new Transpose writes the Mul's value */
    g->nodes[k].dead = true;
    g->nodes[tk].dead = true;
    return 1;
}

int ts_scale_before_transpose(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, move_at, err);
}
