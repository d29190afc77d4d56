/* MatMul with a few rows and constant weights (GEMV-like: RNN cells such
 * as nasrnn's 1x512 @ 512x512), plus the element-wise chain after it and
 * the products by the same weights stacked with it, both decided by the
 * lowering stage (lower_gemv.c): this file reads no other node
 * (tests/cli/kernel_nodes.sh).
 *
 * Why not oneDNN here: at M = 1 the multiply is a single pass over the
 * weights, a few microseconds, and oneDNN's per-call cost is of the same
 * order; it also pre-packs a private copy of the weights per node, so a
 * weight shared by five nodes is read from five places.  This kernel packs
 * each constant once per plan (shared by every node using it), streams it
 * in panels of XG_NB columns with up to four rows' accumulators in
 * registers, and applies the fused element-wise program (vec_eltwise.h)
 * to the result while it is in cache.  Larger M stays on oneDNN
 * (dnnl_matmul.c).  Measurements: docs/runtime.md.
 *
 * Gemm without transA (a CNN's classifier head at batch 1: efficientnet_b0
 * 1280x1000, transB = 1) is taken too: B^T is packed into the same panels,
 * alpha and beta * C (C broadcast along rows) are applied per panel. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "exec/pack_cache.h"
#include "exec/plan_internal.h"
#include "exec/half.h"
#include "exec/roofline.h"
#include "vec/vec_eltwise.h"
#include "ops/attrs.h"
#include "ops/list.h"
#include "ops/op.h"
#include "measure/wait_policy.h"

/* Largest number of rows (product of A's leading dims) taken here: at 16
 * rows (16x512x512) this kernel and oneDNN measured even. */
#define XG_MAX_ROWS XGROUP_GEMV_ROWS
/* Below this many multiply-adds the step runs on one thread: waking a
 * sleeping OpenMP team (passive waiting, a loaded machine) cost more than
 * it saved on a 512x512 product (one thread 9.5 us, two 19 us, best of
 * 3000).  With spinning threads (docs/runtime.md) the second thread pays
 * much earlier: nasrnn batch 1, whose stacked products are 1-5 x 512 x
 * 512, 0.89-0.97 ms vs 0.63-0.67 ms from XG_PAR_MIN_SPIN. */
#define XG_PAR_MIN (1 << 22)
#define XG_PAR_MIN_SPIN (1 << 18)
/* From weights of 4x a core's L2 (roofline.c's cache sizes: 4 MiB on the
 * 1 MiB-L2 EPYC and on the Xeons it was measured on, 1M floats) the step is
 * parallel whatever the wait mode: each product streams the weights from
 * memory once (a classifier head: efficientnet_b0 1280x1000, resnet50
 * 2048x1000), a few hundred microseconds bound by memory bandwidth, which
 * one core alone does not saturate; a wake-up is ~10 us. */
#define XG_PAR_STREAM_L2 4
#define XG_NB 64 /* columns per panel: four 16-float vectors */

typedef float xg_v16 __attribute__((vector_size(64), aligned(4))); /* unaligned loads/stores */

typedef struct xg_state {
    int64_t rows, K, N; /* rows: all stacked products' rows together */
    int threads;
    bool streams; /* the weights stream from memory (XG_PAR_STREAM_L2) */
    xv_prog epi; /* fused element-wise chain (the first product's); epi.nins == 0: none */
    /* Stacked products (lower_gemv.c): nstack > 1 products by the
     * same weights, product i reading in[ain[i]] and writing out[i], with
     * mrows[i] rows; rows gathered into scratch, multiplied once, scattered */
    int nstack;
    int ain[XG_MAX_ROWS];
    int64_t mrows[XG_MAX_ROWS];
    /* Gemm: y = alpha * (x B) + bias[column], bias = beta * C broadcast
     * along rows (NULL: none); applied per panel while it is in cache */
    float alpha;
    float *bias;
    /* A float16 plan's packed weight stored 16-bit (half.c store_half):
     * the panels are float16 values, converted as they are loaded
     * (panel16), not widened into scratch first (xv_gemv_half). */
    bool w16;
} xg_state;

/* Weights are re-laid out once at plan time as panels of XG_NB columns,
 * each panel K rows of XG_NB contiguous floats (the last panel padded with
 * zero columns): the kernel then streams memory strictly in order, which
 * measured 1.6x faster than walking the row-major constant (a 512x512
 * product, one thread, weights cycling through 16 matrices as in nasrnn:
 * 9.3 vs 15 us; oneDNN ~18 us). */

/* A macro, not a function: 64-byte vectors passed by value would change
 * the calling convention of a function compiled without AVX-512 (clang
 * refuses it). */
#define XG_STORE(y, v0, v1, v2, v3, nb)                                                                          \
    do {                                                                                                         \
        xg_v16 t_[4] = {v0, v1, v2, v3};                                                                         \
        if ((nb) == XG_NB)                                                                                       \
            for (int q_ = 0; q_ < 4; q_++) *(xg_v16 *)((y) + 16 * q_) = t_[q_];                                  \
        else                                                                                                     \
            memcpy((y), t_, (size_t)(nb) * sizeof(float));                                                       \
    } while (0)

/* The accumulators are named variables, not arrays, and the row loop is
 * unrolled by hand: GCC at -O2 kept arrays of vectors in memory. */
#define XG_ACC(r) xg_v16 r##0 = {0}, r##1 = {0}, r##2 = {0}, r##3 = {0}
#define XG_FMA(r, xv)                                                                                            \
    do {                                                                                                         \
        const float x_ = (xv);                                                                                   \
        r##0 += x_ * w0, r##1 += x_ * w1, r##2 += x_ * w2, r##3 += x_ * w3;                                      \
    } while (0)
#define XG_LOADW(w) const xg_v16 w0 = XG_LD(w), w1 = XG_LD((w) + 16), w2 = XG_LD((w) + 32), w3 = XG_LD((w) + 48)
#define XG_LD(p) (*(const xg_v16 *)(p))

/* Rows m0..m0+MR-1 (MR a constant 1..6) of the product for panel P,
 * written to y at columns j0..j0+nb-1.  Six rows: 24 accumulators and 4
 * weight vectors of the 32 AVX-512 registers, so five or six stacked
 * rows (nasrnn's five time steps) read each panel once, not 4 + 1 times. */
#define XG_ROWS(MR)                                                                                              \
    do {                                                                                                         \
        XG_ACC(a);                                                                                               \
        XG_ACC(b);                                                                                               \
        XG_ACC(c);                                                                                               \
        XG_ACC(d);                                                                                               \
        XG_ACC(e);                                                                                               \
        XG_ACC(f);                                                                                               \
        const float *x0 = x + m0 * K;                                                                            \
        __typeof__(P) w = P;                                                                                     \
        for (int64_t k = 0; k < K; k++, w += XG_NB) {                                                            \
            XG_LOADW(w);                                                                                         \
            XG_FMA(a, x0[k]);                                                                                    \
            if (MR > 1) XG_FMA(b, x0[K + k]);                                                                    \
            if (MR > 2) XG_FMA(c, x0[2 * K + k]);                                                                \
            if (MR > 3) XG_FMA(d, x0[3 * K + k]);                                                                \
            if (MR > 4) XG_FMA(e, x0[4 * K + k]);                                                                \
            if (MR > 5) XG_FMA(f, x0[5 * K + k]);                                                                \
        }                                                                                                        \
        float *y0 = y + m0 * N + j0;                                                                             \
        XG_STORE(y0, a0, a1, a2, a3, nb);                                                                        \
        if (MR > 1) XG_STORE(y0 + N, b0, b1, b2, b3, nb);                                                        \
        if (MR > 2) XG_STORE(y0 + 2 * N, c0, c1, c2, c3, nb);                                                    \
        if (MR > 3) XG_STORE(y0 + 3 * N, d0, d1, d2, d3, nb);                                                    \
        if (MR > 4) XG_STORE(y0 + 4 * N, e0, e1, e2, e3, nb);                                                    \
        if (MR > 5) XG_STORE(y0 + 5 * N, f0, f1, f2, f3, nb);                                                    \
    } while (0)

/* GCC in ISO C mode leaves a*b+c as two operations; clang (the fuzz build)
 * has no optimize attribute and contracts within an expression anyway. */
#ifdef __clang__
#define XG_FP_CONTRACT
#else
#define XG_FP_CONTRACT __attribute__((optimize("fp-contract=fast")))
#endif

/* The panel body, for float32 panels (panel) and float16 ones (panel16:
 * XG_LD converts as it loads). */
#define XG_PANEL_BODY                                                                                             \
    if (rows == 1) { /* two k at a time: eight independent accumulators hide the FMA latency */                   \
        XG_ACC(a);                                                                                                \
        XG_ACC(b);                                                                                                \
        __typeof__(P) w = P;                                                                                      \
        int64_t k = 0;                                                                                            \
        for (; k + 2 <= K; k += 2, w += 2 * XG_NB) {                                                              \
            {                                                                                                     \
                XG_LOADW(w);                                                                                      \
                XG_FMA(a, x[k]);                                                                                  \
            }                                                                                                     \
            {                                                                                                     \
                XG_LOADW(w + XG_NB);                                                                              \
                XG_FMA(b, x[k + 1]);                                                                              \
            }                                                                                                     \
        }                                                                                                         \
        if (k < K) {                                                                                              \
            XG_LOADW(w);                                                                                          \
            XG_FMA(a, x[k]);                                                                                      \
        }                                                                                                         \
        XG_STORE(y + j0, a0 + b0, a1 + b1, a2 + b2, a3 + b3, nb);                                                 \
        return;                                                                                                   \
    }                                                                                                             \
    int64_t m0 = 0;                                                                                               \
    for (; m0 + 6 <= rows; m0 += 6) XG_ROWS(6);                                                                   \
    switch (rows - m0) {                                                                                          \
    case 5: XG_ROWS(5); break;                                                                                    \
    case 4: XG_ROWS(4); break;                                                                                    \
    case 3: XG_ROWS(3); break;                                                                                    \
    case 2: XG_ROWS(2); break;                                                                                    \
    case 1: XG_ROWS(1); break;                                                                                    \
    default: break;                                                                                               \
    }

/* One panel (columns [j0, j0+nb)) for every row; the multiply-adds become FMAs. */
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) XG_FP_CONTRACT static void
panel(const float *x, const float *P, float *y, int64_t rows, int64_t K, int64_t N, int64_t j0, int64_t nb)
{
    XG_PANEL_BODY
}

/* The same over float16 panels: each weight vector converted as it is
 * loaded (vcvtph2ps), half the bytes streamed of the widened panels and
 * no widening pass: a classifier head is a single pass over its weight
 * (ResNet-50's 2048x1000 at batch 1-4), bound by memory.  AVX-512 only
 * (xv_gemv_half declines elsewhere: the weight is widened as before). */
#undef XG_LD
#define XG_LD(p) ((xg_v16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p))))
__attribute__((target("arch=x86-64-v4"))) XG_FP_CONTRACT static void
panel16(const float *x, const uint16_t *P, float *y, int64_t rows, int64_t K, int64_t N, int64_t j0, int64_t nb)
{
    XG_PANEL_BODY
}
#undef XG_LD
#define XG_LD(p) (*(const xg_v16 *)(p))

static void gemv_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const xg_state *c = s->state;
    const float *x = in[0], *W = in[1]; /* W: the packed panels */
    float *y = out[0];
    const int64_t rows = c->rows, K = c->K, N = c->N, npanel = (N + XG_NB - 1) / XG_NB;
    if (c->nstack > 1) { /* rows of every stacked product, contiguous */
        float *xs = scratch, *ys = xs + rows * K;
        for (int i = 0, r = 0; i < c->nstack; r += (int)c->mrows[i], i++)
            memcpy(xs + r * K, in[c->ain[i]], sizeof(float) * (size_t)(c->mrows[i] * K));
        x = xs, y = ys;
    }
    /* the wait mode can change between runs (measure/wait_policy.c) */
    const int64_t par_min = ts_wait_threads_sleep() ? XG_PAR_MIN : XG_PAR_MIN_SPIN;
    const bool par = c->threads > 1 && npanel > 1 && (rows * K * N >= par_min || c->streams);
    XV_PAR_FOR(p, npanel, c->threads, par, {
        int64_t j0 = p * XG_NB;
        const int64_t nb = N - j0 < XG_NB ? N - j0 : XG_NB;
        if (c->w16)
            panel16(x, (const uint16_t *)W + p * K * XG_NB, y, rows, K, N, j0, nb);
        else
            panel(x, W + p * K * XG_NB, y, rows, K, N, j0, nb);
        if (c->alpha != 1.0f || c->bias)
            for (int64_t r = 0; r < rows; r++) {
                float *yr = y + r * N + j0;
                for (int64_t j = 0; j < nb; j++) yr[j] = c->alpha * yr[j] + (c->bias ? c->bias[j0 + j] : 0.0f);
            }
    });
    if (c->nstack > 1)
        for (int i = 0, r = 0; i < c->nstack; r += (int)c->mrows[i], i++)
            memcpy(out[i], y + r * N, sizeof(float) * (size_t)(c->mrows[i] * N));
    if (c->epi.nins) { /* the chain reads the product as its running result (acc = y) */
        const xstep es = {.state = (void *)&c->epi};
        xv_prog_run(&es, in + 2, out, scratch);
    }
}

/* A weight released right after this node (weights_once.c) is packed
 * while its pages go back to the OS, so the peak is not the weight twice
 * (a 64 MiB classifier weight: tests/unit/test_mem_peak.c).  From 1 MiB. */
#define XG_CONSUME_MIN (1 << 20)

/* Whole pages of the original from *next up to `end` back to the OS;
 * *next: the first page not given back yet. */
static void give_back_pages(uintptr_t *next, uintptr_t end)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096, a = (*next + page - 1) & ~(page - 1), b = end & ~(page - 1);
    if (b > a) {
        madvise((void *)a, b - a, MADV_DONTNEED);
        *next = b;
    }
}

/* Buffer holding B (K x N) as panels; one per constant, shared by every
 * node that multiplies by it (nasrnn uses each weight 5 times); -1 when
 * out of memory. */
static int packed_weights(xplan *p, const ts_tensor *B, bool trans, bool consume)
{
    /* a transposed B (Gemm transB = 1, stored N x K) packs differently */
    static const char tag_plain[] = "vec.gemv panels", tag_trans[] = "vec.gemv panels of B^T";
    const char *tag = trans ? tag_trans : tag_plain;
    for (int b = 0; b < p->nbufs; b++)
        if (p->bufs[b].kind == XB_CONST && p->bufs[b].packed_from == B->data && p->bufs[b].packing == tag) return b;
    const int64_t K = B->shape.dims[trans ? 1 : 0], N = B->shape.dims[trans ? 0 : 1], npanel = (N + XG_NB - 1) / XG_NB;
    const ts_shape ps = {.rank = 1, .dims = {npanel * K * XG_NB}};
    const size_t bytes = sizeof(float) * (size_t)ps.dims[0];
    /* packed by an earlier plan of the same session (pack_cache.c); a
     * half-precision plan narrows its own packed copies (half.c): none */
    ts_pack_cache *pc = xpack_cacheable(p->opts.pack_cache, B) && !p->half ? p->opts.pack_cache : NULL;
    xpack_entry *e = pc ? xpack_find(pc, B, tag, 0) : NULL;
    float *d = e ? xpack_data(e) : aligned_alloc(64, bytes);
    if (!d) return -1;
    /* the buffer first: once a page of the original is gone, nothing may fail */
    int b = xplan_new_buf(p, -1, TS_F32, &ps);
    if (b < 0) {
        if (e) xpack_unref(e);
        else free(d);
        return -1;
    }
    xbuf *x = &p->bufs[b];
    x->kind = XB_CONST;
    x->data = d;
    x->packed_from = B->data;
    x->packing = tag;
    if (e) {
        x->shared = e;
        return b;
    }
    const float *w = B->data;
    consume = consume && B->nbytes >= XG_CONSUME_MIN;
    uintptr_t next = (uintptr_t)w;
    if (trans) /* stored N x K: a panel reads XG_NB whole stored rows */
        for (int64_t pn = 0; pn < npanel; pn++) {
            for (int64_t k = 0; k < K; k++)
                for (int64_t j = 0; j < XG_NB; j++) {
                    int64_t col = pn * XG_NB + j;
                    d[(pn * K + k) * XG_NB + j] = col < N ? w[col * K + k] : 0.0f;
                }
            int64_t done = (pn + 1) * XG_NB < N ? (pn + 1) * XG_NB : N;
            if (consume) give_back_pages(&next, (uintptr_t)(w + done * K));
        }
    else /* stored K x N: row k of every panel from stored row k */
        for (int64_t k = 0; k < K; k++) {
            for (int64_t pn = 0; pn < npanel; pn++)
                for (int64_t j = 0; j < XG_NB; j++) {
                    int64_t col = pn * XG_NB + j;
                    d[(pn * K + k) * XG_NB + j] = col < N ? w[k * N + col] : 0.0f;
                }
            if (consume) give_back_pages(&next, (uintptr_t)(w + (k + 1) * N));
        }
    /* cached, or (out of memory for the entry) the plan's own */
    x->shared = pc ? xpack_add(pc, B, tag, 0, d, bytes) : NULL;
    x->owns_data = !x->shared;
    return b;
}

/* Gemm's C as beta * C per column (C broadcasts along rows: a scalar, or
 * [N] / [1, N]); *bias = NULL when there is none.  False: C is not
 * constant or varies along rows (left to oneDNN). */
static bool gemm_bias(xplan *p, const ts_node *nd, int64_t N, double beta, float **bias, ts_error *err)
{
    *bias = NULL;
    if (nd->ninputs < 3 || nd->inputs[2] < 0 || beta == 0.0) return true;
    const ts_tensor *C = xplan_const(p, nd->inputs[2]);
    if (!C || C->dtype != TS_F32) return false;
    const int64_t cn = ts_tensor_numel(C);
    if (cn != 1) {
        if (C->shape.rank < 1 || C->shape.dims[C->shape.rank - 1] != N || cn != N) return false;
    }
    float *b = malloc(sizeof(float) * (size_t)N);
    if (!b) {
        ts_error_set(err, TS_ERR_NOMEM, "out of memory for a Gemm bias");
        return false;
    }
    const float *cd = C->data;
    for (int64_t j = 0; j < N; j++) b[j] = (float)(beta * cd[cn == 1 ? 0 : j]);
    *bias = b;
    return true;
}

static void gemv_free(void *state)
{
    xg_state *c = state;
    if (c) free(c->bias);
    free(c);
}

static ts_status gemv_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const xgroup *gr = p->group;
    const bool gemm = nd->op == &ts_op_gemm;
    const ts_gemm_attrs *ga = gemm ? nd->attrs : NULL;
    if (nd->noutputs != 1 || !xv_all_f32(p, n)) return TS_ERR_UNSUPPORTED;
    if (gemm ? nd->ninputs < 2 || nd->ninputs > 3 || !ga || ga->trans_a : nd->ninputs != 2) return TS_ERR_UNSUPPORTED;
    const ts_shape *a = &g->values[nd->inputs[0]].shape;
    const ts_tensor *B = xplan_const(p, nd->inputs[1]);
    /* constant 2-D weights (1-D B changes the output rank: left to oneDNN) */
    if (!B || B->shape.rank != 2 || a->rank < 1 || (gemm && a->rank != 2)) return TS_ERR_UNSUPPORTED;
    const bool tb = gemm && ga->trans_b;
    int64_t K = B->shape.dims[tb ? 1 : 0], N = B->shape.dims[tb ? 0 : 1], rows = 1;
    if (a->dims[a->rank - 1] != K || K < 1 || N < 1) return TS_ERR_UNSUPPORTED;
    for (int i = 0; i < a->rank - 1; i++) rows *= a->dims[i];
    if (rows > XG_MAX_ROWS || rows < 1) return TS_ERR_UNSUPPORTED;

    xg_state *c = xv_state(sizeof *c, err);
    if (!c) return err->code;
    s->state = c;
    c->rows = rows, c->K = K, c->N = N;
    c->threads = xv_threads(p);
    c->streams = K * N * (int64_t)sizeof(float) >= XG_PAR_STREAM_L2 * (int64_t)xroof_caches_get().l2;
    c->alpha = gemm ? (float)ga->alpha : 1.0f;
    if (gemm && !gemm_bias(p, nd, N, ga->beta, &c->bias, err)) return err->code ? err->code : TS_ERR_UNSUPPORTED;

    /* the products stacked with this one, rows after its own */
    c->nstack = 1 + gr->gemv_nstack, c->mrows[0] = rows;
    for (int i = 1; i < c->nstack; i++) {
        const ts_shape *ai = &g->values[xplan_node(p, gr->gemv_stack[i - 1])->inputs[0]].shape;
        c->mrows[i] = ts_shape_numel(ai) / K;
        c->rows += c->mrows[i];
    }
    /* the element-wise chain after the product, run with it as acc */
    const int *ext = gr->gemv_chain ? gr->gemv_chain->ext : NULL;
    if (gr->gemv_chain) c->epi = gr->gemv_chain->prog;
    const int cur = gr->y;

    if (xstep_alloc(s, 2 + c->epi.next + c->nstack - 1, c->nstack, err)) return err->code;
    s->in[0] = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err);
    s->in[1] = packed_weights(p, B, tb, xweights_once_consumable(p, nd->inputs[1], n));
    if (s->in[0] < 0 || s->in[1] < 0) return err->code ? err->code : TS_ERR_INVALID;
    const ts_shape *shapes[XV_MAXIN];
    for (int j = 0; j < c->epi.next; j++) {
        shapes[j] = &g->values[ext[j]].shape;
        s->in[2 + j] = xplan_plain(p, xplan_value_buf(p, ext[j]), err);
        if (s->in[2 + j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    s->out[0] = xplan_value_buf(p, cur);
    if (s->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    c->ain[0] = 0;
    for (int i = 1; i < c->nstack; i++) {
        const ts_node *o = xplan_node(p, gr->gemv_stack[i - 1]);
        int ai = c->ain[i] = 2 + c->epi.next + i - 1;
        s->in[ai] = xplan_plain(p, xplan_value_buf(p, o->inputs[0]), err);
        s->out[i] = xplan_value_buf(p, o->outputs[0]);
        if (s->in[ai] < 0 || s->out[i] < 0) return err->code ? err->code : TS_ERR_NOMEM;
    }
    if (c->nstack > 1) s->scratch_bytes = sizeof(float) * (size_t)(c->rows * (K + N));
    if (c->epi.nins) {
        xv_geometry(&c->epi, &g->values[nd->outputs[0]].shape, shapes);
        c->epi.threads = c->threads;
    }
    return TS_OK;
}

const xkernel xk_vec_gemv = {"vec.gemv", gemv_build, gemv_run, gemv_free};

size_t xv_gemv_half(xstep *s, int slot, ts_dtype half)
{
    xg_state *c = s->state;
    if (s->k != &xk_vec_gemv || !c || slot != 1 || half != TS_F16 || !__builtin_cpu_supports("avx512f")) return 0;
    c->w16 = true;
    return s->scratch_bytes ? s->scratch_bytes : 64;
}
