/* LayerNorm written out -> LayerNormalization (passes.h, ts_fuse_layernorm).
 *
 * Exporters before opset 17 spell LayerNorm as
 *   d = x - ReduceMean(x); y = d / Sqrt(ReduceMean(d^2) + eps) [* gamma] [+ beta]
 * (d^2 as Pow(d, 2) or Mul(d, d)).  Matched exactly as a graph pattern —
 * every operator, operand and constant checked, nothing evaluated at sample
 * points — then taken only as a rule of rules/fusions.rules that `tsopt
 * verify` proves (fusion_proof.c), and replaced by one LayerNormalization over the trailing axes,
 * which the runtime lowers to vec.layernorm.  Below level all, and over
 * NCHW's channels, the plan lowers the written-out nodes as one step
 * (vec.layernorm.ops, a lowering within a stated tolerance). */
#include <stdlib.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"
#include "rules/apply.h"
#include "rules/rule.h"

/* Live nodes reading v (a node reading it twice counts once); the first in *first. */
static int readers(const ts_graph *g, int v, int *first)
{
    int k = 0;
    *first = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        bool r = false;
        for (int j = 0; !nd->dead && j < nd->ninputs; j++) r |= nd->inputs[j] == v;
        if (r && !k++) *first = n;
    }
    return k;
}

/* The one node reading v, of operator op with one float32 output, v no graph output; else -1. */
static int only_reader(const ts_graph *g, int v, const ts_op_desc *op)
{
    int c;
    if (ts_graph_is_output(g, v) || readers(g, v, &c) != 1 || g->nodes[c].op != op || g->nodes[c].noutputs != 1 ||
        g->values[g->nodes[c].outputs[0]].dtype != TS_F32)
        return -1;
    return c;
}

static bool scalar(const ts_graph *g, int v, double *out)
{
    const ts_tensor *t = v >= 0 ? g->values[v].constant : NULL;
    if (!t || ts_tensor_numel(t) != 1 || !ts_dtype_is_float(t->dtype)) return false;
    *out = ts_tensor_get_f64(t, 0);
    return true;
}

/* ReduceMean node r keeping its dims on float32: its axes (ts_opt_mean_axes), 0 if not one. */
static unsigned mean_axes(const ts_graph *g, int r)
{
    const ts_node *nd = &g->nodes[r];
    if (nd->op != &ts_op_reducemean || nd->noutputs != 1 || g->values[nd->inputs[0]].dtype != TS_F32) return 0;
    return ts_opt_mean_axes(g, nd);
}

/* The constant operand of binary node c besides v as a float32 tensor of
 * x.shape[axis:] (it broadcasts onto xs and varies along those axes only),
 * or NULL. */
static ts_tensor *norm_param(const ts_graph *g, int c, int v, const ts_shape *xs, int axis, ts_error *err)
{
    const ts_node *nd = &g->nodes[c];
    if (nd->ninputs != 2 || (nd->inputs[0] == v) == (nd->inputs[1] == v)) return NULL;
    const ts_tensor *t = g->values[nd->inputs[nd->inputs[0] == v ? 1 : 0]].constant;
    if (!t || t->dtype != TS_F32 || t->shape.rank > xs->rank) return NULL;
    int64_t st[TS_MAX_RANK];
    ts_shape_bcast_strides(&t->shape, xs, st);
    for (int k = 0; k < axis; k++)
        if (xs->dims[k] != 1 && st[k] != 0) return NULL;
    ts_shape ns = {.rank = xs->rank - axis};
    for (int k = axis; k < xs->rank; k++) ns.dims[k - axis] = xs->dims[k];
    ts_tensor *out = ts_tensor_new(TS_F32, &ns, err);
    if (!out) return NULL;
    int64_t idx[TS_MAX_RANK] = {0}, off = 0, n = ts_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) { /* x.shape[axis:] in row-major order */
        ((float *)out->data)[i] = ((const float *)t->data)[off];
        for (int k = xs->rank - 1; k >= axis; k--) {
            off += st[k];
            if (++idx[k] < xs->dims[k]) break;
            off -= st[k] * xs->dims[k];
            idx[k] = 0;
        }
    }
    return out;
}

/* 1: the LayerNorm read from ReduceMean node n replaced; 0: none there; -1: error. */
static int fuse_at(ts_graph *g, int n, ts_error *err)
{
    const unsigned mask = g->nodes[n].dead ? 0 : mean_axes(g, n);
    if (!mask) return 0;
    const int x = g->nodes[n].inputs[0];
    const ts_shape *xs = &g->values[x].shape;
    /* LayerNormalization normalizes [axis, rank): the reduced axes must be
     * the trailing ones (size-1 dims change neither mean nor variance) */
    int axis = 0;
    while (axis < xs->rank && !(mask >> axis & 1)) axis++;
    for (int k = axis; k < xs->rank; k++)
        if (!(mask >> k & 1) && xs->dims[k] != 1) return 0;
    int sub = only_reader(g, g->nodes[n].outputs[0], &ts_op_sub);
    if (sub < 0 || g->nodes[sub].inputs[0] != x || g->nodes[sub].inputs[1] != g->nodes[n].outputs[0]) return 0;
    const int dv = g->nodes[sub].outputs[0];
    if (!ts_shape_eq(&g->values[dv].shape, xs) || ts_graph_is_output(g, dv)) return 0;
    /* d's two readers: the square and the Div */
    int sq = -1, div = -1, nr = 0;
    for (int c = 0; c < g->nnodes; c++) {
        const ts_node *nd = &g->nodes[c];
        if (nd->dead || (nd->inputs[0] != dv && (nd->ninputs < 2 || nd->inputs[1] != dv))) continue;
        nr++;
        double e;
        bool a = nd->inputs[0] == dv, b = nd->ninputs == 2 && nd->inputs[1] == dv;
        if (nd->ninputs == 2 && ((nd->op == &ts_op_pow && a && !b && scalar(g, nd->inputs[1], &e) && e == 2.0) ||
                                 (nd->op == &ts_op_mul && a && b)))
            sq = c;
        else if (nd->op == &ts_op_div && nd->ninputs == 2 && a && !b)
            div = c;
    }
    if (nr != 2 || sq < 0 || div < 0) return 0;
    int var = only_reader(g, g->nodes[sq].outputs[0], &ts_op_reducemean);
    if (var < 0 || mean_axes(g, var) != mask) return 0;
    const int vv = g->nodes[var].outputs[0];
    int add = only_reader(g, vv, &ts_op_add);
    double eps;
    if (add < 0 || g->nodes[add].ninputs != 2 ||
        !scalar(g, g->nodes[add].inputs[g->nodes[add].inputs[0] == vv ? 1 : 0], &eps) || !(eps >= 0))
        return 0;
    int sqrt_n = only_reader(g, g->nodes[add].outputs[0], &ts_op_sqrt);
    if (sqrt_n < 0 || only_reader(g, g->nodes[sqrt_n].outputs[0], &ts_op_div) != div ||
        g->nodes[div].inputs[1] != g->nodes[sqrt_n].outputs[0])
        return 0;
    int y = g->nodes[div].outputs[0], nodes[9] = {n, sub, sq, var, add, sqrt_n, div}, nn = 7;
    if (!ts_shape_eq(&g->values[y].shape, xs)) return 0;
    /* optional scale, then shift */
    ts_tensor *p[2] = {NULL, NULL};
    const ts_op_desc *const ops[2] = {&ts_op_mul, &ts_op_add};
    for (int k = 0; k < 2; k++) {
        int c = only_reader(g, y, ops[k]);
        if (c < 0 || !ts_shape_eq(&g->values[g->nodes[c].outputs[0]].shape, xs)) continue;
        ts_error e = {0};
        if (!(p[k] = norm_param(g, c, y, xs, axis, &e))) {
            if (e.code) return ts_tensor_unref(p[0]), *err = e, -1;
            continue;
        }
        nodes[nn++] = c;
        y = g->nodes[c].outputs[0];
    }
    /* only a spelling rules/fusions.rules proves (fusion_proof.c) */
    if (!ts_fusion_rule_of(g, x, y, nodes, nn, TS_ROP_LAYERNORM)) {
        ts_tensor_unref(p[0]);
        ts_tensor_unref(p[1]);
        return 0;
    }
    if (!p[0]) { /* LayerNormalization's scale is not optional */
        ts_shape ns = {.rank = xs->rank - axis};
        for (int k = axis; k < xs->rank; k++) ns.dims[k - axis] = xs->dims[k];
        if (!(p[0] = ts_tensor_new(TS_F32, &ns, err))) return ts_tensor_unref(p[1]), -1;
        for (int64_t i = 0; i < ts_tensor_numel(p[0]); i++) ((float *)p[0]->data)[i] = 1.0f;
    }
    int in[3] = {x, -1, -1}, out = -1;
    for (int k = 0; k < 2; k++) {
        ts_tensor *t = p[k];
        p[k] = NULL;
        if (t && (in[1 + k] = ts_graph_const_value(g, t, err)) < 0) { /* t consumed either way */
            ts_tensor_unref(p[1]);
            return -1;
        }
    }
    ts_layernorm_attrs la = {.axis = axis, .epsilon = eps, .stash_type = 1};
    char name[64];
    const int ln = g->nnodes;
    if (ts_graph_add_node_parsed(g, &ts_op_layernorm, ts_graph_fresh_name(g, "layernorm", name, sizeof name), in,
                                 in[2] >= 0 ? 3 : 2, &la, 1, NULL, &out, err) < 0)
        return -1;
    for (int k = 0; k < nn; k++) g->nodes[nodes[k]].dead = true;
    ts_opt_take_value(g, ln, y);
    return 1;
}

int ts_fuse_layernorm(ts_graph *g, ts_error *err)
{
    int total = 0, nn = g->nnodes;
    for (int n = 0; n < nn; n++) {
        int r = fuse_at(g, n, err);
        if (r < 0) return -1;
        total += r;
    }
    return ts_opt_settle(g, total, err);
}
