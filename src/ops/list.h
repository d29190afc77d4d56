/* Every registered operator descriptor by name, for code that asks what a
 * node is: `n->op == &ts_op_conv` is one pointer compare (no string
 * compare, and a typo is a compile error).  Code that starts from an ONNX
 * op_type string goes through ts_op_find (registry.c).  The family tables
 * (list_*.c) register these; a descriptor is defined in its op file. */
#ifndef TS_OPS_LIST_H
#define TS_OPS_LIST_H

#include "ops/op.h"

/* nn family (list_nn.c): convolution, pooling, normalization, matrix products */
extern const ts_op_desc ts_op_conv, ts_op_conv_transpose, ts_op_matmul, ts_op_gemm, ts_op_batchnorm;
extern const ts_op_desc ts_op_maxpool, ts_op_avgpool, ts_op_global_maxpool, ts_op_global_avgpool;
extern const ts_op_desc ts_op_layernorm;

/* math family (list_math.c): element-wise, activations, reductions */
extern const ts_op_desc ts_op_add, ts_op_sub, ts_op_mul, ts_op_div, ts_op_pow, ts_op_max, ts_op_min, ts_op_equal;
extern const ts_op_desc ts_op_greater, ts_op_less, ts_op_greater_eq, ts_op_less_eq, ts_op_and, ts_op_or, ts_op_xor,
    ts_op_mod, ts_op_sum, ts_op_mean;
extern const ts_op_desc ts_op_relu, ts_op_neg, ts_op_abs, ts_op_sqrt, ts_op_exp, ts_op_log, ts_op_reciprocal,
    ts_op_erf, ts_op_sigmoid, ts_op_tanh, ts_op_not;
extern const ts_op_desc ts_op_acos, ts_op_acosh, ts_op_asin, ts_op_asinh, ts_op_atan, ts_op_atanh, ts_op_cos,
    ts_op_cosh, ts_op_sin, ts_op_sinh, ts_op_tan, ts_op_softsign, ts_op_softplus, ts_op_round, ts_op_ceil,
    ts_op_floor, ts_op_sign, ts_op_isnan, ts_op_isinf;
extern const ts_op_desc ts_op_elu, ts_op_selu, ts_op_celu, ts_op_threlu, ts_op_shrink;
extern const ts_op_desc ts_op_leakyrelu, ts_op_hardsigmoid, ts_op_hardswish, ts_op_clip, ts_op_prelu;
extern const ts_op_desc ts_op_gelu; /* gelu.c */
extern const ts_op_desc ts_op_softmax, ts_op_logsoftmax;
extern const ts_op_desc ts_op_nll_loss, ts_op_softmax_ce_loss, ts_op_hardmax, ts_op_cumsum;
extern const ts_op_desc ts_op_reducesum, ts_op_reducemean, ts_op_reducemax, ts_op_reducemin, ts_op_reduceprod,
    ts_op_reducel1, ts_op_reducel2, ts_op_reducelogsum, ts_op_reducelogsumexp, ts_op_reducesumsquare;
extern const ts_op_desc ts_op_where;

/* tensor family (list_tensor.c): data movement, shape computation, constants */
extern const ts_op_desc ts_op_concat, ts_op_split, ts_op_slice, ts_op_reshape, ts_op_flatten, ts_op_squeeze,
    ts_op_unsqueeze, ts_op_transpose, ts_op_gather, ts_op_shape, ts_op_constant_of_shape, ts_op_cast, ts_op_identity,
    ts_op_dropout, ts_op_pad, ts_op_resize, ts_op_upsample, ts_op_expand, ts_op_tile;
extern const ts_op_desc ts_op_size, ts_op_trilu, ts_op_gather_elements, ts_op_argmax, ts_op_argmin,
    ts_op_depth_to_space, ts_op_space_to_depth, ts_op_eyelike;
extern const ts_op_desc ts_op_castlike, ts_op_range, ts_op_topk, ts_op_onehot, ts_op_nms, ts_op_grid_sample;
extern const ts_op_desc ts_op_scatter_elements, ts_op_scatter, ts_op_scatternd, ts_op_gathernd, ts_op_instance_norm,
    ts_op_mvn, ts_op_lrn;
extern const ts_op_desc ts_op_nonzero, ts_op_compress, ts_op_unique;
extern const ts_op_desc ts_op_bitshift, ts_op_hann_window, ts_op_hamming_window, ts_op_blackman_window, ts_op_det,
    ts_op_einsum, ts_op_tfidf, ts_op_quantize_linear, ts_op_dequantize_linear, ts_op_dynamic_quantize_linear,
    ts_op_reverse_sequence, ts_op_rnn, ts_op_gru, ts_op_lstm, ts_op_matmul_integer, ts_op_qlinear_matmul,
    ts_op_conv_integer, ts_op_qlinear_conv, ts_op_roi_align, ts_op_max_unpool, ts_op_dft, ts_op_stft,
    ts_op_mel_weight_matrix;
extern const ts_op_desc ts_op_einnet; /* einnet_op.c: an eOperator (EinNetOp, ai.tsopt) */
extern const ts_op_desc ts_op_qlinear_add, ts_op_qlinear_lookup, ts_op_qlinear_channel_mul,
    ts_op_qlinear_gap; /* qlinear_eltwise.c: internal, fuse_qdq.c's */

#endif
