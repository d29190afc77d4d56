/* Internal IR helpers shared by ir/, onnx/ and the optimizers. */
#ifndef TS_IR_IR_H
#define TS_IR_IR_H

#include "ops/op.h"

/* Re-runs shape inference for node n into out_dtype/out_shape. */
ts_status ts_node_infer(const ts_graph *g, int n, ts_dtype *out_dtype, ts_shape *out_shape, ts_error *err);
/* Evaluates one node on given tensors (domain storage), allocating outputs. */
ts_status ts_node_eval(const ts_graph *g, int n, const ts_num *num, const ts_tensor *const *in,
                       ts_tensor **out, ts_error *err);
/* Converts a tensor of declared dtype into domain storage and back. */
ts_tensor *ts_tensor_to_domain(ts_tensor *t, const ts_num *num, ts_error *err);
ts_tensor *ts_tensor_from_domain(const ts_tensor *t, ts_dtype dtype, ts_error *err);
/* Folds node ni when all its inputs are constant (and its outputs are not
 * much larger): 1 folded, 0 left alone, -1 error.  Leaves a dead node;
 * call ts_graph_compact when done. */
int ts_node_fold(ts_graph *g, int ni, ts_error *err);
/* Number of live nodes using value v (plus one per graph-output slot). */
int ts_value_uses(const ts_graph *g, int v);
/* ts_graph_add_node for a descriptor and its attribute struct as they are
 * (copied, not parsed): nodes no file op_type names (opaque nodes). */
int ts_graph_add_node_parsed(ts_graph *g, const ts_op_desc *op, const char *name, const int *inputs, int ninputs,
                             const void *attrs, int nout, const char *const *out_names, int *outputs, ts_error *err);
/* Turns the value-name index on (built from the values now there, kept
 * up to date by the builder functions and ts_graph_compact) or off.  For
 * building a graph in bulk, as the importer does (each value added checks
 * its name is new: a linear search made imports quadratic); off otherwise,
 * since passes rename values in place.  False when out of memory (the
 * index stays off: lookups search, correctly). */
bool ts_graph_index_names(ts_graph *g, bool on);
/* Names: strdup that reports failure in err. */
char *ts_strdup(const char *s);

#endif
