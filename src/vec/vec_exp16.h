/* e^d for d = x - max <= 0 on 16 floats (AVX-512): 0 below e^-80
 * (XV_EXP16_MIN: 1.8e-35, far under any tolerance; the exponential itself
 * would go subnormal near -87 and pay microcode assists), NaN passes.
 * xv_exp's range reduction and Cephes polynomial (vec.h) with fused
 * multiply-adds, and 2^k applied by vscalefps: 14 vector operations where
 * xv_exp's order without contraction takes 32 (a softmax row's cost: its
 * exponentials; ViT's and the encoder's rows are 197 and 128 long).  Within
 * an ulp or two of xv_exp (the polynomial's own error is ~1 ulp).  Shared
 * by vec.softmax's rows and vec.sdpa's scores (vec_sdpa.c), so both give
 * the same probabilities from the same scores.  Only for functions built
 * for avx512f. */
#ifndef TS_VEC_EXP16_H
#define TS_VEC_EXP16_H
#include <immintrin.h>

#define XV_EXP16_MIN (-80.0f)

__attribute__((target("avx512f"), unused)) static inline __m512 xv_exp16(__m512 d)
{
    const __m512 lo = _mm512_set1_ps(XV_EXP16_MIN);
    const __mmask16 keep = _mm512_cmp_ps_mask(d, lo, _CMP_NLT_UQ); /* d >= -80 or NaN */
    const __m512 c = _mm512_max_ps(lo, d);                         /* vmaxps gives its second operand for a NaN */
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(c, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), c);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500E-4f), r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 y = _mm512_fmadd_ps(r, _mm512_fmadd_ps(p, r, one), one); /* p r^2 + r + 1 */
    return _mm512_maskz_scalef_ps(keep, y, k);                               /* y 2^k, 0 below -80 */
}

#endif
