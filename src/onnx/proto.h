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
/* A model's bytes: in memory (mem), else in the file open as fd. */
typedef struct ts_onnx_src {
    const uint8_t *mem;
    int fd;
    uint64_t size;
} ts_onnx_src;
/* Where an initializer's raw_data lies in the model's bytes (len 0: left in
 * the message). */
typedef struct ts_onnx_span {
    uint64_t off, len;
} ts_onnx_span;
/* Weights read once (raw_spans.c): *msg (malloc'ed, *msg_len bytes) is the
 * model less the large raw_data of its main graph's initializers, spans[i]
 * (malloc'ed, *nspans entries) where initializer i's was.  *msg NULL and
 * TS_OK: not cut (parse src whole; protobuf-c names what is wrong).  Fails
 * on read errors and out of memory only; `model` names it, e.g.
 * "model 'm.onnx'". */
ts_status ts_onnx_raw_spans(const ts_onnx_src *src, uint8_t **msg, size_t *msg_len, ts_onnx_span **spans,
                            size_t *nspans, const char *model, ts_error *err);
/* span's bytes of src into dst; `what` names the tensor in errors. */
ts_status ts_onnx_span_read(const ts_onnx_src *src, const ts_onnx_span *span, void *dst, const char *what,
                            ts_error *err);
/* ts_onnx_load / ts_onnx_load_buffer of the model in src (`model` names it
 * in errors, e.g. "model 'm.onnx'"). */
ts_status ts_onnx_load_src(const ts_onnx_src *src, const char *base_dir, const char *model, const ts_input_bind *binds,
                           int nbinds, ts_graph **out, ts_error *err);
/* A model parsed once and loaded at many sizes without reading src again
 * (ts_session): its weights decoded once and shared by the graphs loaded
 * from it (import.c). */
typedef struct ts_onnx_kept ts_onnx_kept;
ts_status ts_onnx_kept_open(const ts_onnx_src *src, const char *base_dir, const char *model, ts_onnx_kept **out,
                            ts_error *err);
ts_status ts_onnx_kept_load(const ts_onnx_kept *k, const char *base_dir, const char *model, const ts_input_bind *binds,
                            int nbinds, ts_graph **out, ts_error *err);
void ts_onnx_kept_free(ts_onnx_kept *k);
/* The constants named by names[] as a load at binds folds them, importing
 * only the nodes they are computed from (ts_session re-infers a decoder
 * token's graph from the last one's and takes its position row and causal
 * masks from here instead of loading the whole model again); what a Shape
 * or Size node reads from another node is not computed but taken at its
 * shape in `at` (by name).  out[i]: a new reference where names[i] is
 * computed from an input's size; NULL where it reads no graph input (a
 * weight, a Constant: the same at all sizes) or is no value of the file (a
 * rewrite's) or is NULL, or where it needs a shape `at` has as not known
 * yet (rank -1): later[i] is then set (the caller infers more and asks
 * again).  Each name's last fold is kept with the shapes its slice read
 * and reused at the same shapes (a reshape target at every token); a name
 * whose slice is the same nodes as an earlier name's of the same call
 * (ks_same_slice) and reads the same shapes takes that name's fold.
 * TS_ERR_UNSUPPORTED when a shape is missing from `at` (or not
 * known and later is NULL), one does not fold, or one is computed through
 * control flow. */
ts_status ts_onnx_kept_sized_consts(ts_onnx_kept *k, const char *base_dir, const char *model,
                                    const ts_input_bind *binds, int nbinds, const ts_graph *at,
                                    const char *const *names, int n, ts_tensor **out, bool *later, ts_error *err);
/* Of the names ts_onnx_kept_sized_consts returned, how many it folded by
 * importing their slice and how many it took from a name whose slice is
 * the same nodes and read the same shapes in the same call (a decoder's
 * per-layer causal masks: one fold for all layers). */
void ts_onnx_kept_fold_stats(const ts_onnx_kept *k, int64_t *folded, int64_t *shared);
/* ts_onnx_tensor_decode of a tensor whose raw_data was cut (span into src;
 * span NULL or empty: as ts_onnx_tensor_decode). */
ts_status ts_onnx_tensor_decode_span(const Onnx__TensorProto *tp, const ts_onnx_src *src, const ts_onnx_span *span,
                                     const char *base_dir, const char *what, ts_tensor **out, ts_error *err);
/* Fills tp (already initialised) to describe t; raw_data and dims point
 * into t and name into `name`, so both must outlive the packing. */
/* Non-negative decimal integer of an external_data entry (offset, length);
 * false on anything else or overflow. */
bool ts_onnx_parse_offset(const char *s, int64_t *out);
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

/* Opaque nodes (opaque.c, src/ops/opaque.h).  Whether the file's node is
 * kept as it is (custom domain, unknown operator). */
bool ts_onnx_node_is_opaque(const Onnx__NodeProto *n);
/* Whether `name` is an output of an opaque node of gp or of a body in it
 * (a --input binding may give its shape). */
bool ts_onnx_opaque_output(const Onnx__GraphProto *gp, const char *name);
struct ts_opaque_table;
/* Fails naming node n when the types and shapes of its outputs are not
 * known (value_info, graph outputs, binds): before anything is built. */
ts_status ts_onnx_opaque_check(const ts_graph *g, const Onnx__GraphProto *gp, const Onnx__NodeProto *n,
                               const char *name, const ts_input_bind *binds, int nbinds, ts_error *err);
/* Adds node n of gp (named `name`, inputs ins[0..nin)) to g as an opaque
 * node; its record goes into *tab (allocated on first use).  Returns the
 * node index or -1 (err set, naming the node and what is missing). */
int ts_onnx_opaque_import(ts_graph *g, const Onnx__GraphProto *gp, const Onnx__NodeProto *n, const char *name,
                          const int *ins, int nin, const ts_input_bind *binds, int nbinds,
                          struct ts_opaque_table **tab, ts_error *err);
/* The NodeProto of opaque node n as the file had it, with the graph's
 * current input/output names; every allocation through alloc(ctx, size)
 * (zeroed, freed by the caller's arena). */
Onnx__NodeProto *ts_onnx_opaque_export(const ts_graph *g, const ts_node *n, void *(*alloc)(void *ctx, size_t size),
                                       void *ctx, ts_error *err);

/* External data (external_data.c).  Maps tp's bytes from its external
 * file into *out when the tensor is large and aligned enough: 1 mapped,
 * 0 not (read it instead: that path reports errors). */
int ts_onnx_external_map(const Onnx__TensorProto *tp, const char *base_dir, ts_dtype dt, const ts_shape *shape,
                         size_t want, ts_tensor **out);
/* Moves gp's initializers of 1 KiB or more into MODEL_PATH.data (written
 * and renamed now; *data_path receives its path, malloc'ed) and makes them
 * refer to it; allocations through alloc(ctx, size). */
ts_status ts_onnx_external_write(Onnx__GraphProto *gp, const char *model_path, void *(*alloc)(void *ctx, size_t size),
                                 void *ctx, char **data_path, ts_error *err);

#endif
