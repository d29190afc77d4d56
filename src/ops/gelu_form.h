#ifndef TS_OPS_GELU_FORM_H
#define TS_OPS_GELU_FORM_H
#include <stdbool.h>
#include "ir/ir.h"

#define GELU_MAX_NODES 12

/* The GELU spelled out from value x: its result value, the nodes in
 * nodes[*nnodes] (at most max), the form in *tanh_form; -1 if none.
 * x_shared: x may be read elsewhere and be a graph output (false: the
 * GELU must be x's only reader, as for a post-op).  skip[n] set: node n
 * may not join (NULL: none). */
int ts_gelu_spelling(const ts_graph *g, int x, bool x_shared, const bool *skip, int *nodes, int max, int *nnodes,
                     bool *tanh_form);

#endif
