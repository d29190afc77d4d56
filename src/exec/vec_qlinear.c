/* tsopt.QLinearAdd and tsopt.QLinearLookup (ops/qlinear_eltwise.c, made by
 * opt/fuse_qdq.c from a QDQ model's residual adds and activations) on the
 * 8-bit tensors: one pass reading bytes and writing bytes, no float32
 * tensor between.  QLinearAdd computes in registers the float32 arithmetic
 * of the DQ/Add/Q nodes it replaces (so its result is theirs, bit for
 * bit); QLinearLookup is a 256-entry table lookup (vpermi2b on CPUs with
 * AVX-512 VBMI, 64 bytes per four instructions).
 *
 * Both are element-wise with per-tensor parameters: they keep their input's
 * layout when it is dense (the channels-last output of an int8 convolution,
 * dnnl_int8.c), so a residual block's tensors stay in the layout the next
 * convolution reads instead of being reordered around every add. */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exec/vec.h"
#include "ops/list.h"

#define QCHUNK 16384 /* elements per parallel chunk */

typedef struct vqe {
    int threads;
    int64_t n;
    bool s8;                 /* operands int8 (else uint8) */
    bool y_s8;               /* output int8 */
    float as, bs, ys;        /* QLinearAdd's scales */
    float az, bz, yz;        /* and zero points */
    uint8_t table[256];      /* QLinearLookup's, indexed by the unsigned byte (int8: x + 128) */
} vqe;

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

static void qadd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const vqe *s = st->state;
    (void)scratch;
    const int64_t chunks = (s->n + QCHUNK - 1) / QCHUNK;
    XV_PAR_FOR(c, chunks, s->threads, s->threads > 1 && s->n >= XV_PAR_MIN, {
        const int64_t o = c * QCHUNK, len = s->n - o < QCHUNK ? s->n - o : QCHUNK;
        const char *a = (const char *)in[0] + o, *b = (const char *)in[1] + o;
        char *y = (char *)out[0] + o;
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
    XV_PAR_FOR(c, chunks, s->threads, s->threads > 1 && s->n >= XV_PAR_MIN, {
        const int64_t o = c * QCHUNK, len = s->n - o < QCHUNK ? s->n - o : QCHUNK;
        const uint8_t *x = (const uint8_t *)in[0] + o;
        uint8_t *y = (uint8_t *)out[0] + o;
        if (vbmi) lookup_vbmi(x, y, len, s->table, flip);
        else lookup_plain(x, y, len, s->table, flip);
    });
}

/* ------------------------------------------------------------- lowering */

/* The step's 8-bit inputs (nin of node n's, at ins[]) and output: in the
 * inputs' common layout when they share one that is dense and the output
 * is not a graph output (the caller's tensor is plain), else plain. */
static ts_status bind(xplan *p, int n, xstep *st, const int *ins, int nin, ts_error *err)
{
    const ts_graph *g = p->g;
    const ts_node *nd = &g->nodes[n];
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
    if (keep) {
        xbuf *o = &p->bufs[yb];
        o->blocked = true;
        o->md = p->bufs[b[0]].md;
        o->md.data_type = y->dtype == TS_U8 ? dnnl_u8 : dnnl_s8;
        o->bytes = (size_t)total;
    }
    st->out[0] = yb;
    return TS_OK;
}

static float f32_in(const xplan *p, const ts_node *nd, int i) { return *(const float *)xplan_const(p, nd->inputs[i])->data; }

static ts_status qadd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
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
    return bind(p, n, st, (const int[]){0, 3}, 2, err);
}

static ts_status lookup_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
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
