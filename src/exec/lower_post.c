/* The lowering stage's post-op tails (issue 27 §3): a convolution or a
 * product (dnnl.conv, dnnl.deconv, deconv.gemm, vec.dwconv, vec.gconv,
 * dnnl.conv_gated, dnnl.matmul, dnnl.gemm) is handed, with its node, the
 * nodes after its raw output that its step computes too: Adds of a
 * per-channel constant (into the bias), element-wise activations and a
 * residual Add (oneDNN post-ops, or vec_post.c's), SiLU written as
 * Sigmoid and Mul.  Each kernel is asked with the largest tail first, and
 * when it declines, with the next choice (variant) its table allows: the
 * affine folds alone (the kernel's primitive refused the post-ops), then
 * nothing (a product whose weights are computed at run time cannot take
 * a column scale).  The kernel only decides whether it can run what it is
 * handed; it reads no other node, and the plan claims the tail.
 *
 * Also here: dnnl.conv_gated's group (ts_fold_gate's Mul(W, gate) read
 * only by a Conv as its weights, with the Conv's tail) and the sum of the
 * plan's product weights (dnnl.conv's Winograd budget).
 *
 * Stated tolerances against the unfused steps, relative to the largest
 * output (tests/unit/test_lowering.c checks each, and that a step off by
 * more, or a near miss taken into the group, is refuted):
 *   - element-wise post-ops (Relu, Clip, LeakyRelu, ...) and the residual
 *     sum: 0, bit for bit (oneDNN applies them to the accumulated float32
 *     as the next step would);
 *   - an Add of a per-channel constant folded into the bias (also in
 *     vec.dwconv's and deconv.gemm's tails, vec_post.c): 2^-20 (the bias
 *     and the constant summed first, one rounding less);
 *   - SiLU and GELU as post-ops: 2^-20 (oneDNN's own exp / erf against
 *     vec.eltwise's, a few ulp);
 *   - dnnl.conv_gated: 2^-20 (W * gate rounded once, then the convolution
 *     in oneDNN's order against the reference kernel's);
 *   - vec.se: 2^-20 (the pooled mean and the 1x1 convolutions as dot
 *     products in vec_se.c's order). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "dnnl/dnnl_layout.h"
#include "exec/half.h"
#include "vec/vec.h"
#include "vec/vec_eltwise.h"
#include "ops/attrs.h"
#include "ops/gelu_form.h"
#include "ops/list.h"

static bool is_f32(const ts_graph *g, int v) { return g->values[v].dtype == TS_F32; }

/* Constant c broadcast against out (rank r) varies at most along caxis, with
 * size 1 or `channels` there: returns its per-channel stride (0 or 1), or -1. */
static int per_channel(const ts_tensor *c, const ts_shape *out, int caxis, int64_t channels)
{
    if (!c || c->dtype != TS_F32 || c->shape.rank > out->rank) return -1;
    int off = out->rank - c->shape.rank;
    int stride = 0;
    for (int i = 0; i < c->shape.rank; i++) {
        int64_t d = c->shape.dims[i];
        if (d == 1) continue;
        if (i + off != caxis || d != channels) return -1;
        stride = 1;
    }
    return stride;
}

static bool affine_ensure(xd_fuse *f, int64_t channels)
{
    if (f->scale) return true;
    f->scale = malloc(sizeof(float) * (size_t)channels);
    f->shift = malloc(sizeof(float) * (size_t)channels);
    if (!f->scale || !f->shift) return false;
    for (int64_t c = 0; c < channels; c++) f->scale[c] = 1, f->shift[c] = 0;
    return true;
}

/* Add of a per-channel constant -> the product's bias: a lowering, the
 * same additions (within one rounding where the product has a bias of its
 * own).  Scales (Mul, BatchNormalization) are folded into the weights by
 * the graph pass ts_fold_affine (opt/fold_affine.c), not here. */
static int try_bias(const xplan *p, int c, int v, int caxis, int64_t channels, xd_fuse *f)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[c];
    if (nd->op != &ts_op_add || nd->ninputs != 2) return 0;
    int other = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
    if (other == v) return 0;
    const ts_tensor *t = xplan_const(p, other);
    int st = per_channel(t, &g->values[v].shape, caxis, channels);
    if (st < 0) return 0;
    if (!affine_ensure(f, channels)) return -1;
    const float *d = t->data;
    for (int64_t k = 0; k < channels; k++) f->shift[k] += d[k * st];
    return 1;
}

/* Add of another full-size tensor, already computed -> sum post-op. */
static bool try_residual(const xplan *p, int c, int v, xd_fuse *f)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[c];
    if (nd->op != &ts_op_add || nd->ninputs != 2 || f->sum_value >= 0) return false;
    int other = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
    if (other == v || !is_f32(g, other) || xplan_const(p, other)) return false;
    if (!ts_shape_eq(&g->values[other].shape, &g->values[v].shape)) return false;
    /* ready: a graph input, or produced by a step already built */
    if (g->values[other].producer >= 0 && p->value_buf[other] < 0) return false;
    f->sum_value = other;
    f->sum_node = c;
    f->po[f->npo++] = (xd_po){.kind = XD_PO_SUM};
    return true;
}

static bool const_scalar(const xplan *p, const ts_node *nd, int i, float *out)
{
    if (nd->ninputs <= i || nd->inputs[i] < 0) return true; /* absent: keep default */
    const ts_tensor *t = xplan_const(p, nd->inputs[i]);
    if (!t || ts_tensor_numel(t) != 1) return false;
    *out = (float)ts_tensor_get_f64(t, 0);
    return true;
}

/* PRelu whose slope is one constant value (a scalar, or every element of
 * a per-channel slope equal) is LeakyRelu with that value as alpha: the
 * relu post-op (x > 0 ? x : alpha x), so it fuses like any activation.
 * Only a finite alpha: at x = 0 the post-op computes alpha * 0, NaN for an
 * infinite or NaN slope where PRelu gives 0.
 * A slope that varies per channel stays a step of its own (vec.eltwise,
 * whose rows of a channels-last result run several to a block:
 * vec_eltwise.c prog_rows).  oneDNN's prelu post-op would take it, but the
 * installed oneDNN (2.6) implements it for convolutions only in ref:any:
 * iterating the implementations of a 3x3 conv 12 -> 12 at 64x64 with
 * dnnl_post_ops_append_prelu(mask 2) gave ref:any alone, for any, nhwc and
 * nChw16c layouts, where a per-channel binary_mul post-op gets brgconv,
 * jit:avx512_core, jit:avx2, gemm and ref (this Xeon, issue 27).  FSRCNN's
 * seven convolutions with the post-op ran 0.9-3.6 s each on ref:any
 * (ONEDNN_VERBOSE, loaded), 10-32 ms each on brgconv without it. */
static bool prelu_uniform_slope(const xplan *p, const ts_node *nd, int v, float *alpha)
{
    if (nd->ninputs != 2 || nd->inputs[0] != v || nd->inputs[1] == v) return false;
    const ts_tensor *t = xplan_const(p, nd->inputs[1]);
    int64_t n = t ? ts_tensor_numel(t) : 0;
    if (!t || t->dtype != TS_F32 || n < 1) return false;
    const float *d = t->data;
    for (int64_t i = 1; i < n; i++)
        if (memcmp(&d[i], &d[0], sizeof d[0])) return false;
    *alpha = d[0];
    return isfinite(d[0]);
}

/* oneDNN 2.6's jit kernels build one eltwise injector per algorithm, so a
 * second post-op of an algorithm already in the chain runs with the first
 * one's alpha and beta (HardSigmoid's clip 0..1 then a Clip: the Clip lost;
 * LeakyRelu 0.1 then 0.5: 0.01 x).  Such a post-op is not fused. */
static bool alg_conflicts(const xd_fuse *f, const xd_po *po)
{
    for (int k = 0; k < f->npo; k++)
        if (f->po[k].kind == XD_PO_ELTWISE && f->po[k].alg == po->alg &&
            (f->po[k].alpha != po->alpha || f->po[k].beta != po->beta))
            return true;
    return false;
}

/* Element-wise activation -> one or two eltwise post-ops. */
static bool try_activation(const xplan *p, int c, int v, xd_fuse *f)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[c];
    const ts_op_desc *op = nd->op;
    xd_po po = {.kind = XD_PO_ELTWISE};
    if (f->npo + 2 > XD_MAX_FUSE) return false;
    if (op == &ts_op_relu)
        po.alg = dnnl_eltwise_relu;
    else if (op == &ts_op_leakyrelu)
        po.alg = dnnl_eltwise_relu, po.alpha = ((const ts_alpha_beta_attrs *)nd->attrs)->alpha;
    else if (op == &ts_op_prelu) {
        if (!prelu_uniform_slope(p, nd, v, &po.alpha)) return false;
        po.alg = dnnl_eltwise_relu;
    } else if (op == &ts_op_sigmoid)
        po.alg = dnnl_eltwise_logistic;
    else if (op == &ts_op_tanh)
        po.alg = dnnl_eltwise_tanh;
    else if (op == &ts_op_hardswish)
        po.alg = dnnl_eltwise_hardswish;
    else if (op == &ts_op_gelu)
        po.alg = ((const ts_gelu_attrs *)nd->attrs)->tanh ? dnnl_eltwise_gelu_tanh : dnnl_eltwise_gelu_erf;
    else if (op == &ts_op_hardsigmoid) {
        /* clamp(alpha*x + beta, 0, 1): linear then clip */
        const ts_alpha_beta_attrs *ab = nd->attrs;
        xd_po lin = {.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_linear, .alpha = ab->alpha, .beta = ab->beta};
        po.alg = dnnl_eltwise_clip, po.alpha = 0, po.beta = 1;
        if (alg_conflicts(f, &lin) || alg_conflicts(f, &po)) return false;
        f->po[f->npo++] = lin;
    } else if (op == &ts_op_clip) {
        /* absent bounds (and every opset-11 node, whose bounds are inputs) are unbounded */
        const ts_clip_attrs *ca = nd->attrs;
        float lo = ca->has_min ? ca->min : -FLT_MAX, hi = ca->has_max ? ca->max : FLT_MAX;
        if (!const_scalar(p, nd, 1, &lo) || !const_scalar(p, nd, 2, &hi)) return false;
        po.alg = dnnl_eltwise_clip, po.alpha = lo, po.beta = hi;
    } else
        return false;
    if (alg_conflicts(f, &po)) return false;
    f->po[f->npo++] = po;
    return true;
}

/* SiLU as exporters write it: v -> Sigmoid, then Mul of v and that sigmoid
 * (either order), the sigmoid used by nothing else -- oneDNN's swish
 * post-op (x * sigmoid(alpha x), alpha 1), so EfficientNet-style blocks
 * make one step instead of a conv, a sigmoid pass and a multiply pass.
 * Returns the Mul node (*sig: the Sigmoid), -1 when v is not used so. */
static int swish_after(const xplan *p, int v, int *sig)
{
    const ts_graph *g = p->g;
    if (p->consumers[v] != 2 || ts_graph_is_output(g, v)) return -1;
    int s = -1, m = -1;
    for (int n = 0; n < g->nnodes; n++) {
        const ts_node *nd = &g->nodes[n];
        if (nd->dead || p->claimed[n]) continue;
        bool uses = false;
        for (int i = 0; i < nd->ninputs; i++) uses |= nd->inputs[i] == v;
        if (!uses) continue;
        if (nd->op == &ts_op_sigmoid && s < 0 && nd->noutputs == 1)
            s = n;
        else if (nd->op == &ts_op_mul && m < 0 && nd->ninputs == 2 && nd->noutputs == 1)
            m = n;
        else
            return -1;
    }
    if (s < 0 || m < 0) return -1;
    int so = g->nodes[s].outputs[0];
    const int *mi = g->nodes[m].inputs;
    if (!((mi[0] == v && mi[1] == so) || (mi[0] == so && mi[1] == v))) return -1;
    if (p->consumers[so] != 1 || ts_graph_is_output(g, so)) return -1;
    *sig = s;
    return m;
}

/* A float16 model's GELU, 0.5 v (1 + erf(v / c)) with c = sqrt 2 stored
 * 16-bit (1.4140625: not GELU, so fuse_gelu leaves it written out), in a
 * half plan that rounds at step outputs only (the native one: in the
 * per-node plan v carries half.c's refusal): oneDNN's gelu_erf between two
 * scalings, gelu_erf(k v) / k with k = sqrt2 / c, which is 0.5 v (1 +
 * erf(v / c)) up to float32 roundings of the scalings (the tolerance of
 * GELU as a post-op above, 2^-20).  The second scaling is eltwise_pow
 * (alpha x^1): two eltwise_linear of different alpha in one chain are
 * what alg_conflicts refuses.  Returns how many nodes (in nodes[]), 0 when
 * v is not read so; TSOPT_SKIP=half.gelu for A/B. */
static int scaled_gelu_after(const xplan *p, int v, int *nodes, double *k)
{
    const ts_graph *g = p->g;
    int nn = 0;
    double s = 0;
    if (!p->half || xplan_skips(p, "half.gelu") || xhalf_consumers(p, v) != p->consumers[v] || ts_graph_is_output(g, v))
        return 0;
    int y = ts_gelu_spelling_scaled(g, v, p->claimed, nodes, GELU_MAX_NODES, &nn, &s);
    if (y < 0 || !is_f32(g, y)) return 0;
    *k = 1.4142135623730951 * s;
    return nn;
}

/* Walks the sole-reader chain from value v (the product's raw output with
 * `channels` channels on axis `caxis`) and records what its step can
 * compute too.  Anything not understood ends the chain; TS_ERR_NOMEM only
 * when allocation fails. */
static ts_status xd_fuse_collect(const xplan *p, int v, int caxis, int64_t channels, xd_fuse *f, ts_error *err)
{
    const ts_graph *g = p->g;
    memset(f, 0, sizeof *f);
    f->sum_value = f->sum_node = -1;
    f->in_value = f->out_value = v;
    if (p->opts.no_fusion) return TS_OK;
    while (f->nnodes < XD_MAX_FUSE) {
        int c = xplan_sole_consumer(p, v), sig, gn[GELU_MAX_NODES], ng;
        double k;
        if (c < 0 && (ng = scaled_gelu_after(p, v, gn, &k)) > 0) {
            xd_po pre = {.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_linear, .alpha = (float)k},
                  ge = {.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_gelu_erf},
                  post = {.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_pow, .alpha = (float)(1 / k), .beta = 1};
            if (f->nnodes + ng > XD_MAX_FUSE || f->npo + 3 > XD_MAX_FUSE || alg_conflicts(f, &pre) ||
                alg_conflicts(f, &ge) || alg_conflicts(f, &post))
                break;
            f->po[f->npo++] = pre;
            f->po[f->npo++] = ge;
            f->po[f->npo++] = post;
            for (int i = 0; i < ng; i++) f->nodes[f->nnodes++] = gn[i];
            v = f->out_value = g->nodes[gn[ng - 1]].outputs[0];
            continue;
        }
        if (c < 0) {
            int m = swish_after(p, v, &sig);
            if (m < 0 || f->nnodes + 2 > XD_MAX_FUSE || f->npo + 1 > XD_MAX_FUSE ||
                !is_f32(g, g->nodes[m].outputs[0]) || !ts_shape_eq(&g->values[g->nodes[m].outputs[0]].shape, &g->values[v].shape))
                break;
            f->po[f->npo++] = (xd_po){.kind = XD_PO_ELTWISE, .alg = dnnl_eltwise_swish, .alpha = 1};
            f->nodes[f->nnodes++] = sig;
            f->nodes[f->nnodes++] = m;
            v = f->out_value = g->nodes[m].outputs[0];
            continue;
        }
        const ts_node *nd = &g->nodes[c];
        if (nd->noutputs != 1 || !is_f32(g, nd->outputs[0]) ||
            !ts_shape_eq(&g->values[nd->outputs[0]].shape, &g->values[v].shape))
            break;
        int r = 0;
        if (f->npo == 0 && !xplan_skips(p, "bias_add")) { /* a bias only before any post-op */
            r = try_bias(p, c, v, caxis, channels, f);
            if (r < 0) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory folding into weights", nd->name);
        }
        if (r) f->naffine++;
        if (!r && !try_residual(p, c, v, f) && !try_activation(p, c, v, f)) break;
        f->nodes[f->nnodes++] = c;
        v = nd->outputs[0];
        f->out_value = v;
    }
    return TS_OK;
}

/* Keeps only the affine folds (they come first). */
static void drop_post(const xplan *p, xd_fuse *f)
{
    f->nnodes = f->naffine;
    f->npo = 0;
    f->sum_value = f->sum_node = -1;
    f->out_value = f->naffine ? p->g->nodes[f->nodes[f->naffine - 1]].outputs[0] : f->in_value;
    if (f->half_bias) { /* its shift is no fold: the product alone */
        xd_fuse_free(f);
        f->half_bias = false;
    }
    f->half_sum = f->half_relu = false;
}

/* The rounded bias sum's readers, when they are one element-wise chain
 * reading nothing else but tensors of its shape (ViT's GELU: Div, Erf, Add,
 * Mul by the sum, Mul; the MLP's second product: the residual Add), join
 * the product's step too (f->half_chain), run on each row of the sum
 * as it is written: a chunk's columns while they are in cache, the sum
 * never stored (dnnl_matmul.c runs it as a table of its 16-bit results:
 * ViT-B/16's GELU step took 0.73-0.85 ms per layer at batch 1, emulated
 * EPYC, loaded); TSOPT_SKIP=half.bias_chain for A/B. */
static ts_status half_chain_collect(const xplan *p, xd_fuse *f)
{
    if (xplan_skips(p, "half.bias_chain")) return TS_OK;
    xv_chain *ch = calloc(1, sizeof *ch);
    int nodes[XD_MAX_FUSE], nn = 0;
    if (!ch) return TS_ERR_NOMEM;
    int y = xv_chain_reading(p, f->out_value, ch, nodes, &nn, XD_MAX_FUSE - f->nnodes);
    if (y < 0 || !nn) {
        free(ch);
        return TS_OK;
    }
    for (int i = 0; i < nn; i++) f->nodes[f->nnodes++] = nodes[i];
    f->half_chain = ch;
    f->half_chain_sum = f->out_value;
    f->out_value = y;
    return TS_OK;
}

/* A half plan's MatMul whose result is read only by a bias Add (per-column
 * constant) that the rounding refusal kept out of the chain: the Add joins
 * the step as f->half_bias (see exec.h), the product and the sum each
 * rounded as the unfused plan rounds them (the Add's program rounds its
 * operand on load, then its sum).  Saves the Add's pass over the product
 * where the sum has several readers (ViT-B/16: QKV's three slices, the
 * first MLP product's GELU); TSOPT_SKIP=half.bias for A/B. */
static ts_status half_bias_collect(const xplan *p, const xkernel *k, int n, int v, int caxis, int64_t channels,
                                   xd_fuse *f)
{
    extern const xkernel xk_dnnl_matmul;
    const ts_graph *g = p->g;
    if (k != &xk_dnnl_matmul || f->nnodes || !p->half || xplan_skips(p, "half.bias") || xplan_skips(p, "bias_add") ||
        p->opts.no_fusion || xhalf_node_round(p, n) == TS_UNDEFINED)
        return TS_OK;
    int c = xhalf_sole_consumer(p, v);
    if (c < 0 || xhalf_node_round(p, c) != xhalf_node_round(p, n)) return TS_OK;
    const ts_node *nd = &g->nodes[c];
    if (nd->noutputs != 1 || !is_f32(g, nd->outputs[0]) || !ts_shape_eq(&g->values[nd->outputs[0]].shape, &g->values[v].shape))
        return TS_OK;
    /* a sum read by one node joins that node's element-wise chain instead
     * (MLP down: bias + residual one program), which costs no pass more,
     * unless that chain joins the product's step too (half_chain_collect:
     * the residual Add then runs in the chunks' copy, no step of its own) */
    bool alone = xhalf_consumers(p, nd->outputs[0]) < 2 && !ts_graph_is_output(g, nd->outputs[0]);
    if (alone && xplan_skips(p, "half.bias_chain")) return TS_OK;
    int r = try_bias(p, c, v, caxis, channels, f);
    if (r <= 0) return r < 0 ? TS_ERR_NOMEM : TS_OK;
    f->half_bias = true;
    f->nodes[f->nnodes++] = c;
    f->out_value = nd->outputs[0];
    ts_status st = half_chain_collect(p, f);
    if (!st && alone && !f->half_chain) { /* as before: the Add's chain step */
        xd_fuse_free(f);
        f->half_bias = false;
        f->nnodes = 0;
        f->out_value = v;
    }
    return st;
}

/* A half plan's convolution whose result only a residual Add reads (the
 * rounding refusal keeps it out of oneDNN's sum post-op, which adds before
 * the conv's output is rounded), and a Relu reading that sum alone: both
 * join the step as f->half_sum / half_relu (see exec.h), relu(round(round(y)
 * + r)) computed by dnnl.conv over its result -- the unfused plan's
 * arithmetic (the Add's program rounds y on load, adds, rounds; Relu is
 * exact on the grid), so bit-identical.  Saves the Add's step and its pass
 * over the product and the residual: ResNet-50's 16 residual Adds were
 * 4.3 ms of the float16 plan's ~58 ms (docs/runtime.md, per-node rounding);
 * TSOPT_SKIP=half.sum for A/B. */
static void half_sum_collect(const xplan *p, const xkernel *k, int n, int v, xd_fuse *f)
{
    extern const xkernel xk_dnnl_conv;
    const ts_graph *g = p->g;
    if (k != &xk_dnnl_conv || f->nnodes != f->naffine || f->npo || !p->half || xplan_skips(p, "half.sum") ||
        p->opts.no_fusion || xhalf_node_round(p, n) == TS_UNDEFINED || ts_graph_is_output(g, v))
        return;
    int c = xhalf_sole_consumer(p, v);
    if (c < 0 || xhalf_node_round(p, c) != xhalf_node_round(p, n) || !try_residual(p, c, v, f)) return;
    f->npo = 0; /* no sum post-op: the step adds after rounding */
    f->half_sum = true;
    f->nodes[f->nnodes++] = c;
    v = f->out_value = g->nodes[c].outputs[0];
    int r = ts_graph_is_output(g, v) ? -1 : xhalf_sole_consumer(p, v);
    if (r >= 0 && g->nodes[r].op == &ts_op_relu && g->nodes[r].noutputs == 1 && is_f32(g, g->nodes[r].outputs[0])) {
        f->half_relu = true;
        f->nodes[f->nnodes++] = r;
        f->out_value = g->nodes[r].outputs[0];
    }
}

void xd_fuse_free(xd_fuse *f)
{
    free(f->scale);
    free(f->shift);
    free(f->half_chain);
    f->scale = f->shift = NULL;
    f->half_chain = NULL;
}


/* ------------------------------------------------------------- formers */

extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_deconv_gemm, xk_vec_dwconv, xk_vec_gconv, xk_dnnl_conv_gated,
    xk_dnnl_matmul, xk_dnnl_gemm, xk_vec_se;

/* Which choices each kernel is offered, largest first (1 << variant):
 * the whole tail, the affine folds alone, nothing.  vec.dwconv and
 * vec.gconv run only the whole tail (else dnnl.conv takes it). */
enum { WHOLE = 1, AFFINE = 2, NONE = 4 };
static const struct {
    const xkernel *k;
    int variants;
} served[] = {
    {&xk_dnnl_conv, WHOLE | AFFINE},   {&xk_dnnl_deconv, WHOLE | AFFINE},  {&xk_deconv_gemm, WHOLE | AFFINE},
    {&xk_dnnl_conv_gated, WHOLE | AFFINE}, {&xk_vec_dwconv, WHOLE}, {&xk_vec_gconv, WHOLE},
    {&xk_dnnl_matmul, WHOLE | AFFINE | NONE}, {&xk_dnnl_gemm, WHOLE | AFFINE | NONE}, {&xk_vec_se, WHOLE},
};

static int variants_of(const xkernel *k)
{
    for (size_t i = 0; i < sizeof served / sizeof *served; i++)
        if (served[i].k == k) return served[i].variants;
    return 0;
}

bool xgroup_serves_post(const xkernel *k) { return variants_of(k) != 0; }

/* Node n is Mul(W, gate), W constant float weights [F][C][kh][kw] and gate
 * one value per input channel (every dimension 1 but the one aligned with
 * W's dimension 1), read only by a group-1 convolution as its weights: the
 * form ts_fold_gate (opt/fold_gate.c) gives a squeeze-excite gate before a
 * conv.  dnnl.conv_gated computes both nodes as written (dnnl_conv.c). */
static bool gate_folds(const xplan *p, int n, xgroup *gr, int *conv)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (nd->op != &ts_op_mul || p->opts.no_fusion || nd->ninputs != 2 || nd->noutputs != 1) return false;
    /* in a 16-bit plan the step rounds the scaled weights as the Mul
     * would (gated_build), so it may take the Mul past half.c's refusal */
    const int mv = nd->outputs[0], c = xhalf_node_round(p, n) ? xhalf_sole_consumer(p, mv) : xplan_sole_consumer(p, mv);
    if (c < 0) return false;
    const ts_node *cn = &g->nodes[c];
    if (cn->op != &ts_op_conv || cn->ninputs < 2 || cn->inputs[1] != mv || cn->inputs[0] == mv ||
        (cn->ninputs > 2 && cn->inputs[2] == mv) || ((const ts_conv_attrs *)cn->attrs)->group != 1 ||
        !xplan_inputs_ready(p, c, mv)) /* the conv runs now: x computed already */
        return false;
    gr->gate_w = gr->gate_g = -1;
    for (int k = 0; k < 2 && gr->gate_w < 0; k++) {
        const int wv = nd->inputs[k], gv = nd->inputs[1 - k];
        const ts_tensor *W = xplan_const(p, wv);
        const ts_shape *gs = &g->values[gv].shape;
        if (!W || !W->data || W->dtype != TS_F32 || W->shape.rank != 4 || wv == gv ||
            !ts_shape_eq(&W->shape, &g->values[mv].shape) || g->values[gv].dtype != TS_F32 || gs->rank > 4 ||
            ts_shape_numel(gs) != W->shape.dims[1])
            continue;
        bool per_channel = true;
        for (int i = 0; i < gs->rank; i++)
            per_channel &= gs->dims[i] == 1 || (i + 4 - gs->rank == 1 && gs->dims[i] == W->shape.dims[1]);
        if (per_channel) gr->gate_w = wv, gr->gate_g = gv;
    }
    *conv = c;
    return gr->gate_w >= 0;
}

/* Node c is a 1x1 convolution (group 1, no padding, stride or dilation
 * that matter on a 1x1 image) of value v with constant float weights
 * [F][Cin][1][1] and optional constant bias; its output is N x F x 1 x 1. */
static bool conv1x1_on(const xplan *p, int c, int v, int64_t Cin)
{
    const ts_graph *g = p->g;
    if (c < 0) return false;
    const ts_node *nd = &g->nodes[c];
    if (nd->op != &ts_op_conv || nd->inputs[0] != v || nd->ninputs < 2) return false;
    const ts_tensor *W = xplan_const(p, nd->inputs[1]);
    const ts_tensor *B = nd->ninputs > 2 && nd->inputs[2] >= 0 ? xplan_const(p, nd->inputs[2]) : NULL;
    if (!W || !W->data || W->dtype != TS_F32 || W->shape.rank != 4 || W->shape.dims[1] != Cin ||
        W->shape.dims[2] != 1 || W->shape.dims[3] != 1)
        return false;
    if (nd->ninputs > 2 && nd->inputs[2] >= 0 && (!B || !B->data || B->dtype != TS_F32)) return false;
    const ts_conv_attrs *ca = nd->attrs;
    const ts_shape *y = &g->values[nd->outputs[0]].shape;
    return ca->group == 1 && y->rank == 4 && y->dims[1] == W->shape.dims[0] && y->dims[2] == 1 && y->dims[3] == 1 &&
           g->values[nd->outputs[0]].dtype == TS_F32;
}

/* The squeeze-excite block vec.se computes (vec_se.c): node n a
 * GlobalAveragePool of float32 NCHW x -> 1x1 conv c1 (constant weights,
 * bias) -> its tail -> 1x1 conv c2 back to C channels -> its tail (the
 * gate), and the block's Mul x * gate when that alone reads the gate
 * (TSOPT_SKIP=se_scale: the Mul stays a step).  vec.se declines tails it
 * cannot apply. */
static bool se_group(const xplan *p, int n, xgroup *gr)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    ts_error e = {0};
    if (p->opts.no_fusion || nd->ninputs != 1 || nd->noutputs != 1 || !xv_all_f32(p, n)) return false;
    int xv = nd->inputs[0], pv = nd->outputs[0];
    const ts_shape *xs = &g->values[xv].shape;
    if (xs->rank != 4) return false;
    const int64_t C = xs->dims[1];
    int c1 = xplan_sole_consumer(p, pv);
    if (!conv1x1_on(p, c1, pv, C)) return false;
    const int64_t R = g->values[g->nodes[c1].outputs[0]].shape.dims[1];
    if (xd_fuse_collect(p, g->nodes[c1].outputs[0], 1, R, &gr->se1, &e)) return false;
    int c2 = xplan_sole_consumer(p, gr->se1.out_value);
    if (!conv1x1_on(p, c2, gr->se1.out_value, R) || g->values[g->nodes[c2].outputs[0]].shape.dims[1] != C ||
        xd_fuse_collect(p, g->nodes[c2].outputs[0], 1, C, &gr->se2, &e))
        return false;
    const int gv = gr->se2.out_value;
    int mul = ts_graph_is_output(g, gv) || xplan_skips(p, "se_scale") ? -1 : xplan_sole_consumer(p, gv);
    if (mul >= 0) {
        const ts_node *m = &g->nodes[mul];
        int mo = m->noutputs == 1 ? m->outputs[0] : -1;
        bool reads = m->ninputs == 2 && ((m->inputs[0] == xv && m->inputs[1] == gv) || (m->inputs[1] == xv && m->inputs[0] == gv));
        if (m->op != &ts_op_mul || !reads || mo < 0 || g->values[mo].dtype != TS_F32 ||
            !ts_shape_eq(&g->values[mo].shape, xs) || ts_graph_is_output(g, mo))
            mul = -1;
    }
    gr->se_c1 = c1, gr->se_c2 = c2, gr->se_mul = mul;
    gr->nodes[gr->nnodes++] = c1;
    for (int i = 0; i < gr->se1.nnodes; i++) gr->nodes[gr->nnodes++] = gr->se1.nodes[i];
    gr->nodes[gr->nnodes++] = c2;
    for (int i = 0; i < gr->se2.nnodes; i++) gr->nodes[gr->nnodes++] = gr->se2.nodes[i];
    if (mul >= 0) gr->nodes[gr->nnodes++] = mul;
    gr->y = mul >= 0 ? g->nodes[mul].outputs[0] : gv;
    return true;
}

/* The product node's raw output, its channel axis and channel count (the
 * post-ops' per-channel constants vary along it only). */
static int product_out(const xplan *p, int n, int *caxis, int64_t *channels)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
    if (nd->noutputs < 1 || nd->outputs[0] < 0 || nd->ninputs < 2) return -1;
    const ts_shape *ys = &g->values[nd->outputs[0]].shape;
    if (nd->op == &ts_op_matmul || nd->op == &ts_op_gemm) {
        const ts_shape *b = &g->values[nd->inputs[1]].shape;
        if (b->rank < 1 || ys->rank < 1) return -1;
        *caxis = ys->rank - 1;
        *channels = nd->op == &ts_op_matmul && b->rank == 1 ? 1 : ys->dims[ys->rank - 1];
    } else {
        if (ys->rank < 2) return -1;
        *caxis = 1;
        *channels = ys->dims[1];
    }
    return nd->outputs[0];
}

bool xgroup_post(const xplan *p, const xkernel *k, int n, int variant, xgroup *gr)
{
    int want = variants_of(k), caxis = 0, conv = n;
    int64_t channels = 0;
    if (!(want & (1 << variant))) return false;
    gr->nodes[0] = n;
    gr->nnodes = 1;
    if (k == &xk_vec_se) return se_group(p, n, gr);
    if (k == &xk_dnnl_conv_gated) {
        if (!gate_folds(p, n, gr, &conv)) return false;
        gr->nodes[gr->nnodes++] = gr->gate_conv = conv;
    }
    int v = product_out(p, conv, &caxis, &channels);
    xd_fuse *f = &gr->post;
    ts_error e = {0};
    /* no output to follow: the kernel declines such a node; out of
     * memory: the kernel is not asked either (the reference kernel is) */
    if (v < 0 || xd_fuse_collect(p, v, caxis, channels, f, &e) || half_bias_collect(p, k, n, v, caxis, channels, f))
        return false;
    half_sum_collect(p, k, n, v, f);
    /* each choice offered once: a shorter one only when it differs */
    if (variant >= 1) {
        if (variant == 1 && f->nnodes == f->naffine) return false;
        if (variant == 2 && !f->naffine) return false;
        if (variant == 2) {
            xd_fuse_free(f);
            f->naffine = 0;
        }
        drop_post(p, f);
    }
    for (int i = 0; i < f->nnodes; i++) gr->nodes[gr->nnodes++] = f->nodes[i];
    gr->y = f->out_value;
    return true;
}

/* Winograd's budget (dnnl_conv.c, wino_budget_ok) is relative to these. */
size_t xplan_product_weight_bytes(const xplan *p)
{
    const ts_graph *g = p->g;
    size_t sum = 0;
    bool *seen = calloc((size_t)g->nvalues, sizeof *seen);
    if (!seen) return 0;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *nd = &g->nodes[i];
        bool conv = nd->op == &ts_op_conv;
        if (!conv && nd->op != &ts_op_gemm && nd->op != &ts_op_matmul) continue;
        for (int k = conv ? 1 : 0; k < 2 && k < nd->ninputs; k++) {
            int v = nd->inputs[k];
            const ts_tensor *t = v >= 0 ? xplan_const(p, v) : NULL;
            if (t && !seen[v]) sum += t->nbytes, seen[v] = true;
        }
    }
    free(seen);
    return sum;
}

/* The node reading value v when it is the only reader (-1: none or more). */
static int only_reader(const ts_graph *g, int v)
{
    int r = -1;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        for (int j = 0; j < nd->ninputs && !nd->dead; j++)
            if (nd->inputs[j] == v) {
                if (r >= 0) return -1;
                r = m;
            }
    }
    return r;
}

/* How conv node nd runs on its input (shape xs): 'w' on Winograd (the shape
 * rule of dnnl_conv.c, xd_wino_shape), which reads and writes 16-channel
 * blocks whatever its producer wrote; '1' a group-1 1x1 stride-1 unpadded
 * conv to a multiple of 16 channels, which on blocks writes blocks
 * (jit_1x1, as fast as brgconv_1x1 on channels-last); 0 anything else. */
static char conv_kind(const ts_graph *g, const ts_node *nd)
{
    if (nd->op != &ts_op_conv || nd->ninputs < 2 || nd->noutputs != 1) return 0;
    const ts_conv_attrs *ca = nd->attrs;
    const ts_shape *xs = &g->values[nd->inputs[0]].shape, *ws = &g->values[nd->inputs[1]].shape;
    ts_window_geom wg;
    char why[256];
    if (xs->rank != 4 || ws->rank != 4 || !ts_window_resolve(&ca->win, 2, xs->dims + 2, ws->dims + 2, &wg, why, sizeof why))
        return 0;
    if (xd_wino_shape(xs, ws, ca->group, wg.stride, wg.dil)) return 'w';
    bool pointwise = ca->group == 1 && ws->dims[2] == 1 && ws->dims[3] == 1 && ws->dims[0] % 16 == 0 &&
                     wg.stride[0] == 1 && wg.stride[1] == 1 && wg.pad_begin[0] == 0 && wg.pad_begin[1] == 0 &&
                     wg.pad_end[0] == 0 && wg.pad_end[1] == 0;
    return pointwise ? '1' : 0;
}

/* Whether value v comes in 16-channel blocks whatever a pooling before it
 * writes: the result of a Winograd conv, or (through Relus) of a 1x1 conv
 * ('1' above) reading such a result: a residual block's main branch, whose
 * Add then reads its other operand in blocks too (as the conv's sum
 * post-op or as its own step), converting it if it came channels-last. */
static bool blocks_written(const ts_graph *g, int v, int depth)
{
    int n = g->values[v].producer;
    if (n < 0 || depth > 4) return false;
    const ts_node *nd = &g->nodes[n];
    if (nd->op == &ts_op_relu && nd->ninputs == 1) return blocks_written(g, nd->inputs[0], depth + 1);
    char k = conv_kind(g, nd);
    return k == 'w' || (k == '1' && blocks_written(g, nd->inputs[0], depth + 1));
}

/* Whether every reader of value v is a Conv that runs on Winograd, which
 * reads 16-channel blocks whatever its producer wrote, or (at depth 0) a
 * 1x1 conv ('1' above) whose result, through an optional Relu, only such
 * Winograd convs read: on blocks it writes blocks, so the conversion the
 * Winograd conv made is gone too; or (at depth 0) an Add, no broadcast,
 * whose other operand comes in blocks (blocks_written): ResNet's identity
 * shortcut beside a Winograd conv (resnet18's stem pool: its 64x56x56
 * was converted channels-last -> blocks twice a run, for layer1.0's conv1
 * and for the Add fused into its conv2; now bit-identical without either).
 * Not an Add at depth 1 (ResNet-50's downsample 1x1 conv beside the
 * bottleneck's last one): that takes the stem's 1x1 convs from brgconv_1x1
 * on channels-last to jit_1x1 on blocks, whose sums round differently, and
 * fcn_resnet50's output, at rtol 1e-3 / atol 1e-4 against ONNX Runtime
 * within rounding of the edge, then missed it on 8-18 of 537600 elements
 * (seeds 0-2; 0 before), although it saved converting 64x56x56 and
 * 256x56x56 every run (resnet50, loaded per-step A/B: layer1.0's four
 * steps 2.35 vs 3.52 ms).  TSOPT_SKIP=maxpool.blocks_add leaves the Adds
 * out (A/B). */
static bool blocks_readers(const xplan *p, int v, int depth)
{
    const ts_graph *g = p->g;
    if (ts_graph_is_output(g, v) || g->values[v].shape.rank != 4) return false;
    int readers = 0;
    for (int m = 0; m < g->nnodes; m++) {
        const ts_node *nd = &g->nodes[m];
        bool reads = false;
        for (int j = 0; j < nd->ninputs; j++) reads |= nd->inputs[j] == v;
        if (!reads || nd->dead) continue;
        readers++;
        if (nd->op == &ts_op_add && nd->ninputs == 2 && nd->noutputs == 1 && depth == 0 &&
            !xplan_skips(p, "maxpool.blocks_add")) {
            int other = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
            if (other != v && g->values[other].dtype == g->values[v].dtype &&
                ts_shape_eq(&g->values[other].shape, &g->values[v].shape) && blocks_written(g, other, 0))
                continue;
            return false;
        }
        if (nd->inputs[0] != v) return false;
        char k = conv_kind(g, nd);
        if (k == 'w') continue;
        if (depth > 0 || k != '1') return false;
        int y = nd->outputs[0], r = only_reader(g, y);
        if (r >= 0 && g->nodes[r].op == &ts_op_relu && !ts_graph_is_output(g, y)) y = g->nodes[r].outputs[0];
        if (!blocks_readers(p, y, depth + 1)) return false;
    }
    return readers > 0;
}

bool xlow_blocks_readers(const xplan *p, int v)
{
    return !xplan_skips(p, "winograd") && blocks_readers(p, v, 0);
}

/* True when value v's one reader is a Flatten or Reshape and v is no graph
 * output: what it reads is v's elements in plain order, whatever layout the
 * step writing v would otherwise choose (vec.reduce's mean of padded
 * 16-channel blocks writes plain for such a reader only). */
bool xlow_flatten_reader(const xplan *p, int v)
{
    const ts_graph *g = p->g;
    int r = ts_graph_is_output(g, v) ? -1 : only_reader(g, v);
    return r >= 0 && (g->nodes[r].op == &ts_op_flatten || g->nodes[r].op == &ts_op_reshape) &&
           g->nodes[r].inputs[0] == v;
}
