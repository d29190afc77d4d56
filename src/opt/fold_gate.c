/* A per-channel gate folded into the convolution after it (passes.h,
 * ts_fold_gate; level all):
 *
 *     Conv(Mul(x, g), W, B)  ->  Conv(x, Mul(W, g), B)
 *
 * Why it is right: with g one value per input channel (every dimension 1
 * but the one aligned with x's channels), conv(x * g, W)[o] =
 * sum over c, taps of x[c, p + t] g[c] W[o, c, t] = conv(x, W g)[o], where
 * W g scales W's input channels (its dimension 1) by g.  g broadcasts
 * against W [F, C, kh, kw] as it does against x [N, C, H, W]: both are
 * rank 4 with the channels at dimension 1, so the same Mul spells the
 * scaled weights.  Padding is zeros either way (0 * g = 0), whatever the
 * strides, pads and dilations.  Group 1 only: with groups, W's dimension 1
 * holds C / G channels and the mapping from c is not a broadcast.  Exact in
 * real arithmetic; in float the product x g W is rounded in another order
 * (one rounding per term, within the check's tolerance).  float16 and
 * bfloat16 graphs fold too (x, gate and W of one type): the graph then
 * rounds W g to that type where it rounded x g, which the runtime does in
 * the step (dnnl.conv_gated rounds the scaled weights as the Mul would).
 *
 * Why it pays: the squeeze-excite block's Mul then costs a pass over the
 * weights instead of one over the activations, so it is made only where
 * the weights are at most a quarter of x (EfficientNet-B0's projections at
 * 112x112 to 28x28: 512 to 9600 weights against 113k to 451k activations;
 * from 14x14 on the weights are as large as x and the Mul stays).  The
 * sizes are the bound shapes of this graph: a session re-planned at other
 * sizes applies the level again.
 *
 * The runtime lowers Mul(W, g) -> Conv as one step (dnnl.conv_gated:
 * the packed weights scaled per run, dnnl_conv.c); ONNX Runtime runs the
 * Mul and a Conv with a computed weight. */
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

static bool floating(ts_dtype t) { return t == TS_F32 || t == TS_F16 || t == TS_BF16; }

/* Whether g (a value) is one float per channel of x (rank 4, channels at
 * dimension 1) of x's type: numpy-broadcast, only the dimension aligned with x's
 * dimension 1 may differ from 1, and it is C. */
static bool per_channel(const ts_graph *g, int gv, int x)
{
    const ts_shape *gs = &g->values[gv].shape, *xs = &g->values[x].shape;
    if (gv == x || g->values[gv].dtype != g->values[x].dtype || gs->rank > 4 || ts_shape_numel(gs) != xs->dims[1]) return false;
    for (int i = 0; i < gs->rank; i++)
        if (gs->dims[i] != 1 && !(i + 4 - gs->rank == 1 && gs->dims[i] == xs->dims[1])) return false;
    return true;
}

/* 1: the Mul at node m folded into the Conv after it; 0: not a candidate;
 * -1: error. */
static int fold_at(ts_graph *g, int m, ts_error *err)
{
    const ts_node *mn = &g->nodes[m];
    if (mn->dead || mn->op != &ts_op_mul || mn->ninputs != 2 || mn->noutputs != 1) return 0;
    const int y = mn->outputs[0];
    const ts_value *yv = &g->values[y];
    if (!floating(yv->dtype) || yv->shape.rank != 4) return 0;
    int c = ts_opt_sole_user(g, y); /* -1 too when y is a graph output */
    if (c < 0 || g->nodes[c].op != &ts_op_conv || g->nodes[c].inputs[0] != y || g->nodes[c].noutputs != 1) return 0;
    const ts_node *cn = &g->nodes[c];
    const ts_conv_attrs *ca = cn->attrs;
    const ts_value *wv = &g->values[cn->inputs[1]];
    if (ca->group != 1 || !wv->constant || wv->dtype != yv->dtype || wv->shape.rank != 4 ||
        wv->shape.dims[1] != yv->shape.dims[1] || 4 * ts_shape_numel(&wv->shape) > ts_shape_numel(&yv->shape))
        return 0;
    int x = -1, gate = -1;
    for (int k = 0; k < 2 && x < 0; k++)
        if (ts_shape_eq(&g->values[mn->inputs[k]].shape, &yv->shape) && g->values[mn->inputs[k]].dtype == yv->dtype &&
            per_channel(g, mn->inputs[1 - k], mn->inputs[k]))
            x = mn->inputs[k], gate = mn->inputs[1 - k];
    if (x < 0) return 0;
    ts_conv_attrs conv = *ca;
    char name[64];
    int win[2] = {cn->inputs[1], gate}, wg = -1, out = -1;
    if (ts_graph_add_node_parsed(g, &ts_op_mul, ts_graph_fresh_name(g, "gated_weights", name, sizeof name), win, 2,
                                 NULL, 1, NULL, &wg, err) < 0)
        return -1;
    cn = &g->nodes[c]; /* the node array may have moved */
    int cin[3] = {x, wg, cn->ninputs > 2 ? cn->inputs[2] : -1}, y2 = cn->outputs[0];
    int n = g->nnodes;
    if (ts_graph_add_node_parsed(g, &ts_op_conv, ts_graph_fresh_name(g, "gated_conv", name, sizeof name), cin,
                                 cin[2] >= 0 ? 3 : 2, &conv, 1, NULL, &out, err) < 0)
        return -1;
    ts_opt_take_value(g, n, y2); /* the new conv writes the old one's value */
    g->nodes[m].dead = g->nodes[c].dead = true;
    return 1;
}

int ts_fold_gate(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, fold_at, err);
}
