/* Family table: element-wise operators, activations, reductions. */
#include "ops/list.h"

const ts_op_desc *const ts_ops_math[] = {
    /* binary.c */
    &ts_op_add, &ts_op_sub, &ts_op_mul, &ts_op_div, &ts_op_pow, &ts_op_max, &ts_op_min, &ts_op_equal,
    /* unary.c */
    &ts_op_relu, &ts_op_neg, &ts_op_abs, &ts_op_sqrt, &ts_op_exp, &ts_op_log, &ts_op_reciprocal, &ts_op_erf,
    &ts_op_sigmoid, &ts_op_tanh, &ts_op_not,
    /* activation.c */
    &ts_op_leakyrelu, &ts_op_hardsigmoid, &ts_op_hardswish, &ts_op_clip, &ts_op_prelu,
    /* softmax.c, reduce.c, where.c */
    &ts_op_softmax, &ts_op_logsoftmax, &ts_op_reducesum, &ts_op_reducemean, &ts_op_reducemax, &ts_op_where,
    NULL,
};
