/* A convolution whose stride equals its kernel, without padding or
 * dilation, on few input channels (ViT's 16x16 patch embedding of an RGB
 * image, Swin's and ConvNeXt's 4x4 stems): the patches do not overlap, so
 * the conv is exactly a product of the patches (one row per output pixel,
 * C x KH x KW values in the weight's order) by the weight viewed as
 * [O][C x KH x KW], plus the bias.  The step copies the patches into rows
 * (each input element once) and runs oneDNN's matmul on them, writing the
 * output channels-last (row m = pixel (n, oh, ow)).
 *
 * Why: oneDNN 2.6's brgconv reduces over the input channels inside each
 * tap, 3 of them here, a fraction of one vector: ViT-B/16's patch conv ran
 * at 30 % of the FMA roofline (1.85 ms, loaded, Intel Xeon, 12-07) where a
 * product of the same 196 x 768 x 768 reduces over 768 values per call.
 * TSOPT_SKIP=dnnl.patch leaves it to dnnl.conv. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "exec/plan_internal.h"
#include "ops/attrs.h"
#include "ops/window.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"

typedef struct pt_state {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    xd_mem src, wei, bias, dst, pad;
    dnnl_exec_arg_t args[6];
    int nargs;
    bool has_bias;
    int64_t N, C, OH, OW, KH, KW, K;
    int64_t xs[4];  /* the input's element strides per logical dim (n, c, h, w) */
    size_t col_off; /* the rows' offset in the scratch (after oneDNN's) */
    int threads;
} pt_state;

static void pt_destroy(void *state)
{
    pt_state *c = state;
    if (!c) return;
    if (c->prim) dnnl_primitive_destroy(c->prim);
    xd_mem_fini(&c->src);
    xd_mem_fini(&c->wei);
    xd_mem_fini(&c->bias);
    xd_mem_fini(&c->dst);
    xd_mem_fini(&c->pad);
    free(c);
}

/* Rows r0..r1 of the patch matrix: row (n, oh, ow), column (c, kh, kw). */
static void pt_rows(const pt_state *c, const float *x, float *col, int64_t r0, int64_t r1)
{
    const int64_t sn = c->xs[0], sc = c->xs[1], sh = c->xs[2], sw = c->xs[3];
    for (int64_t m = r0; m < r1; m++) {
        const int64_t n = m / (c->OH * c->OW), oh = m / c->OW % c->OH, ow = m % c->OW;
        float *dst = col + m * c->K;
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t kh = 0; kh < c->KH; kh++) {
                const float *src = x + n * sn + ch * sc + (oh * c->KH + kh) * sh + ow * c->KW * sw;
                float *d = dst + (ch * c->KH + kh) * c->KW;
                if (sw == 1)
                    memcpy(d, src, sizeof(float) * (size_t)c->KW);
                else
                    for (int64_t kw = 0; kw < c->KW; kw++) d[kw] = src[kw * sw];
            }
    }
}

static void pt_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    pt_state *c = s->state;
    float *col = (float *)((char *)scratch + c->col_off);
    const int64_t M = c->N * c->OH * c->OW;
    if (c->threads > 1 && XV_SPLITS(c->threads, M * c->K * 8)) {
#pragma omp parallel num_threads(c->threads)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            pt_rows(c, in[0], col, M * t / nt, M * (t + 1) / nt);
        }
    } else {
        pt_rows(c, in[0], col, 0, M);
    }
    xd_mem_bind(&c->src, col, c->stream);
    xd_mem_bind(&c->wei, in[1], c->stream);
    if (c->has_bias) xd_mem_bind(&c->bias, in[2], c->stream);
    xd_mem_bind(&c->dst, out[0], c->stream);
    xd_mem_bind(&c->pad, scratch, c->stream);
    dnnl_primitive_execute(c->prim, c->stream, c->nargs, c->args);
    dnnl_stream_wait(c->stream);
}

/* Input channels below one 16-float vector: where brgconv's reduction per
 * tap is a fraction of a vector (the case measured; deeper inputs keep
 * dnnl.conv, which reduces over their channels well).  And a product that
 * reduces over at least PT_MIN_REDUCTION values, so that it amortizes its
 * tile loads and stores and the copy into rows: in-process A/B per step
 * (`tsopt profile M --against-skip dnnl.patch --iters 40 --min`, 2 threads,
 * Intel Xeon, load 8), ViT-B/16's 3 x 16 x 16 = 768: 0.88-0.90 of
 * dnnl.conv's time; ConvNeXt's and Swin's 4x4 stems, 3 x 4 x 4 = 48 over
 * 56 x 56 pixels: 1.32 and 1.20, left to dnnl.conv. */
#define PT_MAX_CHANNELS 15
#define PT_MIN_REDUCTION 256

static ts_status pt_build(xplan *p, int n, xstep *s, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    if (p->opts.plain_layout || nd->ninputs < 2 || nd->noutputs != 1 || !xv_all_f32(p, n)) return TS_ERR_UNSUPPORTED;
    int xv = nd->inputs[0], wv = nd->inputs[1], bv = nd->ninputs > 2 ? nd->inputs[2] : -1, yv = nd->outputs[0];
    const ts_tensor *W = xplan_const(p, wv), *B = bv >= 0 ? xplan_const(p, bv) : NULL;
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    const ts_conv_attrs *ca = nd->attrs;
    if (!W || !W->data || W->dtype != TS_F32 || (bv >= 0 && (!B || !B->data || B->dtype != TS_F32)) || xs->rank != 4 ||
        ys->rank != 4 || W->shape.rank != 4 || ca->group != 1 || ts_graph_is_output(g, yv))
        return TS_ERR_UNSUPPORTED;
    const int64_t C = xs->dims[1], O = W->shape.dims[0], KH = W->shape.dims[2], KW = W->shape.dims[3];
    if (C > PT_MAX_CHANNELS || C * KH * KW < PT_MIN_REDUCTION || W->shape.dims[1] != C || ys->dims[1] != O)
        return TS_ERR_UNSUPPORTED;
    ts_window_geom wg;
    char why[256];
    if (!ts_window_resolve(&ca->win, 2, xs->dims + 2, W->shape.dims + 2, &wg, why, sizeof why)) return TS_ERR_UNSUPPORTED;
    if (wg.stride[0] != KH || wg.stride[1] != KW || wg.dil[0] != 1 || wg.dil[1] != 1 || wg.pad_begin[0] ||
        wg.pad_begin[1] || wg.pad_end[0] || wg.pad_end[1] || ys->dims[2] != xs->dims[2] / KH ||
        ys->dims[3] != xs->dims[3] / KW)
        return TS_ERR_UNSUPPORTED;
    xbuf scratch; /* X's layout decided before the plan is touched: a dense order, not blocks */
    int order[TS_MAX_RANK];
    const xbuf *xl = xplan_value_layout(p, xv, &scratch);
    if (xl->blocked || !xbuf_dense_order(xl, order)) return TS_ERR_UNSUPPORTED;

    const int64_t N = xs->dims[0], OH = ys->dims[2], OW = ys->dims[3], M = N * OH * OW, K = C * KH * KW;
    dnnl_memory_desc_t src, wei, wsrc, dst, bmd;
    dnnl_memory_desc_init_by_tag(&src, 2, (dnnl_dims_t){M, K}, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&wei, 2, (dnnl_dims_t){K, O}, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wsrc, 2, (dnnl_dims_t){K, O}, dnnl_f32, dnnl_ba); /* W as [O][K]: transposed */
    dnnl_memory_desc_init_by_tag(&dst, 2, (dnnl_dims_t){M, O}, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bmd, 2, (dnnl_dims_t){1, O}, dnnl_f32, dnnl_ab);
    dnnl_primitive_attr_t attr;
    ts_status st = xd_check(dnnl_primitive_attr_create(&attr), p, n, "attr_create", err);
    if (st) return st;
    dnnl_primitive_desc_t pd = NULL;
    st = xd_check(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), p, n, "scratchpad", err);
    if (!st) {
        dnnl_matmul_desc_t d;
        dnnl_status_t ds = dnnl_matmul_desc_init(&d, &src, &wei, B ? &bmd : NULL, &dst);
        if (ds == dnnl_success) ds = dnnl_primitive_desc_create(&pd, &d, attr, p->engine, NULL);
        st = xd_check(ds, p, n, "matmul", err);
    }
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;
    if (xd_pd_is_ref(pd)) { /* no fast product: dnnl.conv keeps it */
        dnnl_primitive_desc_destroy(pd);
        return TS_ERR_UNSUPPORTED;
    }
    /* nothing declines from here on */
    pt_state *c = calloc(1, sizeof *c);
    void *wpacked = NULL;
    if (!c) goto nomem;
    s->state = c;
    *c = (pt_state){.stream = p->stream, .N = N, .C = C, .OH = OH, .OW = OW, .KH = KH, .KW = KW, .K = K,
                    .has_bias = B != NULL, .threads = xv_threads(p)};
    /* the input's strides per logical dim from its dense order */
    int64_t acc = 1;
    for (int i = 3; i >= 0; i--) {
        c->xs[order[i]] = acc;
        acc *= xs->dims[order[i]];
    }
    if ((st = xd_check(dnnl_primitive_create(&c->prim, pd), p, n, "primitive_create", err))) goto fail;
    const dnnl_memory_desc_t *cwei = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *cpad = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (!(wpacked = xd_alloc(dnnl_memory_desc_get_size(cwei)))) goto nomem;
    if ((st = xweights_pack(p, n, W->data, W->nbytes, &wsrc, cwei, wpacked, false, NULL, NULL, err))) goto fail;
    ts_shape ws = W->shape;
    int wb = xd_const_buf(p, cwei, &ws, wpacked), bb = -1;
    if (wb < 0) goto nomem;
    wpacked = NULL;
    if (B) {
        float *b = xd_alloc(sizeof(float) * (size_t)O);
        if (!b) goto nomem;
        memcpy(b, B->data, sizeof(float) * (size_t)O);
        ts_shape bs = {.rank = 1, .dims = {O}};
        if ((bb = xd_const_buf(p, &bmd, &bs, b)) < 0) {
            free(b);
            goto nomem;
        }
    }
    if ((st = xstep_alloc(s, B ? 3 : 2, 1, err))) goto fail;
    s->in[0] = xplan_value_buf(p, xv);
    s->in[1] = wb;
    if (B) s->in[2] = bb;
    s->out[0] = xplan_value_buf(p, yv);
    if (s->in[0] < 0 || s->out[0] < 0) goto nomem;
    xv_set_order(p, s->out[0], nhwc); /* row (n, oh, ow), column o */
    c->col_off = xd_round(dnnl_memory_desc_get_size(cpad));
    s->scratch_bytes = c->col_off + xd_round(sizeof(float) * (size_t)(M * K));
    const xd_weighted w = {&c->src, &c->wei, &c->dst, &c->pad, &c->bias};
    if ((st = xd_weighted_init(&w, &src, cwei, &dst, cpad, B ? &bmd : NULL, p, n, c->args, &c->nargs, err))) goto fail;
    dnnl_primitive_desc_destroy(pd);
    return TS_OK;
nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "node '%s' (Conv): out of memory building the patch product", nd->name);
fail:
    free(wpacked);
    dnnl_primitive_desc_destroy(pd);
    pt_destroy(c);
    s->state = NULL;
    return st;
}

const xkernel xk_dnnl_patch = {"dnnl.patch", pt_build, pt_run, pt_destroy};
