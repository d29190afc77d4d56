/* The search driver of the optimize pipeline: graph passes first, then
 * TASO's cost-based backtracking search (paper section 5, Algorithm 2)
 * over the candidates that the selected sources propose (source.h). */
#ifndef TS_OPT_DRIVER_H
#define TS_OPT_DRIVER_H

#include "opt/source.h"

/* Runners-up kept beside the best graph (ts_drive_result.alts): the
 * search's, and the whole-graph passes' alternatives (driver.c,
 * pass_runner_up: a target's region sums misjudge them). */
#define TS_DRIVE_ALTS 3
#define TS_DRIVE_PASS_ALTS 3

/* Pseudo-source index of the graph passes in a history. */
#define TS_DRIVE_PASSES (-1)

typedef struct ts_drive_result {
    ts_graph *best;                 /* owned: free with ts_drive_result_free */
    double cost_before, cost_after; /* ms, cost model */
    int explored;                   /* graphs taken from the frontier */
    int generated;                  /* distinct graphs proposed */
    int duplicates;                 /* proposals already seen (by structural hash) */
    double seconds;                 /* passes + search */
    double passes_seconds;          /* of which the graph passes */
    double peak_frontier_mb;        /* largest size of the frontier's graphs */
    char stop[32];                  /* "time limit", "budget", "exhausted", "interrupted", "memory" */
    /* on the path to the best graph: per source (index into the selected
     * sources; passes last) and per rewrite name */
    int per_source[TS_OPT_MAX_SOURCES + 1];
    int nnames;
    ts_optimize_count *names;
    double *gains; /* per names[i]: the cost (target's model, ms) its steps took off the graphs they rewrote */
    int nsteps; /* rewrites on the path, passes included */
    /* The next-best distinct graphs the cost model ranked below best and
     * below the original (cheapest first; owned): a target whose region
     * sums miss fusions across regions (ort) times them whole too and may
     * choose one with ts_drive_result_choose.  The first npass_alts are
     * the passes' alternatives (cheapest first, whatever their cost: a
     * target's region sums misjudge them), then the search's runners-up. */
    int nalts, npass_alts;
    ts_graph *alts[TS_DRIVE_ALTS + TS_DRIVE_PASS_ALTS];
    double alt_costs[TS_DRIVE_ALTS + TS_DRIVE_PASS_ALTS];
    void *alt_hist[TS_DRIVE_ALTS + TS_DRIVE_PASS_ALTS]; /* their rewrite paths (driver-private) */
    void *best_hist;
    int nsrc;
} ts_drive_result;

/* Searches from g (not modified).  opts gives alpha, budget, time limit,
 * memory cap, progress and the stop flag; sources[0..nsrc) are open. */
ts_status ts_drive(const ts_graph *g, const ts_optimize_opts *opts, ts_costdb *db, const ts_source *const *sources,
                   void *const *states, int nsrc, ts_const_cache *cc, ts_drive_result *res, ts_error *err);
/* The same with the target's cost of a graph in ms (INFINITY: a graph the
 * target cannot take); cost_fn NULL: tsopt's cost model (db). */
typedef double (*ts_drive_cost_fn)(void *ctx, const ts_graph *g);
ts_status ts_drive_costed(const ts_graph *g, const ts_optimize_opts *opts, ts_costdb *db, ts_drive_cost_fn cost_fn,
                          void *cost_ctx, const ts_source *const *sources, void *const *states, int nsrc,
                          ts_const_cache *cc, ts_drive_result *res, ts_error *err);
/* tsopt's cost of g (ms) as the driver charges it: g as the runtime runs
 * it (graph optimization level all), by the roofline (opts->roofline) or
 * the measured cost model (db). */
double ts_drive_graph_cost(const ts_optimize_opts *opts, ts_costdb *db, const ts_graph *g);
void ts_drive_result_free(ts_drive_result *res);
/* Makes alts[i] the best graph (its cost cost_after, its rewrites in
 * names, gains, per_source and nsteps); the old best leaves the result. */
/* The rewrite path of alts[i] (i < 0: best), last step first, for progress lines. */
void ts_drive_result_describe(const ts_drive_result *res, int i, char *buf, size_t n);
void ts_drive_result_choose(ts_drive_result *res, int i);

/* Structural bytes of a graph copy (what a frontier entry holds beyond
 * the weights it shares). */
size_t ts_graph_struct_bytes(const ts_graph *g);

#endif
