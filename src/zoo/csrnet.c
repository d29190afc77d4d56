/* CSRNet (Li et al., CVPR 2018), the crowd-counting network PET benchmarks:
 * VGG-16's first ten 3x3 convolutions with three max-pools as the front end,
 * six 3x3 convolutions with dilation 2 as the back end, and a 1x1
 * convolution to a one-channel density map.  Convolutions carry biases and
 * ReLU, no BatchNorm, as in the paper. */
#include "zoo/zb.h"
#include "zoo/zoo.h"

/* 3x3 (or 1x1) "same" convolution with bias.  Without BatchNorm nothing
 * rescales the activations, so weights use the ReLU gain (scale 6, see
 * zb_conv_spec): with zb_conv's bound the signal would halve in power at
 * each of the 16 ReLU layers. */
static int conv(zb *b, const char *name_, int x, int cout, int k, int dil, bool relu)
{
    ZB_KEEP(name, name_);
    zb_conv_spec s = {.kh = k, .kw = k, .dil = dil, .bias = true, .scale = 6.0};
    int y = zb_conv_same(b, relu ? zb_name(b, "%s.conv", name) : name, name, x, cout, &s);
    return relu ? zb_relu(b, name, y) : y;
}

ZOO_BUILDER(ts_zoo_csrnet)
{
    /* VGG-16 configuration up to conv4_3; 0 marks a 2x2 max-pool. */
    static const int front[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512};
    static const int back[] = {512, 512, 512, 256, 128, 64};
    zb b;
    zb_begin(&b, "csrnet", o, err);
    int64_t in_dims[4] = {zoo_batch(o), 3, 224, 224};
    int x = zb_input(&b, "input", 4, in_dims);
    int block = 1, idx = 1;
    for (size_t i = 0; i < sizeof front / sizeof front[0]; i++) {
        if (front[i]) {
            x = conv(&b, zb_name(&b, "frontend.conv%d_%d", block, idx++), x, front[i], 3, 1, true);
        } else {
            x = zb_maxpool(&b, zb_name(&b, "frontend.pool%d", block), x, 2, 2, 0);
            block++, idx = 1;
        }
    }
    for (size_t i = 0; i < sizeof back / sizeof back[0]; i++)
        x = conv(&b, zb_name(&b, "backend.%zu", i + 1), x, back[i], 3, 2, true);
    int y = conv(&b, "output_layer", x, 1, 1, 1, false);
    return zb_finish(&b, &y, 1, out);
}
