/* QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and the Cast of
 * MatMulInteger's int32 sums to float32 as vector
 * loops (the reference kernels read every element through the number
 * interface: a 224x224 image took milliseconds).  The arithmetic is the
 * reference's (src/ops/quantize.c): float32 division by the scale, rounding
 * half to even, saturation; (q - z) * s for DequantizeLinear (the integer
 * difference times the float32 scale is rounded once either way).
 *
 * A per-tensor Q or DQ is element-wise on any layout: it keeps its input's
 * (the channels-last or blocked output of an int8 convolution, dnnl_int8.c)
 * when that layout has no padding, so a QDQ model's tensors are not
 * reordered around every float op it keeps.  Per-axis parameters need the
 * plain layout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "vec/vec.h"
#include "vec/vec_qround.h"
#include "ops/list.h"

typedef struct vq {
    ts_dtype qt; /* uint8 or int8 side */
    int threads;
    int64_t n, outer, axis_len, inner; /* [outer][axis_len][inner]; axis_len 1: per tensor */
    float *scale;                      /* axis_len entries */
    int32_t *zp;
} vq;

static void vq_free(void *state)
{
    vq *s = state;
    if (!s) return;
    free(s->scale);
    free(s->zp);
    free(s);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void quant_u8_div(const float *x, uint8_t *y,
                                                                                       int64_t n, float s, float z)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(x[i] / s) + z;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        y[i] = (uint8_t)v;
    }
}

/* quant_u8_div 16 at a time by x * (1 / s) (vec_qround.h: the same bytes):
 * 128 Ki elements on one thread 0.046 -> 0.012 ms (best of 300). */
__attribute__((target("avx512f,avx512bw"))) static void quant_u8_mul(const float *x, uint8_t *y, int64_t n, float s,
                                                                      float z)
{
    const __m512 r = _mm512_set1_ps(1.0f / s), sv = _mm512_set1_ps(s), zv = _mm512_set1_ps(z),
                 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_add_ps(xv_div_round16(_mm512_loadu_ps(x + i), r, sv), zv);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm_storeu_si128((__m128i *)(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
    }
    quant_u8_div(x + i, y + i, n - i, s, z);
}

/* The multiply where AVX-512 is and s and 1/s are normal numbers (a NaN
 * element becomes 0 there, where the division's cast of NaN is undefined). */
static void quant_u8(const float *x, uint8_t *y, int64_t n, float s, float z)
{
    if (n >= 16 && isnormal(s) && isnormal(1.0f / s) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw"))
        quant_u8_mul(x, y, n, s, z);
    else
        quant_u8_div(x, y, n, s, z);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void quant_s8(const float *x, int8_t *y, int64_t n,
                                                                                   float s, float z)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float v = nearbyintf(x[i] / s) + z;
        v = v < -128.0f ? -128.0f : v > 127.0f ? 127.0f : v;
        y[i] = (int8_t)v;
    }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void dequant_u8(const uint8_t *x, float *y, int64_t n,
                                                                                     float s, int32_t z)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)x[i] - z) * s;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void dequant_s8(const int8_t *x, float *y, int64_t n,
                                                                                     float s, int32_t z)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (float)((int32_t)x[i] - z) * s;
}

/* Rows of `inner` elements ([outer][axis_len] of them per axis; chunks of
 * the whole tensor per tensor), in parallel when large. */
static void vq_rows(const vq *s, bool quant, const void *x, void *y)
{
    const int64_t rows = s->outer * s->axis_len;
    const int threads = s->threads;
    const bool par = threads > 1 && s->n >= XV_PAR_MIN;
#pragma omp parallel for schedule(static) num_threads(threads) if (par)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t j = s->axis_len == 1 ? 0 : r % s->axis_len, off = r * s->inner;
        const int64_t len = s->n - off < s->inner ? s->n - off : s->inner;
        if (quant && s->qt == TS_U8)
            quant_u8((const float *)x + off, (uint8_t *)y + off, len, s->scale[j], (float)s->zp[j]);
        else if (quant)
            quant_s8((const float *)x + off, (int8_t *)y + off, len, s->scale[j], (float)s->zp[j]);
        else if (s->qt == TS_U8)
            dequant_u8((const uint8_t *)x + off, (float *)y + off, len, s->scale[j], s->zp[j]);
        else
            dequant_s8((const int8_t *)x + off, (float *)y + off, len, s->scale[j], s->zp[j]);
    }
}

static void q_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    vq_rows(st->state, true, in[0], out[0]);
}

static void dq_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    vq_rows(st->state, false, in[0], out[0]);
}

/* Q (quant) or DQ: constant scale and zero point, float32 side. */
static ts_status qdq_build(xplan *p, int n, xstep *st, bool quant, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = xplan_node(p, n);
    const ts_value *x = &g->values[nd->inputs[0]], *y = &g->values[nd->outputs[0]];
    const ts_tensor *sc = xplan_const(p, nd->inputs[1]), *zt = nd->ninputs > 2 && nd->inputs[2] >= 0 ? xplan_const(p, nd->inputs[2]) : NULL;
    ts_dtype ft = quant ? x->dtype : y->dtype, qt = quant ? y->dtype : x->dtype;
    if (ft != TS_F32 || (qt != TS_U8 && qt != TS_I8) || !sc || sc->dtype != TS_F32 ||
        (nd->ninputs > 2 && nd->inputs[2] >= 0 && !zt))
        return TS_ERR_UNSUPPORTED;
    int64_t cnt = ts_tensor_numel(sc), inner = 1, axis_len = 1, total = ts_shape_numel(&x->shape);
    if (cnt != 1) {
        int axis;
        if (!ts_axis_norm(*(const int64_t *)nd->attrs /* quant_attrs.axis */, x->shape.rank, &axis)) return TS_ERR_UNSUPPORTED;
        axis_len = x->shape.dims[axis];
        for (int d = axis + 1; d < x->shape.rank; d++) inner *= x->shape.dims[d];
    } else {
        inner = 16384; /* per tensor: chunks for the threads */
    }
    vq *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->qt = qt;
    s->threads = xv_threads(p);
    s->n = total, s->axis_len = axis_len, s->inner = inner;
    s->outer = total ? (total + axis_len * inner - 1) / (axis_len * inner) : 0;
    s->scale = malloc(sizeof(float) * (size_t)axis_len);
    s->zp = malloc(sizeof(int32_t) * (size_t)axis_len);
    if (!s->scale || !s->zp) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < axis_len; j++) {
        s->scale[j] = ((const float *)sc->data)[cnt == 1 ? 0 : j];
        s->zp[j] = zt ? (int32_t)ts_tensor_get_i64(zt, cnt == 1 ? 0 : j) : 0;
    }
    int xb = xplan_value_buf(p, nd->inputs[0]);
    if (xb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    const xbuf *in = &p->bufs[xb];
    /* element-wise on the input's layout when it is dense; a DQ's float
     * output goes to float kernels that want it plain: the 8-bit tensor is
     * reordered instead (a quarter of the bytes) */
    bool keep = quant && in->blocked && cnt == 1 && !ts_graph_is_output(g, nd->outputs[0]) &&
                in->bytes == (size_t)total * ts_dtype_size(in->dtype);
    if (!keep && (xb = xplan_plain(p, xb, err)) < 0) return err->code ? err->code : TS_ERR_INVALID;
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xb;
    int yb = xplan_value_buf(p, nd->outputs[0]);
    if (yb < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    if (keep) {
        xbuf *o = &p->bufs[yb];
        o->blocked = true;
        o->md = p->bufs[xb].md;
        o->md.data_type = quant ? (qt == TS_U8 ? dnnl_u8 : dnnl_s8) : dnnl_f32;
        o->bytes = (size_t)total * ts_dtype_size(y->dtype);
    }
    st->out[0] = yb;
    return TS_OK;
}

static ts_status q_build(xplan *p, int n, xstep *st, ts_error *err) { return qdq_build(p, n, st, true, err); }
static ts_status dq_build(xplan *p, int n, xstep *st, ts_error *err) { return qdq_build(p, n, st, false, err); }

/* ------------------------------------------------ DynamicQuantizeLinear */

typedef struct vn {
    int64_t n; /* elements */
    int threads;
} vn;

#define DQL_CHUNK 32768 /* elements per thread's piece (min/max and quantize are exact in any split) */

__attribute__((target_clones("avx512f", "avx2", "default"))) static void min_max(const float *x, int64_t n, float *lo,
                                                                                  float *hi)
{
    float a = 0.0f, b = 0.0f; /* the range always holds 0 */
#pragma omp simd reduction(min : a) reduction(max : b)
    for (int64_t i = 0; i < n; i++) {
        a = x[i] < a ? x[i] : a;
        b = x[i] > b ? x[i] : b;
    }
    *lo = a, *hi = b;
}

static void dql_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vn *s = st->state;
    const float *x = in[0];
    float lo = 0.0f, hi = 0.0f;
    (void)scratch;
    /* a transformer's 512 x 1024 FFN activation: two passes over 2 MB, split over the threads */
    const int64_t chunks = (s->n + DQL_CHUNK - 1) / DQL_CHUNK;
    const bool par = s->threads > 1 && chunks > 1;
#pragma omp parallel for schedule(static) num_threads(s->threads) if (par) reduction(min : lo) reduction(max : hi)
    for (int64_t c = 0; c < chunks; c++) {
        float a, b;
        min_max(x + c * DQL_CHUNK, s->n - c * DQL_CHUNK < DQL_CHUNK ? s->n - c * DQL_CHUNK : DQL_CHUNK, &a, &b);
        lo = a < lo ? a : lo;
        hi = b > hi ? b : hi;
    }
    /* the reference's float32 arithmetic (ops/quantize.c) */
    float scale = (hi - lo) / 255.0f, zp = 0.0f;
    if (scale) {
        zp = nearbyintf(0.0f - lo / scale);
        zp = zp < 0.0f ? 0.0f : zp > 255.0f ? 255.0f : zp;
        XV_PAR_FOR(c, chunks, s->threads, par, {
            const int64_t o = c * DQL_CHUNK;
            quant_u8(x + o, (uint8_t *)out[0] + o, s->n - o < DQL_CHUNK ? s->n - o : DQL_CHUNK, scale, zp);
        });
    } else {
        memset(out[0], 0, (size_t)s->n);
    }
    *(float *)out[1] = scale;
    *(uint8_t *)out[2] = (uint8_t)zp;
}

static ts_status dql_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (p->g->values[nd->inputs[0]].dtype != TS_F32 || nd->noutputs != 3) return TS_ERR_UNSUPPORTED;
    vn *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    s->n = ts_shape_numel(&p->g->values[nd->inputs[0]].shape);
    s->threads = xv_threads(p);
    st->state = s;
    return xv_bind_io(p, n, st, err);
}

/* ------------------------------------- Cast of an int32 sum to float32 */

/* quantize_dynamic's MatMulInteger -> Cast(float): exact up to 2^24, and
 * float32's rounding above, as the reference converts. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void i32_to_f32(const int32_t *x, float *y, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = (float)x[i];
}

static void cast_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    (void)scratch;
    i32_to_f32(in[0], out[0], ((const vn *)st->state)->n);
}

static ts_status cast_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (p->g->values[nd->inputs[0]].dtype != TS_I32 || p->g->values[nd->outputs[0]].dtype != TS_F32)
        return TS_ERR_UNSUPPORTED;
    vn *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    s->n = ts_shape_numel(&p->g->values[nd->inputs[0]].shape);
    st->state = s;
    return xv_bind_io(p, n, st, err);
}

const xkernel xk_vec_cast_i32 = {"vec.cast_i32", cast_build, cast_run, free};
const xkernel xk_vec_quantize = {"vec.quantize", q_build, q_run, vq_free};
const xkernel xk_vec_dequantize = {"vec.dequantize", dq_build, dq_run, vq_free};
const xkernel xk_vec_dynamic_quantize = {"vec.dynamic_quantize", dql_build, dql_run, free};
