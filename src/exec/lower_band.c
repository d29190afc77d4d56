/* vec.band's groups, formed by the lowering stage (issue 27 §3): a MatMul
 * reading a band that a Gather of rows by a constant 2-D index table
 * gathered (longformer's sliding-window attention; the forms and why in
 * vec_band.c).  The Gather's step (vec.band.defer) is formed only when its
 * sole reader is such a MatMul, and the MatMul's (vec.band) only when its
 * Gather was deferred, so the band is never materialized and always read.
 * Depends on shapes and constants only.  A memory choice, but the scores
 * are dot products of C in vec_band.c's order: stated tolerance 2^-20 of
 * the largest output against the Gather and MatMul steps (test_lowering). */
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* True when MatMul node mm reads a gathered band; fills *b. */
static bool band_match(const xplan *p, int mm, xgroup_band *b)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[mm];
    if (nd->op != &ts_op_matmul || nd->ninputs != 2 || !xv_all_f32(p, mm)) return false;
    for (int side = 0; side < 2; side++) {
        int gv = nd->inputs[side], prod = g->values[gv].producer;
        if (prod < 0) continue;
        const ts_node *gn = &g->nodes[prod];
        if (gn->op != &ts_op_gather || gn->ninputs != 2) continue;
        const ts_value *x = &g->values[gn->inputs[0]];
        const ts_tensor *idx = xplan_const(p, gn->inputs[1]);
        int axis;
        if (x->dtype != TS_F32 || x->shape.rank < 2 || !idx || (idx->dtype != TS_I64 && idx->dtype != TS_I32) ||
            idx->shape.rank != 2 || !ts_axis_norm(((const ts_gather_attrs *)gn->attrs)->axis, x->shape.rank, &axis) ||
            axis != x->shape.rank - 2)
            continue;
        const int ax = axis;
        const int64_t S = x->shape.dims[ax], C = x->shape.dims[ax + 1], L = idx->shape.dims[0],
                      J = idx->shape.dims[1];
        const ts_shape *o = &g->values[nd->inputs[1 - side]].shape;
        if (o->rank != x->shape.rank + 1 || o->dims[ax] != L) continue;
        bool ok = side == 0 ? o->dims[ax + 1] == C && o->dims[ax + 2] == 1 : o->dims[ax + 1] == 1 && o->dims[ax + 2] == J;
        int64_t H = 1;
        for (int d = 0; d < ax; d++) {
            ok &= o->dims[d] == x->shape.dims[d];
            H *= x->shape.dims[d];
        }
        for (int64_t k = 0; ok && k < L * J; k++) {
            int64_t v = ts_tensor_get_i64(idx, k);
            ok = v >= -S && v < S;
        }
        if (!ok || S < 1 || C < 1 || L < 1 || J < 1) continue;
        *b = (xgroup_band){.side = side, .gather = prod, .idx = gn->inputs[1], .H = H, .S = S, .C = C, .L = L, .J = J};
        return true;
    }
    return false;
}

bool xgroup_band_gather(const xplan *p, int n, xgroup *gr)
{
    const ts_node *nd = &p->g->nodes[n];
    if (p->opts.no_fusion || nd->noutputs != 1) return false;
    int mm = xplan_sole_consumer(p, nd->outputs[0]);
    if (mm < 0 || !band_match(p, mm, &gr->band) || gr->band.gather != n) return false;
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = nd->outputs[0];
    return true;
}

bool xgroup_band_matmul(const xplan *p, int n, xgroup *gr)
{
    if (!band_match(p, n, &gr->band)) return false;
    /* the Gather deferred (vec.band.defer): its step's source; else it ran
     * for real and n is an ordinary MatMul */
    int b = p->value_buf[p->g->nodes[n].inputs[gr->band.side]];
    gr->band_src = -1;
    for (int i = 0; b >= 0 && i < p->nsteps && gr->band_src < 0; i++)
        if (p->steps[i].k == &xk_vec_band_defer && p->steps[i].out[0] == b) gr->band_src = p->steps[i].in[0];
    gr->nodes[0] = n;
    gr->nnodes = 1;
    gr->y = p->g->nodes[n].outputs[0];
    return gr->band_src >= 0;
}
