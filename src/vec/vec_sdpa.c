/* An encoder's attention as one step (vec.sdpa): for each head, blocks of
 * SD_BLOCK query rows
 *     S = Q Kt [x c]      P = Softmax(S) over the keys      Y = P V
 * with the block's scores in a scratch of SD_BLOCK x t floats (L1d: the
 * lowering stage bounds t so, lower_attention.c's xgroup_sdpa, which
 * decides the group and states the pattern).  Unfused, the scores are a
 * [heads, s, t] tensor written by one oneDNN product, read and written by
 * vec.softmax and read by the second product: ViT-B/16's 1.9 MB a layer.
 *
 * What it computes: the scores and Y as float32 sums of products with
 * fused multiply-adds in key / row order (oneDNN's products sum in the
 * same order on the encoder's and ViT's shapes: bit-identical outputs),
 * the scale after the sum as the Mul node does, the softmax as
 * vec.softmax's AVX-512 rows do (vec_exp16.h's exponential, 0 below e^-80,
 * probabilities below FLT_MIN 0, the same operations on the same scores).
 * Tested against the unfused plan and the reference interpreter
 * (tests/unit/test_vec_sdpa.c).
 *
 * Register blocking: SD_ROWS rows x SD_COLS vectors of 16 scores are 16
 * accumulators, each key-row load feeding SD_ROWS multiply-adds; the
 * product P V likewise holds SD_ROWS rows x SD_COLS vectors of the output.
 * An item is SD_SUB such row groups sharing each chunk of Kt and of V
 * while it is in L1d: with one group (8 rows) ViT's shape re-read its
 * head's Kt and V (50 KB each, L2) every 8 rows and took more CPU than
 * the unfused plan (docs/runtime.md).  Parallel over (head, row block).
 * AVX-512 only: the group forms only where the CPU has it. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "vec/vec.h"

#define SD_ROWS 8 /* query rows in registers */
#define SD_COLS 2 /* vectors of 16 scores (or outputs) a row handled together */
#define SD_SUB 2  /* sub-blocks of SD_ROWS rows an item (lower_attention.c: SDPA_ROWS = their rows) */
#define SD_BLOCK (SD_ROWS * SD_SUB)

typedef struct sd_state {
    int64_t nb, heads, s, t, d, dv; /* leading dims (flattened), the last of them, rows, keys, widths */
    int64_t tp;                     /* t rounded up to whole vectors: a scratch row */
    bool ytr;                       /* output [.., s, heads, dv] (a Transpose merged) */
    int threads;
} sd_state;

/* Scores of the block's rows q[] for keys j0 .. j0 + 16 nv (the last vector
 * masked by `last`), times c when scaled, stored in sc (row stride tp);
 * lanes past t get -inf, so the softmax needs no tail. */
__attribute__((target("avx512f"), always_inline)) static inline void
sd_scores(const float *const *q, const float *kt, int64_t d, int64_t t, int64_t j0, const int nv, __mmask16 last,
          float *sc, int64_t tp, float c, bool scaled)
{
    __m512 acc[SD_ROWS][SD_COLS];
#pragma GCC unroll 8
    for (int r = 0; r < SD_ROWS; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i++) {
        const float *kr = kt + i * t + j0;
        __m512 kv[SD_COLS];
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++)
            kv[v] = v == nv - 1 ? _mm512_maskz_loadu_ps(last, kr + 16 * v) : _mm512_loadu_ps(kr + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < SD_ROWS; r++) {
            const __m512 qb = _mm512_set1_ps(q[r][i]);
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_fmadd_ps(qb, kv[v], acc[r][v]);
        }
    }
    const __m512 cv = _mm512_set1_ps(c), ninf = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int r = 0; r < SD_ROWS; r++)
#pragma GCC unroll 8
        for (int v = 0; v < nv; v++) {
            __m512 x = scaled ? _mm512_mul_ps(acc[r][v], cv) : acc[r][v];
            if (v == nv - 1) x = _mm512_mask_blend_ps(last, ninf, x);
            _mm512_storeu_ps(sc + r * tp + j0 + 16 * v, x);
        }
}

/* y[r] (rows < rows) columns c0 .. c0 + 16 nv = sum over keys j of P[r][j] V[j]. */
__attribute__((target("avx512f"), always_inline)) static inline void
sd_pv(const float *pr, int64_t tp, const float *v, int64_t t, int64_t dv, int64_t c0, const int nv, float *const *y,
      int rows)
{
    __m512 acc[SD_ROWS][SD_COLS];
#pragma GCC unroll 8
    for (int r = 0; r < SD_ROWS; r++)
#pragma GCC unroll 8
        for (int k = 0; k < nv; k++) acc[r][k] = _mm512_setzero_ps();
    for (int64_t j = 0; j < t; j++) {
        const float *vr = v + j * dv + c0;
        __m512 vv[SD_COLS];
#pragma GCC unroll 8
        for (int k = 0; k < nv; k++) vv[k] = _mm512_loadu_ps(vr + 16 * k);
#pragma GCC unroll 8
        for (int r = 0; r < SD_ROWS; r++) {
            const __m512 pb = _mm512_set1_ps(pr[r * tp + j]);
#pragma GCC unroll 8
            for (int k = 0; k < nv; k++) acc[r][k] = _mm512_fmadd_ps(pb, vv[k], acc[r][k]);
        }
    }
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
        for (int k = 0; k < nv; k++) _mm512_storeu_ps(y[r] + c0 + 16 * k, acc[r][k]);
}

/* One (head b, row block i0) item: SD_SUB sub-blocks of SD_ROWS rows, each
 * key chunk of Kt (d x 32 floats) and each column chunk of V (t x 32)
 * used by every sub-block while it is in L1d. */
__attribute__((target("avx512f"))) static void sd_block(const sd_state *s, const float *q, const float *kt,
                                                        const float *v, const float *cp, float *y, int64_t b,
                                                        int64_t i0, float *sc)
{
    const int64_t t = s->t, d = s->d, dv = s->dv, tp = s->tp;
    const int rows = (int)(s->s - i0 < SD_BLOCK ? s->s - i0 : SD_BLOCK), nsub = (rows + SD_ROWS - 1) / SD_ROWS;
    const float *qr[SD_SUB][SD_ROWS];
    float *yr[SD_SUB][SD_ROWS];
    int srows[SD_SUB];
    for (int u = 0; u < nsub; u++) {
        srows[u] = rows - u * SD_ROWS < SD_ROWS ? rows - u * SD_ROWS : SD_ROWS;
        for (int r = 0; r < SD_ROWS; r++) {
            /* a short sub-block repeats its last row, not stored */
            const int64_t i = i0 + u * SD_ROWS + (r < srows[u] ? r : srows[u] - 1);
            qr[u][r] = q + (b * s->s + i) * d;
            yr[u][r] = s->ytr ? y + (((b / s->heads) * s->s + i) * s->heads + b % s->heads) * dv
                              : y + (b * s->s + i) * dv;
        }
    }
    kt += b * d * t;
    v += b * t * dv;
    const float c = cp ? *cp : 1.0f;
    for (int64_t j0 = 0; j0 < t; j0 += 16 * SD_COLS) {
        const int64_t left = t - j0, nvec = (left + 15) / 16;
        const int nv = (int)(nvec < SD_COLS ? nvec : SD_COLS);
        const int64_t tail = left - 16 * (nv - 1); /* keys in the last vector */
        const __mmask16 last = tail >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << tail) - 1);
        for (int u = 0; u < nsub; u++) {
            float *su = sc + u * SD_ROWS * tp;
            if (nv == 2)
                sd_scores(qr[u], kt, d, t, j0, 2, last, su, tp, c, cp != NULL);
            else
                sd_scores(qr[u], kt, d, t, j0, 1, last, su, tp, c, cp != NULL);
        }
    }
    for (int r = 0; r < rows; r++) xv_softmax_row_avx512(sc + r * tp, sc + r * tp, tp); /* -inf past the keys */
    for (int64_t c0 = 0; c0 < dv; c0 += 16 * SD_COLS) {
        const int64_t nvec = (dv - c0) / 16; /* dv is whole vectors (lower_attention.c) */
        for (int u = 0; u < nsub; u++) {
            const float *pu = sc + u * SD_ROWS * tp;
            if (nvec >= 2)
                sd_pv(pu, tp, v, t, dv, c0, 2, yr[u], srows[u]);
            else
                sd_pv(pu, tp, v, t, dv, c0, 1, yr[u], srows[u]);
        }
    }
}

static void sd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const sd_state *s = st->state;
    const float *q = in[XATT_Q], *kt = in[XATT_K], *v = in[XATT_V], *cp = in[XATT_SCALE];
    float *y = out[0];
    const int64_t nblk = (s->s + SD_BLOCK - 1) / SD_BLOCK, items = s->nb * nblk;
    const int64_t row = SD_BLOCK * s->tp;
    if (s->threads > 1 && items > 1 && s->nb * s->s * s->t * (s->d + s->dv) >= XV_PAR_MIN / 4) {
#pragma omp parallel num_threads(s->threads)
        {
            float *sc = (float *)scratch + (int64_t)omp_get_thread_num() * row;
#pragma omp for schedule(static)
            for (int64_t it = 0; it < items; it++) sd_block(s, q, kt, v, cp, y, it / nblk, it % nblk * SD_BLOCK, sc);
        }
    } else /* no team for a small step (vec.h: XV_PAR_FOR) */
        for (int64_t it = 0; it < items; it++)
            sd_block(s, q, kt, v, cp, y, it / nblk, it % nblk * SD_BLOCK, (float *)scratch);
}

static ts_status sd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    (void)n; /* the group holds the nodes and the step's inputs */
    const ts_graph *g = p->g;
    const xgroup *gr = p->group;
    const int *in = gr->att_in;
    const ts_shape *qs = &g->values[in[XATT_Q]].shape, *ks = &g->values[in[XATT_K]].shape,
                   *vs = &g->values[in[XATT_V]].shape;
    const int r = qs->rank;
    sd_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->nb = 1;
    for (int d = 0; d < r - 2; d++) s->nb *= qs->dims[d];
    s->heads = qs->dims[r - 3];
    s->s = qs->dims[r - 2];
    s->d = qs->dims[r - 1];
    s->t = ks->dims[r - 1];
    s->dv = vs->dims[r - 1];
    s->tp = (s->t + 15) & ~(int64_t)15;
    s->ytr = gr->att_ytr;
    s->threads = xv_threads(p);
    st->scratch_bytes = sizeof(float) * (size_t)(SD_BLOCK * s->tp) * (size_t)s->threads;
    if (xstep_alloc(st, XATT_N, 1, err)) return err->code;
    for (int j = 0; j < XATT_N; j++) {
        st->in[j] = in[j] < 0 ? -1 : xplan_plain(p, xplan_value_buf(p, in[j]), err);
        if (in[j] >= 0 && st->in[j] < 0) return err->code ? err->code : TS_ERR_INVALID;
    }
    st->out[0] = xplan_value_buf(p, gr->y);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

const xkernel xk_vec_sdpa = {"vec.sdpa", sd_build, sd_run, free};
