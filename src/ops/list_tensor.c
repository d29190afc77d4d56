/* Family table: data movement, shape computation, constants. */
#include "ops/list.h"

const ts_op_desc *const ts_ops_tensor[] = {
    &ts_op_concat,  &ts_op_split,    &ts_op_slice,           &ts_op_reshape,  &ts_op_flatten,
    &ts_op_squeeze, &ts_op_unsqueeze, &ts_op_transpose,      &ts_op_gather,   &ts_op_shape,
    &ts_op_constant_of_shape, &ts_op_cast, &ts_op_identity,  &ts_op_dropout,  &ts_op_pad,
    &ts_op_resize,  &ts_op_upsample, &ts_op_expand,          &ts_op_tile,
    /* shape.c, trilu.c, gather_elements.c, argmax.c, depth_space.c, eyelike.c */
    &ts_op_size,    &ts_op_trilu,    &ts_op_gather_elements, &ts_op_argmax,   &ts_op_argmin,
    &ts_op_depth_to_space, &ts_op_space_to_depth, &ts_op_eyelike,
    NULL,
};
