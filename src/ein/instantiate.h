/* Instantiation (paper section 5): an expression becomes graph nodes.
 * Each scope is matched, through the iterator mapping table, onto
 * tsopt's MatMul (batch / M / N / K groups), or lowered to standard
 * movement operators: a scope whose body is one read, summed over few
 * points, is Pad + one Slice per point + Adds (the paper's OffsetReduce,
 * col2im's aggregation); a scope without summation whose body is
 * arithmetic over reads is those reads plus broadcast element-wise
 * operators.  Anything else has no instantiation yet (an eOperator). */
#ifndef TS_EIN_INSTANTIATE_H
#define TS_EIN_INSTANTIATE_H

#include "ein/expr.h"

/* Points a reduction scope may be unrolled over (Slices + Adds). */
#define EIN_MAX_UNROLL 49

typedef enum ts_ein_kind {
    EIN_KIND_NONE,
    EIN_KIND_MATMUL,
    EIN_KIND_REDUCE,
    EIN_KIND_ELEMENTWISE,
    EIN_KIND_CONV,  /* a regular Conv (group 1) over a scope, its leading dims merged as the batch */
    EIN_KIND_PHASE, /* a movement scope f*y + a -> (a, y): Reshape + Transpose (space-to-batch) */
    EIN_KIND_G2BMM,   /* a band product A[.., i, c] B[.., i + j - W, c]: blocked MatMul + skew */
    EIN_KIND_G2BMM_T, /* its counterpart Sum_j A[.., i, j] B[.., i + j - W, c]: inverse skew + blocked MatMul */
} ts_ein_kind;

/* How scope s would be instantiated (NONE: it cannot be, today). */
ts_ein_kind ts_ein_scope_kind(const ts_ein *e, int s);
/* e has a Conv scope (over phase images) and none of them is dilated:
 * the target of the phase search (search opts .phases). */
bool ts_ein_undilated_conv(const ts_ein *e);
/* Every scope has an instantiation. */
bool ts_ein_instantiable(const ts_ein *e);
/* "matmul+reduce9" style summary of how e is instantiated. */
void ts_ein_describe(const ts_ein *e, char *buf, size_t n);

/* Adds to g the nodes computing e, reading value inputs[k] for e's
 * input k; *out receives the value of e->out_shape.  Nodes and constants
 * are named PREFIX.*; constant-only subexpressions (weights transposed
 * for the MatMul) are left for ts_graph_fold_constants. */
ts_status ts_ein_instantiate(const ts_ein *e, ts_graph *g, const int *inputs, const char *prefix, int *out,
                             ts_error *err);

/* Whether e can be built as library MatMuls plus one eOperator: its root
 * is not a MatMul, it has a MatMul scope, and every MatMul reads only
 * inputs and other MatMuls. */
bool ts_ein_mixable(const ts_ein *e);
/* The MatMul scopes of e as library nodes (as ts_ein_instantiate builds
 * them), every other scope fused into one eOperator node (tsopt.EinNetOp)
 * reading the MatMul results where they lie and the inputs those scopes
 * read: an OffsetReduce summed in one pass instead of a Pad, a Slice per
 * point and an Add per point.  *out: the eOperator's output (e->out_shape). */
ts_status ts_ein_instantiate_mixed(const ts_ein *e, ts_graph *g, const int *inputs, const char *prefix, int *out,
                                   ts_error *err);

#endif
