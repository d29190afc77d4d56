/* A linear Resize over the last two axes written as two MatMuls with
 * constant interpolation matrices (passes.h, ts_resize_as_matmul):
 *
 *     Resize(x, linear)  ->  MatMul(A_h, MatMul(x, A_w^T))    (or A_h first)
 *
 * Why it is right: linear interpolation is separable; along one axis each
 * output position o reads input positions i0 and i1 with weights 1 - w and
 * w, computed here exactly as the Resize kernel computes them (resize.c:
 * ts_resize_coord in float32, the coordinate clamped to [0, in - 1]), so
 * row o of A holds those two weights and zeros.  Interpolating the rows,
 * then the columns, is the bilinear sum w_h w_w x[..] regrouped: the result
 * is rounded differently (two sums of products instead of one), within the
 * check's tolerance.  The leading axes must keep their sizes (MatMul
 * broadcasts A_h over them), and the scales or sizes must be constants.
 *
 * Why it pays in ONNX Runtime (measured, docs/optimize.md): ORT 1.30 runs
 * a linear Resize slowly, outside its NCHWc layout; the
 * segmentation heads' final upsampling (21 classes, 28x28 -> 224x224) took
 * 2.6 ms fastest against 0.86 ms as two small GEMMs.  The matrices are
 * mostly zeros (two entries per row), so the MatMuls do more arithmetic
 * than the Resize: whether it pays is the target's cost to decide (a costed
 * pass). */
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "opt/passes.h"

/* The constant's values as doubles (n = -1 when absent or empty); false
 * when the input is present and not a constant. */
static bool const_list(const ts_graph *g, const ts_node *n, int i, double *v, int *cnt)
{
    *cnt = -1;
    if (i < 0 || i >= n->ninputs || n->inputs[i] < 0) return true;
    const ts_value *c = &g->values[n->inputs[i]];
    if (!c->constant) return false;
    int64_t k = ts_tensor_numel(c->constant);
    if (k == 0) return true;
    if (k > TS_MAX_RANK) return false;
    for (int64_t j = 0; j < k; j++) v[j] = ts_tensor_get_f64(c->constant, j);
    *cnt = (int)k;
    return true;
}

/* Output position o's input coordinate on an axis, clamped to the input as
 * the Resize kernel clamps it (resize.c). */
static float clamped_coord(const ts_resize_attrs *p, float scale, int64_t in, int64_t out, int64_t o)
{
    float c = ts_resize_coord(p->coord, (float)o, scale, in, out);
    return c < 0 ? 0 : c > (float)(in - 1) ? (float)(in - 1) : c;
}

/* The interpolation matrix of one axis, [out, in] (transposed: [in, out]),
 * as a new constant; its value id, or -1 (err set). */
static int axis_matrix(ts_graph *g, const ts_resize_attrs *p, float scale, int64_t in, int64_t out, bool transposed,
                       ts_error *err)
{
    int64_t dims[2] = {transposed ? in : out, transposed ? out : in};
    ts_shape s = ts_shape_make(2, dims);
    ts_tensor *t = ts_tensor_new(TS_F32, &s, err);
    if (!t) return -1;
    float *a = t->data;
    memset(a, 0, sizeof(float) * (size_t)(in * out));
    for (int64_t o = 0; o < out; o++) {
        float c = clamped_coord(p, scale, in, out, o);
        int64_t i0 = (int64_t)c, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
        float w1 = c - (float)i0;
        a[transposed ? i0 * out + o : o * in + i0] += 1 - w1;
        a[transposed ? i1 * out + o : o * in + i1] += w1;
    }
    char name[64];
    int v = ts_graph_add_constant(g, ts_graph_fresh_name(g, "resize_matrix", name, sizeof name), t, err);
    ts_tensor_unref(t);
    return v;
}

/* Whether axis d's interpolation is the identity (every output reads its
 * own input position with weight 1). */
static bool identity_axis(const ts_resize_attrs *p, float scale, int64_t in, int64_t out)
{
    if (in != out) return false;
    for (int64_t o = 0; o < out; o++)
        if (clamped_coord(p, scale, in, out, o) != (float)o) return false;
    return true;
}

/* 1: the Resize at node k rewritten; 0: not a candidate; -1: error. */
static int rewrite_at(ts_graph *g, int k, ts_error *err)
{
    const ts_node *n = &g->nodes[k];
    if (n->dead || (n->op != &ts_op_resize && n->op != &ts_op_upsample) || n->noutputs != 1) return 0;
    const ts_resize_attrs *p = n->attrs;
    if ((p->mode != TS_RESIZE_LINEAR && p->mode != TS_RESIZE_BILINEAR) || p->coord == TS_RESIZE_TF_CROP_AND_RESIZE ||
        p->antialias)
        return 0;
    int x = n->inputs[0], y = n->outputs[0];
    const ts_value *xv = &g->values[x], *yv = &g->values[y];
    int r = xv->shape.rank;
    if (xv->constant || xv->dtype != TS_F32 || r < 3 || yv->shape.rank != r) return 0;
    for (int d = 0; d < r - 2; d++)
        if (xv->shape.dims[d] != yv->shape.dims[d]) return 0;
    double scl[TS_MAX_RANK], sz[TS_MAX_RANK];
    int64_t sizes[TS_MAX_RANK], out[TS_MAX_RANK];
    float scale[TS_MAX_RANK];
    int nscl = -1, nsizes = -1, si = ts_resize_scales_input(p, g->opset);
    char msg[200];
    if (si < 0) {
        nscl = p->nscales;
        for (int i = 0; i < nscl; i++) scl[i] = p->scales[i];
    } else if (!const_list(g, n, si, scl, &nscl) ||
               !const_list(g, n, !p->upsample && g->opset >= 11 ? 3 : -1, sz, &nsizes))
        return 0;
    for (int i = 0; i < nsizes; i++) sizes[i] = (int64_t)sz[i];
    if (ts_resize_sizes(p, &xv->shape, scl, nscl, sizes, nsizes, scale, out, msg, sizeof msg)) return 0;
    for (int d = 0; d < r; d++)
        if (out[d] != yv->shape.dims[d] || out[d] < 1 || xv->shape.dims[d] < 1) return 0;
    int64_t h = xv->shape.dims[r - 2], w = xv->shape.dims[r - 1], oh = out[r - 2], ow = out[r - 1];
    bool do_h = !identity_axis(p, scale[r - 2], h, oh), do_w = !identity_axis(p, scale[r - 1], w, ow);
    if (!do_h && !do_w) return 0;
    /* the cheaper order: multiply-adds per leading slice */
    bool h_first = do_h && (!do_w || (double)oh * h * w + (double)oh * w * ow < (double)h * w * ow + (double)oh * h * ow);
    char name[64];
    int cur = x;
    for (int step = 0; step < 2; step++) {
        bool on_h = step == 0 ? h_first : !h_first;
        if (on_h ? !do_h : !do_w) continue;
        int a = on_h ? axis_matrix(g, p, scale[r - 2], h, oh, false, err)
                     : axis_matrix(g, p, scale[r - 1], w, ow, true, err);
        if (a < 0) return -1;
        int in[2] = {on_h ? a : cur, on_h ? cur : a}, o = -1;
        if (ts_graph_add_node(g, "MatMul", ts_graph_fresh_name(g, "resize_mm", name, sizeof name), in, 2, NULL, 0, 1,
                              NULL, &o, err) < 0)
            return -1;
        cur = o;
    }
    ts_opt_take_value(g, g->values[cur].producer, y); /* the last MatMul writes the Resize's value */
    g->nodes[k].dead = true;
    return 1;
}

int ts_resize_as_matmul(ts_graph *g, ts_error *err)
{
    return ts_opt_each_node(g, rewrite_at, err);
}
