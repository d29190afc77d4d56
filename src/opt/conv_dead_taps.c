/* A convolution's kernel trimmed to the taps that ever read the input
 * (passes.h, ts_conv_trim_dead_taps):
 *
 *     Conv(x, W, kernel K, dilation d, pads b, e)
 *       ->  Conv(x, W[.., t0:t1], kernel t1 - t0, pads b - t0 d, e - (K - t1) d)
 *
 * per spatial axis, where taps [0, t0) and [t1, K) read only padding for
 * every output position (a dilation 1 kernel of one tap: a 1x1 conv).
 *
 * Why it is right: output o of an axis reads input position o s + j d - b
 * through tap j; a tap dead for every o multiplies only the zeros of the
 * padding, so it adds nothing (finite weights; a dropped weight that is not
 * finite would make NaNs and the conv is left alone).  The kept taps read
 * the same positions: o s + j' d - (b - t0 d) = o s + (j' + t0) d - b.  The
 * output size is unchanged: the span shrinks by (K - t1 + t0) d and the pads
 * by the same.  The rule needs the input's spatial sizes: a model whose
 * symbolic sizes are not all batch axes (axis 0) is left alone, as are pads
 * that would turn negative.
 *
 * Where it fires: DeepLabV3's ASPP on a 14x14 map (224x224 input, output
 * stride 16) has 3x3 convs at dilations 24 and 36 whose eight outer taps
 * never reach the map: 1x1 convs.  ONNX Runtime runs them as the padded,
 * dilated 3x3 convolutions the file asks for (9 times the multiply-adds),
 * 0.50 ms each in its profile against 0.30 ms for the 1x1 conv beside them
 * (docs/optimize.md: measured whole).  tsopt's runtime gains as much. */
#include <math.h>
#include <string.h>
#include "ir/meta.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "ops/window.h"
#include "opt/passes.h"

/* Whether every symbolic size of g's inputs is a batch axis (axis 0): the
 * spatial sizes the rule reads are then the model's at every size. */
static bool spatial_fixed(const ts_graph *g)
{
    const ts_model_meta *m = g->meta;
    for (int i = 0; m && i < m->ninputs; i++)
        for (int d = 1; d < m->inputs[i].rank && d < TS_MAX_RANK; d++)
            if (m->inputs[i].dims[d].symbolic) return false;
    return true;
}

/* 1: the Conv at node c rewritten; 0: not a candidate; -1: error. */
static int rewrite_at(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    if (cn->dead || cn->op != &ts_op_conv || cn->ninputs < 2 || cn->noutputs != 1) return 0;
    const ts_conv_attrs *ca = cn->attrs;
    const ts_value *xv = &g->values[cn->inputs[0]], *wv = &g->values[cn->inputs[1]];
    const int rank = xv->shape.rank, nsp = rank - 2;
    if (nsp < 1 || nsp > TS_WIN_MAX || xv->dtype != TS_F32 || !wv->constant || wv->dtype != TS_F32 ||
        wv->shape.rank != rank)
        return 0;
    ts_window_geom geo;
    char why[200];
    if (!ts_window_resolve(&ca->win, nsp, &xv->shape.dims[2], &wv->shape.dims[2], &geo, why, sizeof why)) return 0;
    int64_t t0[TS_WIN_MAX], t1[TS_WIN_MAX], pb[TS_WIN_MAX], pe[TS_WIN_MAX];
    bool trimmed = false;
    for (int d = 0; d < nsp; d++) {
        const int64_t K = geo.kernel[d], dil = geo.dil[d], s = geo.stride[d], in = geo.in[d];
        t0[d] = K;
        t1[d] = 0;
        for (int64_t j = 0; j < K; j++)
            for (int64_t o = 0; o < geo.out[d]; o++) {
                int64_t p = o * s + j * dil - geo.pad_begin[d];
                if (p >= 0 && p < in) { /* tap j reads the input for some output */
                    t0[d] = j < t0[d] ? j : t0[d];
                    t1[d] = j + 1;
                    break;
                }
            }
        if (t1[d] <= t0[d]) return 0; /* no tap reads the input: the output is the bias, left alone */
        pb[d] = geo.pad_begin[d] - t0[d] * dil;
        pe[d] = geo.pad_end[d] - (K - t1[d]) * dil;
        if (pb[d] < 0 || pe[d] < 0) return 0;
        trimmed |= t0[d] > 0 || t1[d] < K;
    }
    if (!trimmed || !spatial_fixed(g)) return 0;
    /* the trimmed weight [O, I, t1 - t0 ...]; the dropped taps finite */
    const ts_shape *ws = &wv->shape;
    int64_t nd[TS_MAX_RANK] = {ws->dims[0], ws->dims[1]};
    for (int d = 0; d < nsp; d++) nd[2 + d] = t1[d] - t0[d];
    ts_shape nws = ts_shape_make(rank, nd);
    const float *src = wv->constant->data;
    int64_t total = ts_shape_numel(ws), outer = ws->dims[0] * ws->dims[1], taps = total / outer;
    for (int64_t i = 0; i < total; i++)
        if (!isfinite(src[i])) return 0; /* conservative: any non-finite weight */
    ts_tensor *w = ts_tensor_new(TS_F32, &nws, err);
    if (!w) return -1;
    float *dst = w->data;
    int64_t k = 0;
    for (int64_t oi = 0; oi < outer; oi++)
        for (int64_t t = 0; t < taps; t++) {
            /* t's coordinates, last axis fastest */
            int64_t rest = t, keep = 1;
            for (int d = nsp - 1; d >= 0; d--) {
                int64_t j = rest % geo.kernel[d];
                rest /= geo.kernel[d];
                keep &= j >= t0[d] && j < t1[d];
            }
            if (keep) dst[k++] = src[oi * taps + t];
        }
    char name[64];
    int nw = ts_graph_add_constant(g, ts_graph_fresh_name(g, "dead_taps_weight", name, sizeof name), w, err);
    ts_tensor_unref(w);
    if (nw < 0) return -1;
    cn = &g->nodes[c];
    ts_conv_attrs conv = *(const ts_conv_attrs *)cn->attrs;
    conv.win.auto_pad = TS_PAD_NOTSET;
    conv.win.nkernel = conv.win.nstrides = conv.win.ndilations = nsp;
    conv.win.npads = 2 * nsp;
    for (int d = 0; d < nsp; d++) {
        conv.win.kernel[d] = t1[d] - t0[d];
        conv.win.strides[d] = geo.stride[d];
        conv.win.dilations[d] = conv.win.kernel[d] == 1 ? 1 : geo.dil[d];
        conv.win.pads[d] = pb[d];
        conv.win.pads[nsp + d] = pe[d];
    }
    int cin[3] = {cn->inputs[0], nw, cn->ninputs > 2 ? cn->inputs[2] : -1}, y = cn->outputs[0], out = -1;
    int n = g->nnodes;
    if (ts_graph_add_node_parsed(g, &ts_op_conv, ts_graph_fresh_name(g, "dead_taps_conv", name, sizeof name), cin,
                                 cin[2] >= 0 ? 3 : 2, &conv, 1, NULL, &out, err) < 0)
        return -1;
    ts_opt_take_value(g, n, y); /* the new conv writes the old one's value */
    g->nodes[c].dead = true;
    return 1;
}

int ts_conv_trim_dead_taps(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, rewrite_at, err);
}
