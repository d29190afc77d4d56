/* The atom table: one row per operator atom of the rule language (rule.h
 * explains the columns, docs/rules.md the mapping to ONNX).  Rows point to
 * the atoms' functions, grouped by family in atom_*.c. */
#include <string.h>
#include "rules/atom.h"

#define P_WINDOW (TS_RPARAM_KERNEL | TS_RPARAM_STRIDE | TS_RPARAM_PAD)

/* clang-format off */
const ts_ropinfo ts_rop_table[TS_ROP_COUNT] = {
    [TS_ROP_VAR] = {.atom = "?"},
    [TS_ROP_EWADD] = {.atom = "ewadd", .nargs = 2, .commutative = true, .op = &ts_op_add,
                      .match = ts_atom_ew_match, .build = ts_atom_ew_build, .split_point = ts_atom_ew_split},
    [TS_ROP_EWMUL] = {.atom = "ewmul", .nargs = 2, .commutative = true, .op = &ts_op_mul,
                      .match = ts_atom_ew_match, .build = ts_atom_ew_build, .split_point = ts_atom_ew_split},
    [TS_ROP_SMUL] = {.atom = "smul", .nargs = 2, .op = &ts_op_mul,
                     .match = ts_atom_smul_match, .build = ts_atom_smul_build, .split_point = ts_atom_keep_split},
    [TS_ROP_TRANSPOSE] = {.atom = "transpose", .nargs = 1, .op = &ts_op_transpose,
                          .match = ts_atom_transpose_match, .build = ts_atom_transpose_build,
                          .split_point = ts_atom_transpose_split},
    [TS_ROP_MATMUL] = {.atom = "matmul", .nargs = 2, .op = &ts_op_matmul, .bias = true, .bias_axis = 1,
                       .match = ts_atom_matmul_match, .roots = ts_atom_matmul_roots,
                       .build = ts_atom_matmul_build, .split_point = ts_atom_matmul_split},
    [TS_ROP_CONV] = {.atom = "conv", .params = TS_RPARAM_STRIDE | TS_RPARAM_PAD | TS_RPARAM_ACT, .nargs = 2,
                     .op = &ts_op_conv, .bias = true, .bias_axis = 0,
                     .match = ts_atom_conv_match, .roots = ts_atom_conv_roots,
                     .build = ts_atom_conv_build, .split_point = ts_atom_conv_split},
    /* a Pad of a weight: built for the axioms, never matched (weights fold) */
    [TS_ROP_ENLARGE] = {.atom = "enlarge", .nargs = 2, .op = &ts_op_pad, .build = ts_atom_enlarge_build},
    /* a Slice: the crop a valid conv by enlarge(y, r) makes; for the axioms */
    [TS_ROP_CROP] = {.atom = "crop", .nargs = 3, .op = &ts_op_slice, .build = ts_atom_crop_build},
    [TS_ROP_RELU] = {.atom = "relu", .nargs = 1, .op = &ts_op_relu,
                     .match = ts_atom_relu_match, .build = ts_atom_relu_build, .split_point = ts_atom_keep_split},
    [TS_ROP_POOLAVG] = {.atom = "poolavg", .params = P_WINDOW, .nargs = 1, .op = &ts_op_avgpool,
                        .match = ts_atom_pool_match, .build = ts_atom_pool_build,
                        .split_point = ts_atom_keep_split},
    [TS_ROP_POOLMAX] = {.atom = "poolmax", .params = P_WINDOW, .nargs = 1, .op = &ts_op_maxpool,
                        .match = ts_atom_pool_match, .build = ts_atom_pool_build,
                        .split_point = ts_atom_keep_split},
    [TS_ROP_CONCAT] = {.atom = "concat", .params = TS_RPARAM_AXIS, .nargs = 2, .op = &ts_op_concat,
                       .match = ts_atom_concat_match, .build = ts_atom_concat_build,
                       .split_point = ts_atom_concat_split},
    [TS_ROP_SPLIT0] = {.atom = "split0", .params = TS_RPARAM_AXIS, .nargs = 1, .op = &ts_op_split, .cuts = true,
                       .match = ts_atom_split_match, .build = ts_atom_split_build},
    [TS_ROP_SPLIT1] = {.atom = "split1", .params = TS_RPARAM_AXIS, .nargs = 1, .op = &ts_op_split, .cuts = true,
                       .match = ts_atom_split_match, .build = ts_atom_split_build},
    [TS_ROP_CPOOL] = {.atom = "Cpool", .params = TS_RPARAM_KERNEL, .constant = true,
                      .cshape = TS_RCONST_KERNEL, .fill = ts_atom_cpool_fill},
    [TS_ROP_ICONV] = {.atom = "Iconv", .params = TS_RPARAM_KERNEL, .constant = true,
                      .cshape = TS_RCONST_KERNEL, .fill = ts_atom_iconv_fill},
    [TS_ROP_IMATMUL] = {.atom = "Imatmul", .constant = true, .cshape = TS_RCONST_SQUARE,
                        .fill = ts_atom_imatmul_fill},
    [TS_ROP_IEWMUL] = {.atom = "Iewmul", .constant = true, .cshape = TS_RCONST_ACT, .fill = ts_atom_iewmul_fill},
    /* grouped (depthwise: m1) convolution; the group count follows from the
     * kernel, output channels / mult (docs/taso.md, "Grouped convolution") */
    [TS_ROP_GCONV] = {.atom = "gconv", .params = TS_RPARAM_STRIDE | TS_RPARAM_PAD | TS_RPARAM_ACT | TS_RPARAM_MULT,
                      .nargs = 2, .op = &ts_op_conv, .bias = true, .bias_axis = 0,
                      .match = ts_atom_conv_match, .roots = ts_atom_conv_roots,
                      .build = ts_atom_conv_build, .split_point = ts_atom_conv_split},
    /* ONNX arithmetic, reductions and fusions (atom_math.c): no match yet */
    [TS_ROP_NUM] = {.atom = "num", .params = TS_RPARAM_VALUE, .constant = true, .cshape = TS_RCONST_SCALAR,
                    .build = ts_atom_num_build, .fill = ts_atom_num_fill},
    [TS_ROP_ADD] = {.atom = "add", .nargs = 2, .commutative = true, .op = &ts_op_add, .build = ts_atom_arith_build},
    [TS_ROP_SUB] = {.atom = "sub", .nargs = 2, .op = &ts_op_sub, .build = ts_atom_arith_build},
    [TS_ROP_MUL] = {.atom = "mul", .nargs = 2, .commutative = true, .op = &ts_op_mul, .build = ts_atom_arith_build},
    [TS_ROP_DIV] = {.atom = "div", .nargs = 2, .op = &ts_op_div, .build = ts_atom_arith_build},
    [TS_ROP_POW] = {.atom = "pow", .nargs = 2, .op = &ts_op_pow, .build = ts_atom_arith_build},
    [TS_ROP_SQRT] = {.atom = "sqrt", .nargs = 1, .op = &ts_op_sqrt, .build = ts_atom_arith_build},
    [TS_ROP_RECIP] = {.atom = "recip", .nargs = 1, .op = &ts_op_reciprocal, .build = ts_atom_arith_build},
    [TS_ROP_ERF] = {.atom = "erf", .nargs = 1, .op = &ts_op_erf, .build = ts_atom_arith_build},
    [TS_ROP_TANH] = {.atom = "tanh", .nargs = 1, .op = &ts_op_tanh, .build = ts_atom_arith_build},
    [TS_ROP_SIGMOID] = {.atom = "sigmoid", .nargs = 1, .op = &ts_op_sigmoid, .build = ts_atom_arith_build},
    [TS_ROP_REDUCEMEAN] = {.atom = "reducemean", .params = TS_RPARAM_AXES, .nargs = 1, .op = &ts_op_reducemean,
                           .build = ts_atom_reducemean_build},
    /* ONNX Gelu (opset 20), a function: built as its body (no kernel) */
    [TS_ROP_GELU] = {.atom = "gelu", .nargs = 1, .build = ts_atom_gelu_build},
    [TS_ROP_GELUTANH] = {.atom = "gelutanh", .nargs = 1, .build = ts_atom_gelu_build},
    [TS_ROP_LAYERNORM] = {.atom = "layernorm", .params = TS_RPARAM_AXES, .nargs = 2, .op = &ts_op_layernorm,
                          .build = ts_atom_layernorm_build},
    [TS_ROP_BROADCAST] = {.atom = "broadcast", .nargs = 2, .op = &ts_op_expand, .build = ts_atom_broadcast_build},
    [TS_ROP_GATHER] = {.atom = "gather", .params = TS_RPARAM_AXIS, .nargs = 2, .op = &ts_op_gather,
                       .build = ts_atom_gather_build},
};
/* clang-format on */

const ts_ropinfo *ts_rop_info(ts_rop op)
{
    return op < TS_ROP_COUNT ? &ts_rop_table[op] : NULL;
}

ts_rop ts_rop_from_atom(const char *atom)
{
    for (int i = 1; i < TS_ROP_COUNT; i++)
        if (!strcmp(ts_rop_table[i].atom, atom)) return (ts_rop)i;
    return TS_ROP_COUNT;
}

int64_t ts_rexpr_split_point(const ts_rexpr *e, int axis, ts_rshape_fn shape_of, void *ctx)
{
    const ts_ropinfo *in = &ts_rop_table[e->op];
    return in->split_point ? in->split_point(e, axis, shape_of, ctx) : -1;
}
