/* Squeeze-and-excitation gate as one step: GlobalAveragePool -> 1x1 Conv
 * -> activation -> 1x1 Conv -> gate activation (Sigmoid, HardSigmoid),
 * the N x C x 1 x 1 scale that the block's Mul then applies; that Mul too
 * (x * gate, written in x's layout) when it reads x and the gate (where the
 * graph pass ts_fold_gate moved the gate onto the next conv's weights, the
 * gate's reader is that Mul on the weights, lowered by dnnl.conv_gated).
 *
 * A lowering: each node's function as written (the mean, each 1x1 conv on
 * the 1x1 image as a matrix-vector product with its bias, the activations
 * as the oneDNN steps would apply them, the Mul), in this step's own
 * summation order; tests/unit/test_exec_se.c compares it with the
 * reference interpreter at 1e-4 of the largest output.
 *
 * Why: on oneDNN the gate is three steps (pool, two convolutions on a 1x1
 * image) of which the convolutions are a few thousand multiply-adds each,
 * 3-20 us per step mostly in primitive dispatch; EfficientNet-B0 has 16
 * such blocks (32 convolution steps, 0.31-0.33 ms of per-step minima at 1
 * and 2 threads), MobileNet-v3-Large 8.  Here the pool reads the tensor
 * once in whatever dense layout it lies (channels-last from oneDNN's
 * convolutions, or plain), and the two tiny matrix-vector products and
 * their activations run on the pooled vector in the same step.
 *
 * The block is formed by the lowering stage (lower_post.c, se_group); the
 * activations are whatever its post-op walk recognises after each conv
 * (xd_fuse_collect: ReLU, SiLU as Sigmoid + Mul, HardSigmoid,
 * Sigmoid, Clip, HardSwish, per-channel affine nodes folded into the
 * weights), so the pattern is the block, not one model's spelling of it. */
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
#include "measure/wait_policy.h"

typedef struct se_state {
    int64_t N, C, HW, R; /* batch, channels, pooled pixels, reduced channels */
    int64_t Cp;          /* C rounded up to whole blocks (blocks16), else C */
    bool nhwc;           /* input channels-last, else plain NCHW (or blocks16) */
    bool blocks16;       /* input in oneDNN's 16-channel blocks [N][Cp/16][HW][16] */
    bool scale;          /* the output is x * gate (the block's Mul), else the gate */
    float *w1, *b1;      /* [R][C] (scaled by 1/HW: the pool's mean), [R] */
    float *w2t, *b2;     /* [R][C]: the second conv transposed, [C] */
    xd_po po1[XD_MAX_FUSE], po2[XD_MAX_FUSE];
    int npo1, npo2, threads;
} se_state;

static void se_destroy(void *state)
{
    se_state *s = state;
    if (!s) return;
    free(s->w1);
    free(s->b1);
    free(s->w2t);
    free(s->b2);
    free(s);
}

/* Sums of image n's channels into sum[0..C) (pixels p0..p1 for channels-
 * last, channels c0..c1 for plain, so that threads can split either). */
XV_CLONES static void se_sum_nhwc(const float *x, int64_t C, int64_t p0, int64_t p1, float *sum)
{
    for (int64_t c = 0; c < C; c++) sum[c] = 0;
    for (int64_t p = p0; p < p1; p++) {
        const float *r = x + p * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) sum[c] += r[c];
    }
}

XV_CLONES static void se_sum_nchw(const float *x, int64_t HW, int64_t c0, int64_t c1, float *sum)
{
    for (int64_t c = c0; c < c1; c++) {
        const float *r = x + c * HW;
        float a = 0;
#pragma omp simd reduction(+ : a)
        for (int64_t p = 0; p < HW; p++) a += r[p];
        sum[c] = a;
    }
}

/* Sums of blocks b0..b1 of one image in 16-channel blocks ([Cp/16][HW][16])
 * into sum[16 b0 .. 16 b1) (a block's padding channels sum to zero). */
XV_CLONES static void se_sum_b16(const float *x, int64_t HW, int64_t b0, int64_t b1, float *sum)
{
    for (int64_t b = b0; b < b1; b++) {
        const float *r = x + b * HW * 16;
        float a[16] = {0};
        for (int64_t p = 0; p < HW; p++)
#pragma omp simd
            for (int j = 0; j < 16; j++) a[j] += r[p * 16 + j];
        memcpy(sum + b * 16, a, sizeof a);
    }
}

/* h[j0..j1) = act1(W1 mean + b1) rows j0..j1. */
XV_CLONES static void se_fc1(const se_state *s, const float *sum, float *h, int64_t j0, int64_t j1)
{
    const int64_t C = s->C;
    for (int64_t j = j0; j < j1; j++) {
        const float *w = s->w1 + j * C;
        float a = 0;
#pragma omp simd reduction(+ : a)
        for (int64_t c = 0; c < C; c++) a += w[c] * sum[c];
        h[j] = a + s->b1[j];
    }
    xv_post_apply(s->po1, s->npo1, h + j0, j1 - j0);
}

/* gate[c0..c1) = act2(W2 h + b2) for those channels. */
XV_CLONES static void se_fc2(const se_state *s, const float *h, float *gate, int64_t c0, int64_t c1)
{
    const int64_t C = s->C;
    memcpy(gate + c0, s->b2 + c0, sizeof(float) * (size_t)(c1 - c0));
    for (int64_t j = 0; j < s->R; j++) {
        const float *w = s->w2t + j * C, hj = h[j];
#pragma omp simd
        for (int64_t c = c0; c < c1; c++) gate[c] += w[c] * hj;
    }
    xv_post_apply(s->po2, s->npo2, gate + c0, c1 - c0);
}

/* Weights of the two products (multiply-adds) from which the second
 * thread pays: at batch 1 the products stream 2 R C floats from memory
 * (MobileNet-v3's last blocks, 960 x 240: 1.8 MB, 0.17 ms on one thread,
 * as long as oneDNN's two convolutions; ORT splits them: 0.09-0.11).  As
 * vec_gemv.c: a sleeping team's wake-up costs more. */
#define SE_PAR_MIN_SPIN (1 << 16)
#define SE_PAR_MIN (1 << 20)

static void se_gate(const se_state *s, const float *sum, float *h, float *gate)
{
    const int64_t par_min = ts_wait_threads_sleep() ? SE_PAR_MIN : SE_PAR_MIN_SPIN;
    if (s->threads < 2 || 2 * s->R * s->C < par_min) {
        se_fc1(s, sum, h, 0, s->R);
        se_fc2(s, h, gate, 0, s->C);
        return;
    }
#pragma omp parallel num_threads(s->threads)
    {
        int t = omp_get_thread_num(), k = omp_get_num_threads();
        se_fc1(s, sum, h, s->R * t / k, s->R * (t + 1) / k);
#pragma omp barrier
        /* channel ranges of 16 (whole vectors) */
        int64_t nb = (s->C + 15) / 16, c0 = nb * t / k * 16, c1 = nb * (t + 1) / k * 16;
        if (c1 > s->C) c1 = s->C;
        if (c0 < c1) se_fc2(s, h, gate, c0, c1);
    }
}

/* y = x * gate over pixels p0..p1 (channels-last) or channels c0..c1
 * (plain) of one image. */
XV_CLONES static void se_scale_nhwc(const float *x, const float *gate, float *y, int64_t C, int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++) {
        const float *r = x + p * C;
        float *o = y + p * C;
#pragma omp simd
        for (int64_t c = 0; c < C; c++) o[c] = r[c] * gate[c];
    }
}

XV_CLONES static void se_scale_nchw(const float *x, const float *gate, float *y, int64_t HW, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++) {
        const float *r = x + c * HW, g = gate[c];
        float *o = y + c * HW;
#pragma omp simd
        for (int64_t p = 0; p < HW; p++) o[p] = r[p] * g;
    }
}

XV_CLONES static void se_scale_b16(const float *x, const float *gate, float *y, int64_t HW, int64_t b0, int64_t b1)
{
    for (int64_t b = b0; b < b1; b++) {
        const float *r = x + b * HW * 16, *g = gate + b * 16;
        float *o = y + b * HW * 16;
        for (int64_t p = 0; p < HW; p++)
#pragma omp simd
            for (int j = 0; j < 16; j++) o[p * 16 + j] = r[p * 16 + j] * g[j];
    }
}

static void se_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const se_state *s = st->state;
    const int64_t C = s->C, Cp = s->Cp, HW = s->HW, nb = Cp / 16;
    float *part = scratch, *h = part + 2 * Cp, *g = h + s->R;
    /* a parallel region costs more than pooling a small tensor */
    int nt = s->threads > 1 && HW * C >= 4 * XV_PAR_MIN ? 2 : 1;
    for (int64_t n = 0; n < s->N; n++) {
        const float *x = (const float *)in[0] + n * Cp * HW;
        float *sum = part;
        if (s->blocks16) {
            /* whole blocks per thread, as the plain layout splits channels */
            if (nt == 1) {
                se_sum_b16(x, HW, 0, nb, sum);
            } else {
#pragma omp parallel num_threads(nt)
                {
                    int t = omp_get_thread_num(), k = omp_get_num_threads();
                    se_sum_b16(x, HW, nb * t / k, nb * (t + 1) / k, sum);
                }
            }
        } else if (nt == 1) {
            if (s->nhwc)
                se_sum_nhwc(x, C, 0, HW, sum);
            else
                se_sum_nchw(x, HW, 0, C, sum);
        } else if (s->nhwc) {
            /* two halves of the pixels, each thread its own partial sums */
#pragma omp parallel num_threads(nt)
            {
                int t = omp_get_thread_num(), k = omp_get_num_threads();
                se_sum_nhwc(x, C, HW * t / k, HW * (t + 1) / k, part + t * C);
            }
            for (int64_t c = 0; c < C; c++) sum[c] = part[c] + part[C + c];
        } else {
#pragma omp parallel num_threads(nt)
            {
                int t = omp_get_thread_num(), k = omp_get_num_threads();
                se_sum_nchw(x, HW, C * t / k, C * (t + 1) / k, sum);
            }
        }
        for (int64_t c = 0; c < C; c++) sum[c] /= (float)HW; /* GlobalAveragePool's mean */
        if (!s->scale) {
            se_gate(s, sum, h, (float *)out[0] + n * C);
            continue;
        }
        /* the block's Mul, split as the pooling was: each thread scales
         * the pixels (channels) it summed, still in its cache */
        se_gate(s, sum, h, g);
        float *y = (float *)out[0] + n * Cp * HW;
        if (s->blocks16) {
            /* the padding channels stay zero: x's are, times a zero gate */
            for (int64_t c = C; c < Cp; c++) g[c] = 0;
            if (nt == 1) {
                se_scale_b16(x, g, y, HW, 0, nb);
            } else {
#pragma omp parallel num_threads(nt)
                {
                    int t = omp_get_thread_num(), k = omp_get_num_threads();
                    se_scale_b16(x, g, y, HW, nb * t / k, nb * (t + 1) / k);
                }
            }
            continue;
        }
        if (nt == 1) {
            if (s->nhwc)
                se_scale_nhwc(x, g, y, C, 0, HW);
            else
                se_scale_nchw(x, g, y, HW, 0, C);
            continue;
        }
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), k = omp_get_num_threads();
            if (s->nhwc)
                se_scale_nhwc(x, g, y, C, HW * t / k, HW * (t + 1) / k);
            else
                se_scale_nchw(x, g, y, HW, C * t / k, C * (t + 1) / k);
        }
    }
}

/* Copies conv c's weights and its bias plus the fused per-channel Add's. */
static void take_conv(const xplan *p, int c, const xd_fuse *f, float *w, float *b, bool transpose)
{
    const ts_node *nd = xplan_node(p, c);
    const ts_tensor *W = xplan_const(p, nd->inputs[1]);
    const ts_tensor *B = nd->ninputs > 2 && nd->inputs[2] >= 0 ? xplan_const(p, nd->inputs[2]) : NULL;
    int64_t F = W->shape.dims[0], Cin = W->shape.dims[1];
    const float *ws = W->data, *bs = B ? B->data : NULL;
    for (int64_t o = 0; o < F; o++) {
        float sc = f->scale ? f->scale[o] : 1.0f;
        for (int64_t i = 0; i < Cin; i++) {
            float v = ws[o * Cin + i] * sc;
            if (transpose)
                w[i * F + o] = v;
            else
                w[o * Cin + i] = v;
        }
        float bv = bs ? bs[o] : 0.0f;
        b[o] = f->scale ? bv * f->scale[o] + f->shift[o] : bv;
    }
}

/* The squeeze-excite block the lowering stage formed (lower_post.c, se_group). */
static ts_status se_build(xplan *p, int n, xstep *st, ts_error *err)
{
    static const int nhwc[4] = {0, 2, 3, 1};
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const xd_fuse *f1 = &p->group->se1, *f2 = &p->group->se2;
    const int c1 = p->group->se_c1, c2 = p->group->se_c2, mul = p->group->se_mul;
    int xv = nd->inputs[0];
    const ts_shape *xs = &g->values[xv].shape;
    const int64_t N = xs->dims[0], C = xs->dims[1], HW = xs->dims[2] * xs->dims[3];
    const int64_t R = g->values[xplan_node(p, c1)->outputs[0]].shape.dims[1];
    /* a gate: something must squash it (the block's Mul scales by it) */
    if (!xv_post_supported(f1) || !f2->npo || !xv_post_supported(f2) || ts_graph_is_output(g, f2->out_value))
        return TS_ERR_UNSUPPORTED;
    xbuf scratch; /* X's layout decided before the plan is touched */
    int order[TS_MAX_RANK];
    const xbuf *xl = xplan_value_layout(p, xv, &scratch);
    /* 16-channel blocks (a net run in blocks, conv.stem_blocks): pooled
     * and scaled as they lie, the scaled result in the same blocks for the
     * conv after it.  Before, the block was five steps around two reorders
     * (oneDNN pool, two 1x1 convs, the gate and x made channels-last for
     * an element-wise Mul).  TSOPT_SKIP=se.blocks declines it. */
    const int mul_out = mul >= 0 ? xplan_node(p, mul)->outputs[0] : -1;
    bool b16 = HW >= 1 && xs->rank == 4 && xbuf_is_blocks16_padded(xl) && !xplan_skips(p, "se.blocks") &&
               (mul_out < 0 || !ts_graph_is_output(g, mul_out));
    if (!b16 && (HW < 1 || !xbuf_dense_order(xl, order))) return TS_ERR_UNSUPPORTED;
    bool is_nhwc = !b16 && !memcmp(order, nhwc, sizeof nhwc);
    if (!b16 && !is_nhwc && !xbuf_order_plain(order, 4)) return TS_ERR_UNSUPPORTED;
    const dnnl_memory_desc_t xmd = xl->md;
    int xb = xplan_value_buf(p, xv);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    se_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    *s = (se_state){.N = N, .C = C, .Cp = b16 ? (C + 15) / 16 * 16 : C, .HW = HW, .R = R, .nhwc = is_nhwc,
                    .blocks16 = b16, .scale = mul >= 0, .npo1 = f1->npo,
                    .npo2 = f2->npo, .threads = xv_threads(p)};
    memcpy(s->po1, f1->po, sizeof f1->po);
    memcpy(s->po2, f2->po, sizeof f2->po);
    s->w1 = malloc(sizeof(float) * (size_t)(R * C));
    s->b1 = malloc(sizeof(float) * (size_t)R);
    s->w2t = malloc(sizeof(float) * (size_t)(R * C));
    s->b2 = malloc(sizeof(float) * (size_t)C);
    if (s->w1 && s->b1 && s->w2t && s->b2) {
        take_conv(p, c1, f1, s->w1, s->b1, false);
        take_conv(p, c2, f2, s->w2t, s->b2, true);
    }
    ts_status e = TS_OK;
    if (!s->w1 || !s->b1 || !s->w2t || !s->b2 || (e = xstep_alloc(st, 1, 1, err)))
        return e ? e : ts_error_set(err, TS_ERR_NOMEM, "node '%s': out of memory packing the squeeze-excite gate",
                                    nd->name);
    st->in[0] = xb;
    st->out[0] = xplan_value_buf(p, mul >= 0 ? xplan_node(p, mul)->outputs[0] : f2->out_value);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    st->scratch_bytes = sizeof(float) * (size_t)(3 * s->Cp + R);
    /* the scaled tensor keeps x's channels-last layout (or blocks) for the conv after it */
    if (mul >= 0 && is_nhwc) xv_set_order(p, st->out[0], nhwc);
    if (mul >= 0 && b16) {
        xbuf *yb = &p->bufs[st->out[0]];
        yb->blocked = true;
        yb->md = xmd;
        yb->bytes = dnnl_memory_desc_get_size(&xmd);
    }
    return TS_OK;
}

const xkernel xk_vec_se = {"vec.se", se_build, se_run, se_destroy};
