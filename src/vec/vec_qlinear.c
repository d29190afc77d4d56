/* tsopt's internal 8-bit element-wise operators (ops/qlinear_eltwise.c,
 * made by opt/fuse_qdq.c from a QDQ model's residual adds, activations,
 * squeeze-excite gates and average pools) on the 8-bit tensors: one pass
 * reading bytes and writing bytes, no float32 tensor between.
 * QLinearAdd and QLinearChannelMul compute in registers the float32
 * arithmetic of the DQ/op/Q nodes they replace (so their results are
 * theirs, bit for bit; ISO C11 builds contract no multiply-add);
 * QLinearLookup is a 256-entry table lookup (vpermi2b on CPUs with AVX-512
 * VBMI, 64 bytes per four instructions); QLinearGlobalAveragePool sums in
 * int32 as the reference kernel does.
 *
 * They keep their input's layout when it is dense (the channels-last
 * output of an int8 convolution, dnnl_int8.c; the gate and the pool read
 * plain or channels-last), so a network's 8-bit tensors stay in the layout
 * the next convolution reads instead of being reordered around every op. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "vec/vec.h"
#include "vec/vec_qround.h"
#include "ops/list.h"
#include "ops/qlinear_eltwise.h"

#define QCHUNK 16384 /* elements per parallel chunk */
/* Elements from which a step splits over the threads: a byte is an eighth
 * of a float32 element's traffic, and a table lookup a few instructions per
 * 64 bytes, so a squeeze-excite block's 36 KB took 60 us woken over two
 * threads at load 9 (profile) and one microsecond or two on one */
#define QPAR_ARITH (1 << 18) /* float arithmetic per element: add, gate */
#define QPAR_TABLE (1 << 21) /* vpermi2b lookups */

typedef struct vqe {
    int threads;
    int64_t n;
    bool s8;                 /* operands int8 (else uint8) */
    bool y_s8;               /* output int8 */
    float as, bs, ys;        /* QLinearAdd's scales */
    float az, bz, yz;        /* and zero points */
    bool mul;                /* QLinearAdd by qadd_mul (AVX-512, ys and 1 / ys normal) */
    uint8_t table[256];      /* QLinearLookup's, indexed by the unsigned byte (int8: x + 128) */
    /* QLinearChannelMul, QLinearGlobalAveragePool: x [N, C, H, W] stored
     * plain or channels-last (cl); the gate's N is 1 or N (gate_n) */
    bool cl;
    int64_t N, C, hw, gate_n;
} vqe;

/* The float32 constant scalar input i of node nd. */
static float f32_in(const xplan *p, const ts_node *nd, int i) { return *(const float *)xplan_const(p, nd->inputs[i])->data; }

/* ------------------------------------------------------------ QLinearAdd */

/* (a - az) as an exact small integer in float32, times the scale: the one
 * float32 product DequantizeLinear rounds; the float32 sum and quotient as
 * Add and QuantizeLinear round them. */
#define QADD(NAME, TA, TY, LO, HI)                                                                               \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME(                               \
        const TA *a, const TA *b, TY *y, int64_t n, const vqe *s)                                                \
    {                                                                                                            \
        const float as = s->as, bs = s->bs, ys = s->ys, az = s->az, bz = s->bz, yz = s->yz;                      \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                                      \
        {                                                                                                        \
            float fa = ((float)a[i] - az) * as, fb = ((float)b[i] - bz) * bs;                                    \
            float r = nearbyintf((fa + fb) / ys) + yz;                                                           \
            r = r < LO ? LO : r > HI ? HI : r;                                                                   \
            y[i] = (TY)r;                                                                                        \
        }                                                                                                        \
    }
QADD(qadd_u8_u8, uint8_t, uint8_t, 0.0f, 255.0f)
QADD(qadd_u8_s8, uint8_t, int8_t, -128.0f, 127.0f)
QADD(qadd_s8_u8, int8_t, uint8_t, 0.0f, 255.0f)
QADD(qadd_s8_s8, int8_t, int8_t, -128.0f, 127.0f)

/* The same 16 at a time with the quotient by ys a product by 1 / ys
 * (vec_qround.h: the same bytes): s8 operands (else u8), s8 output (else u8). */
__attribute__((target("avx512f,avx512bw"))) static void qadd_mul(const void *a, const void *b, void *y, int64_t n,
                                                                  const vqe *s)
{
    const __m512 as = _mm512_set1_ps(s->as), bs = _mm512_set1_ps(s->bs), ys = _mm512_set1_ps(s->ys),
                 r = _mm512_set1_ps(1.0f / s->ys), az = _mm512_set1_ps(s->az), bz = _mm512_set1_ps(s->bz),
                 yz = _mm512_set1_ps(s->yz), lo = _mm512_set1_ps(s->y_s8 ? -128.0f : 0.0f),
                 hi = _mm512_set1_ps(s->y_s8 ? 127.0f : 255.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __m128i a8 = _mm_loadu_si128((const __m128i *)((const char *)a + i)),
                b8 = _mm_loadu_si128((const __m128i *)((const char *)b + i));
        __m512 fa = _mm512_cvtepi32_ps(s->s8 ? _mm512_cvtepi8_epi32(a8) : _mm512_cvtepu8_epi32(a8)),
               fb = _mm512_cvtepi32_ps(s->s8 ? _mm512_cvtepi8_epi32(b8) : _mm512_cvtepu8_epi32(b8));
        __m512 sum = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(fa, az), as), _mm512_mul_ps(_mm512_sub_ps(fb, bz), bs));
        __m512 v = _mm512_add_ps(xv_div_round16(sum, r, ys), yz);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm_storeu_si128((__m128i *)((char *)y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
    }
}

static void qadd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vqe *s = st->state;
    (void)scratch;
    const int64_t chunks = (s->n + QCHUNK - 1) / QCHUNK;
    XV_PAR_FOR(c, chunks, s->threads, s->threads > 1 && s->n >= QPAR_ARITH, {
        const int64_t o = c * QCHUNK;
        int64_t len = s->n - o < QCHUNK ? s->n - o : QCHUNK;
        const char *a = (const char *)in[0] + o, *b = (const char *)in[1] + o;
        char *y = (char *)out[0] + o;
        const int64_t body = s->mul ? len & ~(int64_t)15 : 0;
        if (body) qadd_mul(a, b, y, body, s);
        a += body, b += body, y += body, len -= body;
        if (!len) continue;
        if (!s->s8 && !s->y_s8) qadd_u8_u8((const uint8_t *)a, (const uint8_t *)b, (uint8_t *)y, len, s);
        else if (!s->s8) qadd_u8_s8((const uint8_t *)a, (const uint8_t *)b, (int8_t *)y, len, s);
        else if (!s->y_s8) qadd_s8_u8((const int8_t *)a, (const int8_t *)b, (uint8_t *)y, len, s);
        else qadd_s8_s8((const int8_t *)a, (const int8_t *)b, (int8_t *)y, len, s);
    });
}

/* ------------------------------------------------------- QLinearLookup */

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void lookup_vbmi(const uint8_t *x, uint8_t *y, int64_t n,
                                                                               const uint8_t *t, uint8_t flip)
{
    const __m512i t0 = _mm512_loadu_si512(t), t1 = _mm512_loadu_si512(t + 64), t2 = _mm512_loadu_si512(t + 128),
                  t3 = _mm512_loadu_si512(t + 192), f = _mm512_set1_epi8((char)flip);
    int64_t i = 0;
    for (; i < n; i += 64) {
        __mmask64 m = i + 64 <= n ? ~(__mmask64)0 : ((__mmask64)1 << (n - i)) - 1;
        __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, x + i), f); /* int8: the unsigned index x + 128 */
        __m512i lo = _mm512_permutex2var_epi8(t0, v, t1), hi = _mm512_permutex2var_epi8(t2, v, t3);
        __mmask64 up = _mm512_movepi8_mask(v); /* index >= 128 */
        _mm512_mask_storeu_epi8(y + i, m, _mm512_mask_blend_epi8(up, lo, hi));
    }
}

static void lookup_plain(const uint8_t *x, uint8_t *y, int64_t n, const uint8_t *t, uint8_t flip)
{
    for (int64_t i = 0; i < n; i++) y[i] = t[x[i] ^ flip];
}

static void lookup_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vqe *s = st->state;
    (void)scratch;
    const bool vbmi = __builtin_cpu_supports("avx512vbmi");
    const int64_t chunks = (s->n + QCHUNK - 1) / QCHUNK;
    const uint8_t flip = s->s8 ? 0x80 : 0;
    XV_PAR_FOR(c, chunks, s->threads, s->threads > 1 && s->n >= QPAR_TABLE, {
        const int64_t o = c * QCHUNK, len = s->n - o < QCHUNK ? s->n - o : QCHUNK;
        const uint8_t *x = (const uint8_t *)in[0] + o;
        uint8_t *y = (uint8_t *)out[0] + o;
        if (vbmi) lookup_vbmi(x, y, len, s->table, flip);
        else lookup_plain(x, y, len, s->table, flip);
    });
}

/* ---------------------------------------------------- QLinearChannelMul */

/* y = Q(DQ(x) * g) on n elements, one gate per element (vector) or one for
 * all (scalar): DQ's, Mul's and Q's float32 roundings, as in QADD. */
#define CHMUL(NAME, T, LO, HI, GATE)                                                                             \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME(const T *x, T *y, int64_t n,  \
                                                                                  const float *g, const vqe *s) \
    {                                                                                                            \
        const float xs = s->as, ys = s->ys, xz = s->az, yz = s->yz;                                              \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                                      \
        {                                                                                                        \
            float r = nearbyintf(((float)x[i] - xz) * xs * GATE / ys) + yz;                                      \
            r = r < LO ? LO : r > HI ? HI : r;                                                                   \
            y[i] = (T)r;                                                                                         \
        }                                                                                                        \
    }
CHMUL(chmul_u8_vec, uint8_t, 0.0f, 255.0f, g[i])
CHMUL(chmul_s8_vec, int8_t, -128.0f, 127.0f, g[i])
CHMUL(chmul_u8_one, uint8_t, 0.0f, 255.0f, g[0])
CHMUL(chmul_s8_one, int8_t, -128.0f, 127.0f, g[0])

static void chmul_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vqe *s = st->state;
    const float *gate = in[1];
    (void)scratch;
    /* rows: (n, c) of hw elements (plain), or (n, pixel) of C (channels-last) */
    const int64_t rows = s->cl ? s->N * s->hw : s->N * s->C, len = s->cl ? s->C : s->hw;
    XV_PAR_FOR(r, rows, s->threads, s->threads > 1 && s->n >= QPAR_ARITH, {
        const int64_t n = s->cl ? r / s->hw : r / s->C;
        const float *g = gate + (s->gate_n == 1 ? 0 : n * s->C) + (s->cl ? 0 : r % s->C);
        const char *x = (const char *)in[0] + r * len;
        char *y = (char *)out[0] + r * len;
        if (s->cl && !s->s8) chmul_u8_vec((const uint8_t *)x, (uint8_t *)y, len, g, s);
        else if (s->cl) chmul_s8_vec((const int8_t *)x, (int8_t *)y, len, g, s);
        else if (!s->s8) chmul_u8_one((const uint8_t *)x, (uint8_t *)y, len, g, s);
        else chmul_s8_one((const int8_t *)x, (int8_t *)y, len, g, s);
    });
}

/* --------------------------------------------- QLinearGlobalAveragePool */

/* Sums of (channels-last) C-channel pixels into acc, or of a plain row. */
#define GAP_SUMS(NAME, T)                                                                                        \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME##_cl(                          \
        const T *x, int64_t hw, int64_t C, int32_t *acc)                                                         \
    {                                                                                                            \
        memset(acc, 0, sizeof(int32_t) * (size_t)C);                                                             \
        for (int64_t i = 0; i < hw; i++) {                                                                       \
            const T *px = x + i * C;                                                                             \
            _Pragma("omp simd") for (int64_t c = 0; c < C; c++) acc[c] += px[c];                                 \
        }                                                                                                        \
    }                                                                                                            \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static int64_t NAME##_row(const T *x,          \
                                                                                          int64_t hw)            \
    {                                                                                                            \
        int32_t a = 0;                                                                                           \
        _Pragma("omp simd reduction(+ : a)") for (int64_t i = 0; i < hw; i++) a += x[i];                         \
        return a;                                                                                                \
    }
GAP_SUMS(gap_u8, uint8_t)
GAP_SUMS(gap_s8, int8_t)

static void qgap_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vqe *s = st->state;
    int32_t *acc = scratch;
    const double lo = s->y_s8 ? -128 : 0, hi = s->y_s8 ? 127 : 255;
    for (int64_t n = 0; n < s->N; n++) {
        const char *x = (const char *)in[0] + n * s->C * s->hw;
        if (s->cl && s->s8) gap_s8_cl((const int8_t *)x, s->hw, s->C, acc);
        else if (s->cl) gap_u8_cl((const uint8_t *)x, s->hw, s->C, acc);
        for (int64_t c = 0; c < s->C; c++) {
            int64_t sum = s->cl ? acc[c]
                          : s->s8 ? gap_s8_row((const int8_t *)x + c * s->hw, s->hw)
                                  : gap_u8_row((const uint8_t *)x + c * s->hw, s->hw);
            float m = ts_qgap_mean(sum, s->hw, (int64_t)s->az, s->as);
            double v = nearbyintf(m / s->ys) + (double)s->yz;
            v = v < lo ? lo : v > hi ? hi : v;
            if (s->y_s8) ((int8_t *)out[0])[n * s->C + c] = (int8_t)v;
            else ((uint8_t *)out[0])[n * s->C + c] = (uint8_t)v;
        }
    }
}

/* ------------------------------------------------------------- lowering */

/* Output buffer yb laid out as input buffer xb (a dense blocked layout),
 * holding `bytes` 8-bit elements of type yt. */
static void out_like(xplan *p, int yb, int xb, ts_dtype yt, int64_t bytes)
{
    xbuf *o = &p->bufs[yb];
    o->blocked = true;
    o->md = p->bufs[xb].md;
    o->md.data_type = yt == TS_U8 ? dnnl_u8 : dnnl_s8;
    o->bytes = (size_t)bytes;
}

/* Buffer of the [N, C, H, W] value v plain or channels-last (*cl), in
 * place when it is one of them, else made plain. */
static bool is_cl(const xbuf *b)
{
    int order[TS_MAX_RANK];
    return b->blocked && xbuf_dense_order(b, order) && order[0] == 0 && order[1] == 2 && order[2] == 3 &&
           order[3] == 1;
}

static int nchw_or_cl(xplan *p, int v, bool *cl, ts_error *err)
{
    int b = xplan_value_buf(p, v), order[TS_MAX_RANK];
    if (b < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory"), -1;
    *cl = false;
    if (!p->bufs[b].blocked) return b;
    if (is_cl(&p->bufs[b])) return *cl = true, b;
    if (xbuf_dense_order(&p->bufs[b], order) && xbuf_order_plain(order, 4)) return b;
    return xplan_plain(p, b, err);
}

static ts_status chmul_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    for (int i = 1; i < 6; i++)
        if (i != 3 && !xplan_const(p, nd->inputs[i])) return TS_ERR_UNSUPPORTED;
    if (x->dtype != y->dtype) return TS_ERR_UNSUPPORTED;
    /* the output in x's layout when x is channels-last; a graph output is
     * the caller's plain tensor (decided before the plan is touched) */
    xbuf scratch;
    if (is_cl(xplan_value_layout(p, nd->inputs[0], &scratch)) && ts_graph_is_output(g, nd->outputs[0]))
        return TS_ERR_UNSUPPORTED;
    vqe *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->threads = xv_threads(p);
    s->n = ts_shape_numel(&y->shape);
    s->s8 = s->y_s8 = x->dtype == TS_I8;
    s->as = f32_in(p, nd, 1), s->ys = f32_in(p, nd, 4);
    s->az = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[2]), 0);
    s->yz = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[5]), 0);
    s->N = x->shape.dims[0], s->C = x->shape.dims[1], s->hw = x->shape.dims[2] * x->shape.dims[3];
    s->gate_n = g->values[nd->inputs[3]].shape.dims[0];
    int xb = nchw_or_cl(p, nd->inputs[0], &s->cl, err), gb = xb >= 0 ? xplan_plain(p, xplan_value_buf(p, nd->inputs[3]), err) : -1;
    if (xb < 0 || gb < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 2, 1, err)) return err->code;
    st->in[0] = xb, st->in[1] = gb;
    int yb = xplan_value_buf(p, nd->outputs[0]);
    if (yb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (s->cl) out_like(p, yb, xb, y->dtype, s->n); /* not a graph output: declined above */
    st->out[0] = yb;
    return TS_OK;
}

static ts_status qgap_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    for (int i = 1; i < 5; i++)
        if (!xplan_const(p, nd->inputs[i])) return TS_ERR_UNSUPPORTED;
    vqe *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->s8 = x->dtype == TS_I8, s->y_s8 = y->dtype == TS_I8;
    s->as = f32_in(p, nd, 1), s->ys = f32_in(p, nd, 3);
    s->az = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[2]), 0);
    s->yz = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[4]), 0);
    s->N = x->shape.dims[0], s->C = x->shape.dims[1], s->hw = x->shape.dims[2] * x->shape.dims[3];
    if (s->hw > INT32_MAX / 256) return TS_ERR_UNSUPPORTED; /* the int32 sums */
    int xb = nchw_or_cl(p, nd->inputs[0], &s->cl, err);
    if (xb < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    st->scratch_bytes = sizeof(int32_t) * (size_t)s->C;
    if ((st->out[0] = xplan_value_buf(p, nd->outputs[0])) < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

/* The step's 8-bit inputs (nin of node n's, at ins[]) and output: in the
 * inputs' common layout when they share one that is dense and the output
 * is not a graph output (the caller's tensor is plain), else plain. */
static ts_status bind(xplan *p, int n, xstep *st, const int *ins, int nin, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_value *y = &g->values[nd->outputs[0]];
    int64_t total = ts_shape_numel(&y->shape);
    int b[2];
    bool keep = !ts_graph_is_output(g, nd->outputs[0]);
    for (int i = 0; i < nin; i++) {
        if ((b[i] = xplan_value_buf(p, nd->inputs[ins[i]])) < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        const xbuf *x = &p->bufs[b[i]];
        keep &= x->blocked && x->bytes == (size_t)total && (i == 0 || dnnl_memory_desc_equal(&x->md, &p->bufs[b[0]].md));
    }
    if (xstep_alloc(st, nin, 1, err)) return err->code;
    for (int i = 0; i < nin; i++) {
        if (!keep && (b[i] = xplan_plain(p, b[i], err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
        st->in[i] = b[i];
    }
    int yb = xplan_value_buf(p, nd->outputs[0]);
    if (yb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (keep) out_like(p, yb, b[0], y->dtype, total);
    st->out[0] = yb;
    return TS_OK;
}

static ts_status qadd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    for (int i = 1; i < 8; i++)
        if (i != 3 && !xplan_const(p, nd->inputs[i])) return TS_ERR_UNSUPPORTED; /* run-time parameters */
    ts_dtype at = p->g->values[nd->inputs[0]].dtype;
    if (p->g->values[nd->inputs[3]].dtype != at) return TS_ERR_UNSUPPORTED;
    vqe *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->threads = xv_threads(p);
    s->n = ts_shape_numel(&p->g->values[nd->outputs[0]].shape);
    s->s8 = at == TS_I8;
    s->y_s8 = p->g->values[nd->outputs[0]].dtype == TS_I8;
    s->as = f32_in(p, nd, 1), s->bs = f32_in(p, nd, 4), s->ys = f32_in(p, nd, 6);
    s->az = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[2]), 0);
    s->bz = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[5]), 0);
    s->yz = (float)ts_tensor_get_i64(xplan_const(p, nd->inputs[7]), 0);
    s->mul = isnormal(s->ys) && isnormal(1.0f / s->ys) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && !xplan_skips(p, "vec.qadd.mul");
    return bind(p, n, st, (const int[]){0, 3}, 2, err);
}

static ts_status lookup_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    const ts_tensor *t = xplan_const(p, nd->inputs[1]);
    if (!t) return TS_ERR_UNSUPPORTED;
    vqe *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->threads = xv_threads(p);
    s->n = ts_shape_numel(&p->g->values[nd->outputs[0]].shape);
    s->s8 = p->g->values[nd->inputs[0]].dtype == TS_I8;
    memcpy(s->table, t->data, 256);
    return bind(p, n, st, (const int[]){0}, 1, err);
}

const xkernel xk_vec_qadd = {"vec.qadd", qadd_build, qadd_run, free};
const xkernel xk_vec_qlookup = {"vec.qlookup", lookup_build, lookup_run, free};
const xkernel xk_vec_qchannel_mul = {"vec.qchannel_mul", chmul_build, chmul_run, free};
const xkernel xk_vec_qgap = {"vec.qgap", qgap_build, qgap_run, free};
