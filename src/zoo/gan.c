/* DCGAN and InfoGAN generators, EinNet's ConvTranspose benchmarks.  Both are
 * the DCGAN shape: a latent vector as an N x Z x 1 x 1 image, a 4x4
 * stride-1 ConvTranspose to 4x4 maps, then 4x4 stride-2 pad-1
 * ConvTransposes doubling the resolution to 64x64, BatchNorm + ReLU between,
 * Tanh on the 3-channel image.  ConvTransposes have no bias (BN follows). */
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* No bias (BatchNorm follows); the ReLU gain (scale 6, see zb_conv_spec). */
static int deconv(zb *b, const char *name, int x, int cout, int k, int stride, int pad)
{
    return zb_conv_transpose(b, name, x, cout, k, stride, pad, 0, false, 6.0);
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
