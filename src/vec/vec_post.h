/* Activations recorded by the lowering stage's post-op walk (lower_post.c,
 * xd_fuse in exec.h), applied by tsopt's own kernels (vec_depthwise.c,
 * vec_se.c) to values they computed, and by oneDNN convolution steps to
 * their results where oneDNN's own post-op is slow (SiLU, sigmoid:
 * vec_post.c): the same fusion, without oneDNN.  Inline, for the callers'
 * target_clones loops to vectorize them. */
#ifndef TS_VEC_VEC_POST_H
#define TS_VEC_VEC_POST_H

#include "dnnl/dnnl_util.h"
#include "vec/vec.h"

/* The portable sigmoid, for CPUs without AVX-512 (where the compiler's
 * code for it took 0.62 ns per element against 0.26 for vec_post.c's
 * intrinsics).  1 / (1 + e^-x) without a division: vdivps on 16 floats
 * blocks this CPU's one AVX-512 unit for many cycles (in a SiLU pass it
 * held a third of the samples).  The reciprocal of d = 1 + e^-x starts from the
 * exponent-negating bit trick (relative error under 1/8) and three Newton
 * steps r <- r (2 - d r) bring it to float precision.  -x is capped at 80
 * so that d stays finite: below that x e^x is under 1e-33 anyway. */
XV_INLINE float xv_post_sigmoid(float x)
{
    float t = -x < 80.0f ? -x : 80.0f;
    float dd = 1.0f + xv_exp(t);
    uint32_t u;
    memcpy(&u, &dd, sizeof u);
    float r = xv_bits_f(0x7EF311C3u - u);
    r = r * (2.0f - dd * r);
    r = r * (2.0f - dd * r);
    r = r * (2.0f - dd * r);
    return x != x ? x : r; /* NaN stays NaN (the cap above would lose it) */
}

/* In place over x[0..n): x * sigmoid(alpha x) (SiLU for alpha 1), and
 * sigmoid(x).  Vectorized by hand where the CPU has AVX-512 (vec_post.c:
 * half the time of the omp-simd loop over xv_post_sigmoid, kept for the
 * others). */
void xv_swish_run(float *x, int64_t n, float alpha);
void xv_logistic_run(float *x, int64_t n);

/* The post-ops the lowering stage records (npo of them), applied in order to
 * acc[0..n). */
XV_INLINE void xv_post_apply(const xd_po *po, int npo, float *acc, int64_t n)
{
    for (int k = 0; k < npo; k++) {
        const xd_po *o = &po[k];
        const float al = o->alpha, be = o->beta;
        switch (o->alg) {
        case dnnl_eltwise_relu:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = acc[i] > 0 ? acc[i] : acc[i] * al;
            break;
        case dnnl_eltwise_clip:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = acc[i] < al ? al : acc[i] > be ? be : acc[i];
            break;
        case dnnl_eltwise_linear:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = acc[i] * al + be;
            break;
        case dnnl_eltwise_hardswish:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) {
                float t = acc[i] + 3.0f;
                t = t < 0 ? 0 : t > 6.0f ? 6.0f : t;
                acc[i] = acc[i] * t * (1.0f / 6.0f);
            }
            break;
        case dnnl_eltwise_logistic: xv_logistic_run(acc, n); break;
        case dnnl_eltwise_tanh:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = xv_tanh(acc[i]);
            break;
        case dnnl_eltwise_swish: xv_swish_run(acc, n, al); break;
        default: break; /* callers accept only the cases above (xv_post_supported) */
        }
    }
}

/* True when every post-op of f is an activation xv_post_apply computes
 * (no residual sum). */
static inline bool xv_post_supported(const xd_fuse *f)
{
    for (int k = 0; k < f->npo; k++) {
        if (f->po[k].kind != XD_PO_ELTWISE) return false;
        switch (f->po[k].alg) {
        case dnnl_eltwise_swish:
        case dnnl_eltwise_relu:
        case dnnl_eltwise_clip:
        case dnnl_eltwise_linear:
        case dnnl_eltwise_hardswish:
        case dnnl_eltwise_logistic:
        case dnnl_eltwise_tanh: break;
        default: return false;
        }
    }
    return true;
}

/* A oneDNN primitive's post-ops from the first SiLU or sigmoid on, when
 * all of them are activations xv_post_apply computes: moved from f into
 * tail[0..*ntail) (f keeps the ones before), for the step to apply them to
 * its result itself (vec_post.c says why).  False, f unchanged, when there
 * is no such tail. */
bool xv_post_tail_split(xd_fuse *f, xd_po *tail, int *ntail);
/* True when the activations map 0 to 0 (the zero padding of a blocked
 * layout may then go through them). */
bool xv_post_keeps_zero(const xd_po *po, int npo);
/* xv_post_apply over x[0..n) on up to `threads` OpenMP threads (one below
 * the size where a second pays). */
void xv_post_run(const xd_po *po, int npo, float *x, int64_t n, int threads);

#endif
