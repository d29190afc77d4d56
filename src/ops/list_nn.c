/* Family table: convolution, pooling, normalization, matrix products. */
#include "ops/op.h"

const ts_op_desc *const ts_ops_nn[] = {
    NULL,
};
