/* FSRCNN (Dong, Loy and Tang, ECCV 2016), EinNet's super-resolution
 * benchmark, FSRCNN(56, 12, 4) for x2 upscaling of a one-channel (luminance)
 * image: 5x5 feature extraction to d = 56, 1x1 shrinking to s = 12, m = 4
 * 3x3 mapping layers, 1x1 expanding back to 56, PReLU after each, and a 9x9
 * stride-2 deconvolution to the high-resolution image. */
#include <math.h>
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* Convolution with bias + per-channel PReLU (slope shaped C x 1 x 1, as
 * PyTorch exports nn.PReLU(C)).  No BatchNorm, so weights take the ReLU
 * gain (bound sqrt(6/fan_in)) to keep the signal's power through 7 layers;
 * slopes around the paper's initial 0.25. */
static int conv_prelu(zb *b, const char *name_, int x, int cout, int k)
{
    ZB_KEEP(name, name_);
    int64_t cin = zb_shape(b, x)->dims[1], wd[4] = {cout, cin, k, k}, c = cout, sd[3] = {cout, 1, 1};
    int64_t kk[2] = {k, k}, pads[4] = {k / 2, k / 2, k / 2, k / 2};
    int ins[3] = {x, zb_weight(b, zb_name(b, "%s.weight", name), 4, wd, sqrt(6.0 / (double)(cin * k * k))),
                  zb_uniform(b, zb_name(b, "%s.bias", name), 1, &c, -0.1, 0.1)};
    ts_attr a[2] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("pads", pads, 4)};
    int y = zb_node(b, "Conv", zb_name(b, "%s.conv", name), ins, 3, a, 2);
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
     * SCALE x the input ((H-1)*2 - 8 + 9 + 1 = 2H).  Each output sees
     * D*K*K/SCALE^2 taps; no activation follows, so gain 1. */
    int64_t wd[4] = {D, 1, K, K}, one = 1, kk[2] = {K, K}, ss[2] = {SCALE, SCALE}, pp[4] = {K / 2, K / 2, K / 2, K / 2},
            op[2] = {SCALE - 1, SCALE - 1};
    int ins[3] = {x, zb_weight(&b, "deconv.weight", 4, wd, sqrt(3.0 * SCALE * SCALE / (D * K * K))),
                  zb_uniform(&b, "deconv.bias", 1, &one, -0.1, 0.1)};
    ts_attr a[4] = {ts_attr_ints("kernel_shape", kk, 2), ts_attr_ints("strides", ss, 2), ts_attr_ints("pads", pp, 4),
                    ts_attr_ints("output_padding", op, 2)};
    int y = zb_node(&b, "ConvTranspose", "deconv", ins, 3, a, 4);
    return zb_finish(&b, &y, 1, out);
}
