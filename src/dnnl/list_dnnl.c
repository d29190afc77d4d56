/* Kernel table: dnnl family (see kernels.c).  oneDNN primitives for the
 * compute-heavy ops; each declines (TS_ERR_UNSUPPORTED) what it cannot do. */
#include "exec/exec.h"
#include "ops/list.h"

extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_dnnl_matmul, xk_dnnl_gemm, xk_dnnl_pool;
extern const xkernel xk_deconv_gemm; /* deconv_gemm.c: GEMM + col2im, tried first (per-shape rule inside) */
extern const xkernel xk_dnnl_transpose; /* dnnl_transpose.c: a blocked input (else vec.transpose) */
extern const xkernel xk_dnnl_concat; /* dnnl_concat.c: only inputs in mixed layouts (else vec.concat) */
extern const xkernel xk_dense_concat; /* dense_concat.c: DenseNet's Concat chains as views of one buffer */
extern const xkernel xk_vec_concat_cl; /* vec_concat_cl.c: inputs channels-last and blocked mixed (else dnnl.concat) */
extern const xkernel xk_vec_shuffle;  /* vec_shuffle.c: Concat -> Reshape -> Transpose -> Reshape (channel shuffle) as one copy */
extern const xkernel xk_dnnl_qconv, xk_dnnl_conv_integer, xk_dnnl_qmatmul, xk_dnnl_matmul_integer; /* dnnl_int8.c */
extern const xkernel xk_dnnl_patch; /* dnnl_patch.c: stride = kernel on few channels as patches x weight */
extern const xkernel xk_dnnl_conv_gated; /* dnnl_conv.c: Mul(W, gate) -> Conv (ts_fold_gate's form) as one step */

const xentry xkernels_dnnl[] = {
    {&ts_op_conv, &xk_dnnl_patch},
    {&ts_op_conv, &xk_dnnl_conv},
    {&ts_op_conv_transpose, &xk_deconv_gemm},
    {&ts_op_conv_transpose, &xk_dnnl_deconv},
    {&ts_op_matmul, &xk_dnnl_matmul},
    {&ts_op_gemm, &xk_dnnl_gemm},
    {&ts_op_maxpool, &xk_dnnl_pool},
    {&ts_op_avgpool, &xk_dnnl_pool},
    {&ts_op_global_avgpool, &xk_dnnl_pool},
    {&ts_op_global_maxpool, &xk_dnnl_pool},
    {&ts_op_concat, &xk_vec_shuffle},
    {&ts_op_concat, &xk_dense_concat},
    {&ts_op_concat, &xk_vec_concat_cl},
    {&ts_op_concat, &xk_dnnl_concat},
    {&ts_op_transpose, &xk_dnnl_transpose}, /* dnnl_transpose.c: blocked input, one reorder */
    {&ts_op_mul, &xk_dnnl_conv_gated},
    {&ts_op_qlinear_conv, &xk_dnnl_qconv},
    {&ts_op_conv_integer, &xk_dnnl_conv_integer},
    {&ts_op_qlinear_matmul, &xk_dnnl_qmatmul},
    {&ts_op_matmul_integer, &xk_dnnl_matmul_integer},
    {NULL, NULL},
};
