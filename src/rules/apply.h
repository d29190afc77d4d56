/* Applying rules to ONNX graphs: the matcher (match.c) finds every
 * occurrence of a rule's source pattern, the applier (apply.c) rewrites one
 * occurrence into a new graph.  Both go through the atom table (rule.h,
 * atom.c): an atom's row says which ONNX operator it stands for and points
 * to its match and build functions (atom_*.c).
 *
 * TASO's operator atoms stand for ONNX nodes (docs/rules.md, docs/taso.md):
 * ewadd/ewmul -> Add/Mul on equal shapes, smul -> Mul by a one-element
 * tensor, transpose -> 2-D Transpose, matmul -> MatMul with a 2-D right
 * operand (optionally followed by an Add of a constant bias vector, which the
 * runtime fuses), conv -> Conv (group 1, no dilation, SAME/VALID padding
 * recognised from the shapes, optional constant bias) optionally followed by
 * Relu, poolavg/poolmax -> AveragePool/MaxPool, concat -> two-input Concat,
 * split0/split1 -> the outputs of a two-way Split.
 *
 * Axes: TASO's axes are those of 2-D matrices and 4-D NCHW tensors; a rank-3
 * tensor (a batch of row blocks, B x S x K, as BERT's activations) is read as
 * the matrix (B*S) x K with TASO axis a at ONNX axis a + 1. */
#ifndef TS_RULES_APPLY_H
#define TS_RULES_APPLY_H

#include "rules/rule.h"
#include "ir/ir.h"

#define TS_MATCH_MAX_VARS 16
#define TS_MATCH_MAX_NODES 48
#define TS_MATCH_MAX_EXPRS 64

/* One occurrence of a rule's source pattern in a graph. */
typedef struct ts_match {
    int nvars;
    const char *var[TS_MATCH_MAX_VARS]; /* names (point into the rule) */
    int val[TS_MATCH_MAX_VARS];         /* bound graph values */
    int bias[TS_MATCH_MAX_VARS];        /* constant bias of the conv/matmul whose weight is this var, or -1 */
    int bias_uses[TS_MATCH_MAX_VARS];   /* how many matched convs/matmuls carry that bias */
    int nroots;
    int root[8];                        /* values of the lhs outputs */
    int nnodes;
    int node[TS_MATCH_MAX_NODES];       /* matched nodes */
    int nexprs;
    const ts_rexpr *expr[TS_MATCH_MAX_EXPRS]; /* lhs subterm -> the value it matched */
    int exval[TS_MATCH_MAX_EXPRS];
} ts_match;

/* A live node and its descriptor (the index groups nodes by descriptor). */
typedef struct ts_match_opnode {
    const ts_op_desc *op;
    int node;
} ts_match_opnode;

/* Per-graph index reused across rules: users of every value, and the live
 * nodes by descriptor, so a rule is tried only at nodes of an operator its
 * source's root can be (a rule whose root operator the graph lacks costs a
 * binary search).  Build once per graph, before matching any rule. */
typedef struct ts_match_index {
    const ts_graph *g;
    int *ustart; /* users of value v: user[ustart[v] .. ustart[v+1]) (node ids, repeated per use) */
    int *user;
    int *outuse; /* uses as a graph output */
    int nbyop;
    ts_match_opnode *byop; /* live nodes sorted by (descriptor address, node id) */
    /* Tests' brute-force reference, set after building: try every live
     * node as a root, as if there were no descriptor index (the same
     * matches in the same order). */
    bool scan_all;
} ts_match_index;

ts_status ts_match_index_build(ts_match_index *ix, const ts_graph *g, ts_error *err);
void ts_match_index_free(ts_match_index *ix);

/* Whether the rule uses only atoms the matcher/applier implement. */
bool ts_rule_applicable(const ts_rule *r);

/* Calls fn for every match of r's lhs in g (stops early when fn returns
 * false).  Returns the number of matches visited. */
int ts_match_all(const ts_match_index *ix, const ts_rule *r, bool (*fn)(const ts_match *m, void *ctx), void *ctx);

/* Applies match m of rule r to a copy of g: builds the rhs, redirects the
 * users of the matched outputs, drops the matched nodes, folds constant
 * (weight-only) subgraphs, compacts.  *out receives the new graph, or NULL
 * (with TS_OK) when the result is rejected (a cycle, shapes that the rhs
 * cannot take, a bias that cannot follow the rewrite). */
ts_status ts_rule_apply(const ts_graph *g, const ts_rule *r, const ts_match *m, ts_graph **out, ts_error *err);

/* Memo of constant concatenations (const_cache.c): the search builds the same
 * concatenated weights for many candidate graphs.  Holds references to the
 * parts and the result; not thread-safe. */
typedef struct ts_const_cache ts_const_cache;
ts_const_cache *ts_const_cache_new(void);
void ts_const_cache_free(ts_const_cache *c);
/* Concatenation of n constant tensors along axis (new reference), through
 * the memo when c is not NULL; NULL when shapes do not fit or on error. */
ts_tensor *ts_const_concat(ts_const_cache *c, ts_tensor *const *parts, int n, int axis, ts_error *err);

/* Value holding constant t (consumes the caller's reference): an existing
 * value with that very tensor, else a new constant. -1 on error. */
int ts_graph_const_value(ts_graph *g, ts_tensor *t, ts_error *err);
/* A node or value name PREFIX_K not used in g yet, written to buf. */
const char *ts_graph_fresh_name(const ts_graph *g, const char *prefix, char *buf, size_t n);

/* As ts_rule_apply, with concatenations of constants built through cc. */
ts_status ts_rule_apply_cached(const ts_graph *g, const ts_rule *r, const ts_match *m, ts_const_cache *cc,
                               ts_graph **out, ts_error *err);

/* ONNX attribute of node n read through its descriptor's emit; NULL if absent. */
const ts_attr *ts_node_attr(const ts_node *n, const char *name, ts_attr *buf, int nbuf);

#endif
