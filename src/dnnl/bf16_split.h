/* float16 convolutions on AMX-BF16 without bfloat16's rounding
 * (bf16_split.c, docs/runtime.md "Half precision"): a float32 value x is
 * split into hi + lo, both bfloat16, hi = x truncated to 8 significant
 * bits and lo = x - hi rounded to bfloat16.  Every float16 value (11
 * significant bits) splits exactly; other values keep 16 of their bits. */
#ifndef TS_DNNL_BF16_SPLIT_H
#define TS_DNNL_BF16_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <oneapi/dnnl/dnnl.h>
#include "dnnl/dnnl_util.h"

/* hi[i] + lo[i] = x[i] (float32 input), over OpenMP threads when large. */
void xd_bf16_split(const float *x, uint16_t *hi, uint16_t *lo, size_t n);
/* The same from float16 input. */
void xd_bf16_split_f16(const uint16_t *x, uint16_t *hi, uint16_t *lo, size_t n);
/* In place: a [rows, k] float32 matrix a becomes its hi values, a dense
 * [rows, k] bfloat16 matrix in a's first half; its lo values go to lo.
 * Why: a float16 product's input that dies at the product then needs
 * scratch for Xl only (ViT-B/16 at batch 4: the MLP's hidden tensor, 9.2
 * MiB, split with 4.6 MiB more instead of 9.2).  oneDNN 2.6's AMX matmul
 * takes no strided rows (gemm:jit instead), so hi and lo cannot share the
 * rows in place: xd_bf16_split_inplace below permutes them apart. */
void xd_bf16_split_hi_inplace(float *a, uint16_t *lo, int64_t rows, int64_t k);
/* Both halves in place: a's bytes become its hi values, a dense [rows, k]
 * bfloat16 matrix, followed by its lo values, another; no scratch for Xl
 * (ViT-B/16 at batch 4: the second MLP product's 4.6 MiB lo half set the
 * arena's peak).  Each row is split where it lies (hi then lo), then the
 * half-rows are permuted into place, a cycle at a time: one more pass over
 * a.  tmp: xd_bf16_split_inplace_tmp(rows, k, threads) bytes. */
size_t xd_bf16_split_inplace_tmp(int64_t rows, int64_t k, int threads);
void xd_bf16_split_inplace(float *a, int64_t rows, int64_t k, void *tmp, int threads);

/* Whether oneDNN runs bfloat16 convolutions on AMX on this CPU: the one
 * place a float16 plan asks (oneDNN's effective ISA, so DNNL_MAX_CPU_ISA
 * lowers it as it lowers oneDNN's kernels).  oneDNN 2.6 has no float16
 * convolution on CPUs (dnnl_unimplemented, also with AVX512-FP16). */
bool xd_cpu_amx_bf16(void);
/* Tests: force the answer (0 no, 1 yes), -1 back to asking oneDNN. */
void xd_cpu_amx_bf16_force(int v);

/* The three passes, as convolutions (dnnl_conv.c) and products
 * (dnnl_matmul.c) run them: whether oneDNN chose an AMX kernel for pd;
 * whether the post-ops f fit the passes (a residual sum may come first, as
 * each pass adds onto dst; element-wise ones only after it, applied by the
 * last pass); whether the n float32 weights w all lie on the float16 grid
 * (then they split exactly). */
bool xd_pd_is_amx(const_dnnl_primitive_desc_t pd);
bool xd_x3_post_ok(const xd_fuse *f);
bool xd_on_f16_grid(const float *w, size_t n);

#endif
