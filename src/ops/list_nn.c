/* Family table: convolution, pooling, normalization, matrix products. */
#include "ops/list.h"

const ts_op_desc *const ts_ops_nn[] = {
    &ts_op_conv,    &ts_op_conv_transpose, &ts_op_matmul,         &ts_op_gemm,           &ts_op_batchnorm,
    &ts_op_maxpool, &ts_op_avgpool,        &ts_op_global_maxpool, &ts_op_global_avgpool, &ts_op_layernorm,
    NULL,
};
