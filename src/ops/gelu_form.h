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

/* The erf form with its argument's constant off by a 16-bit rounding:
 * 0.5 x (1 + erf(s x)), |s sqrt 2 - 1| <= 2^-8 (a float16 model's
 * Div(x, 1.4140625)); x read by the GELU only; s in *erf_s.  Not GELU
 * (fuse_gelu leaves it written out): lower_post.c computes it exactly as
 * gelu_erf(s sqrt2 x) / (s sqrt2) in a native float16 plan. */
int ts_gelu_spelling_scaled(const ts_graph *g, int x, const bool *skip, int *nodes, int max, int *nnodes,
                            double *erf_s);
#endif
