/* A per-channel PRelu written as a depthwise convolution (passes.h,
 * ts_prelu_as_dwconv):
 *
 *     PRelu(x, s)  ->  Add(x, Relu(Conv(x, W, group = C)))   W[c] = s[c] - 1, 1x1
 *
 * Why it is right: with every slope s[c] <= 1, (s - 1) x is >= 0 exactly
 * where x <= 0, so x + Relu((s - 1) x) is x + (s - 1) x = s x there and
 * x + 0 = x elsewhere: PRelu.  In float the result is rounded twice (the
 * product, then the sum) where PRelu rounds once: within the check's
 * tolerance.  A slope above 1 (a channel that amplifies negatives) breaks
 * the sign argument, so such a PRelu is left alone.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ORT 1.30 fuses
 * no PRelu into a convolution and runs it outside its blocked NCHWc layout,
 * with a broadcasting kernel (a reorder out of NCHWc before each): in
 * FSRCNN its 7 PRelus and their reorders took 57 % of the run.  A depthwise
 * 1x1 Conv with its Relu is a fused NCHWc convolution there, and the Add
 * is element-wise.  Whether it pays is the target's cost to decide (a
 * costed pass): tsopt's runtime fuses PRelu into the conv already. */
#include <math.h>
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

/* The slope as one float per channel of x (C = x's dimension 1), every
 * one finite and at most 1; else NULL. */
static const ts_tensor *slopes(const ts_graph *g, int sv, int64_t c)
{
    const ts_value *v = &g->values[sv];
    if (!v->constant || v->dtype != TS_F32 || v->shape.rank > 4) return NULL;
    int64_t n = ts_shape_numel(&v->shape);
    if (n != c && n != 1) return NULL;
    /* numpy broadcasting against [N, C, H, W]: only the dimension aligned
     * with C may be other than 1 */
    for (int i = 0; i < v->shape.rank; i++)
        if (v->shape.dims[i] != 1 && i + 4 - v->shape.rank != 1) return NULL;
    for (int64_t i = 0; i < n; i++) {
        double s = ts_tensor_get_f64(v->constant, i);
        if (!(s <= 1) || !isfinite(s)) return NULL;
    }
    return v->constant;
}

/* 1: the PRelu at node p rewritten; 0: not a candidate; -1: error. */
static int rewrite_at(ts_graph *g, int p, ts_error *err)
{
    const ts_node *pn = &g->nodes[p];
    if (pn->dead || pn->op != &ts_op_prelu || pn->ninputs != 2 || pn->noutputs != 1) return 0;
    int x = pn->inputs[0], y = pn->outputs[0];
    const ts_value *xv = &g->values[x];
    if (xv->constant || xv->dtype != TS_F32 || xv->shape.rank != 4 || xv->shape.dims[1] < 1) return 0;
    int64_t c = xv->shape.dims[1];
    const ts_tensor *s = slopes(g, pn->inputs[1], c);
    if (!s) return 0;
    int64_t wd[4] = {c, 1, 1, 1};
    ts_shape ws = ts_shape_make(4, wd);
    ts_tensor *w = ts_tensor_new(TS_F32, &ws, err);
    if (!w) return -1;
    for (int64_t i = 0; i < c; i++) ts_tensor_set_f64(w, i, ts_tensor_get_f64(s, ts_tensor_numel(s) == 1 ? 0 : i) - 1);
    char name[64];
    int wv = ts_graph_add_constant(g, ts_graph_fresh_name(g, "prelu_dw_weight", name, sizeof name), w, err);
    ts_tensor_unref(w);
    if (wv < 0) return -1;
    int64_t k1[2] = {1, 1};
    ts_attr ca[2] = {ts_attr_int("group", c), ts_attr_ints("kernel_shape", k1, 2)};
    int cin[2] = {x, wv}, d = -1, r = -1, out = -1;
    if (ts_graph_add_node(g, "Conv", ts_graph_fresh_name(g, "prelu_dw", name, sizeof name), cin, 2, ca, 2, 1, NULL,
                          &d, err) < 0 ||
        ts_graph_add_node(g, "Relu", ts_graph_fresh_name(g, "prelu_dw_relu", name, sizeof name), &d, 1, NULL, 0, 1,
                          NULL, &r, err) < 0)
        return -1;
    int ain[2] = {x, r}, n = g->nnodes;
    if (ts_graph_add_node(g, "Add", ts_graph_fresh_name(g, "prelu_dw_add", name, sizeof name), ain, 2, NULL, 0, 1,
                          NULL, &out, err) < 0)
        return -1;
    ts_opt_take_value(g, n, y); /* the Add writes the PRelu's value */
    g->nodes[p].dead = true;
    return 1;
}

int ts_prelu_as_dwconv(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, rewrite_at, err);
}
