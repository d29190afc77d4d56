/* Softmax and LogSoftmax on float32.  The input is viewed as
 * [outer, len, inner]: from opset 13 `len` is the one axis, before it the
 * whole trailing block from `axis` (inner = 1), as src/ops/softmax.c says.
 * Rows (inner = 1) are the common case: max, then exp and sum in one pass
 * writing exp into y, then a scale, each a vector loop over a row that
 * stays in cache.  inner > 1 runs the same passes across `inner`. */
#include <float.h>
#include <immintrin.h>
#include <stdlib.h>
#include "vec/vec.h"
#include "vec/vec_exp16.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct sm_state {
    int64_t outer, len, inner;
    bool log;
    bool avx512; /* rows (inner 1, not LogSoftmax) by xv_softmax_row_avx512 */
    int threads;
} sm_state;

#define SM_CHUNK 256 /* inner positions handled together (stack arrays) */

/* Probabilities below the smallest normal float become 0.  A masked score
 * (Swin's shifted-window mask adds -100) gives e^-100 relative to the row's
 * maximum: a subnormal, and the MatMul that reads the probabilities next
 * runs 10-20x slower on subnormal operands (x86 microcode assists; oneDNN
 * does not set DAZ).  Measured on swin_t, one thread: the attention's
 * second MatMul in shifted blocks 5.4 ms instead of 0.34 ms. */
XV_INLINE float xv_flush(float v) { return v < FLT_MIN ? 0.0f : v; }

/* e^d for d = x - max <= 0, 0 below e^-80 (1.8e-35, far under any
 * tolerance): the exponential itself would go subnormal near -87 (xv_exp
 * scales by 2^-126) and pay the same assists in this loop. */
#define SM_EXP_MIN (-80.0f)
XV_INLINE float sm_exp(float d) { return d < SM_EXP_MIN ? 0.0f : xv_exp(d < SM_EXP_MIN ? SM_EXP_MIN : d); }

/* A short row that is no whole number of vectors (Swin's windows: 49) in
 * a stack buffer padded with -inf to whole vectors of 16: no scalar
 * remainder in the max and exp passes.  Swin's rows: 2.0 -> 1.35 ns per
 * element (one thread, -O2 with the dynamic cost model). */
#define SM_SHORT 64
XV_CLONES static void sm_row_short(const float *x, float *y, int64_t n)
{
    float b[SM_SHORT] __attribute__((aligned(64)));
    const int64_t np = (n + 15) & ~(int64_t)15;
    for (int64_t i = 0; i < np; i++) b[i] = i < n ? x[i] : -INFINITY;
    float m = -INFINITY, sum = 0;
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < np; i++) m = b[i] > m ? b[i] : m;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < np; i++) {
        float e = sm_exp(b[i] - m); /* the padding gives 0 */
        b[i] = e;
        sum += e;
    }
    float r = 1.0f / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = xv_flush(b[i] * r);
}

/* Rows with AVX-512: masked loads and stores for rows that are no whole
 * number of vectors (Swin's windows: 49, ViT's 197 tokens): no copy into a
 * padded buffer (rows under 64) and no scalar tail of up to 15 elements a
 * pass, each with a scalar exponential (longer rows); lanes past the row
 * load as -inf and give 0.  Whole rows (the encoder's 128) too: the
 * exponential is vec_exp16.h's, 14 vector operations where sm_exp's
 * vectorized by the compiler takes about 32 without FMA contraction
 * (ISO C11); the encoder's softmax, 8 x 128 rows of 128, one thread,
 * fastest of 3000: 0.110 -> 0.048 ms (loaded Intel Xeon).  The same
 * results as sm_row / sm_row_short within an ulp or two of each
 * probability (the exponential's rounding, the order of the sum's
 * additions). */
__attribute__((target("avx512f"))) void xv_softmax_row_avx512(const float *x, float *y, int64_t n)
{
    const int64_t nf = n & ~(int64_t)15;
    const __mmask16 tm = (__mmask16)((1u << (n - nf)) - 1); /* the tail's lanes; 0 for whole vectors */
    const __m512 ninf = _mm512_set1_ps(-INFINITY), tiny = _mm512_set1_ps(FLT_MIN);
    __m512 m = ninf;
    for (int64_t i = 0; i < nf; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m); /* v > m ? v : m: a NaN never wins */
    if (tm) m = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, tm, x + nf), m);
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < nf; i += 16) {
        __m512 e = xv_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
        _mm512_storeu_ps(y + i, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tm) {
        __m512 e = xv_exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, tm, x + nf), mx));
        _mm512_mask_storeu_ps(y + nf, tm, e);
        sum = _mm512_add_ps(sum, e);
    }
    const __m512 r = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    /* xv_flush: below FLT_MIN 0, NaN kept */
    for (int64_t i = 0; i < nf; i += 16) {
        __m512 q = _mm512_mul_ps(_mm512_loadu_ps(y + i), r);
        _mm512_storeu_ps(y + i, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(q, tiny, _CMP_NLT_UQ), q));
    }
    if (tm) {
        __m512 q = _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, y + nf), r);
        _mm512_mask_storeu_ps(y + nf, tm, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(q, tiny, _CMP_NLT_UQ), q));
    }
}

XV_CLONES static void sm_row(const float *x, float *y, int64_t n, bool lg)
{
    if (!lg && n < SM_SHORT && n % 16) {
        sm_row_short(x, y, n);
        return;
    }
    float m = -INFINITY, sum = 0;
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    if (lg) {
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; i++) sum += sm_exp(x[i] - m);
        float sh = m + logf(sum);
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = x[i] - sh;
        return;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; i++) {
        float e = sm_exp(x[i] - m);
        y[i] = e;
        sum += e;
    }
    float r = 1.0f / sum;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = xv_flush(y[i] * r);
}

/* `cn` inner positions at x (row stride `inner`) over len entries. */
XV_CLONES static void sm_cols(const float *x, float *y, int64_t len, int64_t inner, int64_t cn, bool lg)
{
    float m[SM_CHUNK], s[SM_CHUNK];
    for (int64_t i = 0; i < cn; i++) m[i] = -INFINITY, s[i] = 0;
    for (int64_t l = 0; l < len; l++) {
        const float *xr = x + l * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) m[i] = xr[i] > m[i] ? xr[i] : m[i];
    }
    for (int64_t l = 0; l < len; l++) {
        const float *xr = x + l * inner;
        float *yr = y + l * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) {
            float e = sm_exp(xr[i] - m[i]);
            if (!lg) yr[i] = e;
            s[i] += e;
        }
    }
    for (int64_t i = 0; i < cn; i++) s[i] = lg ? m[i] + logf(s[i]) : 1.0f / s[i];
    for (int64_t l = 0; l < len; l++) {
        const float *xr = x + l * inner;
        float *yr = y + l * inner;
        if (lg) {
#pragma omp simd
            for (int64_t i = 0; i < cn; i++) yr[i] = xr[i] - s[i];
        } else {
#pragma omp simd
            for (int64_t i = 0; i < cn; i++) yr[i] = xv_flush(yr[i] * s[i]);
        }
    }
}

static void sm_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const sm_state *s = st->state;
    const float *x = in[0];
    float *y = out[0];
    const int64_t nchunk = (s->inner + SM_CHUNK - 1) / SM_CHUNK, items = s->outer * nchunk;
    (void)scratch;
    if (s->inner == 1 && !s->log && s->avx512) {
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && s->outer > 1 && s->outer * s->len >= XV_PAR_MIN / 4)
        for (int64_t o = 0; o < s->outer; o++) xv_softmax_row_avx512(x + o * s->len, y + o * s->len, s->len);
        return;
    }
    if (s->inner == 1) { /* rows: no chunk arithmetic (two divisions a row cost Swin's rows of 49 a third) */
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && s->outer > 1 && s->outer * s->len >= XV_PAR_MIN / 4)
        for (int64_t o = 0; o < s->outer; o++) sm_row(x + o * s->len, y + o * s->len, s->len, s->log);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && s->outer > 1 && s->outer * s->len * s->inner >= XV_PAR_MIN / 4)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nchunk, c0 = (it % nchunk) * SM_CHUNK;
        int64_t off = o * s->len * s->inner + c0;
        if (s->inner == 1)
            sm_row(x + off, y + off, s->len, s->log);
        else
            sm_cols(x + off, y + off, s->len, s->inner, s->inner - c0 < SM_CHUNK ? s->inner - c0 : SM_CHUNK, s->log);
    }
}

static ts_status sm_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (!xv_all_f32(p, n) || nd->noutputs != 1)
        return TS_ERR_UNSUPPORTED;
    const ts_softmax_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int axis;
    if (!ts_axis_norm(a->axis, sh->rank, &axis)) return TS_ERR_UNSUPPORTED;
    sm_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    s->outer = s->len = s->inner = 1;
    for (int d = 0; d < sh->rank; d++) {
        if (d < axis)
            s->outer *= sh->dims[d];
        else if (d == axis || a->flatten)
            s->len *= sh->dims[d];
        else
            s->inner *= sh->dims[d];
    }
    s->log = nd->op == &ts_op_logsoftmax;
    s->threads = xv_threads(p);
    s->avx512 = __builtin_cpu_supports("avx512f") && !xplan_skips(p, "softmax.avx512"); /* TSOPT_SKIP: A/B */
    st->state = s;
    /* each row is read before it is written: in place when x dies here
     * (half plans: ViT-B/16-l4's attention scores, 7.5 MB at batch 4) */
    xv_inplace_out(p, p->value_buf[nd->inputs[0]], nd->outputs[0]);
    return xv_bind_io(p, n, st, err);
}

const xkernel xk_vec_softmax = {"vec.softmax", sm_build, sm_run, free};
