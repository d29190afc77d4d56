/* A model kept as it was, written as its file (optimize --target ort). */
#ifndef TS_ONNX_MODEL_COPY_H
#define TS_ONNX_MODEL_COPY_H

#include "tsopt.h"

/* The model file `from` (g is its import) written at `to` byte for byte,
 * and each external-data file it names (g->meta->external) copied beside
 * `to` under the same relative location, first, so the written model is
 * whole when it appears.  A location that already is the same file (`to`
 * in from's folder) is left as it is.  Fails naming the file that could
 * not be copied. */
ts_status ts_onnx_copy_model(const ts_graph *g, const char *from, const char *to, ts_error *err);

#endif
