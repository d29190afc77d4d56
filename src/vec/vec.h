/* Shared pieces of the vec kernel family (vec_*.c): tsopt's own kernels on
 * plain-layout float32 buffers, vectorized by the compiler.
 *
 * Hot loops are written as plain `#pragma omp simd` loops and compiled for
 * AVX-512, AVX2 and a baseline through target_clones, so the CPU picks at
 * load time (ifunc).  Transcendentals are our own polynomial versions:
 * glibc's vector math (libmvec) is only reachable under -ffast-math, and a
 * call to scalar expf/erff inside a loop stops vectorization.  Their
 * accuracy (a few ulp) is well inside the tolerance results are checked
 * with against the double-accumulating reference interpreter. */
#ifndef TS_VEC_VEC_H
#define TS_VEC_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "exec/exec.h"

#define XV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
/* The math helpers must inline into the cloned loops to vectorize there. */
#define XV_INLINE static inline __attribute__((always_inline))

/* Below this many elements an op runs on one thread: waking the OpenMP
 * team costs a few microseconds, more than a small op takes.  Kernels that
 * only move data split by XV_SPLITS instead, from the measured machine. */
#define XV_PAR_MIN 32768

/* Bytes moved (read + written) from which a memory-bound step pays for
 * splitting over `threads` threads: the parallel region's cost against the
 * (T-1)/T of the one-core time the other threads save, each streaming its
 * share from its L2, region x T/(T-1) x one core's L2 rate (issue 32 §3,
 * xroof_split_min_bytes).  Both figures measured once a process, at the
 * first vec kernel's build (xroof_measure_split), at most 2 x T x L2 (a
 * region timed while the team waits for cores reads as milliseconds);
 * TSOPT_SPLIT_MIN_BYTES sets the value (A/B runs, tests that must split).
 * INT64_MAX on one thread. */
int64_t xv_split_min_bytes(int threads);
#define XV_SPLITS(threads, moved) ((threads) > 1 && (int64_t)(moved) >= xv_split_min_bytes(threads))

/* for (int64_t i = 0; i < n; i++) { ... } split statically over `threads`
 * threads when par, else run inline: a parallel region that an OpenMP `if`
 * clause makes serial still sets up a team of one in libgomp, 1.3 us a step
 * on the 2-core EPYC (`tsopt peak`'s tiny element-wise step: 1.30 us with
 * the region, 0.02 us without), more than a small step's whole work. */
#define XV_PAR_FOR(i, n, threads, par, ...)                                        \
    do {                                                                           \
        const int64_t xv_n_ = (n);                                                 \
        const int xv_nt_ = (threads);                                              \
        if (par) {                                                                 \
            _Pragma("omp parallel for schedule(static) num_threads(xv_nt_)")       \
            for (int64_t i = 0; i < xv_n_; i++) __VA_ARGS__                        \
        } else {                                                                   \
            for (int64_t i = 0; i < xv_n_; i++) __VA_ARGS__                        \
        }                                                                          \
    } while (0)

/* Threads the plan asked for (0: the OpenMP default, one per core). */
int xv_threads(const xplan *p);

/* True when every input present and every output of node n is float32. */
bool xv_all_f32(const xplan *p, int n);
/* Softmax of one row of n floats, AVX-512 (vec_softmax.c; the caller has
 * checked avx512f): y may be x; lanes of -inf give 0, so a row padded to
 * whole vectors with -inf (vec_sdpa.c's scores) needs no tail. */
void xv_softmax_row_avx512(const float *x, float *y, int64_t n);

/* Allocates a zeroed kernel state; NULL sets err (out of memory). */
void *xv_state(size_t size, ts_error *err);

/* Binds the step's inputs (plain layout) and outputs (new plain buffers)
 * from node n's values; absent optional inputs are skipped.  *nin_used
 * receives how many inputs were bound. */
ts_status xv_bind_io(xplan *p, int n, xstep *s, ts_error *err);

/* Half plans (vec_fuse.c): value `out` of the step being built bound to the
 * storage of plain arena buffer b, an input of out's shape that dies in the
 * step (read by its nodes only: xplan_inplace_ok_step; the
 * step then writes its result over it; it must read each element before
 * writing that element, or copy it aside).  The output buffer, -1 when not
 * (not a half plan, TSOPT_SKIP=half.inplace, or b still needed). */
int xv_inplace_out(xplan *p, int b, int out);

XV_INLINE float xv_bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* exp(x): Cody-Waite range reduction x = k ln2 + r, |r| <= ln2/2, then a
 * degree-6 polynomial for e^r (Cephes' coefficients) scaled by 2^k built in
 * the exponent bits.  Clamped to the finite float range; NaN passes. */
XV_INLINE float xv_exp(float x)
{
    float c = x > 88.3762626647949f ? 88.3762626647949f : x;
    c = c < -87.33654475f ? -87.33654475f : c;
    /* round to nearest by the 1.5 * 2^23 trick: floorf() would be a call
     * that stops vectorization, and |c log2 e| < 2^22 here */
    float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = c - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    float y = p * r * r + r + 1.0f;
    y *= xv_bits_f((uint32_t)((int32_t)k + 127) << 23);
    y = x > 88.7228391f ? INFINITY : y;
    y = x < -103.972077f ? 0.0f : y;
    return x != x ? x : y;
}

/* erf(x): odd Taylor series near 0 (keeps relative accuracy for tiny x),
 * elsewhere 1 - erfc with the Chebyshev fit of Numerical Recipes (6.2),
 * fractional error below 1.2e-7. */
XV_INLINE float xv_erf(float x)
{
    float a = fabsf(x);
    float x2 = x * x;
    float s = -1.0f / 75600.0f;
    s = s * x2 + 1.0f / 9360.0f;
    s = s * x2 - 1.0f / 1320.0f;
    s = s * x2 + 1.0f / 216.0f;
    s = s * x2 - 1.0f / 42.0f;
    s = s * x2 + 1.0f / 10.0f;
    s = s * x2 - 1.0f / 3.0f;
    s = s * x2 + 1.0f;
    float small = 1.1283791670955126f * x * s;
    float t = 1.0f / (1.0f + 0.5f * a);
    float q = 0.17087277f;
    q = q * t - 0.82215223f;
    q = q * t + 1.48851587f;
    q = q * t - 1.13520398f;
    q = q * t + 0.27886807f;
    q = q * t - 0.18628806f;
    q = q * t + 0.09678418f;
    q = q * t + 0.37409196f;
    q = q * t + 1.00002368f;
    q = q * t - 1.26551223f;
    float erfc = t * xv_exp(-a * a + q);
    float big = 1.0f - erfc;
    big = x < 0 ? -big : big;
    return a < 0.5f ? small : big;
}

/* tanh(x): odd Taylor series below 0.4, else 1 - 2 / (e^{2|x|} + 1). */
XV_INLINE float xv_tanh(float x)
{
    float a = fabsf(x);
    float x2 = x * x;
    float s = -1382.0f / 155925.0f;
    s = s * x2 + 62.0f / 2835.0f;
    s = s * x2 - 17.0f / 315.0f;
    s = s * x2 + 2.0f / 15.0f;
    s = s * x2 - 1.0f / 3.0f;
    s = s * x2 + 1.0f;
    float small = x * s;
    float e = xv_exp(2.0f * (a > 9.0f ? 9.0f : a));
    float big = 1.0f - 2.0f / (e + 1.0f);
    big = x < 0 ? -big : big;
    return a < 0.4f ? small : big;
}

XV_INLINE float xv_sigmoid(float x) { return 1.0f / (1.0f + xv_exp(-x)); }

/* Kernels of the family (listed in list_vec.c). */
extern const xkernel xk_vec_eltwise, xk_vec_softmax, xk_vec_layernorm, xk_vec_reduce, xk_vec_transpose,
    xk_vec_concat, xk_vec_slice, xk_vec_gather, xk_vec_expand, xk_vec_resize, xk_vec_gemv, xk_vec_split,
    xk_vec_band, xk_vec_band_defer;
extern const xkernel xk_vec_pad, xk_vec_batchnorm; /* vec_pad.c, vec_batchnorm.c */
extern const xkernel xk_vec_layernorm_ops; /* vec_layernorm.c: LayerNorm written out in ops */
extern const xkernel xk_vec_attention; /* vec_attention.c */
/* Steps of these kernels re-bound to other sizes without lowering again
 * (xresize_fn, plan_rebind.c): vec_movement.c, vec_attention.c, vec_fuse.c. */
ts_status xv_concat_resize(const xplan *p, const xstep *s, const ts_graph *g, void **state, size_t *scratch,
                           ts_error *err);
ts_status xv_attention_resize(const xplan *p, const xstep *s, const ts_graph *g, void **state, size_t *scratch,
                              ts_error *err);
ts_status xv_eltwise_resize(const xplan *p, const xstep *s, const ts_graph *g, void **state, size_t *scratch,
                            ts_error *err);
/* A vec.layernorm.ops step of a half plan, its output rounded (half.c skips it) */
bool xv_layernorm_rounds(const xstep *s);

#endif
