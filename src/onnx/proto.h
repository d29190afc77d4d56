/* ONNX import/export: conversions between protobuf-c messages (generated
 * from the system onnx.proto at build time) and tsopt's tensors and
 * attributes.  Shared by import.c and export.c only. */
#ifndef TS_ONNX_PROTO_H
#define TS_ONNX_PROTO_H

#include "onnx.pb-c.h"
#include "tsopt.h"

/* ONNX stores raw tensor data little-endian; tsopt copies it as is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data handling assumes a little-endian host"
#endif

/* TensorProto.DataType <-> ts_dtype.  false / 0 when there is no match. */
bool ts_onnx_dtype_from(int32_t onnx_type, ts_dtype *out);
int32_t ts_onnx_dtype_to(ts_dtype t);
/* "float16", "string", ... for messages. */
const char *ts_onnx_dtype_name(int32_t onnx_type);

/* Decodes a TensorProto (raw_data, typed fields or external data read from
 * base_dir) into a new tensor.  `what` names it in errors, e.g.
 * "initializer 'w'". */
ts_status ts_onnx_tensor_decode(const Onnx__TensorProto *tp, const char *base_dir, const char *what,
                                ts_tensor **out, ts_error *err);
/* Fills tp (already initialised) to describe t; raw_data and dims point
 * into t and name into `name`, so both must outlive the packing. */
ts_status ts_onnx_tensor_encode(Onnx__TensorProto *tp, const ts_tensor *t, const char *name, ts_error *err);

/* Owner of what attribute decoding allocates (strings, tensors). */
typedef struct ts_onnx_attr_store {
    char **strs;
    ts_tensor **tensors;
    int nstrs, ntensors;
} ts_onnx_attr_store;

/* Decodes a node's attributes into out[0..n-1] (out has n_attribute
 * entries).  Arrays point into the protos; strings and tensors go into
 * store, freed with ts_onnx_attr_store_free.  `node` and `op` name errors. */
ts_status ts_onnx_attrs_decode(Onnx__AttributeProto *const *a, size_t n, const char *base_dir, const char *node,
                               const char *op, ts_attr *out, ts_onnx_attr_store *store, ts_error *err);
void ts_onnx_attr_store_free(ts_onnx_attr_store *store);

#endif
