/* Family table: element-wise operators, activations, reductions. */
#include "ops/op.h"

extern const ts_op_desc ts_op_add, ts_op_sub, ts_op_mul;

const ts_op_desc *const ts_ops_math[] = {
    &ts_op_add, &ts_op_sub, &ts_op_mul,
    NULL,
};
