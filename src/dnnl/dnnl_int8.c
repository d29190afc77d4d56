/* The integer products of quantized models on oneDNN's int8 primitives:
 * QLinearConv and ConvInteger on its convolution, QLinearMatMul and
 * MatMulInteger on its matmul (VNNI's vpdpbusd on this CPU: u8 x s8 into
 * s32).  Never through float32 kernels: the primitive reads the 8-bit
 * tensors, sums in int32, and for the QLinear forms requantizes in the same
 * pass (int32 bias added, times the per-channel output scale
 * x_scale * w_scale[m] / y_scale, rounded to nearest even, plus y's zero
 * point, saturated to u8/s8: ONNX's definition, with the float32 scale
 * product the reference kernels use).  One difference: oneDNN adds y's
 * zero point before it rounds, ONNX after; they differ only where the
 * scaled sum is exactly halfway and the zero point odd, by one step (tests:
 * test_exec_int8.c).
 *
 * quantize_dynamic's MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)]
 * [-> Relu] is one matmul writing float32, the chain its post-ops (the
 * lowering stage hands it: lower_group.c, requant_chain).
 *
 * What each declines (the reference kernel then runs it): convolution
 * weights that are not constant int8 with zero point 0 (oneDNN 2.6 has no
 * weight zero points in its fast convolutions; ORT's quantizer writes
 * symmetric int8 weights; a constant matmul B takes its one zero point),
 * scales or zero points that are not constants (MatMulInteger's A zero point
 * excepted: DynamicQuantizeLinear computes it per run; it is a run-time
 * argument), per-row A scales, or oneDNN answering with its reference
 * implementation.  A u8 B of a product of two activations (attention's
 * scores) is read as s8 through b ^ 0x80 with its zero point less 128.
 * Weights are reordered into the primitive's layout once, at plan time. */
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct q_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, wei, bias, dst, pad, azp;
    xd_mem osc, po_bias;  /* MatMulInteger's chain: run-time scale and bias post-op operands */
    int osc_in, po_bias_in; /* their step inputs (-1 none) */
    int osc_b, po_bias_b;   /* and buffers, set before finish() */
    dnnl_memory_desc_t osc_md, po_bias_md;
    xd_reorder in_r;      /* input into the primitive's src layout, in scratch */
    bool reorder_in;
    size_t in_off;        /* scratch: [reordered src][u8 B as s8][oneDNN's pad] */
    size_t b_off, b_bytes; /* u8 B flipped to s8 per run (0: none) */
    size_t pad_off;
    int bias_in, azp_in, wei_in;
    int32_t azp_val;      /* run-time zero point of A (MatMulInteger) */
    dnnl_exec_arg_t args[10];
    int nargs;
} q_state;

static void q_destroy(void *state)
{
    q_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->bias);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    xd_mem_fini(&c->azp);
    xd_mem_fini(&c->osc);
    xd_mem_fini(&c->po_bias);
    xd_reorder_fini(&c->in_r);
    free(c);
}

static void q_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    q_state *c = s->state;
    char *sc = scratch;
    void *src = in[0];
    if (c->reorder_in) {
        xd_reorder_run(&c->in_r, in[0], sc + c->in_off, c->stream);
        src = sc + c->in_off;
    }
    void *wei = in[c->wei_in];
    if (c->b_bytes) {
        const uint8_t *b = wei;
        uint8_t *f = (uint8_t *)(sc + c->b_off);
        for (size_t i = 0; i < c->b_bytes; i++) f[i] = b[i] ^ 0x80;
        wei = f;
    }
    if (c->azp_in >= 0) {
        c->azp_val = *(const uint8_t *)in[c->azp_in]; /* u8: DynamicQuantizeLinear's */
        xd_mem_bind(&c->azp, &c->azp_val, c->stream);
    }
    if (c->osc_in >= 0) xd_mem_bind(&c->osc, in[c->osc_in], c->stream);
    if (c->po_bias_in >= 0) xd_mem_bind(&c->po_bias, in[c->po_bias_in], c->stream);
    xd_mem_bind(&c->src, src, c->stream);
    xd_mem_bind(&c->wei, wei, c->stream);
    if (c->bias_in >= 0) xd_mem_bind(&c->bias, in[c->bias_in], c->stream);
    xd_mem_bind(&c->dst, out[0], c->stream);
    xd_mem_bind(&c->pad, sc + c->pad_off, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    dnnl_stream_wait(c->stream);
}

static dnnl_data_type_t dt_of(ts_dtype t) { return t == TS_U8 ? dnnl_u8 : t == TS_I8 ? dnnl_s8 : dnnl_s32; }

/* The constant tensor of input i of node nd; NULL when absent or computed per run. */
static const ts_tensor *cin(const xplan *p, const ts_node *nd, int i)
{
    return i < nd->ninputs && nd->inputs[i] >= 0 ? xplan_const(p, nd->inputs[i]) : NULL;
}

static bool absent(const ts_node *nd, int i) { return i >= nd->ninputs || nd->inputs[i] < 0; }

static bool all_zero(const ts_tensor *t)
{
    for (int64_t i = 0, n = ts_tensor_numel(t); i < n; i++)
        if (ts_tensor_get_i64(t, i)) return false;
    return true;
}

static float f32_at(const ts_tensor *t, int64_t i) { return (float)ts_tensor_get_f64(t, ts_tensor_numel(t) == 1 ? 0 : i); }

/* The requantization of the QLinear forms: scales[m] and y's zero point set
 * on attr (n_scale 1: one common scale). */
static ts_status requant_attr(const xplan *p, int n, dnnl_primitive_attr_t attr, const ts_tensor *as, const ts_tensor *bs,
                              const ts_tensor *ys, const ts_tensor *yz, int64_t M, int mask, ts_error *err)
{
    int64_t cnt = ts_tensor_numel(bs) == 1 ? 1 : M;
    float *sc = malloc(sizeof(float) * (size_t)cnt);
    if (!sc) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int64_t m = 0; m < cnt; m++) sc[m] = f32_at(as, 0) * f32_at(bs, m) / f32_at(ys, 0); /* as the reference kernels */
    ts_status st = xd_check(dnnl_primitive_attr_set_output_scales(attr, cnt, cnt == 1 ? 0 : mask, sc), p, n, "output scales", err);
    free(sc);
    int32_t z = (int32_t)ts_tensor_get_i64(yz, 0);
    if (!st && z) st = xd_check(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &z), p, n, "dst zero point", err);
    return st;
}

static ts_status src_zp_attr(const xplan *p, int n, dnnl_primitive_attr_t attr, const ts_tensor *xz, bool runtime,
                             ts_error *err)
{
    int32_t z = runtime ? DNNL_RUNTIME_S32_VAL : xz ? (int32_t)ts_tensor_get_i64(xz, 0) : 0;
    if (!z) return TS_OK;
    return xd_check(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &z), p, n, "src zero point", err);
}

/* Packs the constant w (plain `from`) into `to`; the new constant buffer's id. */
static int pack_const(xplan *p, int n, const ts_tensor *w, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                      ts_error *err)
{
    void *dst = xd_alloc(dnnl_memory_desc_get_size(to));
    if (!dst) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
    xd_reorder r;
    if (xd_reorder_init(&r, from, to, p, n, err)) {
        free(dst);
        return -1;
    }
    xd_reorder_run(&r, w->data, dst, p->stream);
    dnnl_stream_wait(p->stream);
    xd_reorder_fini(&r);
    int b = xd_const_buf(p, to, &w->shape, dst);
    if (b < 0) {
        free(dst);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        return -1;
    }
    p->bufs[b].dtype = w->dtype;
    return b;
}

/* The int32 bias B (M values) as a plan constant laid out as md; -1 out of memory. */
static int bias_buf(xplan *p, const dnnl_memory_desc_t *md, const ts_tensor *B, int64_t M)
{
    int32_t *bd = xd_alloc(sizeof(int32_t) * (size_t)M);
    if (!bd) return -1;
    for (int64_t m = 0; m < M; m++) bd[m] = (int32_t)ts_tensor_get_i64(B, m);
    int b = xd_const_buf(p, md, &B->shape, bd);
    if (b < 0) free(bd);
    else p->bufs[b].dtype = TS_I32;
    return b;
}

/* Finishes a step: primitive, memories, scratch layout, inputs/outputs. */
static ts_status finish(xplan *p, int n, xstep *s, q_state *c, dnnl_primitive_desc_t pd, int xb, int wb, int biasb,
                        int azpb, int yb, ts_error *err)
{
    const dnnl_memory_desc_t *csrc = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *cbias = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    ts_status st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err);
    if (st) return st;
    dnnl_memory_desc_t xmd;
    if (p->bufs[xb].blocked)
        xmd = p->bufs[xb].md;
    else /* plain: the primitive's view of the same bytes (a matmul's rows flattened) */
        dnnl_memory_desc_init_by_strides(&xmd, csrc->ndims, csrc->dims, csrc->data_type, NULL);
    size_t off = 0;
    if (!dnnl_memory_desc_equal(&xmd, csrc)) {
        if ((st = xd_reorder_init(&c->in_r, &xmd, csrc, p, n, err))) return st;
        c->reorder_in = true;
        c->in_off = off;
        off += xd_round(dnnl_memory_desc_get_size(csrc));
    }
    if (c->b_bytes) c->b_off = off, off += xd_round(c->b_bytes);
    c->pad_off = off;
    s->scratch_bytes = off + xd_round(dnnl_memory_desc_get_size(cpad));
    if ((st = xd_mem_init(&c->src, csrc, p, n, err)) || (st = xd_mem_init(&c->wei, cwei, p, n, err)) ||
        (st = xd_mem_init(&c->dst, cdst, p, n, err)) || (st = xd_mem_init(&c->pad, cpad, p, n, err)))
        return st;
    int k = 0;
    c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, c->src.m};
    c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, c->wei.m};
    c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_DST, c->dst.m};
    c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->pad.m};
    if (biasb >= 0) {
        if ((st = xd_mem_init(&c->bias, cbias, p, n, err))) return st;
        c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, c->bias.m};
    }
    if (azpb >= 0) {
        dnnl_memory_desc_t zmd;
        dnnl_memory_desc_init_by_tag(&zmd, 1, (dnnl_dims_t){1}, dnnl_s32, dnnl_a);
        if ((st = xd_mem_init(&c->azp, &zmd, p, n, err))) return st;
        c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, c->azp.m};
    }
    if (c->osc_b >= 0) { /* the chain's post-ops: 0 the scale, 1 the bias */
        if ((st = xd_mem_init(&c->osc, &c->osc_md, p, n, err))) return st;
        c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, c->osc.m};
    }
    if (c->po_bias_b >= 0) {
        if ((st = xd_mem_init(&c->po_bias, &c->po_bias_md, p, n, err))) return st;
        c->args[k++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, c->po_bias.m};
    }
    c->nargs = k;
    int nin = 2 + (biasb >= 0) + (azpb >= 0) + (c->osc_b >= 0) + (c->po_bias_b >= 0), j = 0;
    if ((st = xstep_alloc(s, nin, 1, err))) return st;
    s->in[j++] = xb;
    c->wei_in = j, s->in[j++] = wb;
    c->bias_in = biasb >= 0 ? j : -1;
    if (biasb >= 0) s->in[j++] = biasb;
    c->azp_in = azpb >= 0 ? j : -1;
    if (azpb >= 0) s->in[j++] = azpb;
    c->osc_in = c->osc_b >= 0 ? j : -1;
    if (c->osc_b >= 0) s->in[j++] = c->osc_b;
    c->po_bias_in = c->po_bias_b >= 0 ? j : -1;
    if (c->po_bias_b >= 0) s->in[j++] = c->po_bias_b;
    s->out[0] = yb;
    s->ref_impl = xd_pd_is_ref(pd);
    return TS_OK;
}

/* ------------------------------------------------------------ convolution */

static ts_status mm_pd(xplan *p, int n, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                       const dnnl_memory_desc_t *bias, const dnnl_memory_desc_t *dst, dnnl_primitive_attr_t attr,
                       dnnl_primitive_desc_t *pd)
{
    dnnl_matmul_desc_t d;
    (void)n;
    dnnl_status_t ds = dnnl_matmul_desc_init(&d, src, wei, bias, dst);
    if (ds == dnnl_success) ds = dnnl_primitive_desc_create(pd, &d, attr, p->engine, NULL);
    if (ds == dnnl_success && xd_pd_is_ref(*pd)) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        return TS_ERR_UNSUPPORTED;
    }
    return ds == dnnl_success ? TS_OK : TS_ERR_UNSUPPORTED;
}

/* A 1x1 convolution of a 1x1 image (the squeeze-excite gates of mobile
 * nets, a Gemm made a conv by fuse_qdq.c) is [N, C] x [C, M]: oneDNN's int8
 * convolutions answer these with their reference implementation, its
 * matmul with brgemm.  W [M, C] is read as [C, M] through strides. */
static ts_status gemv_conv_build(xplan *p, int n, xstep *s, dnnl_primitive_attr_t attr, const ts_tensor *W,
                                 const ts_tensor *B, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], M = W->shape.dims[0];
    dnnl_memory_desc_t src, wei, wplain, dst, bmd;
    dnnl_memory_desc_init_by_strides(&src, 2, (dnnl_dims_t){N, C}, dt_of(x->dtype), NULL);
    dnnl_memory_desc_init_by_strides(&wplain, 2, (dnnl_dims_t){C, M}, dnnl_s8, (dnnl_dims_t){1, C});
    dnnl_memory_desc_init_by_tag(&wei, 2, (dnnl_dims_t){C, M}, dnnl_s8, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_strides(&dst, 2, (dnnl_dims_t){N, M}, dt_of(y->dtype), NULL);
    dnnl_memory_desc_init_by_strides(&bmd, 2, (dnnl_dims_t){1, M}, dnnl_s32, NULL);
    dnnl_primitive_desc_t pd = NULL;
    ts_status st = mm_pd(p, n, &src, &wei, B ? &bmd : NULL, &dst, attr, &pd);
    if (st) return st;
    q_state *c = calloc(1, sizeof *c);
    if (!c) {
        dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    s->state = c;
    c->stream = p->stream;
    c->azp_in = c->bias_in = c->osc_in = c->po_bias_in = c->osc_b = c->po_bias_b = -1;
    int xb = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err), biasb = -1, yb = -1;
    int wb = xb >= 0 ? pack_const(p, n, W, &wplain, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), err) : -1;
    if (wb >= 0 && B && (biasb = bias_buf(p, &bmd, B, M)) < 0) wb = -1;
    if (wb >= 0) yb = xplan_value_buf(p, nd->outputs[0]);
    st = xb < 0 || wb < 0 || yb < 0 ? (err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory"))
                                    : finish(p, n, s, c, pd, xb, wb, biasb, -1, yb, err);
    dnnl_primitive_desc_destroy(pd);
    if (st) {
        q_destroy(c);
        s->state = NULL;
    }
    return st;
}

/* QLinearConv (qlinear) or ConvInteger. */
static ts_status conv_build(xplan *p, int n, xstep *s, bool qlinear, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const int wi = qlinear ? 3 : 1, wzi = qlinear ? 5 : 3, xzi = 2;
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    const ts_tensor *W = cin(p, nd, wi), *xz = cin(p, nd, xzi), *wz = cin(p, nd, wzi);
    int nsp = x->shape.rank - 2;
    if (nsp < 1 || nsp > 3 || !W || W->dtype != TS_I8 || (wz && !all_zero(wz)) || (!absent(nd, wzi) && !wz) ||
        (!absent(nd, xzi) && !xz) || (xz && ts_tensor_numel(xz) != 1))
        return TS_ERR_UNSUPPORTED;
    const ts_tensor *xs = NULL, *ws = NULL, *ys = NULL, *yz = NULL, *B = NULL;
    if (qlinear) {
        xs = cin(p, nd, 1), ws = cin(p, nd, 4), ys = cin(p, nd, 6), yz = cin(p, nd, 7), B = cin(p, nd, 8);
        if (!xs || !ws || !ys || !yz || (!absent(nd, 8) && !B)) return TS_ERR_UNSUPPORTED;
    }
    const ts_conv_attrs *ca = nd->attrs;
    ts_window_geom wg;
    char why[200];
    if (!ts_window_resolve(&ca->win, nsp, x->shape.dims + 2, W->shape.dims + 2, &wg, why, sizeof why))
        return TS_ERR_UNSUPPORTED;
    int64_t M = W->shape.dims[0], G = ca->group;
    dnnl_dims_t xd, yd, wd, st, dil, pl, pr;
    for (int i = 0; i < x->shape.rank; i++) xd[i] = x->shape.dims[i], yd[i] = y->shape.dims[i];
    int wr = W->shape.rank;
    if (G > 1) {
        wd[0] = G, wd[1] = M / G;
        for (int i = 1; i < wr; i++) wd[i + 1] = W->shape.dims[i];
        wr++;
    } else {
        for (int i = 0; i < wr; i++) wd[i] = W->shape.dims[i];
    }
    for (int i = 0; i < nsp; i++)
        st[i] = wg.stride[i], dil[i] = wg.dil[i] - 1, pl[i] = wg.pad_begin[i], pr[i] = wg.pad_end[i];
    dnnl_memory_desc_t src, wei, wplain, dst, bmd;
    dnnl_memory_desc_init_by_tag(&src, x->shape.rank, xd, dt_of(x->dtype), dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wei, wr, wd, dnnl_s8, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_strides(&wplain, wr, wd, dnnl_s8, NULL);
    dnnl_memory_desc_init_by_tag(&dst, y->shape.rank, yd, dt_of(y->dtype), dnnl_format_tag_any);
    if (B) dnnl_memory_desc_init_by_tag(&bmd, 1, (dnnl_dims_t){M}, dnnl_s32, dnnl_a);

    dnnl_primitive_attr_t attr;
    ts_status stt = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (stt) return stt;
    stt = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!stt) stt = src_zp_attr(p, n, attr, xz, false, err);
    if (!stt && qlinear) stt = requant_attr(p, n, attr, xs, ws, ys, yz, M, 1 << 1, err);
    bool gemv = G == 1;
    for (int i = 0; i < nsp; i++) gemv &= xd[2 + i] == 1 && wg.kernel[i] == 1 && !pl[i] && !pr[i];
    if (!stt && gemv) {
        stt = gemv_conv_build(p, n, s, attr, W, B, err);
        dnnl_primitive_attr_destroy(attr);
        return stt;
    }
    dnnl_primitive_desc_t pd = NULL;
    if (!stt) {
        dnnl_convolution_desc_t d;
        dnnl_status_t ds = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_convolution_direct,
                                                                      &src, &wei, B ? &bmd : NULL, &dst, st, dil, pl, pr);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &d, attr, p->engine, NULL);
        stt = ds == dnnl_success ? TS_OK : TS_ERR_UNSUPPORTED;
    }
    dnnl_primitive_attr_destroy(attr);
    if (stt || xd_pd_is_ref(pd)) {
        if (pd) dnnl_primitive_desc_destroy(pd);
        return stt && stt != TS_ERR_UNSUPPORTED ? stt : TS_ERR_UNSUPPORTED;
    }
    q_state *c = calloc(1, sizeof *c);
    if (!c) {
        dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    s->state = c;
    c->stream = p->stream;
    c->azp_in = c->bias_in = c->osc_in = c->po_bias_in = c->osc_b = c->po_bias_b = -1;
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int xb = xplan_value_buf(p, nd->inputs[0]);
    int wb = xb >= 0 ? pack_const(p, n, W, &wplain, cwei, err) : -1, biasb = -1, yb = -1;
    if (wb >= 0 && B && (biasb = bias_buf(p, &bmd, B, M)) < 0) wb = -1;
    if (wb >= 0) {
        dnnl_memory_desc_t plain;
        dnnl_memory_desc_init_by_strides(&plain, y->shape.rank, yd, dt_of(y->dtype), NULL);
        bool blocked = !dnnl_memory_desc_equal(cdst, &plain);
        /* a blocked graph output lives in the arena: the caller's tensor is plain */
        yb = blocked && ts_graph_is_output(g, nd->outputs[0]) ? xplan_new_buf(p, nd->outputs[0], y->dtype, &y->shape)
                                                             : xplan_value_buf(p, nd->outputs[0]);
        if (yb >= 0 && blocked) {
            xplan_bind_value(p, nd->outputs[0], yb);
            p->bufs[yb].blocked = true;
            p->bufs[yb].md = *cdst;
            p->bufs[yb].bytes = dnnl_memory_desc_get_size(cdst);
        }
    }
    ts_status r = wb < 0 || yb < 0 ? (err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory"))
                                   : finish(p, n, s, c, pd, xb, wb, biasb, -1, yb, err);
    dnnl_primitive_desc_destroy(pd);
    if (r) {
        q_destroy(c);
        s->state = NULL;
    }
    return r;
}

static ts_status qconv_build(xplan *p, int n, xstep *s, ts_error *err) { return conv_build(p, n, s, true, err); }
static ts_status convi_build(xplan *p, int n, xstep *s, ts_error *err) { return conv_build(p, n, s, false, err); }

/* ----------------------------------------------------------------- matmul */

/* Plain md of a right-aligned rank-r view of shape sh (1-D A a row, 1-D B a column). */
static void mm_md(dnnl_memory_desc_t *md, const ts_shape *sh, int r, bool is_b, dnnl_data_type_t dt)
{
    dnnl_dims_t d;
    for (int i = 0; i < r; i++) d[i] = 1;
    if (sh->rank == 1)
        d[is_b ? r - 2 : r - 1] = sh->dims[0];
    else
        for (int i = 0; i < sh->rank; i++) d[r - sh->rank + i] = sh->dims[i];
    dnnl_memory_desc_init_by_strides(md, r, d, dt, NULL);
}

/* quantize_dynamic's MatMulInteger -> Cast(float32) -> Mul(s) [-> Add(b)]
 * [-> Relu], s a float32 scalar (x_scale * w_scale, computed per run from
 * DynamicQuantizeLinear's scale), b a constant [N] bias, handed by the
 * lowering stage (lower_group.c, requant_chain): one oneDNN matmul writing
 * float32 with s, b and Relu as its post-ops (dyn_chain_attr).  The same
 * roundings: the int32 sum converted exactly (below 2^24, as the Cast),
 * times s rounded once, plus b rounded once, in float32 (ORT's
 * DynamicQuantizeMatMul fuses the same chain): bit-identical to the
 * unfused steps (test_lowering). */

/* The chain as post-ops on attr: times the scale (a run-time [1, .., 1]
 * operand: oneDNN 2.6's brgemm matmul declines run-time output scales and
 * its plain gemm took twice as long), plus the bias, Relu. */
static ts_status dyn_chain_attr(const xplan *p, int n, dnnl_primitive_attr_t attr, const xgroup *ch,
                                const dnnl_memory_desc_t *scale_md, const dnnl_memory_desc_t *bias_md, ts_error *err)
{
    dnnl_post_ops_t po;
    ts_status st = xd_check(dnnl_post_ops_create(&po), p, n, "post_ops", err);
    if (st) return st;
    st = xd_check(dnnl_post_ops_append_binary(po, dnnl_binary_mul, scale_md), p, n, "scale post-op", err);
    if (!st && ch->dyn_bias >= 0) st = xd_check(dnnl_post_ops_append_binary(po, dnnl_binary_add, bias_md), p, n, "bias post-op", err);
    if (!st && ch->dyn_relu)
        st = xd_check(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0), p, n, "relu post-op", err);
    if (!st) st = xd_check(dnnl_primitive_attr_set_post_ops(attr, po), p, n, "post_ops", err);
    dnnl_post_ops_destroy(po);
    return st;
}

/* QLinearMatMul (qlinear) or MatMulInteger. */
static ts_status mm_build(xplan *p, int n, xstep *s, bool qlinear, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const int bi = qlinear ? 3 : 1, azi = 2, bzi = qlinear ? 5 : 3;
    const ts_value *a = &g->values[nd->inputs[0]], *b = &g->values[nd->inputs[bi]], *y = &g->values[nd->outputs[0]];
    const ts_tensor *Bt = xplan_const(p, nd->inputs[bi]), *az = cin(p, nd, azi), *bz = cin(p, nd, bzi);
    bool az_runtime = !absent(nd, azi) && !az;
    if ((!absent(nd, bzi) && !bz) || (az && ts_tensor_numel(az) != 1) || a->shape.rank < 1 || b->shape.rank < 1)
        return TS_ERR_UNSUPPORTED;
    if (az_runtime && (qlinear || a->dtype != TS_U8 || ts_shape_numel(&g->values[nd->inputs[azi]].shape) != 1))
        return TS_ERR_UNSUPPORTED;
    /* B's zero point: 0 (constant weights), or one value for an activation
     * (then a u8 B is flipped to s8, its zero point less 128) */
    bool flip = b->dtype == TS_U8;
    int32_t bzv = bz ? (int32_t)ts_tensor_get_i64(bz, 0) : 0;
    if (bz && ts_tensor_numel(bz) != 1 && !all_zero(bz)) return TS_ERR_UNSUPPORTED;
    if (flip) bzv -= 128;
    if (Bt && flip) return TS_ERR_UNSUPPORTED; /* constant weights: int8 (a zero point goes to oneDNN) */
    const ts_tensor *as = NULL, *bs = NULL, *ys = NULL, *yz = NULL;
    if (qlinear) {
        as = cin(p, nd, 1), bs = cin(p, nd, 4), ys = cin(p, nd, 6), yz = cin(p, nd, 7);
        if (!as || !bs || !ys || !yz || ts_tensor_numel(as) != 1) return TS_ERR_UNSUPPORTED;
    }
    int r = a->shape.rank > b->shape.rank ? a->shape.rank : b->shape.rank;
    if (r < 2) r = 2;
    if (r > DNNL_MAX_NDIMS) return TS_ERR_UNSUPPORTED;
    dnnl_memory_desc_t src, wei, wplain, dst;
    ts_shape as2 = a->shape, ys2 = y->shape;
    int64_t N = b->shape.rank > 1 ? b->shape.dims[b->shape.rank - 1] : 1;
    if (Bt && b->shape.rank == 2 && a->shape.rank > 2) { /* one [rows, K] x [K, N] product */
        int64_t rows = ts_shape_numel(&a->shape) / a->shape.dims[a->shape.rank - 1];
        as2 = (ts_shape){.rank = 2, .dims = {rows, a->shape.dims[a->shape.rank - 1]}};
        ys2 = (ts_shape){.rank = 2, .dims = {rows, N}};
        r = 2;
    }
    mm_md(&src, &as2, r, false, dt_of(a->dtype));
    mm_md(&wplain, &b->shape, r, true, dnnl_s8);
    wei = wplain;
    if (Bt) dnnl_memory_desc_init_by_tag(&wei, r, wplain.dims, dnnl_s8, dnnl_format_tag_any);
    if (ys2.rank == y->shape.rank && ys2.rank == r)
        mm_md(&dst, &ys2, r, false, dt_of(y->dtype));
    else { /* 1-D operands: the dropped dimension is back in oneDNN's view */
        dnnl_dims_t dd;
        for (int i = 0; i < r - 2; i++) dd[i] = src.dims[i] > wplain.dims[i] ? src.dims[i] : wplain.dims[i];
        dd[r - 2] = src.dims[r - 2], dd[r - 1] = wplain.dims[r - 1];
        dnnl_memory_desc_init_by_strides(&dst, r, dd, dt_of(y->dtype), NULL);
    }
    /* MatMulInteger: the requantization after it the stage handed (none in its second choice) */
    const xgroup *ch = p->group;
    bool chain = ch && ch->dyn_scale >= 0;
    dnnl_memory_desc_t bias_md = {0}, scale_md = {0};
    if (chain) {
        dnnl_dims_t bd, one;
        for (int i = 0; i < r; i++) bd[i] = i == r - 1 ? N : 1, one[i] = 1;
        dnnl_memory_desc_init_by_strides(&bias_md, r, bd, dnnl_f32, NULL);
        dnnl_memory_desc_init_by_strides(&scale_md, r, one, dnnl_f32, NULL);
    }
    dnnl_primitive_desc_t pd = NULL;
    ts_status stt = TS_OK;
    { /* the chain as post-ops, or the int32 sums alone; oneDNN refusing the post-ops declines the choice */
        dnnl_primitive_attr_t attr;
        if ((stt = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err))) return stt;
        stt = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
        if (!stt) stt = src_zp_attr(p, n, attr, az, az_runtime, err);
        if (!stt && bzv)
            stt = xd_check(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_WEIGHTS, 1, 0, &bzv), p, n, "weights zero point", err);
        if (!stt && qlinear) stt = requant_attr(p, n, attr, as, bs, ys, yz, N, 1 << (r - 1), err);
        if (!stt && chain) stt = dyn_chain_attr(p, n, attr, ch, &scale_md, &bias_md, err);
        dst.data_type = chain ? dnnl_f32 : dt_of(y->dtype);
        if (!stt) stt = mm_pd(p, n, &src, &wei, NULL, &dst, attr, &pd);
        dnnl_primitive_attr_destroy(attr);
    }
    if (stt) return stt;
    q_state *c = calloc(1, sizeof *c);
    if (!c) {
        dnnl_primitive_desc_destroy(pd);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    s->state = c;
    c->stream = p->stream;
    c->azp_in = c->bias_in = c->osc_in = c->po_bias_in = c->osc_b = c->po_bias_b = -1;
    int xb = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err), wb = -1, yb = -1, zb = -1;
    if (xb >= 0 && Bt)
        wb = pack_const(p, n, Bt, &wplain, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), err);
    else if (xb >= 0) {
        wb = xplan_plain(p, xplan_value_buf(p, nd->inputs[bi]), err);
        if (flip) c->b_bytes = ts_shape_numel(&b->shape);
    }
    if (az_runtime && wb >= 0 && (zb = xplan_plain(p, xplan_value_buf(p, nd->inputs[azi]), err)) < 0) wb = -1;
    if (chain && wb >= 0) {
        c->osc_b = xplan_plain(p, xplan_value_buf(p, ch->dyn_scale), err);
        c->po_bias_b = ch->dyn_bias >= 0 ? xplan_value_buf(p, ch->dyn_bias) : -1;
        c->po_bias_md = bias_md;
        c->osc_md = scale_md;
        if (c->osc_b < 0 || (ch->dyn_bias >= 0 && c->po_bias_b < 0)) wb = -1;
    }
    if (wb >= 0) yb = xplan_value_buf(p, chain ? ch->y : nd->outputs[0]);
    ts_status rr = xb < 0 || wb < 0 || yb < 0 ? (err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory"))
                                              : finish(p, n, s, c, pd, xb, wb, -1, zb, yb, err);
    dnnl_primitive_desc_destroy(pd);
    if (rr) {
        q_destroy(c);
        s->state = NULL;
    }
    return rr;
}

static ts_status qmm_build(xplan *p, int n, xstep *s, ts_error *err) { return mm_build(p, n, s, true, err); }
static ts_status mmi_build(xplan *p, int n, xstep *s, ts_error *err) { return mm_build(p, n, s, false, err); }

const xkernel xk_dnnl_qconv = {"dnnl.qconv", qconv_build, q_run, q_destroy};
const xkernel xk_dnnl_conv_integer = {"dnnl.conv_integer", convi_build, q_run, q_destroy};
const xkernel xk_dnnl_qmatmul = {"dnnl.qmatmul", qmm_build, q_run, q_destroy};
const xkernel xk_dnnl_matmul_integer = {"dnnl.matmul_integer", mmi_build, q_run, q_destroy};
