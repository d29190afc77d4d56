/* Sigmoid and SiLU passes over a float buffer, in place (vec_post.h), and
 * the post-op tail a oneDNN convolution leaves to tsopt (dnnl_conv.c).
 *
 * Why not oneDNN's post-op: oneDNN 2.6's swish and logistic post-ops cost
 * more than the convolutions they follow.  One thread, one layer repeated,
 * best of 300, channels-last, ms without / with swish: depthwise 3x3 32 ch
 * at 112x112 0.171 / 0.441, depthwise 3x3 s2 96 ch at 112 0.259 / 0.453,
 * 1x1 16 -> 96 at 112 0.336 / 0.864, 1x1 24 -> 144 at 56 0.138 / 0.363:
 * 0.45-0.67 ns per element for x * sigmoid(x).  This pass takes 0.25-0.27
 * ns per element (401k and 1.2M elements, one thread), so a convolution
 * without the post-op followed by this pass is 25-35% cheaper than the
 * fused post-op, although it reads the result once more.
 *
 * The exponential is written with AVX-512 intrinsics: the same formula in
 * portable C under `omp simd` (xv_post_sigmoid, kept for other CPUs) took
 * 0.62-0.65 ns per element, because GCC turns its clamps into masked
 * blocks and builds 2^k through integer conversions; here rounding is one
 * vrndscaleps and 2^k one vscalefps, and the division is one vdivps
 * (measured faster than a reciprocal estimate with a Newton step: 0.25-0.26
 * vs 0.27-0.29 ns per element). */
#include <omp.h>
#include "vec/vec_post.h"
#include "measure/wait_policy.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define XV_POST_AVX512 1
#endif

#ifdef XV_POST_AVX512
#define AVX512 __attribute__((target("avx512f")))

/* 1 + e^-y for 16 lanes (y = a x).  y is clamped to [-100, 88]: from 88 on
 * e^-y adds nothing to 1, and below -88.7 2^k overflows to +inf, so the
 * sigmoid is 0 there, as it rounds to in float (x -> -inf: x * sigmoid
 * is -inf / inf = NaN, as -inf * 0 in the unfused graph).  The clamp also
 * keeps +-inf out of the range reduction (inf - inf); a NaN lane comes
 * out as a bound, and the callers restore it.  e^t, t = -y: t = k ln2 + r
 * with k = round(t log2 e) and ln 2 in two parts (Cody-Waite: r exact to
 * float precision), |r| <= ln2 / 2, e^r by a degree-5 polynomial fitted
 * for the least maximum relative error on that interval (7.5e-8; after
 * float rounding the SiLU is within 2.7e-7 of double), 2^k by vscalefps.
 * 14 arithmetic instructions a vector: 0.25-0.27 ns per element against 0.28-0.30
 * for Cephes' degree-6 polynomial with the negation and split done
 * separately. */
AVX512 static inline __m512 one_plus_exp_neg(__m512 y)
{
    y = _mm512_max_ps(_mm512_min_ps(y, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-100.0f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(-1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmsub_ps(k, _mm512_set1_ps(0.693359375f), y); /* -y - k ln2_hi */
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);    /* - k ln2_lo */
    __m512 p = _mm512_set1_ps(0.008297654793334507f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.04191538197650343f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.16667574733010598f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.4999889485139852f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.9999996919902627f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0000000716546562f));
    return _mm512_add_ps(_mm512_scalef_ps(p, k), _mm512_set1_ps(1.0f));
}

/* times_x: x * sigmoid(a x) (swish), else sigmoid(a x). */
AVX512 static inline __m512 sig16(__m512 v, __m512 a, bool scaled, bool times_x)
{
    __m512 y = _mm512_div_ps(times_x ? v : _mm512_set1_ps(1.0f), one_plus_exp_neg(scaled ? _mm512_mul_ps(v, a) : v));
    return times_x ? y : _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v); /* NaN stays NaN */
}

AVX512 static void sig_avx512(float *x, int64_t n, float alpha, bool times_x)
{
    const __m512 a = _mm512_set1_ps(alpha);
    const bool scaled = alpha != 1.0f;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, sig16(_mm512_loadu_ps(x + i), a, scaled, times_x));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(x + i, m, sig16(_mm512_maskz_loadu_ps(m, x + i), a, scaled, times_x));
    }
}
#endif

static void sig_generic(float *x, int64_t n, float alpha, bool times_x)
{
    if (times_x) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) x[i] = x[i] * xv_post_sigmoid(alpha * x[i]);
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) x[i] = xv_post_sigmoid(alpha * x[i]);
    }
}

static void sig_run(float *x, int64_t n, float alpha, bool times_x)
{
#ifdef XV_POST_AVX512
    if (__builtin_cpu_supports("avx512f")) {
        sig_avx512(x, n, alpha, times_x);
        return;
    }
#endif
    sig_generic(x, n, alpha, times_x);
}

void xv_swish_run(float *x, int64_t n, float alpha) { sig_run(x, n, alpha, true); }
void xv_logistic_run(float *x, int64_t n) { sig_run(x, n, 1.0f, false); }

bool xv_post_tail_split(xd_fuse *f, xd_po *tail, int *ntail)
{
    int k = 0;
    while (k < f->npo && !(f->po[k].kind == XD_PO_ELTWISE && (f->po[k].alg == dnnl_eltwise_swish ||
                                                               f->po[k].alg == dnnl_eltwise_logistic)))
        k++;
    if (k == f->npo) return false;
    xd_fuse rest = {.npo = f->npo - k};
    memcpy(rest.po, f->po + k, sizeof(xd_po) * (size_t)rest.npo);
    if (!xv_post_supported(&rest)) return false; /* a sum after the activation: oneDNN keeps it all */
    memcpy(tail, rest.po, sizeof(xd_po) * (size_t)rest.npo);
    *ntail = rest.npo;
    f->npo = k;
    return true;
}

bool xv_post_keeps_zero(const xd_po *po, int npo)
{
    for (int k = 0; k < npo; k++) {
        const xd_po *o = &po[k];
        switch (o->alg) {
        case dnnl_eltwise_relu:
        case dnnl_eltwise_swish:
        case dnnl_eltwise_tanh:
        case dnnl_eltwise_hardswish: break;
        case dnnl_eltwise_clip:
            if (o->alpha > 0 || o->beta < 0) return false;
            break;
        case dnnl_eltwise_linear:
            if (o->beta != 0) return false;
            break;
        default: return false; /* logistic: 1/2 */
        }
    }
    return true;
}

/* Chunks of whole cache lines per thread. */
void xv_post_run(const xd_po *po, int npo, float *x, int64_t n, int threads)
{
    /* a second thread pays from about 10 us of work on one (0.3 ns per
     * element); sleeping threads need more (their wake-up) */
    int64_t par_min = ts_wait_threads_sleep() ? 8 * XV_PAR_MIN : 2 * XV_PAR_MIN;
    if (threads < 2 || n < par_min) {
        xv_post_apply(po, npo, x, n);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), k = omp_get_num_threads();
        int64_t nb = (n + 15) / 16, b0 = nb * t / k * 16, b1 = nb * (t + 1) / k * 16;
        if (b1 > n) b1 = n;
        if (b0 < b1) xv_post_apply(po, npo, x + b0, b1 - b0);
    }
}
