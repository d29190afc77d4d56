/* Global Convolutional Network ("Large Kernel Matters", Peng et al., CVPR
 * 2017), as EinNet benchmarks it (its copy of yassouali/pytorch-segmentation's
 * GCN(21) at 224x224): a ResNet-50 whose last two stages are the paper's
 * ResNet-GCN blocks (separable k x 1 / 1 x k convolutions in place of the
 * 3x3), a GCN head (k x 1 then 1 x k, plus 1 x k then k x 1) and a Boundary
 * Refinement block on each stage's output, bilinear upsampling and stage-wise
 * sums back to the input resolution, and a final 1x1 convolution to 21 PASCAL
 * VOC classes.  The separable large kernels are the point of the benchmark. */
#include "zoo/zb.h"
#include "zoo/zoo.h"

enum { CLASSES = 21, HEAD_K = 11 };
/* Weight scales (zb_conv_spec: bound sqrt(scale / fan_in), gain
 * sqrt(scale / 3)): plain convs take 3 (gain 1); the last conv of a
 * ResNet-GCN block's branch 3/16 (gain 1/4), a refinement block's second
 * conv 3/4 (gain 1/2).  The GCN head's second convs take 3/2 (gain 1/sqrt 2)
 * so that the sum of its two branches keeps its input's scale. */
#define PLAIN_SCALE 3.0
#define RES_SCALE (3.0 / 16)
#define BR_SCALE (3.0 / 4)
#define HEAD2_SCALE 1.5

/* "Same" convolution with strides written.  The scales below 3 stand in for
 * what training does and random BatchNorm statistics do not: keep residual
 * branches small relative to their shortcut.  Inference BN here is a fixed
 * affine map, so a branch scales with its input, and 12 ResNet-GCN blocks
 * with no ReLU after the sum, then 9 refinement blocks, would otherwise grow
 * the scores to the hundreds (there float32 cancellation breaks the 1e-3
 * comparison with ONNX Runtime). */
static int conv_g(zb *b, const char *name, int x, int cout, int kh, int kw, int stride, bool bias, double scale)
{
    zb_conv_spec s = {.kh = kh, .kw = kw, .stride = stride, .bias = bias, .scale = scale};
    return zb_conv_same(b, name, NULL, x, cout, &s);
}

static int conv_bn(zb *b, const char *name_, int x, int cout, int kh, int kw, int stride, bool bias, bool relu,
                   double scale)
{
    ZB_KEEP(name, name_);
    int y = conv_g(b, zb_name(b, "%s.conv", name), x, cout, kh, kw, stride, bias, scale);
    y = zb_bn(b, zb_name(b, "%s.bn", name), y);
    return relu ? zb_relu(b, zb_name(b, "%s.relu", name), y) : y;
}

/* torchvision ResNet-50 bottleneck (stride on the 3x3). */
static int bottleneck(zb *b, const char *name_, int x, int width, int cout, int stride)
{
    ZB_KEEP(name, name_);
    int y = conv_bn(b, zb_name(b, "%s.1", name), x, width, 1, 1, 1, false, true, PLAIN_SCALE);
    y = conv_bn(b, zb_name(b, "%s.2", name), y, width, 3, 3, stride, false, true, PLAIN_SCALE);
    y = conv_bn(b, zb_name(b, "%s.3", name), y, cout, 1, 1, 1, false, false, PLAIN_SCALE);
    if (stride != 1 || zb_shape(b, x)->dims[1] != cout)
        x = conv_bn(b, zb_name(b, "%s.down", name), x, cout, 1, 1, stride, false, false, PLAIN_SCALE);
    return zb_relu(b, zb_name(b, "%s.out", name), zb_binary(b, "Add", zb_name(b, "%s.add", name), y, x));
}

/* The paper's ResNet-GCN block (its Fig. 5 B) in the reference code's form:
 * two branches, k x 1 then 1 x k and 1 x k then k x 1, each conv-BN-ReLU,
 * summed; a strided 1x1 conv + BN to the block's width; the shortcut added
 * with no ReLU after the sum (as that code has it). */
static int gcn_bottleneck(zb *b, const char *name_, int x, int k, int width, int cout, int stride)
{
    ZB_KEEP(name, name_);
    int l = conv_bn(b, zb_name(b, "%s.11", name), x, width, k, 1, 1, false, true, PLAIN_SCALE);
    l = conv_bn(b, zb_name(b, "%s.12", name), l, width, 1, k, 1, false, true, PLAIN_SCALE);
    int r = conv_bn(b, zb_name(b, "%s.21", name), x, width, 1, k, 1, false, true, PLAIN_SCALE);
    r = conv_bn(b, zb_name(b, "%s.22", name), r, width, k, 1, 1, false, true, PLAIN_SCALE);
    int y = zb_binary(b, "Add", zb_name(b, "%s.gcn", name), l, r);
    y = conv_bn(b, zb_name(b, "%s.1x1", name), y, cout, 1, 1, stride, false, false, RES_SCALE);
    if (stride != 1 || zb_shape(b, x)->dims[1] != cout) /* this shortcut conv has a bias in that code */
        x = conv_bn(b, zb_name(b, "%s.down", name), x, cout, 1, 1, stride, true, false, PLAIN_SCALE);
    return zb_binary(b, "Add", name, y, x);
}

/* GCN head: large separable kernels to class scores, no nonlinearity. */
static int gcn_head(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int l = conv_g(b, zb_name(b, "%s.conv11", name), x, CLASSES, HEAD_K, 1, 1, true, PLAIN_SCALE);
    l = conv_g(b, zb_name(b, "%s.conv12", name), l, CLASSES, 1, HEAD_K, 1, true, HEAD2_SCALE);
    int r = conv_g(b, zb_name(b, "%s.conv21", name), x, CLASSES, 1, HEAD_K, 1, true, PLAIN_SCALE);
    r = conv_g(b, zb_name(b, "%s.conv22", name), r, CLASSES, HEAD_K, 1, 1, true, HEAD2_SCALE);
    return zb_binary(b, "Add", name, l, r);
}

/* Boundary Refinement: x + conv3x3(relu(conv3x3(x))). */
static int br(zb *b, const char *name_, int x)
{
    ZB_KEEP(name, name_);
    int y = conv_g(b, zb_name(b, "%s.conv1", name), x, CLASSES, 3, 3, 1, true, PLAIN_SCALE);
    y = zb_relu(b, zb_name(b, "%s.relu", name), y);
    y = conv_g(b, zb_name(b, "%s.conv2", name), y, CLASSES, 3, 3, 1, true, BR_SCALE);
    return zb_binary(b, "Add", name, y, x);
}

/* F.interpolate(mode='bilinear', align_corners=True) as PyTorch exports it:
 * Resize with the target sizes (roi and scales absent). */
static int upsample(zb *b, const char *name_, int x, int64_t h, int64_t w)
{
    ZB_KEEP(name, name_);
    const ts_shape *xs = zb_shape(b, x);
    int64_t sizes[4] = {xs->dims[0], xs->dims[1], h, w};
    int ins[4] = {x, -1, -1, zb_const_ints(b, zb_name(b, "%s.sizes", name), 4, sizes)};
    ts_attr a[2] = {ts_attr_string("mode", "linear"), ts_attr_string("coordinate_transformation_mode", "align_corners")};
    return zb_node(b, "Resize", name, ins, 4, a, 2);
}

ZOO_BUILDER(ts_zoo_gcn)
{
    zb b;
    zb_begin(&b, "gcn", o, err);
    const int64_t H = 224;
    int64_t in_dims[4] = {zoo_batch(o), 3, H, H};
    int x = zb_input(&b, "input", 4, in_dims);
    x = conv_bn(&b, "stem", x, 64, 7, 7, 2, false, true, PLAIN_SCALE);
    x = zb_maxpool(&b, "stem.pool", x, 3, 2, 1);
    int64_t pool_hw = zb_shape(&b, x)->dims[2];
    int fm[4];
    for (int i = 0; i < 3; i++) x = bottleneck(&b, zb_name(&b, "layer1.%d", i), x, 64, 256, 1);
    fm[0] = x;
    for (int i = 0; i < 4; i++) x = bottleneck(&b, zb_name(&b, "layer2.%d", i), x, 128, 512, i ? 1 : 2);
    fm[1] = x;
    /* ResNet-GCN stages: kernels 5 and 7, inner widths 85 and 128, six
     * blocks each.  The reference code repeats one module object five times
     * (shared weights, likely unintended); here every block has its own. */
    for (int i = 0; i < 6; i++) x = gcn_bottleneck(&b, zb_name(&b, "layer3.%d", i), x, 5, 85, 1024, i ? 1 : 2);
    fm[2] = x;
    for (int i = 0; i < 6; i++) x = gcn_bottleneck(&b, zb_name(&b, "layer4.%d", i), x, 7, 128, 2048, i ? 1 : 2);
    fm[3] = x;
    for (int i = 0; i < 4; i++)
        fm[i] = br(&b, zb_name(&b, "br%d", i + 1), gcn_head(&b, zb_name(&b, "gcn%d", i + 1), fm[i]));
    /* Decoder: coarse scores upsampled onto the next finer stage and summed,
     * each sum refined; the last resize to the pooled stem's size is an
     * identity here (56 -> 56) but is what the exporter writes. */
    int s = fm[3];
    for (int i = 2; i >= 0; i--) {
        const ts_shape *t = zb_shape(&b, fm[i]);
        s = upsample(&b, zb_name(&b, "up%d", 3 - i), s, t->dims[2], t->dims[3]);
        s = br(&b, zb_name(&b, "br%d", 7 - i), zb_binary(&b, "Add", zb_name(&b, "fuse%d", 3 - i), fm[i], s));
    }
    s = br(&b, "br8", upsample(&b, "up4", s, pool_hw, pool_hw));
    s = br(&b, "br9", upsample(&b, "up5", s, H, H));
    int y = conv_g(&b, "final_conv", s, CLASSES, 1, 1, 1, true, PLAIN_SCALE);
    return zb_finish(&b, &y, 1, out);
}
