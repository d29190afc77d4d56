/* The zoo's table of models.  Each family file defines its builders. */
#include <string.h>
#include "tsopt.h"
#include "zoo/zoo.h"

static const ts_zoo_model MODELS[] = {
    {"resnet18", "ResNet-18, 1x3x224x224 images", ts_zoo_resnet18},
    {"resnet50", "ResNet-50, 1x3x224x224 images", ts_zoo_resnet50},
    {"resnext50", "ResNeXt-50 32x4d, 1x3x224x224 images", ts_zoo_resnext50},
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
