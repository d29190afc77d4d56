/* 2-D MaxPool on the layouts oneDNN's convolutions leave: channels-last
 * (acdb) and 16- or 8-channel blocks (aBcd16b, aBcd8b), written back in the
 * same layout, so nothing is converted on either side (or channels-last
 * into 16-channel blocks for readers on Winograd, mp_build).
 *
 * oneDNN 2.6's pooling (jit:avx512_core) was the slowest step kind beside
 * ORT's NCHWc pooling in the classic CNNs at batch 1: per-step medians in
 * the model (`tsopt profile`-style step timer, 2 threads) against ORT's
 * profiler, same minute, load ~5 on the 2-core VM, ms:
 *   squeezenet1_1 MaxPool 3x3 s2 ceil, 64ch 111x111  0.148 / ORT 0.092
 *                 128ch 55x55                          0.069 / 0.047
 *   googlenet     every MaxPool (13: 3x3 s2 ceil, 3x3 s1 p1 ceil in
 *                 each inception branch)               2.15 / 1.40 in sum,
 *                 the 14x14 branch pools               0.13 / 0.06-0.07
 * A pixel's channels (or a block's 16) are contiguous here, so the window
 * is a max over whole vectors, 16 channels at a time held in a register
 * over the window's taps.  Output rows are split between the threads.
 * After it (per-step minima, 1 thread, alternating with
 * TSOPT_SKIP=vec.maxpool, load 4-6): all MaxPools of resnet18 0.28-0.30 ->
 * 0.18 ms, densenet121 0.27 -> 0.16-0.17, googlenet 1.41-1.44 -> 1.04-1.12
 * (medians, before the 3x3/2x2 unrolling, which took 10-15% more off
 * vgg11's 2x2 pools).
 *
 * Declines (dnnl.pool runs): other ranks, dilation, an Indices output, a
 * graph output (written plain), a plain or other layout, or a window that
 * lies wholly in the padding (ceil_mode can make one; ONNX leaves its value
 * to the implementation). */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "dnnl/dnnl_layout.h"
#include "dnnl/dnnl_util.h"
#include "vec/vec.h"
#include "vec/vec_layout.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/window.h"

typedef struct mp_state {
    int64_t planes;    /* N (channels-last) or N x channel blocks */
    int64_t cb;        /* floats per pixel of a plane: C, or the block */
    int64_t H, W, OH, OW, KH, KW, sh, sw, pt, pl;
    bool to_blocks;    /* channels-last in, 16-channel blocks out */
    int threads;
} mp_state;

static void mp_destroy(void *state) { free(state); }

/* Vectors of 16 and 8 floats (GCC's vector extension, unaligned), so that
 * a window's running max stays in a register across its taps; the max is a
 * compare and a blend (b > a ? b : a: x86's max instruction). */
typedef float mp_v16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t mp_i16 __attribute__((vector_size(64), aligned(4)));
typedef float mp_v8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t mp_i8 __attribute__((vector_size(32), aligned(4)));

#define MP_TAPS(V, VI, NH, NW)                                                                                      \
    for (int64_t i = 0; i < (NH); i++)                                                                              \
        for (int64_t j = 0; j < (NW); j++) {                                                                        \
            V b = *(const V *)(x + i * rs + j * ps);                                                                \
            VI m = b > a;                                                                                           \
            a = (V)(((VI)b & m) | ((VI)a & ~m));                                                                    \
        }
/* The CNNs' windows (3x3, 2x2) with constant bounds, unrolled by the
 * compiler: no loop overhead per pixel, which a 16-channel block's pixel
 * (one vector) would otherwise pay nine times. */
#define MP_WINDOW(NAME, V, VI)                                                                                      \
    XV_INLINE void NAME(const float *x, float *y, int64_t rs, int64_t ps, int64_t nh, int64_t nw)               \
    {                                                                                                               \
        V a = *(const V *)x;                                                                                        \
        if (nh == 3 && nw == 3) {                                                                                   \
            MP_TAPS(V, VI, 3, 3)                                                                                    \
        } else if (nh == 2 && nw == 2) {                                                                            \
            MP_TAPS(V, VI, 2, 2)                                                                                    \
        } else {                                                                                                    \
            MP_TAPS(V, VI, nh, nw)                                                                                  \
        }                                                                                                           \
        *(V *)y = a;                                                                                                \
    }
MP_WINDOW(mp_win16, mp_v16, mp_i16)
MP_WINDOW(mp_win8, mp_v8, mp_i8)

/* Output rows r0..r1 (row r: plane r / OH, output row r % OH), pixel by
 * pixel, each pixel's channels a vector at a time over the window. */
XV_CLONES static void mp_rows(const mp_state *d, const float *x, float *y, int64_t r0, int64_t r1)
{
    const int64_t cb = d->cb, c16 = cb / 16 * 16, c8 = cb / 8 * 8, rs = d->W * cb;
    for (int64_t r = r0; r < r1; r++) {
        int64_t pl = r / d->OH, oh = r % d->OH;
        int64_t h0 = oh * d->sh - d->pt, h1 = h0 + d->KH;
        h0 = h0 < 0 ? 0 : h0;
        h1 = h1 > d->H ? d->H : h1;
        const float *xp = x + pl * d->H * rs;
        float *yr = y + r * d->OW * cb;
        for (int64_t ow = 0; ow < d->OW; ow++) {
            int64_t w0 = ow * d->sw - d->pl, w1 = w0 + d->KW;
            w0 = w0 < 0 ? 0 : w0;
            w1 = w1 > d->W ? d->W : w1;
            const float *xw = xp + (h0 * d->W + w0) * cb;
            float *yp = yr + ow * cb;
            int64_t c = 0;
            if (d->to_blocks) { /* block c / 16 of image pl: [pl][c / 16][oh][ow][16] */
                float *yb = y + ((pl * (cb / 16) * d->OH + oh) * d->OW + ow) * 16;
                for (; c < cb; c += 16) mp_win16(xw + c, yb + c / 16 * d->OH * d->OW * 16, rs, cb, h1 - h0, w1 - w0);
                continue;
            }
            for (; c < c16; c += 16) mp_win16(xw + c, yp + c, rs, cb, h1 - h0, w1 - w0);
            for (; c < c8; c += 8) mp_win8(xw + c, yp + c, rs, cb, h1 - h0, w1 - w0);
            for (; c < cb; c++) {
                float a = xw[c];
                for (int64_t i = 0; i < h1 - h0; i++)
                    for (int64_t j = 0; j < w1 - w0; j++) {
                        float b = xw[i * rs + j * cb + c];
                        a = b > a ? b : a;
                    }
                yp[c] = a;
            }
        }
    }
}

static void mp_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    const mp_state *d = s->state;
    int64_t rows = d->planes * d->OH;
    bool par = d->threads > 1 && rows > 1 && rows * d->OW * d->cb * d->KH * d->KW >= 4 * XV_PAR_MIN;
    if (!par) {
        mp_rows(d, in[0], out[0], 0, rows);
        return;
    }
#pragma omp parallel num_threads(d->threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        mp_rows(d, in[0], out[0], rows * t / nt, rows * (t + 1) / nt);
    }
}

static void block_md(dnnl_memory_desc_t *md, const ts_shape *s, int block)
{
    dnnl_dims_t d = {s->dims[0], s->dims[1], s->dims[2], s->dims[3]};
    dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b);
}

/* The channel block of buffer b: 16 or 8 when it is aBcd16b / aBcd8b
 * exactly, else 0. */
static int buf_block(const xbuf *b)
{
    if (!b->blocked) return 0;
    for (int block = 16; block >= 8; block /= 2) {
        dnnl_memory_desc_t md;
        block_md(&md, &b->shape, block);
        if (dnnl_memory_desc_equal(&md, &b->md)) return block;
    }
    return 0;
}

static ts_status mp_build(xplan *p, int n, xstep *s, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    if (p->opts.plain_layout || nd->op != &ts_op_maxpool || nd->noutputs != 1 || nd->ninputs != 1)
        return TS_ERR_UNSUPPORTED;
    int xv = nd->inputs[0], yv = nd->outputs[0];
    const ts_shape *xs = &g->values[xv].shape, *ys = &g->values[yv].shape;
    if (xs->rank != 4 || !xv_all_f32(p, n) || ts_graph_is_output(g, yv)) return TS_ERR_UNSUPPORTED;
    const ts_pool_attrs *pa = nd->attrs;
    ts_window_geom wg;
    char why[256];
    if (!ts_window_resolve(&pa->win, 2, xs->dims + 2, NULL, &wg, why, sizeof why))
        return TS_ERR_UNSUPPORTED; /* dnnl.pool reports it */
    if (wg.dil[0] != 1 || wg.dil[1] != 1) return TS_ERR_UNSUPPORTED;
    /* every window must reach into the input (ceil_mode's last one may not) */
    for (int i = 0; i < 2; i++) {
        int64_t last = (ys->dims[2 + i] - 1) * wg.stride[i] - wg.pad_begin[i];
        if (wg.kernel[i] <= wg.pad_begin[i] || last >= xs->dims[2 + i] || ys->dims[2 + i] < 1) return TS_ERR_UNSUPPORTED;
    }
    xbuf scratch; /* X's layout decided before the plan is touched */
    const xbuf *x = xplan_value_layout(p, xv, &scratch);
    int order[TS_MAX_RANK];
    int64_t N = xs->dims[0], C = xs->dims[1];
    int block = buf_block(x);
    bool cl = !block && xbuf_dense_order(x, order) && !memcmp(order, nhwc, sizeof nhwc);
    if (!block && !cl) return TS_ERR_UNSUPPORTED;
    /* Channels-last in, 16-channel blocks out when every reader is a conv
     * on Winograd (xlow_blocks_readers), which reads blocks whatever it is
     * given: the conversion moves from the conv's step into this one, where
     * it costs only another write address.  The max of a window is the
     * same in any layout and the conv reads the same blocks: the results
     * are bit-identical.  vgg11: its stem conv writes channels-last
     * (brgconv, oneDNN's fastest for 3 input channels) and the Winograd
     * conv after the pooling converted 64x112x112 (3.2 MB) every run.
     * TSOPT_SKIP=maxpool.blocks turns it off. */
    bool to_blocks = cl && C % 16 == 0 && !p->half && !xplan_skips(p, "maxpool.blocks") && xlow_blocks_readers(p, yv);
    int xb = xplan_value_buf(p, xv); /* blocked or channels-last: its buffer exists */
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory for a buffer", nd->name);
    mp_state *d = xv_state(sizeof *d, err);
    if (!d) return err->code;
    s->state = d;
    *d = (mp_state){.planes = block ? N * ((C + block - 1) / block) : N, .cb = block ? block : C,
                    .H = xs->dims[2], .W = xs->dims[3], .OH = ys->dims[2], .OW = ys->dims[3],
                    .KH = wg.kernel[0], .KW = wg.kernel[1], .sh = wg.stride[0], .sw = wg.stride[1],
                    .pt = wg.pad_begin[0], .pl = wg.pad_begin[1], .to_blocks = to_blocks, .threads = xv_threads(p)};
    ts_status st = xstep_alloc(s, 1, 1, err);
    if (st) return st;
    s->in[0] = xb;
    if ((s->out[0] = xplan_value_buf(p, yv)) < 0)
        return ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory for a buffer", nd->name);
    xbuf *y = &p->bufs[s->out[0]];
    if (to_blocks) {
        block_md(&y->md, ys, 16);
        y->blocked = true;
        y->bytes = dnnl_memory_desc_get_size(&y->md);
    } else if (cl) {
        xv_set_order(p, s->out[0], nhwc);
    } else { /* the padding channels of the blocks pool zeros into zeros */
        block_md(&y->md, ys, block);
        y->blocked = true;
        y->bytes = dnnl_memory_desc_get_size(&y->md);
    }
    return TS_OK;
}

const xkernel xk_vec_maxpool = {"vec.maxpool", mp_build, mp_run, mp_destroy};
