/* Kernel table: vec family (see kernels.c and vec.h).  Every element-wise
 * op maps to vec.eltwise, which also fuses the element-wise chain after it. */
#include "vec/vec.h"
#include "ops/list.h"

extern const xkernel xk_einnet; /* einnet_kernel.c */
extern const xkernel xk_vec_dwconv; /* vec_depthwise.c: strided depthwise conv on a large channels-last input */
extern const xkernel xk_vec_gconv;  /* vec_gconv.c: grouped conv, 4 or 8 channels per group, channels-last */
extern const xkernel xk_vec_se;     /* vec_se.c: squeeze-excite gate (pool, two 1x1 convs, activations) */
extern const xkernel xk_vec_gap_blocks; /* vec_reduce.c: GlobalAveragePool of unpadded 16-channel blocks */
extern const xkernel xk_half_cast;   /* half.c: Cast between float32 and float16/bfloat16 */
extern const xkernel xk_vec_quantize, xk_vec_dequantize, xk_vec_dynamic_quantize, xk_vec_cast_i32; /* vec_quant.c */
extern const xkernel xk_vec_maxpool; /* vec_maxpool.c: 2-D MaxPool on channels-last or 16/8-channel blocks */
extern const xkernel xk_vec_qadd, xk_vec_qlookup, xk_vec_qchannel_mul, xk_vec_qgap; /* vec_qlinear.c: fuse_qdq.c's */
extern const xkernel xk_vec_attention; /* vec_attention.c: Transpose(K)-MatMul-(Mul)-(Where)-Softmax-MatMul */
extern const xkernel xk_vec_sdpa; /* vec_sdpa.c: an encoder's MatMul-(Mul)-Softmax-MatMul-(Transpose), AVX-512 */
extern const xkernel xk_vec_slice_transpose; /* vec_movement.c: Slice-(Reshape)-Transpose-(Mul/Div) as one copy */

const xentry xkernels_vec[] = {
    {&ts_op_add, &xk_vec_eltwise},       {&ts_op_sub, &xk_vec_eltwise},        {&ts_op_mul, &xk_vec_eltwise},
    {&ts_op_div, &xk_vec_eltwise},       {&ts_op_pow, &xk_vec_eltwise},        {&ts_op_max, &xk_vec_eltwise},
    {&ts_op_min, &xk_vec_eltwise},       {&ts_op_prelu, &xk_vec_eltwise},      {&ts_op_relu, &xk_vec_eltwise},
    {&ts_op_neg, &xk_vec_eltwise},       {&ts_op_abs, &xk_vec_eltwise},        {&ts_op_sqrt, &xk_vec_eltwise},
    {&ts_op_exp, &xk_vec_eltwise},       {&ts_op_log, &xk_vec_eltwise},        {&ts_op_reciprocal, &xk_vec_eltwise},
    {&ts_op_erf, &xk_vec_eltwise},       {&ts_op_sigmoid, &xk_vec_eltwise},    {&ts_op_tanh, &xk_vec_eltwise},
    {&ts_op_leakyrelu, &xk_vec_eltwise}, {&ts_op_hardsigmoid, &xk_vec_eltwise}, {&ts_op_hardswish, &xk_vec_eltwise},
    {&ts_op_clip, &xk_vec_eltwise},      {&ts_op_mod, &xk_vec_eltwise},        {&ts_op_gelu, &xk_vec_eltwise},
    {&ts_op_softmax, &xk_vec_softmax},   {&ts_op_logsoftmax, &xk_vec_softmax},
    {&ts_op_layernorm, &xk_vec_layernorm},
    {&ts_op_reducesum, &xk_vec_reduce},  {&ts_op_reducemean, &xk_vec_reduce},  {&ts_op_reducemax, &xk_vec_reduce},
    {&ts_op_transpose, &xk_vec_transpose}, {&ts_op_slice, &xk_vec_slice},     {&ts_op_expand, &xk_vec_expand},
    {&ts_op_concat, &xk_vec_concat},     {&ts_op_gather, &xk_vec_gather},      {&ts_op_split, &xk_vec_split},
    {&ts_op_resize, &xk_vec_resize},     {&ts_op_upsample, &xk_vec_resize},
    {&ts_op_pad, &xk_vec_pad},           {&ts_op_batchnorm, &xk_vec_batchnorm},
    {&ts_op_quantize_linear, &xk_vec_quantize}, {&ts_op_dequantize_linear, &xk_vec_dequantize},
    {&ts_op_dynamic_quantize_linear, &xk_vec_dynamic_quantize}, {&ts_op_cast, &xk_vec_cast_i32},
    {&ts_op_qlinear_add, &xk_vec_qadd}, {&ts_op_qlinear_lookup, &xk_vec_qlookup},
    {&ts_op_qlinear_channel_mul, &xk_vec_qchannel_mul}, {&ts_op_qlinear_gap, &xk_vec_qgap},
    {&ts_op_einnet, &xk_einnet}, /* einnet_kernel.c: a compiled eOperator */
    {&ts_op_cast, &xk_half_cast}, /* half.c: float32 <-> float16/bfloat16 */
    {NULL, NULL},
};

/* Tried before the oneDNN table: small-M MatMul with constant weights
 * (vec_gemv.c) and a MatMul reading a gathered band (vec_band.c, with the
 * Gather it defers); they decline everything else to the tables below. */
const xentry xkernels_vec_first[] = {
    {&ts_op_matmul, &xk_vec_gemv},
    {&ts_op_gemm, &xk_vec_gemv}, /* batch-1 classifier heads: constant B, bias broadcast along rows */
    {&ts_op_matmul, &xk_vec_band},
    {&ts_op_gather, &xk_vec_band_defer},
    {&ts_op_matmul, &xk_vec_sdpa},
    {&ts_op_reducemean, &xk_vec_layernorm_ops}, /* vec_layernorm.c: the whole decomposed LayerNorm */
    {&ts_op_conv, &xk_vec_dwconv},
    {&ts_op_conv, &xk_vec_gconv},
    {&ts_op_global_avgpool, &xk_vec_se},
    {&ts_op_global_avgpool, &xk_vec_gap_blocks},
    {&ts_op_maxpool, &xk_vec_maxpool},
    {&ts_op_transpose, &xk_vec_attention},
    {&ts_op_slice, &xk_vec_slice_transpose},
    {NULL, NULL},
};
