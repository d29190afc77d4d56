/* Activations recorded by the oneDNN fusion walker (xd_fuse_collect,
 * dnnl_util.h), applied by tsopt's own kernels (vec_depthwise.c,
 * vec_se.c) to values they computed: the same fusion, without oneDNN.
 * Inline, for the callers' target_clones loops to vectorize them. */
#ifndef TS_EXEC_VEC_POST_H
#define TS_EXEC_VEC_POST_H

#include "exec/dnnl_util.h"
#include "exec/vec.h"

/* 1 / (1 + e^-x) without a division: vdivps on 16 floats blocks this
 * CPU's one AVX-512 unit for many cycles (in a SiLU pass it held a third
 * of the samples).  The reciprocal of d = 1 + e^-x starts from the
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

/* The post-ops xd_fuse_collect records (npo of them), applied in order to
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
        case dnnl_eltwise_logistic:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = xv_post_sigmoid(acc[i]);
            break;
        case dnnl_eltwise_tanh:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = xv_tanh(acc[i]);
            break;
        case dnnl_eltwise_swish:
#pragma omp simd
            for (int64_t i = 0; i < n; i++) acc[i] = acc[i] * xv_post_sigmoid(al * acc[i]);
            break;
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

#endif
