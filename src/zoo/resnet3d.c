/* 3-D ResNet-18 (Hara et al., CVPR 2018, "Can Spatiotemporal 3D CNNs Retrace
 * the History of 2D CNNs and ImageNet?"), PET's video benchmark: ResNet-18
 * with every convolution 3x3x3, on 16-frame 112x112 clips, 400 Kinetics
 * classes.  Layout of the authors' 3D-ResNets-PyTorch with shortcut type B
 * (1x1x1 convolution + BN where the shape changes). */
#include "zoo/zb.h"
#include "zoo/zoo.h"

static int conv_bn(zb *b, const char *name_, int x, int cout, int k, int stride, bool relu)
{
    ZB_KEEP(name, name_);
    int64_t kk[3] = {k, k, k}, ss[3] = {stride, stride, stride}, pp[3] = {k / 2, k / 2, k / 2};
    int y = zb_conv_nd(b, zb_name(b, "%s.conv", name), x, cout, kk, ss, pp, NULL, 1, false);
    y = zb_bn(b, zb_name(b, "%s.bn", name), y);
    return relu ? zb_relu(b, zb_name(b, "%s.relu", name), y) : y;
}

static int basic_block(zb *b, const char *name_, int x, int cout, int stride)
{
    ZB_KEEP(name, name_);
    int y = conv_bn(b, zb_name(b, "%s.1", name), x, cout, 3, stride, true);
    y = conv_bn(b, zb_name(b, "%s.2", name), y, cout, 3, 1, false);
    if (stride != 1 || zb_shape(b, x)->dims[1] != cout)
        x = conv_bn(b, zb_name(b, "%s.down", name), x, cout, 1, stride, false);
    return zb_relu(b, zb_name(b, "%s.out", name), zb_binary(b, "Add", zb_name(b, "%s.add", name), y, x));
}

ZOO_BUILDER(ts_zoo_resnet3d18)
{
    zb b;
    zb_begin(&b, "resnet3d18", o, err);
    int64_t in_dims[5] = {zoo_batch(o), 3, 16, 112, 112};
    int x = zb_input(&b, "input", 5, in_dims);
    /* Stem: 7x7x7 keeping the temporal resolution (stride 1 in time). */
    int64_t k7[3] = {7, 7, 7}, s122[3] = {1, 2, 2}, p3[3] = {3, 3, 3};
    x = zb_conv_nd(&b, "stem.conv", x, 64, k7, s122, p3, NULL, 1, false);
    x = zb_relu(&b, "stem.relu", zb_bn(&b, "stem.bn", x));
    /* zb_maxpool is 2-D only: 3x3x3 stride 2 pad 1 written out. */
    int64_t k3[3] = {3, 3, 3}, s2[3] = {2, 2, 2}, p1[6] = {1, 1, 1, 1, 1, 1};
    ts_attr pa[3] = {ts_attr_ints("kernel_shape", k3, 3), ts_attr_ints("strides", s2, 3), ts_attr_ints("pads", p1, 6)};
    x = zb_node(&b, "MaxPool", "stem.pool", &x, 1, pa, 3);
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 2; i++)
            x = basic_block(&b, zb_name(&b, "layer%d.%d", s + 1, i), x, 64 << s, i == 0 && s > 0 ? 2 : 1);
    x = zb_global_avgpool(&b, "avgpool", x);
    int64_t flat[2] = {zoo_batch(o), zb_shape(&b, x)->dims[1]};
    x = zb_reshape(&b, "flatten", x, 2, flat);
    int y = zb_gemm(&b, "fc", x, 400);
    return zb_finish(&b, &y, 1, out);
}
