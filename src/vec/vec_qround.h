/* x / s rounded to the nearest integer (ties to even), 16 lanes, exactly
 * as the float32 division and nearbyintf, at the speed of a product: the
 * product x * (1 / s) and the correctly rounded quotient differ by at most
 * 1.5 ulp (2^-14 below 512), so their roundings to an integer agree unless
 * the product lies within 2^-12 of a .5; such a block (about 1 in 128) is
 * divided.  From 512 up the two may differ, where a quantizer saturates
 * either way (callers clamp to 8 bits).  r = 1 / s; s and r normal.
 * vdivps had been 3/4 of a quantize pass (vec_quant.c, vec_qlinear.c). */
#ifndef TSOPT_EXEC_VEC_QROUND_H
#define TSOPT_EXEC_VEC_QROUND_H
#include <immintrin.h>

static inline __attribute__((always_inline, target("avx512f"))) __m512 xv_div_round16(__m512 x, __m512 r, __m512 s)
{
    __m512 p = _mm512_mul_ps(x, r);
    __m512 f = _mm512_sub_ps(_mm512_sub_ps(p, _mm512_roundscale_ps(p, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)),
                             _mm512_set1_ps(0.5f));
    if (_mm512_cmp_ps_mask(_mm512_abs_ps(f), _mm512_set1_ps(0x1p-12f), _CMP_LT_OQ)) p = _mm512_div_ps(x, s);
    return _mm512_roundscale_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

#endif
