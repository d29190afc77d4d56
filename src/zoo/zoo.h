/* Builders of the zoo models, one family per file.  Each takes options whose
 * zero fields mean the model's defaults (batch 1, the paper's depth). */
#ifndef TS_ZOO_ZOO_H
#define TS_ZOO_ZOO_H

#include "tsopt.h"

#define ZOO_BUILDER(fn) ts_status fn(const ts_zoo_opts *o, ts_graph **out, ts_error *err)

ZOO_BUILDER(ts_zoo_resnet18);
ZOO_BUILDER(ts_zoo_resnet50);
ZOO_BUILDER(ts_zoo_resnext50);

static inline int zoo_batch(const ts_zoo_opts *o) { return o && o->batch > 0 ? o->batch : 1; }

#endif
