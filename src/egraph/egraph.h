/* An e-graph over the rule language's operator atoms (src/rules): the data
 * structure of equality saturation (egg's design: union-find over e-class
 * ids, a hashcons from canonical e-nodes to classes, and an explicit rebuild
 * that restores congruence after a batch of unions), with an e-class
 * analysis that carries each class's shape and dtype.  POLYJUICE
 * (docs/fuzz.md) saturates a seed graph with proved rules and extracts the
 * most simplified and the most complex equivalent graphs from it.
 *
 * This header is the contract between src/egraph/ and its users
 * (src/fuzz/); keep it small. */
#ifndef TS_EGRAPH_H
#define TS_EGRAPH_H

#include "rules/rule.h"
#include "tsopt.h"

typedef struct ts_egraph ts_egraph;
typedef int32_t ts_eclass_id; /* -1: none */

ts_egraph *ts_egraph_new(void);
void ts_egraph_free(ts_egraph *eg);

/* A leaf: a graph input (is_weight false) or a weight, by name; the same
 * name always gives the same class. */
ts_eclass_id ts_egraph_add_leaf(ts_egraph *eg, const char *name, const ts_shape *shape, ts_dtype dt,
                                bool is_weight, ts_error *err);
/* An operator e-node over existing classes; returns its class (an existing
 * one when an equal e-node is already there).  -1 with err set when the
 * arguments' shapes do not fit the operator. */
ts_eclass_id ts_egraph_add(ts_egraph *eg, ts_rop op, const ts_rparams *p, int nargs,
                           const ts_eclass_id *args, ts_error *err);
/* split0/split1 cut where TASO's split tree says: ts_egraph_add takes the
 * cut from a concat along the axis in the argument's class (-1 when there
 * is none); this one takes it explicitly (at: the first part's size). */
ts_eclass_id ts_egraph_add_split(ts_egraph *eg, ts_rop op, int axis, int64_t at, ts_eclass_id arg, ts_error *err);
ts_eclass_id ts_egraph_find(const ts_egraph *eg, ts_eclass_id id);
/* Merges two classes (true when they were distinct; false too when their
 * shapes or dtypes differ: such a union would be unsound and is refused);
 * congruence is restored only by ts_egraph_rebuild, which saturation and
 * extraction need. */
bool ts_egraph_union(ts_egraph *eg, ts_eclass_id a, ts_eclass_id b);
void ts_egraph_rebuild(ts_egraph *eg);
const ts_shape *ts_egraph_shape(const ts_egraph *eg, ts_eclass_id id);
ts_dtype ts_egraph_dtype(const ts_egraph *eg, ts_eclass_id id);
size_t ts_egraph_nodes(const ts_egraph *eg);   /* e-nodes */
size_t ts_egraph_classes(const ts_egraph *eg); /* canonical e-classes */

/* A graph whose every node is an operator some atom stands for (Add, Mul,
 * MatMul, Conv, Relu, Transpose, Concat, Split, AveragePool, MaxPool, ...):
 * its inputs and initializers become leaves, its outputs the roots
 * (*roots: nroots ids, caller frees).  TS_ERR_UNSUPPORTED names the first
 * node no atom covers. */
ts_status ts_egraph_from_graph(const ts_graph *g, ts_egraph **out, ts_eclass_id **roots, int *nroots,
                               ts_error *err);

typedef struct ts_saturate_limits {
    size_t max_nodes; /* stop when the e-graph holds more e-nodes (0: 10000) */
    int max_iters;    /* rounds of match-all-then-apply (0: 10) */
    double time_s;    /* wall-clock limit (0: 1 s) */
    /* no e-node of a tensor with more elements is added (the grow rules
     * double a tensor per application); 0: 16 x the largest class's
     * tensor when saturation starts */
    int64_t max_elems;
} ts_saturate_limits;

typedef struct ts_saturate_stats {
    int iters;
    size_t nodes, classes;
    long applied;     /* rule applications that changed the e-graph */
    const char *stop; /* "saturated", "node limit", "iteration limit", "time limit" */
} ts_saturate_stats;

/* Equality saturation with rules of the shared rule language (multi-output
 * rules included), applied in both directions only where the caller passes
 * the reverses (ts_rules_add_reverses).  Rules with constant atoms (Iconv,
 * ...) or a bare variable as a source output are skipped; constraints are
 * checked; a rhs that does not fit the matched shapes is not added.
 * Deterministic unless the time limit stops it.  Fails only out of memory;
 * the e-graph is rebuilt (clean) on return. */
ts_status ts_egraph_saturate(ts_egraph *eg, const ts_rule *rules, int nrules, const ts_saturate_limits *lim,
                             ts_saturate_stats *st, ts_error *err);

typedef enum ts_extract_kind {
    TS_EXTRACT_SIMPLEST, /* fewest operator nodes */
    TS_EXTRACT_COMPLEX,  /* most operator nodes, cycles broken (stays acyclic) */
} ts_extract_kind;

/* A graph computing the roots from the leaves (same input and weight names
 * and values as the graph given to ts_egraph_from_graph, outputs named as
 * its outputs, in order); seed breaks ties reproducibly.  The complex
 * extraction may expose intermediate tensors as extra outputs after the
 * roots' (it exposes one or two, chosen by the seed).  SIMPLEST never has more nodes than the
 * graph ts_egraph_from_graph read.  Needs a rebuilt e-graph; NULL with err
 * set on failure.  docs/egraph.md explains both. */
ts_graph *ts_egraph_extract(const ts_egraph *eg, const ts_graph *original, const ts_eclass_id *roots, int nroots,
                            ts_extract_kind kind, uint64_t seed, ts_error *err);

/* POLYJUICE's rules (rules/polyjuice.rules, every one proved by tsopt
 * verify), embedded at build time. */
extern const char ts_polyjuice_rules[];

#endif
