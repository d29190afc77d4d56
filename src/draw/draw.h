/* Pictures of graphs within a time bound (draw.c); ts_graph_draw
 * (tsopt.h) is this without one. */
#ifndef TS_DRAW_H
#define TS_DRAW_H

#include "tsopt.h"

/* ts_graph_draw, with Graphviz's `dot` stopped (its whole process group
 * killed) when it has not finished within seconds (> 0; 0: no bound):
 * then TS_ERR_IO, saying so, and no file at path.  Graphviz's layout grows
 * much faster than linearly with the nodes; a caller that must finish (the
 * optimize report) bounds it. */
ts_status ts_graph_draw_within(const ts_graph *g, const ts_graph *diff_against, const char *path, double seconds,
                               ts_error *err);

#endif
