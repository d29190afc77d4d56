/* Kernel table: vec family (see kernels.c and vec.h).  Every element-wise
 * op maps to vec.eltwise, which also fuses the element-wise chain after it. */
#include "exec/vec.h"

const xentry xkernels_vec[] = {
    {"Add", &xk_vec_eltwise},       {"Sub", &xk_vec_eltwise},        {"Mul", &xk_vec_eltwise},
    {"Div", &xk_vec_eltwise},       {"Pow", &xk_vec_eltwise},        {"Max", &xk_vec_eltwise},
    {"Min", &xk_vec_eltwise},       {"PRelu", &xk_vec_eltwise},      {"Relu", &xk_vec_eltwise},
    {"Neg", &xk_vec_eltwise},       {"Abs", &xk_vec_eltwise},        {"Sqrt", &xk_vec_eltwise},
    {"Exp", &xk_vec_eltwise},       {"Log", &xk_vec_eltwise},        {"Reciprocal", &xk_vec_eltwise},
    {"Erf", &xk_vec_eltwise},       {"Sigmoid", &xk_vec_eltwise},    {"Tanh", &xk_vec_eltwise},
    {"LeakyRelu", &xk_vec_eltwise}, {"HardSigmoid", &xk_vec_eltwise}, {"HardSwish", &xk_vec_eltwise},
    {"Clip", &xk_vec_eltwise},
    {"Softmax", &xk_vec_softmax},   {"LogSoftmax", &xk_vec_softmax},
    {"LayerNormalization", &xk_vec_layernorm},
    {"ReduceSum", &xk_vec_reduce},  {"ReduceMean", &xk_vec_reduce},  {"ReduceMax", &xk_vec_reduce},
    {"Transpose", &xk_vec_transpose}, {"Slice", &xk_vec_slice},     {"Expand", &xk_vec_expand},
    {"Concat", &xk_vec_concat},     {"Gather", &xk_vec_gather},      {"Split", &xk_vec_split},
    {"Resize", &xk_vec_resize},     {"Upsample", &xk_vec_resize},
    {"Pad", &xk_vec_pad},           {"BatchNormalization", &xk_vec_batchnorm},
    {NULL, NULL},
};

/* Tried before the oneDNN table: small-M MatMul with constant weights
 * (vec_gemv.c) and a MatMul reading a gathered band (vec_band.c, with the
 * Gather it defers); they decline everything else to the tables below. */
const xentry xkernels_vec_first[] = {
    {"MatMul", &xk_vec_gemv},
    {"MatMul", &xk_vec_band},
    {"Gather", &xk_vec_band_defer},
    {NULL, NULL},
};
