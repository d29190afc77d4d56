/* Single-op ORT cases for the tensor family (see opcase.h): every operator
 * of src/ops/list_tensor.c in its opset variants.  Integer inputs (indices,
 * shapes, pads...) are constants. */
#include "opcase.h"

#define A_INT(n, v) ts_attr_int(n, v)
#define A_INTS(n, ...) ts_attr_ints(n, OC_INTS(__VA_ARGS__))
#define A_STR(n, v) ts_attr_string(n, v)
/* constant int64 vector: oc_const_i64 takes the count first */
#define CI64(g, name, ...)                                                                                    \
    oc_const_i64(g, name, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__})

/* ------------------------------------------------------------- Concat */
static ts_graph *concat_axis1(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_input(g, "b", TS_F32, "2x1x4"), oc_input(g, "c", TS_F32, "2x2x4")};
    ts_attr a[] = {A_INT("axis", 1)};
    return oc_node(g, "Concat", in, 3, a, 1, 1);
}
static ts_graph *concat_neg_axis(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "a", TS_F32, "2x3"), oc_const_f32(g, "b", "2x2", NULL, -1, 1)};
    ts_attr a[] = {A_INT("axis", -1)};
    return oc_node(g, "Concat", in, 2, a, 1, 1);
}
static ts_graph *concat_opset11(void)
{
    ts_graph *g = oc_graph(11);
    int in[2] = {oc_input(g, "a", TS_F32, "1x4"), oc_input(g, "b", TS_F32, "3x4")};
    ts_attr a[] = {A_INT("axis", 0)};
    return oc_node(g, "Concat", in, 2, a, 1, 1);
}

/* -------------------------------------------------------------- Split */
static ts_graph *split_attr_opset11(void)
{
    ts_graph *g = oc_graph(11);
    int x = oc_input(g, "x", TS_F32, "2x6");
    ts_attr a[] = {A_INT("axis", 1), A_INTS("split", 1, 2, 3)};
    return oc_node(g, "Split", &x, 1, a, 2, 3);
}
static ts_graph *split_input_opset13(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "5x3"), CI64(g, "split", 2, 3)};
    return oc_node(g, "Split", in, 2, NULL, 0, 2);
}
static ts_graph *split_equal_neg_axis(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    ts_attr a[] = {A_INT("axis", -1)};
    return oc_node(g, "Split", &x, 1, a, 1, 2);
}
static ts_graph *split_num_outputs_opset18(void)
{
    ts_graph *g = oc_graph(18);
    int x = oc_input(g, "x", TS_F32, "7x2");
    ts_attr a[] = {A_INT("num_outputs", 3)};
    return oc_node(g, "Split", &x, 1, a, 1, 3);
}

/* -------------------------------------------------------------- Slice */
static ts_graph *slice_attr_opset9(void)
{
    ts_graph *g = oc_graph(9);
    int x = oc_input(g, "x", TS_F32, "4x5");
    ts_attr a[] = {A_INTS("starts", 1, -4), A_INTS("ends", 1000, -1), A_INTS("axes", 0, 1)};
    return oc_node(g, "Slice", &x, 1, a, 3, 1);
}
static ts_graph *slice_inputs_steps(void)
{
    ts_graph *g = oc_graph(13);
    int in[5] = {oc_input(g, "x", TS_F32, "4x6x3"), CI64(g, "st", 0, 1),
                 CI64(g, "en", INT64_MAX, 6), CI64(g, "ax", 0, 1),
                 CI64(g, "sp", 2, 2)};
    return oc_node(g, "Slice", in, 5, NULL, 0, 1);
}
static ts_graph *slice_negative_step(void)
{
    ts_graph *g = oc_graph(13);
    int in[5] = {oc_input(g, "x", TS_F32, "3x5"), CI64(g, "st", -1),
                 CI64(g, "en", INT64_MIN), CI64(g, "ax", -1),
                 CI64(g, "sp", -2)};
    return oc_node(g, "Slice", in, 5, NULL, 0, 1);
}
static ts_graph *slice_no_axes_opset10(void)
{
    ts_graph *g = oc_graph(10);
    int in[3] = {oc_input(g, "x", TS_F32, "3x4"), CI64(g, "st", 1, 1),
                 CI64(g, "en", 3, -1)};
    return oc_node(g, "Slice", in, 3, NULL, 0, 1);
}

/* ------------------------------------------- Reshape, Flatten, (Un)Squeeze */
static ts_graph *reshape_minus_one(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), CI64(g, "s", 4, -1)};
    return oc_node(g, "Reshape", in, 2, NULL, 0, 1);
}
static ts_graph *reshape_zero_copies(void)
{
    ts_graph *g = oc_graph(14);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), CI64(g, "s", 0, 0, 2, 2)};
    return oc_node(g, "Reshape", in, 2, NULL, 0, 1);
}
static ts_graph *flatten_default(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    return oc_node(g, "Flatten", &x, 1, NULL, 0, 1);
}
static ts_graph *flatten_neg_axis(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    ts_attr a[] = {A_INT("axis", -1)};
    return oc_node(g, "Flatten", &x, 1, a, 1, 1);
}
static ts_graph *flatten_axis0(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3");
    ts_attr a[] = {A_INT("axis", 0)};
    return oc_node(g, "Flatten", &x, 1, a, 1, 1);
}
static ts_graph *squeeze_attr_opset11(void)
{
    ts_graph *g = oc_graph(11);
    int x = oc_input(g, "x", TS_F32, "1x3x1x2");
    ts_attr a[] = {A_INTS("axes", 0, -2)};
    return oc_node(g, "Squeeze", &x, 1, a, 1, 1);
}
static ts_graph *squeeze_input_opset13(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "1x3x1x2"), CI64(g, "ax", 2)};
    return oc_node(g, "Squeeze", in, 2, NULL, 0, 1);
}
static ts_graph *squeeze_all(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "1x3x1x2");
    return oc_node(g, "Squeeze", &x, 1, NULL, 0, 1);
}
static ts_graph *unsqueeze_attr_opset11(void)
{
    ts_graph *g = oc_graph(11);
    int x = oc_input(g, "x", TS_F32, "3x2");
    ts_attr a[] = {A_INTS("axes", 0, 3)};
    return oc_node(g, "Unsqueeze", &x, 1, a, 1, 1);
}
static ts_graph *unsqueeze_input_opset13(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "3x2"), CI64(g, "ax", -1, 1)};
    return oc_node(g, "Unsqueeze", in, 2, NULL, 0, 1);
}

/* ---------------------------------------------------------- Transpose */
static ts_graph *transpose_default(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    return oc_node(g, "Transpose", &x, 1, NULL, 0, 1);
}
static ts_graph *transpose_perm(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4x5");
    ts_attr a[] = {A_INTS("perm", 0, 2, 3, 1)};
    return oc_node(g, "Transpose", &x, 1, a, 1, 1);
}

/* ------------------------------------------------------------- Gather */
static ts_graph *gather_axis0(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "5x3"), CI64(g, "i", 4, 0, -1, 2)};
    return oc_node(g, "Gather", in, 2, NULL, 0, 1);
}
static ts_graph *gather_axis1_int32_2d(void)
{
    ts_graph *g = oc_graph(13);
    ts_error e = {0};
    ts_shape s = oc_shape("2x2");
    ts_tensor *t = ts_tensor_new(TS_I32, &s, &e);
    oc_check(t != NULL, &e);
    int32_t v[4] = {0, 3, -2, 1};
    for (int i = 0; i < 4; i++) ((int32_t *)t->data)[i] = v[i];
    int in[2] = {oc_input(g, "x", TS_F32, "2x4x3"), ts_graph_add_constant(g, "i", t, &e)};
    ts_tensor_unref(t);
    oc_check(in[1] >= 0, &e);
    ts_attr a[] = {A_INT("axis", 1)};
    return oc_node(g, "Gather", in, 2, a, 1, 1);
}
static ts_graph *gather_scalar_neg_axis(void)
{
    ts_graph *g = oc_graph(13);
    ts_error e = {0};
    ts_shape s = oc_shape("");
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    oc_check(t != NULL, &e);
    *(int64_t *)t->data = 1;
    int in[2] = {oc_input(g, "x", TS_F32, "2x3"), ts_graph_add_constant(g, "i", t, &e)};
    ts_tensor_unref(t);
    oc_check(in[1] >= 0, &e);
    ts_attr a[] = {A_INT("axis", -1)};
    return oc_node(g, "Gather", in, 2, a, 1, 1);
}

/* ---------------------------------------------- Shape, ConstantOfShape */
static ts_graph *shape_full(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    return oc_node(g, "Shape", &x, 1, NULL, 0, 1);
}
static ts_graph *shape_start_end_opset15(void)
{
    ts_graph *g = oc_graph(15);
    int x = oc_input(g, "x", TS_F32, "2x3x4x5");
    ts_attr a[] = {A_INT("start", 1), A_INT("end", -1)};
    return oc_node(g, "Shape", &x, 1, a, 2, 1);
}
static ts_graph *constant_of_shape_default(void)
{
    ts_graph *g = oc_graph(13);
    int s = CI64(g, "s", 2, 3);
    return oc_node(g, "ConstantOfShape", &s, 1, NULL, 0, 1);
}
static ts_graph *constant_of_shape_value(void)
{
    ts_graph *g = oc_graph(13);
    ts_error e = {0};
    ts_shape one = oc_shape("1");
    ts_tensor *t = ts_tensor_new(TS_F32, &one, &e);
    oc_check(t != NULL, &e);
    *(float *)t->data = 2.5f;
    int s = CI64(g, "s", 3, 1, 2);
    ts_attr a[] = {ts_attr_tensor("value", t)};
    ts_graph *r = oc_node(g, "ConstantOfShape", &s, 1, a, 1, 1);
    ts_tensor_unref(t);
    return r;
}
static ts_graph *constant_of_shape_int64(void)
{
    ts_graph *g = oc_graph(13);
    ts_error e = {0};
    ts_shape one = oc_shape("1");
    ts_tensor *t = ts_tensor_new(TS_I64, &one, &e);
    oc_check(t != NULL, &e);
    *(int64_t *)t->data = -3;
    int s = CI64(g, "s", 4);
    ts_attr a[] = {ts_attr_tensor("value", t)};
    ts_graph *r = oc_node(g, "ConstantOfShape", &s, 1, a, 1, 1);
    ts_tensor_unref(t);
    return r;
}

/* --------------------------------------------------------------- Cast */
static ts_graph *cast_to(const char *dims, int64_t to)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, dims);
    ts_attr a[] = {A_INT("to", to)};
    return oc_node(g, "Cast", &x, 1, a, 1, 1);
}
static ts_graph *cast_f32_to_i64(void) { return cast_to("3x4", 7); }
static ts_graph *cast_f32_to_i32(void) { return cast_to("3x4", 6); }
static ts_graph *cast_f32_to_f64(void) { return cast_to("3x4", 11); }
static ts_graph *cast_f32_to_bool(void) { return cast_to("3x4", 9); }
static ts_graph *cast_i64_to_f32(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "4"), CI64(g, "k", 3, -7, 0, 100)};
    ts_attr a[] = {A_INT("to", 1)};
    ts_error e = {0};
    int c, out;
    oc_check(ts_graph_add_node(g, "Cast", NULL, &in[1], 1, a, 1, 1, NULL, &c, &e) >= 0, &e);
    int m[2] = {in[0], c};
    oc_check(ts_graph_add_node(g, "Add", NULL, m, 2, NULL, 0, 1, NULL, &out, &e) >= 0, &e);
    oc_check(ts_graph_add_output(g, out, &e) == TS_OK, &e);
    return g;
}

/* --------------------------------------------------- Identity, Dropout */
static ts_graph *identity(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3");
    return oc_node(g, "Identity", &x, 1, NULL, 0, 1);
}
static ts_graph *dropout_opset13_mask(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3");
    return oc_node(g, "Dropout", &x, 1, NULL, 0, 2);
}
static ts_graph *dropout_opset11_ratio(void)
{
    ts_graph *g = oc_graph(11);
    int x = oc_input(g, "x", TS_F32, "2x3");
    ts_attr a[] = {ts_attr_float("ratio", 0.2)};
    return oc_node(g, "Dropout", &x, 1, a, 1, 1);
}

/* ---------------------------------------------------------------- Pad */
static ts_graph *pad_attr_opset9(void)
{
    ts_graph *g = oc_graph(9);
    int x = oc_input(g, "x", TS_F32, "1x2x3x3");
    ts_attr a[] = {A_INTS("pads", 0, 0, 1, 2, 0, 0, 2, 1), ts_attr_float("value", 1.5)};
    return oc_node(g, "Pad", &x, 1, a, 2, 1);
}
static ts_graph *pad_constant_value_input(void)
{
    ts_graph *g = oc_graph(13);
    float v = -2.0f;
    int in[3] = {oc_input(g, "x", TS_F32, "2x3"), CI64(g, "p", 1, 0, 0, 2),
                 oc_const_f32(g, "v", "", &v, 0, 0)};
    return oc_node(g, "Pad", in, 3, NULL, 0, 1);
}
static ts_graph *pad_reflect(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "1x1x4x5"), CI64(g, "p", 0, 0, 2, 1, 0, 0, 3, 4)};
    ts_attr a[] = {A_STR("mode", "reflect")};
    return oc_node(g, "Pad", in, 2, a, 1, 1);
}
static ts_graph *pad_edge(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "1x1x3x3"), CI64(g, "p", 0, 0, 2, 1, 0, 0, 1, 3)};
    ts_attr a[] = {A_STR("mode", "edge")};
    return oc_node(g, "Pad", in, 2, a, 1, 1);
}
static ts_graph *pad_negative_crop(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "4x5"), CI64(g, "p", -1, 2, 1, -2)};
    return oc_node(g, "Pad", in, 2, NULL, 0, 1);
}
static ts_graph *pad_axes_opset18(void)
{
    ts_graph *g = oc_graph(18);
    int in[4] = {oc_input(g, "x", TS_F32, "2x3x4"), CI64(g, "p", 1, 2, 2, 0), -1,
                 CI64(g, "ax", -1, 0)};
    return oc_node(g, "Pad", in, 4, NULL, 0, 1);
}

/* ------------------------------------------------------------- Resize */
static ts_graph *resize_scales(int opset, const char *dims, const float *scales, const char *mode, const char *coord,
                               const char *nearest)
{
    ts_graph *g = oc_graph(opset);
    int x = oc_input(g, "x", TS_F32, dims);
    int s = oc_const_f32(g, "scales", "4", scales, 0, 0);
    ts_attr a[3];
    int na = 0;
    a[na++] = A_STR("mode", mode);
    if (coord) a[na++] = A_STR("coordinate_transformation_mode", coord);
    if (nearest) a[na++] = A_STR("nearest_mode", nearest);
    if (opset < 11) {
        int in[2] = {x, s};
        return oc_node(g, "Resize", in, 2, a, 1, 1);
    }
    int roi = oc_const_f32(g, "roi", "0", NULL, 0, 0);
    int in[3] = {x, roi, s};
    return oc_node(g, "Resize", in, 3, a, na, 1);
}
static const float UP2[4] = {1, 1, 2, 2}, DOWN[4] = {1, 1, 0.5f, 0.6f}, UP3[4] = {1, 1, 3, 1.5f};
static ts_graph *resize_nearest_half_pixel(void) { return resize_scales(13, "1x2x3x4", UP2, "nearest", "half_pixel", "round_prefer_floor"); }
static ts_graph *resize_nearest_asym_floor(void) { return resize_scales(13, "1x2x3x4", UP3, "nearest", "asymmetric", "floor"); }
static ts_graph *resize_nearest_asym_ceil(void) { return resize_scales(11, "1x1x3x4", UP3, "nearest", "asymmetric", "ceil"); }
static ts_graph *resize_nearest_prefer_ceil(void) { return resize_scales(13, "1x1x3x4", UP3, "nearest", "half_pixel", "round_prefer_ceil"); }
static ts_graph *resize_nearest_align_corners(void) { return resize_scales(13, "1x1x3x4", UP2, "nearest", "align_corners", "round_prefer_floor"); }
static ts_graph *resize_nearest_tf_half_pixel(void) { return resize_scales(11, "1x1x3x4", UP3, "nearest", "tf_half_pixel_for_nn", "round_prefer_ceil"); }
static ts_graph *resize_nearest_down(void) { return resize_scales(13, "1x1x6x5", DOWN, "nearest", "half_pixel", "round_prefer_floor"); }
static ts_graph *resize_linear_half_pixel(void) { return resize_scales(13, "1x2x3x4", UP2, "linear", "half_pixel", NULL); }
static ts_graph *resize_linear_pytorch(void) { return resize_scales(13, "1x1x3x4", UP3, "linear", "pytorch_half_pixel", NULL); }
static ts_graph *resize_linear_align_corners(void) { return resize_scales(13, "1x1x3x4", UP3, "linear", "align_corners", NULL); }
static ts_graph *resize_linear_asymmetric(void) { return resize_scales(11, "1x1x3x4", UP2, "linear", "asymmetric", NULL); }
static ts_graph *resize_linear_down(void) { return resize_scales(13, "1x1x6x5", DOWN, "linear", "half_pixel", NULL); }
static ts_graph *resize_opset10_nearest(void) { return resize_scales(10, "1x1x3x4", UP2, "nearest", NULL, NULL); }
static ts_graph *resize_opset10_linear(void) { return resize_scales(10, "1x1x3x4", UP3, "linear", NULL, NULL); }
static ts_graph *resize_sizes_opset13(void)
{
    ts_graph *g = oc_graph(13);
    int in[4] = {oc_input(g, "x", TS_F32, "1x2x3x4"), -1, -1, CI64(g, "sizes", 1, 2, 5, 7)};
    ts_attr a[] = {A_STR("mode", "linear")};
    return oc_node(g, "Resize", in, 4, a, 1, 1);
}
static ts_graph *resize_axes_opset18(void)
{
    ts_graph *g = oc_graph(18);
    int in[4] = {oc_input(g, "x", TS_F32, "1x1x3x4"), -1, -1, CI64(g, "sizes", 6, 6)};
    ts_attr a[] = {A_STR("mode", "nearest"), A_INTS("axes", 2, 3), A_STR("keep_aspect_ratio_policy", "not_larger")};
    return oc_node(g, "Resize", in, 4, a, 3, 1);
}
/* tf_crop_and_resize: a box reaching past the input on both axes (those
 * outputs are extrapolation_value), in each interpolation mode */
static ts_graph *resize_crop(const char *mode)
{
    static const float roi[8] = {0, 0, 0.2f, -0.3f, 1, 1, 1.3f, 0.9f};
    ts_graph *g = oc_graph(13);
    int in[4] = {oc_input(g, "x", TS_F32, "1x2x5x6"), oc_const_f32(g, "roi", "8", roi, 0, 0), -1,
                 CI64(g, "sizes", 1, 2, 4, 7)};
    ts_attr a[] = {A_STR("mode", mode), A_STR("coordinate_transformation_mode", "tf_crop_and_resize"),
                   ts_attr_float("extrapolation_value", 2.5f)};
    return oc_node(g, "Resize", in, 4, a, 3, 1);
}
static ts_graph *resize_crop_linear(void) { return resize_crop("linear"); }
static ts_graph *resize_crop_nearest(void) { return resize_crop("nearest"); }
static ts_graph *resize_crop_cubic(void) { return resize_crop("cubic"); }
static ts_graph *upsample_opset9_nearest(void)
{
    ts_graph *g = oc_graph(9);
    int in[2] = {oc_input(g, "x", TS_F32, "1x2x2x3"), oc_const_f32(g, "scales", "4", UP2, 0, 0)};
    return oc_node(g, "Upsample", in, 2, NULL, 0, 1);
}
static ts_graph *upsample_opset9_linear(void)
{
    ts_graph *g = oc_graph(9);
    int in[2] = {oc_input(g, "x", TS_F32, "1x1x2x3"), oc_const_f32(g, "scales", "4", UP2, 0, 0)};
    ts_attr a[] = {A_STR("mode", "linear")};
    return oc_node(g, "Upsample", in, 2, a, 1, 1);
}

/* ------------------------------------------------------ Expand, Tile */
static ts_graph *expand_bidirectional(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "3x1"), CI64(g, "s", 2, 1, 4)};
    return oc_node(g, "Expand", in, 2, NULL, 0, 1);
}
static ts_graph *expand_smaller_shape(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "2x1x3"), CI64(g, "s", 4, 1)};
    return oc_node(g, "Expand", in, 2, NULL, 0, 1);
}
static ts_graph *tile(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "2x3"), CI64(g, "r", 2, 3)};
    return oc_node(g, "Tile", in, 2, NULL, 0, 1);
}

/* ------------------------------- operators added for ONNX's backend suite */
/* Constant int64 tensor of any shape (indices). */
static int ci64_shaped(ts_graph *g, const char *name, const char *dims, const int64_t *v)
{
    ts_error e = {0};
    ts_shape s = oc_shape(dims);
    ts_tensor *t = ts_tensor_new(TS_I64, &s, &e);
    oc_check(t != NULL, &e);
    for (int64_t i = 0; i < ts_tensor_numel(t); i++) ((int64_t *)t->data)[i] = v[i];
    int id = ts_graph_add_constant(g, name, t, &e);
    ts_tensor_unref(t);
    oc_check(id >= 0, &e);
    return id;
}
static ts_graph *topk_largest(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "3x5"), CI64(g, "k", 2)};
    return oc_node(g, "TopK", in, 2, NULL, 0, 2);
}
static ts_graph *topk_smallest_axis0(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "4x3"), CI64(g, "k", 3)};
    ts_attr a[] = {A_INT("axis", 0), A_INT("largest", 0)};
    return oc_node(g, "TopK", in, 2, a, 2, 2);
}
static ts_graph *gathernd_batch(void)
{
    ts_graph *g = oc_graph(13);
    /* batch 0 takes x[0][2][1], batch 1 x[1][0][3] */
    int in[2] = {oc_input(g, "x", TS_F32, "2x3x4"), ci64_shaped(g, "i", "2x2", (const int64_t[]){2, 1, 0, 3})};
    ts_attr a[] = {A_INT("batch_dims", 1)};
    return oc_node(g, "GatherND", in, 2, a, 1, 1);
}
static ts_graph *scatter_elements_axis1(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {oc_input(g, "x", TS_F32, "3x4"), ci64_shaped(g, "i", "1x2", (const int64_t[]){-4, 2}),
                 oc_input(g, "u", TS_F32, "1x2")};
    ts_attr a[] = {A_INT("axis", 1)};
    return oc_node(g, "ScatterElements", in, 3, a, 1, 1);
}
static ts_graph *scatternd_rows(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {oc_input(g, "x", TS_F32, "4x3"), ci64_shaped(g, "i", "2x1", (const int64_t[]){3, 0}),
                 oc_input(g, "u", TS_F32, "2x3")};
    return oc_node(g, "ScatterND", in, 3, NULL, 0, 1);
}
static ts_graph *einsum_batch_matmul(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "a", TS_F32, "2x3x4"), oc_input(g, "b", TS_F32, "2x4x5")};
    ts_attr a[] = {A_STR("equation", "bij,bjk->bik")};
    return oc_node(g, "Einsum", in, 2, a, 1, 1);
}
static ts_graph *einsum_ellipsis_sum(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4");
    ts_attr a[] = {A_STR("equation", "...ij->...j")};
    return oc_node(g, "Einsum", &x, 1, a, 1, 1);
}
static ts_graph *grid_sample_bilinear(void)
{
    ts_graph *g = oc_graph(16);
    int in[2] = {oc_input(g, "x", TS_F32, "1x2x4x5"), oc_input(g, "grid", TS_F32, "1x3x6x2")};
    return oc_node(g, "GridSample", in, 2, NULL, 0, 1);
}
static ts_graph *grid_sample_nearest_border_aligned(void)
{
    ts_graph *g = oc_graph(16);
    int in[2] = {oc_input(g, "x", TS_F32, "2x1x3x3"), oc_input(g, "grid", TS_F32, "2x2x2x2")};
    ts_attr a[] = {A_STR("mode", "nearest"), A_STR("padding_mode", "border"), A_INT("align_corners", 1)};
    return oc_node(g, "GridSample", in, 2, a, 3, 1);
}
static ts_graph *grid_sample_bicubic_reflection(void)
{
    ts_graph *g = oc_graph(16);
    int in[2] = {oc_input(g, "x", TS_F32, "1x1x4x4"), oc_input(g, "grid", TS_F32, "1x3x3x2")};
    ts_attr a[] = {A_STR("mode", "bicubic"), A_STR("padding_mode", "reflection")};
    return oc_node(g, "GridSample", in, 2, a, 2, 1);
}
static ts_graph *instance_norm(void)
{
    ts_graph *g = oc_graph(13);
    int in[3] = {oc_input(g, "x", TS_F32, "2x3x4x5"), oc_const_f32(g, "s", "3", NULL, 0.5, 2),
                 oc_const_f32(g, "b", "3", NULL, -1, 1)};
    return oc_node(g, "InstanceNormalization", in, 3, NULL, 0, 1);
}
static ts_graph *lrn_size3(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "1x5x3x3");
    ts_attr a[] = {A_INT("size", 3), ts_attr_float("alpha", 0.01)};
    return oc_node(g, "LRN", &x, 1, a, 2, 1);
}
static ts_graph *mvn_default(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "2x3x4x2");
    return oc_node(g, "MeanVarianceNormalization", &x, 1, NULL, 0, 1);
}
static ts_graph *det_batch(void)
{
    ts_graph *g = oc_graph(13);
    int x = oc_input(g, "x", TS_F32, "3x4x4");
    return oc_node(g, "Det", &x, 1, NULL, 0, 1);
}
static ts_graph *reverse_sequence_batch0(void)
{
    ts_graph *g = oc_graph(13);
    int in[2] = {oc_input(g, "x", TS_F32, "3x4x2"), CI64(g, "l", 4, 1, 2)};
    ts_attr a[] = {A_INT("batch_axis", 0), A_INT("time_axis", 1)};
    return oc_node(g, "ReverseSequence", in, 2, a, 2, 1);
}
static ts_graph *gru_bidirectional(void)
{
    ts_graph *g = oc_graph(14);
    int in[4] = {oc_input(g, "x", TS_F32, "3x2x4"), oc_const_f32(g, "w", "2x15x4", NULL, -0.5, 0.5),
                 oc_const_f32(g, "r", "2x15x5", NULL, -0.5, 0.5), oc_const_f32(g, "b", "2x30", NULL, -0.5, 0.5)};
    ts_attr a[] = {A_INT("hidden_size", 5), A_STR("direction", "bidirectional"), A_INT("linear_before_reset", 1)};
    return oc_node(g, "GRU", in, 4, a, 3, 2);
}
/* ORT has no layout 1 (batch first) LSTM; the suite's lstm_batchwise covers it */
static ts_graph *lstm_reverse(void)
{
    ts_graph *g = oc_graph(14);
    int in[3] = {oc_input(g, "x", TS_F32, "2x3x4"), oc_const_f32(g, "w", "1x12x4", NULL, -0.5, 0.5),
                 oc_const_f32(g, "r", "1x12x3", NULL, -0.5, 0.5)};
    ts_attr a[] = {A_INT("hidden_size", 3), A_STR("direction", "reverse")};
    return oc_node(g, "LSTM", in, 3, a, 2, 3);
}
static ts_graph *rnn_clip(void)
{
    ts_graph *g = oc_graph(14);
    int in[3] = {oc_input(g, "x", TS_F32, "4x1x3"), oc_const_f32(g, "w", "1x2x3", NULL, -1, 1),
                 oc_const_f32(g, "r", "1x2x2", NULL, -1, 1)};
    ts_attr a[] = {A_INT("hidden_size", 2), ts_attr_float("clip", 0.7)};
    return oc_node(g, "RNN", in, 3, a, 2, 2);
}

#define C(fn) {#fn, fn, 0, 0, 0, 0}

const opcase opcases_tensor[] = {
    C(concat_axis1), C(concat_neg_axis), C(concat_opset11),
    C(split_attr_opset11), C(split_input_opset13), C(split_equal_neg_axis), C(split_num_outputs_opset18),
    C(slice_attr_opset9), C(slice_inputs_steps), C(slice_negative_step), C(slice_no_axes_opset10),
    C(reshape_minus_one), C(reshape_zero_copies),
    C(flatten_default), C(flatten_neg_axis), C(flatten_axis0),
    C(squeeze_attr_opset11), C(squeeze_input_opset13), C(squeeze_all),
    C(unsqueeze_attr_opset11), C(unsqueeze_input_opset13),
    C(transpose_default), C(transpose_perm),
    C(gather_axis0), C(gather_axis1_int32_2d), C(gather_scalar_neg_axis),
    C(shape_full), C(shape_start_end_opset15),
    C(constant_of_shape_default), C(constant_of_shape_value), C(constant_of_shape_int64),
    C(cast_f32_to_i64), C(cast_f32_to_i32), C(cast_f32_to_f64), C(cast_f32_to_bool), C(cast_i64_to_f32),
    C(identity), C(dropout_opset13_mask), C(dropout_opset11_ratio),
    C(pad_attr_opset9), C(pad_constant_value_input), C(pad_reflect), C(pad_edge), C(pad_negative_crop),
    C(pad_axes_opset18),
    C(resize_nearest_half_pixel), C(resize_nearest_asym_floor), C(resize_nearest_asym_ceil),
    C(resize_nearest_prefer_ceil), C(resize_nearest_align_corners), C(resize_nearest_tf_half_pixel),
    C(resize_nearest_down), C(resize_linear_half_pixel), C(resize_linear_pytorch), C(resize_linear_align_corners),
    C(resize_linear_asymmetric), C(resize_linear_down), C(resize_opset10_nearest), C(resize_opset10_linear),
    C(resize_sizes_opset13), C(resize_axes_opset18), C(resize_crop_linear), C(resize_crop_nearest),
    C(resize_crop_cubic),
    C(upsample_opset9_nearest), C(upsample_opset9_linear),
    C(expand_bidirectional), C(expand_smaller_shape), C(tile),
    C(topk_largest), C(topk_smallest_axis0), C(gathernd_batch), C(scatter_elements_axis1), C(scatternd_rows),
    C(einsum_batch_matmul), C(einsum_ellipsis_sum), C(grid_sample_bilinear), C(grid_sample_nearest_border_aligned),
    C(grid_sample_bicubic_reflection), C(instance_norm), C(lrn_size3), C(mvn_default), C(det_batch),
    C(reverse_sequence_batch0), C(gru_bidirectional), C(lstm_reverse), C(rnn_clip),
    {0},
};
