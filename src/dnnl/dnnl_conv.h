/* What a oneDNN convolution step (dnnl_conv.c) chose, for tests and tools:
 * whether it runs on Winograd and what Winograd costs in memory beyond the
 * direct kernel (its cap: wino_budget_ok in dnnl_conv.c). */
#ifndef TS_DNNL_DNNL_CONV_H
#define TS_DNNL_DNNL_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include "exec/exec.h"

/* True when step s is a dnnl.conv step running oneDNN's Winograd kernel;
 * then *extra (if not NULL) gets its transformed weights beyond the direct
 * ones plus the scratchpad bytes it writes. */
bool xd_conv_is_winograd(const xstep *s, size_t *extra);
/* In a half plan (half.c), which runs its convolutions direct on 16-bit
 * weights: the transformed weights beyond the direct ones that the float32
 * plan of the same graph holds for step s on Winograd (0: it runs direct). */
size_t xd_conv_f32_wino_extra(const xstep *s);
/* Half plans: what making step s (a direct convolution whose float32 plan
 * takes Winograd) a Winograd one adds to what the plan holds: its weights'
 * growth from their bytes now (returned, 0 when it cannot be made one), and
 * in *scratch the step's scratch then (the scratchpad Winograd writes and
 * at most both activations converted), which lives during the step only;
 * xd_conv_to_winograd does it (its weight buffer float32 by then),
 * TS_ERR_UNSUPPORTED leaving the step as it was when oneDNN's Winograd
 * kernel would change its layouts. */
size_t xd_conv_half_wino_cost(const xplan *p, const xstep *s, size_t *scratch);
ts_status xd_conv_to_winograd(xplan *p, xstep *s, ts_error *err);
/* Number of activations (SiLU, sigmoid and what follows) step s, a dnnl.conv
 * or dnnl.deconv step, applies itself after oneDNN's primitive instead of as
 * oneDNN post-ops (vec_post.c); 0 for any other step. */
int xd_conv_post_tail(const xstep *s);
/* True when step s, a dnnl.conv or dnnl.conv_gated step, was built and runs
 * on one thread (dnnl_serial.h); false for any other step. */
bool xd_conv_serial(const xstep *s);
/* Whether plan p runs its convolutions on AMX-BF16 in three exact passes
 * (dnnl_conv.c conv_state x3, bf16_split.h): a float16 plan, the CPU's AMX
 * (xd_cpu_amx_bf16), not TSOPT_SKIP=half.amx.  A convolution that asks
 * still falls back to float32 when its post-ops, weights (off the float16
 * grid after folding) or oneDNN's kernels do not allow it. */
bool xd_conv_amx_wanted(const xplan *p);
/* True when step s is a dnnl.conv step running those passes. */
bool xd_conv_is_amx(const xstep *s);

#endif
