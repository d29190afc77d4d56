/* Builders of the zoo models, one family per file.  Each takes options whose
 * zero fields mean the model's defaults (batch 1, the paper's depth). */
#ifndef TS_ZOO_ZOO_H
#define TS_ZOO_ZOO_H

#include "tsopt.h"

#define ZOO_BUILDER(fn) ts_status fn(const ts_zoo_opts *o, ts_graph **out, ts_error *err)

ZOO_BUILDER(ts_zoo_resnet18);
ZOO_BUILDER(ts_zoo_resnet50);
ZOO_BUILDER(ts_zoo_resnext50);
ZOO_BUILDER(ts_zoo_inception_v3);
ZOO_BUILDER(ts_zoo_bert);
ZOO_BUILDER(ts_zoo_nasnet_a);
ZOO_BUILDER(ts_zoo_nasrnn);
ZOO_BUILDER(ts_zoo_csrnet);
ZOO_BUILDER(ts_zoo_resnet3d18);
ZOO_BUILDER(ts_zoo_infogan);
ZOO_BUILDER(ts_zoo_dcgan);
ZOO_BUILDER(ts_zoo_fsrcnn);
ZOO_BUILDER(ts_zoo_gcn);
ZOO_BUILDER(ts_zoo_longformer);

static inline int zoo_batch(const ts_zoo_opts *o) { return o && o->batch > 0 ? o->batch : 1; }

#endif
