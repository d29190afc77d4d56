/* Timing that survives load: is the optimized graph faster than the
 * original on this machine?  The keep decision of the optimize pipeline
 * (measure.c; docs/runtime.md, "Comparing two graphs under load").
 *
 * Both graphs are planned once and run on the same random inputs in
 * alternating rounds (original, result, result, original, ...).  Each half
 * of a round records, besides its run times, the evidence of disturbance:
 * the process's CPU time, the time its threads waited for a CPU (the
 * scheduler's run delay), the tasks runnable besides its own and the CPU
 * time the hypervisor stole.  Rounds that show another process competing
 * are discarded and measured again after a short sleep; the decision reads
 * undisturbed rounds only, and with too few of them it says "busy" and
 * never "faster". */
#ifndef TS_OPT_MEASURE_H
#define TS_OPT_MEASURE_H

#include "measure/rounds.h"

/* Times g0 (original) against g1 (result): same graph inputs (count,
 * dtype, shape) required.  An error only for what is wrong with the graphs
 * or the plans; a busy machine is a result (r->busy), not an error. */
ts_status ts_measure_pair(const ts_graph *g0, const ts_graph *g1, const ts_measure_opts *o, ts_measure_result *r,
                          ts_error *err);

#endif
