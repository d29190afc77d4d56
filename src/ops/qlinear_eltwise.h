/* What the reference kernels of ops/qlinear_eltwise.c and the runtime's
 * (vec/vec_qlinear.c) must compute alike. */
#ifndef TS_OPS_QLINEAR_ELTWISE_H
#define TS_OPS_QLINEAR_ELTWISE_H

#include <stdint.h>

/* tsopt.QLinearGlobalAveragePool's mean: the integer sum of hw elements
 * less hw zero points, times x_scale / hw in double precision, as float32. */
static inline float ts_qgap_mean(int64_t sum, int64_t hw, int64_t xz, float xs)
{
    return (float)((double)(sum - hw * xz) * (double)xs / (double)hw);
}

#endif
