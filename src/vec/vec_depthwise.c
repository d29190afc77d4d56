/* Depthwise 2-D convolution (group = input channels = output channels) on
 * channels-last (NHWC) tensors, with the activations after it applied in
 * the same pass, for the case where oneDNN 2.6 is slow: a strided
 * depthwise conv of at most 64 channels reading a large input (the first
 * stride-2 layer of most mobile nets, 112x112 -> 56x56).  oneDNN's
 * brdgmm_dw kernel does not split that layer between threads (2 threads
 * take what 1 takes), so it costs a mobile net at batch 1 about 2x what
 * it should.  Per-step minima in the models (60 runs, 2 threads, spinning
 * OpenMP, load average ~10), ms, this kernel / oneDNN:
 *   mnasnet1_0 48 ch 0.052-0.057 / 0.121-0.135
 *   mobilenet_v3_large 64 ch 0.068-0.070 / 0.180-0.190
 *   mobilenet_v2 96 ch 0.178-0.222 / 0.159-0.169 (oneDNN splits it: left to it)
 *   efficientnet_b0 96 ch 0.268 / 0.268
 * On one thread the two are equal within noise (0.12-0.13 ms for 48 ch,
 * 0.17 for 64).  Stride 1 and inputs from 56x56 stay on oneDNN, which is
 * faster there (one core, cache-hot, one layer repeated: 3x3 s1 32 ch at
 * 112 0.170 vs 0.138; 144 ch at 56 0.196 vs 0.158; 5x5 s2 144 ch at 56
 * 0.126 vs 0.112).  The input must lie channels-last already (the layout
 * oneDNN's 1x1 convolutions around it produce and read) and the output is
 * written channels-last, so no conversion is added on either side.
 * Per-channel affine nodes after the conv (BatchNormalization, Mul/Add by
 * a constant) fold into the weights and bias, and the activations are
 * applied to each output row while it is in cache, as the post-ops of
 * dnnl.conv (the fusion walker is shared, dnnl_util.c).
 *
 * Also tried: taking every depthwise conv followed by SiLU, as oneDNN
 * computes its swish post-op with a division per vector (32 ch at 112,
 * s1: 0.135 ms without post-op, 0.31 with swish).  SiLU costs about as
 * much here (one AVX-512 unit on this CPU: exp + Newton reciprocal), and
 * the stride-1 layers were slower, so EfficientNet-B0 took 1 ms more CPU
 * per run at one thread (13.6-14.0 vs 12.6-13.0 ms).  (Since then the
 * oneDNN conv applies SiLU itself after the primitive, in a pass twice as
 * fast as the one measured here: vec_post.c.) */
/* Built with -ffp-contract=fast (CMakeLists.txt): a*b + c as one fused
 * multiply-add, which ISO C mode leaves separate; faster, and one rounding
 * instead of two. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "vec/vec_post.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/window.h"

typedef struct dw_state {
    int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl;
    float *w; /* [KH][KW][C], affine folds applied */
    float *b; /* [C] */
    xd_po po[XD_MAX_FUSE];
    int npo, threads;
} dw_state;

static void dw_destroy(void *state)
{
    dw_state *d = state;
    if (!d) return;
    free(d->w);
    free(d->b);
    free(d);
}

/* Vectors of 16 and 8 floats, unaligned (GCC's vector extension), so that
 * a block's accumulators live in registers across the taps: a plain array
 * with an `omp simd` loop per tap goes through memory at every tap (2.5x
 * slower).  The AVX-512 clone makes a 16-float vector one zmm register. */
typedef float dw_v16 __attribute__((vector_size(64), aligned(4)));
typedef float dw_v8 __attribute__((vector_size(32), aligned(4)));

/* Raw convolution (bias, no activation) of output pixels ow..ow+3 (P4) or
 * ow (P1) of one row, channels [c, c + lanes of V).  Four pixels share
 * each weight load where all their taps lie inside the row (the
 * interior); the pixels near the borders take the taps that exist. */
#define DW_P4(NAME, V)                                                                                              \
    XV_INLINE void NAME(const dw_state *d, const float *xn, float *y, int64_t ih0, int64_t iw0, int64_t kh0,        \
                        int64_t kh1, int64_t c)                                                                     \
    {                                                                                                               \
        const int64_t C = d->C, xs = d->dw * C, ps = d->sw * C;                                                     \
        const V bias = *(const V *)(d->b + c);                                                                      \
        V a0 = bias, a1 = bias, a2 = bias, a3 = bias;                                                               \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                                    \
            const float *xp = xn + ((ih0 + kh * d->dh) * d->W + iw0) * C + c;                                       \
            const float *wp = d->w + kh * d->KW * C + c;                                                            \
            for (int64_t kw = 0; kw < d->KW; kw++, xp += xs, wp += C) {                                             \
                const V w = *(const V *)wp;                                                                         \
                a0 += *(const V *)xp * w;                                                                           \
                a1 += *(const V *)(xp + ps) * w;                                                                    \
                a2 += *(const V *)(xp + 2 * ps) * w;                                                                \
                a3 += *(const V *)(xp + 3 * ps) * w;                                                                \
            }                                                                                                       \
        }                                                                                                           \
        *(V *)(y + c) = a0;                                                                                         \
        *(V *)(y + C + c) = a1;                                                                                     \
        *(V *)(y + 2 * C + c) = a2;                                                                                 \
        *(V *)(y + 3 * C + c) = a3;                                                                                 \
    }
#define DW_P1(NAME, V)                                                                                              \
    XV_INLINE void NAME(const dw_state *d, const float *xn, float *y, int64_t ih0, int64_t iw0, int64_t kh0,        \
                        int64_t kh1, int64_t kw0, int64_t kw1, int64_t c)                                           \
    {                                                                                                               \
        const int64_t C = d->C, xs = d->dw * C;                                                                     \
        V a = *(const V *)(d->b + c);                                                                               \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                                    \
            const float *xp = xn + ((ih0 + kh * d->dh) * d->W + iw0 + kw0 * d->dw) * C + c;                         \
            const float *wp = d->w + (kh * d->KW + kw0) * C + c;                                                    \
            for (int64_t kw = kw0; kw < kw1; kw++, xp += xs, wp += C) a += *(const V *)xp * *(const V *)wp;         \
        }                                                                                                           \
        *(V *)(y + c) = a;                                                                                          \
    }
DW_P4(dw_p4_16, dw_v16)
DW_P4(dw_p4_8, dw_v8)
DW_P1(dw_p1_16, dw_v16)
DW_P1(dw_p1_8, dw_v8)

/* One pixel's channels past the vectors, one by one. */
static inline void dw_p1_scalar(const dw_state *d, const float *xn, float *y, int64_t ih0, int64_t iw0, int64_t kh0,
                                int64_t kh1, int64_t kw0, int64_t kw1, int64_t c)
{
    const int64_t C = d->C;
    float a = d->b[c];
    for (int64_t kh = kh0; kh < kh1; kh++)
        for (int64_t kw = kw0; kw < kw1; kw++)
            a += xn[((ih0 + kh * d->dh) * d->W + iw0 + kw * d->dw) * C + c] * d->w[(kh * d->KW + kw) * C + c];
    y[c] = a;
}

/* Output rows r0..r1 (row r: image r / OH, output row r % OH), pixel by
 * pixel (four at a time inside), every channel of a pixel before the next:
 * a pixel's channels are contiguous in memory, so the taps stream whole
 * cache lines in order.  Then the activations over the row while it is in
 * cache. */
XV_CLONES static void dw_rows(const dw_state *d, const float *x, float *y, int64_t r0, int64_t r1)
{
    const int64_t C = d->C, C16 = C / 16 * 16, C8 = C / 8 * 8;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / d->OH, oh = r % d->OH, kh0, kh1;
        const float *xn = x + n * d->H * d->W * C;
        int64_t ih0 = oh * d->sh - d->pt;
        ts_window_taps(ih0, d->dh, d->KH, d->H, &kh0, &kh1);
        float *yr = y + r * d->OW * C;
        int64_t ow = 0;
        while (ow < d->OW) {
            int64_t iw0 = ow * d->sw - d->pl;
            float *yp = yr + ow * C;
            if (ow + 4 <= d->OW && iw0 >= 0 && iw0 + 3 * d->sw + (d->KW - 1) * d->dw < d->W) {
                int64_t c = 0;
                for (; c < C16; c += 16) dw_p4_16(d, xn, yp, ih0, iw0, kh0, kh1, c);
                for (; c < C8; c += 8) dw_p4_8(d, xn, yp, ih0, iw0, kh0, kh1, c);
                for (int j = 0; j < 4; j++)
                    for (int64_t k = c; k < C; k++)
                        dw_p1_scalar(d, xn, yp + j * C, ih0, iw0 + j * d->sw, kh0, kh1, 0, d->KW, k);
                ow += 4;
                continue;
            }
            int64_t kw0, kw1, c = 0;
            ts_window_taps(iw0, d->dw, d->KW, d->W, &kw0, &kw1);
            for (; c < C16; c += 16) dw_p1_16(d, xn, yp, ih0, iw0, kh0, kh1, kw0, kw1, c);
            for (; c < C8; c += 8) dw_p1_8(d, xn, yp, ih0, iw0, kh0, kh1, kw0, kw1, c);
            for (; c < C; c++) dw_p1_scalar(d, xn, yp, ih0, iw0, kh0, kh1, kw0, kw1, c);
            ow++;
        }
        xv_post_apply(d->po, d->npo, yr, d->OW * C);
    }
}

static void dw_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    const dw_state *d = s->state;
    int64_t rows = d->N * d->OH;
    /* a parallel region costs more than a small layer's whole work */
    bool par = d->threads > 1 && rows > 1 && rows * d->OW * d->C * d->KH * d->KW >= 16 * XV_PAR_MIN;
    if (!par) {
        dw_rows(d, in[0], out[0], 0, rows);
        return;
    }
#pragma omp parallel num_threads(d->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        dw_rows(d, in[0], out[0], rows * t / nt, rows * (t + 1) / nt);
    }
}

/* Where oneDNN's strided depthwise kernel runs on one thread (above). */
#define DW_MIN_INPUT_BYTES ((int64_t)2 << 20)
#define DW_MAX_CHANNELS 64

static ts_status dw_build(xplan *p, int n, xstep *s, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    if (p->opts.plain_layout || p->opts.no_fusion || nd->ninputs < 2) return TS_ERR_UNSUPPORTED;
    int xv = nd->inputs[0], wv = nd->inputs[1], bv = nd->ninputs > 2 ? nd->inputs[2] : -1, yv = nd->outputs[0];
    const ts_tensor *W = xplan_const(p, wv), *B = bv >= 0 ? xplan_const(p, bv) : NULL;
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    const ts_conv_attrs *ca = nd->attrs;
    if (!W || !W->data || (bv >= 0 && (!B || !B->data)) || xs->rank != 4 || !xv_all_f32(p, n) || W->dtype != TS_F32 ||
        (B && B->dtype != TS_F32))
        return TS_ERR_UNSUPPORTED;
    int64_t C = xs->dims[1];
    if (ca->group != C || ys->dims[1] != C || W->shape.dims[0] != C || W->shape.dims[1] != 1) return TS_ERR_UNSUPPORTED;
    xbuf scratch; /* X's layout decided before the plan is touched */
    int order[TS_MAX_RANK];
    if (!xbuf_dense_order(xplan_value_layout(p, xv, &scratch), order) || memcmp(order, nhwc, sizeof nhwc))
        return TS_ERR_UNSUPPORTED;
    ts_window_geom wg;
    char why[256];
    if (!ts_window_resolve(&ca->win, 2, xs->dims + 2, W->shape.dims + 2, &wg, why, sizeof why))
        return TS_ERR_UNSUPPORTED; /* dnnl.conv reports it */
    if (wg.stride[0] < 2 || wg.stride[1] < 2 || C > DW_MAX_CHANNELS || ts_shape_numel(xs) * 4 < DW_MIN_INPUT_BYTES)
        return TS_ERR_UNSUPPORTED;

    /* the whole post-op tail the lowering stage handed (lower_post.c) */
    const xd_fuse f = p->group->post;
    ts_status st;
    if (!xv_post_supported(&f) || ts_graph_is_output(g, f.out_value)) return TS_ERR_UNSUPPORTED;
    dw_state *d = xv_state(sizeof *d, err);
    if (!d) return err->code;
    s->state = d;
    *d = (dw_state){.N = xs->dims[0], .C = C, .H = xs->dims[2], .W = xs->dims[3], .OH = ys->dims[2],
                    .OW = ys->dims[3], .KH = W->shape.dims[2], .KW = W->shape.dims[3], .sh = wg.stride[0],
                    .sw = wg.stride[1], .dh = wg.dil[0], .dw = wg.dil[1], .pt = wg.pad_begin[0],
                    .pl = wg.pad_begin[1], .npo = f.npo, .threads = xv_threads(p)};
    memcpy(d->po, f.po, sizeof f.po);
    int64_t K = d->KH * d->KW;
    d->w = malloc(sizeof(float) * (size_t)(K * C));
    d->b = malloc(sizeof(float) * (size_t)C);
    if (!d->w || !d->b)
        return ts_error_set(err, TS_ERR_NOMEM, "node '%s' (Conv): out of memory packing depthwise weights", nd->name);
    /* ONNX W is [C][1][KH][KW]; the kernel reads a tap's channels contiguously */
    const float *wsrc = W->data, *bsrc = B ? B->data : NULL;
    for (int64_t c = 0; c < C; c++) {
        float sc = f.scale ? f.scale[c] : 1.0f;
        for (int64_t k = 0; k < K; k++) d->w[k * C + c] = wsrc[c * K + k] * sc;
        float b = bsrc ? bsrc[c] : 0.0f;
        d->b[c] = f.scale ? b * f.scale[c] + f.shift[c] : b;
    }
    if ((st = xstep_alloc(s, 1, 1, err))) return st;
    s->in[0] = xplan_value_buf(p, xv); /* X is channels-last: its buffer exists */
    s->out[0] = xplan_value_buf(p, f.out_value);
    if (s->in[0] < 0 || s->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    xv_set_order(p, s->out[0], nhwc);
    return TS_OK;
}

const xkernel xk_vec_dwconv = {"vec.dwconv", dw_build, dw_run, dw_destroy};
