/* A grouped convolution whose groups are too narrow for ONNX Runtime's
 * blocked layout, written with groups of 16 channels (passes.h,
 * ts_group_conv_blocks):
 *
 *     Conv(x, W, group = G)  ->  Conv(x, W', group = G / k)   k = 16 / I
 *
 * where W is [O, I, kh, kw] (I input and O / G output channels per
 * group) and W' is [O, 16, kh, kw]: each new group holds k old ones side
 * by side, and W' is block-diagonal, output channel o of old group j (of
 * its new group) reading W[o] at input slots j I .. j I + I - 1 and zeros
 * elsewhere.
 *
 * Why it is right: conv(x, W')[o] sums W[o] against the same I input
 * channels as before, plus products of the other channels of its new group
 * with zero weights: 0 for every finite x, so the sum is the same (in
 * another order: within the check's tolerance).  An infinite or NaN input
 * would make those products NaN where the original kept them out.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ORT 1.30 runs a
 * convolution in its blocked NCHWc layout only when its groups' input and
 * output channels are multiples of the block (16 with AVX-512, 8 with
 * AVX2: 16 serves both); others run as NCHW FusedConv (an im2col GEMM per
 * group) with reorders out of and back into NCHWc around them.  ResNeXt-50's
 * 4- and 8-channel groups: 7 convolutions and their reorders took 19 % of
 * the run.  The rewritten convolution does k times the multiply-adds (zeros
 * included) but in the blocked kernel, fused with its activation, and the
 * chain stays blocked.  Whether it pays is the target's cost to decide (a
 * costed pass): tsopt's runtime runs narrow groups well as they are. */
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

#define BLOCK 16

/* 1: the Conv at node c rewritten; 0: not a candidate; -1: error. */
static int rewrite_at(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    if (cn->dead || cn->op != &ts_op_conv || cn->ninputs < 2 || cn->noutputs != 1) return 0;
    const ts_conv_attrs *ca = cn->attrs;
    const ts_value *xv = &g->values[cn->inputs[0]], *wv = &g->values[cn->inputs[1]];
    if (ca->group < 2 || xv->dtype != TS_F32 || xv->shape.rank != 4 || !wv->constant || wv->dtype != TS_F32 ||
        wv->shape.rank != 4)
        return 0;
    const int64_t groups = ca->group, o = wv->shape.dims[0], in = wv->shape.dims[1];
    const int64_t taps = wv->shape.dims[2] * wv->shape.dims[3];
    if (in < 2 || in % BLOCK == 0 || BLOCK % in || o % groups) return 0; /* depthwise, blocked already, no fit */
    const int64_t k = BLOCK / in, og = o / groups;
    if (groups % k || (og * k) % BLOCK) return 0;
    int64_t wd[4] = {o, BLOCK, wv->shape.dims[2], wv->shape.dims[3]};
    ts_shape ws = ts_shape_make(4, wd);
    ts_tensor *w = ts_tensor_new(TS_F32, &ws, err);
    if (!w) return -1;
    const float *src = wv->constant->data;
    float *dst = w->data;
    memset(dst, 0, (size_t)(o * BLOCK * taps) * sizeof *dst);
    for (int64_t oc = 0; oc < o; oc++) {
        int64_t slot = (oc / og) % k; /* the old group's place in its new group */
        memcpy(dst + (oc * BLOCK + slot * in) * taps, src + oc * in * taps, (size_t)(in * taps) * sizeof *dst);
    }
    char name[64];
    int nw = ts_graph_add_constant(g, ts_graph_fresh_name(g, "group_blocks_weight", name, sizeof name), w, err);
    ts_tensor_unref(w);
    if (nw < 0) return -1;
    cn = &g->nodes[c];
    ts_conv_attrs conv = *(const ts_conv_attrs *)cn->attrs;
    conv.group = groups / k;
    int cin[3] = {cn->inputs[0], nw, cn->ninputs > 2 ? cn->inputs[2] : -1}, y = cn->outputs[0], out = -1;
    int n = g->nnodes;
    if (ts_graph_add_node_parsed(g, &ts_op_conv, ts_graph_fresh_name(g, "group_blocks_conv", name, sizeof name), cin,
                                 cin[2] >= 0 ? 3 : 2, &conv, 1, NULL, &out, err) < 0)
        return -1;
    ts_opt_take_value(g, n, y); /* the new conv writes the old one's value */
    g->nodes[c].dead = true;
    return 1;
}

int ts_group_conv_blocks(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, rewrite_at, err);
}
