/* ConvTranspose (2-D, group 1) as one GEMM and a col2im gather, the way
 * ONNX Runtime runs it, instead of oneDNN's deconvolution.
 *
 * With the input read as X[n*h*w, Cin] (NHWC rows; a plain NCHW input is
 * read transposed through strides) and the weights W[Cin, Cout, kh, kw]
 * repacked at plan time to W'[Cin, (ki, kj, co)] with any following
 * BatchNormalization scale folded in:
 *
 *     cols[n*h*w, (ki, kj, co)] = X x W'     (oneDNN matmul, W' pre-packed)
 *     y[n, oh, ow, co] = act(bias[co] + sum of cols[n, ih, iw, ki, kj, co]
 *                            over oh = ih*s - pad + ki*d, same for ow)
 *
 * The gather writes every output once (no zero fill, no scatter races),
 * vectorized over the contiguous co, with bias, folded BN shift and the
 * activation applied in the same pass.  The result is left NHWC (a
 * "blocked" buffer with oneDNN's nhwc md), which is what the next
 * transposed convolution reads as its GEMM operand without any copy; a
 * graph output or a plain-layout plan is written plain NCHW through a
 * per-thread row buffer.  A narrow Cout (< 8) goes "planar" instead:
 * colsT[(ki, kj, co), h*w] = W''[(ki, kj, co), Cin] x X[Cin, h*w] per
 * image, and the gather adds whole input rows onto every s-th pixel of an
 * NCHW output row.
 *
 * Why: at batch 1 the generators' layers (DCGAN, InfoGAN) have tiny inputs
 * (1x1 to 32x32) and many channels; oneDNN 2.6 runs its deconvolution as a
 * backward-data convolution whose blocking is made for large images.  The
 * per-shape rule deciding between this kernel and dnnl.deconv is at
 * use_gemm() with the measurements behind it. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "exec/plan_internal.h"
#include "vec/vec.h"
#include "vec/vec_post.h"
#include "ops/attrs.h"

typedef struct dg_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, wei, dst, pad;
    dnnl_exec_arg_t args[6];
    int nargs;
    int64_t N, H, W, F, OH, OW, kh, kw;
    bool has_bias, nhwc_out;
    /* planar (narrow Cout): cols is [(ki, kj, co), h*w] per image, from
     * W''[(ki, kj, co), Cin] x X[Cin, h*w], and the gather walks input rows */
    bool planar;
    size_t img_in;     /* bytes of one input image */
    int64_t *kj_span;  /* planar, per kj: first iw, count, its ow */
    int64_t sw;
    size_t cols_off, rows_off; /* scratch offsets of cols and the row buffers */
    int threads;
    int64_t *off_h, *off_w; /* dg_taps */
    int32_t *cnt_h, *cnt_w;
    xd_po po[XD_MAX_FUSE];
    int npo;
} dg_state;

static void dg_destroy(void *state)
{
    dg_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    free(c->off_h);
    free(c->off_w);
    free(c->cnt_h);
    free(c->cnt_w);
    free(c->kj_span);
    free(c);
}

/* Taps of one spatial dim: for each output coordinate o, the kernel
 * offsets k and input coordinates i with o = i*s - pad + k*d, as offsets
 * into cols (i*istride + k*kstride), at most k of them.  Built once, so
 * the gather does no division and tests no bounds. */
static int64_t *dg_taps(int64_t out, int64_t in, int64_t k, int64_t s, int64_t d, int64_t pad, int64_t istride,
                        int64_t kstride, int32_t **count)
{
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(out * k));
    *count = malloc(sizeof(int32_t) * (size_t)out);
    if (!off || !*count) {
        free(off);
        free(*count);
        *count = NULL;
        return NULL;
    }
    for (int64_t o = 0; o < out; o++) {
        int32_t nt = 0;
        for (int64_t j = 0; j < k; j++) {
            int64_t t = o + pad - j * d;
            if (t < 0 || t % s || t / s >= in) continue;
            off[o * k + nt++] = t / s * istride + j * kstride;
        }
        (*count)[o] = nt;
    }
    return off;
}

/* One output row (n, oh): every pixel gathers its (about (k/s)^2)
 * contributions from cols.  Rows are independent: one thread each. */
XV_CLONES static void dg_col2im(const dg_state *c, const float *cols, const float *bias, float *y, float *rows)
{
    const int64_t F = c->F, OH = c->OH, OW = c->OW;
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (int64_t r = 0; r < c->N * OH; r++) {
        const int64_t n = r / OH, oh = r % OH;
        float *row = c->nhwc_out ? y + r * OW * F : rows + (size_t)omp_get_thread_num() * (size_t)(OW * F);
        const float *cn = cols + n * c->H * c->W * c->kh * c->kw * F;
        const int64_t *toh = c->off_h + oh * c->kh;
        const int32_t nh = c->cnt_h[oh];
        for (int64_t ow = 0; ow < OW; ow++) {
            float *acc = row + ow * F;
            const int64_t *tow = c->off_w + ow * c->kw;
            const int32_t nw = c->cnt_w[ow];
            if (bias)
                memcpy(acc, bias, sizeof(float) * (size_t)F);
            else
                memset(acc, 0, sizeof(float) * (size_t)F);
            for (int32_t a = 0; a < nh; a++)
                for (int32_t b = 0; b < nw; b++) {
                    const float *src = cn + toh[a] + tow[b];
#pragma omp simd
                    for (int64_t k = 0; k < F; k++) acc[k] += src[k];
                }
            xv_post_apply(c->po, c->npo, acc, F);
        }
        if (!c->nhwc_out) /* NHWC row -> NCHW: contiguous writes, reads from L1/L2 */
            for (int64_t k = 0; k < F; k++) {
                float *dst = y + ((n * F + k) * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ow++) dst[ow] = row[ow * F + k];
            }
    }
}

/* Planar gather, one output row (n, co, oh) at a time: for each tap row
 * (ki, ih) and each kj, a contiguous input row of cols lands on every
 * s-th output pixel.  Branch-free inner loops over rows that stay in L1. */
XV_CLONES static void dg_col2im_planar(const dg_state *c, const float *cols, const float *bias, float *y, int64_t n)
{
    const int64_t F = c->F, OH = c->OH, OW = c->OW, HW = c->H * c->W, sw = c->sw;
#pragma omp parallel for num_threads(c->threads) schedule(static)
    for (int64_t r = 0; r < F * OH; r++) {
        const int64_t co = r / OH, oh = r % OH;
        float *orow = y + (n * F * OH + r) * OW;
        const float *cn = cols + co * HW;
        const float b0 = bias ? bias[co] : 0.0f;
        for (int64_t ow = 0; ow < OW; ow++) orow[ow] = b0;
        const int64_t *toh = c->off_h + oh * c->kh;
        for (int32_t a = 0; a < c->cnt_h[oh]; a++)
            for (int64_t kj = 0; kj < c->kw; kj++) {
                const int64_t *sp = c->kj_span + 3 * kj;
                const float *src = cn + toh[a] + kj * F * HW + sp[0];
                float *dst = orow + sp[2];
                for (int64_t i = 0; i < sp[1]; i++) dst[i * sw] += src[i];
            }
        xv_post_apply(c->po, c->npo, orow, OW);
    }
}

static void dg_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    dg_state *c = s->state;
    float *cols = (float *)((char *)scratch + c->cols_off);
    const float *bias = c->has_bias ? in[2] : NULL;
    if (c->planar) {
        xd_mem_bind(&c->src, in[1], c->stream);
        xd_mem_bind(&c->pad, scratch, c->stream);
        xd_mem_bind(&c->dst, cols, c->stream);
        for (int64_t n = 0; n < c->N; n++) { /* per image (the weights operand is the image): cols stays small */
            xd_mem_bind(&c->wei, (char *)in[0] + n * c->img_in, c->stream);
            dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
            dnnl_stream_wait(c->stream);
            dg_col2im_planar(c, cols, bias, out[0], n);
        }
        return;
    }
    xd_mem_bind(&c->src, in[0], c->stream);
    xd_mem_bind(&c->wei, in[1], c->stream);
    xd_mem_bind(&c->dst, cols, c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    dnnl_stream_wait(c->stream);
    dg_col2im(c, cols, bias, out[0], (float *)((char *)scratch + c->rows_off));
}

/* Stride, dilation and leading pad per spatial dim (the trailing pad and
 * output_padding only decide the output size, which the graph has). */
static bool dg_geom(const ts_convt_attrs *ta, const ts_shape *x, const ts_shape *w, int64_t *s, int64_t *d,
                    int64_t *pb)
{
    ts_window_geom g;
    char why[256];
    if (!ts_convt_geom(ta, x, w, NULL, &g, why, sizeof why)) return false; /* the reference kernel reports it */
    for (int i = 0; i < 2; i++) {
        s[i] = g.stride[i];
        d[i] = g.dil[i];
        pb[i] = g.pad_begin[i];
    }
    return true;
}

/* This kernel or oneDNN's deconvolution for a shape.  Measured (2
 * threads, AMD EPYC AVX-512, machine loaded, medians of 30; each layer
 * with BN+Relu, this kernel vs dnnl.deconv, ms):
 *   DCGAN   100->1024 1x1 0.14 vs 0.73 | 1024->512 4x4 1.8 vs 4.6
 *           512->256  8x8 1.5 vs 4.7   | 256->128 16x16 0.88 vs 3.2
 *           128->3 32x32 0.11 vs 1.7
 *   InfoGAN 228->448 1x1 0.13 vs 0.28  | 448->256 4x4 0.24 vs 0.64
 *           256->128 8x8 0.28 vs 2.2   | 128->64 16x16 0.33 vs 1.5
 *           64->3 32x32 0.08 vs 1.5
 *   FSRCNN  56->1 256x256 k9 s2 (graph output) 17-25 vs 25-30 (oneDNN's
 *           x64:gemm:jit on plain layouts, its best there)
 * so it is taken for every 2-D group-1 shape, except when the column
 * buffer would pass 256 MiB (oneDNN then needs none).  TSOPT_DECONV=gemm
 * or =dnnl forces one (A/B measurement, tests). */
static bool use_gemm(size_t cols_bytes)
{
    const char *force = getenv("TSOPT_DECONV");
    if (force && !strcmp(force, "gemm")) return true;
    if (force && !strcmp(force, "dnnl")) return false;
    return cols_bytes <= ((size_t)256 << 20);
}

static ts_status dg_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_convt_attrs *ta = nd->attrs;
    int xv = nd->inputs[0], wv = nd->inputs[1], bv = nd->ninputs > 2 ? nd->inputs[2] : -1, yv = nd->outputs[0];
    const ts_tensor *Wt = xplan_const(p, wv), *Bt = bv >= 0 ? xplan_const(p, bv) : NULL;
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    if (!Wt || (bv >= 0 && !Bt) || g->values[xv].dtype != TS_F32 || Wt->dtype != TS_F32 || xs->rank != 4 ||
        ta->group != 1)
        return TS_ERR_UNSUPPORTED;
    const int64_t N = xs->dims[0], C = xs->dims[1], H = xs->dims[2], W = xs->dims[3], F = ys->dims[1],
                  OH = ys->dims[2], OW = ys->dims[3], kh = Wt->shape.dims[2], kw = Wt->shape.dims[3];
    const int64_t KF = kh * kw * F, M = N * H * W;
    /* narrow Cout (last layers: 1-3 channels): the NHWC gather would add
     * vectors of a few floats from scattered places; the planar one streams
     * input rows instead (FSRCNN's 56->1 k9: 30 -> 5 ms of gather) */
    const bool planar = F < 8;
    if (!use_gemm(sizeof(float) * (size_t)((planar ? H * W : M) * KF))) return TS_ERR_UNSUPPORTED;
    int64_t st_[2], dl[2], pb[2];
    if (!dg_geom(ta, xs, &Wt->shape, st_, dl, pb)) return TS_ERR_UNSUPPORTED;

    /* the post-op tail the lowering stage handed (lower_post.c); post-ops
     * vec_post.c does not apply: declined, then the affine folds alone
     * are offered (the rest runs as its own steps) */
    xd_fuse f = p->group->post;
    ts_status st;
    if (!xv_post_supported(&f)) return TS_ERR_UNSUPPORTED;

    /* input: NHWC as left by this kernel is the GEMM operand as is;
     * anything else is made plain NCHW (after the primitive is known to be
     * usable: declining must not leave a reorder behind) and read
     * transposed; with one pixel plain is NHWC too */
    xbuf scratch;
    const xbuf *x = xplan_value_layout(p, xv, &scratch); /* X's buffer made once the primitive is usable */
    dnnl_memory_desc_t nhwc_in, src, wei, dst;
    dnnl_dims_t xd4 = {N, C, H, W};
    dnnl_memory_desc_init_by_tag(&nhwc_in, 4, xd4, dnnl_f32, dnnl_nhwc);
    bool keep_in = x->blocked && dnnl_memory_desc_equal(&x->md, &nhwc_in);
    bool in_nhwc = keep_in || H * W == 1;
    if (planar) {
        dnnl_dims_t sd = {KF, C}, wd = {C, H * W}, ws = {in_nhwc ? 1 : H * W, in_nhwc ? C : 1}, dd = {KF, H * W};
        dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_f32, dnnl_ab);
        dnnl_memory_desc_init_by_strides(&wei, 2, wd, dnnl_f32, ws);
        dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    } else if (in_nhwc || N == 1) {
        dnnl_dims_t sd = {M, C}, ss = {in_nhwc ? C : 1, in_nhwc ? 1 : H * W}, wd = {C, KF}, dd = {M, KF};
        dnnl_memory_desc_init_by_strides(&src, 2, sd, dnnl_f32, ss);
        dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    } else {
        dnnl_dims_t sd = {N, H * W, C}, ss = {C * H * W, 1, H * W}, wd = {1, C, KF}, dd = {N, H * W, KF};
        dnnl_memory_desc_init_by_strides(&src, 3, sd, dnnl_f32, ss);
        dnnl_memory_desc_init_by_tag(&wei, 3, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&dst, 3, dd, dnnl_f32, dnnl_abc);
    }
    const int wrank = in_nhwc || N == 1 ? 2 : 3;

    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dg_state *c = NULL;
    float *wplain = NULL;
    void *wpacked = NULL;
    st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (!st)
        st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad",
                      err);
    if (!st) {
        dnnl_matmul_desc_t md;
        dnnl_status_t ds = dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &md, attr, p->engine, NULL);
        st = xd_check(ds, p, n, "matmul", err);
    }
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!st && xd_pd_is_ref(pd)) st = TS_ERR_UNSUPPORTED; /* dnnl.deconv will do better */
    if (st) goto fail;
    int xb = xplan_value_buf(p, xv);
    if (xb < 0) goto nomem;
    if (!keep_in && (xb = xplan_plain(p, xb, err)) < 0) {
        st = err->code ? err->code : TS_ERR_NOMEM;
        if (!err->code) goto nomem;
        goto fail;
    }

    if (!(c = calloc(1, sizeof *c))) goto nomem;
    s->state = c;
    c->stream = p->stream;
    c->N = N, c->H = H, c->W = W, c->F = F, c->OH = OH, c->OW = OW, c->kh = kh, c->kw = kw;
    c->threads = xv_threads(p);
    c->planar = planar;
    c->img_in = sizeof(float) * (size_t)(C * H * W);
    if (planar) {
        c->off_h = dg_taps(OH, H, kh, st_[0], dl[0], pb[0], W, kw * F * H * W, &c->cnt_h);
        if (!c->off_h || !(c->kj_span = calloc((size_t)(3 * kw), sizeof(int64_t)))) goto nomem;
        for (int64_t kj = 0; kj < kw; kj++) { /* iw with 0 <= iw*s - pad + kj*d < OW: a range */
            int64_t *sp = c->kj_span + 3 * kj;
            for (int64_t iw = 0; iw < W; iw++) {
                int64_t ow = iw * st_[1] - pb[1] + kj * dl[1];
                if (ow < 0 || ow >= OW) continue;
                if (!sp[1]) sp[0] = iw, sp[2] = ow;
                sp[1]++;
            }
        }
        c->sw = st_[1];
    } else {
        c->off_h = dg_taps(OH, H, kh, st_[0], dl[0], pb[0], W * KF, kw * F, &c->cnt_h);
        c->off_w = dg_taps(OW, W, kw, st_[1], dl[1], pb[1], KF, F, &c->cnt_w);
        if (!c->off_h || !c->off_w) goto nomem;
    }
    c->npo = f.npo;
    memcpy(c->po, f.po, sizeof c->po);
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if ((st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err))) goto fail;

    /* weights: [Cin, Cout, kh, kw] -> [Cin, (ki, kj, co)] with the BN scale,
     * then packed; planar: [(ki, kj, co), Cin], plain.  The reorder is made
     * first: from then on nothing declines, and a weight the plan releases
     * after this node (weights_once.c) gives its pages back row by row as
     * they are rearranged (dcgan's 33.5 MB weight sat three times at the
     * lowering's peak, original, rearranged and packed; issue 27) */
    dnnl_memory_desc_t wsrc;
    dnnl_dims_t wd2 = {C, KF}, wd3 = {1, C, KF};
    dnnl_memory_desc_init_by_tag(&wsrc, wrank, wrank == 2 ? wd2 : wd3, dnnl_f32, wrank == 2 ? dnnl_ab : dnnl_abc);
    xd_reorder rr;
    memset(&rr, 0, sizeof rr);
    if (!planar && (st = xd_reorder_init(&rr, &wsrc, cwei, p, n, err))) {
        xd_reorder_fini(&rr);
        goto fail;
    }
    bool consume = !planar && xweights_once_consumable(p, wv, n);
    if (Wt->nbytes >= XWEIGHTS_RELEASE_CODE_BYTES) xplan_release_code(p);
    if (!(wplain = xd_alloc(sizeof(float) * (size_t)(C * KF)))) {
        xd_reorder_fini(&rr);
        goto nomem;
    }
    const float *w0 = Wt->data;
    uintptr_t next = (uintptr_t)w0;
    for (int64_t ci = 0; ci < C; ci++) {
        for (int64_t co = 0; co < F; co++)
            for (int64_t k = 0; k < kh * kw; k++)
                wplain[planar ? (k * F + co) * C + ci : ci * KF + k * F + co] =
                    w0[(ci * F + co) * kh * kw + k] * (f.scale ? f.scale[co] : 1.0f);
        if (consume) xweights_drop_pages(&next, (uintptr_t)(w0 + (ci + 1) * F * kh * kw));
    }
    int wb;
    if (planar) {
        if ((wb = xd_const_buf(p, &src, &Wt->shape, wplain)) < 0) goto nomem;
        wplain = NULL;
        goto weights_done;
    }
    if (!(wpacked = xd_alloc(dnnl_memory_desc_get_size(cwei)))) {
        xd_reorder_fini(&rr);
        goto nomem;
    }
    xd_reorder_run(&rr, wplain, wpacked, p->stream);
    dnnl_stream_wait(p->stream);
    xd_reorder_fini(&rr);
    free(wplain);
    wplain = NULL;
    if ((wb = xd_const_buf(p, cwei, &Wt->shape, wpacked)) < 0) goto nomem;
    wpacked = NULL;
weights_done:;

    int bb = -1;
    if (Bt || f.scale) {
        float *b = xd_alloc(sizeof(float) * (size_t)F);
        if (!b) goto nomem;
        for (int64_t o = 0; o < F; o++) {
            float v = Bt ? ((const float *)Bt->data)[o] : 0.0f;
            b[o] = f.scale ? v * f.scale[o] + f.shift[o] : v;
        }
        ts_shape bs = {.rank = 1, .dims = {F}};
        dnnl_memory_desc_t bmd;
        xd_md_plain(&bmd, &bs);
        if ((bb = xd_const_buf(p, &bmd, &bs, b)) < 0) {
            free(b);
            goto nomem;
        }
    }

    /* output layout: NHWC inside the model when the channels fill vectors */
    c->nhwc_out = !planar && !p->opts.plain_layout && !ts_graph_is_output(g, f.out_value) && F >= 16;
    int yb = xplan_value_buf(p, f.out_value);
    if (yb < 0) goto nomem;
    if (c->nhwc_out) {
        dnnl_dims_t yd = {N, F, OH, OW};
        xplan_bind_value(p, f.out_value, yb);
        p->bufs[yb].blocked = true;
        dnnl_memory_desc_init_by_tag(&p->bufs[yb].md, 4, yd, dnnl_f32, dnnl_nhwc);
        p->bufs[yb].bytes = dnnl_memory_desc_get_size(&p->bufs[yb].md);
    }
    size_t padsz = xd_round(dnnl_memory_desc_get_size(cpad));
    c->cols_off = padsz;
    c->rows_off = padsz + xd_round(sizeof(float) * (size_t)((planar ? H * W : M) * KF));
    size_t rows = c->nhwc_out || planar ? 0 : xd_round(sizeof(float) * (size_t)(c->threads * OW * F));
    s->scratch_bytes = c->rows_off + rows;

    if ((st = xstep_alloc(s, 2 + (bb >= 0), 1, err))) goto fail;
    s->in[0] = xb;
    s->in[1] = wb;
    if (bb >= 0) s->in[2] = bb;
    s->out[0] = yb;
    c->has_bias = bb >= 0;
    const xd_weighted w = {&c->src, &c->wei, &c->dst, &c->pad, NULL};
    if ((st = xd_weighted_init(&w, &src, planar ? &wei : cwei, &dst, cpad, NULL, p, n, c->args, &c->nargs, err)))
        goto fail;
    dnnl_primitive_desc_destroy(pd);
    return TS_OK;

nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "node '%s' (%s): out of memory building the GEMM deconvolution", nd->name,
                      nd->op->name);
fail:
    free(wplain);
    free(wpacked);
    if (pd) dnnl_primitive_desc_destroy(pd);
    dg_destroy(c);
    s->state = NULL;
    return st;
}

const xkernel xk_deconv_gemm = {"deconv.gemm", dg_build, dg_run, dg_destroy};
