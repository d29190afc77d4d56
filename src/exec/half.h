/* float16 / bfloat16 graphs in the fast runtime (half.c, docs/runtime.md
 * "Half precision"): the plan lowers a float32-computing copy of the graph
 * whose weights stay 16-bit in memory and are widened per step. */
#ifndef TS_EXEC_HALF_H
#define TS_EXEC_HALF_H

#include <stddef.h>
#include <stdint.h>
#include "exec/exec.h"

/* Plan start: when g holds float16/bfloat16 values, p->g becomes the
 * float32-computing copy (p->own_g) and p->half its type; otherwise, or
 * when the copy cannot be made (a node whose types do not follow), p is
 * left as it was (the reference kernel's shadows run it). */
ts_status xhalf_begin(xplan *p, ts_error *err);
/* Around lowering node n: widen the 16-bit constants it (or a node it may
 * fuse) reads; afterwards store the packed weights the step made (buffers
 * from nbufs_before on) 16-bit and free the caller's originals. */
ts_status xhalf_before_node(xplan *p, int n, ts_error *err);
ts_status xhalf_after_node(xplan *p, int nbufs_before, ts_error *err);
/* Plan end: steps reading 16-bit constants get the widening wrapper. */
ts_status xhalf_finish(xplan *p, ts_error *err);
/* After the memory plan (p->arena_bytes): keeps the largest 16-bit weights
 * float32 while a process running the plan holds at most 0.6 of what one
 * running the float32 plan of the graph would (half.c); *changed when it
 * did (the arena is planned again: their widening scratch is gone). */
ts_status xhalf_spend_budget(xplan *p, bool *changed, ts_error *err);
/* The step a half.step wrapper runs (s itself when not wrapped): what
 * statistics and error reporting look at. */
const xstep *xhalf_inner(const xstep *s);

/* Conversions (F16C / AVX-512 where the CPU has them): widening is exact,
 * narrowing rounds to nearest, ties to even, as ONNX's Cast does. */
void xhalf_widen(ts_dtype half, const void *src, float *dst, size_t n);
void xhalf_narrow(ts_dtype half, const float *src, void *dst, size_t n);
/* x rounded in place to the nearest value of the 16-bit type (what
 * narrowing and widening back gives), over the plan's threads when large. */
void xhalf_round(ts_dtype half, float *x, size_t n);
/* y = x rounded so, in one pass, on the calling thread (x == y allowed). */
void xhalf_round_into(ts_dtype half, const float *x, float *y, size_t n);
/* Tests: the conversions' instruction set forced (2 AVX-512, 1 AVX2 +
 * F16C, 0 the scalar code; -1 the CPU's, capped by oneDNN's ISA). */
void xhalf_isa_force(int level);
/* The level in use (kernels with float16 vector paths of their own). */
int xhalf_isa(void);
/* Whether the CPU has F16C (the AVX2 conversions need it). */
bool xhalf_cpu_f16c(void);
/* y = round(round(y) + r) on the 16-bit grid, then Relu when relu (a > 0 ?
 * a : 0), over the plan's threads: a residual Add as a conv's tail. */
void xhalf_round_add(ts_dtype half, float *y, const float *r, size_t n, bool relu);

/* The CPU computes float16 natively (AVX512-FP16: Intel Sapphire Rapids
 * and later).  There a float16 plan rounds as native float16 kernels do
 * (oneDNN's f16 primitives, ONNX Runtime's fused ones): each step computes
 * in float32 inside, post-ops and fused chains included, and rounds once,
 * at its 16-bit outputs; a Cast to float16 still rounds where it stands.
 * So MatMul + bias + GELU, + residual Add and LayerNorm fuse as in the
 * float32 plan.  Elsewhere (no FP16: AMD Zen 4) every node rounds, as the
 * float32-per-operator route of ONNX says.  TSOPT_SKIP=half.native forces
 * "not native"; TSOPT_HALF_NATIVE=1 / 0 forces the decision either way
 * (tests: the native rounding needs no FP16 instruction). */
bool xhalf_native_f16(const xplan *p);

/* Rounding inside a fused program (vec_fuse.c, vec_layernorm.c): a kernel
 * that rounds every 16-bit value it computes where the unfused graph would
 * may fuse past the refusal half plans put on those values.
 * xhalf_node_round: the type node n's output is rounded to after it is
 * computed, TS_UNDEFINED when none (not a half plan, TSOPT_SKIP=half.round,
 * an output the caller's graph does not type 16-bit, or an op that only
 * moves or selects values: xhalf_grid_exact).  xhalf_sole_consumer and
 * xhalf_consumers: xplan_sole_consumer and p->consumers[v] without the
 * refusal, for such kernels only (TSOPT_SKIP=half.fuse: with it, the
 * unfused plan, for A/B). */
ts_dtype xhalf_node_round(const xplan *p, int n);
/* The type a consumer may round 16-bit value v to as it reads it, in place
 * of v's producer (v read by one node, no graph output), TS_UNDEFINED when
 * not; the step doing so names v in its program (xv_prog.round_on_load). */
ts_dtype xhalf_round_on_load(const xplan *p, int v);
/* dnnl_matmul.c: step s (dnnl.matmul/gemm) takes its input `slot`, a
 * 16-bit packed weight, as is and widens it chunk by chunk itself; the
 * scratch bytes it then needs, 0 when it cannot (half.c widens it whole). */
size_t xd_matmul_half_chunks(xstep *s, int slot, ts_dtype half);
/* Whether plan p runs an [M, K] x [K, N] product with a constant weight on
 * AMX-BF16 in three exact passes (dnnl_matmul.c mm_state x3): the
 * convolutions' gate (xd_conv_amx_wanted: float16 plan, AMX, not
 * TSOPT_SKIP=half.amx) and M, K x N past the size floor.  The step still
 * falls back to float32 when its post-ops, weights or oneDNN's kernels do
 * not allow it. */
bool xd_matmul_amx_wanted(const xplan *p, int64_t M, int64_t K, int64_t N);
/* True when step s is a dnnl.matmul / dnnl.gemm step running those passes. */
bool xd_matmul_is_amx(const xstep *s);
/* The columns of each weight chunk those passes take (x3_cols), 0 when s
 * runs none. */
int64_t xd_matmul_amx_cols(const xstep *s);
/* dnnl_matmul.c: step s absorbed a bias Add as round(round(y) + bias)
 * (xd_fuse.half_bias): its output is on the 16-bit grid already. */
bool xd_matmul_rounds_bias(const xstep *s);
/* dnnl_conv.c: step s absorbed a residual Add [+ Relu] as relu(round(round(y)
 * + r)) (xd_fuse.half_sum): its output is on the 16-bit grid already. */
bool xd_conv_rounds_sum(const xstep *s);
/* dnnl_conv.c: the same for a convolution's weight (input 1), widened and
 * convolved in output-channel chunks. */
size_t xd_conv_half_chunks(xstep *s, int slot, ts_dtype half);
/* Step s is a convolution that reads its input `slot` in chunks (as
 * xd_conv_half_chunks arranges, 16-bit or float32). */
bool xd_conv_chunks_weight(const xstep *s, int slot);
/* vec_gemv.c: the same for vec.gemv's packed panels, read as float16
 * values (converted as they are loaded, AVX-512) instead of widened into
 * the step's scratch; 0 when it declines (bfloat16, no AVX-512).
 * TSOPT_SKIP=half.gemv for A/B. */
size_t xv_gemv_half(xstep *s, int slot, ts_dtype half);
bool xhalf_grid_exact(const ts_op_desc *op);
int xhalf_sole_consumer(const xplan *p, int v);
int xhalf_consumers(const xplan *p, int v);

#endif
