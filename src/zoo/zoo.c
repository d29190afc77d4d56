/* The zoo's table of models.  Each family file defines its builders. */
#include <string.h>
#include "tsopt.h"
#include "zoo/zoo.h"

static const ts_zoo_model MODELS[] = {
    {"resnet18", "ResNet-18, 1x3x224x224 images", ts_zoo_resnet18},
    {"resnet50", "ResNet-50, 1x3x224x224 images", ts_zoo_resnet50},
    {"resnext50", "ResNeXt-50 32x4d, 1x3x224x224 images", ts_zoo_resnext50},
    {"inception_v3", "Inception-v3 (torchvision layout), 1x3x299x299 images", ts_zoo_inception_v3},
    {"bert", "BERT-base encoder, 12 layers, 1x128x768 embeddings", ts_zoo_bert},
    {"nasnet_a", "NASNet-A Mobile 4@1056, 4 normal cells per stage, 1x3x224x224 images", ts_zoo_nasnet_a},
    {"nasrnn", "NAS RNN cell unrolled 5 steps, inputs h0, x0..x4 1x512", ts_zoo_nasrnn},
    {"csrnet", "CSRNet (VGG-16 front end, dilated back end), 1x3x224x224 images", ts_zoo_csrnet},
    {"resnet3d18", "3-D ResNet-18 (Hara et al.), 1x3x16x112x112 clips, 400 classes", ts_zoo_resnet3d18},
    {"infogan", "InfoGAN generator (EinNet's), z 1x228x1x1 -> 1x3x64x64", ts_zoo_infogan},
    {"dcgan", "DCGAN generator, z 1x100x1x1 -> 1x3x64x64", ts_zoo_dcgan},
    {"fsrcnn", "FSRCNN(56,12,4) x2 super-resolution, 1x1x256x256 -> 1x1x512x512", ts_zoo_fsrcnn},
    {"gcn", "Global Convolutional Network (ResNet-50-GCN), 1x3x224x224 -> 21 classes", ts_zoo_gcn},
    {"longformer", "Longformer encoder, 2 layers, dilated window attention, 1x1024x512", ts_zoo_longformer},
};

const ts_zoo_model *ts_zoo_at(int i)
{
    return i >= 0 && (size_t)i < sizeof MODELS / sizeof MODELS[0] ? &MODELS[i] : NULL;
}

const ts_zoo_model *ts_zoo_find(const char *name)
{
    const ts_zoo_model *m;
    for (int i = 0; (m = ts_zoo_at(i)); i++)
        if (!strcmp(m->name, name)) return m;
    return NULL;
}

ts_status ts_zoo_build(const char *name, const ts_zoo_opts *o, ts_graph **out, ts_error *err)
{
    const ts_zoo_model *m = ts_zoo_find(name);
    *out = NULL;
    if (!m) return ts_error_set(err, TS_ERR_INVALID, "unknown zoo model '%s' (see 'tsopt zoo list')", name);
    ts_zoo_opts def = {0};
    if (!o) o = &def;
    if (o->batch < 0 || o->batch > 4096 || o->layers < 0 || o->layers > 1000 || o->steps < 0 || o->steps > 10000)
        return ts_error_set(err, TS_ERR_INVALID, "zoo model '%s': batch, layers or steps out of range", name);
    return m->build(o, out, err);
}
