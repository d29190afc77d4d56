/* ResNet-18, ResNet-50 and ResNeXt-50 (32x4d), laid out as torchvision's
 * models are (so exported ONNX matches what users bring): conv-bn-relu
 * stem, max-pool, four stages, global average pool, Gemm classifier. */
#include "zoo/zb.h"
#include "zoo/zoo.h"

static int conv_bn(zb *b, const char *name_, int x, int cout, int k, int stride, int pad, int group, bool relu)
{
    ZB_KEEP(name, name_);
    int y = zb_bn(b, zb_name(b, "%s.bn", name), zb_conv(b, zb_name(b, "%s.conv", name), x, cout, k, stride, pad, group, false));
    return relu ? zb_relu(b, zb_name(b, "%s.relu", name), y) : y;
}

/* Two 3x3 convolutions (ResNet-18/34). */
static int basic_block(zb *b, const char *name_, int x, int cout, int stride)
{
    ZB_KEEP(name, name_);
    int y = conv_bn(b, zb_name(b, "%s.1", name), x, cout, 3, stride, 1, 1, true);
    y = conv_bn(b, zb_name(b, "%s.2", name), y, cout, 3, 1, 1, 1, false);
    if (stride != 1 || zb_shape(b, x)->dims[1] != cout)
        x = conv_bn(b, zb_name(b, "%s.down", name), x, cout, 1, stride, 0, 1, false);
    return zb_relu(b, zb_name(b, "%s.out", name), zb_binary(b, "Add", zb_name(b, "%s.add", name), y, x));
}

/* 1x1 reduce, 3x3 (grouped for ResNeXt), 1x1 expand (x4). */
static int bottleneck(zb *b, const char *name_, int x, int width, int cout, int stride, int groups)
{
    ZB_KEEP(name, name_);
    int y = conv_bn(b, zb_name(b, "%s.1", name), x, width, 1, 1, 0, 1, true);
    y = conv_bn(b, zb_name(b, "%s.2", name), y, width, 3, stride, 1, groups, true);
    y = conv_bn(b, zb_name(b, "%s.3", name), y, cout, 1, 1, 0, 1, false);
    if (stride != 1 || zb_shape(b, x)->dims[1] != cout)
        x = conv_bn(b, zb_name(b, "%s.down", name), x, cout, 1, stride, 0, 1, false);
    return zb_relu(b, zb_name(b, "%s.out", name), zb_binary(b, "Add", zb_name(b, "%s.add", name), y, x));
}

typedef struct resnet_cfg {
    const char *name;
    int blocks[4];
    bool bottleneck;
    int groups, width_per_group;
} resnet_cfg;

static ts_status build(const resnet_cfg *c, const ts_zoo_opts *o, ts_graph **out, ts_error *err)
{
    zb b;
    zb_begin(&b, c->name, o, err);
    int64_t in_dims[4] = {zoo_batch(o), 3, 224, 224};
    int x = zb_input(&b, "input", 4, in_dims);
    x = conv_bn(&b, "stem", x, 64, 7, 2, 3, 1, true);
    x = zb_maxpool(&b, "stem.pool", x, 3, 2, 1);
    for (int s = 0; s < 4; s++) {
        int planes = 64 << s;
        for (int i = 0; i < c->blocks[s]; i++) {
            int stride = i == 0 && s > 0 ? 2 : 1;
            const char *name = zb_name(&b, "layer%d.%d", s + 1, i);
            if (c->bottleneck)
                x = bottleneck(&b, name, x, planes * c->width_per_group / 64 * c->groups, planes * 4, stride, c->groups);
            else
                x = basic_block(&b, name, x, planes, stride);
        }
    }
    x = zb_global_avgpool(&b, "avgpool", x);
    int64_t flat[2] = {zoo_batch(o), zb_shape(&b, x)->dims[1]};
    x = zb_reshape(&b, "flatten", x, 2, flat);
    int y = zb_gemm(&b, "fc", x, 1000);
    return zb_finish(&b, &y, 1, out);
}

ZOO_BUILDER(ts_zoo_resnet18)
{
    static const resnet_cfg c = {"resnet18", {2, 2, 2, 2}, false, 1, 64};
    return build(&c, o, out, err);
}

ZOO_BUILDER(ts_zoo_resnet50)
{
    static const resnet_cfg c = {"resnet50", {3, 4, 6, 3}, true, 1, 64};
    return build(&c, o, out, err);
}

ZOO_BUILDER(ts_zoo_resnext50)
{
    static const resnet_cfg c = {"resnext50", {3, 4, 6, 3}, true, 32, 4};
    return build(&c, o, out, err);
}
