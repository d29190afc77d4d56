/* Shared plumbing of the oneDNN kernels; see dnnl_util.h. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exec/dnnl_util.h"
#include "ops/attrs.h"
#include "ops/list.h"

ts_status xd_check(dnnl_status_t st, const xplan *p, int n, const char *what, ts_error *err)
{
    if (st == dnnl_success) return TS_OK;
    const ts_node *nd = &p->g->nodes[n];
    /* unimplemented / unsupported configurations decline quietly: the next
     * candidate kernel (at worst the reference) takes the node */
    ts_status code = st == dnnl_unimplemented || st == dnnl_invalid_arguments ? TS_ERR_UNSUPPORTED
                     : st == dnnl_out_of_memory                               ? TS_ERR_NOMEM
                                                                              : TS_ERR_INVALID;
    return ts_error_set(err, code, "node '%s' (%s): oneDNN %s failed (status %d)", nd->name, nd->op->name, what,
                        (int)st);
}

static void md_init(dnnl_memory_desc_t *md, const ts_shape *s, bool any)
{
    dnnl_dims_t dims;
    int rank = s->rank ? s->rank : 1;
    for (int i = 0; i < rank; i++) dims[i] = s->rank ? s->dims[i] : 1;
    if (any)
        dnnl_memory_desc_init_by_tag(md, rank, dims, dnnl_f32, dnnl_format_tag_any);
    else
        dnnl_memory_desc_init_by_strides(md, rank, dims, dnnl_f32, NULL); /* NULL: dense row-major */
}

void xd_md_plain(dnnl_memory_desc_t *md, const ts_shape *s) { md_init(md, s, false); }
void xd_md_any(dnnl_memory_desc_t *md, const ts_shape *s) { md_init(md, s, true); }

void xd_md_of(const xbuf *b, dnnl_memory_desc_t *md)
{
    if (b->blocked)
        *md = b->md;
    else
        xd_md_plain(md, &b->shape);
}

bool xd_pd_is_ref(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) return false;
    return strncmp(impl, "ref", 3) == 0;
}

void *xd_alloc(size_t bytes) { return aligned_alloc(64, xd_round(bytes ? bytes : 1)); }

/* ------------------------------------------------------------- fusion */

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
 * A slope that varies per channel needs a post-op reading memory at run
 * time, which the callers do not bind: it stays a vectorized step. */
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

ts_status xd_fuse_collect(const xplan *p, int v, int caxis, int64_t channels, xd_fuse *f, ts_error *err)
{
    const ts_graph *g = p->g;
    memset(f, 0, sizeof *f);
    f->sum_value = -1;
    f->in_value = f->out_value = v;
    if (p->opts.no_fusion) return TS_OK;
    while (f->nnodes < XD_MAX_FUSE) {
        int c = xplan_sole_consumer(p, v), sig;
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

void xd_fuse_drop_post(const xplan *p, xd_fuse *f)
{
    f->nnodes = f->naffine;
    f->npo = 0;
    f->sum_value = -1;
    f->out_value = f->naffine ? p->g->nodes[f->nodes[f->naffine - 1]].outputs[0] : f->in_value;
}

ts_status xd_fuse_attr(const xd_fuse *f, dnnl_primitive_attr_t attr, const xplan *p, int n, ts_error *err)
{
    if (!f->npo) return TS_OK;
    dnnl_post_ops_t po;
    ts_status st = xd_check(dnnl_post_ops_create(&po), p, n, "post_ops_create", err);
    for (int i = 0; !st && i < f->npo; i++) {
        const xd_po *o = &f->po[i];
        dnnl_status_t ds = o->kind == XD_PO_SUM ? dnnl_post_ops_append_sum(po, 1.0f)
                                                : dnnl_post_ops_append_eltwise(po, 1.0f, o->alg, o->alpha, o->beta);
        st = xd_check(ds, p, n, "post-op", err);
    }
    if (!st) st = xd_check(dnnl_primitive_attr_set_post_ops(attr, po), p, n, "set_post_ops", err);
    dnnl_post_ops_destroy(po);
    return st;
}

void xd_fuse_free(xd_fuse *f)
{
    free(f->scale);
    free(f->shift);
    f->scale = f->shift = NULL;
}

void xd_fuse_claim(xplan *p, const xd_fuse *f, xstep *s)
{
    for (int i = 0; i < f->nnodes; i++) xplan_claim(p, f->nodes[i], s);
}

/* ------------------------------------------------------------ memories */

ts_status xd_mem_init(xd_mem *m, const dnnl_memory_desc_t *md, const xplan *p, int n, ts_error *err)
{
    m->cur = NULL;
    return xd_check(dnnl_memory_create(&m->m, md, p->engine, DNNL_MEMORY_NONE), p, n, "memory_create", err);
}

void xd_mem_bind(xd_mem *m, void *ptr, dnnl_stream_t stream)
{
    if (m->cur == ptr) return;
    /* with the stream given, zero-padding of blocked layouts runs on it
     * instead of on a temporary stream */
    dnnl_memory_set_data_handle_v2(m->m, ptr, stream);
    m->cur = ptr;
}

void xd_mem_fini(xd_mem *m)
{
    if (m->m) dnnl_memory_destroy(m->m);
    m->m = NULL;
}

/* A dense 4-D float32 NCHW -> NHWC reorder with 3 or 4 channels (the RGB
 * image before a mobile net's first convolution, whose brgconv kernel
 * reads channels-last): oneDNN's jit:uni reorder took 0.065-0.092 ms for
 * 1x3x224x224 on one thread in efficientnet_b0, mobilenet_v3_large,
 * mnasnet1_0 and regnet_y_400mf (ONEDNN_VERBOSE), this loop 0.018 ms
 * (best of 300, loaded machine).  The same on u8/s8 (a quantized model's
 * image before its int8 stem conv): oneDNN's took 0.066 / 0.226 ms
 * (fastest of 23) for 1 / 4 x3x224x224 u8 in the ResNet-18 QDQ model, the
 * byte loop 0.006 / 0.024 ms (best of 300).  The element size in bytes (4
 * or 1), 0 when not such a reorder. */
static int rgb_to_cl(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    dnnl_data_type_t dt = from->data_type;
    if (from->ndims != 4 || (dt != dnnl_f32 && dt != dnnl_u8 && dt != dnnl_s8) ||
        (from->dims[1] != 3 && from->dims[1] != 4))
        return 0;
    dnnl_memory_desc_t pl, cl;
    if (dnnl_memory_desc_init_by_strides(&pl, 4, from->dims, dt, NULL) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&cl, 4, from->dims, dt, dnnl_acdb) != dnnl_success)
        return 0;
    return dnnl_memory_desc_equal(from, &pl) && dnnl_memory_desc_equal(to, &cl) ? (dt == dnnl_f32 ? 4 : 1) : 0;
}

/* The 3/4-channel planar -> channels-last loop, for float32 and for bytes
 * (u8/s8: a quantized image before an int8 stem conv). */
#define RGB_TO_CL_RUN(NAME, T)                                                                                      \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME(const xd_reorder *r, const T *x,  \
                                                                                  T *y)                             \
    {                                                                                                               \
        const int64_t HW = r->cl_hw;                                                                                \
        for (int64_t n = 0; n < r->cl_n; n++) {                                                                     \
            const T *a = x + n * r->cl_c * HW, *b = a + HW, *c = b + HW, *d = c + HW;                               \
            T *o = y + n * r->cl_c * HW;                                                                            \
            if (r->cl_c == 3) {                                                                                     \
                _Pragma("omp simd") for (int64_t q = 0; q < HW; q++) o[3 * q] = a[q], o[3 * q + 1] = b[q],          \
                                                                     o[3 * q + 2] = c[q];                           \
            } else {                                                                                                \
                _Pragma("omp simd") for (int64_t q = 0; q < HW; q++) o[4 * q] = a[q], o[4 * q + 1] = b[q],          \
                                                                     o[4 * q + 2] = c[q], o[4 * q + 3] = d[q];      \
            }                                                                                                       \
        }                                                                                                           \
    }
RGB_TO_CL_RUN(rgb_to_cl_run, float)
RGB_TO_CL_RUN(rgb_to_cl_run8, uint8_t)

ts_status xd_reorder_init(xd_reorder *r, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, const xplan *p,
                          int n, ts_error *err)
{
    memset(r, 0, sizeof *r);
    r->bytes = dnnl_memory_desc_get_size(to);
    if (dnnl_memory_desc_equal(from, to)) return TS_OK;
    if ((r->cl_size = rgb_to_cl(from, to))) {
        r->cl_n = from->dims[0];
        r->cl_c = from->dims[1];
        r->cl_hw = from->dims[2] * from->dims[3];
        return TS_OK;
    }
    dnnl_primitive_desc_t pd;
    ts_status st = xd_check(dnnl_reorder_primitive_desc_create(&pd, from, p->engine, to, p->engine, NULL), p, n,
                            "reorder", err);
    if (st) return st;
    st = xd_check(dnnl_primitive_create(&r->prim, pd), p, n, "reorder primitive", err);
    dnnl_primitive_desc_destroy(pd);
    if (!st) st = xd_mem_init(&r->src, from, p, n, err);
    if (!st) st = xd_mem_init(&r->dst, to, p, n, err);
    return st;
}

void xd_reorder_run(xd_reorder *r, const void *from, void *to, dnnl_stream_t stream)
{
    if (r->cl_c) {
        if (r->cl_size == 1)
            rgb_to_cl_run8(r, from, to);
        else
            rgb_to_cl_run(r, from, to);
        return;
    }
    if (!r->prim) {
        if (from != to) memcpy(to, from, r->bytes);
        return;
    }
    xd_mem_bind(&r->src, (void *)from, stream);
    xd_mem_bind(&r->dst, to, stream);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->src.m}, {DNNL_ARG_TO, r->dst.m}};
    dnnl_primitive_execute(r->prim, stream, 2, args);
}

void xd_reorder_fini(xd_reorder *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    xd_mem_fini(&r->src);
    xd_mem_fini(&r->dst);
    r->prim = NULL;
}

int xd_const_buf(xplan *p, const dnnl_memory_desc_t *md, const ts_shape *shape, void *data)
{
    int b = xplan_new_buf(p, -1, TS_F32, shape);
    if (b < 0) return -1;
    xbuf *x = &p->bufs[b];
    dnnl_memory_desc_t plain;
    xd_md_plain(&plain, shape);
    x->kind = XB_CONST;
    x->data = data;
    x->owns_data = true;
    x->bytes = dnnl_memory_desc_get_size(md);
    x->blocked = !dnnl_memory_desc_equal(md, &plain);
    x->md = *md;
    return b;
}

ts_status xd_weighted_init(const xd_weighted *w, const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_md,
                           const dnnl_memory_desc_t *dst_md, const dnnl_memory_desc_t *pad_md,
                           const dnnl_memory_desc_t *bias_md, const xplan *p, int n, dnnl_exec_arg_t *args,
                           int *nargs, ts_error *err)
{
    ts_status st;
    if ((st = xd_mem_init(w->src, src_md, p, n, err)) || (st = xd_mem_init(w->wei, wei_md, p, n, err)) ||
        (st = xd_mem_init(w->dst, dst_md, p, n, err)) || (st = xd_mem_init(w->pad, pad_md, p, n, err)) ||
        (bias_md && (st = xd_mem_init(w->bias, bias_md, p, n, err))))
        return st;
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, w->src->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, w->wei->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_DST, w->dst->m};
    args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, w->pad->m};
    if (bias_md) args[(*nargs)++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, w->bias->m};
    return TS_OK;
}
