/* TASO's cost-based backtracking search (paper section 5, Algorithm 2) over
 * graph substitutions, plus the hand-written rewrites the runtime profits
 * from, and the markdown report of a run (report.c). */
#ifndef TS_OPT_SEARCH_H
#define TS_OPT_SEARCH_H

#include <stdio.h>
#include "rules/rule.h"

typedef struct ts_search_opts {
    const ts_rule *rules;
    int nrules;
    ts_costdb *db;     /* measured cost model */
    double alpha;      /* keep candidates with cost < alpha * best (1.05; 1 = greedy) */
    int budget;        /* graphs taken from the queue at most (0: no limit) */
    double time_limit; /* seconds (0: none) */
    int max_queue;     /* candidates kept (0: 4096); the most expensive go first */
    bool progress;     /* a progress line on stderr (the caller checks isatty) */
} ts_search_opts;

/* How often each substitution was applied on the path to the best graph. */
typedef struct ts_search_applied {
    const char *name; /* rule name, or the hand-written rewrite's */
    int count;
} ts_search_applied;

typedef struct ts_search_result {
    ts_graph *best; /* owned: free with ts_search_result_free */
    double cost_before, cost_after; /* ms, cost model */
    int explored;  /* graphs taken from the queue */
    int generated; /* distinct graphs made by substitutions */
    int matches;   /* rule matches tried */
    double seconds;
    double greedy_seconds; /* of which the greedy phase of whole-graph moves */
    int napplied;
    ts_search_applied *applied;
    int nsteps; /* substitutions on the path (hand-written ones included) */
} ts_search_result;

/* Runs the greedy phase of whole-graph moves (conv+batchnorm fold, CSE,
 * merging MatMul sums and sibling MatMuls/Convs; each kept only when the
 * cost model says it is cheaper) and then Algorithm 2 from its result, with
 * per-input sibling merges as extra candidates.  g is not modified. */
ts_status ts_search_run(const ts_graph *g, const ts_search_opts *o, ts_search_result *res, ts_error *err);
void ts_search_result_free(ts_search_result *res);

/* Measured facts about a run for the report. */
typedef struct ts_opt_report {
    const char *model, *output;
    const ts_search_opts *opts;
    const ts_search_result *res;
    int rules_loaded, rules_reversed, rules_usable; /* usable: of loaded + reversed */
    double latency_before, latency_after; /* ms, median of plan runs */
    double fastest_before, fastest_after; /* ms, fastest run (what decides; 0: not timed alternately) */
    int nodes_before, nodes_after;
    double max_err; /* largest scaled difference in the check */
    bool kept_original; /* the optimized graph did not measure faster by --min-gain: the original was written */
} ts_opt_report;

/* The default rule set (tests/rules/core.rules, core_rules.c). */
extern const char ts_core_rules[];

ts_status ts_opt_report_write(const char *path, const ts_opt_report *r, ts_error *err);

#endif
