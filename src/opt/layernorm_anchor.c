/* A spelled-out LayerNorm read from a Transpose: an identity Reshape put
 * between them (passes.h, ts_anchor_layernorm_transpose):
 *
 *     t = Transpose(x, perm); m = ReduceMean(t, last axis); d = Sub(t, m) ...
 *  -> t' = Transpose(x, perm); t = Reshape(t', [0, ..., 0, -1]); (the rest unchanged)
 *
 * Why it is exact: Reshape to [0, ..., 0, -1] gives every leading axis its
 * own size (0 copies the input's dimension, allowzero unset) and the last
 * the rest of the elements, which is the last axis's own size: the output
 * has t's shape and its elements in the same order, bit for bit.  A
 * symbolic batch stays symbolic (the 0 copies it at run time).
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ConvNeXt's
 * blocks permute a depthwise conv's output to channels-last and normalize
 * it with LayerNorm spelled out (opset 14: ReduceMean, Sub, Pow, ReduceMean,
 * Add, Sqrt, Div, Mul, Add).  ORT 1.30's transpose optimizer (basic level)
 * pushes the Transpose past the first ReduceMean and the Sub, which splits
 * the pattern its LayerNorm fusion (extended level) looks for: it fuses the
 * rest as SimplifiedLayerNormalization and leaves ReduceMean, Sub and a
 * Transpose outside, on NCHW data after a reorder.  The optimizer does not
 * move a Transpose through a Reshape, so with the anchor the LayerNorm is
 * fused whole and the Transpose right after the NCHWc convolution is taken
 * into its ReorderOutput (channels-last): ORT's optimized convnext_tiny goes
 * from 36 Transposes, 28 ReduceMeans, 23 Subs, 18 SimplifiedLayerNorms to
 * 19 Transposes and 23 LayerNormalizations.  Whether it pays is the
 * target's cost to decide (a costed pass); tsopt's own runtime ignores it
 * (a Reshape to the same shape is a view). */
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

/* Whether the ReduceMean node n reduces exactly the last axis of a rank-r input. */
static bool means_last_axis(const ts_graph *g, const ts_node *n, int r)
{
    const ts_reduce_attrs *a = n->attrs;
    int64_t axes[TS_MAX_RANK];
    int k = a->naxes;
    for (int i = 0; i < k && i < TS_MAX_RANK; i++) axes[i] = a->axes[i];
    if (k < 0 && n->ninputs >= 2 && n->inputs[1] >= 0) { /* opset 18: axes an input */
        const ts_value *c = &g->values[n->inputs[1]];
        if (!c->constant || ts_tensor_numel(c->constant) > TS_MAX_RANK) return false;
        k = (int)ts_tensor_numel(c->constant);
        for (int i = 0; i < k; i++) axes[i] = (int64_t)ts_tensor_get_f64(c->constant, i);
    }
    return k == 1 && (axes[0] == -1 || axes[0] == r - 1);
}

bool ts_layernorm_reads(const ts_graph *g, int t)
{
    int r = g->values[t].shape.rank;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *m = &g->nodes[i];
        if (m->dead || m->op != &ts_op_reducemean || m->inputs[0] != t || m->noutputs != 1 ||
            !means_last_axis(g, m, r))
            continue;
        for (int j = 0; j < g->nnodes; j++) {
            const ts_node *s = &g->nodes[j];
            if (!s->dead && s->op == &ts_op_sub && s->ninputs == 2 && s->inputs[0] == t &&
                s->inputs[1] == m->outputs[0])
                return true;
        }
    }
    return false;
}

/* 1: an anchor put after the Transpose at node k; 0: not a candidate; -1: error. */
static int anchor_at(ts_graph *g, int k, ts_error *err)
{
    const ts_node *n = &g->nodes[k];
    if (n->dead || n->op != &ts_op_transpose || n->noutputs != 1) return 0;
    int t = n->outputs[0];
    const ts_value *tv = &g->values[t];
    int r = tv->shape.rank;
    if (r < 2 || tv->dtype != TS_F32 || g->opset < 5 || !ts_layernorm_reads(g, t)) return 0;
    int64_t d = r;
    ts_shape ss = ts_shape_make(1, &d);
    ts_tensor *sh = ts_tensor_new(TS_I64, &ss, err);
    if (!sh) return -1;
    for (int i = 0; i < r; i++) ts_tensor_set_f64(sh, i, i == r - 1 ? -1 : 0);
    char name[64];
    int sv = ts_graph_add_constant(g, ts_graph_fresh_name(g, "ln_anchor_shape", name, sizeof name), sh, err);
    ts_tensor_unref(sh);
    if (sv < 0) return -1;
    int in[2] = {t, sv}, fresh = -1, rn = g->nnodes;
    if (ts_graph_add_node(g, "Reshape", ts_graph_fresh_name(g, "ln_anchor", name, sizeof name), in, 2, NULL, 0, 1,
                          NULL, &fresh, err) < 0)
        return -1;
    /* the Transpose writes the fresh value, the Reshape reads it and writes
     * t: every reader of t (a graph output keeps its name) unchanged */
    g->nodes[k].outputs[0] = fresh;
    g->values[fresh].producer = k;
    g->values[fresh].producer_slot = 0;
    g->nodes[rn].inputs[0] = fresh;
    g->nodes[rn].outputs[0] = t;
    g->values[t].producer = rn;
    g->values[t].producer_slot = 0;
    return 1;
}

int ts_anchor_layernorm_transpose(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, anchor_at, err);
}
