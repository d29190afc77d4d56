/* Grouped 2-D convolution with 4 or 8 channels per group (ResNeXt's
 * 32x4d first stage: 128 channels in 32 groups; its second: 256 in 32) on
 * channels-last (NHWC) tensors, with the activations after it applied in
 * the same pass.  oneDNN 2.6 runs these through brgconv at 5-15 % of the
 * FMA roofline (resnext50_32x4d, `tsopt profile --roofline`, 12-07): a
 * group of 4 channels fills a quarter of its 16-wide vector blocks.
 *
 * Here a vector holds 16 consecutive channels, i.e. 16 / CG whole groups,
 * and no lane is wasted.  Input channel i of a group feeds its CG output
 * channels; rather than broadcasting x[i] across the group (a shuffle per
 * input vector and tap), accumulator r collects, in lane g*CG + i,
 * x[g*CG + i] * W[g*CG + (i + r) % CG][i]: input lane i's share of output
 * channel (i + r) % CG, so every multiply-add takes x as loaded.  After the
 * taps, output lane g*CG + j is the sum over r of accumulator r's lane
 * g*CG + (j - r) % CG: CG - 1 lane rotations per output vector, once, not
 * per tap.  The sums are those of the graph's conv, in another order
 * (float addition reassociated, as any conv kernel does).
 *
 * The input must lie channels-last already (the layout oneDNN's 1x1
 * convolutions around it produce and read), and the output is written
 * channels-last, so no conversion is added on either side.  Per-channel
 * affine nodes after the conv fold into the weights and bias, activations
 * run over each output row while it is in cache (lower_post.c's tail, as
 * vec.dwconv).  AVX-512 CPUs only: the 16-float vectors are one register
 * there (32 of them: 16 accumulators, CG weights, inputs); elsewhere
 * oneDNN keeps the layer (TSOPT_SKIP=vec.gconv does so everywhere). */
/* Built with -ffp-contract=fast (CMakeLists.txt): a*b + c as one fused
 * multiply-add. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_util.h"
#include "exec/roofline.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "vec/vec_post.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/window.h"

typedef struct gc_state {
    int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl, cg;
    int64_t cb; /* 16-channel blocks per chunk (GC_ROWS) */
    /* [C / 16][KH*KW][cg][16]: channel block, tap, rotation r, lane (see
     * above), affine folds applied; a block's weights contiguous: laid out
     * [tap][r][C] instead, the rotations lay C floats apart, 1 KiB at 256
     * channels, and a chunk's weights fell into a few L1 sets */
    float *w;
    float *b; /* [C] */
    xd_po po[XD_MAX_FUSE];
    int npo, threads;
} gc_state;

static void gc_destroy(void *state)
{
    gc_state *d = state;
    if (!d) return;
    free(d->w);
    free(d->b);
    free(d);
}

/* Helpers compiled for AVX-512 only: gc_build declines elsewhere. */
#define GC_INLINE static inline __attribute__((always_inline, target("avx512f")))

typedef float gc_v16 __attribute__((vector_size(64), aligned(4)));

/* v with its lanes rotated by r within groups of CG: lane g*CG + j takes
 * lane g*CG + (j - r) % CG.  __builtin_shufflevector, which GCC (12 on)
 * and clang both know: the fuzzers are built by clang, which has no
 * __builtin_shuffle. */
#define GC_ROT(v, CG, r)                                                                                           \
    __builtin_shufflevector(v, v, ROT1(CG, r, 0), ROT1(CG, r, 1), ROT1(CG, r, 2), ROT1(CG, r, 3), ROT1(CG, r, 4), \
                            ROT1(CG, r, 5), ROT1(CG, r, 6), ROT1(CG, r, 7), ROT1(CG, r, 8), ROT1(CG, r, 9),         \
                            ROT1(CG, r, 10), ROT1(CG, r, 11), ROT1(CG, r, 12), ROT1(CG, r, 13), ROT1(CG, r, 14),    \
                            ROT1(CG, r, 15))
#define ROT1(CG, r, L) ((L) / (CG) * (CG) + ((L) % (CG) - (r) + (CG)) % (CG))

/* The output vector of one pixel from its CG accumulators: bias plus the
 * rotated sums.  CG is 4 or 8; the masks are constants. */
GC_INLINE gc_v16 gc_fold4(const gc_v16 *a, gc_v16 bias)
{
    return bias + a[0] + GC_ROT(a[1], 4, 1) + GC_ROT(a[2], 4, 2) + GC_ROT(a[3], 4, 3);
}
GC_INLINE gc_v16 gc_fold8(const gc_v16 *a, gc_v16 bias)
{
    return bias + a[0] + GC_ROT(a[1], 8, 1) + GC_ROT(a[2], 8, 2) + GC_ROT(a[3], 8, 3) + GC_ROT(a[4], 8, 4) +
           GC_ROT(a[5], 8, 5) + GC_ROT(a[6], 8, 6) + GC_ROT(a[7], 8, 7);
}

/* P output pixels (ow .. ow + P - 1 of one row, all their taps kw0..kw1
 * inside the row) of channels [c, c + 16): P x CG accumulators, each input
 * vector loaded once per tap and used CG times, each weight vector once per
 * tap and used P times.  P x CG = 16 accumulators of 32 zmm registers. */
#define GC_BLOCK(NAME, CG, P)                                                                                      \
    GC_INLINE void NAME(const gc_state *d, const float *xn, float *y, int64_t ih0, int64_t iw0, int64_t kh0,      \
                        int64_t kh1, int64_t kw0, int64_t kw1, int64_t c)                                         \
    {                                                                                                             \
        const int64_t C = d->C, xs = d->dw * C, ps = d->sw * C;                                                   \
        gc_v16 a[P][CG];                                                                                          \
        _Pragma("GCC unroll 8") for (int p = 0; p < P; p++) _Pragma("GCC unroll 8") for (int r = 0; r < CG; r++) \
            a[p][r] = (gc_v16){0};                                                                                \
        for (int64_t kh = kh0; kh < kh1; kh++) {                                                                  \
            const float *xp = xn + ((ih0 + kh * d->dh) * d->W + iw0 + kw0 * d->dw) * C + c;                       \
            const float *wp = d->w + ((c / 16 * d->KH * d->KW + kh * d->KW + kw0) * CG) * 16;                                           \
            for (int64_t kw = kw0; kw < kw1; kw++, xp += xs, wp += CG * 16) {                                      \
                _Pragma("GCC unroll 8") for (int p = 0; p < P; p++)                                               \
                {                                                                                                 \
                    const gc_v16 x = *(const gc_v16 *)(xp + p * ps);                                              \
                    _Pragma("GCC unroll 8") for (int r = 0; r < CG; r++) a[p][r] +=                               \
                        x * *(const gc_v16 *)(wp + r * 16);                                                        \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
        const gc_v16 bias = *(const gc_v16 *)(d->b + c);                                                          \
        _Pragma("GCC unroll 8") for (int p = 0; p < P; p++) *(gc_v16 *)(y + p * C + c) =                          \
            gc_fold##CG(a[p], bias);                                                                              \
    }
GC_BLOCK(gc_b4_p4, 4, 4)
GC_BLOCK(gc_b4_p1, 4, 1)
GC_BLOCK(gc_b8_p2, 8, 2)
GC_BLOCK(gc_b8_p1, 8, 1)

/* Output rows r0..r1 (row r: image r / OH, output row r % OH), a chunk
 * of d->cb 16-channel blocks at a time across the whole row, within it a
 * block of pixels at a time, every channel block of the chunk for those
 * pixels before the next: the chunk's weights (cb x KH x KW x CG vectors,
 * sized to half the L1d) stay in L1 along the row, and each pixel's
 * channels of the chunk are contiguous lines.  All of a pixel's channels
 * at once streamed all the weights through every pixel block (74 KiB for
 * 256 channels at CG 8, over L1), one block across the row read the input
 * at the channel stride (1 KiB there: a few L1 sets, the loads stalled
 * most of the time); both were slower than oneDNN on ResNeXt's second
 * stage.  Then the activations over the row while it is in cache. */
#define GC_ROWS(NAME, CG, P, BLK, ONE)                                                                             \
    __attribute__((target("avx512f"))) static void NAME(const gc_state *d, const float *x, float *y, int64_t r0,  \
                                                        int64_t r1)                                               \
    {                                                                                                             \
        const int64_t C = d->C, CB = d->cb * 16;                                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                                       \
            int64_t n = r / d->OH, oh = r % d->OH, kh0, kh1;                                                      \
            const float *xn = x + n * d->H * d->W * C;                                                            \
            int64_t ih0 = oh * d->sh - d->pt;                                                                     \
            ts_window_taps(ih0, d->dh, d->KH, d->H, &kh0, &kh1);                                                  \
            float *yr = y + r * d->OW * C;                                                                        \
            for (int64_t c0 = 0; c0 < C; c0 += CB) {                                                              \
                const int64_t c1 = c0 + CB < C ? c0 + CB : C;                                                     \
                int64_t ow = 0;                                                                                   \
                while (ow < d->OW) {                                                                              \
                    int64_t iw0 = ow * d->sw - d->pl;                                                             \
                    float *yp = yr + ow * C;                                                                      \
                    if (ow + P <= d->OW && iw0 >= 0 && iw0 + (P - 1) * d->sw + (d->KW - 1) * d->dw < d->W) {      \
                        for (int64_t c = c0; c < c1; c += 16) BLK(d, xn, yp, ih0, iw0, kh0, kh1, 0, d->KW, c);    \
                        ow += P;                                                                                  \
                        continue;                                                                                 \
                    }                                                                                             \
                    int64_t kw0, kw1;                                                                             \
                    ts_window_taps(iw0, d->dw, d->KW, d->W, &kw0, &kw1);                                          \
                    for (int64_t c = c0; c < c1; c += 16) ONE(d, xn, yp, ih0, iw0, kh0, kh1, kw0, kw1, c);        \
                    ow++;                                                                                         \
                }                                                                                                 \
            }                                                                                                     \
            xv_post_apply(d->po, d->npo, yr, d->OW * C);                                                          \
        }                                                                                                         \
    }
GC_ROWS(gc_rows4, 4, 4, gc_b4_p4, gc_b4_p1)
GC_ROWS(gc_rows8, 8, 2, gc_b8_p2, gc_b8_p1)

static void gc_rows(const gc_state *d, const float *x, float *y, int64_t r0, int64_t r1)
{
    if (d->cg == 4)
        gc_rows4(d, x, y, r0, r1);
    else
        gc_rows8(d, x, y, r0, r1);
}

static void gc_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    const gc_state *d = s->state;
    int64_t rows = d->N * d->OH;
    bool par = d->threads > 1 && rows > 1 && rows * d->OW * d->C * d->KH * d->KW * d->cg >= 16 * XV_PAR_MIN;
    if (!par) {
        gc_rows(d, in[0], out[0], 0, rows);
        return;
    }
#pragma omp parallel num_threads(d->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        gc_rows(d, in[0], out[0], rows * t / nt, rows * (t + 1) / nt);
    }
}

/* Output images of fewer pixels stay on oneDNN: in regnet_y_400mf's plan
 * its 14 x 14 convs of 208 channels in groups of 8 took 1.18-1.25x
 * oneDNN's time (in-process A/B per step, 100 runs, Intel Xeon, loaded;
 * whole runs 1.02-1.045), although the same layer alone ran at 0.83 of it
 * (buffers 64-byte aligned in both; the cause is not found).  From 28 x 28
 * (ResNeXt's second stage: 0.55-0.82) and 56 x 56 (RegNet's first block:
 * 0.79; ResNeXt's first stage: 0.34-0.42) it gains. */
#define GC_MIN_PIXELS (28 * 28)

static ts_status gc_build(xplan *p, int n, xstep *s, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    if (p->opts.plain_layout || p->opts.no_fusion || nd->ninputs < 2 || !__builtin_cpu_supports("avx512f"))
        return TS_ERR_UNSUPPORTED;
    int xv = nd->inputs[0], wv = nd->inputs[1], bv = nd->ninputs > 2 ? nd->inputs[2] : -1, yv = nd->outputs[0];
    const ts_tensor *W = xplan_const(p, wv), *B = bv >= 0 ? xplan_const(p, bv) : NULL;
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    const ts_conv_attrs *ca = nd->attrs;
    if (!W || !W->data || (bv >= 0 && (!B || !B->data)) || xs->rank != 4 || ys->rank != 4 || !xv_all_f32(p, n) ||
        W->dtype != TS_F32 || (B && B->dtype != TS_F32) || W->shape.rank != 4)
        return TS_ERR_UNSUPPORTED;
    int64_t C = xs->dims[1], G = ca->group;
    if (G < 2 || C % G || C % 16 || ys->dims[1] != C || W->shape.dims[0] != C || W->shape.dims[1] != C / G)
        return TS_ERR_UNSUPPORTED;
    int64_t cg = C / G;
    if ((cg != 4 && cg != 8) || ys->dims[2] * ys->dims[3] < GC_MIN_PIXELS) return TS_ERR_UNSUPPORTED;
    xbuf scratch; /* X's layout decided before the plan is touched */
    int order[TS_MAX_RANK];
    if (!xbuf_dense_order(xplan_value_layout(p, xv, &scratch), order) || memcmp(order, nhwc, sizeof nhwc))
        return TS_ERR_UNSUPPORTED;
    ts_window_geom wg;
    char why[256];
    if (!ts_window_resolve(&ca->win, 2, xs->dims + 2, W->shape.dims + 2, &wg, why, sizeof why))
        return TS_ERR_UNSUPPORTED; /* dnnl.conv reports it */

    const xd_fuse f = p->group->post;
    ts_status st;
    if (!xv_post_supported(&f) || ts_graph_is_output(g, f.out_value)) return TS_ERR_UNSUPPORTED;
    gc_state *d = xv_state(sizeof *d, err);
    if (!d) return err->code;
    s->state = d;
    *d = (gc_state){.N = xs->dims[0], .C = C, .H = xs->dims[2], .W = xs->dims[3], .OH = ys->dims[2],
                    .OW = ys->dims[3], .KH = W->shape.dims[2], .KW = W->shape.dims[3], .sh = wg.stride[0],
                    .sw = wg.stride[1], .dh = wg.dil[0], .dw = wg.dil[1], .pt = wg.pad_begin[0],
                    .pl = wg.pad_begin[1], .cg = cg, .npo = f.npo, .threads = xv_threads(p)};
    memcpy(d->po, f.po, sizeof f.po);
    int64_t K = d->KH * d->KW;
    /* chunks of equal size whose weights fill at most half the L1d */
    const int64_t nb = C / 16, fit = xroof_caches_get().l1d / 2 / (K * cg * 64);
    const int64_t nchunks = fit < 1 ? nb : (nb + fit - 1) / fit;
    d->cb = (nb + nchunks - 1) / nchunks;
    d->w = malloc(sizeof(float) * (size_t)(K * cg * C));
    d->b = malloc(sizeof(float) * (size_t)C);
    if (!d->w || !d->b)
        return ts_error_set(err, TS_ERR_NOMEM, "node '%s' (Conv): out of memory packing grouped weights", nd->name);
    /* ONNX W is [C][cg][KH][KW]; lane L = grp*cg + i of rotation r holds
     * W[grp*cg + (i + r) % cg][i] (the output channel scaled by the fold) */
    const float *wsrc = W->data, *bsrc = B ? B->data : NULL;
    for (int64_t k = 0; k < K; k++)
        for (int64_t r = 0; r < cg; r++)
            for (int64_t L = 0; L < C; L++) {
                int64_t i = L % cg, o = L - i + (i + r) % cg;
                d->w[((L / 16 * K + k) * cg + r) * 16 + L % 16] =
                    wsrc[(o * cg + i) * K + k] * (f.scale ? f.scale[o] : 1.0f);
            }
    for (int64_t c = 0; c < C; c++) {
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

const xkernel xk_vec_gconv = {"vec.gconv", gc_build, gc_run, gc_destroy};
