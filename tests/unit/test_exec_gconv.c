/* vec.gconv (src/vec/vec_gconv.c): grouped convolutions with 4 or 8
 * channels per group on a channels-last input (a 1x1 conv in front makes
 * it so, as in ResNeXt), with the activations after them.  Every case runs
 * on 1 and 2 threads against the reference interpreter.  Weights are
 * random and differ per (output, input) pair, so a rotation that pairs an
 * input lane with the wrong output channel fails; images are odd-sized and
 * non-square (blocks of 4 and 2 pixels plus pixels one by one at the
 * borders), at least 28 x 28 outputs (the kernel's minimum); channels span
 * several 16-wide vectors and weight chunks. */
#include "exec_check.h"
#include "tsopt.h"

static uint64_t rng = 4242;

#define I(...) (int64_t[]){__VA_ARGS__}

static int cst(ts_graph *g, const char *dims, double lo, double hi) { return xt_const_random(g, dims, lo, hi, &rng); }

typedef enum { ACT_NONE, ACT_RELU, ACT_BN_CLIP } act_kind;

/* x (N x C0 x H x W) -> 1x1 conv to C -> grouped KxK conv of C / cg groups
 * (attrs) -> act -> 1x1 conv.  Returns the number of vec.gconv steps, after
 * checking both thread counts. */
static int gc_case(const char *x, int C0, int C, int cg, int K, const ts_attr *at, int na, act_kind act)
{
    ts_graph *g = ts_graph_new("t", 17);
    char w1[32], w2[32], wg[32], b[16];
    snprintf(w1, sizeof w1, "%dx%dx1x1", C, C0);
    snprintf(w2, sizeof w2, "%dx%dx1x1", C, C);
    snprintf(wg, sizeof wg, "%dx%dx%dx%d", C, cg, K, K);
    snprintf(b, sizeof b, "%d", C);
    int y = xt_node(g, "Conv", (int[]){xt_input(g, "x", x), cst(g, w1, -0.5, 0.5)}, 2, NULL, 0);
    ts_attr all[8];
    if (na) memcpy(all, at, sizeof *at * (size_t)na); /* at may be NULL (no attributes) */
    all[na] = ts_attr_int("group", C / cg);
    y = xt_node(g, "Conv", (int[]){y, cst(g, wg, -0.5, 0.5), cst(g, b, -0.5, 0.5)}, 3, all, na + 1);
    if (act == ACT_RELU) {
        y = xt_node(g, "Relu", &y, 1, NULL, 0);
    } else if (act == ACT_BN_CLIP) {
        y = xt_node(g, "BatchNormalization",
                    (int[]){y, cst(g, b, 0.5, 1.5), cst(g, b, -1, 1), cst(g, b, -1, 1), cst(g, b, 0.5, 2)}, 5, NULL, 0);
        y = xt_node(g, "Clip", (int[]){y, xt_const_values(g, TS_F32, "", (double[]){0}, 1),
                                       xt_const_values(g, TS_F32, "", (double[]){6}, 1)},
                    3, NULL, 0);
    }
    y = xt_node(g, "Conv", (int[]){y, cst(g, w2, -0.5, 0.5)}, 2, NULL, 0);
    xt_output(g, y);
    int got = xt_kernel_steps_1_2(g, "vec.gconv", &rng);
    ts_graph_free(g);
    return got;
}

/* ResNeXt's first stage in small: 4 channels per group, 3x3, pads 1, ReLU. */
Test(exec_gconv, cg4_3x3_relu)
{
    ts_attr at[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(gc_case("1x5x29x31", 5, 48, 4, 3, at, 1, ACT_RELU), 1);
}

/* 8 channels per group, stride 2 (ResNeXt's stage entry), BatchNormalization
 * folded into the weights, ReLU6; 272 channels: more than one weight chunk. */
Test(exec_gconv, cg8_s2_bn_relu6)
{
    ts_attr at[] = {ts_attr_ints("strides", I(2, 2), 2), ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(gc_case("1x6x61x57", 6, 272, 8, 3, at, 2, ACT_BN_CLIP), 1);
}

/* 5x5, unequal strides, dilation 2, asymmetric pads, batch 2, no activation. */
Test(exec_gconv, cg4_5x5_strides_dilated_batch2)
{
    ts_attr at[] = {ts_attr_ints("strides", I(1, 2), 2), ts_attr_ints("pads", I(0, 2, 3, 1), 4),
                    ts_attr_ints("dilations", I(2, 2), 2)};
    cr_assert_eq(gc_case("2x3x48x70", 3, 32, 4, 5, at, 3, ACT_NONE), 1);
}

/* 8 per group, 1x1 grouped conv (no taps outside the image). */
Test(exec_gconv, cg8_1x1)
{
    cr_assert_eq(gc_case("1x4x29x31", 4, 64, 8, 1, NULL, 0, ACT_RELU), 1);
}

/* Left to oneDNN: 16 or 2 channels per group, channels not a multiple of
 * 16, an output of fewer than 28 x 28 pixels (GC_MIN_PIXELS). */
Test(exec_gconv, declines_other_groups_and_small_images)
{
    ts_attr at[] = {ts_attr_ints("pads", I(1, 1, 1, 1), 4)};
    cr_assert_eq(gc_case("1x5x29x29", 5, 64, 16, 3, at, 1, ACT_RELU), 0);
    cr_assert_eq(gc_case("1x5x29x29", 5, 64, 2, 3, at, 1, ACT_RELU), 0);
    cr_assert_eq(gc_case("1x5x29x29", 5, 40, 4, 3, at, 1, ACT_RELU), 0);
    cr_assert_eq(gc_case("1x5x19x23", 5, 48, 4, 3, at, 1, ACT_RELU), 0);
}
