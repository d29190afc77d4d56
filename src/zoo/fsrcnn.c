/* FSRCNN (Dong, Loy and Tang, ECCV 2016), EinNet's super-resolution
 * benchmark, FSRCNN(56, 12, 4) for x2 upscaling of a one-channel (luminance)
 * image: 5x5 feature extraction to d = 56, 1x1 shrinking to s = 12, m = 4
 * 3x3 mapping layers, 1x1 expanding back to 56, PReLU after each, and a 9x9
 * stride-2 deconvolution to the high-resolution image. */
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* "Same" convolution with bias + per-channel PReLU (slope shaped C x 1 x 1,
 * as PyTorch exports nn.PReLU(C)).  No BatchNorm, so weights take the ReLU
 * gain (scale 6, see zb_conv_spec) to keep the signal's power through 7
 * layers; slopes around the paper's initial 0.25. */
static int conv_prelu(zb *b, const char *name_, int x, int cout, int k)
{
    ZB_KEEP(name, name_);
    int64_t sd[3] = {cout, 1, 1};
    zb_conv_spec s = {.kh = k, .kw = k, .bias = true, .scale = 6.0};
    int y = zb_conv_same(b, zb_name(b, "%s.conv", name), name, x, cout, &s);
    int p[2] = {y, zb_uniform(b, zb_name(b, "%s.slope", name), 3, sd, 0.1, 0.4)};
    return zb_node(b, "PRelu", name, p, 2, NULL, 0);
}

ZOO_BUILDER(ts_zoo_fsrcnn)
{
    enum { D = 56, S = 12, M = 4, SCALE = 2, K = 9 };
    zb b;
    zb_begin(&b, "fsrcnn", o, err);
    int64_t in_dims[4] = {zoo_batch(o), 1, 256, 256};
    int x = zb_input(&b, "input", 4, in_dims);
    x = conv_prelu(&b, "feature", x, D, 5);
    x = conv_prelu(&b, "shrink", x, S, 1);
    for (int i = 0; i < M; i++) x = conv_prelu(&b, zb_name(&b, "map.%d", i), x, S, 3);
    x = conv_prelu(&b, "expand", x, D, 1);
    /* Deconvolution: pads 4 and output_padding 1 make the output exactly
     * SCALE x the input ((H-1)*2 - 8 + 9 + 1 = 2H).  No activation follows,
     * so gain 1 (scale 3). */
    int y = zb_conv_transpose(&b, "deconv", x, 1, K, SCALE, K / 2, SCALE - 1, true, 3.0);
    return zb_finish(&b, &y, 1, out);
}
