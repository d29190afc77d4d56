/* Loops unrolled for a run whose values are known (value_inputs.c).
 *
 * A Loop body whose shapes follow the iteration number (a Slice from i to
 * i + 1 of an outer tensor, ONNX's test_loop11) has no static shape, so
 * tsopt cannot build it as one body.  When the run's values make the trip
 * count and the condition constants and the body cannot end the loop
 * early, the loop is written out as its iterations, each a copy of the
 * body with the iteration number a constant: every shape is then static.
 * The unrolled copy lives only in the session's graph; the file is not
 * changed. */
#ifndef TS_API_LOOP_UNROLL_H
#define TS_API_LOOP_UNROLL_H

#include "onnx/proto.h"

/* Iterations unrolled at most (their nodes are as many copies of the body). */
#define TS_UNROLL_MAX_TRIPS 1024

/* Memory the unrolled nodes hold (names, nodes, constants): freed at once. */
typedef struct ts_unroll_arena {
    void **p;
    size_t n, cap;
} ts_unroll_arena;

void ts_unroll_arena_free(ts_unroll_arena *a);

/* In g (a shallow copy whose node list this replaces, with memory from a):
 * unrolls the Loop whose body defines value `name`, when its trip count is
 * an int64 initializer of g (at most TS_UNROLL_MAX_TRIPS), its condition
 * absent or a true initializer, its body's condition output its condition
 * input passed through, and its body holds no nested graphs.  Returns 1
 * when it did, 0 when no such loop (g unchanged), -1 out of memory. */
int ts_loop_unroll(Onnx__GraphProto *g, const char *name, int opset, ts_unroll_arena *a);

#endif
