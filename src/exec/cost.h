/* Op-cost model internals (cost.c, cost_key.c), shared with `tsopt profile`.
 *
 * Unit of cost: a *group*, the nodes the runtime would run as one step.
 * Measuring conv, batch-norm and relu separately and adding them up would
 * charge three passes over memory where the runtime makes one (post-op
 * fusion, element-wise chain fusion), so the model predicts fusion with a
 * deliberately generous rule (xcost_groups) and measures each group as one
 * subgraph run by the real runtime: if the runtime does not in fact fuse a
 * group, the measurement shows it.  ts_cost_node() of a group's head is the
 * group's cost; of an absorbed member, 0.  View ops (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity) are aliases in the runtime: cost 0. */
#ifndef TS_EXEC_COST_H
#define TS_EXEC_COST_H

#include "ir/ir.h"

#define XCOST_MAX_GROUP 9 /* head + XD_MAX_FUSE absorbed nodes */

typedef enum xcost_src {
    XCOST_FREE,     /* view / absorbed: no step of its own */
    XCOST_CACHED,   /* found in the cache */
    XCOST_MEASURED, /* measured now (and cached) */
    XCOST_ROOFLINE, /* analytic estimate */
} xcost_src;

/* group_of[n] = head node of n's group (n itself for a head), -1 for dead
 * nodes.  Returns TS_ERR_NOMEM or TS_OK. */
ts_status xcost_groups(const ts_graph *g, int *group_of);

/* Members of the group headed by `head`, in chain order; returns count. */
int xcost_members(const ts_graph *g, const int *group_of, int head, int *members);

/* True when value v is one of g's outputs. */
bool xcost_is_output(const ts_graph *g, int v);

/* Canonical key of a group (caller frees): op names, attribute hashes,
 * input/output dtypes and shapes, which inputs are constants, which outputs
 * are graph outputs (written plain). */
char *xcost_key(const ts_graph *g, const int *members, int nm);

/* Cost of the group headed by head, in ms. */
double xcost_group(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure,
                   xcost_src *src);

/* FLOPs and bytes touched (external inputs + outputs) of a group. */
void xcost_group_work(const ts_graph *g, const int *members, int nm, double *flops, double *bytes);

/* Machine peak (GFLOP/s of a 1024^3 matmul in the runtime, GB/s of a
 * parallel memcpy), measured once and cached in db. */
ts_status xcost_peak(ts_costdb *db, double *gflops, double *gbps, ts_error *err);

/* "Intel(R) Xeon(R) ... x16": /proc/cpuinfo model name and core count. */
void xcost_cpu_id(char *buf, size_t n);
const char *xcost_db_path(const ts_costdb *db);
int xcost_db_measured(const ts_costdb *db); /* measurements made since open */
int xcost_db_size(const ts_costdb *db);

/* Median ms of running g with the fast runtime on random inputs: warm-up,
 * then up to `iters` runs, stopping early (after at least 3) past budget_ms. */
ts_status xcost_time_graph(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, ts_error *err);
/* Same, also giving the fastest run (min_ms may be NULL). */
ts_status xcost_time_graph_min(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, double *min_ms,
                               ts_error *err);

#endif
