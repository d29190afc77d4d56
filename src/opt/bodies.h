/* Control-flow bodies in the optimize pipeline (docs/control-flow.md). */
#ifndef TS_OPT_BODIES_H
#define TS_OPT_BODIES_H

#include "tsopt.h"

/* Optimizes the bodies of g's If/Loop/Scan nodes as graphs of their own,
 * nested bodies first: constant folding, Conv+BatchNormalization folding
 * and CSE (the driver's search works on the outer graph, where a
 * control-flow node is one opaque node it never matches across).  A
 * rewritten body replaces the node's reference to the old one (copies of
 * g keep theirs).  Returns the number of rewrites, or -1 (err set). */
int ts_opt_bodies(ts_graph *g, ts_error *err);

#endif
