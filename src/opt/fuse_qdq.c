/* QDQ -> QLinear* (passes.h, ts_fuse_qdq): the products of a QDQ model
 * (ONNX Runtime's static quantizer's format, tools/quantize_qdq.py) become
 * the integer operators ONNX defines for them, so the runtime computes on
 * the 8-bit tensors instead of dequantizing them to float32.
 *
 *   Q(Conv(DQ(x), DQ(w), DQ(b)), ys, yz)  -> QLinearConv(x, xs, xz, w, ws, wz, ys, yz, b)
 *   Q(MatMul(DQ(a), DQ(b)), ys, yz)       -> QLinearMatMul(a, as, az, b, bs, bz, ys, yz)
 *   Q(Gemm(DQ(x), DQ(W), DQ(b)), ys, yz)  -> Reshape(QLinearConv(Reshape(x, [N, K, 1, 1]), 1x1 W, b))
 *   Q(Relu(P), ys, yz), yz the type's min -> as Q(P)
 *   Q(MaxPool(DQ(x)), s, z), x's s and z  -> MaxPool(x)
 *   Q(Concat(DQ(xi)), s, z), each xi's s, z -> Concat(xi)
 * and into tsopt's internal 8-bit element-wise operators (ops/qlinear_eltwise.c),
 * for what ONNX has no integer operator for:
 *   Q(Add(DQ(a), DQ(b)))                  -> tsopt.QLinearAdd (residual blocks)
 *   Q(f(DQ(x))), f HardSwish, HardSigmoid, LeakyRelu, Relu -> tsopt.QLinearLookup(x, 256-entry table)
 *   Q(GlobalAveragePool(DQ(x)))           -> tsopt.QLinearGlobalAveragePool
 *   Q(Mul(DQ(x), s)), s float [N, C, 1, 1] -> tsopt.QLinearChannelMul (squeeze-excite)
 *
 * Why each is ONNX's meaning up to rounding:
 * - DQ(q) = (q - z) * s exactly in real numbers, and a product of
 *   dequantized operands is sum((x - xz) xs (w - wz) ws) + (b - 0) bs =
 *   xs ws[m] * (sum((x - xz)(w - wz)) + b) when bs[m] = xs ws[m] (checked
 *   here to float32 rounding; ORT's quantizer writes the bias so).  Q then
 *   divides by ys, rounds half to even and adds yz, which is QLinearConv's /
 *   QLinearMatMul's definition.  The unfused graph rounds the float32 sum
 *   and the scale products on the way; the fused kernel sums exactly in
 *   int32 and rounds once: the two differ only where the exact value lies
 *   within float32 rounding of a .5 boundary, by one quantization step
 *   (the same difference ORT's own QDQ fusions make).
 * - Relu before a Q whose zero point is the type's minimum: Q(max(v, 0)) =
 *   max(Q(v), Q(0)) = max(Q(v), qmin) = Q(v) (round is monotone, the
 *   saturation already clamps at qmin): exact.
 * - Max pooling commutes with DQ (monotone increasing when s > 0), and
 *   Q(DQ(q)) = q for the same s and z: exact.
 * Each scale must be a positive constant and per tensor, except the weight's
 * per output channel (Conv: axis 0; MatMul: a 2-D B's columns, axis 1). */
#include <math.h>
#include <string.h>
#include "ops/attrs.h"
#include "ops/list.h"
#include "opt/passes.h"

static bool live_op(const ts_graph *g, int n, const ts_op_desc *op)
{
    return n >= 0 && !g->nodes[n].dead && g->nodes[n].op == op;
}

/* Positive float32 constant scales with count 1 or `len` (len 0: 1 only). */
static bool scales_ok(const ts_graph *g, int v, int64_t len)
{
    const ts_tensor *t = v >= 0 ? g->values[v].constant : NULL;
    if (!t || t->dtype != TS_F32) return false;
    int64_t n = ts_tensor_numel(t);
    if (n != 1 && (n != len || g->values[v].shape.rank != 1)) return false;
    for (int64_t i = 0; i < n; i++)
        if (!(((const float *)t->data)[i] > 0) || !isfinite(((const float *)t->data)[i])) return false;
    return true;
}

/* A DequantizeLinear node writing v with per-tensor constant parameters
 * (per_axis >= 0: or per axis `per_axis` of `len` entries); its node or -1. */
static int dq_of(const ts_graph *g, int v, int per_axis, int64_t len)
{
    int d = v >= 0 ? g->values[v].producer : -1;
    if (!live_op(g, d, &ts_op_dequantize_linear)) return -1;
    const ts_node *nd = &g->nodes[d];
    int s = nd->inputs[1], z = nd->ninputs > 2 ? nd->inputs[2] : -1;
    ts_dtype t = g->values[nd->inputs[0]].dtype;
    if (t != TS_U8 && t != TS_I8) return -1;
    bool per_tensor = scales_ok(g, s, 0);
    if (!per_tensor) {
        const int64_t ax = ((const int64_t *)nd->attrs)[0]; /* quant_attrs.axis */
        int rank = g->values[v].shape.rank;
        if (per_axis < 0 || !scales_ok(g, s, len) || (ax + (ax < 0 ? rank : 0)) != per_axis) return -1;
    }
    if (z >= 0 && (!g->values[z].constant || ts_shape_numel(&g->values[z].shape) != ts_shape_numel(&g->values[s].shape)))
        return -1;
    return d;
}

/* The Q node that alone reads v with per-tensor constant parameters (a
 * Relu between, when the Q's zero point is its type's minimum, in *relu). */
static int q_after(const ts_graph *g, int v, int *relu)
{
    int q = ts_opt_sole_user(g, v);
    *relu = -1;
    if (live_op(g, q, &ts_op_relu)) {
        *relu = q;
        q = ts_opt_sole_user(g, g->nodes[q].outputs[0]);
    }
    if (!live_op(g, q, &ts_op_quantize_linear) || g->nodes[q].ninputs < 3 || !scales_ok(g, g->nodes[q].inputs[1], 0))
        return -1;
    int z = g->nodes[q].inputs[2];
    if (!g->values[z].constant || ts_shape_numel(&g->values[z].shape) != 1) return -1;
    if (*relu >= 0) {
        int64_t zp = ts_tensor_get_i64(g->values[z].constant, 0);
        if (zp != (g->values[z].dtype == TS_I8 ? -128 : 0)) return -1;
    }
    return q;
}

/* The zero point input of a DQ/Q node (a constant 0 of its type when the
 * node has none: QLinear* take it as required). */
static int zp_in(ts_graph *g, int node, ts_error *err)
{
    const ts_node *nd = &g->nodes[node];
    if (nd->ninputs > 2 && nd->inputs[2] >= 0) return nd->inputs[2];
    ts_dtype t = nd->op == &ts_op_quantize_linear ? TS_U8 : g->values[nd->inputs[0]].dtype;
    ts_tensor *z = ts_tensor_new(t, &(ts_shape){.rank = 0}, err);
    if (!z) return -1;
    return ts_graph_const_value(g, z, err); /* takes z */
}

/* Bias b = DQ(int32 constant, bs, 0) with bs[m] = xs * ws[m] to float32
 * rounding: its int32 constant value, else -1. */
static int bias_of(const ts_graph *g, int b, int xs, int ws, int64_t m)
{
    int d = b >= 0 ? g->values[b].producer : -1;
    if (!live_op(g, d, &ts_op_dequantize_linear)) return -1;
    const ts_node *nd = &g->nodes[d];
    int q = nd->inputs[0], s = nd->inputs[1], z = nd->ninputs > 2 ? nd->inputs[2] : -1;
    if (g->values[q].dtype != TS_I32 || !g->values[q].constant || !scales_ok(g, s, m)) return -1;
    if (z >= 0) {
        const ts_tensor *zt = g->values[z].constant;
        if (!zt) return -1;
        for (int64_t i = 0; i < ts_tensor_numel(zt); i++)
            if (ts_tensor_get_i64(zt, i)) return -1;
    }
    const ts_tensor *st = g->values[s].constant, *wt = g->values[ws].constant;
    float x = ((const float *)g->values[xs].constant->data)[0];
    for (int64_t i = 0; i < m; i++) {
        float want = x * ((const float *)wt->data)[ts_tensor_numel(wt) == 1 ? 0 : i];
        float have = ((const float *)st->data)[ts_tensor_numel(st) == 1 ? 0 : i];
        if (fabsf(have - want) > 1e-6f * want) return -1;
    }
    return q;
}

/* Makes node n (just added) write the Q node q's output value instead of
 * its own (a graph output keeps its name; n's fresh value, produced and
 * read by none, goes at compaction). */
static void take_over(ts_graph *g, int n, int q)
{
    ts_opt_take_value(g, n, g->nodes[q].outputs[0]);
}

/* Replaces the Q node q's output by a new node of op on in[] (nin), attrs. */
static int rewrite(ts_graph *g, const ts_op_desc *op, const char *stem, const int *in, int nin, const void *attrs, int q,
                   ts_error *err)
{
    char name[64];
    int out, n = g->nnodes;
    if (ts_graph_add_node_parsed(g, op, ts_graph_fresh_name(g, stem, name, sizeof name), in, nin, attrs, 1, NULL, &out,
                                 err) < 0)
        return -1;
    take_over(g, n, q);
    return 1;
}

static int fuse_conv(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    if (cn->ninputs < 2 || cn->noutputs != 1) return 0;
    int64_t M = g->values[cn->inputs[1]].shape.dims[0];
    int dx = dq_of(g, cn->inputs[0], -1, 0), dw = dq_of(g, cn->inputs[1], 0, M), relu, q = q_after(g, cn->outputs[0], &relu);
    if (dx < 0 || dw < 0 || q < 0 || !g->values[g->nodes[dw].inputs[0]].constant) return 0;
    int xs = g->nodes[dx].inputs[1], ws = g->nodes[dw].inputs[1], bq = -1;
    if (cn->ninputs > 2 && cn->inputs[2] >= 0 && (bq = bias_of(g, cn->inputs[2], xs, ws, M)) < 0) return 0;
    int in[9] = {g->nodes[dx].inputs[0], xs, zp_in(g, dx, err), g->nodes[dw].inputs[0], ws, zp_in(g, dw, err),
                 g->nodes[q].inputs[1], zp_in(g, q, err), bq};
    if (in[2] < 0 || in[5] < 0 || in[7] < 0) return -1;
    ts_conv_attrs a = *(const ts_conv_attrs *)cn->attrs;
    if (rewrite(g, &ts_op_qlinear_conv, "qlinear_conv", in, bq >= 0 ? 9 : 8, &a, q, err) < 0) return -1;
    g->nodes[c].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

static int fuse_matmul(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    const ts_shape *bs = &g->values[cn->inputs[1]].shape;
    int da = dq_of(g, cn->inputs[0], -1, 0), db = dq_of(g, cn->inputs[1], bs->rank == 2 ? 1 : -1, bs->dims[bs->rank - 1]);
    int relu, q = q_after(g, cn->outputs[0], &relu);
    if (da < 0 || db < 0 || q < 0 || g->values[cn->inputs[0]].shape.rank < 1 || bs->rank < 1) return 0;
    int in[8] = {g->nodes[da].inputs[0], g->nodes[da].inputs[1], zp_in(g, da, err), g->nodes[db].inputs[0],
                 g->nodes[db].inputs[1], zp_in(g, db, err), g->nodes[q].inputs[1], zp_in(g, q, err)};
    if (in[2] < 0 || in[5] < 0 || in[7] < 0) return -1;
    if (rewrite(g, &ts_op_qlinear_matmul, "qlinear_matmul", in, 8, NULL, q, err) < 0) return -1;
    g->nodes[c].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

/* A Reshape of v to dims (constant shape input); its output value or -1. */
static int reshape(ts_graph *g, int v, const int64_t *dims, int rank, ts_error *err)
{
    int64_t r = rank;
    ts_tensor *t = ts_tensor_new(TS_I64, &(ts_shape){.rank = 1, .dims = {r}}, err);
    if (!t) return -1;
    memcpy(t->data, dims, sizeof(int64_t) * (size_t)rank);
    int sv = ts_graph_const_value(g, t, err), out = -1; /* takes t */
    char name[64];
    int in[2] = {v, sv};
    if (sv < 0 || ts_graph_add_node(g, "Reshape", ts_graph_fresh_name(g, "qgemm_reshape", name, sizeof name), in, 2, NULL, 0,
                                    1, NULL, &out, err) < 0)
        return -1;
    return out;
}

/* Gemm(DQ(x), DQ(W), DQ(b)) -> Q, alpha = beta = 1, no transA, W constant:
 * QLinearConv with 1x1 kernels on x viewed as [N, K, 1, 1], whose sum over
 * input channels is the Gemm's sum over K (ONNX defines no QLinear Gemm; a
 * QLinearMatMul has no bias).  W transposed to [M, K] if needed: exact. */
static int fuse_gemm(ts_graph *g, int c, ts_error *err)
{
    const ts_node *cn = &g->nodes[c];
    const ts_gemm_attrs *ga = cn->attrs;
    if (ga->alpha != 1.0 || (cn->ninputs > 2 && ga->beta != 1.0) || ga->trans_a || cn->noutputs != 1) return 0;
    const ts_shape *xs = &g->values[cn->inputs[0]].shape, *ws = &g->values[cn->inputs[1]].shape;
    if (xs->rank != 2 || ws->rank != 2) return 0;
    int64_t N = xs->dims[0], K = xs->dims[1], M = ws->dims[ga->trans_b ? 0 : 1];
    int dx = dq_of(g, cn->inputs[0], -1, 0), dw = dq_of(g, cn->inputs[1], ga->trans_b ? 0 : 1, M), relu,
        q = q_after(g, cn->outputs[0], &relu);
    if (dx < 0 || dw < 0 || q < 0) return 0;
    const ts_tensor *W = g->values[g->nodes[dw].inputs[0]].constant;
    int xsv = g->nodes[dx].inputs[1], wsv = g->nodes[dw].inputs[1], bq = -1;
    if (!W || (cn->ninputs > 2 && cn->inputs[2] >= 0 && (bq = bias_of(g, cn->inputs[2], xsv, wsv, M)) < 0)) return 0;
    if (bq >= 0 && ts_shape_numel(&g->values[bq].shape) != M) return 0; /* a broadcast C */
    ts_tensor *w4 = ts_tensor_new(W->dtype, &(ts_shape){.rank = 4, .dims = {M, K, 1, 1}}, err);
    if (!w4) return -1;
    const int8_t *src = W->data;
    int8_t *dst = w4->data;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) dst[m * K + k] = ga->trans_b ? src[m * K + k] : src[k * M + m];
    int wv = ts_graph_const_value(g, w4, err); /* takes w4 */
    if (wv < 0) return -1;
    int xr = reshape(g, g->nodes[dx].inputs[0], (const int64_t[]){N, K, 1, 1}, 4, err);
    if (xr < 0) return -1;
    int in[9] = {xr, xsv, zp_in(g, dx, err), wv, wsv, zp_in(g, dw, err), g->nodes[q].inputs[1], zp_in(g, q, err), bq};
    if (in[2] < 0 || in[5] < 0 || in[7] < 0) return -1;
    ts_conv_attrs a = {.win = {.nkernel = 2, .kernel = {1, 1}, .nstrides = -1, .npads = -1, .ndilations = -1}, .group = 1};
    char name[64];
    int yc;
    if (ts_graph_add_node_parsed(g, &ts_op_qlinear_conv, ts_graph_fresh_name(g, "qlinear_gemm", name, sizeof name), in,
                                 bq >= 0 ? 9 : 8, &a, 1, NULL, &yc, err) < 0)
        return -1;
    int n = g->nnodes;
    if (reshape(g, yc, (const int64_t[]){N, M}, 2, err) < 0) return -1;
    take_over(g, n, q);
    g->nodes[c].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

static bool same_const(const ts_graph *g, int a, int b)
{
    const ts_tensor *x = g->values[a].constant, *y = g->values[b].constant;
    if (!x || !y || x->dtype != y->dtype || ts_tensor_numel(x) != 1 || ts_tensor_numel(y) != 1) return false;
    return x->dtype == TS_F32 ? ((const float *)x->data)[0] == ((const float *)y->data)[0]
                              : ts_tensor_get_i64(x, 0) == ts_tensor_get_i64(y, 0);
}

static int fuse_maxpool(ts_graph *g, int p, ts_error *err)
{
    const ts_node *pn = &g->nodes[p];
    int relu, d = dq_of(g, pn->inputs[0], -1, 0), q = pn->noutputs == 1 ? q_after(g, pn->outputs[0], &relu) : -1;
    if (d < 0 || q < 0 || relu >= 0) return 0;
    const ts_node *dn = &g->nodes[d], *qn = &g->nodes[q];
    if (dn->ninputs < 3 || !same_const(g, dn->inputs[1], qn->inputs[1]) || !same_const(g, dn->inputs[2], qn->inputs[2]))
        return 0;
    ts_pool_attrs a = *(const ts_pool_attrs *)pn->attrs;
    int x = dn->inputs[0];
    if (rewrite(g, &ts_op_maxpool, "qmaxpool", &x, 1, &a, q, err) < 0) return -1;
    g->nodes[p].dead = g->nodes[q].dead = true;
    return 1;
}

/* Q(Add(DQ(a), DQ(b))), a and b of one shape, per-tensor parameters:
 * tsopt.QLinearAdd, the same float32 arithmetic on the 8-bit operands
 * (ops/qlinear_eltwise.c): exact.  A Relu before a Q at its type's
 * minimum goes as for the products. */
static int fuse_add(ts_graph *g, int n, ts_error *err)
{
    const ts_node *an = &g->nodes[n];
    if (an->ninputs != 2 || an->noutputs != 1) return 0;
    int da = dq_of(g, an->inputs[0], -1, 0), db = dq_of(g, an->inputs[1], -1, 0), relu, q = q_after(g, an->outputs[0], &relu);
    if (da < 0 || db < 0 || q < 0 || !ts_shape_eq(&g->values[an->inputs[0]].shape, &g->values[an->inputs[1]].shape))
        return 0;
    int in[8] = {g->nodes[da].inputs[0], g->nodes[da].inputs[1], zp_in(g, da, err), g->nodes[db].inputs[0],
                 g->nodes[db].inputs[1], zp_in(g, db, err), g->nodes[q].inputs[1], zp_in(g, q, err)};
    if (in[2] < 0 || in[5] < 0 || in[7] < 0) return -1;
    if (rewrite(g, &ts_op_qlinear_add, "qlinear_add", in, 8, NULL, q, err) < 0) return -1;
    g->nodes[n].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

/* f(v) in double precision as the reference kernel of f's op computes it
 * (ops/activation.c, unary.c). */
static double unary_f(const ts_node *nd, double v)
{
    const ts_alpha_beta_attrs *ab = nd->attrs;
    if (nd->op == &ts_op_hardswish) return v * fmin(fmax(v / 6 + 0.5, 0), 1);
    if (nd->op == &ts_op_hardsigmoid) return fmin(fmax((double)ab->alpha * v + (double)ab->beta, 0), 1);
    if (nd->op == &ts_op_leakyrelu) return v >= 0 ? v : v * (double)ab->alpha;
    return v > 0 ? v : 0; /* Relu */
}

/* Q(f(DQ(x))) for an element-wise f of one input, per-tensor parameters:
 * y takes one of 256 values per value of x, so tsopt.QLinearLookup with
 * the table the three nodes compute (each float32 rounding made as they
 * make it: DQ's product, f's result, Q's quotient): exact. */
static int fuse_unary(ts_graph *g, int n, ts_error *err)
{
    const ts_node *fn = &g->nodes[n];
    int d = fn->ninputs == 1 && fn->noutputs == 1 ? dq_of(g, fn->inputs[0], -1, 0) : -1, relu;
    int q = d >= 0 ? q_after(g, fn->outputs[0], &relu) : -1;
    if (q < 0) return 0;
    const ts_node *dn = &g->nodes[d], *qn = &g->nodes[q];
    ts_dtype xt = g->values[dn->inputs[0]].dtype, yt = g->values[qn->outputs[0]].dtype;
    float xs = ((const float *)g->values[dn->inputs[1]].constant->data)[0];
    float ys = ((const float *)g->values[qn->inputs[1]].constant->data)[0];
    int64_t xz = dn->ninputs > 2 && dn->inputs[2] >= 0 ? ts_tensor_get_i64(g->values[dn->inputs[2]].constant, 0) : 0;
    int64_t yz = ts_tensor_get_i64(g->values[qn->inputs[2]].constant, 0);
    ts_tensor *t = ts_tensor_new(yt, &(ts_shape){.rank = 1, .dims = {256}}, err);
    if (!t) return -1;
    int64_t off = xt == TS_I8 ? -128 : 0;
    double lo = yt == TS_I8 ? -128 : 0, hi = yt == TS_I8 ? 127 : 255;
    for (int64_t i = 0; i < 256; i++) {
        float x = (float)((double)(i + off - xz) * (double)xs);
        float v = (float)unary_f(fn, (double)x);
        if (relu >= 0 && v < 0) v = 0;
        double r = nearbyint((double)(v / ys)) + (double)yz;
        r = r < lo ? lo : r > hi ? hi : r;
        if (yt == TS_I8) ((int8_t *)t->data)[i] = (int8_t)r;
        else ((uint8_t *)t->data)[i] = (uint8_t)r;
    }
    int in[2] = {dn->inputs[0], ts_graph_const_value(g, t, err)}; /* takes t */
    if (in[1] < 0 || rewrite(g, &ts_op_qlinear_lookup, "qlinear_lookup", in, 2, NULL, q, err) < 0) return -1;
    g->nodes[n].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

/* Q(GlobalAveragePool(DQ(x))), x [N, C, H, W], per-tensor parameters:
 * tsopt.QLinearGlobalAveragePool (the mean from the integer sum; up to one
 * step where it lies within float32 rounding of a .5, ops/qlinear_eltwise.c). */
static int fuse_gap(ts_graph *g, int n, ts_error *err)
{
    const ts_node *pn = &g->nodes[n];
    int d = pn->noutputs == 1 && g->values[pn->inputs[0]].shape.rank == 4 ? dq_of(g, pn->inputs[0], -1, 0) : -1, relu;
    int q = d >= 0 ? q_after(g, pn->outputs[0], &relu) : -1;
    if (q < 0) return 0;
    int in[5] = {g->nodes[d].inputs[0], g->nodes[d].inputs[1], zp_in(g, d, err), g->nodes[q].inputs[1], zp_in(g, q, err)};
    if (in[2] < 0 || in[4] < 0) return -1;
    if (rewrite(g, &ts_op_qlinear_gap, "qlinear_gap", in, 5, NULL, q, err) < 0) return -1;
    g->nodes[n].dead = g->nodes[q].dead = true;
    if (relu >= 0) g->nodes[relu].dead = true;
    return 1;
}

/* Q(Mul(DQ(x), s)), x [N, C, H, W] with per-tensor parameters, s a float32
 * [N or 1, C, 1, 1] (a squeeze-excite gate): tsopt.QLinearChannelMul, the
 * same float32 roundings: exact. */
static int fuse_channel_mul(ts_graph *g, int n, ts_error *err)
{
    const ts_node *mn = &g->nodes[n];
    if (mn->ninputs != 2 || mn->noutputs != 1) return 0;
    for (int i = 0; i < 2; i++) {
        const ts_shape *xs = &g->values[mn->inputs[i]].shape, *ss = &g->values[mn->inputs[1 - i]].shape;
        int d = dq_of(g, mn->inputs[i], -1, 0), relu;
        if (d < 0 || g->values[mn->inputs[1 - i]].dtype != TS_F32 || xs->rank != 4 || ss->rank != 4 ||
            (ss->dims[0] != 1 && ss->dims[0] != xs->dims[0]) || ss->dims[1] != xs->dims[1] || ss->dims[2] != 1 ||
            ss->dims[3] != 1)
            continue;
        int q = q_after(g, mn->outputs[0], &relu);
        if (q < 0) return 0;
        int in[6] = {g->nodes[d].inputs[0], g->nodes[d].inputs[1], zp_in(g, d, err), mn->inputs[1 - i],
                     g->nodes[q].inputs[1], zp_in(g, q, err)};
        if (in[2] < 0 || in[5] < 0) return -1;
        if (rewrite(g, &ts_op_qlinear_channel_mul, "qlinear_channel_mul", in, 6, NULL, q, err) < 0) return -1;
        g->nodes[n].dead = g->nodes[q].dead = true;
        if (relu >= 0) g->nodes[relu].dead = true;
        return 1;
    }
    return 0;
}

/* Q(Concat(DQ(x1), .., DQ(xk)), s, z), every DQ and the Q of the same
 * per-tensor s and z: Concat(x1, .., xk) on the 8-bit tensors (Q(DQ(q)) =
 * q, and Concat only moves: exact). */
static int fuse_concat(ts_graph *g, int n, ts_error *err)
{
    const ts_node *cn = &g->nodes[n];
    int relu, q = cn->noutputs == 1 && cn->ninputs <= 64 ? q_after(g, cn->outputs[0], &relu) : -1, in[64];
    if (q < 0 || relu >= 0) return 0;
    const ts_node *qn = &g->nodes[q];
    for (int i = 0; i < cn->ninputs; i++) {
        int d = dq_of(g, cn->inputs[i], -1, 0);
        if (d < 0 || g->nodes[d].ninputs < 3 || !same_const(g, g->nodes[d].inputs[1], qn->inputs[1]) ||
            !same_const(g, g->nodes[d].inputs[2], qn->inputs[2]))
            return 0;
        in[i] = g->nodes[d].inputs[0];
    }
    ts_concat_attrs a = *(const ts_concat_attrs *)cn->attrs;
    if (rewrite(g, &ts_op_concat, "qconcat", in, cn->ninputs, &a, q, err) < 0) return -1;
    g->nodes[n].dead = g->nodes[q].dead = true;
    return 1;
}

int ts_fuse_qdq(ts_graph *g, ts_error *err)
{
    int total = 0, nn = g->nnodes; /* nodes added here are not candidates */
    for (int n = 0; n < nn; n++) {
        if (g->nodes[n].dead) continue;
        const ts_op_desc *op = g->nodes[n].op;
        int r = op == &ts_op_conv ? fuse_conv(g, n, err)
                : op == &ts_op_matmul ? fuse_matmul(g, n, err)
                : op == &ts_op_gemm ? fuse_gemm(g, n, err)
                : op == &ts_op_maxpool ? fuse_maxpool(g, n, err)
                : op == &ts_op_concat ? fuse_concat(g, n, err)
                : op == &ts_op_add ? fuse_add(g, n, err)
                : op == &ts_op_mul ? fuse_channel_mul(g, n, err)
                : op == &ts_op_global_avgpool ? fuse_gap(g, n, err)
                : op == &ts_op_hardswish || op == &ts_op_hardsigmoid || op == &ts_op_leakyrelu || op == &ts_op_relu
                    ? fuse_unary(g, n, err)
                    : 0;
        if (r < 0) return -1;
        total += r;
    }
    if (!total) return 0;
    /* DequantizeLinear nodes nobody reads any more go with their weights */
    for (bool again = true; again;) {
        again = false;
        for (int n = 0; n < g->nnodes; n++)
            if (live_op(g, n, &ts_op_dequantize_linear) && !ts_value_uses(g, g->nodes[n].outputs[0]))
                g->nodes[n].dead = again = true;
    }
    ts_graph_compact(g);
    if (ts_graph_validate(g, err)) return -1;
    return total;
}
