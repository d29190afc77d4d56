/* Kernel table: dnnl family (see kernels.c).  oneDNN primitives for the
 * compute-heavy ops; each declines (TS_ERR_UNSUPPORTED) what it cannot do. */
#include "exec/exec.h"

extern const xkernel xk_dnnl_conv, xk_dnnl_deconv, xk_dnnl_matmul, xk_dnnl_gemm, xk_dnnl_pool;
extern const xkernel xk_deconv_gemm; /* deconv_gemm.c: GEMM + col2im, tried first (per-shape rule inside) */
extern const xkernel xk_dnnl_concat; /* dnnl_concat.c: only inputs in mixed layouts (else vec.concat) */

const xentry xkernels_dnnl[] = {
    {"Conv", &xk_dnnl_conv},
    {"ConvTranspose", &xk_deconv_gemm},
    {"ConvTranspose", &xk_dnnl_deconv},
    {"MatMul", &xk_dnnl_matmul},
    {"Gemm", &xk_dnnl_gemm},
    {"MaxPool", &xk_dnnl_pool},
    {"AveragePool", &xk_dnnl_pool},
    {"GlobalAveragePool", &xk_dnnl_pool},
    {"GlobalMaxPool", &xk_dnnl_pool},
    {"Concat", &xk_dnnl_concat},
    {NULL, NULL},
};
