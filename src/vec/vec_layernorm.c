/* LayerNormalization (Y only) on float32: each row of D = prod(X.shape[axis:])
 * elements is normalized with a two-pass mean / variance (the row is in
 * cache for the second pass, and two passes avoid the cancellation of
 * E[x^2] - E[x]^2), then scaled and shifted in a third vector loop.
 * Scale and B must have D elements, or be constants, which are expanded
 * onto the normalized shape once at plan time. */
#include <immintrin.h>
#include <stdlib.h>
#include "exec/half.h"
#include "vec/vec.h"
#include "ops/attrs.h"

#define LN_SQ 256 /* squares rounded together (a stack array) */

typedef struct ln_state {
    int64_t rows, d;
    int64_t inner; /* decomposed form over channels: positions after the normalized axes (1: rows) */
    float eps;
    int threads;
    int scale_in, bias_in; /* step input index, or -1: use the expanded copy (or none for bias) */
    float *scale, *bias;   /* plan-time expansions of constant parameters */
    ts_dtype round;        /* half plans, written-out form: every node's output rounded to it (or TS_UNDEFINED) */
    bool f16v;             /* float16's element-wise passes fused on AVX-512 (ln_tail_f16; TSOPT_SKIP=ln.f16_fused) */
} ln_state;

static void ln_free(void *p)
{
    ln_state *s = p;
    if (!s) return;
    free(s->scale);
    free(s->bias);
    free(s);
}

XV_CLONES static void ln_row(const float *x, float *y, int64_t d, float eps, const float *g, const float *b)
{
    float sum = 0, var = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; i++) sum += x[i];
    const float mean = sum / (float)d;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean);
    const float r = 1.0f / sqrtf(var / (float)d + eps);
    if (b) {
#pragma omp simd
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] - mean) * r * g[i] + b[i];
    } else {
#pragma omp simd
        for (int64_t i = 0; i < d; i++) y[i] = (x[i] - mean) * r * g[i];
    }
}

/* The written-out LayerNorm of a float16 / bfloat16 graph, each node's
 * output rounded to type h as the unfused nodes round it (half.c): mean,
 * d = x - mean, d^2, its mean, + eps, sqrt, d / sqrt, * gamma, + beta.
 * Division as the graph divides (not a reciprocal's product), so the
 * values equal the node-by-node plan's. */
/* float16 on AVX-512: the element-wise nodes in one pass each, every
 * result rounded in registers (vcvtps2ph/vcvtph2ps, as xhalf_round):
 * y = round(x - mean) over the first n16 (a multiple of 16) elements, and
 * y = round(round(round(y / sd) * g) + b).  The rows' nine nodes were
 * twelve passes (each rounding one more); ViT-B/16's LayerNorm step took
 * 0.22 ms against the float32 plan's 0.07 (emulated EPYC, loaded).  The
 * same float32 operations in the same order: bit-identical. */
#define LN_RND(v) _mm512_cvtph_ps(_mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
__attribute__((target("avx512f"))) static void ln_sub_f16(const float *x, float *y, int64_t n16, float mean)
{
    const __m512 m = _mm512_set1_ps(mean);
    for (int64_t i = 0; i < n16; i += 16) _mm512_storeu_ps(y + i, LN_RND(_mm512_sub_ps(_mm512_loadu_ps(x + i), m)));
}

__attribute__((target("avx512f"))) static void ln_tail_f16(float *y, int64_t n16, float sd, const float *g,
                                                           const float *b)
{
    const __m512 s = _mm512_set1_ps(sd);
    for (int64_t i = 0; i < n16; i += 16) {
        __m512 v = LN_RND(_mm512_div_ps(_mm512_loadu_ps(y + i), s));
        v = LN_RND(_mm512_mul_ps(v, _mm512_loadu_ps(g + i)));
        if (b) v = LN_RND(_mm512_add_ps(v, _mm512_loadu_ps(b + i)));
        _mm512_storeu_ps(y + i, v);
    }
}
#undef LN_RND

static void ln_row_round(const float *x, float *y, int64_t d, float eps, const float *g, const float *b, ts_dtype h,
                         bool f16v)
{
    /* f16v: the first n16 elements' element-wise passes fused (above), the rest as written */
    const int64_t n16 = f16v ? d / 16 * 16 : 0;
    float sum = 0, var = 0, sq[LN_SQ];
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; i++) sum += x[i];
    float mean = sum / (float)d;
    xhalf_round(h, &mean, 1);
    if (n16) ln_sub_f16(x, y, n16, mean);
#pragma omp simd
    for (int64_t i = n16; i < d; i++) y[i] = x[i] - mean;
    xhalf_round(h, y + n16, (size_t)(d - n16));
    for (int64_t i0 = 0; i0 < d; i0 += LN_SQ) {
        int64_t m = d - i0 < LN_SQ ? d - i0 : LN_SQ;
#pragma omp simd
        for (int64_t i = 0; i < m; i++) sq[i] = y[i0 + i] * y[i0 + i];
        xhalf_round(h, sq, (size_t)m);
#pragma omp simd reduction(+ : var)
        for (int64_t i = 0; i < m; i++) var += sq[i];
    }
    float v[3];
    v[0] = var / (float)d;
    xhalf_round(h, v, 1);
    v[1] = v[0] + eps;
    xhalf_round(h, v + 1, 1);
    v[2] = sqrtf(v[1]);
    xhalf_round(h, v + 2, 1);
    const float sd = v[2];
    if (n16) ln_tail_f16(y, n16, sd, g, b);
    const int64_t k = d - n16;
    y += n16, g += n16, b = b ? b + n16 : NULL;
#pragma omp simd
    for (int64_t i = 0; i < k; i++) y[i] = y[i] / sd;
    xhalf_round(h, y, (size_t)k);
#pragma omp simd
    for (int64_t i = 0; i < k; i++) y[i] = y[i] * g[i];
    xhalf_round(h, y, (size_t)k);
    if (b) {
#pragma omp simd
        for (int64_t i = 0; i < k; i++) y[i] = y[i] + b[i];
        xhalf_round(h, y, (size_t)k);
    }
}

static void ln_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const ln_state *s = st->state;
    const float *x = in[0], *g = s->scale_in >= 0 ? in[s->scale_in] : s->scale;
    const float *b = s->bias_in >= 0 ? in[s->bias_in] : s->bias;
    float *y = out[0];
    (void)scratch;
    const bool f16v = s->round == TS_F16 && s->f16v;
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && s->rows > 1 && s->rows * s->d >= XV_PAR_MIN / 4)
    for (int64_t r = 0; r < s->rows; r++) {
        if (s->round)
            ln_row_round(x + r * s->d, y + r * s->d, s->d, s->eps, g, b, s->round, f16v);
        else
            ln_row(x + r * s->d, y + r * s->d, s->d, s->eps, g, b);
    }
}

/* Constant t broadcast onto `norm`, as a new float array (NULL: no memory). */
static float *expand(const ts_tensor *t, const ts_shape *norm, int64_t d)
{
    int64_t st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0;
    float *o = malloc(sizeof(float) * (size_t)(d ? d : 1));
    if (!o) return NULL;
    ts_shape_bcast_strides(&t->shape, norm, st);
    for (int64_t i = 0; i < d; i++) {
        o[i] = ((const float *)t->data)[off];
        for (int k = norm->rank - 1; k >= 0; k--) {
            off += st[k];
            if (++idx[k] < norm->dims[k]) break;
            off -= st[k] * norm->dims[k];
            idx[k] = 0;
        }
    }
    return o;
}

static ts_status ln_build(xplan *p, int n, xstep *st, ts_error *err)
{
    const ts_node *nd = xplan_node(p, n);
    if (nd->noutputs != 1 || !xv_all_f32(p, n)) return TS_ERR_UNSUPPORTED;
    const ts_layernorm_attrs *a = nd->attrs;
    const ts_shape *sh = &p->g->values[nd->inputs[0]].shape;
    int axis;
    if (!ts_axis_norm(a->axis, sh->rank, &axis)) return TS_ERR_UNSUPPORTED;
    ts_shape norm = {.rank = sh->rank - axis};
    int64_t d = 1;
    for (int i = axis; i < sh->rank; i++) d *= (norm.dims[i - axis] = sh->dims[i]);
    if (d == 0) return TS_ERR_UNSUPPORTED;
    /* parameters: full size as given, or constants to expand */
    const ts_tensor *pc[2] = {NULL, NULL};
    for (int i = 1; i < nd->ninputs && i < 3; i++) {
        int v = nd->inputs[i];
        if (v < 0 || ts_shape_numel(&p->g->values[v].shape) == d) continue;
        if (!(pc[i - 1] = xplan_const(p, v))) return TS_ERR_UNSUPPORTED;
    }
    ln_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->rows = ts_shape_numel(sh) / d;
    s->d = d;
    s->eps = (float)a->epsilon;
    s->threads = xv_threads(p);
    s->scale_in = s->bias_in = -1;
    for (int k = 0; k < 2; k++) {
        if (!pc[k]) continue;
        float *e = expand(pc[k], &norm, d);
        if (!e) return ts_error_set(err, TS_ERR_NOMEM, "out of memory expanding a LayerNormalization parameter");
        *(k ? &s->bias : &s->scale) = e;
    }
    if (xv_bind_io(p, n, st, err)) return err->code;
    /* bound inputs are X, Scale, then B when present (xv_bind_io skips absent ones) */
    if (!s->scale) s->scale_in = 1;
    if (nd->ninputs > 2 && nd->inputs[2] >= 0 && !s->bias) s->bias_in = 2;
    return TS_OK;
}

const xkernel xk_vec_layernorm = {"vec.layernorm", ln_build, ln_run, ln_free};

/* ------------------------------------------- LayerNorm written out in ops
 *
 * Exporters before opset 17 (PyTorch's LayerNorm, and every LayerNorm2d
 * that permutes channels last first) write LayerNorm as
 *   m = ReduceMean(x), d = Sub(x, m), v = ReduceMean(Pow(d, 2) or Mul(d, d)),
 *   y = Div(d, Sqrt(Add(v, eps))) [, Mul(y, gamma)] [, Add(y, beta)]
 * nine element-wise and reduction steps, five full passes over memory.
 * Taken at the first ReduceMean, the whole pattern is one pass per row (the
 * row stays in cache).  The normalized axes are the trailing ones (rows,
 * ln_row) or a block followed by others: LayerNorm over the channels of
 * NCHW as ConvNeXt-style code writes it (x.mean(1, keepdim=True)...), run
 * across the contiguous H*W positions (ln_cols).  The lowering stage
 * (lower_group.c) matches the pattern and hands the kernel the group:
 * intermediate values read by the pattern only; gamma and beta constants
 * varying along the normalized axes only (ConvNeXt's [C, 1, 1]).
 *
 * A lowering, made at every graph optimization level: each node's function
 * in float32, the two means summed in this step's order and d / sqrt(v +
 * eps) taken as d times its reciprocal; stated tolerance 2^-20 of the
 * largest output against the unfused steps (tests/unit/test_lowering.c;
 * a half plan rounds as each node would: test_exec_half.c).  Level all
 * rewrites the trailing-axes spelling into LayerNormalization first
 * (opt/fuse_layernorm.c); over NCHW's channels no ONNX operator spells it,
 * so this step is its only fused form (a Transpose -> LayerNormalization
 * -> Transpose rewrite would add two passes over the tensor). */

#define LN_CHUNK 256 /* positions across `inner` handled together (stack arrays) */

/* `cn` positions at x (stride `inner` between the d normalized elements). */
XV_CLONES static void ln_cols(const float *x, float *y, int64_t d, int64_t inner, int64_t cn, float eps,
                              const float *g, const float *b)
{
    float mean[LN_CHUNK], r[LN_CHUNK];
    for (int64_t i = 0; i < cn; i++) mean[i] = 0, r[i] = 0;
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) mean[i] += xr[i];
    }
    for (int64_t i = 0; i < cn; i++) mean[i] /= (float)d;
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) r[i] += (xr[i] - mean[i]) * (xr[i] - mean[i]);
    }
    for (int64_t i = 0; i < cn; i++) r[i] = 1.0f / sqrtf(r[i] / (float)d + eps);
    for (int64_t c = 0; c < d; c++) {
        const float *xr = x + c * inner;
        float *yr = y + c * inner;
        const float gc = g[c], bc = b ? b[c] : 0.0f;
#pragma omp simd
        for (int64_t i = 0; i < cn; i++) yr[i] = (xr[i] - mean[i]) * r[i] * gc + bc;
    }
}

static void lnd_run(const xstep *st, void *const *in, void *const *out, void *scratch)
{
    const ln_state *s = st->state;
    if (s->inner == 1) {
        ln_run(st, in, out, scratch);
        return;
    }
    const float *x = in[0];
    float *y = out[0];
    const int64_t nchunk = (s->inner + LN_CHUNK - 1) / LN_CHUNK, items = s->rows * nchunk;
#pragma omp parallel for schedule(static) num_threads(s->threads) \
    if (s->threads > 1 && items > 1 && s->rows * s->d * s->inner >= XV_PAR_MIN / 4)
    for (int64_t it = 0; it < items; it++) {
        int64_t o = it / nchunk, c0 = (it % nchunk) * LN_CHUNK;
        int64_t off = o * s->d * s->inner + c0;
        ln_cols(x + off, y + off, s->d, s->inner, s->inner - c0 < LN_CHUNK ? s->inner - c0 : LN_CHUNK, s->eps,
                s->scale, s->bias);
    }
}

/* The d values of constant t broadcast onto x's shape xs along the
 * normalized axes (mask), in their row-major order: a new array, NULL when
 * out of memory.  The lowering stage checked that t varies along them only. */
static float *norm_expand(const ts_tensor *t, const ts_shape *xs, const bool *mask, int64_t d)
{
    float *out = malloc(sizeof(float) * (size_t)d);
    if (!out) return NULL;
    int64_t st[TS_MAX_RANK], idx[TS_MAX_RANK] = {0}, off = 0;
    ts_shape_bcast_strides(&t->shape, xs, st);
    for (int64_t i = 0; i < d; i++) {
        out[i] = ((const float *)t->data)[off];
        for (int k = xs->rank - 1; k >= 0; k--) {
            if (!mask[k]) continue;
            off += st[k];
            if (++idx[k] < xs->dims[k]) break;
            off -= st[k] * xs->dims[k];
            idx[k] = 0;
        }
    }
    return out;
}

/* Served by the lowering stage (lower_group.c): the group's nodes, values
 * and geometry are handed over; this reads no node. */
static ts_status lnd_build(xplan *p, int n, xstep *st, ts_error *err)
{
    (void)n;
    const xgroup_layernorm *m = &p->group->ln;
    const ts_shape *xs = &p->g->values[m->x].shape;
    ln_state *s = xv_state(sizeof *s, err);
    if (!s) return err->code;
    st->state = s;
    s->d = m->d;
    s->inner = m->inner;
    s->rows = m->outer;
    s->eps = m->eps;
    s->threads = xv_threads(p);
    s->scale_in = s->bias_in = -1;
    s->round = m->round;
    s->f16v = xhalf_isa() == 2 && !xplan_skips(p, "ln.f16_fused");
    if (m->gamma >= 0) {
        s->scale = norm_expand(xplan_const(p, m->gamma), xs, m->mask, m->d);
    } else if ((s->scale = malloc(sizeof(float) * (size_t)s->d))) {
        for (int64_t i = 0; i < s->d; i++) s->scale[i] = 1.0f;
    }
    if (m->beta >= 0) s->bias = norm_expand(xplan_const(p, m->beta), xs, m->mask, m->d);
    if (!s->scale || (m->beta >= 0 && !s->bias))
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a LayerNorm's parameters");
    if (xstep_alloc(st, 1, 1, err)) return err->code;
    st->in[0] = xplan_plain(p, xplan_value_buf(p, m->x), err);
    if (st->in[0] < 0) return err->code ? err->code : TS_ERR_INVALID;
    st->out[0] = xplan_value_buf(p, p->group->y);
    if (st->out[0] < 0) return ts_error_set(err, TS_ERR_NOMEM, "out of memory for a buffer");
    return TS_OK;
}

const xkernel xk_vec_layernorm_ops = {"vec.layernorm.ops", lnd_build, lnd_run, ln_free};

bool xv_layernorm_rounds(const xstep *s)
{
    return s->k == &xk_vec_layernorm_ops && ((const ln_state *)s->state)->round != TS_UNDEFINED;
}
