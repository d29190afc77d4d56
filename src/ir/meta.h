/* What an ONNX file had beyond the graph: model metadata, every opset
 * import, doc strings, and the symbolic dimensions (dim_param) of its
 * inputs and outputs with what import learnt about them.  Filled by the
 * importer (src/onnx/import.c), written back by the exporter
 * (src/onnx/export.c); a graph holds one reference (ts_graph.meta), shared
 * by its copies, so the optimizer's thousands of copies cost nothing.
 *
 * Graph inputs and outputs are recorded by position and name: the
 * optimizer renumbers values but keeps the inputs and outputs, their names
 * and their order. */
#ifndef TS_IR_META_H
#define TS_IR_META_H

#include "tsopt.h"

typedef struct ts_meta_kv {
    char *key, *value;
} ts_meta_kv;

typedef struct ts_meta_opset {
    char *domain; /* NULL: the default domain "" */
    int64_t version;
} ts_meta_opset;

/* One dimension of a graph input or output as the file declared it. */
typedef struct ts_meta_dim {
    bool symbolic; /* declared by dim_param, or with no value at all */
    char *param;   /* the dim_param; NULL for a fixed or an unnamed dimension */
} ts_meta_dim;

typedef struct ts_meta_io {
    char *name;
    int rank; /* declared rank; -1 when the file declared no shape */
    ts_meta_dim dims[TS_MAX_RANK];
    ts_shape bound; /* the shape the graph has (sizes bound at import) */
    ts_shape probe; /* the shape at the probe sizes (dynamic models only) */
} ts_meta_io;

/* A symbolic size: one per distinct dim_param of the inputs, one per
 * unnamed symbolic input dimension. */
typedef struct ts_meta_sym {
    char *name;      /* NULL for an unnamed dimension */
    int input, axis; /* where it first appears (names an unnamed one in messages) */
    int64_t bound, probe;
} ts_meta_sym;

/* A constant import computed from symbolic sizes (folded shape
 * arithmetic): its content at the bound sizes (the tensor the graph holds,
 * recognised by pointer) and at the probe sizes. */
typedef struct ts_meta_sized {
    ts_tensor *bound, *probe;
} ts_meta_sized;

typedef struct ts_model_meta {
    int refcount;
    /* ModelProto fields; NULL strings were absent or empty */
    int64_t ir_version;
    char *producer_name, *producer_version, *domain, *doc_string;
    bool has_model_version;
    int64_t model_version;
    ts_meta_kv *props; /* metadata_props, in file order */
    int nprops;
    ts_meta_opset *opsets; /* every opset_import, in file order */
    int nopsets;
    char *graph_doc;
    ts_meta_kv *node_docs; /* node name -> doc_string, sorted by name; only nodes that had one */
    int nnode_docs;
    /* graph inputs (weights listed as inputs excluded) and outputs */
    ts_meta_io *inputs, *outputs;
    int ninputs, noutputs;
    /* symbolic sizes: empty when every input dimension is fixed */
    ts_meta_sym *syms;
    int nsyms;
    /* Set when the model has symbolic sizes but cannot be written with
     * them (the model did not load at other sizes, or its structure
     * depends on them): one line saying why.  Empty otherwise. */
    char why_static[1024];
    ts_meta_sized *sized;
    int nsized;
    /* Reshape/Expand shape inputs import found NOT computed from the sizes
     * (the file's literals): export never rewrites those, as the model
     * means them at every size.  By pointer, as sized. */
    ts_tensor **literals;
    int nliterals;
    /* the file's opaque nodes (src/ops/opaque.h), NULL when none */
    struct ts_opaque_table *opaque;
    /* import folded only small constants: folding everything made the
     * weights more than 10% larger than the file's (docs/onnx-models.md) */
    bool small_folds;
    /* the distinct external-data locations of the file's initializers
     * (relative to its folder): a model written as its file's bytes is
     * only whole with them beside it (ts_onnx_copy_model) */
    char **external;
    int nexternal;
} ts_model_meta;

/* A zeroed record holding one reference; NULL when out of memory. */
ts_model_meta *ts_model_meta_new(void);
ts_model_meta *ts_model_meta_ref(ts_model_meta *m);
/* Frees on the last reference; NULL is fine. */
void ts_model_meta_unref(ts_model_meta *m);
/* The doc_string recorded for node `name`, or NULL. */
const char *ts_model_meta_node_doc(const ts_model_meta *m, const char *name);
/* The symbolic sizes for messages: "'batch'", "'batch', 'seq'", "input
 * 'x' axis 0". */
const char *ts_model_meta_syms_str(const ts_model_meta *m, char *buf, size_t n);
/* Whether t is one of m->literals. */
bool ts_model_meta_is_literal(const ts_model_meta *m, const ts_tensor *t);
/* The recorded probe content of constant t when import found it computed
 * from symbolic sizes, else NULL. */
const ts_tensor *ts_model_meta_sized_probe(const ts_model_meta *m, const ts_tensor *t);

#endif
