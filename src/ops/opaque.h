/* Opaque nodes: a node of a custom domain, or of an operator tsopt does not
 * know, kept exactly as the file had it (docs/onnx-models.md).
 *
 * tsopt cannot compute such a node, but it can carry it: its output types
 * and shapes come from the model's value_info (or --input bindings), so
 * shape inference goes on after it, the optimizer treats it as a boundary
 * (no kernel, never folded, never matched: no rule, pass or source names
 * its descriptor), and export writes it back with its domain, op_type and
 * attributes untouched.  The runtime refuses it with one line naming it.
 *
 * The node's attribute struct (plain data, like every operator's) holds
 * what inference and messages need; what only export needs (the file's
 * NodeProto bytes: attributes of any kind, subgraphs included) lives in
 * the graph's model record (ts_model_meta.opaque), shared by its copies. */
#ifndef TS_OPS_OPAQUE_H
#define TS_OPS_OPAQUE_H

#include "ops/op.h"

#define TS_OPAQUE_MAX_IO 16
#define TS_OPAQUE_NAME_MAX 96

typedef struct ts_opaque_attrs {
    int32_t id;                        /* index in the model record's table: unique per file node */
    char op_type[TS_OPAQUE_NAME_MAX];  /* for messages (the exact strings are in the record) */
    char domain[TS_OPAQUE_NAME_MAX];   /* "" for the default domain */
    int32_t nin, nout;
    ts_shape in_shape[TS_OPAQUE_MAX_IO]; /* the inputs' shapes when loaded: outputs are known only there */
    ts_dtype out_dtype[TS_OPAQUE_MAX_IO];
    ts_shape out_shape[TS_OPAQUE_MAX_IO];
    /* Output dimensions the file declares by a dim_param that a graph
     * input dimension also has: they follow that input (graph input
     * follow_in, axis follow_axis; -1: a fixed dimension), so the node
     * keeps up with symbolic sizes (export's probe). */
    int16_t follow_in[TS_OPAQUE_MAX_IO][TS_MAX_RANK];
    int16_t follow_axis[TS_OPAQUE_MAX_IO][TS_MAX_RANK];
} ts_opaque_attrs;

/* What export needs of one opaque node: the file's NodeProto, packed. */
typedef struct ts_opaque_rec {
    uint8_t *node_proto;
    size_t node_len;
} ts_opaque_rec;

typedef struct ts_opaque_table {
    ts_opaque_rec *recs;
    int n, cap;
} ts_opaque_table;

/* The descriptor of every opaque node.  Not registered (ts_op_find never
 * returns it): a file's node becomes opaque only through the importer. */
extern const ts_op_desc ts_op_opaque;

static inline bool ts_node_is_opaque(const ts_node *n) { return n->op == &ts_op_opaque; }

/* Adds an opaque node to g with the outputs' dtypes and shapes given.
 * Returns the node index or -1 (err set). */
int ts_opaque_add(ts_graph *g, const char *name, const ts_opaque_attrs *a, const int *inputs,
                  const char *const *out_names, ts_error *err);

/* Appends a record (takes the bytes); its index or -1 when out of memory. */
int ts_opaque_table_add(ts_opaque_table *t, uint8_t *node_proto, size_t len);
void ts_opaque_table_free(ts_opaque_table *t);
/* The record of opaque node n of g, or NULL (a graph with no model record). */
const ts_opaque_rec *ts_opaque_rec_of(const ts_graph *g, const ts_node *n);

/* "Foo" or "com.example::Foo", for messages. */
const char *ts_opaque_what(const ts_node *n, char *buf, size_t size);
/* Whether n is opaque or a control-flow node with an opaque node in a
 * body (nested bodies too): a node tsopt keeps as it is and cannot run. */
bool ts_node_holds_opaque(const ts_node *n);
/* The first node of g in node order that holds an opaque node, or -1. */
int ts_graph_first_opaque(const ts_graph *g);
/* Fails (TS_ERR_UNSUPPORTED) naming the first node of g that tsopt cannot
 * execute; TS_OK when there is none.  For the runtime and the reference
 * interpreter: `run`, `bench`, the optimizer's whole-model check. */
ts_status ts_graph_check_runnable(const ts_graph *g, ts_error *err);

#endif
