/* Family table: data movement, shape computation, constants. */
#include "ops/list.h"
#include "ops/control_flow.h"

const ts_op_desc *const ts_ops_tensor[] = {
    &ts_op_concat,  &ts_op_split,    &ts_op_slice,           &ts_op_reshape,  &ts_op_flatten,
    &ts_op_squeeze, &ts_op_unsqueeze, &ts_op_transpose,      &ts_op_gather,   &ts_op_shape,
    &ts_op_constant_of_shape, &ts_op_cast, &ts_op_identity,  &ts_op_dropout,  &ts_op_pad,
    &ts_op_resize,  &ts_op_upsample, &ts_op_expand,          &ts_op_tile,
    /* shape.c, trilu.c, gather_elements.c, argmax.c, depth_space.c, eyelike.c */
    &ts_op_size,    &ts_op_trilu,    &ts_op_gather_elements, &ts_op_argmax,   &ts_op_argmin,
    &ts_op_depth_to_space, &ts_op_space_to_depth, &ts_op_eyelike,
    /* cast.c, range.c, topk.c, onehot.c, nms.c, grid_sample.c */
    &ts_op_castlike, &ts_op_range, &ts_op_topk, &ts_op_onehot, &ts_op_nms, &ts_op_grid_sample,
    /* scatter.c, gather_nd.c, instance_norm.c */
    &ts_op_scatter_elements, &ts_op_scatter, &ts_op_scatternd, &ts_op_gathernd, &ts_op_instance_norm, &ts_op_mvn,
    &ts_op_lrn,
    /* nonzero.c, unique.c */
    &ts_op_nonzero, &ts_op_compress, &ts_op_unique,
    /* bitshift.c, spectral_window.c, det.c */
    &ts_op_bitshift, &ts_op_hann_window, &ts_op_hamming_window, &ts_op_blackman_window, &ts_op_det,
    &ts_op_einsum, &ts_op_tfidf, /* einsum.c, tfidf.c */
    &ts_op_quantize_linear, &ts_op_dequantize_linear, &ts_op_dynamic_quantize_linear, /* quantize.c */
    &ts_op_reverse_sequence, &ts_op_rnn, &ts_op_gru, &ts_op_lstm, /* reverse_sequence.c, rnn.c */
    &ts_op_matmul_integer, &ts_op_qlinear_matmul, &ts_op_conv_integer, &ts_op_qlinear_conv, /* *_integer.c */
    &ts_op_roi_align, &ts_op_max_unpool, /* roi_align.c, max_unpool.c */
    &ts_op_dft, &ts_op_stft, &ts_op_mel_weight_matrix, /* dft.c */
    &ts_op_einnet, /* einnet_op.c */
    &ts_op_qlinear_add, &ts_op_qlinear_lookup, &ts_op_qlinear_channel_mul, &ts_op_qlinear_gap, /* qlinear_eltwise.c
                                                   (internal, made by opt/fuse_qdq.c) */
    /* control_flow.c */
    &ts_op_if,      &ts_op_loop,     &ts_op_scan,
    NULL,
};
