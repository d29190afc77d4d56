/* dnnl.patch (src/dnnl/dnnl_patch.c): a convolution whose stride equals its
 * kernel, unpadded, on few input channels, computed as its patches copied
 * into rows times the weight.  Every case runs on 1 and 2 threads against
 * the reference interpreter: images that are no whole number of patches
 * (the last rows and columns are read by no patch), non-square patches,
 * batch 2, no bias, an input that is not the graph's own (a Relu before),
 * and the output read by a consumer that needs it plain. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 9191;

#define I(...) (int64_t[]){__VA_ARGS__}

static int cst(ts_graph *g, const char *dims) { return xt_const_random(g, dims, -0.5, 0.5, &rng); }

/* x -> [Relu] -> Conv(W O x C x KH x KW, [bias], attrs) -> Flatten
 * (a consumer of the plain layout).  Returns the dnnl.patch steps. */
static int pt_case(const char *x, const char *w, bool bias, bool relu, const ts_attr *at, int na)
{
    ts_graph *g = ts_graph_new("t", 17);
    int y = xt_input(g, "x", x);
    if (relu) y = xt_node(g, "Relu", &y, 1, NULL, 0);
    ts_shape ws = xt_shape(w);
    char b[16];
    snprintf(b, sizeof b, "%lld", (long long)ws.dims[0]);
    int ins[3] = {y, cst(g, w), bias ? cst(g, b) : -1};
    y = xt_node(g, "Conv", ins, bias ? 3 : 2, at, na);
    y = xt_node(g, "Flatten", &y, 1, NULL, 0);
    xt_output(g, y);
    int got = xt_kernel_steps_1_2(g, "dnnl.patch", &rng);
    ts_graph_free(g);
    return got;
}

/* ViT's patch embedding in small: 3 x 16 x 16 patches, 64 channels out;
 * 70 x 50 leaves 6 rows and 2 columns outside every patch. */
Test(exec_patch, vit_like_partial_image)
{
    ts_attr at[] = {ts_attr_ints("strides", I(16, 16), 2)};
    cr_assert_eq(pt_case("1x3x70x50", "64x3x16x16", true, false, at, 1), 1);
}

/* 8 x 12 patches of 4 channels, batch 2, no bias, after a Relu. */
Test(exec_patch, rect_patches_batch2_no_bias)
{
    ts_attr at[] = {ts_attr_ints("strides", I(8, 12), 2), ts_attr_ints("kernel_shape", I(8, 12), 2)};
    cr_assert_eq(pt_case("2x4x33x49", "40x4x8x12", false, true, at, 2), 1);
}

/* Left to dnnl.conv: overlapping windows, padding, 16 input channels or
 * more, and a short reduction (a 4x4 stem: 3 x 4 x 4 = 48 values). */
Test(exec_patch, declines)
{
    ts_attr s8[] = {ts_attr_ints("strides", I(8, 8), 2)};
    cr_assert_eq(pt_case("1x3x64x64", "32x3x16x16", true, false, s8, 1), 0);
    ts_attr pad[] = {ts_attr_ints("strides", I(16, 16), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(pt_case("1x3x64x64", "32x3x16x16", true, false, pad, 2), 0);
    ts_attr s4[] = {ts_attr_ints("strides", I(4, 4), 2)};
    cr_assert_eq(pt_case("1x16x32x32", "32x16x4x4", true, false, s4, 1), 0);
    cr_assert_eq(pt_case("1x3x32x32", "32x3x4x4", true, false, s4, 1), 0);
}
