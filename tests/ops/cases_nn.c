/* Single-op ORT cases for the nn family (see opcase.h): Conv and
 * ConvTranspose in 1-D/2-D/3-D with groups, dilations, strides, pads and
 * each auto_pad; MatMul shapes incl. 1-D operands and broadcast batches;
 * Gemm variants; BatchNormalization (also in training mode); pools incl.
 * ceil_mode, count_include_pad, MaxPool's Indices and uint8 data;
 * LayerNormalization.  Weights are constants, data are
 * graph inputs.  Where ONNX and ONNX Runtime split an odd padding
 * differently (ConvTranspose with output_shape), cases use even totals. */
#include "opcase.h"

#define NATTR(a) ((int)(sizeof(a) / sizeof *(a)))
#define OC_ATTR_INTS(NAME, ...) ts_attr_ints(NAME, OC_INTS(__VA_ARGS__))

/* X input, W constant in [-1, 1), optional bias (BDIMS NULL: none). */
#define CONV(FN, OP, OPSET, XDIMS, WDIMS, BDIMS, ...)                                              \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        const char *bd = BDIMS;                                                                    \
        int in[3] = {oc_input(g, "x", TS_F32, XDIMS), oc_const_f32(g, "w", WDIMS, NULL, -1, 1),    \
                     bd ? oc_const_f32(g, "b", bd, NULL, -1, 1) : -1};                             \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, OP, in, bd ? 3 : 2, a, NATTR(a), 1);                                     \
    }

#define G1 ts_attr_int("group", 1)

CONV(conv2d_basic, "Conv", 17, "1x3x8x8", "4x3x3x3", "4", G1)
CONV(conv2d_pads_nobias, "Conv", 17, "1x3x8x8", "4x3x3x3", NULL, OC_ATTR_INTS("pads", 1, 1, 1, 1))
CONV(conv2d_stride2_asym_pads, "Conv", 17, "2x3x9x8", "5x3x3x3", "5", OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 0, 1, 1, 0))
CONV(conv2d_dilated, "Conv", 17, "1x2x10x10", "3x2x3x3", "3", OC_ATTR_INTS("dilations", 2, 2),
     OC_ATTR_INTS("pads", 2, 2, 2, 2))
CONV(conv2d_dilated_strided, "Conv", 17, "1x2x11x9", "3x2x3x2", NULL, OC_ATTR_INTS("dilations", 2, 3),
     OC_ATTR_INTS("strides", 2, 1))
CONV(conv2d_grouped, "Conv", 17, "1x4x7x7", "6x2x3x3", "6", ts_attr_int("group", 2))
CONV(conv2d_depthwise, "Conv", 17, "1x4x9x9", "4x1x3x3", "4", ts_attr_int("group", 4), OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 1, 1, 1, 1))
CONV(conv2d_depthwise_multiplier, "Conv", 17, "1x3x6x6", "6x1x3x3", NULL, ts_attr_int("group", 3))
CONV(conv2d_same_upper, "Conv", 17, "1x3x8x8", "4x3x3x3", "4", ts_attr_string("auto_pad", "SAME_UPPER"),
     OC_ATTR_INTS("strides", 2, 2))
CONV(conv2d_same_lower, "Conv", 17, "1x3x8x8", "4x3x3x3", "4", ts_attr_string("auto_pad", "SAME_LOWER"),
     OC_ATTR_INTS("strides", 2, 2))
CONV(conv2d_same_upper_even_kernel, "Conv", 17, "1x2x7x7", "3x2x2x2", NULL, ts_attr_string("auto_pad", "SAME_UPPER"))
CONV(conv2d_valid, "Conv", 17, "1x3x8x7", "2x3x3x3", "2", ts_attr_string("auto_pad", "VALID"),
     OC_ATTR_INTS("strides", 2, 2))
CONV(conv2d_pointwise_kernel_shape, "Conv", 17, "2x8x5x5", "16x8x1x1", "16", OC_ATTR_INTS("kernel_shape", 1, 1))
CONV(conv2d_rect_kernel, "Conv", 17, "1x3x6x10", "3x3x1x5", NULL, OC_ATTR_INTS("pads", 0, 2, 0, 2))
CONV(conv2d_opset9, "Conv", 9, "1x3x6x6", "2x3x3x3", "2", OC_ATTR_INTS("kernel_shape", 3, 3))
CONV(conv1d, "Conv", 17, "1x2x10", "3x2x3", "3", OC_ATTR_INTS("strides", 2), OC_ATTR_INTS("pads", 1, 1))
/* ORT refuses SAME_* with dilations, so the dilated 1-D case pads explicitly */
CONV(conv1d_dilated, "Conv", 17, "1x2x9", "2x2x3", NULL, OC_ATTR_INTS("dilations", 2), OC_ATTR_INTS("pads", 2, 1))
CONV(conv3d, "Conv", 17, "1x2x4x5x5", "3x2x3x3x3", "3", OC_ATTR_INTS("pads", 1, 1, 1, 1, 1, 1))
CONV(conv3d_grouped_strided, "Conv", 17, "1x4x5x6x6", "4x2x2x2x2", NULL, ts_attr_int("group", 2),
     OC_ATTR_INTS("strides", 2, 2, 2))

CONV(convt2d_basic, "ConvTranspose", 17, "1x3x4x4", "3x2x3x3", "2", G1)
CONV(convt2d_stride2_pads, "ConvTranspose", 17, "1x3x4x4", "3x2x3x3", NULL, OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 1, 1, 1, 1))
CONV(convt2d_output_padding, "ConvTranspose", 17, "1x3x4x4", "3x2x3x3", "2", OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 1, 1, 1, 1), OC_ATTR_INTS("output_padding", 1, 1))
CONV(convt2d_output_shape, "ConvTranspose", 17, "1x3x4x4", "3x2x3x3", NULL, OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("output_shape", 7, 7))
CONV(convt2d_same_upper, "ConvTranspose", 17, "1x2x4x4", "2x3x4x4", "3", OC_ATTR_INTS("strides", 2, 2),
     ts_attr_string("auto_pad", "SAME_UPPER"))
CONV(convt2d_grouped, "ConvTranspose", 17, "1x4x3x3", "4x3x3x3", "6", ts_attr_int("group", 2),
     OC_ATTR_INTS("strides", 2, 1))
CONV(convt2d_dilated, "ConvTranspose", 17, "1x2x5x5", "2x2x3x3", NULL, OC_ATTR_INTS("dilations", 2, 2))
CONV(convt1d, "ConvTranspose", 17, "1x2x5", "2x3x4", "3", OC_ATTR_INTS("strides", 3))
/* output_shape past the natural size (7x7; 9): the extra positions at
 * the end hold the bias only.  ONNX Runtime takes up to stride - 1 more
 * (it refuses larger ones, which tsopt runs too: tests/unit); group 1 (the
 * GEMM kernel in the fast runtime), grouped and 1-D (oneDNN's) */
CONV(convt2d_output_shape_larger, "ConvTranspose", 17, "1x2x3x3", "2x3x3x3", "3", OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("output_shape", 8, 8))
CONV(convt2d_output_shape_larger_grouped, "ConvTranspose", 17, "1x4x3x3", "4x2x3x3", "4", ts_attr_int("group", 2),
     OC_ATTR_INTS("strides", 2, 2), OC_ATTR_INTS("output_shape", 8, 7))
CONV(convt1d_output_shape_larger, "ConvTranspose", 17, "1x2x3", "2x2x3", NULL, OC_ATTR_INTS("strides", 3),
     OC_ATTR_INTS("output_shape", 11))
CONV(convt3d, "ConvTranspose", 17, "1x2x3x3x3", "2x2x2x2x2", NULL, OC_ATTR_INTS("strides", 2, 2, 2))

/* ----------------------------------------------------------- matmul */

/* A input; B input when B_CONST is 0, else constant. */
#define MATMUL(FN, ADIMS, BDIMS, B_CONST)                                                          \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(17);                                                                \
        int in[2] = {oc_input(g, "a", TS_F32, ADIMS),                                              \
                     B_CONST ? oc_const_f32(g, "b", BDIMS, NULL, -1, 1) : oc_input(g, "b", TS_F32, BDIMS)}; \
        return oc_node(g, "MatMul", in, 2, NULL, 0, 1);                                            \
    }

MATMUL(matmul_2d, "3x4", "4x5", 1)
MATMUL(matmul_batched_broadcast, "2x1x3x4", "5x4x6", 0)
MATMUL(matmul_1d_left, "4", "2x4x3", 0)
MATMUL(matmul_1d_right, "2x3x4", "4", 0)
MATMUL(matmul_1d_both, "7", "7", 0)
MATMUL(matmul_3d_const_weight, "2x5x8", "8x7", 1)
MATMUL(matmul_vector_out, "6x32", "32x1", 1)

/* A input, B and C constants (CDIMS NULL: no C). */
#define GEMM(FN, OPSET, ADIMS, BDIMS, CDIMS, ...)                                                  \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        const char *cd = CDIMS;                                                                    \
        int in[3] = {oc_input(g, "a", TS_F32, ADIMS), oc_const_f32(g, "b", BDIMS, NULL, -1, 1),    \
                     cd ? oc_const_f32(g, "c", cd, NULL, -1, 1) : -1};                             \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, "Gemm", in, cd ? 3 : 2, a, NATTR(a), 1);                                 \
    }

GEMM(gemm_basic, 17, "3x4", "4x5", "5", ts_attr_int("transA", 0))
GEMM(gemm_trans_alpha_beta, 17, "4x3", "5x4", "3x5", ts_attr_int("transA", 1), ts_attr_int("transB", 1),
     ts_attr_float("alpha", 0.5), ts_attr_float("beta", 2.0))
GEMM(gemm_no_c, 13, "3x4", "5x4", NULL, ts_attr_int("transB", 1))
GEMM(gemm_c_column, 17, "3x4", "4x5", "3x1", ts_attr_float("beta", -1.0))
GEMM(gemm_c_scalar, 17, "2x6", "6x3", "", ts_attr_float("alpha", 1.5))
GEMM(gemm_opset9, 9, "2x4", "4x3", "2x3", ts_attr_int("transB", 0))

/* ------------------------------------------------------- batchnorm */

#define BATCHNORM(FN, OPSET, XDIMS, CDIMS, ...)                                                    \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        int in[5] = {oc_input(g, "x", TS_F32, XDIMS), oc_const_f32(g, "scale", CDIMS, NULL, -1, 1), \
                     oc_const_f32(g, "bias", CDIMS, NULL, -1, 1), oc_const_f32(g, "mean", CDIMS, NULL, -1, 1), \
                     oc_const_f32(g, "var", CDIMS, NULL, 0.5, 2.0)};                               \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, "BatchNormalization", in, 5, a, NATTR(a), 1);                            \
    }

BATCHNORM(batchnorm_2d, 15, "2x3x4x4", "3", ts_attr_float("epsilon", 1e-5))
BATCHNORM(batchnorm_1d_opset9, 9, "2x3x5", "3", ts_attr_float("epsilon", 1e-3))
BATCHNORM(batchnorm_rank2_opset14, 14, "4x3", "3", ts_attr_float("momentum", 0.8))
BATCHNORM(batchnorm_3d, 15, "1x2x3x3x3", "2", ts_attr_float("epsilon", 0.01))

/* training_mode: normalized by the batch's own statistics; outputs Y and
 * the running mean and variance */
static ts_graph *batchnorm_training(void)
{
    ts_graph *g = oc_graph(15);
    int in[5] = {oc_input(g, "x", TS_F32, "3x4x2x3"), oc_const_f32(g, "scale", "4", NULL, -1, 1),
                 oc_const_f32(g, "bias", "4", NULL, -1, 1), oc_const_f32(g, "mean", "4", NULL, -1, 1),
                 oc_const_f32(g, "var", "4", NULL, 0.5, 2.0)};
    const ts_attr a[] = {ts_attr_int("training_mode", 1), ts_attr_float("momentum", 0.7)};
    return oc_node(g, "BatchNormalization", in, 5, a, NATTR(a), 3);
}

/* ----------------------------------------------------------- pools */

#define POOL(FN, OP, OPSET, XDIMS, ...)                                                            \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(OPSET);                                                             \
        int x = oc_input(g, "x", TS_F32, XDIMS);                                                   \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, OP, &x, 1, a, NATTR(a), 1);                                              \
    }
#define KS(...) OC_ATTR_INTS("kernel_shape", __VA_ARGS__)

POOL(maxpool_basic, "MaxPool", 17, "1x3x8x8", KS(2, 2), OC_ATTR_INTS("strides", 2, 2))
POOL(maxpool_pads_stride, "MaxPool", 17, "1x3x9x9", KS(3, 3), OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 1, 1, 1, 1))
POOL(maxpool_ceil, "MaxPool", 17, "1x2x7x7", KS(2, 2), OC_ATTR_INTS("strides", 2, 2), ts_attr_int("ceil_mode", 1))
POOL(maxpool_dilated, "MaxPool", 17, "1x2x8x8", KS(2, 2), OC_ATTR_INTS("dilations", 2, 2))
POOL(maxpool_same_upper, "MaxPool", 17, "1x2x8x8", KS(3, 3), OC_ATTR_INTS("strides", 2, 2),
     ts_attr_string("auto_pad", "SAME_UPPER"))
POOL(maxpool_same_lower, "MaxPool", 17, "1x2x8x8", KS(2, 2), ts_attr_string("auto_pad", "SAME_LOWER"))
POOL(maxpool_storage_order, "MaxPool", 17, "1x2x5x5", KS(2, 2), ts_attr_int("storage_order", 1))
POOL(maxpool_1d, "MaxPool", 17, "1x2x10", KS(3), OC_ATTR_INTS("strides", 2))
POOL(maxpool_3d, "MaxPool", 17, "1x2x4x6x6", KS(2, 2, 2), OC_ATTR_INTS("strides", 2, 2, 2))
POOL(maxpool_opset9, "MaxPool", 9, "1x2x6x6", KS(3, 3), OC_ATTR_INTS("pads", 1, 1, 1, 1))

/* MaxPool's Indices output (row-major, and column-major by storage_order),
 * and uint8 data (opset 12) */
#define MAXPOOL_IDX(FN, XDIMS, ...)                                                                \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(12);                                                                \
        int x = oc_input(g, "x", TS_F32, XDIMS);                                                   \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, "MaxPool", &x, 1, a, NATTR(a), 2);                                       \
    }
MAXPOOL_IDX(maxpool_indices, "2x3x6x5", KS(3, 3), OC_ATTR_INTS("strides", 2, 2), OC_ATTR_INTS("pads", 1, 1, 1, 1))
MAXPOOL_IDX(maxpool_indices_storage_order, "1x2x5x7", KS(2, 3), OC_ATTR_INTS("strides", 2, 1),
            ts_attr_int("storage_order", 1))
MAXPOOL_IDX(maxpool_indices_3d, "1x2x4x3x5", KS(2, 2, 2), OC_ATTR_INTS("pads", 0, 1, 1, 1, 0, 0))
static ts_graph *maxpool_uint8(void)
{
    ts_graph *g = oc_graph(12);
    int x = oc_input(g, "x", TS_U8, "1x2x5x5");
    const ts_attr a[] = {KS(3, 3), OC_ATTR_INTS("pads", 1, 1, 1, 1), OC_ATTR_INTS("strides", 2, 2)};
    return oc_node(g, "MaxPool", &x, 1, a, NATTR(a), 1);
}
POOL(avgpool_basic, "AveragePool", 17, "1x3x6x6", KS(3, 3))
POOL(avgpool_pads_exclude, "AveragePool", 17, "1x3x6x6", KS(3, 3), OC_ATTR_INTS("pads", 1, 1, 1, 1),
     ts_attr_int("count_include_pad", 0))
POOL(avgpool_pads_include, "AveragePool", 17, "1x3x6x6", KS(3, 3), OC_ATTR_INTS("pads", 1, 1, 1, 1),
     ts_attr_int("count_include_pad", 1))
POOL(avgpool_ceil, "AveragePool", 17, "1x2x8x8", KS(3, 3), OC_ATTR_INTS("strides", 2, 2), ts_attr_int("ceil_mode", 1))
POOL(avgpool_same_lower, "AveragePool", 17, "1x2x7x7", KS(2, 2), ts_attr_string("auto_pad", "SAME_LOWER"))
POOL(avgpool_strided_asym_pads, "AveragePool", 17, "1x2x7x8", KS(2, 3), OC_ATTR_INTS("strides", 2, 2),
     OC_ATTR_INTS("pads", 0, 1, 1, 0))
POOL(avgpool_1d, "AveragePool", 17, "1x2x9", KS(2), OC_ATTR_INTS("strides", 2))
POOL(avgpool_3d, "AveragePool", 17, "1x2x4x4x4", KS(2, 2, 2), OC_ATTR_INTS("strides", 2, 2, 2))
POOL(avgpool_opset9, "AveragePool", 9, "1x2x5x5", KS(2, 2))

#define GLOBAL(FN, OP, XDIMS)                                                                      \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(17);                                                                \
        int x = oc_input(g, "x", TS_F32, XDIMS);                                                   \
        return oc_node(g, OP, &x, 1, NULL, 0, 1);                                                  \
    }

GLOBAL(global_avgpool_2d, "GlobalAveragePool", "2x3x5x4")
GLOBAL(global_avgpool_3d, "GlobalAveragePool", "1x3x2x3x4")
GLOBAL(global_maxpool_2d, "GlobalMaxPool", "2x3x5x4")
GLOBAL(global_maxpool_1d, "GlobalMaxPool", "1x4x7")

/* ------------------------------------------------------- layernorm */

#define LAYERNORM(FN, XDIMS, SDIMS, WITH_BIAS, ...)                                                \
    static ts_graph *FN(void)                                                                      \
    {                                                                                              \
        ts_graph *g = oc_graph(17);                                                                \
        int in[3] = {oc_input(g, "x", TS_F32, XDIMS), oc_const_f32(g, "scale", SDIMS, NULL, -1, 1), \
                     WITH_BIAS ? oc_const_f32(g, "bias", SDIMS, NULL, -1, 1) : -1};               \
        const ts_attr a[] = {__VA_ARGS__};                                                         \
        return oc_node(g, "LayerNormalization", in, WITH_BIAS ? 3 : 2, a, NATTR(a), 1);            \
    }

LAYERNORM(layernorm_axis_last, "2x3x8", "8", 1, ts_attr_int("axis", -1))
LAYERNORM(layernorm_axis_m2, "2x3x8", "3x8", 1, ts_attr_int("axis", -2))
LAYERNORM(layernorm_no_bias_eps, "4x16", "16", 0, ts_attr_float("epsilon", 1e-3))
LAYERNORM(layernorm_axis1_rank4, "2x3x4x5", "3x4x5", 1, ts_attr_int("axis", 1))

#define CASE(FN) {#FN, FN, 0, 0, 0, 0}

const opcase opcases_nn[] = {
    CASE(conv2d_basic),
    CASE(conv2d_pads_nobias),
    CASE(conv2d_stride2_asym_pads),
    CASE(conv2d_dilated),
    CASE(conv2d_dilated_strided),
    CASE(conv2d_grouped),
    CASE(conv2d_depthwise),
    CASE(conv2d_depthwise_multiplier),
    CASE(conv2d_same_upper),
    CASE(conv2d_same_lower),
    CASE(conv2d_same_upper_even_kernel),
    CASE(conv2d_valid),
    CASE(conv2d_pointwise_kernel_shape),
    CASE(conv2d_rect_kernel),
    CASE(conv2d_opset9),
    CASE(conv1d),
    CASE(conv1d_dilated),
    CASE(conv3d),
    CASE(conv3d_grouped_strided),
    CASE(convt2d_basic),
    CASE(convt2d_stride2_pads),
    CASE(convt2d_output_padding),
    CASE(convt2d_output_shape),
    CASE(convt2d_same_upper),
    CASE(convt2d_grouped),
    CASE(convt2d_dilated),
    CASE(convt1d),
    CASE(convt2d_output_shape_larger),
    CASE(convt2d_output_shape_larger_grouped),
    CASE(convt1d_output_shape_larger),
    CASE(convt3d),
    CASE(matmul_2d),
    CASE(matmul_batched_broadcast),
    CASE(matmul_1d_left),
    CASE(matmul_1d_right),
    CASE(matmul_1d_both),
    CASE(matmul_3d_const_weight),
    CASE(matmul_vector_out),
    CASE(gemm_basic),
    CASE(gemm_trans_alpha_beta),
    CASE(gemm_no_c),
    CASE(gemm_c_column),
    CASE(gemm_c_scalar),
    CASE(gemm_opset9),
    CASE(batchnorm_2d),
    CASE(batchnorm_1d_opset9),
    CASE(batchnorm_rank2_opset14),
    CASE(batchnorm_3d),
    CASE(batchnorm_training),
    CASE(maxpool_basic),
    CASE(maxpool_pads_stride),
    CASE(maxpool_ceil),
    CASE(maxpool_dilated),
    CASE(maxpool_same_upper),
    CASE(maxpool_same_lower),
    CASE(maxpool_storage_order),
    CASE(maxpool_1d),
    CASE(maxpool_3d),
    CASE(maxpool_opset9),
    CASE(maxpool_indices),
    CASE(maxpool_indices_storage_order),
    CASE(maxpool_indices_3d),
    CASE(maxpool_uint8),
    CASE(avgpool_basic),
    CASE(avgpool_pads_exclude),
    CASE(avgpool_pads_include),
    CASE(avgpool_ceil),
    CASE(avgpool_same_lower),
    CASE(avgpool_strided_asym_pads),
    CASE(avgpool_1d),
    CASE(avgpool_3d),
    CASE(avgpool_opset9),
    CASE(global_avgpool_2d),
    CASE(global_avgpool_3d),
    CASE(global_maxpool_2d),
    CASE(global_maxpool_1d),
    CASE(layernorm_axis_last),
    CASE(layernorm_axis_m2),
    CASE(layernorm_no_bias_eps),
    CASE(layernorm_axis1_rank4),
    {0},
};
