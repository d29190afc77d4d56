/* float16 / bfloat16 graphs (docs/runtime.md, "Half precision").
 *
 * oneDNN 2.6 has no CPU float16 convolution or matmul (not even with
 * AVX512-FP16), so a float16 graph computes in float32, operator by
 * operator, as ONNX Runtime's CPU provider does (its inserted Casts); where
 * the CPU has native float16 the steps round as native kernels would
 * (xhalf_native_f16).  What stays 16-bit is what costs memory: the weights.
 *
 * The plan lowers a copy of the graph (xhalf_begin) in which every 16-bit
 * value is float32, graph inputs and outputs keep their 16-bit type through
 * a Cast each, and a node whose output type is fixed to 16 bits by its
 * attributes (Cast to float16 is retargeted; anything else) is followed by a
 * Cast back.  Every fast kernel then applies unchanged.  A large 16-bit
 * constant is widened to float32 only when its node (or one the node may
 * fuse) is lowered; the kernel packs it into its layout, the widened copy is
 * released (weights_once.c), and the packed float32 copy is stored 16-bit
 * again (exact: its values came from 16 bits).  At run time the step's
 * wrapper widens it into the step's scratch just before the kernel runs:
 * one streaming conversion per weight and run (F16C / AVX-512), into a
 * scratch the memory plan shares between steps.  So the weights are held
 * once, in 16 bits, and one layer's float32 weights exist at a time. */
#include <cpuid.h>
#include <immintrin.h>
#include <malloc.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "dnnl/dnnl_conv.h"
#include "dnnl/dnnl_util.h"
#include "exec/half.h"
#include "exec/plan_internal.h"
#include "vec/vec_eltwise.h"
#include "ops/attrs.h"
#include "ops/list.h"

/* Constants below this are widened when the plan starts (fusing kernels
 * read the small ones of nodes far ahead: LayerNorm's gamma and beta) and
 * stay float32; larger ones are widened per node and stored 16-bit. */
#define HALF_SMALL_BYTES (64 * 1024)

static bool is_half(ts_dtype t) { return t == TS_F16 || t == TS_BF16; }
static int64_t onnx_code(ts_dtype t) { return t == TS_F16 ? 10 : t == TS_BF16 ? 16 : 1; }

/* ------------------------------------------------------------ conversion */

static float f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
    if (e == 31)
        u = s | 0x7F800000u | (m << 13);
    else if (e)
        u = s | ((e + 112) << 23) | (m << 13);
    else if (!m)
        u = s;
    else { /* subnormal: normalize */
        e = 113;
        while (!(m & 1024)) {
            m <<= 1;
            e--;
        }
        u = s | (e << 23) | ((m & 1023) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t s = (u >> 16) & 0x8000, a = u & 0x7FFFFFFF;
    if (a > 0x7F800000) return (uint16_t)(s | 0x7E00 | ((a >> 13) & 0x3FF)); /* NaN stays NaN */
    if (a >= 0x477FF000) return (uint16_t)(s | 0x7C00);                    /* rounds past 65504: inf */
    if (a < 0x38800000) {                                                    /* float16 subnormal or 0 */
        if (a < 0x33000000) return (uint16_t)s;                              /* below half the least */
        /* value = m * 2^(e - 150); in float16's unit 2^-24 that is m >> (126 - e) */
        uint32_t m = (a & 0x7FFFFF) | 0x800000, sh = 126 - (a >> 23);
        uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        q += rem > half || (rem == half && (q & 1));
        return (uint16_t)(s | q);
    }
    uint32_t r = a + 0xFFF + ((a >> 13) & 1) - 0x38000000; /* rebias 127 -> 15, round to nearest even */
    return (uint16_t)(s | (r >> 13));
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

/* Which float16 conversions the CPU has: 2 AVX-512 (16 lanes), 1 AVX2 +
 * F16C (8 lanes: older Zen), 0 none (the scalar code above).  Without
 * the F16C paths an AVX2 CPU widened every weight, rounded every node's
 * output and narrowed by the scalar code, a branch per value.  Capped by
 * oneDNN's effective ISA, so DNNL_MAX_CPU_ISA=AVX2 emulates such a CPU
 * for these as for oneDNN's kernels (the AMX gate reads it too). */
static int f16_level_forced = -1;

void xhalf_isa_force(int level) { __atomic_store_n(&f16_level_forced, level, __ATOMIC_RELAXED); }

/* F16C by CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports knows
 * no "f16c" (the fuzz targets are built with clang). */
bool xhalf_cpu_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static int f16_level(void)
{
    static int level = -1;
    int forced = __atomic_load_n(&f16_level_forced, __ATOMIC_RELAXED), l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (forced >= 0) return forced;
    if (l < 0) {
        const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), a512 = (unsigned)dnnl_cpu_isa_avx512_core,
                       a2 = (unsigned)dnnl_cpu_isa_avx2;
        l = __builtin_cpu_supports("avx512f") && (isa & a512) == a512                                  ? 2
            : __builtin_cpu_supports("avx2") && xhalf_cpu_f16c() && (isa & a2) == a2 ? 1
                                                                                                   : 0;
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return l;
}

int xhalf_isa(void) { return f16_level(); }

__attribute__((target("avx2,f16c"))) static void f16_widen_avx2(const uint16_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const void *)(s + i))));
    for (; i < n; i++) d[i] = f16_to_f32(s[i]);
}

__attribute__((target("avx2,f16c"))) static void f16_narrow_avx2(const float *s, uint16_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((void *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) d[i] = f32_to_f16(s[i]);
}

/* y = x rounded (x == y allowed) */
__attribute__((target("avx2,f16c"))) static void f16_round_into_avx2(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i),
                                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

__attribute__((target("avx512f"))) static void f16_widen_avx512(const uint16_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const void *)(s + i))));
    for (; i < n; i++) d[i] = f16_to_f32(s[i]);
}

__attribute__((target("avx512f"))) static void f16_narrow_avx512(const float *s, uint16_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((void *)(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) d[i] = f32_to_f16(s[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void bf16_widen(const uint16_t *s, float *d,
                                                                                   size_t n)
{
    uint32_t *u = (uint32_t *)d;
    for (size_t i = 0; i < n; i++) u[i] = (uint32_t)s[i] << 16;
}

static void widen_part(ts_dtype half, const uint16_t *s, float *d, size_t n)
{
    const int l = half == TS_BF16 ? -1 : f16_level();
    if (half == TS_BF16)
        bf16_widen(s, d, n);
    else if (l == 2)
        f16_widen_avx512(s, d, n);
    else if (l == 1)
        f16_widen_avx2(s, d, n);
    else
        for (size_t i = 0; i < n; i++) d[i] = f16_to_f32(s[i]);
}

/* Split over the plan's threads when large (a weight of MiBs); a chunk is
 * a multiple of 64 elements so every thread stores whole cache lines. */
void xhalf_widen(ts_dtype half, const void *src, float *dst, size_t n)
{
    if (n < (1u << 16)) {
        widen_part(half, src, dst, n);
        return;
    }
    const uint16_t *s = src;
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t per = (n / (size_t)nt + 63) & ~(size_t)63, a = per * (size_t)t, b = a + per < n ? a + per : n;
        if (a < b) widen_part(half, s + a, dst + a, b - a);
    }
}

/* float32 -> float32 on the 16-bit grid, in place: the value a 16-bit
 * output holds (round to nearest even; past float16's range, infinity). */
__attribute__((target("avx512f"))) static void f16_round_avx512(float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void bf16_round(float *x, size_t n)
{
    uint32_t *u = (uint32_t *)x;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = u[i];
        u[i] = (v & 0x7FFFFFFF) > 0x7F800000 ? v | 0x400000 : (v + 0x7FFF + ((v >> 16) & 1)) & 0xFFFF0000u;
    }
}

static void round_part(ts_dtype half, float *x, size_t n)
{
    const int l = half == TS_BF16 ? -1 : f16_level();
    if (half == TS_BF16)
        bf16_round(x, n);
    else if (l == 2)
        f16_round_avx512(x, n);
    else if (l == 1)
        f16_round_into_avx2(x, x, n);
    else
        for (size_t i = 0; i < n; i++) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

/* y = x on the 16-bit grid, one pass (a block of a fused program: the
 * program's round op read its operand, copied it to y and rounded y in
 * place, two passes; ResNet-50 float16 b4, 1 thread: memmove 3 % of the
 * run's samples).  Serial: the program splits its blocks over threads. */
__attribute__((target("avx512f"))) static void f16_round_into_avx512(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_loadu_ps(x + i),
                                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    for (; i < n; i++) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

void xhalf_round_into(ts_dtype half, const float *x, float *y, size_t n)
{
    const int l = half == TS_F16 ? f16_level() : -1;
    if (l == 2) {
        f16_round_into_avx512(x, y, n);
        return;
    }
    if (l == 1) {
        f16_round_into_avx2(x, y, n);
        return;
    }
    if (y != x) memcpy(y, x, n * sizeof *y);
    round_part(half, y, n);
}

void xhalf_round(ts_dtype half, float *x, size_t n)
{
    if (n < (1u << 16)) {
        round_part(half, x, n);
        return;
    }
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        size_t per = (n / (size_t)nt + 63) & ~(size_t)63, a = per * (size_t)t, b = a + per < n ? a + per : n;
        if (a < b) round_part(half, x + a, b - a);
    }
}

/* y = relu?(round(round(y) + r)) over n floats: a residual Add [+ Relu]
 * as its convolution's tail (dnnl.conv, xd_fuse.half_sum), one pass, in
 * registers (written as separate scalar loops GCC -O2 left them scalar and
 * Relu a branch on a random sign: layer1's tail 2.4 ms against the Add
 * step's 0.6).  Relu as the element-wise program has it, a > 0 ? a : 0
 * (-0 and NaN give +0): maxps(a, 0) returns its second operand for zeros
 * and NaN, so the result is the unfused plan's bit for bit. */
#define RND512(v) _mm512_cvtph_ps(_mm512_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
__attribute__((target("avx512f"))) static size_t f16_round_add_avx512(float *y, const float *r, size_t n, bool relu)
{
    const __m512 z = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = RND512(_mm512_add_ps(RND512(_mm512_loadu_ps(y + i)), _mm512_loadu_ps(r + i)));
        _mm512_storeu_ps(y + i, relu ? _mm512_max_ps(v, z) : v);
    }
    return i; /* the tail: round_add_part's generic passes */
}
#undef RND512

/* The AVX2 CPUs (older Zen) have F16C: 8 lanes. */
#define RND256(v) _mm256_cvtph_ps(_mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
__attribute__((target("avx2,f16c"))) static size_t f16_round_add_avx2(float *y, const float *r, size_t n, bool relu)
{
    const __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = RND256(_mm256_add_ps(RND256(_mm256_loadu_ps(y + i)), _mm256_loadu_ps(r + i)));
        _mm256_storeu_ps(y + i, relu ? _mm256_max_ps(v, z) : v);
    }
    return i; /* the tail: round_add_part's generic passes */
}
#undef RND256

static void round_add_part(ts_dtype half, float *y, const float *r, size_t n, bool relu)
{
    const int l = half == TS_F16 ? f16_level() : -1; /* the conversions' level (capped by oneDNN's ISA) */
    const size_t done = l == 2 ? f16_round_add_avx512(y, r, n, relu) : l == 1 ? f16_round_add_avx2(y, r, n, relu) : 0;
    y += done, r += done, n -= done;
    round_part(half, y, n);
    for (size_t i = 0; i < n; i++) y[i] += r[i];
    round_part(half, y, n);
    if (relu)
        for (size_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0.0f;
}

void xhalf_round_add(ts_dtype half, float *y, const float *r, size_t n, bool relu)
{
    const size_t B = 4096; /* a block per task: 16 KiB of each operand */
    const int64_t nb = (int64_t)((n + B - 1) / B);
#pragma omp parallel for schedule(static) if (n >= (1u << 14))
    for (int64_t b = 0; b < nb; b++) {
        size_t a = (size_t)b * B, m = n - a < B ? n - a : B;
        round_add_part(half, y + a, r + a, m, relu);
    }
}

void xhalf_narrow(ts_dtype half, const float *src, void *dst, size_t n)
{
    uint16_t *d = dst;
    const int l = half == TS_BF16 ? -1 : f16_level();
    if (half == TS_BF16)
        for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
    else if (l == 2)
        f16_narrow_avx512(src, d, n);
    else if (l == 1)
        f16_narrow_avx2(src, d, n);
    else
        for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(src[i]);
}

/* ------------------------------------------------ the float32-computing copy */

static void rewire(ts_graph *c, int from, int to, int skip_node)
{
    for (int n = 0; n < c->nnodes; n++) {
        ts_node *nd = &c->nodes[n];
        if (nd->dead || n == skip_node) continue;
        for (int j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] == from) nd->inputs[j] = to;
    }
}

/* Node Cast(v) -> a new value named `name` of type `to`; its value id. */
static int add_cast(ts_graph *c, int v, ts_dtype to, const char *name, ts_error *err)
{
    ts_cast_attrs a = {.to = to, .onnx_to = onnx_code(to)};
    char nn[300];
    snprintf(nn, sizeof nn, "%s/half_cast", name);
    int out = -1;
    if (ts_graph_add_node_parsed(c, &ts_op_cast, nn, &v, 1, &a, 1, &name, &out, err) < 0) return -1;
    return out;
}

static void unique(const ts_graph *c, const char *base, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s%s", base, suffix);
    for (int k = 1; ts_graph_find_value(c, out) >= 0; k++) snprintf(out, n, "%s%s%d", base, suffix, k);
}

static ts_status widen_graph(ts_graph *c, ts_dtype half, ts_error *err)
{
    int nv0 = c->nvalues, nn0 = c->nnodes;
    bool *was = calloc((size_t)nv0 + 1, 1);
    int *order = malloc(sizeof(int) * ((size_t)nn0 + 1)), cnt = 0;
    ts_status st = TS_OK;
    char name[300];
    if (!was || !order) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int n = 0; n < nn0; n++)
        if (!c->nodes[n].dead && c->nodes[n].op->attrs_retain) { /* bodies keep their 16-bit types */
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s' has bodies", c->nodes[n].name);
            goto done;
        }
    if ((st = ts_graph_topo_order(c, order, &cnt, err))) goto done;
    bool *is_in = calloc((size_t)nv0 + 1, 1);
    if (!is_in) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < c->ninputs; i++) is_in[c->inputs[i]] = true;
    for (int v = 0; v < nv0; v++)
        if (is_half(c->values[v].dtype) && !is_in[v]) {
            was[v] = true;
            c->values[v].dtype = TS_F32;
        }
    /* graph inputs: the caller's 16-bit tensor, a Cast to float32 inside */
    for (int i = 0; i < c->ninputs && !st; i++) {
        int x = c->inputs[i];
        if (!is_half(c->values[x].dtype) || ts_value_uses(c, x) == 0) continue;
        unique(c, c->values[x].name, ".f32", name, sizeof name);
        int x32 = add_cast(c, x, TS_F32, name, err);
        if (x32 < 0)
            st = err->code;
        else
            rewire(c, x, x32, c->values[x32].producer);
    }
    free(is_in);
    /* nodes whose output type does not follow their inputs */
    for (int k = 0; k < cnt && !st; k++) {
        int n = order[k];
        ts_dtype dt[16];
        ts_shape sh[16];
        if (c->nodes[n].noutputs > 16) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': too many outputs", c->nodes[n].name);
            break;
        }
        if ((st = ts_node_infer(c, n, dt, sh, err))) break;
        for (int o = 0; o < c->nodes[n].noutputs && !st; o++) {
            int y = c->nodes[n].outputs[o];
            if (y < 0 || dt[o] == c->values[y].dtype) continue;
            if (!was[y] || dt[o] != half) {
                st = ts_error_set(err, TS_ERR_UNSUPPORTED, "node '%s': output %d is %s", c->nodes[n].name, o,
                                  ts_dtype_name(dt[o]));
            } else if (c->nodes[n].op == &ts_op_cast) {
                ts_cast_attrs *a = c->nodes[n].attrs;
                a->via = a->to; /* still rounded to 16 bits, as ONNX specifies */
                a->to = TS_F32;
                a->onnx_to = 1;
            } else { /* keep the node's 16-bit output, widen it after */
                c->values[y].dtype = half;
                unique(c, c->values[y].name, ".f32", name, sizeof name);
                int y32 = add_cast(c, y, TS_F32, name, err);
                if (y32 < 0)
                    st = err->code;
                else
                    rewire(c, y, y32, c->values[y32].producer);
            }
        }
    }
    /* graph outputs: computed in float32 under another name, Cast to the
     * 16-bit type under the output's own */
    for (int i = 0; i < c->noutputs && !st; i++) {
        int y = c->outputs[i];
        if (y >= nv0 || !was[y] || c->values[y].dtype != TS_F32) continue;
        char *orig = c->values[y].name;
        unique(c, orig, ".f32", name, sizeof name);
        c->values[y].name = ts_strdup(name);
        int y16 = c->values[y].name ? add_cast(c, y, half, orig, err) : -1;
        free(orig);
        if (y16 < 0) {
            st = err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
        for (int j = i; j < c->noutputs; j++)
            if (c->outputs[j] == y) c->outputs[j] = y16;
    }
done:
    free(was);
    free(order);
    return st;
}

static void release_caller_original(xplan *p, int v);
static bool caller_original_releasable(const xplan *p, int v, int refs);

/* Widens t into w a block at a time, each whole page of t's own memory
 * given back to the OS once read: t is released right after (the caller
 * gave its weights up), and the float32 copy need not sit beside the whole
 * 16-bit one (ViT's MLP weights, 4.5 + 9 MiB: its plan's peak). */
static void widen_consuming(const ts_tensor *t, float *w, size_t n)
{
    enum { BLK = 256 * 1024 };
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096, next = ((uintptr_t)t->data + page - 1) & ~(page - 1);
    for (size_t i = 0; i < n; i += BLK) {
        size_t m = n - i < BLK ? n - i : BLK;
        xhalf_widen(t->dtype, (const uint16_t *)t->data + i, w + i, m);
        uintptr_t end = ((uintptr_t)((const uint16_t *)t->data + i + m)) & ~(page - 1);
        if (end > next) {
            madvise((void *)next, end - next, MADV_DONTNEED);
            next = end;
        }
    }
}

typedef struct mapped {
    void *base;
    size_t len;
} mapped;

static void mapped_release(void *keep)
{
    mapped *m = keep;
    munmap(m->base, m->len);
    free(m);
}

/* A float32 tensor of t's shape; a large one in pages of its own, touched
 * only as written and returned to the OS when it goes (from glibc's heap,
 * calloc would zero the whole block at once: the widened copy and the
 * 16-bit original side by side after all). */
#define HALF_MAP_BYTES (1u << 20)
static ts_tensor *widened_new(const ts_tensor *t, ts_error *err)
{
    size_t bytes = (size_t)ts_tensor_numel(t) * sizeof(float);
    if (bytes < HALF_MAP_BYTES) return ts_tensor_new(TS_F32, &t->shape, err);
    mapped *m = malloc(sizeof *m);
    void *base = m ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    ts_tensor *w = base != MAP_FAILED ? ts_tensor_wrap(TS_F32, &t->shape, base) : NULL;
    if (!w) {
        if (base != MAP_FAILED) munmap(base, bytes);
        free(m);
        ts_error_set(err, TS_ERR_NOMEM, "out of memory widening a %zu-byte weight", t->nbytes);
        return NULL;
    }
    *m = (mapped){base, bytes};
    w->keep = m;
    w->release = mapped_release;
    return w;
}

/* A constant's 16-bit tensor replaced by its float32 copy (exact). */
static ts_status widen_const(xplan *p, ts_graph *c, int v, ts_error *err)
{
    ts_tensor *t = c->values[v].constant;
    if (!t || !is_half(t->dtype) || !t->data) return TS_OK;
    ts_tensor *w = widened_new(t, err);
    if (!w) return err->code;
    size_t n = (size_t)ts_tensor_numel(t);
    if (p && t->owns_data && v < p->caller_g->nvalues && p->caller_g->values[v].constant == t &&
        caller_original_releasable(p, v, 2)) /* the caller's and the copy's reference */
        widen_consuming(t, w->data, n);
    else
        xhalf_widen(t->dtype, t->data, w->data, n);
    c->values[v].constant = w;
    ts_tensor_unref(t); /* the caller's graph holds the original */
    if (p) release_caller_original(p, v);
    return TS_OK;
}

ts_status xhalf_begin(xplan *p, ts_error *err)
{
    const ts_graph *g = p->g;
    ts_dtype half = TS_UNDEFINED;
    for (int v = 0; v < g->nvalues; v++)
        if (is_half(g->values[v].dtype)) {
            if (half && half != g->values[v].dtype) return TS_OK; /* both kinds: left to the shadows */
            half = g->values[v].dtype;
        }
    if (!half || xplan_skips(p, "half")) return TS_OK;
    ts_graph *c = ts_graph_copy(g);
    if (!c) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    ts_error e = {0};
    ts_status st = widen_graph(c, half, &e);
    for (int v = 0; !st && v < c->nvalues; v++) {
        const ts_tensor *t = c->values[v].constant;
        if (t && is_half(t->dtype) && c->values[v].dtype == TS_F32 && t->nbytes < HALF_SMALL_BYTES)
            st = widen_const(NULL, c, v, &e);
    }
    if (st == TS_ERR_NOMEM) {
        ts_graph_free(c);
        *err = e;
        return st;
    }
    if (st) { /* the copy cannot be typed: the original runs on the reference kernel */
        ts_graph_free(c);
        return TS_OK;
    }
    p->own_g = c;
    p->caller_g = g;
    p->g = c;
    p->half = half;
    /* the copy's widened constants are the plan's own: released once
     * packed whatever the caller asked; the caller's originals only when
     * it asked (release_caller_original) */
    p->half_release_caller = p->opts.release_packed_weights;
    p->opts.release_packed_weights = true;
    return TS_OK;
}

/* The constant behind v (through Identity, as xplan_const sees it). */
static int const_value(const ts_graph *c, int v)
{
    while (v >= 0 && !c->values[v].constant && c->values[v].producer >= 0) {
        const ts_node *nd = &c->nodes[c->values[v].producer];
        if (nd->op != &ts_op_identity || nd->ninputs != 1) return -1;
        v = nd->inputs[0];
    }
    return v >= 0 && c->values[v].constant ? v : -1;
}

/* ---------------------------------- 16-bit values rounded where produced
 *
 * ONNX types every intermediate of a float16 graph float16: each node's
 * output is rounded to the type.  Here a step's output whose value the
 * caller's graph types 16-bit is rounded in place as the step's tail (in
 * the wrapper below).  A fusion would hide the values between its nodes
 * from that rounding, and oneDNN's post-op chains and the vector kernels'
 * programs have no rounding of their own between ops, so in a half plan a
 * fusion may pass a 16-bit value only into a node that commutes with
 * rounding (round(f(x)) == f(round(x)): Relu, Clip and Max by values on
 * the grid, data movement): Conv + Relu still fuse, Conv + residual Add or
 * MatMul + bias Add do not.  The refusal is an extra consumer (PHANTOM)
 * counted on such a value from plan start until its producer is lowered:
 * every fusion looks for a sole consumer (or an exact count), so none
 * looks past it, and nothing else reads the count then.  TSOPT_SKIP=half.round
 * leaves both out (the float32 plan of before, for A/B timing); a native
 * float16 CPU leaves out the refusals and the rounding inside steps, not
 * the steps' own (rounds_inside). */
#define PHANTOM (1 << 24)

/* Output on the 16-bit grid whenever the inputs are: the op selects, moves
 * or compares values.  (A Cast to 16 bits is half.cast's, which rounds.) */
bool xhalf_grid_exact(const ts_op_desc *op)
{
    static const char *const names[] = {
        "Relu",      "Clip",         "Max",          "Min",     "MaxPool", "GlobalMaxPool", "ReduceMax",
        "ReduceMin", "Reshape",      "Flatten",      "Squeeze", "Unsqueeze", "Transpose",   "Identity",
        "Concat",    "Split",        "Slice",        "Gather",  "Pad",     "Expand",        "Tile",
        "Neg",       "Abs",          "DepthToSpace", "SpaceToDepth", "Where"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(op->name, names[i])) return true;
    return false;
}

/* Native float16 (see half.h): AVX512-FP16 is CPUID leaf 7, EDX bit 23;
 * its registers are AVX-512's, so the OS must save those (avx512f usable). */
static bool cpu_has_avx512fp16(void)
{
    unsigned a, b, c, d;
    if (!__builtin_cpu_supports("avx512f") || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return d >> 23 & 1;
}

bool xhalf_native_f16(const xplan *p)
{
    if (xplan_skips(p, "half.native")) return false;
    const char *e = getenv("TSOPT_HALF_NATIVE");
    if (e && *e) return *e == '1';
    static int cpu = -1; /* cpuid once per process */
    if (cpu < 0) cpu = cpu_has_avx512fp16();
    return cpu;
}

/* Rounding inside fused steps (program round ops, the refusals), as ONNX
 * rounds every node: off with TSOPT_SKIP=half.round, and for float16 where
 * the CPU is native (xhalf_native_f16: steps round at their outputs only). */
static bool rounds_inside(const xplan *p)
{
    return p->half && !xplan_skips(p, "half.round") && !(p->half == TS_F16 && xhalf_native_f16(p));
}

/* Node n is a Cast: an explicit rounding the graph asks for, kept inside
 * fused steps in every mode. */
static bool is_cast(const xplan *p, int n)
{
    return n >= 0 && !strcmp(p->g->nodes[n].op->name, "Cast");
}

/* Value v is typed 16-bit in the caller's graph, produced by a node, and
 * computed in float32 here. */
static bool rounds(const xplan *p, int v)
{
    const ts_graph *g = p->caller_g;
    return v >= 0 && v < g->nvalues && is_half(g->values[v].dtype) && g->values[v].producer >= 0 &&
           p->g->values[v].dtype == TS_F32;
}

ts_dtype xhalf_node_round(const xplan *p, int n)
{
    const ts_node *nd = &p->g->nodes[n];
    if (!p->half || xplan_skips(p, "half.round") || nd->noutputs != 1 || !rounds(p, nd->outputs[0]) ||
        xhalf_grid_exact(nd->op) || (!rounds_inside(p) && !is_cast(p, n)))
        return TS_UNDEFINED;
    return p->half;
}

ts_dtype xhalf_round_on_load(const xplan *p, int v)
{
    if (!p->half || xplan_skips(p, "half.round") || xplan_skips(p, "half.fuse") || !rounds(p, v) ||
        (!rounds_inside(p) && !is_cast(p, p->g->values[v].producer)) ||
        ts_value_uses(p->g, v) != 1 || ts_graph_is_output(p->g, v))
        return TS_UNDEFINED;
    return p->half;
}

int xhalf_consumers(const xplan *p, int v)
{
    return p->consumers[v] >= PHANTOM / 2 ? p->consumers[v] - PHANTOM : p->consumers[v];
}

int xhalf_sole_consumer(const xplan *p, int v)
{
    if (p->consumers[v] < PHANTOM / 2 || xplan_skips(p, "half.fuse")) return xplan_sole_consumer(p, v);
    xplan *q = (xplan *)p; /* the count as it would be without the refusal, for the look-up only */
    q->consumers[v] -= PHANTOM;
    int c = xplan_sole_consumer(q, v);
    q->consumers[v] += PHANTOM;
    return c;
}

static void add_phantoms(xplan *p)
{
    const ts_graph *c = p->g;
    for (int n = 0; n < c->nnodes; n++) {
        const ts_node *nd = &c->nodes[n];
        if (nd->dead || xhalf_grid_exact(nd->op)) continue;
        for (int j = 0; j < nd->ninputs; j++) {
            int v = nd->inputs[j];
            if (rounds(p, v) && p->consumers[v] < PHANTOM / 2 && (rounds_inside(p) || is_cast(p, c->values[v].producer)))
                p->consumers[v] += PHANTOM;
        }
    }
}

/* A large constant is widened when its own node is lowered: a kernel that
 * looks ahead at a later node's large constant finds it still 16-bit and
 * declines that fusion (they check the tensor's type), rather than hold
 * more than one layer's float32 weights at a time. */
ts_status xhalf_before_node(xplan *p, int n, ts_error *err)
{
    if (!p->half) return TS_OK;
    if (p->nbufs == 0 && p->nsteps == 0 && !xplan_skips(p, "half.round")) add_phantoms(p); /* the first node */
    ts_graph *c = p->own_g;
    const ts_node *nd = &c->nodes[n];
    for (int j = 0; j < nd->ninputs; j++) {
        int v = const_value(c, nd->inputs[j]);
        if (v >= 0 && c->values[v].dtype == TS_F32 && widen_const(p, c, v, err)) return err->code;
    }
    return TS_OK;
}

/* Kernels that bind their weight input per run (in[]) and never keep a
 * pointer into it: their packed weights may be stored 16-bit. */
extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_dnnl_matmul, xk_dnnl_gemm, xk_vec_gemv, xk_dnnl_conv_gated;
extern const xkernel xk_dnnl_patch; /* dnnl_patch.c: binds in[1] per run (ViT's patch weight, 1.1 MiB as float32) */
static bool widenable(const xkernel *k)
{
    return k == &xk_dnnl_conv || k == &xk_dnnl_deconv || k == &xk_dnnl_matmul || k == &xk_dnnl_gemm ||
           k == &xk_vec_gemv || k == &xk_dnnl_conv_gated || k == &xk_dnnl_patch;
}

/* Stores b 16-bit when that is exact (its values came from 16 bits: a
 * re-laid-out weight); a kernel's transform of them (Winograd's, a scale
 * folded in) stays float32.  Narrowed in place, block by block (each
 * block's 16-bit values land at or below float32 values already read),
 * then shrunk: a second, 16-bit copy beside the float32 one set ViT's peak
 * while the plan was built (its MLP weight: 9.4 + 4.7 MB at once).  False
 * only when out of memory (never, now). */
static bool store_half(xplan *p, xbuf *b)
{
    enum { BLK = 4096 };
    size_t n = b->bytes / sizeof(float);
    const float *f = b->data;
    uint16_t h[BLK];
    float w[BLK];
    for (size_t i = 0; i < n; i += BLK) {
        size_t m = n - i < BLK ? n - i : BLK;
        xhalf_narrow(p->half, f + i, h, m);
        xhalf_widen(p->half, h, w, m);
        if (memcmp(w, f + i, m * sizeof(float))) return true; /* -0.0 vs 0.0 or NaN payloads count as inexact too */
    }
    for (size_t i = 0; i < n; i += BLK) {
        size_t m = n - i < BLK ? n - i : BLK;
        xhalf_narrow(p->half, f + i, h, m);
        memcpy((uint16_t *)b->data + i, h, m * 2); /* bytes [2i, 2i + 2m): below 4i + 4m, read already */
    }
    void *shrunk = realloc(b->data, n > 0 ? n * 2 : 1);
    if (shrunk) b->data = shrunk;
    b->bytes = n * 2;
    b->half = true;
    return true;
}

static bool store_float(xplan *p, xbuf *b)
{
    size_t n = b->bytes / 2;
    float *f = xd_alloc(n * sizeof(float));
    if (!f) return false;
    xhalf_widen(p->half, b->data, f, n);
    free(b->data);
    b->data = f;
    b->bytes = n * sizeof(float);
    b->half = false;
    return true;
}

/* Every step reading buffer b (directly; a view of it never) can widen it. */
static bool readers_widenable(const xplan *p, int b, int from_step)
{
    for (int i = from_step; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++) {
            if (s->in[j] < 0) continue;
            if (s->in[j] == b && !widenable(s->k)) return false;
            if (s->in[j] != b && xbuf_root(p, s->in[j]) == b) return false;
        }
    }
    return true;
}

/* The caller's 16-bit original of constant v, once the plan's copy holds
 * its own (widened) tensor: nothing of the plan reads it again, so when the
 * caller gave its weights to the plan (opts.release_packed_weights) it goes
 * now, before the node packs, not after. */
static bool caller_original_releasable(const xplan *p, int v, int refs)
{
    const ts_graph *g = p->caller_g;
    const ts_tensor *t = v < g->nvalues ? g->values[v].constant : NULL;
    return p->half_release_caller && t && (refs > 1 || t != p->own_g->values[v].constant) && t->data &&
           t->refcount == refs && (t->owns_data || t->release) && !ts_graph_is_output(g, v);
}

static void release_caller_original(xplan *p, int v)
{
    ts_tensor *t = v < p->caller_g->nvalues ? p->caller_g->values[v].constant : NULL;
    if (!caller_original_releasable(p, v, 1)) return;
    if (t->owns_data) free(t->data);
    if (t->release) t->release(t->keep);
    t->data = NULL;
    t->owns_data = false;
    t->release = NULL;
    t->keep = NULL;
    p->stats.released_bytes += t->nbytes;
}

static void trim_heap(void)
{
#ifdef __GLIBC__
    malloc_trim(0); /* freed float32 copies of MiBs sat in malloc's heap */
#endif
}

ts_status xhalf_after_node(xplan *p, int nbufs_before, ts_error *err)
{
    if (!p->half) return TS_OK;
    for (int v = 0; v < p->g->nvalues; v++) /* the nodes just lowered: their outputs exist now */
        if (p->consumers[v] >= PHANTOM / 2 && p->claimed[p->g->values[v].producer]) p->consumers[v] -= PHANTOM;
    bool stored = false;
    for (int b = nbufs_before; b < p->nbufs && !xplan_skips(p, "half.store"); b++) {
        xbuf *x = &p->bufs[b];
        if (x->kind != XB_CONST || !x->owns_data || x->half || x->dtype != TS_F32 || x->bytes < HALF_SMALL_BYTES ||
            !readers_widenable(p, b, 0))
            continue;
        if (!store_half(p, x)) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        stored |= x->half;
    }
    if (stored) trim_heap();
    return TS_OK;
}

/* ------------------------------------------------ the step wrapper */

/* A step's kernel runs inside half.step: its 16-bit weights widened into
 * its scratch first, its 16-bit outputs rounded in place after. */
#define HW_MAX 4
typedef struct hw_state {
    xstep inner; /* the kernel's own step: k, state, scratch_bytes */
    ts_dtype half;
    int n, slot[HW_MAX];
    size_t elems[HW_MAX], off[HW_MAX]; /* float32 elements, offset in the scratch */
    int nround, *rslot;                /* outputs rounded: slots, float32 elements */
    size_t *relems;
    void **args;
} hw_state;

static void hw_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    hw_state *h = s->state;
    for (int j = 0; j < s->nin; j++) h->args[j] = in[j];
    for (int i = 0; i < h->n; i++) {
        float *w = (float *)((char *)scratch + h->off[i]);
        xhalf_widen(h->half, in[h->slot[i]], w, h->elems[i]);
        h->args[h->slot[i]] = w;
    }
    h->inner.k->run(&h->inner, h->args, out, h->inner.scratch_bytes ? scratch : NULL);
    for (int i = 0; i < h->nround; i++) xhalf_round(h->half, out[h->rslot[i]], h->relems[i]);
}

static void hw_free(hw_state *h)
{
    free(h->args);
    free(h->rslot);
    free(h->relems);
    free(h);
}

static void hw_destroy(void *state)
{
    hw_state *h = state;
    if (!h) return;
    if (h->inner.k->destroy) h->inner.k->destroy(h->inner.state);
    hw_free(h);
}

static ts_status hw_build(xplan *p, int n, xstep *s, ts_error *err)
{
    (void)p, (void)n, (void)s;
    return ts_error_set(err, TS_ERR_UNSUPPORTED, "half.step wraps steps, it lowers no node");
}

const xkernel xk_half_step = {"half.step", hw_build, hw_run, hw_destroy};

const xstep *xhalf_inner(const xstep *s)
{
    return s->k == &xk_half_step ? &((const hw_state *)s->state)->inner : s;
}

/* Value v is rounded by its reader as it loads it (vec_fuse.c). */
static bool rounded_on_load(const xplan *p, int v)
{
    for (int i = 0; v >= 0 && i < p->nsteps; i++) {
        const xstep *t = xhalf_inner(&p->steps[i]);
        if (t->k == &xk_vec_eltwise && ((const xv_prog *)t->state)->round_on_load == v + 1) return true;
    }
    return false;
}

/* Float32 elements of output j of s to round in place, 0 when none: a
 * 16-bit value computed by the step (not a lone exact node's copy or
 * selection of values already on the grid, not a layout conversion), held
 * in arena or output memory. */
extern const xkernel xk_half_cast;
static size_t round_elems(const xplan *p, const xstep *s, int j)
{
    int b = s->out[j];
    if (b < 0 || s->k == &xk_reorder || s->k == &xk_copy || s->k == &xk_half_cast || rounded_on_load(p, p->bufs[b].value) ||
        (s->nfused == 0 && xhalf_grid_exact(p->g->nodes[s->node].op)) ||
        (s->k == &xk_vec_eltwise && ((const xv_prog *)s->state)->rounded) || xv_layernorm_rounds(s) ||
        xd_matmul_rounds_bias(s) || xd_conv_rounds_sum(s)) /* rounded by it */
        return 0;
    const xbuf *x = &p->bufs[b], *r = &p->bufs[xbuf_root(p, b)];
    if (!rounds(p, x->value) || x->dtype != TS_F32 || (r->kind != XB_ARENA && r->kind != XB_OUTPUT)) return 0;
    size_t end = (size_t)xbuf_alias_offset(p, b) + x->bytes; /* a strided view's span stays in its root */
    size_t bytes = end <= r->bytes ? x->bytes : r->bytes - (size_t)xbuf_alias_offset(p, b);
    return bytes / sizeof(float);
}

static ts_status wrap(xplan *p, xstep *s, ts_error *err)
{
    int nw = 0, nr = 0;
    uint64_t self = 0; /* inputs the kernel widens itself, chunk by chunk (a matmul's weight: slot < 64) */
    for (int j = 0; j < s->nin; j++) {
        if (s->in[j] < 0 || !p->bufs[s->in[j]].half) continue;
        size_t cb = 0;
        if (j < 64 && !xplan_skips(p, "half.chunk") && !(cb = xd_matmul_half_chunks(s, j, p->half)))
            cb = xd_conv_half_chunks(s, j, p->half);
        if (!cb && !xplan_skips(p, "half.gemv")) cb = xv_gemv_half(s, j, p->half);
        if (cb) {
            self |= (uint64_t)1 << j;
            if (cb > s->scratch_bytes) s->scratch_bytes = cb;
        } else {
            nw++;
        }
    }
    for (int j = 0; j < s->nout && !xplan_skips(p, "half.round"); j++) nr += round_elems(p, s, j) > 0;
    if (!nw && !nr) return TS_OK;
    if (nw > HW_MAX) return ts_error_set(err, TS_ERR_UNSUPPORTED, "more than %d 16-bit weights in one step", HW_MAX);
    hw_state *h = calloc(1, sizeof *h);
    if (!h || !(h->args = calloc((size_t)s->nin + 1, sizeof(void *))) ||
        !(h->rslot = calloc((size_t)nr + 1, sizeof(int))) || !(h->relems = calloc((size_t)nr + 1, sizeof(size_t)))) {
        if (h) hw_free(h);
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    }
    h->inner = *s;
    h->half = p->half;
    size_t off = xd_round(s->scratch_bytes);
    for (int j = 0; j < s->nin; j++) {
        if (s->in[j] < 0 || !p->bufs[s->in[j]].half || (j < 64 && (self >> j & 1))) continue;
        h->slot[h->n] = j;
        h->elems[h->n] = p->bufs[s->in[j]].bytes / 2;
        h->off[h->n] = off;
        off += xd_round(h->elems[h->n] * sizeof(float));
        h->n++;
    }
    for (int j = 0; j < s->nout && nr; j++) {
        size_t m = round_elems(p, s, j);
        if (!m) continue;
        h->rslot[h->nround] = j;
        h->relems[h->nround++] = m;
    }
    s->k = &xk_half_step;
    s->state = h;
    s->scratch_bytes = nw ? off : s->scratch_bytes;
    return TS_OK;
}

ts_status xhalf_finish(xplan *p, ts_error *err)
{
    if (!p->half) return TS_OK;
    /* a 16-bit buffer read by a step that cannot widen it (a kernel fused
     * or shared the weight later) goes back to float32 */
    for (int b = 0; b < p->nbufs; b++)
        if (p->bufs[b].half && !readers_widenable(p, b, 0) && !store_float(p, &p->bufs[b]))
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    /* the reference kernel's steps are wrapped like any other (run.c finds
     * their errors through xhalf_inner): unwrapped, an element-wise node
     * left to it kept float32's values where the graph says 16 bits (tsopt
     * fuzz, seed 11 step 2094, with vec.eltwise skipped).  Control flow
     * runs its bodies as graphs of their own: not wrapped. */
    for (int i = 0; i < p->nsteps; i++)
        if (p->steps[i].k != &xk_cf && wrap(p, &p->steps[i], err)) return err->code;
    trim_heap();
    return TS_OK;
}

/* ------------------------------------------------ float32 copies under a byte budget
 *
 * Widening a 16-bit weight every run costs a streaming pass per step
 * (ResNet-50 float16, 1 thread, perf: f16_widen 10 % of the run's samples).
 * Where the float32 plan of the same graph holds more than twice the
 * 16-bit weights (its Winograd layers' transformed weights), the half plan
 * may keep some packed weights float32 and still hold at most
 * HALF_PEAK_SHARE (issue 29: 0.6) of what a process running the float32
 * plan holds.  Both processes also hold a fixed part F (libraries, oneDNN's
 * code; `tsopt bench` of ResNet-50 / ViT-B/16-l4 float16: peak RSS less
 * weights and arena 20.9 / 15.7 MiB), which moves the ratio towards 1:
 * HALF_FIXED_BYTES is counted in both.  The two plans' holdings:
 *   half:    W16 + A16 (its weights, its arena with the widening scratch),
 *   float32: W16 + Wh + X + A16 - S (each 16-bit weight twice, the
 *            Winograd extras X that dnnl_conv.c asked oneDNN for without
 *            taking them, the same arena less the largest widening
 *            scratch S, which that plan does not have);
 * so float32 copies of E more bytes fit while
 * W16 + A16 + E + F <= r x (float32's + F).  Without Winograd extras
 * there is no room (ViT: the float32 plan holds twice the weights only).
 * What the float32 plan holds beyond these (packing transients, Winograd's
 * scratchpads: ResNet-50's peak RSS is 167 MiB against 147 so counted) is
 * margin.
 * The largest weights go first: a widened copy past the L2 costs a DRAM
 * round trip each run, one within it only the conversion.  Only weights
 * widened whole by half.step or a convolution's chunks (not a MatMul's,
 * whose chunk loop always widens).
 * TSOPT_SKIP=half.budget turns it off; TSOPT_SKIP=half.store keeps every
 * packed weight float32 (no budget: the upper bound, for A/B). */
#define HALF_PEAK_SHARE 0.6
#define HALF_FIXED_BYTES (24.0 * 1048576)

/* Buffer b is read only as an input half.step widens whole or a
 * convolution widens in chunks (dnnl_conv.c; kept float32, it reads the
 * chunks as they are). */
static bool widened_whole_only(const xplan *p, int b)
{
    bool read = false;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++) {
            if (s->in[j] != b) continue;
            if (xd_conv_chunks_weight(xhalf_inner(s), j)) {
                read = true;
                continue;
            }
            if (s->k != &xk_half_step) return false;
            const hw_state *h = s->state;
            bool slot = false;
            for (int k = 0; k < h->n; k++) slot |= h->slot[k] == j;
            if (!slot) return false;
            read = true;
        }
    }
    return read;
}

/* half.step's widening slots whose buffer is float32 now dropped, the
 * scratch laid out again for those left. */
static void hw_drop_float_slots(const xplan *p, xstep *s)
{
    hw_state *h = s->state;
    size_t off = xd_round(h->inner.scratch_bytes);
    int n = 0;
    for (int k = 0; k < h->n; k++) {
        if (!p->bufs[s->in[h->slot[k]]].half) continue;
        h->slot[n] = h->slot[k];
        h->elems[n] = h->elems[k];
        h->off[n] = off;
        off += xd_round(h->elems[n] * sizeof(float));
        n++;
    }
    h->n = n;
    s->scratch_bytes = n ? off : h->inner.scratch_bytes;
}

/* Buffer b is a convolution's chunked weight. */
static bool chunk_read(const xplan *p, int b)
{
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = xhalf_inner(&p->steps[i]);
        if (s->nin > 1 && s->in[1] == b && xd_conv_chunks_weight(s, 1)) return true;
    }
    return false;
}

static bool budget_before(const xplan *p, int a, int b)
{
    bool ca = chunk_read(p, a), cb = chunk_read(p, b);
    return ca != cb ? cb : p->bufs[a].bytes > p->bufs[b].bytes;
}

/* The room goes first to Winograd for the direct convolutions whose
 * float32 plan takes it (dnnl_conv.c xd_conv_to_winograd): their weights
 * widened, transformed and held float32, neither widened nor convolved
 * direct per run.  Cheapest first (the smallest transformed weights: the
 * early layers, whose large images give Winograd the most time back per
 * byte held).  ResNet-50, per step, both plans' medians side by side
 * (tsopt profile --roofline, loaded): layer1's 64-channel 3x3 convs at
 * 56x56 1.27-1.35 ms direct on 16-bit weights against 0.85-1.13 on
 * Winograd, for 0.5 MiB more held each; layer2's 128-channel ones 1.21-1.27
 * against 1.02-1.07 for 2 MiB; layer3's 256-channel 1.29-1.34 against
 * 1.0-1.08 for 8 MiB; widening a weight kept float32 instead saves a
 * conversion pass only (the large ones are convolved in chunks that stay
 * in cache).  A step Winograd would change the layouts of is left direct.
 * TSOPT_SKIP=half.wino turns it off (A/B). */
static int cmp_cost(const void *a, const void *b)
{
    const size_t *x = a, *y = b; /* [0]: the cost; [1]: the step, the tie-break (plan order) */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Steps reading buffer b.  A packed copy read by several steps (nodes
 * sharing a weight may share it: packed_from) is not converted: the
 * others would get Winograd's layout.  (A half plan's convolutions pack
 * their own widened copies: 48 convolutions of one 128-channel weight
 * held 48 buffers; the guard is for kernels that share.) */
static int buf_readers(const xplan *p, int b)
{
    int n = 0;
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        for (int j = 0; j < s->nin; j++)
            if (s->in[j] == b) {
                n++;
                break;
            }
    }
    return n;
}

/* Direct convolutions made Winograd ones (their float32 plan's choice)
 * while the room lasts, the smallest weight growth first (ResNet-50:
 * layer1's 64-channel 3x3 +0.19 MB each, layer2's +0.76, layer3's +3.0,
 * layer4's +12; per-step medians in docs/runtime.md: Winograd gains
 * 0.2-0.5 ms a layer at every width).  The weights add up; a step's
 * scratch (Winograd's scratchpad, the converted activations) lives during
 * that step only, in the arena the memory plan shares between steps, so
 * the converted steps' scratch costs at most the largest of them once.
 * Counted per step, ResNet-50 b1's 9.6 MiB of room took three of layer1's
 * (2.9 MiB each, 0.2 of it weights) and layer3's chunked layers were not
 * convertible.  TSOPT_SKIP=half.wino_scratch counts the scratch per step
 * again (A/B). */
static ts_status spend_on_winograd(xplan *p, double *room, bool *changed, ts_error *err)
{
    if (xplan_skips(p, "half.wino")) return TS_OK;
    const bool per_step = xplan_skips(p, "half.wino_scratch");
    size_t(*cand)[3] = malloc(sizeof *cand * ((size_t)p->nsteps + 1));
    int nc = 0;
    if (!cand) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *in = xhalf_inner(&p->steps[i]);
        size_t scratch = 0, cost = xd_conv_half_wino_cost(p, in, &scratch);
        if (cost && p->bufs[in->in[1]].half && buf_readers(p, in->in[1]) == 1) {
            cand[nc][0] = per_step ? cost + scratch : cost;
            cand[nc][1] = (size_t)i;
            cand[nc++][2] = per_step ? 0 : scratch;
        }
    }
    qsort(cand, (size_t)nc, sizeof *cand, cmp_cost);
    ts_status st = TS_OK;
    size_t smax = 0; /* the largest converted step's scratch, counted once */
    for (int k = 0; k < nc && !st; k++) {
        size_t grow = cand[k][2] > smax ? cand[k][2] - smax : 0;
        if ((double)(cand[k][0] + grow) > *room) {
            if (per_step) break;
            continue; /* a later one may still fit: its scratch may be smaller */
        }
        xstep *in = (xstep *)xhalf_inner(&p->steps[cand[k][1]]);
        xbuf *wb = &p->bufs[in->in[1]];
        size_t before = wb->bytes;
        if (!store_float(p, wb)) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
        *changed = true;
        ts_error e = {0};
        st = xd_conv_to_winograd(p, in, &e);
        if (st == TS_ERR_NOMEM) {
            *err = e;
            break;
        }
        /* declined: kept float32 (direct), which costs less than planned */
        if (st) {
            *room -= (double)(wb->bytes - before);
        } else {
            *room -= (double)(cand[k][0] + grow);
            if (cand[k][2] > smax) smax = cand[k][2];
        }
        st = TS_OK;
    }
    free(cand);
    return st;
}

ts_status xhalf_spend_budget(xplan *p, bool *changed, ts_error *err)
{
    *changed = false;
    if (!p->half || xplan_skips(p, "half.budget")) return TS_OK;
    size_t w16 = 0, wh = 0, x = 0, s_max = 0;
    for (int b = 0; b < p->nbufs; b++) {
        const xbuf *c = &p->bufs[b];
        if (c->kind != XB_CONST || (c->first_step < 0 && !c->owns_data)) continue;
        w16 += c->bytes;
        if (c->half) wh += c->bytes;
    }
    for (int i = 0; i < p->nsteps; i++) {
        const xstep *s = &p->steps[i];
        x += xd_conv_f32_wino_extra(xhalf_inner(s));
        if (s->k == &xk_half_step && s->scratch_bytes > xhalf_inner(s)->scratch_bytes &&
            s->scratch_bytes - xhalf_inner(s)->scratch_bytes > s_max)
            s_max = s->scratch_bytes - xhalf_inner(s)->scratch_bytes;
    }
    double a16 = (double)p->arena_bytes, h16 = (double)w16 + a16 + HALF_FIXED_BYTES;
    double h32 = (double)(w16 + wh + x) + a16 - (double)s_max + HALF_FIXED_BYTES, room = HALF_PEAK_SHARE * h32 - h16;
    if (room <= 0) return TS_OK;
    if (spend_on_winograd(p, &room, changed, err)) return err->code;
    int *cand = malloc(sizeof(int) * ((size_t)p->nbufs + 1)), nc = 0;
    if (!cand) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    for (int b = 0; b < p->nbufs; b++)
        if (p->bufs[b].half && widened_whole_only(p, b)) cand[nc++] = b;
    /* largest first (a model's few hundred weights), those widened whole
     * before a convolution's chunks (widened in cache, they cost little) */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && budget_before(p, cand[j], cand[j - 1]); j--) {
            int t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    for (int i = 0; i < nc; i++) {
        xbuf *c = &p->bufs[cand[i]];
        if ((double)c->bytes > room) continue; /* float32: twice the 16-bit bytes, these once more */
        room -= (double)c->bytes;
        if (!store_float(p, c)) {
            free(cand);
            return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        }
        *changed = true;
    }
    free(cand);
    for (int i = 0; *changed && i < p->nsteps; i++) {
        xstep *s = &p->steps[i];
        if (s->k == &xk_half_step) hw_drop_float_slots(p, s);
        xstep *in = (xstep *)xhalf_inner(s);
        if (xd_conv_chunks_weight(in, 1) && !p->bufs[in->in[1]].half) xd_conv_half_chunks(in, 1, TS_UNDEFINED);
    }
    return TS_OK;
}

/* ------------------------------------------------ Cast between float32 and 16 bits */

typedef struct hc_state {
    ts_dtype from, to, via;
    size_t n;
} hc_state;

static void hc_run(const xstep *s, void *const *in, void *const *out, void *scratch)
{
    const hc_state *c = s->state;
    (void)scratch;
    if (c->via != TS_UNDEFINED) { /* float32 -> float32 through 16 bits */
        if (in[0] != out[0]) memcpy(out[0], in[0], c->n * sizeof(float));
        xhalf_round(c->via, out[0], c->n);
    } else if (c->from == c->to)
        memcpy(out[0], in[0], c->n * ts_dtype_size(c->to));
    else if (c->from == TS_F32)
        xhalf_narrow(c->to, in[0], out[0], c->n);
    else
        xhalf_widen(c->from, in[0], out[0], c->n);
}

static ts_status hc_build(xplan *p, int n, xstep *s, ts_error *err)
{
    const ts_node *nd = &p->g->nodes[n];
    const ts_value *x = &p->g->values[nd->inputs[0]], *y = &p->g->values[nd->outputs[0]];
    bool ok = (x->dtype == TS_F32 && (is_half(y->dtype) || y->dtype == TS_F32)) ||
              (is_half(x->dtype) && (y->dtype == TS_F32 || y->dtype == x->dtype));
    if (!ok) return TS_ERR_UNSUPPORTED;
    hc_state *c = malloc(sizeof *c);
    if (!c) return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    const ts_cast_attrs *a = nd->attrs;
    ts_dtype via = nd->op == &ts_op_cast && x->dtype == TS_F32 && y->dtype == TS_F32 ? a->via : TS_UNDEFINED;
    *c = (hc_state){x->dtype, y->dtype, via, (size_t)ts_shape_numel(&y->shape)};
    s->state = c;
    if (xstep_alloc(s, 1, 1, err)) return err->code;
    s->in[0] = xplan_plain(p, xplan_value_buf(p, nd->inputs[0]), err);
    s->out[0] = xplan_value_buf(p, nd->outputs[0]);
    if (s->in[0] < 0 || s->out[0] < 0) return err->code ? err->code : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}

const xkernel xk_half_cast = {"half.cast", hc_build, hc_run, free};
