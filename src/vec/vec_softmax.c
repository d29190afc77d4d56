/* Softmax and LogSoftmax on float32.  The input is viewed as
 * [outer, len, inner]: from opset 13 `len` is the one axis, before it the
 * whole trailing block from `axis` (inner = 1), as src/ops/softmax.c says.
 * Rows (inner = 1) are the common case: max, then exp and sum in one pass
 * writing exp into y, then a scale, each a vector loop over a row that
 * stays in cache.  inner > 1 runs the same passes across `inner`. */
#include <float.h>
#include <stdlib.h>
#include "vec/vec.h"
#include "ops/attrs.h"
#include "ops/list.h"

typedef struct sm_state {
    int64_t outer, len, inner;
    bool log;
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
    st->state = s;
    /* each row is read before it is written: in place when x dies here
     * (half plans: ViT-B/16-l4's attention scores, 7.5 MB at batch 4) */
    xv_inplace_out(p, p->value_buf[nd->inputs[0]], nd->outputs[0]);
    return xv_bind_io(p, n, st, err);
}

const xkernel xk_vec_softmax = {"vec.softmax", sm_build, sm_run, free};
