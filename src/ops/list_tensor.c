/* Family table: data movement, shape computation, constants. */
#include "ops/op.h"

const ts_op_desc *const ts_ops_tensor[] = {
    NULL,
};
