/* A 3-D convolution written as a 2-D convolution over the frames, the
 * temporal taps stacked on the input channels (passes.h,
 * ts_conv3d_as_frames):
 *
 *     Conv(x, W)                        x [N, C, T, H, W], W [O, C, kt, kh, kw]
 *  -> Transpose(Reshape(Conv2d(Reshape(Concat_k(Slice_k(Pad_T(Transpose(x))))), W2)))
 *
 * Transpose puts the frames next to the batch ([N, T, C, H, W]); Pad adds
 * the conv's temporal padding (zeros, pt0 before and pt1 after); Slice k
 * takes frames k, k + st, ..., k + st (To - 1) (st the temporal stride, To
 * the conv's output frames); Concat lays the kt slices side by side on the
 * channel axis ([N, To, kt C, H, W]); Reshape makes the frames a batch
 * ([N To, kt C, H, W]); the 2-D Conv has the conv's spatial kernel,
 * padding, stride and dilation and weights W2[o, k C + c] = W[o, c, k]
 * (and the bias); Reshape and Transpose put the result back as
 * [N, O, To, Ho, Wo].
 *
 * Why it is right: output frame t of the 3-D conv sums, over k and c,
 * W[o, c, k] (a 2-D kernel) against frame st t + k - pt0 of channel c of
 * x, zero outside 0 .. T-1.  After the Pad that frame is st t + k, which
 * slice k holds at its frame t, at channel k C + c of the concatenation,
 * where W2 holds W[o, c, k]: the 2-D conv over channels k C + c sums the
 * same products (in another order: within the check's tolerance), with
 * the same spatial geometry.  The temporal dilation must be 1 (a dilated
 * tap is frame st t + d k - pt0: not written), the group 1.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ORT 1.30 runs
 * a 3-D convolution outside its blocked NCHWc layout, as an im2col GEMM
 * (~30 GFLOP/s on one core here), while the 2-D conv runs in NCHWc; the
 * Transposes, Pad, Slices and Concat are data movement around it.  r3d_18
 * (every conv rewritten by hand this way): 1-thread per round x1.30 in one
 * ORT process.  Whether it pays is the target's cost to decide (a costed
 * pass): tsopt's runtime runs 3-D convs through oneDNN, blocked already. */
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

#define TAPS_MAX 16 /* temporal taps written as one Concat */

static int i64_const(ts_graph *g, const int64_t *v, int n, ts_error *err)
{
    int64_t nn = n;
    ts_shape s = ts_shape_make(1, &nn);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, err);
    if (!t) return -1;
    memcpy(t->data, v, sizeof(int64_t) * (size_t)n);
    char name[64];
    int v_ = ts_graph_add_constant(g, ts_graph_fresh_name(g, "conv3d_frames_shape", name, sizeof name), t, err);
    ts_tensor_unref(t);
    return v_;
}

static int add1(ts_graph *g, const char *op, const int *in, int nin, const ts_attr *a, int na, ts_error *err)
{
    char name[64];
    int out = -1;
    if (ts_graph_add_node(g, op, ts_graph_fresh_name(g, "conv3d_frames", name, sizeof name), in, nin, a, na, 1, NULL,
                          &out, err) < 0)
        return -1;
    return out;
}

/* The window's value at spatial axis i, def when the model gave none. */
static int64_t win_at(int32_t n, const int64_t *v, int i, int64_t def) { return n < 0 ? def : v[i]; }

/* 1: the Conv at node c rewritten; 0: not a candidate; -1: error. */
static int rewrite_at(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    if (cn->dead || cn->op != &ts_op_conv || cn->ninputs < 2 || cn->noutputs != 1 || g->opset < 11) return 0;
    const ts_conv_attrs *ca = cn->attrs;
    const ts_window *wn = &ca->win;
    const int x = cn->inputs[0], y = cn->outputs[0];
    const ts_value *xv = &g->values[x], *wv = &g->values[cn->inputs[1]], *yv = &g->values[y];
    if (ca->group != 1 || xv->dtype != TS_F32 || xv->shape.rank != 5 || !wv->constant || wv->dtype != TS_F32 ||
        wv->shape.rank != 5 || yv->shape.rank != 5 ||
        (wn->auto_pad != TS_PAD_NOTSET && wn->auto_pad != TS_PAD_VALID))
        return 0;
    if (win_at(wn->ndilations, wn->dilations, 0, 1) != 1) return 0; /* a dilated temporal tap */
    /* copies: adding values below moves g->values */
    int64_t xd[5], wd[5], yd[5];
    memcpy(xd, xv->shape.dims, sizeof xd);
    memcpy(wd, wv->shape.dims, sizeof wd);
    memcpy(yd, yv->shape.dims, sizeof yd);
    const int64_t cin = xd[1], t = xd[2], o = wd[0], kt = wd[2], kh = wd[3], kw = wd[4], to = yd[2];
    bool valid = wn->auto_pad == TS_PAD_VALID;
    int64_t pt0 = valid ? 0 : win_at(wn->npads, wn->pads, 0, 0), pt1 = valid ? 0 : win_at(wn->npads, wn->pads, 3, 0);
    int64_t st = win_at(wn->nstrides, wn->strides, 0, 1);
    if (wd[1] != cin || yd[1] != o || to < 1 || st < 1 || pt0 < 0 || pt1 < 0 || kt < 1 ||
        kt > TAPS_MAX || st * (to - 1) + kt > t + pt0 + pt1)
        return 0;
    /* W2[o, k C + c, i, j] = W[o, c, k, i, j] */
    int64_t w2d[4] = {o, kt * cin, kh, kw};
    ts_shape w2s = ts_shape_make(4, w2d);
    ts_tensor *w2 = ts_tensor_new(TS_F32, &w2s, err);
    if (!w2) return -1;
    const float *src = wv->constant->data;
    float *dst = w2->data;
    const int64_t taps = kh * kw;
    for (int64_t oc = 0; oc < o; oc++)
        for (int64_t k = 0; k < kt; k++)
            for (int64_t ic = 0; ic < cin; ic++)
                memcpy(dst + ((oc * kt + k) * cin + ic) * taps, src + ((oc * cin + ic) * kt + k) * taps,
                       (size_t)taps * sizeof *dst);
    char name[64];
    int nw = ts_graph_add_constant(g, ts_graph_fresh_name(g, "conv3d_frames_weight", name, sizeof name), w2, err);
    ts_tensor_unref(w2);
    if (nw < 0) return -1;
    /* the 2-D conv's window: the spatial axes of the 3-D one */
    int64_t k2[2] = {kh, kw};
    int64_t s2[2] = {win_at(wn->nstrides, wn->strides, 1, 1), win_at(wn->nstrides, wn->strides, 2, 1)};
    int64_t d2[2] = {win_at(wn->ndilations, wn->dilations, 1, 1), win_at(wn->ndilations, wn->dilations, 2, 1)};
    int64_t p2[4] = {0, 0, 0, 0};
    if (!valid)
        for (int i = 0; i < 2; i++) {
            p2[i] = win_at(wn->npads, wn->pads, 1 + i, 0);
            p2[2 + i] = win_at(wn->npads, wn->pads, 4 + i, 0);
        }
    const int64_t bias = cn->ninputs > 2 ? cn->inputs[2] : -1;
    const int64_t perm[5] = {0, 2, 1, 3, 4};
    ts_attr tp = ts_attr_ints("perm", perm, 5);
    int cur = add1(g, "Transpose", &x, 1, &tp, 1, err);
    if (cur < 0) return -1;
    if (pt0 || pt1) {
        int64_t pads[10] = {0, pt0, 0, 0, 0, 0, pt1, 0, 0, 0};
        int pin[2] = {cur, i64_const(g, pads, 10, err)};
        if (pin[1] < 0 || (cur = add1(g, "Pad", pin, 2, NULL, 0, err)) < 0) return -1;
    }
    int slices[TAPS_MAX];
    for (int64_t k = 0; k < kt; k++) {
        int64_t begin = k, end = k + st * (to - 1) + 1, axis = 1;
        if (kt == 1 && st == 1 && to == t + pt0 + pt1) { /* every frame: no Slice */
            slices[k] = cur;
            continue;
        }
        int sin[5] = {cur, i64_const(g, &begin, 1, err), i64_const(g, &end, 1, err), i64_const(g, &axis, 1, err),
                      i64_const(g, &st, 1, err)};
        if (sin[1] < 0 || sin[2] < 0 || sin[3] < 0 || sin[4] < 0 || (slices[k] = add1(g, "Slice", sin, 5, NULL, 0, err)) < 0)
            return -1;
    }
    if (kt > 1) {
        ts_attr ax = ts_attr_int("axis", 2);
        if ((cur = add1(g, "Concat", slices, (int)kt, &ax, 1, err)) < 0) return -1;
    } else {
        cur = slices[0];
    }
    int64_t r4[4] = {-1, kt * cin, xd[3], xd[4]};
    int rin[2] = {cur, i64_const(g, r4, 4, err)};
    if (rin[1] < 0 || (cur = add1(g, "Reshape", rin, 2, NULL, 0, err)) < 0) return -1;
    ts_attr ca2[4] = {ts_attr_ints("kernel_shape", k2, 2), ts_attr_ints("strides", s2, 2), ts_attr_ints("pads", p2, 4),
                      ts_attr_ints("dilations", d2, 2)};
    int cin2[3] = {cur, nw, (int)bias};
    if ((cur = add1(g, "Conv", cin2, bias >= 0 ? 3 : 2, ca2, 4, err)) < 0) return -1;
    int64_t r5[5] = {-1, to, o, yd[3], yd[4]};
    int bin[2] = {cur, i64_const(g, r5, 5, err)};
    if (bin[1] < 0 || (cur = add1(g, "Reshape", bin, 2, NULL, 0, err)) < 0) return -1;
    int n = g->nnodes, out = add1(g, "Transpose", &cur, 1, &tp, 1, err);
    if (out < 0) return -1;
    ts_opt_take_value(g, n, y); /* the last Transpose writes the conv's value */
    g->nodes[c].dead = true;
    return 1;
}

int ts_conv3d_as_frames(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, rewrite_at, err);
}
