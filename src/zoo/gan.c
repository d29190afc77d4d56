/* DCGAN and InfoGAN generators, EinNet's ConvTranspose benchmarks.  Both are
 * the DCGAN shape: a latent vector as an N x Z x 1 x 1 image, a 4x4
 * stride-1 ConvTranspose to 4x4 maps, then 4x4 stride-2 pad-1
 * ConvTransposes doubling the resolution to 64x64, BatchNorm + ReLU between,
 * Tanh on the 3-channel image.  ConvTransposes have no bias (BN follows). */
#include <math.h>
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* zb_conv_transpose bounds weights by the kernel's full fan-in, but a
 * stride-s ConvTranspose feeds each output only Cin*k*k/s^2 taps (Cin on a
 * 1x1 input), so that bound would shrink the signal 4x per layer.  Bound
 * by the taps that reach an output, with the ReLU gain. */
static int deconv(zb *b, const char *name, int x, int cout, int k, int stride, int pad)
{
    const ts_shape *xs = zb_shape(b, x);
    int64_t cin = xs->dims[1], wd[4] = {cin, cout, k, k};
    double taps = xs->dims[2] == 1 ? (double)cin : (double)(cin * k * k) / (stride * stride);
    int ins[2] = {x, zb_weight(b, zb_name(b, "%s.weight", name), 4, wd, sqrt(6.0 / taps))};
    int64_t kk[2] = {k, k}, ss[2] = {stride, stride}, pp[4] = {pad, pad, pad, pad};
    ts_attr a[3] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", ss, 2), ts_attr_ints("pads", pp, 4)};
    return zb_node(b, "ConvTranspose", name, ins, 2, a, 3);
}

typedef struct gan_cfg {
    const char *name, *input;
    int z;        /* latent size */
    int width[4]; /* channels at 4x4, 8x8, 16x16, 32x32 */
} gan_cfg;

static ts_status build(const gan_cfg *c, const ts_zoo_opts *o, ts_graph **out, ts_error *err)
{
    zb b;
    zb_begin(&b, c->name, o, err);
    int64_t in_dims[4] = {zoo_batch(o), c->z, 1, 1};
    int x = zb_input(&b, c->input, 4, in_dims);
    for (int i = 0; i < 4; i++) {
        x = deconv(&b, zb_name(&b, "main.%d.deconv", i), x, c->width[i], 4, i ? 2 : 1, i ? 1 : 0);
        x = zb_bn(&b, zb_name(&b, "main.%d.bn", i), x);
        x = zb_relu(&b, zb_name(&b, "main.%d.relu", i), x);
    }
    x = deconv(&b, "main.4.deconv", x, 3, 4, 2, 1);
    int y = zb_unary(&b, "Tanh", "output", x);
    return zb_finish(&b, &y, 1, out);
}

ZOO_BUILDER(ts_zoo_dcgan)
{
    /* Radford et al.'s widths (1024 at 4x4); EinNet's copy of the PyTorch
     * example halves them (ngf = 64). */
    static const gan_cfg c = {"dcgan", "z", 100, {1024, 512, 256, 128}};
    return build(&c, o, out, err);
}

ZOO_BUILDER(ts_zoo_infogan)
{
    /* EinNet's InfoGAN generator: the CelebA latent of Chen et al. (128
     * noise + 10 ten-way categorical codes = 228) and their 448-256-128-64
     * widths, in the DCGAN layout above (the paper's CelebA net starts with
     * an FC to 2x2x448 and stops at 32x32). */
    static const gan_cfg c = {"infogan", "z", 228, {448, 256, 128, 64}};
    return build(&c, o, out, err);
}
