/* Family table: element-wise operators, activations, reductions. */
#include "ops/list.h"

const ts_op_desc *const ts_ops_math[] = {
    /* binary.c */
    &ts_op_add, &ts_op_sub, &ts_op_mul, &ts_op_div, &ts_op_pow, &ts_op_max, &ts_op_min, &ts_op_equal,
    &ts_op_greater, &ts_op_less, &ts_op_greater_eq, &ts_op_less_eq, &ts_op_and, &ts_op_or, &ts_op_xor, &ts_op_mod,
    &ts_op_sum, &ts_op_mean,
    /* unary.c */
    &ts_op_relu, &ts_op_neg, &ts_op_abs, &ts_op_sqrt, &ts_op_exp, &ts_op_log, &ts_op_reciprocal, &ts_op_erf,
    &ts_op_sigmoid, &ts_op_tanh, &ts_op_not,
    &ts_op_acos, &ts_op_acosh, &ts_op_asin, &ts_op_asinh, &ts_op_atan, &ts_op_atanh, &ts_op_cos, &ts_op_cosh,
    &ts_op_sin, &ts_op_sinh, &ts_op_tan, &ts_op_softsign, &ts_op_softplus, &ts_op_round, &ts_op_ceil,
    &ts_op_floor, &ts_op_sign, &ts_op_isnan, &ts_op_isinf,
    /* activation.c */
    &ts_op_leakyrelu, &ts_op_hardsigmoid, &ts_op_hardswish, &ts_op_clip, &ts_op_prelu, &ts_op_elu,
    &ts_op_selu, &ts_op_celu, &ts_op_threlu, &ts_op_shrink,
    &ts_op_gelu, /* gelu.c */
    /* softmax.c, reduce.c, where.c */
    &ts_op_softmax, &ts_op_logsoftmax, &ts_op_reducesum, &ts_op_reducemean, &ts_op_reducemax, &ts_op_where,
    /* loss.c */
    &ts_op_nll_loss, &ts_op_softmax_ce_loss,
    /* hardmax.c, cumsum.c */
    &ts_op_hardmax, &ts_op_cumsum,
    /* reduce.c: float-only reductions */
    &ts_op_reducemin, &ts_op_reduceprod, &ts_op_reducel1, &ts_op_reducel2, &ts_op_reducelogsum,
    &ts_op_reducelogsumexp, &ts_op_reducesumsquare,
    NULL,
};
