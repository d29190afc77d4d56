/* The ort target: candidates costed, the keep decision timed and the final
 * check run in ONNX Runtime (tools/ort/serve.js through ort_peer.h), for
 * users who deploy there (docs/optimize.md, "Targets").
 *
 * Costing follows TASO: a graph is cut into regions (the runtime's fused
 * groups, xcost_groups: a contraction with the element-wise chain after
 * it, which ORT fuses alike), each distinct region is written as a model
 * of its own and timed in ORT once, its fastest run (steadier than the
 * median on a shared machine) less ORT's fixed cost of a run cached per
 * (ORT version, threads, region signature) in the per-CPU cost cache, and
 * a graph costs the sum of its regions.  Where regions do
 * not add up (ORT's layout changes and fusions across regions), whole
 * graphs are timed: the keep decision, alternating original and result in
 * one ORT process. */
#ifndef TS_OPT_ORT_TARGET_H
#define TS_OPT_ORT_TARGET_H

#include "opt/measure.h"
#include "tsopt.h"

typedef struct ts_ort_target ts_ort_target;

/* Starts the peer (fails with one line saying how to install it) and
 * calibrates ORT's fixed cost of a run.  threads 0: one per core. */
ts_status ts_ort_target_open(ts_costdb *db, int threads, ts_ort_target **out, ts_error *err);
void ts_ort_target_close(ts_ort_target *t);
const char *ts_ort_target_version(const ts_ort_target *t);
int ts_ort_target_threads(const ts_ort_target *t);

/* The region sum in ms (regions timed now when not cached); INFINITY for a
 * graph that cannot be written in standard ai.onnx operators (EinNet's
 * eOperators: ORT could only run them as the model-local functions tsopt
 * writes them as), and for one whose weights exceed the cap set below
 * (the keep decision would refuse it: the search looks elsewhere). */
double ts_ort_target_cost(void *t, const ts_graph *g);
/* Graphs holding more than bytes of weights cost INFINITY (0: no cap). */
void ts_ort_target_set_weight_cap(ts_ort_target *t, int64_t bytes);
/* With keep, graphs that could only be written at the bound sizes (a
 * rewrite that ties a constant to the batch: the keep decision would
 * refuse them) cost INFINITY, so the search ends on one it can write
 * (regnet_y_400mf: all four best graphs held a PET reshape fixed at batch 1). */
void ts_ort_target_set_symbolic(ts_ort_target *t, bool keep);
/* Whole-graph requests (time, pair, rank, compare) given g hand ORT the
 * file at path instead (the user's original, as it is deployed; no tabs or
 * newlines, the peer's separators, and under 200 bytes); NULL path:
 * g is saved as tsopt writes it.  Both must outlive t's requests. */
void ts_ort_target_set_original(ts_ort_target *t, const ts_graph *g, const char *path);
/* True when g as tsopt writes it is the original's file byte for byte (a
 * model tsopt wrote: nothing of the import to offer against the file). */
bool ts_ort_target_is_file(ts_ort_target *t, const ts_graph *g);
/* Regions timed in ORT so far in this run, and found in the cache. */
void ts_ort_target_counts(const ts_ort_target *t, int *timed, int *cached);

/* The whole graph's median run in ORT (as ts_onnx_save writes it, inputs
 * seeded random, symbolic dimensions at the graph's bound sizes). */
ts_status ts_ort_target_time(ts_ort_target *t, const ts_graph *g, double *ms, ts_error *err);

/* g0 (original) against g1 (result) in alternating rounds in one ORT
 * process, as many as fit in budget_s given their predicted times (ms);
 * fills r as ts_measure_pair does (never busy: rounds are not judged;
 * faster as keep.h's ts_keep_decide says on the rounds' ratios). */
ts_status ts_ort_target_pair(ts_ort_target *t, const ts_graph *g0, const ts_graph *g1, double pred0, double pred1,
                             double budget_s, double min_gain, ts_measure_result *r, ts_error *err);

/* Up to TS_ORT_RANK_MAX graphs (gs[0] the original) timed whole in one ORT
 * process, in rounds of one run of each, the order rotated every round,
 * as many rounds as fit in budget_s (at least 3): per graph its median and
 * fastest run (ms) and the median over rounds of its run / the original's
 * run in the same round (what ranks them on a loaded machine).  8: the
 * original, the search's best, the passes' three alternatives and three
 * runners-up (driver.h), or two and tsopt's import. */
#define TS_ORT_RANK_MAX 8
ts_status ts_ort_target_rank(ts_ort_target *t, const ts_graph *const *gs, int n, double budget_s, double *med,
                             double *fast, double *ratio, int *rounds, ts_error *err);

/* Both graphs as they would be written, run by ORT on the same seeded
 * random inputs, symbolic dimensions at 1 and (when there are any) at 4:
 * the largest scaled difference (<= 1 matches at rtol 1e-3, atol 1e-4) and
 * the output it was in. */
ts_status ts_ort_target_compare(ts_ort_target *t, const ts_graph *g0, const ts_graph *g1, double *worst,
                                char *where, size_t n, ts_error *err);

#endif
