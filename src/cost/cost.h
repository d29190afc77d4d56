/* Op-cost model internals (cost.c, cost_key.c, cost_plan.c, cost_ctx.c),
 * shared with `tsopt profile`.
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
#ifndef TS_COST_COST_H
#define TS_COST_COST_H

#include "ir/ir.h"
#include "exec/roofline.h"

#define XCOST_MAX_GROUP 9 /* head + XD_MAX_FUSE absorbed nodes */

typedef enum xcost_src {
    XCOST_FREE,     /* view / absorbed: no step of its own */
    XCOST_CACHED,   /* found in the cache */
    XCOST_MEASURED, /* measured now (and cached) */
    XCOST_ROOFLINE, /* analytic estimate */
    XCOST_PLAN,     /* timed inside a whole plan (cost_plan.c), cached */
    XCOST_CONTEXT,  /* timed inside a plan of its neighbourhood (cost_ctx.c), cached */
} xcost_src;

/* group_of[n] = head node of n's group (n itself for a head), -1 for dead
 * nodes.  Returns TS_ERR_NOMEM or TS_OK. */
ts_status xcost_groups(const ts_graph *g, int *group_of);
ts_status xcost_io_new(const ts_graph *g, ts_tensor **in, ts_tensor **out, ts_error *err);

/* Members of the group headed by `head`, in chain order; returns count. */
int xcost_members(const ts_graph *g, const int *group_of, int head, int *members);

/* Canonical key of a group (caller frees): op names, attribute hashes,
 * input/output dtypes and shapes, which inputs are constants, which outputs
 * are graph outputs (written plain). */
char *xcost_key(const ts_graph *g, const int *members, int nm);

/* Cost of the group headed by head, in ms: its in-plan time when one is
 * cached, else its in-context time (cached, or measured now when
 * `measure`), else its cached isolated measurement (or one made now when
 * the context cannot be timed), else the roofline. */
double xcost_group(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure,
                   xcost_src *src);
/* Its isolated measurement (cached, or measured now when `measure`), else
 * the roofline: never an in-plan or in-context time (`tsopt profile`'s
 * isolated column). */
double xcost_group_isolated(ts_costdb *db, const ts_graph *g, const int *group_of, int head, bool measure,
                            xcost_src *src);
/* True for a view head (Reshape, Flatten, ...): an alias, cost 0. */
bool xcost_is_free(const ts_node *hd);
/* The group's cache key as xcost_group uses it (with its layout producer's
 * key in front, "P => G", and its merge partners after it, " ~dupN" /
 * " ~stackN", cost.c); caller frees; NULL: out of memory. */
char *xcost_group_key(const ts_graph *g, const int *group_of, int head);

/* In-plan times are cached under XCOST_PLAN_PREFIX + group key, in-context
 * times (cost_ctx.c) under XCOST_CTX_PREFIX + group key. */
#define XCOST_PLAN_PREFIX "@plan "
#define XCOST_CTX_PREFIX "@ctx "
/* Any key: another engine's times (opt/ort_target.c keys them "@ort2 ..."). */
bool xcost_db_put(ts_costdb *db, const char *key, double ms);
bool xcost_db_get(const ts_costdb *db, const char *key, double *ms);
/* The group members[0..nm) as a graph of its own: constants stay constants,
 * other external inputs become graph inputs, the last member's outputs are
 * the graph's (caller frees; NULL with err set). */
ts_graph *xcost_group_graph(const ts_graph *g, const int *members, int nm, ts_error *err);
bool xcost_put_plan(ts_costdb *db, const char *key, double ms, int count);
bool xcost_put_ctx(ts_costdb *db, const char *key, double ms, int count);
/* True (and *ms) when the group has a cached in-plan (has_plan) or
 * in-context (has_ctx) time; either pointer may be NULL. */
void xcost_cached_times(ts_costdb *db, const ts_graph *g, const int *group_of, int head, double *plan_ms,
                        bool *has_plan, double *ctx_ms, bool *has_ctx);

/* Group head a step named after `node` is charged to (-1: none): node's
 * group, or for a view (the copy of a graph output that is a view) the
 * group producing the viewed value. */
int xcost_owner_of(const ts_graph *g, const int *group_of, int node);
/* The groups a step of plan p (built from g) computes results of, when it
 * computes those of more than one (stacked MatMuls): their heads in
 * owners[0..max-1], returns the count, or 0 for a step that belongs to
 * one group (xcost_owner_of of the node it is named after).  Such a step's
 * time is split evenly among them: charged whole to the first, a group's
 * time would depend on which of its partners is lowered first, which
 * changes from one rewrite to the next.  node_map maps p's graph nodes to
 * g's (NULL: the same graph). */
int xcost_step_owners(const ts_graph *g, const int *group_of, const ts_plan *p, const ts_graph *pg,
                      const int *node_map, int step, int *owners, int max);

typedef struct xcost_plan_times {
    int steps;         /* steps of the plan */
    int groups;        /* non-view groups given an in-plan time */
    double steps_ms;   /* median over runs of the sum of all steps */
    double medians_ms; /* sum over the steps of each one's median (the prediction) */
    double run_ms;     /* median wall time of the timed runs (whole ts_plan_run) */
    double plain_ms;   /* median of as many untimed runs, paired with them */
    double unowned_ms; /* steps attributed to no group (none found) */
    int runs;          /* timed runs the medians read */
    int dropped;       /* timed runs left out: their threads waited for a CPU, or slept (adaptive policy) */
} xcost_plan_times;

/* How a timed run went: its threads spun and got their cores, began
 * sleeping (the adaptive wait policy judged the machine busy: another
 * mode's runtime), or waited for a CPU more than TS_WAIT_DELAY_MAX of the
 * run (another process took their cores). */
enum { XCOST_RUN_GOOD, XCOST_RUN_SLEPT, XCOST_RUN_DISTURBED };
typedef struct xcost_run_probe {
    uint64_t d0;
    int threads;
    bool known, slept;
} xcost_run_probe;
void xcost_run_begin(xcost_run_probe *p);
int xcost_run_end(const xcost_run_probe *p, double wall_ms);
/* Keeps the runs the medians read: the good ones when at least 5 (or all
 * n when fewer), else good and sleeping ones, else all; compacts the rows
 * of ns doubles in t (and a[], b[] when given) and returns the count. */
int xcost_keep_runs(const unsigned char *kind, int n, double *t, int ns, double *a, double *b);

/* Builds g's plan, runs it warmup + iters times with the step timer (and
 * iters times without, paired in random order: the end-to-end time under
 * the same load), and caches each group's in-plan cost: the sum of its
 * steps' medians over the runs, unscaled (a planner-inserted reorder
 * counts for the group it is named after, one converting a graph input for
 * the step that follows it, a step computing several groups' results is
 * split evenly among them), averaged over the groups sharing a key.  A
 * group that got no step of its own (the runtime fused it into another)
 * costs 0 in the plan. */
ts_status xcost_time_plan(ts_costdb *db, const ts_graph *g, int warmup, int iters, xcost_plan_times *r,
                          ts_error *err);
/* The same, also writing each non-view group head n's own in-plan time
 * (before the mean over its key) to group_ms[n] (g->nnodes entries). */
ts_status xcost_time_plan_groups(ts_costdb *db, const ts_graph *g, int warmup, int iters, xcost_plan_times *r,
                                 double *group_ms, ts_error *err);
/* The same without the untimed runs, stopping after min_iters runs once
 * budget_ms is spent (ts_cost_prime). */
ts_status xcost_time_plan_budget(ts_costdb *db, const ts_graph *g, int warmup, int iters, int min_iters,
                                 double budget_ms, xcost_plan_times *r, ts_error *err);

typedef struct xcost_ctx_stats {
    int nodes;          /* nodes of the model in the cut-out neighbourhood */
    int steps;          /* steps of its plan */
    int runs;           /* timed runs */
    int groups;         /* distinct keys cached */
    double evict_bytes; /* bytes read before each run */
    double sum_ms;      /* sum of the groups' times */
    double wall_ms;     /* time the measurement took */
} xcost_ctx_stats;

/* Times the groups heads[0..nheads-1] of g (non-view heads) in context:
 * cut out with their producers and consumers, run as one plan with the
 * rest of the model's bytes read before each run, each group charged the
 * medians of its own steps; caches "@ctx KEY" (mean over groups sharing a
 * key).  head_ms (nheads entries) and r may be NULL: each group's own
 * time, and what the measurement took.  See cost_ctx.c. */
ts_status xcost_ctx_measure(ts_costdb *db, const ts_graph *g, const int *group_of, const int *heads, int nheads,
                            double *head_ms, xcost_ctx_stats *r, ts_error *err);
/* Groups timed in context in one plan at most (a cluster of groups joined by
 * values is timed in pieces of this many: measure_heads, cost.c). */
#define XCOST_CTX_MAX_GROUPS 4
/* ts_cost_graph(db, g, true) without its safety net (priming a graph none
 * of whose groups the cache knows): every missing group is timed in
 * context, as a rewrite's are (`tsopt profile --predict --with`). */
double xcost_graph_in_context(ts_costdb *db, const ts_graph *g);
/* Bytes to read before a context run for `rest` bytes of model outside the
 * neighbourhood: rest, capped (beyond a few times the caches it changes
 * nothing but the measurement's time). */
size_t xcost_evict_bytes(double rest);
/* Reads `bytes` of a buffer kept in db with all threads. */
void xcost_evict(ts_costdb *db, size_t bytes);

/* FLOPs and bytes touched (external inputs + outputs) of a group. */
void xcost_group_work(const ts_graph *g, const int *members, int nm, double *flops, double *bytes);

/* Machine peak (GFLOP/s: the best of a 1024^3 and a 2048^3 matmul and a
 * 256->256-channel 3x3 convolution on 56x56 in the runtime; GB/s: the
 * better of STREAM's copy and triad on all cores, roofline.c), measured
 * once and cached in db. */
ts_status xcost_peak(ts_costdb *db, double *gflops, double *gbps, ts_error *err);
/* Measures the peak again (parts: GFLOP/s of the three problems, then GB/s
 * of copy and triad; may be NULL); the cached peak becomes the larger of
 * the old and the new. */
#define XCOST_PEAK_PARTS 5
ts_status xcost_peak_measure(ts_costdb *db, double parts[XCOST_PEAK_PARTS], double *gflops, double *gbps,
                             ts_error *err);

/* The peak and the bandwidth of every memory level (xroof_measure_cache_bw,
 * cached in db as the peak: the larger of the old and a new measurement,
 * measured when missing or remeasure), the cache sizes, the threads. */
ts_status xcost_machine(ts_costdb *db, bool remeasure, xroof_machine *m, ts_error *err);

/* "Intel(R) Xeon(R) ... x16": /proc/cpuinfo model name and core count. */
void xcost_cpu_id(char *buf, size_t n);
const char *xcost_db_path(const ts_costdb *db);
int xcost_db_measured(const ts_costdb *db); /* measurements made since open */
/* The measuring deadline, a ts_clock_s() time (0: none; returns the one it
 * replaces).  Past it, a group missing from the cache is not timed (one
 * candidate's new groups took 65 s under load, issue 27) but costed on the
 * roofline, and counted: xcost_db_late says how many since open, so a
 * caller can tell a cost that is partly an estimate and discard it. */
double xcost_db_set_deadline(ts_costdb *db, double end_s);
int xcost_db_late(const ts_costdb *db);
/* true once db's deadline (if any) has passed */
bool xcost_db_past_deadline(const ts_costdb *db);
int xcost_db_size(const ts_costdb *db);

/* Median ms of running g with the fast runtime on random inputs: warm-up,
 * then up to `iters` runs, stopping early (after at least 3) past budget_ms. */
ts_status xcost_time_graph(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, ts_error *err);
/* Same, also giving the fastest run (min_ms may be NULL). */
ts_status xcost_time_graph_min(const ts_graph *g, int warmup, int iters, double budget_ms, double *ms, double *min_ms,
                               ts_error *err);

#endif
