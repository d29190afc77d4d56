/* Models whose shapes depend on the values of graph inputs, not only on
 * their shapes: a Reshape's shape, a Range's limits, a Resize's scales or
 * an Unsqueeze's axes fed as graph inputs.  tsopt's graphs have static
 * shapes, so such a model is loaded when a run gives those values: the
 * inputs that feed a shape are written into the model as initializers
 * (constants) and the rest bound at their shapes.  The session
 * (session.c) caches the graph and plan per shapes and values. */
#ifndef TS_API_VALUE_INPUTS_H
#define TS_API_VALUE_INPUTS_H

#include "onnx/proto.h"

/* True when err says that a shape-carrying input is not a constant; the
 * value it names is copied to name (n bytes). */
bool ts_vin_needs_value(const ts_error *err, char *name, size_t n);

/* The graph inputs (initializers left out) as the file declares them:
 * names and dim_params point into mp.  any_shape[i] is set for an input
 * with no declared shape.  Arrays are malloc'ed (free them). */
ts_status ts_vin_io_infos(const Onnx__ModelProto *mp, ts_io_info **ins, int *nin, bool **any_shape,
                          ts_io_info **outs, int *nout, ts_error *err);

/* Marks in mark[] (one per graph input, as ts_vin_io_infos orders them)
 * the inputs that value `name` is computed from; returns how many were
 * not marked before. */
int ts_vin_mark_sources(const Onnx__ModelProto *mp, const char *name, bool *mark);

/* Loads mp with inputs[i] made an initializer where value_in[i], the other
 * inputs bound at their tensors' shapes.  slot[k] receives the session
 * input index of the graph's input k. */
ts_status ts_vin_load(const Onnx__ModelProto *mp, const char *base_dir, const ts_io_info *ins, int nin,
                      const bool *value_in, ts_tensor *const *inputs, ts_graph **out, int *slot, ts_error *err);

#endif
